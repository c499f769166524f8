"""The code stays in pieces a reader can hold: no source file of logetl or of its benchmarks over
``MAX_MODULE_LINES`` lines, no Python function or method over ``MAX_FUNCTION_LINES`` (a longer one is a short
orchestration of named steps, a longer module a package of modules by concern, as ``logetl.assembly`` and
``logetl.expressions`` are)."""
from __future__ import annotations

import ast
import os
import re

import logetl

SRC = os.path.dirname(os.path.abspath(logetl.__file__))
ROOT = os.path.abspath(os.path.join(SRC, "..", ".."))
#: the folders checked: the package and the benchmarks (the tests' own modules are data and cases)
FOLDERS = (SRC, os.path.join(ROOT, "bench"))
#: the source files whose length is checked (Python, the C kernel, the JVM's, the pages' scripts and templates)
SOURCE_EXTENSIONS = (".py", ".c", ".h", ".java", ".js", ".html", ".css")
#: folders that hold no source: bytecode, build and benchmark output
SKIPPED = {"__pycache__", "out", "build"}

MAX_MODULE_LINES = 1000
MAX_FUNCTION_LINES = 100


def _sources():
    """The source files under ``FOLDERS``: (path relative to the repository, text)."""
    for top in FOLDERS:
        for folder, subfolders, names in os.walk(top):
            subfolders[:] = sorted(d for d in subfolders if d not in SKIPPED and not d.endswith(".egg-info"))
            for name in sorted(names):
                if name.endswith(SOURCE_EXTENSIONS):
                    path = os.path.join(folder, name)
                    with open(path, encoding="utf-8") as f:
                        yield os.path.relpath(path, ROOT), f.read()


def _long_functions(text: str) -> list[tuple[str, int, int]]:
    """The functions and methods of a Python module longer than ``MAX_FUNCTION_LINES``, decorators and
    docstring included: (name, first line, lines)."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            lines = node.end_lineno - first + 1
            if lines > MAX_FUNCTION_LINES:
                found.append((node.name, first, lines))
    return found


#: what a C function's length is not counted in: comments, strings and character literals (their braces)
_C_NOISE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
#: the text before a top-level '{' that makes it a function's body: a name, then its parameters
_C_SIGNATURE = re.compile(r"^(?!\s*(?:typedef|struct|enum|union)\b)[^=;#]*?\b(\w+)\s*\([^=;]*\)\s*$", re.S)


def _long_c_functions(text: str) -> list[tuple[str, int, int]]:
    """The functions of a C source longer than ``MAX_FUNCTION_LINES``, from the first line of the signature
    to the closing brace: (name, first line, lines). A brace-counting scan: comments, strings and
    preprocessor lines blanked first; a top-level block is a function when the text before it since the
    last ';' or '}' is a name and a parenthesized list (not a struct, enum or initializer)."""
    text = _C_NOISE.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)
    text = re.sub(r"^#[^\n]*", "", text, flags=re.M)
    found, depth, head, head_line, start, name = [], 0, [], None, None, None
    for no, line in enumerate(text.split("\n"), 1):
        for ch in line:
            if depth == 0 and head_line is None and ch not in "{};" and not ch.isspace():
                head_line = no
            if ch == "{":
                if depth == 0:
                    m = _C_SIGNATURE.match("".join(head))
                    start, name = (head_line, m.group(1)) if m else (None, None)
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    if start is not None and no - start + 1 > MAX_FUNCTION_LINES:
                        found.append((name, start, no - start + 1))
                    start, head, head_line = None, [], None
            elif depth == 0 and ch == ";":
                head, head_line = [], None
            elif depth == 0:
                head.append(ch)
        if depth == 0:
            head.append("\n")
    return found


def test_the_layout_checks_see_every_source_file():
    paths = {path for path, _ in _sources()}
    for expected in ("src/logetl/assembly/base.py", "src/logetl/_scan.c", "bench/flows.py"):
        assert expected in paths
    assert _long_functions("def f():\n" + "    x = 1\n" * 100) == [("f", 1, 101)]
    assert _long_functions("@dec\ndef f():\n" + "    x = 1\n" * 99) == [("f", 1, 101)]
    assert _long_functions("class C:\n    def f(self):\n" + "        x = 1\n" * 99) == []
    body = "    x = 1;\n" * 98
    assert _long_c_functions("static int f(int a,\n          int b) {\n" + body + "}\n") == [("f", 1, 101)]
    assert _long_c_functions("static int f(void) {\n" + body + "}\n") == []
    assert _long_c_functions("/* { */\nstatic const char *s = \"{\";\ntypedef struct {\n" + body * 2 + "} t;\n") == []
    assert _long_c_functions("int f(void) {\n    if (x) { y('}'); }\n" + body + "}\n") == [("f", 1, 101)]


def test_no_module_is_longer_than_1000_lines():
    long = [f"{path}: {text.count(chr(10))} lines" for path, text in _sources()
            if text.count("\n") > MAX_MODULE_LINES]
    assert long == [], "split these modules by concern:\n" + "\n".join(long)


def test_no_function_is_longer_than_100_lines():
    long = [f"{path}:{first}: {name}, {lines} lines" for path, text in _sources() if path.endswith(".py")
            for name, first, lines in _long_functions(text)]
    long += [f"{path}:{first}: {name}, {lines} lines" for path, text in _sources() if path.endswith((".c", ".h"))
             for name, first, lines in _long_c_functions(text)]
    assert long == [], "make these short orchestrations of named steps:\n" + "\n".join(long)
