"""An input that fails while it is read (a truncated gzip) fails the run with one line naming the file, on
every engine: on Spark not its 200-line job error, nor the task-failure logs of its executor, scheduler
and writer on stderr."""
from __future__ import annotations

import gzip

import pytest

import logetl.api as L
from logetl.io.inputs import InputReadError
from logetl.job import run_flow

#: each engine's reason for a gzip that ends before its end-of-stream marker
REASONS = {"local": "Compressed file ended before the end-of-stream marker was reached",
           "spark": "Unexpected end of input stream"}


def test_a_truncated_gzip_fails_the_run_in_one_line_naming_the_file(engine, tmp_path, capfd):
    lines = b"".join(f'10.0.0.{i % 250} - - [17/May/2015:10:00:00 +0000] "GET /{i} HTTP/1.1" 200 {i} "-" "a"\n'
                     .encode() for i in range(5000))
    log = tmp_path / "trunc.log.gz"
    log.write_bytes(gzip.compress(lines)[:-400])
    logs = L.read()
    flow = L.Flow("pr", [logs.write("a"), logs.select("ip", "size").write("b")])
    capfd.readouterr()
    with pytest.raises(InputReadError) as caught:
        run_flow(flow, str(log), {"a": str(tmp_path / "a"), "b": str(tmp_path / "b")}, engine=engine,
                 monitor=False, quiet=True)
    assert str(caught.value) == f"cannot read input {str(log)!r}: {REASONS[engine]}"
    err = capfd.readouterr().err
    assert "ERROR" not in err and "Exception" not in err, err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
