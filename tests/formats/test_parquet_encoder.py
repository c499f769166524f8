"""logetl's own Parquet encoder of string columns (``logetl._parquet``, ``logetl.io.parquet``): what the local
engine writes when a parse feeds only Parquet sinks (Branch). Its files are read by pyarrow, Polars, DuckDB
and Spark (``test_sink_formats.py`` reads Branch's output and the cases below with each) with the records,
row groups, encodings and statistics asked for."""
from __future__ import annotations

import array
import os
import subprocess
import sys

import pytest

from conftest import CORPUS, require
from logetl.io import parquet as encoder


@pytest.fixture(autouse=True)
def _encoder_built():
    require(encoder.available(), "logetl._parquet was not built (no C compiler) or libzstd.so.1 is missing")

CORPUS_LOG = os.path.join(CORPUS, "corpus.log")
FIELDS = ["few", "long", "sometimes", "rising"]


def piece(values: list[str]):
    """A column piece as the parse kernel hands it over: int32 offsets from 0, then the UTF-8 values."""
    data = [v.encode() for v in values]
    offsets = array.array("i", [0])
    for d in data:
        offsets.append(offsets[-1] + len(d))
    return offsets.tobytes(), b"".join(data), len(values)


def batches():
    """Three row groups that exercise each choice: ``few`` (empty and non-ASCII values, 2 then 301 distinct:
    bit widths 1 and 9) always a dictionary; ``long`` (3,000 distinct values of 400 bytes, falling: over
    the 1 MiB dictionary page in the first batch) plain throughout; ``sometimes`` a dictionary except in the second
    row group, which overflows it; ``rising`` in order, so with statistics. The second batch comes in three
    pieces, one of them empty, and counts not divisible by 8."""
    out = []
    n = 3_000
    out.append([[["é" if i % 2 else "" for i in range(n)]], [[f"{n - i:04d}" + "x" * 396 for i in range(n)]], [["s%d" % (i % 5) for i in range(n)]],
                [[f"t{i:06d}" for i in range(n)]]])
    sizes = (1_001, 0, 2_003)
    few, long_, some, rising = [], [], [], []
    start = n
    for size in sizes:
        few.append(["é日本" if i % 3 else f"v{i % 300}" for i in range(start, start + size)])
        long_.append([f"{i:04d}" + "y" * 396 for i in range(start, start + size)])
        some.append([f"{i:05d}" + "z" * 600 for i in range(start, start + size)])
        rising.append([f"t{i:06d}" for i in range(start, start + size)])
        start += size
    out.append([few, long_, some, rising])
    out.append([[["a", "b", "a"]], [["p", "q", "r"]], [["s1", "s1", "s2"]], [["u1", "u2", "u3"]]])
    return out


def write_cases(path) -> list[tuple]:
    """Writes ``batches()`` with the encoder; returns the rows it holds."""
    rows = []
    with open(path, "wb") as f:
        w = encoder.StringsParquetFile(f, FIELDS)
        for columns in batches():
            w.write([[piece(values) for values in pieces] for pieces in columns], sum(len(v) for v in columns[0]))
            rows += list(zip(*[sum(pieces, []) for pieces in columns]))
        w.close()
    return rows


def test_the_encoders_choices_read_back_in_pyarrow_polars_and_duckdb(tmp_path):
    import duckdb
    import polars as pl
    import pyarrow.parquet as pq

    path = tmp_path / "cases.parquet"
    rows = write_cases(path)
    table = pq.read_table(path)
    assert table.column_names == FIELDS and [str(t) for t in table.schema.types] == ["string"] * 4
    assert [tuple(r.values()) for r in table.to_pylist()] == rows
    assert list(pl.read_parquet(path).iter_rows()) == rows
    assert duckdb.sql(f"select * from read_parquet('{path}')").fetchall() == rows
    meta = pq.ParquetFile(path).metadata
    assert meta.created_by == f"logetl version {encoder.__version__}"
    assert [meta.row_group(g).num_rows for g in range(3)] == [3_000, 3_004, 3]
    dictionary = [[("RLE_DICTIONARY" in meta.row_group(g).column(c).encodings) for c in range(4)] for g in range(3)]
    assert dictionary == [[True, False, True, True], [True, False, False, True], [True, False, True, True]]
    for g, (lo, hi) in enumerate([("t000000", "t002999"), ("t003000", "t006003"), ("u1", "u3")]):
        stats = [meta.row_group(g).column(c).statistics for c in range(4)]
        assert [s is not None and s.has_min_max for s in stats] == [False, False, False, True]
        assert (stats[3].min, stats[3].max, stats[3].null_count) == (lo, hi, 0)
    schema = pq.ParquetFile(path).schema
    assert all(schema.column(c).max_definition_level == 1 for c in range(4))     # optional, as pyarrow writes


def test_an_output_without_rows_and_bad_offsets():
    """No write: a file of the schema and no row groups (the engine writes an empty output with pyarrow,
    but the encoder's own footer must hold alone). Offsets that fall or pass the values are refused."""
    import io

    import pyarrow.parquet as pq

    buf = io.BytesIO()
    w = encoder.StringsParquetFile(buf, ["a"])
    w.close()
    f = pq.ParquetFile(io.BytesIO(buf.getvalue()))
    assert f.metadata.num_rows == 0 and f.schema_arrow.names == ["a"]
    bad = array.array("i", [0, 3, 2]).tobytes()
    with pytest.raises(ValueError, match="^offsets fall$"):
        encoder._parquet.column_chunk([(bad, b"abc", 2)], True, False, 1, 1 << 20)
    with pytest.raises(ValueError, match="^offsets out of the values$"):
        encoder._parquet.column_chunk([(array.array("i", [0, 9]).tobytes(), b"abc", 1)], True, False, 1, 1 << 20)


