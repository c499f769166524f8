"""The parse step's hot path: the native kernel (``logetl._scan``) when it was built, else pure Python.

Both return a ``Parsed`` chunk with the same content: the kept records as TSV bytes (what a sink of the
unchanged fields writes), their columns on demand, and the line counts and malformed lines.
"""
from __future__ import annotations

from dataclasses import dataclass

from logetl import contract
from logetl.formats import Header, NotRequest

try:
    from logetl._scan import export_columns as _export
    from logetl._scan import parse_chunk as _native
    from logetl._scan import parse_format as _native_format
    from logetl import _scan
except ImportError:  # no C compiler at install time
    _native = _native_format = _export = _scan = None
#: the segmented parse (``w3c``), absent from a kernel built before it
_native_segments = getattr(_scan, "parse_segments", None)

NATIVE = _native is not None
#: what a parse builds (``columns``): the TSV only, the TSV and Arrow string views over it, or Arrow
#: strings instead of the TSV (the kernel's modes 0, 1 and 2; True and False still mean VIEWS and NONE)
NONE, VIEWS, STRINGS = 0, 1, 2
#: a kernel built before STRINGS existed (a stale build) would take 2 for "true": it is asked for VIEWS
_STRINGS_BUILT = getattr(_scan, "COLUMN_MODES", 2) > STRINGS
REASON_NAMES = {1: contract.INVALID_UTF8, 2: contract.NO_MATCH, 3: contract.TAB_OR_CR}


@dataclass
class Parsed:
    data: object                   # the raw chunk, a buffer (for trapping malformed lines)
    tsv: bytes | None              # None: parsed as STRINGS (for Parquet sinks only), without the TSV
    n_records: int
    n_lines: int
    n_dash: int
    malformed: list                # (line index in chunk, start, end, reason code)
    views: bytes | None = None     # native: one Arrow string-view array per field over tsv
    strings: tuple | None = None   # native, columns=STRINGS: (offsets, per-field values) of Arrow string arrays
    rows: list | None = None       # fallback: field tuples
    n_fields: int = 5
    valid: bytes | None = None     # native: the validity bitmap of the records for the fields ``nullable``
    nullable: tuple = ()           # the positions (among the fields emitted) of fields that may be null
    n_header: int = 0              # header lines of the format (CloudFront's, W3C's directives): counted apart
    n_other: int = 0               # lines of the format that are not requests (HAProxy's TCP lines, notices)

    @property
    def n_null(self) -> int:
        """Records whose nullable fields are null (native: the zero bits of ``valid``)."""
        if self.valid is None:
            return 0
        return self.n_records - int.from_bytes(self.valid, "little").bit_count()

    def frame(self, names):
        """The records as a Polars DataFrame with columns ``names``. On the native path the kernel hands
        its buffers over through the Arrow C data interface (``export_columns``): no copy, and no pyarrow
        (whose import costs a tenth of a second that a run without Parquet or spilling need not pay)."""
        import polars as pl

        if self.views is not None:
            return pl.DataFrame(_ArrowColumns(self, tuple(names)))
        import pyarrow as pa

        return pl.from_arrow(pa.Table.from_arrays(self.columns(), names=list(names)))

    def columns(self):
        """The records as Arrow arrays, one per field emitted (no copy on the native path)."""
        import pyarrow as pa

        n, width = self.n_records, self.n_fields
        if self.strings is not None:
            offsets, values = pa.py_buffer(self.strings[0]), self.strings[1]
            return [pa.Array.from_buffers(pa.string(), n, [self._validity(k), offsets.slice(k * (n + 1) * 4, (n + 1) * 4),
                                                           pa.py_buffer(values[k])], null_count=self._nulls(k))
                    for k in range(width)]
        if self.views is not None:
            data = pa.py_buffer(self.tsv)
            views = pa.py_buffer(self.views)
            return [pa.Array.from_buffers(pa.string_view(), n, [self._validity(k), views.slice(k * n * 16, n * 16),
                                                                data], null_count=self._nulls(k))
                    for k in range(width)]
        if self.rows is None:
            raise RuntimeError("this chunk was parsed without columns")
        cols = list(zip(*self.rows)) if self.rows else [()] * width
        return [pa.array(list(c), pa.string()) for c in cols]


    def _validity(self, k: int):
        import pyarrow as pa

        return pa.py_buffer(self.valid) if self.valid is not None and k in self.nullable else None

    def _nulls(self, k: int) -> int:
        return self.n_null if self.valid is not None and k in self.nullable else 0


