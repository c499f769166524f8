"""logetl's own Parquet file of string columns, for the local engine's fastest case: a parse that feeds
only Parquet sinks (Branch with ``--output-format parquet``), whose records come from the parse kernel as
Arrow strings with no nulls. The column chunks are encoded in C (``logetl._parquet``: dictionary or plain,
zstd, without the GIL); this module writes the file around them (magic, footer) in Parquet's Thrift compact
protocol. Everything else is pyarrow's (``engines.local.ParquetWriter``).

What it writes, the choices pyarrow's path makes too (the files read the same in pyarrow, Polars, DuckDB
and Spark: ``tests/formats/test_parquet_encoder.py`` and ``tests/formats/test_sink_formats.py``):

- one row group per batch; per column chunk one dictionary page (when used) and one data page of its
  numbers, or plain data pages of up to 1 MiB of values each; zstd;
- every column ``optional binary (String)``, as pyarrow writes a nullable string field;
- a dictionary for the columns whose distinct values in the first batch fit one dictionary page (1 MiB);
  a later row group whose values do not fit is written plain;
- statistics (min, max, null count) for the columns in order, or nearly, in the first batch (a log's
  time): the others' min and max would let a reader skip nothing.
"""
from __future__ import annotations

import struct
from concurrent.futures import ThreadPoolExecutor

from logetl import __version__

try:
    from logetl import _parquet
except ImportError:     # no C compiler when logetl was installed: pyarrow writes every Parquet file
    _parquet = None

MAGIC = b"PAR1"
#: as pyarrow: a dictionary page of at most 1 MiB, zstd at its default level, statistics up to 4 KiB a value
DICTIONARY_PAGE_LIMIT = 1 << 20
ZSTD_LEVEL = 1
MAX_STATISTICS = 4096
#: the longest value the encoder takes: a value larger than a plain page's 1 MiB has a page of its own,
#: and a page's sizes are 32-bit, kept under 1 GiB (``_parquet.c``'s ``add_page``). A sink whose values may
#: be longer (lines longer than this are read: ``LOGETL_MAX_LINE``) is written by pyarrow's writer instead.
MAX_VALUE = (1 << 30) - 64
#: threads that encode a batch's columns
ENCODERS = 2
#: a column counts as in order when this share of neighbours among its first ORDER_SAMPLE values are
IN_ORDER, ORDER_SAMPLE = 0.9, 16_384

# Parquet's enums (parquet.thrift)
BYTE_ARRAY, REQUIRED, OPTIONAL, UTF8, ZSTD = 6, 0, 1, 0, 6
PLAIN, RLE, RLE_DICTIONARY = 0, 3, 8


def takes(longest: int) -> bool:
    """Whether the encoder takes values of up to ``longest`` bytes (``MAX_VALUE``)."""
    return longest <= MAX_VALUE


def available() -> bool:
    """Whether this encoder can run here: the C module was built and libzstd.so.1 opens."""
    return _parquet is not None and _parquet.available()


class Thrift:
    """Thrift's compact protocol, writing: the structs of a Parquet footer are built as ``(id, type, value)``
    lists by the caller."""

    I16, I32, I64, BINARY, LIST, STRUCT = 4, 5, 6, 8, 9, 12

    def __init__(self):
        self.out = bytearray()

    def varint(self, n: int) -> None:
        while True:
            byte, n = n & 0x7F, n >> 7
            self.out.append(byte | (0x80 if n else 0))
            if not n:
                return

    def value(self, kind: int, v) -> None:
        if kind in (self.I16, self.I32, self.I64):
            self.varint((v << 1) ^ (v >> 63))
        elif kind == self.BINARY:
            self.varint(len(v))
            self.out += v
        elif kind == self.STRUCT:
            self.struct(v)
        elif kind == self.LIST:
            element, items = v
            if len(items) < 15:
                self.out.append(len(items) << 4 | element)
            else:
                self.out.append(0xF0 | element)
                self.varint(len(items))
            for item in items:
                self.value(element, item)
        else:   # pragma: no cover
            raise ValueError(kind)

    def struct(self, fields) -> None:
        last = 0
        for fid, kind, v in fields:
            if v is None:
                continue
            delta = fid - last
            if 0 < delta <= 15:
                self.out.append(delta << 4 | kind)
            else:   # pragma: no cover (Parquet's footer fields here rise by 1 to 15)
                self.out.append(kind)
                self.varint((fid << 1) ^ (fid >> 15))
            self.value(kind, v)
            last = fid
        self.out.append(0)


T = Thrift


def _in_order(pieces, n: int) -> bool:
    """Whether a column's first ORDER_SAMPLE values (of ``n``) are in order, or nearly."""
    sample = min(n, ORDER_SAMPLE)
    return sample < 2 or _parquet.rising(pieces, sample) >= IN_ORDER * (sample - 1)