def test_branch_uses_it_and_imports_no_pyarrow_and_without_libzstd_pyarrow_writes_the_same_records(tmp_path):
    """The encoder is what keeps Branch's Parquet run within 1.5x the TSV run: the run imports neither
    pyarrow nor numpy. Where libzstd cannot be opened, pyarrow's writer takes over with the same records."""
    code = ("import sys; import logetl.io.parquet as p; from logetl.job import program_flow, run_flow; "
            "p.available = (lambda: False) if sys.argv[2] == 'off' else p.available; "
            f"run_flow(program_flow('branch'), {CORPUS_LOG!r}, {{'output1': sys.argv[1] + '/a', "
            "'output2': sys.argv[1] + '/b'}, output_format='parquet', monitor=False); "
            "print(sorted(m for m in ('pyarrow', 'numpy') if m in sys.modules))")
    for mode in ("on", "off"):
        p = subprocess.run([sys.executable, "-c", code, str(tmp_path / mode), mode], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        assert p.stdout.splitlines() == (["[]"] if mode == "on" else ["['numpy', 'pyarrow']"])
    import pyarrow.parquet as pq

    made = {m: pq.ParquetFile(tmp_path / m / "a" / "part-00000.parquet") for m in ("on", "off")}
    assert made["on"].metadata.created_by.startswith("logetl version ")
    assert made["off"].metadata.created_by.startswith("parquet-cpp-arrow")
    assert made["on"].read().to_pylist() == made["off"].read().to_pylist()
    assert len(made["on"].read()) == 27
    for m in ("on", "off"):
        assert (tmp_path / m / "a" / "part-00000.parquet").read_bytes() == \
            (tmp_path / m / "b" / "part-00000.parquet").read_bytes()


def _page_headers(data: bytes, start: int, end: int) -> list[tuple[int, int, int]]:
    """(page type, uncompressed size, number of values) of each page from ``start`` to ``end``: a reader of
    Thrift's compact protocol just large enough for a PageHeader."""
    pos = start

    def varint():
        nonlocal pos
        shift = result = 0
        while True:
            byte = data[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return result

    def struct():
        nonlocal pos
        fields, last = {}, 0
        while True:
            byte = data[pos]
            pos += 1
            if byte == 0:
                return fields
            kind, last = byte & 0x0F, last + (byte >> 4)
            if kind == 12:
                fields[last] = struct()
            else:           # the i32 fields of a page header, zigzag varints
                n = varint()
                fields[last] = (n >> 1) ^ -(n & 1)

    pages = []
    while pos < end:
        header = struct()
        inner = header.get(5) or header.get(7)
        pages.append((header[1], header[2], inner[1]))
        pos += header[3]
    return pages


def test_plain_pages_hold_at_most_a_mebibyte_of_values(tmp_path):
    """A plain column chunk is split into pages of up to 1 MiB of values (a value larger than that has its
    own), as pyarrow splits them: a page's sizes are 32-bit, and a reader holds one page at a time."""
    import pyarrow.parquet as pq

    values = [f"{i:06d}" + "v" * 994 for i in range(2_500)] + ["w" * (3 << 20)] + ["x", ""]   # 1,000 B apart
    path = tmp_path / "pages.parquet"
    with open(path, "wb") as f:
        w = encoder.StringsParquetFile(f, ["v"])
        w.dictionary, w.statistics = [False], [False]       # as a column over the dictionary page
        w.write([[piece(values[:1_000]), piece([]), piece(values[1_000:])]], len(values))
        w.close()
    column = pq.ParquetFile(path).metadata.row_group(0).column(0)
    data = path.read_bytes()
    pages = _page_headers(data, column.data_page_offset, column.data_page_offset + column.total_compressed_size)
    per_page = (1 << 20) // 1_004                  # values of 1,000 bytes and their 4-byte lengths
    assert [n for _, _, n in pages] == [per_page, per_page, 2_500 - 2 * per_page, 1, 2]
    assert all(kind == 0 for kind, _, _ in pages)
    assert max(size for _, size, _ in pages if size < (3 << 20)) <= (1 << 20) + 16
    assert pq.read_table(path).column("v").to_pylist() == values


def test_statistics_follow_the_first_records_of_every_piece_and_buffers_must_be_bytes(tmp_path):
    """Whether a column is in order is judged on its first 16,384 records across the batch's pieces (a
    first piece of one record decides nothing). The encoder reads its buffers without the GIL: it takes
    only read-only ones, which nobody can change meanwhile."""
    import pyarrow.parquet as pq

    path = tmp_path / "order.parquet"
    with open(path, "wb") as f:
        w = encoder.StringsParquetFile(f, ["up", "mixed"])
        up = [f"{i:05d}" for i in range(3_000)]
        mixed = [f"{(i * 7919) % 3_000:05d}" for i in range(3_000)]
        w.write([[piece(up[:1]), piece(up[1:])], [piece(mixed[:1]), piece(mixed[1:])]], 3_000)
        w.close()
    stats = [pq.ParquetFile(path).metadata.row_group(0).column(c).statistics for c in range(2)]
    assert stats[0].has_min_max and (stats[0].min, stats[0].max) == ("00000", "02999")
    assert stats[1] is None or not stats[1].has_min_max
    offsets, values, n = piece(["ab", "c"])
    with pytest.raises(ValueError, match=r"^offsets and values must be read-only buffers \(bytes\)$"):
        encoder._parquet.column_chunk([(bytearray(offsets), values, n)], True, False, 1, 1 << 20)
    with pytest.raises(TypeError, match=r"^a piece is a tuple \(offsets, values, n\)$"):
        encoder._parquet.column_chunk([[offsets, values, n]], True, False, 1, 1 << 20)