class _ArrowColumns:
    """A native chunk's columns as an object of the Arrow PyCapsule interface (``__arrow_c_array__``)."""

    __slots__ = ("parsed", "names")

    def __init__(self, parsed: Parsed, names: tuple[str, ...]):
        self.parsed, self.names = parsed, names

    def __arrow_c_array__(self, requested_schema=None):
        p = self.parsed
        if p.valid is None:
            return _export(p.tsv, p.views, p.n_records, self.names)
        return _export(p.tsv, p.views, p.n_records, self.names, p.valid, p.nullable, p.n_null)


def _parse_lines(data, final: bool, match, n_fields: int) -> Parsed:
    """The pure-Python parse loop: ``match(raw, start)`` gives a line's record (a tuple of the fields
    emitted), None for a record dropped for its size ``-``, or raises ``Header``, ``NotRequest`` or
    ``contract.Malformed``."""
    data = bytes(data)
    lines = data.split(b"\n")
    tail = lines.pop()
    if final and tail:
        lines.append(tail)
    rows, bad, dash, header, other, pos = [], [], 0, 0, 0, 0
    codes = {name: code for code, name in REASON_NAMES.items()}
    for i, raw in enumerate(lines):
        start, pos = pos, pos + len(raw) + 1
        try:
            fields = match(raw, start)
        except Header:   # a header line of the format: neither a record nor malformed, counted apart
            header += 1
            continue
        except NotRequest:   # likewise a line of the format that is not a request
            other += 1
            continue
        except contract.Malformed as exc:
            bad.append((i, start, start + len(raw), codes[exc.reason]))
            continue
        if fields is None:
            dash += 1
        else:
            rows.append(fields)
    tsv = "".join("\t".join(v or "" for v in r) + "\n" for r in rows).encode("utf-8")   # null: empty
    return Parsed(data, tsv, len(rows), len(lines), dash, bad, rows=rows, n_fields=n_fields, n_header=header,
                  n_other=other)


def parse_python(data, final: bool, columns: bool = True, parser: "Parser | None" = None,
                 drop_dash: bool = True) -> Parsed:
    """The pure-Python parse: ``parser`` None is the original expression's five fields; ``drop_dash`` drops
    the records whose size is ``-`` (the three programs' rule; a parser says it itself)."""

    def match(raw, start):
        if parser is None:
            fields = contract.parse_line(raw)
            return fields if not drop_dash or contract.keeps(fields) else None
        fields = parser.format.parse_line(raw)
        if parser.size_index >= 0 and fields[parser.size_index] == "-":
            return None
        return fields if parser.out == tuple(range(len(fields))) else tuple(fields[k] for k in parser.out)

    return _parse_lines(data, final, match, len(parser.out) if parser else 5)


_ALL = tuple(range(len(contract.FIELDS)))


def parse(data, final: bool, columns: int = VIEWS, out: tuple[int, ...] = _ALL, drop_dash: bool = True) -> Parsed:
    """Parse a chunk of whole lines (any buffer) with the original expression, emitting the fields ``out``
    (indexes into ``formats.LEGACY.fields``: the expression's five, then the tail's ``referer`` and
    ``user_agent``, which may be null), dropping the records whose size is ``-`` when ``drop_dash`` (the
    three programs' rule). ``columns``: NONE when no operator will need columns (the native
    kernel then only writes the TSV), VIEWS (string views over the TSV, no copy: what Polars takes), STRINGS
    (Arrow strings instead of the TSV: what Parquet's writer encodes fastest; the pure-Python fallback makes
    the TSV too)."""
    if _native is None:
        from logetl import formats

        return Parser(formats.LEGACY, tuple(formats.LEGACY.fields[i] for i in out), native=False,
                      drop_dash=drop_dash).parse(data, final, columns)
    if columns == STRINGS and not _STRINGS_BUILT:
        columns = VIEWS
    tsv, cols, n, n_lines, n_dash, bad, valid, _, _ = _native(data, final, int(columns), out, 4 if drop_dash else -1)
    nullable = tuple(k for k, i in enumerate(out) if i >= len(contract.FIELDS))
    return _parsed(data, tsv, n, n_lines, n_dash, bad, cols, columns, len(out), valid, nullable)


def _parsed(data, tsv, n, n_lines, n_dash, bad, cols, columns, width, valid=None, nullable=(), n_header=0,
            n_other=0) -> Parsed:
    if columns == STRINGS:
        return Parsed(data, tsv, n, n_lines, n_dash, bad, strings=cols, n_fields=width, valid=valid,
                      nullable=nullable, n_header=n_header, n_other=n_other)
    return Parsed(data, tsv, n, n_lines, n_dash, bad, views=cols, n_fields=width, valid=valid, nullable=nullable,
                  n_header=n_header, n_other=n_other)


