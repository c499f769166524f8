"""Many small input files: the local engine reads and parses them together, as pieces of many files, and the
run is the run of the same lines in one file, byte for byte; malformed lines are numbered within their own
file, and trapped as they are."""
from __future__ import annotations

import gzip

from conftest import parts

import logetl.api as L
from logetl.engines.local.scan import Scan
from logetl.job import run_flow
from logetl.listener import FlowListener


def good(i: int) -> str:
    return f'10.0.0.{i % 7} - - [17/May/2015:10:00:00 +0000] "GET /p{i} HTTP/1.1" 200 {i} "-" "a"\n'


def logs(tmp_path):
    """``many/``: 600 files of one line, every 100th malformed, one with two lines and no final line break,
    an empty one and a gzipped one among them; ``one.log``: the same lines in one file."""
    many = tmp_path / "many"
    many.mkdir()
    lines = []
    for i in range(600):
        text = f"bad line {i}\n" if i % 100 == 42 else good(i)
        if i == 300:
            text = good(i) + good(i + 1000).rstrip("\n")      # its last line unterminated
        if i == 400:
            text = ""
        name = many / f"access-{i:04d}.log"
        if i == 500:
            (many / f"access-{i:04d}.log.gz").write_bytes(gzip.compress(text.encode()))
        else:
            name.write_text(text)
        lines.append(text if text.endswith("\n") or not text else text + "\n")
    (tmp_path / "one.log").write_text("".join(lines))
    return many, tmp_path / "one.log"


class Finished(FlowListener):
    def flow_finished(self, run):
        self.run = run


def test_small_files_are_parsed_together():
    """1,000 small files are a handful of pieces, not one a file (each piece costs about a millisecond)."""
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        files = []
        for i in range(1000):
            files.append(os.path.join(d, f"{i:04d}.log"))
            with open(files[-1], "w") as f:
                f.write(good(i))
        pieces = list(Scan(files))
    assert len(pieces) == 1
    assert pieces[0][0].n_lines == 1000 and list(pieces[0][1]) == files


def test_many_small_files_give_the_bytes_of_one_file(tmp_path):
    many, one = logs(tmp_path)
    flow = L.Flow("sf", [L.read().select("ip", "request", "size").write("out")])
    runs = {}
    for name, where in (("many", many), ("one", one)):
        listener = Finished()
        run_flow(flow, str(where), {"out": str(tmp_path / f"out-{name}")}, trap=str(tmp_path / f"trap-{name}"),
                 monitor=False, quiet=True, listener=listener)
        runs[name] = listener.run
    assert parts(tmp_path / "out-many") == parts(tmp_path / "out-one")
    assert parts(tmp_path / "trap-many") == parts(tmp_path / "trap-one") == b"".join(
        f"bad line {i}\n".encode() for i in range(42, 600, 100))
    assert runs["many"].lines_read == runs["one"].lines_read == 600
    assert runs["many"].malformed == runs["one"].malformed
    assert [s[0] for s in runs["many"].malformed_samples] == [
        f"{many}/access-{i:04d}.log:1" for i in range(42, 600, 100)][:5]
