"""``logetl.io.parquet``: one Parquet file from pieces encoded apart (the local engine's parallel Parquet
encoders). The footer codec keeps every byte it does not change; the assembled file reads back, in
pyarrow, Polars and DuckDB, as the pieces' rows in order, with every offset pointing where its pages are."""
import io
import struct

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from logetl.engines import local
from logetl.io import parquet


def _table(start: int, n: int) -> pa.Table:
    return pa.table({
        "ip": pa.array([f"10.0.{i % 7}.{i % 251}" for i in range(start, start + n)], pa.string()),
        "time": pa.array([f"17/May/2015:10:{(i // 60) % 60:02d}:{i % 60:02d} +0000" for i in range(start, start + n)]),
        "size": pa.array([None if i % 13 == 0 else i * 3 for i in range(start, start + n)], pa.int64()),
        "ok": pa.array([i % 3 == 0 for i in range(start, start + n)], pa.bool_()),
    })


def _piece(table: pa.Table, row_group_size=None, **options) -> bytes:
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(sink, table.schema, compression="zstd", store_schema=False, **options) as writer:
        writer.write_table(table, row_group_size=row_group_size)
    return sink.getvalue().to_pybytes()


def _footer(data: bytes) -> bytes:
    (length,) = struct.unpack("<I", data[-8:-4])
    return data[-8 - length:-8]


@pytest.mark.parametrize("options", [
    {},
    {"use_dictionary": ["ip"], "write_statistics": ["time", "size"]},
    {"use_dictionary": False, "write_statistics": False, "compression": "none"},
    {"store_schema": True, "write_page_index": True},
], ids=["defaults", "chosen", "plain", "page-index"])
def test_the_footer_codec_gives_back_every_byte(options):
    """Decoding a footer and encoding it again gives the same bytes: nothing is lost, whatever pyarrow
    wrote (statistics, dictionaries, key-value metadata, page index offsets, a list of 300 values)."""
    table = _table(0, 3000)
    wide = pa.table({f"c{i}": pa.array([i]) for i in range(20)})
    for t in (table, wide):
        opts = {**options}
        compression = opts.pop("compression", "zstd")
        store = opts.pop("store_schema", False)
        sink = pa.BufferOutputStream()
        with pq.ParquetWriter(sink, t.schema, compression=compression, store_schema=store, **opts) as w:
            w.write_table(t, row_group_size=1000)
        data = sink.getvalue().to_pybytes()
        assert parquet.encode_footer(parquet.decode_footer(_footer(data))) == _footer(data)
    big = pa.table({"s": pa.array([str(i) for i in range(300)])})
    data = _piece(big, use_dictionary=True)
    assert parquet.encode_footer(parquet.decode_footer(_footer(data))) == _footer(data)


def test_pieces_make_one_file_of_their_rows_in_order(tmp_path):
    """Pieces of one and of several row groups, of different sizes: the file has all their row groups in
    order, each column chunk's offsets moved by where its piece landed (so each row group reads alone),
    ordinals renumbered, the row count summed; pyarrow, Polars and DuckDB read the same rows."""
    tables = [_table(0, 5000), _table(5000, 1), _table(5001, 12_000), _table(17_001, 333)]
    pieces = [_piece(tables[0], use_dictionary=["ip"]), _piece(tables[1]),
              _piece(tables[2], row_group_size=5000, write_statistics=["time"]), _piece(tables[3])]
    path = tmp_path / "all.parquet"
    with open(path, "wb") as f:
        assembler = parquet.Assembler(f)
        for p in pieces:
            assembler.append(p)
        assembler.close()
    expected = pa.concat_tables(tables)
    assert pq.read_table(path).equals(expected)
    meta = pq.ParquetFile(path).metadata
    assert (meta.num_rows, meta.num_row_groups) == (expected.num_rows, 1 + 1 + 3 + 1)
    # where each piece's row groups went: its bytes after the magic, back to back
    starts, position = [], 4
    for p in pieces:
        starts.append(position)
        position += len(parquet.split_piece(p)[0])
    group = 0
    for p, start in zip(pieces, starts):
        own = pq.ParquetFile(io.BytesIO(p)).metadata
        for g in range(own.num_row_groups):
            for c in range(own.num_columns):
                before, after = own.row_group(g).column(c), meta.row_group(group).column(c)
                assert after.data_page_offset == before.data_page_offset + start - 4
                if before.has_dictionary_page:
                    assert after.dictionary_page_offset == before.dictionary_page_offset + start - 4
                assert after.file_offset == before.file_offset == 0      # unset by Arrow, left unset
                assert after.statistics == before.statistics
            group += 1
    reader = pq.ParquetFile(path)
    assert pa.concat_tables([reader.read_row_group(g) for g in range(meta.num_row_groups)]).equals(expected)
    assert pl.read_parquet(path).equals(pl.from_arrow(expected))
    got = duckdb.sql(f"select ip, time, size, ok from read_parquet('{path}')").fetchall()
    assert got == list(zip(*[expected.column(i).to_pylist() for i in range(4)]))