class Parser:
    """A log format (``logetl.formats``) bound to the fields a parse emits (``keep``, in that order).
    ``parse`` is the native kernel when it was built, else the pure-Python matcher; ``native=False``
    forces the latter. ``drop_dash``: drop the records whose size is ``-`` (the three programs' rule, their
    step ``drop_size_dash`` folded into the parse; a format without ``size`` drops nothing)."""

    def __init__(self, fmt, keep: tuple[str, ...] | None = None, native: bool = True, drop_dash: bool = True):
        self.format = fmt
        self.keep = tuple(keep or fmt.fields)
        self.native = native and _native is not None
        self.drop_dash = drop_dash
        self.out = tuple(fmt.fields.index(f) for f in self.keep)
        self.size_index = fmt.size_index() if drop_dash else -1
        #: the format's columns change within a file (``w3c``): ``parse_from`` takes the header before a chunk
        self.segmented = getattr(fmt, "segmented", False)
        if self.segmented:
            from logetl import w3c

            self._w3c, self._programs = w3c, {}
            self.plus = tuple(int(f in w3c.PLUS) for f in self.keep)
            self.native = self.native and _native_segments is not None
        elif not fmt.legacy:
            self._program = fmt.native_program()

    def _segment_program(self, cols: tuple) -> tuple:
        """(program, out, size field) for lines of columns ``cols`` (``w3c``), made once a header."""
        got = self._programs.get(cols)
        if got is None:
            prog, out = self._w3c.program(cols)
            size = out[self._w3c.FIELDS.index("size")] if self.drop_dash else -1
            got = self._programs[cols] = (prog, tuple(out[self._w3c.FIELDS.index(f)] for f in self.keep), size)
        return got

    def parse_from(self, data, final: bool, columns: int = VIEWS, before: bytes | None = None) -> Parsed:
        """A chunk of a ``w3c`` log whose last ``#Fields:`` line before it is ``before`` (None: none, the
        default columns): each run of lines between ``#Fields:`` lines parsed with a program of its own."""
        segs = self._w3c.segments(data, before)
        if not self.native:
            return self._parse_from_python(data, final, segs)
        if columns == STRINGS and not _STRINGS_BUILT:
            columns = VIEWS
        native = tuple((start, *self._segment_program(cols)) for start, cols in segs)
        tsv, cols, n, n_lines, n_dash, bad, _, n_header, n_other = _native_segments(data, final, int(columns), native,
                                                                           self.plus, int(self.drop_dash))
        return _parsed(data, tsv, n, n_lines, n_dash, bad, cols, columns, len(self.out), n_header=n_header,
                       n_other=n_other)

    def _parse_from_python(self, data, final: bool, segs: list) -> Parsed:
        """``parse_from`` without the kernel: the reference matcher line by line, each line with the columns
        of its segment."""
        w3c, size, seg = self._w3c, self._w3c.FIELDS.index("size"), [0]

        def match(raw, start):
            while seg[0] + 1 < len(segs) and segs[seg[0] + 1][0] <= start:
                seg[0] += 1
            cols = segs[seg[0]][1]
            fields = w3c.parse_line(raw, cols)
            if self.drop_dash and w3c.scan(raw.removesuffix(b"\r"), cols)[size] == b"-":
                return None
            return tuple(fields[w3c.FIELDS.index(f)] for f in self.keep)

        return _parse_lines(data, final, match, len(self.out))

    def parse(self, data, final: bool, columns: int = VIEWS) -> Parsed:
        if self.segmented:
            return self.parse_from(data, final, columns)
        if self.format.legacy:
            if self.native:
                return parse(data, final, columns, self.out, self.drop_dash)
            return parse_python(data, final, columns, self if self.out != _ALL else None, self.drop_dash)
        if not self.native:
            return parse_python(data, final, columns, self)
        if columns == STRINGS and not _STRINGS_BUILT:
            columns = VIEWS
        tsv, cols, n, n_lines, n_dash, bad, _, n_header, n_other = _native_format(data, final, int(columns),
                                                                                  self._program,
                                                                         self.out, self.size_index)
        return _parsed(data, tsv, n, n_lines, n_dash, bad, cols, columns, len(self.out), n_header=n_header,
                       n_other=n_other)
