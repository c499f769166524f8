"""The parts of a request line or URL (``Method``, ``Path``, ``QueryString``, ``QueryParam``,
``UrlHost``) and percent-decoding (``UrlDecode``)."""
from __future__ import annotations

from logetl.expressions.base import Expr, ExpressionError, STRING, _literal, _need, _wrap
from logetl.expressions.strings import _StringMap, _flag, portable_regex, regex_escape


# A request line is ``METHOD TARGET PROTOCOL`` or ``METHOD TARGET``: two or three non-empty parts, one
# space between each (HTTP/0.9 writes no protocol, nor does a W3C log's ``request``, made of its method and
# URI columns); a line with more or fewer parts, ``-``, or the empty string is no request line. The URL functions take a
# request line (its target) or a target or URL written alone: a value with a space is read as a request
# line. A target is origin-form (``/path?query``), absolute-form (``scheme://authority/path?query``),
# or neither (``*``, ``host:443``, ``-``): the URL parts of a value that is neither are null.
SCHEME = r"[A-Za-z][A-Za-z0-9+.\-]*://"


REQUEST_LINE = portable_regex(r"^([^ ]+) ([^ ]+)(?: ([^ ]+))?$")


#: the path of an origin-form target, or of an absolute-form one whose path is not empty (group 1)
URL_PATH = portable_regex("^(?:" + SCHEME + r"[^/?#]*)?(/[^?#]*)")


#: an absolute-form target whose path is empty (its path is then ``/``)
URL_EMPTY_PATH = portable_regex("^" + SCHEME + r"[^/?#]*(?:[?#]|$)")


#: the query string (group 1): after the first ``?``, up to a ``#``
URL_QUERY = portable_regex("^(?:" + SCHEME + r"[^/?#]*(?:/[^?#]*)?|/[^?#]*)\?([^#]*)")


#: the host of an absolute-form target: after the authority's last ``@``, an IP literal in brackets
#: (group 1) or a name (group 2), before an optional ``:port``
URL_HOST = portable_regex("^" + SCHEME + r"(?:[^/?#]*@)?(?:\[([^\]/?#@]+)\]|([^:/?#@\[\]]+))(?:[:/?#]|$)")


#: percent-decoding: the two hex digits after a ``%`` that are decoded (a byte that is not a control
#: character: 20-7E, 80-FF), and the UTF-8 byte sequences (RFC 3629) of a decoded value, on its bytes in
#: lower-case hex (every alternative consumes whole bytes from the start, so the pairs stay aligned)
DECODED_ESCAPE = portable_regex(r"^(?:[2-6][0-9A-Fa-f]|7[0-9A-Ea-e]|[89A-Fa-f][0-9A-Fa-f])")


UTF8_HEX = portable_regex(
    r"^(?:[0-7][0-9a-f]|c[2-9a-f][89ab][0-9a-f]|d[0-9a-f][89ab][0-9a-f]|e0[ab][0-9a-f][89ab][0-9a-f]"
    r"|e[1-9a-cef][89ab][0-9a-f][89ab][0-9a-f]|ed[89][0-9a-f][89ab][0-9a-f]"
    r"|f0[9ab][0-9a-f](?:[89ab][0-9a-f]){2}|f[1-3][89ab][0-9a-f](?:[89ab][0-9a-f]){2}"
    r"|f48[0-9a-f](?:[89ab][0-9a-f]){2})*$",
    sized=False)    # logetl's own pattern, small: not compiled at import to measure it (that would load Polars)


class Method(_StringMap):
    """The method of a request line (``GET`` in ``GET /a HTTP/1.1``), as written; null when the value is
    not a request line (two or three non-empty parts, one space between each)."""

    word = "method"

    def __init__(self, arg: Expr):
        super().__init__(_wrap(arg))


class Path(_StringMap):
    """The path of a request line's target, or of a target or URL written alone (a value with a space is
    read as a request line): from the first ``/`` of an origin-form target (``/a/b?q`` -> ``/a/b``), or
    after the authority of an absolute-form one (``http://h/a?q`` -> ``/a``; ``/`` when it is empty:
    ``http://h?q`` -> ``/``), up to the first ``?`` or ``#``, as written (``%3F`` stays encoded: see
    ``url_decode``). Null when the value is null, a malformed request line, or a target of another form
    (``*``, ``host:443``, ``-``, the empty string)."""

    word = "path"

    def __init__(self, arg: Expr):
        super().__init__(_wrap(arg))


class QueryString(_StringMap):
    """The query string of a request line's target, or of a target or URL (read as ``path`` reads them):
    the text after the first ``?`` up to a ``#`` or the end, as written; the empty string after a bare
    ``?``; null when there is no ``?`` or the value is not such a target."""

    word = "query_string"

    def __init__(self, arg: Expr):
        super().__init__(_wrap(arg))


class QueryParam(Expr):
    """The value of the first parameter named ``name`` in the query string (``query_string``): the
    parameters are the pieces between ``&``, each ``name=value`` or a bare ``name`` (whose value is the
    empty string); the name is compared with the text before its ``=`` exactly, as written (case and
    percent-escapes count). The value is percent-decoded with ``+`` as a space, as in a form
    (``url_decode``, null when the decoded bytes are not UTF-8), or as written with ``decode=False``.
    Null when there is no query string or no parameter of that name."""

    def __init__(self, arg: Expr, name: str, decode: bool = True):
        self.args = (_wrap(arg),)
        self.name = _literal(name, str, "query_param's name")
        if not name or set(name) & set("&=#"):
            raise ExpressionError(f"query_param's name must be non-empty, without & = or #, not {name!r}")
        self.decode = _flag(decode, "query_param's decode")
        #: group 1: ``=value`` or the empty string of a bare name (it takes part in every match)
        self.compiled = portable_regex("(?:^|&)" + regex_escape(name) + "(=[^&]*|)(?:&|$)")

    def check(self, types):
        _need(self.args[0], types, STRING, "query_param")
        return STRING

    def describe(self):
        tail = "" if self.decode else ", decode=False"
        return f"query_param({self.args[0].describe()}, {self.name!r}{tail})"


class UrlHost(_StringMap):
    """The host of an absolute-form URL or request target (``scheme://authority...``; a value with a space
    is read as a request line): the authority's part after its last ``@``, without a ``:port``, an IP
    literal without its brackets (``http://[::1]:80/`` -> ``::1``), ASCII letters in lower case (other
    characters as written). Null when the value is not absolute-form or the host is empty or malformed
    (``http:///x``, ``http://[::1``)."""

    word = "url_host"

    def __init__(self, arg: Expr):
        super().__init__(_wrap(arg))


class UrlDecode(Expr):
    """Percent-decoding: each ``%`` and two hex digits (either case) is the byte they write, and the bytes
    are read as UTF-8. A ``%`` not followed by two hex digits stays as written, and so does the escape of
    a control character (``%00``-``%1F``, ``%7F``: a decoded value never holds a TAB, CR or LF). With
    ``plus_as_space`` (a form's query string), ``+`` is a space (``%2B`` stays a plus). Null when the
    value is null or its decoded bytes are not UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing
    past U+10FFFF); ``coalesce(url_decode(x), x)`` keeps those as written."""

    def __init__(self, arg: Expr, plus_as_space: bool = False):
        self.args = (_wrap(arg),)
        self.plus_as_space = _flag(plus_as_space, "url_decode's plus_as_space")

    def check(self, types):
        _need(self.args[0], types, STRING, "url_decode")
        return STRING

    def describe(self):
        return f"url_decode({self.args[0].describe()}{', plus_as_space' if self.plus_as_space else ''})"