def test_row_group_ordinals_are_renumbered():
    """Arrow writes no RowGroup.ordinal; a writer that does numbers its own row groups from 0, so the
    assembled file's are renumbered in order."""
    def with_ordinals(data: bytes) -> bytes:
        body, footer = parquet.split_piece(data)
        for group in next(f for f in footer if f[0] == parquet.FILE_ROW_GROUPS)[2][1]:
            group.append([parquet.GROUP_ORDINAL, parquet.I16, 5])
        encoded = parquet.encode_footer(footer)
        return parquet.MAGIC + bytes(body) + encoded + struct.pack("<I", len(encoded)) + parquet.MAGIC

    out = io.BytesIO()
    assembler = parquet.Assembler(out)
    for start in (0, 100, 1100):
        assembler.append(with_ordinals(_piece(_table(start, 1000 if start else 100), row_group_size=500)))
    assembler.close()
    groups = next(f for f in parquet.decode_footer(_footer(out.getvalue())) if f[0] == parquet.FILE_ROW_GROUPS)[2][1]
    assert [next(f[2] for f in g if f[0] == parquet.GROUP_ORDINAL) for g in groups] == [0, 1, 2, 3, 4]
    assert pq.read_table(io.BytesIO(out.getvalue())).equals(pa.concat_tables([_table(0, 100), _table(100, 1000),
                                                                               _table(1100, 1000)]))


def test_what_cannot_be_moved_is_refused():
    """A page index holds absolute offsets inside the body: such a piece is refused, as are bytes that are
    not a Parquet file; an assembler given nothing writes nothing."""
    with pytest.raises(parquet.FooterError, match="^a piece with a page index cannot be moved$"):
        parquet.Assembler(io.BytesIO()).append(_piece(_table(0, 10), write_page_index=True))
    for bad in (b"", b"PAR1PAR1", b"PAR1" + b"\x00" * 8 + b"PAR1", b"not parquet at all"):
        with pytest.raises(parquet.FooterError):
            parquet.Assembler(io.BytesIO()).append(bad)
    out = io.BytesIO()
    assembler = parquet.Assembler(out)
    assembler.close()
    assert assembler.empty and out.getvalue() == b""


def test_the_background_encoders_write_the_bytes_one_thread_writes(tmp_path):
    """The local engine's ParquetWriter: batches encoded by several threads at once make the same file,
    byte for byte, as one thread encoding them in turn (the first batch chooses dictionaries and
    statistics for all; pieces are appended in input order whichever finishes first)."""
    frames = [pl.from_arrow(_table(i * 7000, 7000 - i * 500)) for i in range(9)]
    types = {"ip": "string", "time": "string", "size": "integer", "ok": "boolean"}
    outputs = []
    for background in (False, True):
        path = tmp_path / f"{background}.parquet"
        with open(path, "wb") as f:
            writer = local.ParquetWriter(f, list(types), types, background=background)
            for frame in frames:
                writer.write(local.Batch(frame.columns, frame))
            writer.close()
        outputs.append(path.read_bytes())
    assert outputs[0] == outputs[1]
    assert pq.read_table(tmp_path / "True.parquet").equals(pa.concat_tables([f.to_arrow() for f in frames])
                                                          .cast(pq.read_table(tmp_path / "True.parquet").schema))
