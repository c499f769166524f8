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


def _regions(path, chunk, start=0, bound=None):
    fd = os.open(path, os.O_RDONLY)
    try:
        return [(inputs.read_region(fd, o, n, path), final) for o, n, final in
                inputs.regions(fd, path, chunk, start, bound)]
    finally:
        os.close(fd)


@pytest.mark.parametrize("size", [1, 7, 64, 1000, 150_000])
@pytest.mark.parametrize("tail", [b"", b"\n", b"no newline at the end"])
def test_regions_read_by_the_parse_threads_hold_the_bytes_of_read_chunks(tmp_path, size, tail):
    data = corpus("corpus.log").rstrip(b"\n") + b"\n" + tail
    f = tmp_path / "in.log"
    f.write_bytes(data)
    pieces = _regions(str(f), size)
    assert b"".join(p for p, _ in pieces) == data
    assert b"".join(bytes(p) for p, _ in inputs.read_chunks([str(f)], size)) == data
    for p, final in pieces[:-1]:
        assert p.endswith(b"\n") and not final
    assert pieces[-1][1] is True


def test_regions_find_line_ends_past_their_search_window(tmp_path, monkeypatch):
    """A line longer than the window around a piece's nominal end (64 KiB) is still read whole."""
    long = b"x" * 200_000
    data = b"a\n" + long + b"\nb\n" + long
    f = tmp_path / "in.log"
    f.write_bytes(data)
    pieces = _regions(str(f), 10)
    # a piece ends at the first line end at or after its nominal end (here 10 bytes on), 200 kB away
    assert [p for p, _ in pieces] == [b"a\n" + long + b"\n", b"b\n" + long]
    # bounded (an incremental run's range): complete lines only, from a line start
    assert [p for p, _ in _regions(str(f), 10, 2, len(data))] == [long + b"\n", b"b\n"]
    assert _regions(str(f), 10, len(data) - len(long), len(data)) == []
    # a bound past the end (the file became shorter): what is there, complete lines only
    assert b"".join(p for p, _ in _regions(str(f), 1 << 20, 0, len(data) * 2)) == data[: data.rindex(b"\n") + 1]


@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
def test_the_kernel_copies_out_only_the_fields_kept(monkeypatch, native):
    data = corpus("corpus.log")
    every = kernel.parse(data, True)
    if not native:
        monkeypatch.setattr(kernel, "_native", None)
    some = kernel.parse(data, True, out=(3, 1))
    assert (some.n_records, some.n_lines, some.n_dash, some.malformed) == \
        (every.n_records, every.n_lines, every.n_dash, every.malformed)
    rows = [line.split(b"\t") for line in every.tsv.splitlines()]
    assert some.tsv == b"".join(r[3] + b"\t" + r[1] + b"\n" for r in rows)
    assert [c.to_pylist() for c in some.columns()] == [c.to_pylist() for c in
                                                        (every.columns()[3], every.columns()[1])]
    if native:
        with pytest.raises(ValueError, match="output field written twice"):
            kernel.parse(data, True, out=(1, 1))


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


def test_a_flow_without_parquet_or_spilling_never_imports_pyarrow(tmp_path):
    """Kernel chunks reach Polars through the Arrow C data interface: pyarrow's import (with numpy's, a
    tenth of a second) is paid only by runs that write Parquet, spill or hold big frames."""
    example = os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples", "status_by_hour.py")
    code = ("import sys\nfrom logetl.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n"
            "    assert e.code in (0, None), e.code\nprint(sorted(m for m in ('pyarrow', 'numpy') if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code, "run", example, "--input", CORPUS_LOG, "--output",
                        f"counts={tmp_path / 'counts'}", "-q"], capture_output=True, text=True,
                       env={**os.environ, "LOGETL_MONITOR": "off"})
    assert p.returncode == 0, p.stderr
    assert p.stdout == "[]\n"
