"""Format files: the ``LogFormat`` lines of an Apache configuration and the ``log_format`` directives of an
nginx one, read as the servers read them (``--format-file FILE`` or ``FILE#NAME``), each compiled by
``formats``."""
from __future__ import annotations

import re

from logetl.formats import FormatError, LogFormat, compile_apache, compile_nginx


def _config_words(text: str, path: str, lineno: int) -> list[str]:
    """Splits a config line into words; quoted words lose their quotes (Apache keeps ``\\"`` inside a
    double-quoted word as ``\\"``, which the LogFormat parser then reads as ``"``)."""
    words, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        if c == "#":
            break
        if c in "\"'":
            j, buf = i + 1, []
            while j < n and text[j] != c:
                if text[j] == "\\" and j + 1 < n:
                    buf.append(text[j:j + 2])
                    j += 2
                    continue
                buf.append(text[j])
                j += 1
            if j >= n:
                raise FormatError(f"{path}:{lineno}: unterminated {c} quote")
            words.append(("q", "".join(buf)))
            i = j + 1
            continue
        j = i
        while j < n and not text[j].isspace() and text[j] not in ";":
            j += 1
        if j == i:  # ';'
            words.append(("p", ";"))
            i += 1
            continue
        words.append(("w", text[i:j]))
        i = j
    return words


_LOGFORMAT_LINE = re.compile(r"\s*logformat(?:\s|$)", re.IGNORECASE)


def read_format_file(spec: str) -> LogFormat:
    """``FILE`` or ``FILE#NAME``: a ``LogFormat "..." [nickname]`` line (Apache; a line ending in a backslash
    continues on the next) or a ``log_format name [escape=...] '...' '...';`` directive (nginx, may span
    lines). A file with several needs ``#NAME``. A name is defined as the server would read the file: an
    Apache nickname defined again takes the last definition (nicknames ignore case, as in Apache's table), an
    nginx ``log_format`` name defined twice is refused (nginx refuses the configuration)."""
    path, _, want = spec.partition("#")
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
    except OSError as exc:
        raise FormatError(f"cannot read format file {path!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise FormatError(f"format file {path!r} is not UTF-8 text") from None
    # (syntax, key) -> (name as written, format, line); a dict keeps the order names were first defined in
    found: dict[tuple[str, str], tuple[str, LogFormat, int]] = {}
    i = 0
    while i < len(lines):
        start, line = i, lines[i]
        if _LOGFORMAT_LINE.match(line):
            # Apache joins a line that ends in a backslash (before an optional CR) with the next one, the
            # backslash and the line break removed (ap_cfg_getline); a long LogFormat is often written so
            while (body := line[:-1] if line.endswith("\r") else line).endswith("\\"):
                if i + 1 == len(lines):     # at the end of the file: the backslash alone goes
                    line = body[:-1]
                    break
                i += 1
                line = body[:-1] + lines[i]
        words = _config_words(line, path, start + 1)
        if words and words[0][0] == "w" and words[0][1].lower() == "logformat":
            args = words[1:]
            if not args or args[0][0] == "p":
                raise FormatError(f"{path}:{start + 1}: LogFormat without a format string")
            nick = args[1][1] if len(args) > 1 else ""
            fmt_text = args[0][1].replace('\\"', '"') if args[0][0] == "q" else args[0][1]
            fmt = _located(lambda t=fmt_text: compile_apache(t), path, start + 1)
            # Apache keeps the LAST LogFormat of a nickname (mod_log_config sets it in a table, which a
            # later line overwrites): so does logetl
            found[("apache", nick.lower())] = (nick, fmt, start + 1)
        elif words and words[0][0] == "w" and words[0][1] == "log_format":
            while not any(w == ("p", ";") for w in words) and i + 1 < len(lines):
                i += 1
                words += _config_words(lines[i], path, i + 1)
            args = [w for w in words[1:] if w != ("p", ";")]
            if not args:
                raise FormatError(f"{path}:{start + 1}: log_format without a name")
            nick, escape, parts = args[0][1], "default", []
            for kind, w in args[1:]:
                if kind == "w" and w.startswith("escape="):
                    escape = w[len("escape="):]
                else:
                    parts.append(w)
            if ("nginx", nick) in found:
                # nginx refuses the whole configuration ("duplicate log_format name"): which of the two
                # was meant cannot be known, so neither is taken
                raise FormatError(f"{path}:{start + 1}: duplicate log_format name {nick!r} (first defined at "
                                  f"line {found[('nginx', nick)][2]}); nginx refuses it too")
            fmt_text = "".join(parts)
            fmt = _located(lambda t=fmt_text, e=escape: compile_nginx(t, "nginx", e), path, start + 1)
            found[("nginx", nick)] = (nick, fmt, start + 1)
        i += 1
    if not found:
        raise FormatError(f"format file {path!r} holds no LogFormat or log_format line")
    names = ", ".join(n or "(unnamed)" for n, _, _ in found.values())
    if want:
        for key in (("nginx", want), ("apache", want.lower())):
            if key in found:
                return found[key][1]
        raise FormatError(f"format file {path!r} has no format named {want!r} (it has: {names})")
    if len(found) > 1:
        raise FormatError(f"format file {path!r} holds {len(found)} formats ({names}): choose one with "
                          f"--format-file '{path}#NAME'")
    return next(iter(found.values()))[1]


def _located(make, path: str, lineno: int) -> LogFormat:
    try:
        return make()
    except FormatError as exc:
        raise FormatError(f"{path}:{lineno}: {exc}") from None
