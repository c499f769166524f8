"""Values longer than logetl's Parquet encoder takes (``io.parquet.MAX_VALUE``, just under 1 GiB: a page's
sizes are 32-bit) are written by pyarrow's writer, chosen before the first row; and an error whose exception
has no message (a ``MemoryError``) still ends its line with a word: the exception's type."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from conftest import require

from logetl import errors
from logetl.cli import main
from logetl.io import parquet as encoder
from logetl.job import program_flow, run_flow


def _line(i: int, request: int) -> bytes:
    return (f'10.0.0.{i} - - [17/May/2015:10:00:0{i} +0000] "GET /{"x" * request} HTTP/1.1" 200 {i} "-" "a"\n'
            ).encode()


def _written(tmp_path, name: str, log) -> tuple[str, list[dict]]:
    """(who wrote it, its records' ip, request and size) of Branch's first Parquet output of ``log`` (a
    parse feeding only Parquet sinks)."""
    import pyarrow.parquet as pq

    out = tmp_path / name
    run_flow(program_flow("branch"), str(log), {"output1": str(out / "1"), "output2": str(out / "2")},
             output_format="parquet", monitor=False, quiet=True)
    made = pq.ParquetFile(out / "1" / "part-00000.parquet")
    rows = [{k: r[k] for k in ("ip", "request", "size")} for r in made.read().to_pylist()]
    return made.metadata.created_by, rows


@pytest.fixture
def _encoder_built():
    require(encoder.available(), "logetl._parquet was not built (no C compiler) or libzstd.so.1 is missing")


def test_values_the_encoder_does_not_take_are_written_by_pyarrow(tmp_path, monkeypatch, _encoder_built):
    log = tmp_path / "in.log"
    log.write_bytes(_line(1, 10) + _line(2, 3000) + _line(3, 0))
    expected = [{"ip": "10.0.0.1", "request": "GET /" + "x" * 10 + " HTTP/1.1", "size": "1"},
                {"ip": "10.0.0.2", "request": "GET /" + "x" * 3000 + " HTTP/1.1", "size": "2"},
                {"ip": "10.0.0.3", "request": "GET / HTTP/1.1", "size": "3"}]
    monkeypatch.setenv("LOGETL_MAX_LINE", "4000")
    # lines of at most 4,000 bytes, values of at most 5,000: logetl's encoder
    monkeypatch.setattr(encoder, "MAX_VALUE", 5000)
    by, rows = _written(tmp_path, "native", log)
    assert by.startswith("logetl version ") and rows == expected
    # values of at most 2,000: a line of 4,000 bytes may hold a longer one, so pyarrow writes the file
    monkeypatch.setattr(encoder, "MAX_VALUE", 2000)
    by, rows = _written(tmp_path, "arrow", log)
    assert by.startswith("parquet-cpp-arrow") and rows == expected


def test_an_error_without_a_message_names_its_type(tmp_path, monkeypatch):
    assert errors.message(MemoryError()) == "MemoryError"
    assert errors.message(ValueError("  ")) == "ValueError"
    assert errors.message(ValueError("bad")) == "bad"
    log = tmp_path / "in.log"
    log.write_bytes(_line(1, 10))

    def fails(*args, **kwargs):
        raise MemoryError()

    monkeypatch.setattr("logetl.job.run_flow", fails)
    result = CliRunner().invoke(main, ["branch", "--input", str(log), "--output1", str(tmp_path / "o1"),
                                       "--output2", str(tmp_path / "o2"), "--quiet"])
    assert result.exit_code == 1
    assert result.output.splitlines()[-1] == "Error: branch failed: MemoryError"


@pytest.mark.slow
def test_a_field_over_a_gibibyte_is_written_at_real_size(tmp_path, monkeypatch, _encoder_built):
    """At real size: the encoder refuses a value over its limit with a message, and a flow whose lines may
    hold one (``LOGETL_MAX_LINE`` above it) writes it with pyarrow (7.5 GB of memory at its peak)."""
    from logetl import _parquet

    big = 1 << 30
    values = b"v" * big
    offsets = (0).to_bytes(4, "little") + big.to_bytes(4, "little")
    with pytest.raises(MemoryError) as caught:
        _parquet.column_chunk([(offsets, values, 1)], False, False, 1, encoder.DICTIONARY_PAGE_LIMIT)
    assert str(caught.value) == "logetl's Parquet encoder ran out of memory, or met a page over 1 GiB"
    del values
    monkeypatch.setenv("LOGETL_MAX_LINE", "1536M")
    log = tmp_path / "in.log"
    with open(log, "wb") as f:
        f.write(_line(1, 10))
        f.write(b'10.0.0.2 - - [17/May/2015:10:00:02 +0000] "GET /')
        for _ in range(big // (1 << 20)):
            f.write(b"x" * (1 << 20))
        f.write(b' HTTP/1.1" 200 2 "-" "a"\n')
    by, rows = _written(tmp_path, "big", log)
    assert by.startswith("parquet-cpp-arrow")
    assert [(r["ip"], len(r["request"]), r["size"]) for r in rows] == [
        ("10.0.0.1", 24, "1"), ("10.0.0.2", big + 14, "2")]
