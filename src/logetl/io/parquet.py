"""One Parquet file from row groups encoded independently, so that several threads can encode them.

Arrow's Parquet writer encodes a file's row groups one after the other in the thread that writes them
(pyarrow does not expose its column-parallel option), and on Branch over 2M lines that one thread was the
run's critical path. Parquet's layout lets row groups be encoded apart and put together afterwards: a
row group's column chunks are self-contained byte ranges (page headers and pages; nothing inside them
points elsewhere in the file), and only the footer (``FileMetaData``, Thrift's compact protocol) records
where each chunk starts. So each batch is written as a small Parquet file of one row group, in memory,
by any thread; ``Assembler`` appends their chunks to the output in order and writes one footer whose
offsets are moved by where each piece landed. This is what parquet-mr's ``ParquetFileWriter.appendFile``
does to merge files without decoding them.

The footer is decoded and encoded by a small generic reader and writer of Thrift's compact protocol
(every value kept as it was, in its order; only offsets and ordinals change), so fields this module does
not know pass through unchanged. Pieces must share one schema, unencrypted and without a page index (its offset index holds absolute
offsets inside the body); logetl writes no other.
"""
from __future__ import annotations

import struct

MAGIC = b"PAR1"

# Thrift compact protocol type codes
STOP, TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(13)

# parquet.thrift field ids used here
FILE_NUM_ROWS, FILE_ROW_GROUPS = 3, 4
GROUP_COLUMNS, GROUP_FILE_OFFSET, GROUP_ORDINAL = 1, 5, 7
CHUNK_FILE_OFFSET, CHUNK_META, CHUNK_OFFSET_INDEX, CHUNK_COLUMN_INDEX = 2, 3, 4, 6
#: ColumnMetaData's offsets: data_page_offset, index_page_offset, dictionary_page_offset, bloom_filter_offset
META_OFFSETS = (9, 10, 11, 14)


class FooterError(ValueError):
    """A piece that is not a Parquet file logetl can append (a bug, not a user's mistake)."""


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def byte(self) -> int:
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result
            shift += 7

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def value(self, kind: int):
        if kind in (TRUE, FALSE, BYTE):          # a boolean inside a list is one byte, as a byte is
            return self.byte()
        if kind in (I16, I32, I64):
            return self.zigzag()
        if kind == DOUBLE:
            self.pos += 8
            return self.data[self.pos - 8:self.pos]
        if kind == BINARY:
            n = self.varint()
            self.pos += n
            return self.data[self.pos - n:self.pos]
        if kind in (LIST, SET):
            header = self.byte()
            size, element = header >> 4, header & 0x0F
            if size == 15:
                size = self.varint()
            return element, [self.value(element) for _ in range(size)]
        if kind == MAP:
            size = self.varint()
            kinds = self.byte() if size else 0
            return kinds, [(self.value(kinds >> 4), self.value(kinds & 0x0F)) for _ in range(size)]
        if kind == STRUCT:
            return self.struct()
        raise FooterError(f"unknown Thrift compact type {kind}")

    def struct(self) -> list:
        """A struct as a list of [field id, type, value], in the order written."""
        fields, last = [], 0
        while True:
            header = self.byte()
            if header == STOP:
                return fields
            kind, delta = header & 0x0F, header >> 4
            field = last + delta if delta else self.zigzag()
            last = field
            value = kind == TRUE if kind in (TRUE, FALSE) else self.value(kind)
            fields.append([field, kind, value])


class _Writer:
    def __init__(self):
        self.out = bytearray()

    def varint(self, n: int) -> None:
        while n >= 0x80:
            self.out.append((n & 0x7F) | 0x80)
            n >>= 7
        self.out.append(n)

    def zigzag(self, n: int) -> None:
        self.varint((n << 1) ^ (n >> 63))

    def value(self, kind: int, value) -> None:
        if kind in (TRUE, FALSE, BYTE):
            self.out.append(value)
        elif kind in (I16, I32, I64):
            self.zigzag(value)
        elif kind == DOUBLE:
            self.out += value
        elif kind == BINARY:
            self.varint(len(value))
            self.out += value
        elif kind in (LIST, SET):
            element, items = value
            if len(items) < 15:
                self.out.append(len(items) << 4 | element)
            else:
                self.out.append(0xF0 | element)
                self.varint(len(items))
            for item in items:
                self.value(element, item)
        elif kind == MAP:
            kinds, pairs = value
            self.varint(len(pairs))
            if pairs:
                self.out.append(kinds)
            for k, v in pairs:
                self.value(kinds >> 4, k)
                self.value(kinds & 0x0F, v)
        elif kind == STRUCT:
            self.struct(value)
        else:
            raise FooterError(f"unknown Thrift compact type {kind}")

    def struct(self, fields: list) -> None:
        last = 0
        for field, kind, value in fields:
            if kind in (TRUE, FALSE):
                kind = TRUE if value else FALSE
            if 0 < field - last <= 15:
                self.out.append((field - last) << 4 | kind)
            else:
                self.out.append(kind)
                self.zigzag(field)
            last = field
            if kind not in (TRUE, FALSE):
                self.value(kind, value)
        self.out.append(STOP)


