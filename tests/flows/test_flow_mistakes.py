"""Mistakes in a flow file, as a user makes them: each is ONE line on stderr naming the file, the line in it
where the mistake is, what is wrong and the nearest valid name, exit 2, never a traceback; through the real
command line (``logetl explain`` / ``logetl run``)."""
from __future__ import annotations

import copy
import os
import pickle
import textwrap

import pytest
from click.testing import CliRunner

import logetl.api as L
from conftest import CORPUS, logetl
from logetl.cli import main
from logetl.expressions import Col, Expr, ExpressionError, UnknownName

FIELDS = "ip, time, request, response, size, referer, user_agent"   # combined, the default


def _file(tmp_path, body: str, name: str = "my_flow.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


def _explain(path: str) -> str:
    """The one line ``logetl explain FILE`` writes to stderr, after checking it exits 2 with nothing else."""
    result = CliRunner().invoke(main, ["explain", path])
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    return result.stderr


HEAD = "import logetl.api as L\n\n\ndef flow(fmt):\n    logs = L.read(fmt)\n"     # the flow's body starts at line 6


@pytest.mark.parametrize("body, line, message", [
    # a function the API does not have, with the nearest one it has
    ("    return L.Flow('x', [logs.derive(n=L.cout()).write('o')])\n", 6,
     "logetl.api has no function 'cout' (did you mean 'count'?)"),
    ("    n = L.xyzzy('size')\n", 6, "logetl.api has no function 'xyzzy'"),
    ("    n = L.COUNT()\n", 6, "logetl.api has no function 'COUNT' (did you mean 'count'?)"),
    # a method an expression does not have
    ("    ok = L.col('request').startswith('GET')\n", 6,
     "the expression request has no method 'startswith' (did you mean 'starts_with'?)"),
    ("    ok = (L.col('size').to_int() > 3).is_nul()\n", 6,
     "the expression to_int(size) > 3 has no method 'is_nul' (did you mean 'is_null'?)"),
    # a method a pipe does not have
    ("    out = (logs.select('ip')\n              .fliter(L.col('ip') == 'x'))\n", 7,
     "select (unnamed) has no method 'fliter' (did you mean 'filter'?)"),
    # a misspelt field: the line of the expression, not of the call that checks it
    ("    bad = logs.filter(\n        (L.col('response') >= '400')\n        & L.col('respons').starts_with('5'))\n",
     8, f"filter (unnamed): no field 'respons' (did you mean 'response'? fields: {FIELDS})"),
    ("    out = logs.select('ip', 'respnse')\n", 6,
     f"select (unnamed): no field 'respnse' in {FIELDS} (did you mean 'response'?)"),
    ("    out = logs.group_by('IP').agg(n=L.count())\n", 6,
     f"groupby (unnamed): no field 'IP' in {FIELDS} (did you mean 'ip'?)"),
    # a wrong type
    ("    out = (logs\n           .derive(n=L.col('size') + 'x'))\n", 7, "derive (unnamed): size + 'x': + takes integers and floats; size is string, 'x' is string"),
    ("    out = logs.filter(L.col('response') >= 400)\n", 6,
     "filter (unnamed): cannot compare response (string) with 400 (integer): use to_int() or a string literal"),
    # a Python operator expressions do not have: the expression and the operand named
    ("    n = L.col('size').to_int() ** 2\n", 6,
     "to_int(size) ** 2: expressions have no ** operator (multiply instead: to_int(size) * to_int(size))"),
    ("    n = 2 ** L.col('a')\n", 6, "2 ** a: expressions have no ** operator"),
    ("    n = L.col('a') @ L.col('b')\n", 6, "a @ b: expressions have no @ operator"),
    ("    n = L.col('a') ^ True\n", 6, "a ^ True: expressions have no ^ operator"),
    ("    n = L.col('a') << 1\n", 6, "a << 1: expressions have no << operator"),
    ("    n = -L.col('size').to_int()\n", 6,
     "-to_int(size): expressions have no unary - (subtract from 0 instead: 0 - to_int(size))"),
    ("    n = abs(L.col('a'))\n", 6, "abs(a): expressions have no abs()"),
    ("    s = L.col('request')[0:3]\n", 6,
     "request[0:3]: expressions cannot be indexed (substring(start, length) takes characters, from 1)"),
    ("    s = 'GET' in L.col('request')\n", 6,
     "'GET' in request: expressions have no in operator (contains('GET') or is_in([...]))"),
    ("    n = int(L.col('size'))\n", 6, "size is an expression, not a Python number (to_int() makes an integer of a string)"),
    ("    ok = L.col('a') == 'x' and L.col('b') == 'y'\n", 6,
     "a == 'x' is an expression, not a Python truth value (use & | ~ instead of and/or/not)"),
    ("    n = L.col('size') + b'1'\n", 6, "a literal must be a string, an integer, a float or a boolean, not b'1'"),
    # an exception of the file's own code, on one line
    ("    raise ValueError('no\\nway')\n", 6, "ValueError: no way"),
    ("    return {}['k']\n", 6, "KeyError: 'k'"),
    ("    raise RuntimeError()\n", 6, "RuntimeError"),
    ("    return L.col(size)\n", 6, "NameError: name 'size' is not defined"),
    ("    return L.Flow('x', logs.write('o'), 'y', 'z')\n", 6,
     "TypeError: Flow.__init__() takes from 3 to 4 positional arguments but 5 were given"),
])
def test_a_mistake_in_a_flow_is_one_line_with_the_file_the_line_and_the_nearest_name(tmp_path, body, line, message):
    f = _file(tmp_path, HEAD + body + "    return L.Flow('x', [logs.write('o')])\n")
    assert _explain(f) == f"Error: {f}:{line}: {message}\n"


@pytest.mark.parametrize("body, message", [
    ("from logetl.api import cout\n", "1: logetl.api has no function 'cout' (did you mean 'count'?)"),
    ("import logetl.apii\n", "1: no module named 'logetl.apii' (did you mean 'logetl.api'?)"),
    ("import logetl_helpers_nowhere\n",
     "1: no module named 'logetl_helpers_nowhere' (not installed for this Python, nor beside the flow file)"),
    ("from os import pathh\n", "1: cannot import 'pathh' from 'os' (did you mean 'path'?)"),
    ("import logetl.api as L\nx = L.whn(L.col('a'))\n", "2: logetl.api has no function 'whn'"
     + (" (did you mean 'when'?)" if "when" in dir(L) else "")),
    ("import logetl.api as L\n\ndef flow(fmt)\n    pass\n", "3: syntax error: expected ':'"),
    ("def flow(fmt):\n  return 1\n    x = 2\n", "3: syntax error: unexpected indent"),
    ("def flow(fmt):\n    return None\n", '1: flow() returned None, not a logetl.api.Flow (return L.Flow("NAME", '
     '[pipe.write("TAP"), ...]))'),
    ("import logetl.api as L\n\n\ndef flow(fmt):\n    return L.read(fmt).write('o')\n",
     '4: flow() returned a sink (tap \'o\'), not a logetl.api.Flow (return L.Flow("NAME", [pipe.write("TAP"), ...]))'),
    ("import logetl.api as L\n\n\ndef flow(fmt):\n    return [L.read(fmt).write('o')]\n",
     '4: flow() returned a list, not a logetl.api.Flow (return L.Flow("NAME", [pipe.write("TAP"), ...]))'),
    ("import logetl.api as L\n\n\ndef flow(fmt):\n    return L.read(fmt)\n",
     '4: flow() returned a pipe (parse), not a logetl.api.Flow (return L.Flow("NAME", [pipe.write("TAP"), ...]))'),
    ("def flow(fmt, day):\n    pass\n", "1: flow() takes one parameter, the log format, not 2 (fmt, day)"),
])
def test_a_file_that_does_not_load_or_define_a_flow_is_one_line(tmp_path, body, message):
    f = _file(tmp_path, body)
    assert _explain(f) == f"Error: {f}:{message}\n"


def test_a_syntax_error_in_a_module_beside_the_flow_names_that_module(tmp_path):
    helper = _file(tmp_path, "def ok(:\n    pass\n", "my_helpers.py")
    f = _file(tmp_path, "import my_helpers\n")
    assert _explain(f) == f"Error: {helper}:1: syntax error: invalid syntax\n"


def test_the_real_command_exits_2_with_one_line_and_writes_nothing(tmp_path):
    """Through a process of its own, as a person runs it: the exit status, stderr alone, no output made."""
    f = _file(tmp_path, HEAD + "    ok = L.col('request').startswith('GET')\n")
    out = tmp_path / "out"
    p = logetl("run", f, "--input", os.path.join(CORPUS, "corpus.log"), "--output", f"o={out}")
    assert (p.returncode, p.stdout, p.stderr.decode()) == (
        2, b"", f"Error: {f}:6: the expression request has no method 'startswith' (did you mean 'starts_with'?)\n")
    assert not out.exists()


# --- the API itself, outside flow files ---------------------------------------------------------------------

def test_unknown_names_are_errors_of_logetl_and_attribute_errors_still():
    with pytest.raises(UnknownName, match=r"^logetl.api has no function 'cout' \(did you mean 'count'\?\)$"):
        L.cout()
    assert isinstance(UnknownName("x"), ExpressionError) and isinstance(UnknownName("x"), AttributeError)
    assert not hasattr(L, "cout") and getattr(L, "cout", 7) == 7
    with pytest.raises(AttributeError, match="^module 'logetl.api' has no attribute '__wrapped__'$"):
        _ = L.__wrapped__         # private and special names: Python's own error (pickle, doctest probe them)
    col = L.col("request")
    assert not hasattr(col, "startswith") and getattr(col, "startswith", None) is None
    with pytest.raises(AttributeError) as caught:
        _ = col.__deepcopy_me__
    assert not isinstance(caught.value, ExpressionError)
    # copies and pickles of expressions are whole (they probe special names)
    for made in (copy.deepcopy(col == "x"), pickle.loads(pickle.dumps(col == "x"))):
        assert made.describe() == "request == 'x'"


def test_what_expressions_define_wins_over_the_mistake_messages(monkeypatch):
    """An operator or a method that Expr (or a subclass) defines, now or later, is the one Python calls: the
    messages above are only what is left undefined."""
    monkeypatch.setattr(Expr, "__truediv__", lambda self, other: ("divided", self.describe(), other), raising=False)
    monkeypatch.setattr(Expr, "startswith", lambda self, text: ("starts", text), raising=False)
    assert L.col("a") / 2 == ("divided", "a", 2)
    assert L.col("a").startswith("x") == ("starts", "x")

    class Shout(Col):
        """An expression class of its own: its type check's error still names where it was written."""

        def __neg__(self):
            return "negated"

        def check(self, types):
            raise ExpressionError(f"{self.name} cannot shout")

    assert -Shout("a") == "negated"
    shout = Shout("a"); line = shout._origin[1]                                     # noqa: E702 - one line
    with pytest.raises(L.AssemblyError, match="^filter 'f': a cannot shout$") as caught:
        L.read().filter(shout, name="f")
    assert caught.value.origin == (__file__, line)
