"""Local-engine specifics: chunk boundaries, the pure-Python fallback, the progress bar on a terminal."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from conftest import CORPUS, corpus, logetl_on_a_terminal, read
from logetl.engines import kernel, local
from logetl.io import inputs
from logetl.job import run_program

CORPUS_LOG = os.path.join(CORPUS, "corpus.log")


@pytest.mark.parametrize("size", [1, 7, 64, 1000, 150_000])
def test_read_chunks_yields_whole_lines_whatever_the_chunk_size(tmp_path, size):
    data = corpus("corpus.log")
    f = tmp_path / "in.log"
    f.write_bytes(data)
    pieces = list(inputs.read_chunks([str(f)], size))
    assert b"".join(bytes(p) for p, _ in pieces) == data
    for p, final in pieces[:-1]:
        assert bytes(p).endswith(b"\n") and not final
    assert pieces[-1][1] is True and not bytes(pieces[-1][0]).endswith(b"\n")


@pytest.mark.parametrize("program", ["branch", "filter", "join"])
def test_tiny_chunks_give_the_same_bytes(tmp_path, monkeypatch, program):
    monkeypatch.setattr(local.LocalEngine, "chunk_bytes", 97)
    monkeypatch.setattr(local, "BATCH_ROWS", 3)
    monkeypatch.setattr(local, "STORE_ROWS", 5)
    outs = {"output1": str(tmp_path / "a"), "output2": str(tmp_path / "b")} if program == "branch" \
        else {"output": str(tmp_path / "a")}
    run_program(program, CORPUS_LOG, outs, trap=str(tmp_path / "trap"))
    assert read(tmp_path / "a" / "part-00000") == corpus(f"{program}.tsv")
    assert read(tmp_path / "trap" / "part-00000") == corpus("trap.log")


@pytest.mark.parametrize("program", ["branch", "filter", "join"])
def test_pure_python_fallback_gives_the_same_bytes(tmp_path, monkeypatch, program):
    monkeypatch.setattr(kernel, "_native", None)
    outs = {"output1": str(tmp_path / "a"), "output2": str(tmp_path / "b")} if program == "branch" \
        else {"output": str(tmp_path / "a")}
    result = run_program(program, CORPUS_LOG, outs, trap=str(tmp_path / "trap"))
    assert read(tmp_path / "a" / "part-00000") == corpus(f"{program}.tsv")
    assert read(tmp_path / "trap" / "part-00000") == corpus("trap.log")
    assert sum(result.malformed.values()) == corpus("trap.log").count(b"\n")


def test_branch_never_builds_columns(tmp_path, monkeypatch):
    """Branch writes the kernel's TSV as it is; building DataFrames would only cost time and memory."""
    def refuse(self):
        raise AssertionError("Branch asked for columns")
    monkeypatch.setattr(kernel.Parsed, "columns", refuse)
    run_program("branch", CORPUS_LOG, {"output1": str(tmp_path / "a"), "output2": str(tmp_path / "b")})
    assert read(tmp_path / "a" / "part-00000") == corpus("branch.tsv")


def test_progress_bar_on_a_terminal(tmp_path):
    """Under a pseudo-terminal a long run draws a bar of bytes read; the threshold is lowered to 0 s."""
    big = tmp_path / "big.log"
    big.write_bytes((corpus("corpus.log") + b"\n") * 400)
    code, text = logetl_on_a_terminal("filter", "--input", str(big), "--output", str(tmp_path / "o"),
                                      env={"LOGETL_PROGRESS_AFTER": "0"})
    assert code == 0, text
    assert re.search(r"\rparse  \[#+ *\] +\d+\.\d%  [\d.]+ MB of 41\.9 MB", text), text
    assert "logetl filter: SUCCESSFUL" in text


def test_no_progress_bar_when_not_a_terminal(tmp_path):
    p = subprocess.run([sys.executable, "-m", "logetl", "filter", "--input", CORPUS_LOG, "--output",
                        str(tmp_path / "o")], capture_output=True, env={**os.environ, "LOGETL_PROGRESS_AFTER": "0"})
    assert p.returncode == 0
    assert b"\r" not in p.stderr and b" MB of " not in p.stderr


def test_an_engine_refuses_an_operator_it_cannot_run_before_running(tmp_path):
    """It names the operator, and nothing is read or written."""
    from logetl import assembly
    from logetl.engines.base import Taps, UnsupportedOperator
    from logetl.listener import FlowListener

    from logetl import expressions

    class Palindrome(expressions.Expr):      # an expression no engine's table has
        def __init__(self, arg):
            self.args = (arg,)

        def check(self, types):
            self.args[0].check(types)
            return expressions.BOOLEAN

        def describe(self):
            return f"palindrome({self.args[0].describe()})"

    parsed = assembly.Parse("parse", assembly.Source("input"))
    flow = assembly.Flow("custom", [assembly.Sink("sink", assembly.Filter(
        "odd", parsed, expressions.Col("ip").starts_with("1") & Palindrome(expressions.Col("ip"))), "out")])
    with pytest.raises(UnsupportedOperator, match=r"^the local engine cannot compile Palindrome \(palindrome\(ip\)\) in operator 'odd'$"):
        local.LocalEngine().run(flow, Taps(inputs=["/nonexistent"], outputs={"out": str(tmp_path / "o")}),
                                FlowListener())
    assert not os.path.exists(tmp_path / "o")