def decode_footer(data: bytes) -> list:
    try:
        return _Reader(data).struct()
    except IndexError:
        raise FooterError("a Parquet footer cut short") from None


def encode_footer(fields: list) -> bytes:
    w = _Writer()
    w.struct(fields)
    return bytes(w.out)


def _field(fields: list, field_id: int):
    return next((f for f in fields if f[0] == field_id), None)


def split_piece(piece) -> tuple[memoryview, list]:
    """A whole Parquet file (bytes-like) -> (its row groups' bytes, after the leading magic; its footer)."""
    view = memoryview(piece)
    if len(view) < 12 or view[:4] != MAGIC or view[-4:] != MAGIC:
        raise FooterError("not a Parquet file")
    (length,) = struct.unpack("<I", view[-8:-4])
    start = len(view) - 8 - length
    if start < 4:
        raise FooterError("a Parquet footer longer than its file")
    return view[4:start], decode_footer(bytes(view[start:-8]))


def _shift(field: list, delta: int) -> None:
    # 0 is never where something starts (the magic is there): it is an offset left unset, as Arrow leaves
    # ColumnChunk.file_offset, and stays so
    if field[2] > 0:
        field[2] += delta


def _shift_group(group: list, delta: int, ordinal: int) -> None:
    for field in group:
        if field[0] == GROUP_FILE_OFFSET:
            _shift(field, delta)
        elif field[0] == GROUP_ORDINAL:
            field[2] = ordinal
        elif field[0] == GROUP_COLUMNS:
            for chunk in field[2][1]:
                for f in chunk:
                    if f[0] == CHUNK_OFFSET_INDEX:
                        # its page locations are absolute offsets inside a structure of the body
                        raise FooterError("a piece with a page index cannot be moved")
                    if f[0] in (CHUNK_FILE_OFFSET, CHUNK_COLUMN_INDEX):
                        _shift(f, delta)
                    elif f[0] == CHUNK_META:
                        for m in f[2]:
                            if m[0] in META_OFFSETS:
                                _shift(m, delta)


class Assembler:
    """Writes one Parquet file to ``file`` (at its start) from pieces appended in order, each a whole
    Parquet file of any number of row groups with the same schema. ``close`` writes the footer; a file
    with no pieces is left empty (the caller writes an empty Parquet file itself)."""

    def __init__(self, file):
        self.file = file
        self.position = 0           # bytes written so far
        self.template: list | None = None
        self.groups: list = []
        self.rows = 0

    def append(self, piece) -> None:
        body, footer = split_piece(piece)
        if self.template is None:
            self.file.write(MAGIC)
            self.position, self.template = len(MAGIC), footer
        delta = self.position - len(MAGIC)       # the piece's offsets count from its own magic's start
        for group in _field(footer, FILE_ROW_GROUPS)[2][1]:
            _shift_group(group, delta, len(self.groups))
            self.groups.append(group)
        self.rows += _field(footer, FILE_NUM_ROWS)[2]
        self.file.write(body)
        self.position += len(body)

    @property
    def empty(self) -> bool:
        return self.template is None

    def close(self) -> None:
        if self.template is None:
            return
        footer = []
        for field_id, kind, value in self.template:
            if field_id == FILE_NUM_ROWS:
                value = self.rows
            elif field_id == FILE_ROW_GROUPS:
                value = (value[0], self.groups)
            footer.append([field_id, kind, value])
        data = encode_footer(footer)
        self.file.write(data)
        self.file.write(struct.pack("<I", len(data)))
        self.file.write(MAGIC)