class StringsParquetFile:
    """A Parquet file of string columns, written batch by batch to ``file`` (open for binary writing, at its
    start), a row group per ``write``; ``close`` writes the footer. A piece of a column is Arrow's
    buffers of strings without nulls: int32 offsets from 0 (count + 1 of them) and the values. Memory: up to ENCODERS column chunks at a time beyond the batch."""

    def __init__(self, file, fields):
        self.file, self.fields = file, list(fields)
        self.pos = 0
        self.row_groups: list = []
        self.rows = 0
        self.dictionary: list[bool] | None = None   # per column, chosen on the first batch
        self.statistics: list[bool] | None = None
        self.pool = None
        self._put(MAGIC)

    def abandon(self) -> None:
        """Ends the column threads (``close`` does; a failed run's writer calls it itself)."""
        if self.pool is not None:
            self.pool.shutdown()
            self.pool = None

    def _put(self, data) -> None:
        self.file.write(data)
        self.pos += len(data)

    def write(self, columns, n: int) -> None:
        """One row group: ``columns`` holds, per field, the pieces ``(offsets, values, count)`` of its
        values (one per parsed chunk of the batch), ``n`` records in all."""
        if n == 0:
            return
        if self.statistics is None:
            self.statistics = [_in_order(pieces, n) for pieces in columns]
            self.dictionary = [True] * len(columns)
        chunks, start_group = [], self.pos
        encode = lambda k: _parquet.column_chunk(   # noqa: E731
            columns[k], self.dictionary[k], self.statistics[k], ZSTD_LEVEL, DICTIONARY_PAGE_LIMIT)
        if self.pool is None:
            # the columns of a batch are encoded side by side (the C code releases the GIL): the parse's
            # threads end before the encoding of the last batches, which one thread left to one core
            # (Branch over 2M lines: 0.525 s against 0.55 s, medians of 7 interleaved runs)
            self.pool = ThreadPoolExecutor(ENCODERS, thread_name_prefix="logetl-parquet-column")
        encoded = list(self.pool.map(encode, range(len(columns))))
        for k, (chunk, dictionary_bytes, raw, used, lo, hi) in enumerate(encoded):
            if self.rows == 0 and not used:
                self.dictionary[k] = False    # as pyarrow: a column that overflows its dictionary stays plain
            start = self.pos
            self._put(chunk)
            encodings = [PLAIN, RLE, RLE_DICTIONARY] if used else [PLAIN, RLE]
            stats = None
            if lo is not None:      # as pyarrow: a min or max too long to keep is left out, not the other
                stats = [(3, T.I64, 0), (5, T.BINARY, hi if len(hi) <= MAX_STATISTICS else None),
                         (6, T.BINARY, lo if len(lo) <= MAX_STATISTICS else None)]
            meta = [(1, T.I32, BYTE_ARRAY), (2, T.LIST, (T.I32, encodings)),
                    (3, T.LIST, (T.BINARY, [self.fields[k].encode()])), (4, T.I32, ZSTD), (5, T.I64, n),
                    (6, T.I64, raw), (7, T.I64, len(chunk)), (9, T.I64, start + dictionary_bytes),
                    (11, T.I64, start if used else None), (12, T.STRUCT, stats)]
            # file_offset 0: it once pointed at a copy of the metadata after the chunk (parquet.thrift)
            chunks.append(([(2, T.I64, 0), (3, T.STRUCT, meta)], raw))
        self.row_groups.append([(1, T.LIST, (T.STRUCT, [c for c, _ in chunks])),
                                (2, T.I64, sum(raw for _, raw in chunks)), (3, T.I64, n),
                                (5, T.I64, start_group), (6, T.I64, self.pos - start_group),
                                # the ordinal is optional, and an i16
                                (7, T.I16, len(self.row_groups) if len(self.row_groups) < 1 << 15 else None)])
        self.rows += n

    def close(self) -> None:
        self.abandon()
        schema = [[(3, T.I32, REQUIRED), (4, T.BINARY, b"schema"), (5, T.I32, len(self.fields))]]
        schema += [[(1, T.I32, BYTE_ARRAY), (3, T.I32, OPTIONAL), (4, T.BINARY, f.encode()), (6, T.I32, UTF8),
                    (10, T.STRUCT, [(1, T.STRUCT, [])])] for f in self.fields]
        footer = Thrift()
        footer.struct([(1, T.I32, 2), (2, T.LIST, (T.STRUCT, schema)), (3, T.I64, self.rows),
                       (4, T.LIST, (T.STRUCT, self.row_groups)),
                       (6, T.BINARY, f"logetl version {__version__}".encode()),
                       (7, T.LIST, (T.STRUCT, [[(1, T.STRUCT, [])] for _ in self.fields]))])
        self._put(bytes(footer.out))
        self._put(struct.pack("<I", len(footer.out)) + MAGIC)
