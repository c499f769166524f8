"""The parse step's hot path: the native kernel (``logetl._scan``) when it was built, else pure Python.

Both return a ``Parsed`` chunk with the same content: the kept records as TSV bytes (what a sink of the
unchanged fields writes), their columns on demand, and the line counts and malformed lines.
"""
from __future__ import annotations

from dataclasses import dataclass

from logetl import contract

try:
    from logetl._scan import parse_chunk as _native
except ImportError:  # no C compiler at install time
    _native = None

NATIVE = _native is not None
REASON_NAMES = {1: contract.INVALID_UTF8, 2: contract.NO_MATCH, 3: contract.TAB_OR_CR}


@dataclass
class Parsed:
    data: object                   # the raw chunk, a buffer (for trapping malformed lines)
    tsv: bytes
    n_records: int
    n_lines: int
    n_dash: int
    malformed: list                # (line index in chunk, start, end, reason code)
    views: bytes | None = None     # native: 5 Arrow string-view arrays over tsv
    rows: list | None = None       # fallback: field tuples

    def columns(self):
        """The records as Arrow arrays named by ``contract.FIELDS`` (no copy on the native path)."""
        import pyarrow as pa

        n = self.n_records
        if self.views is not None:
            data = pa.py_buffer(self.tsv)
            views = pa.py_buffer(self.views)
            return [pa.Array.from_buffers(pa.string_view(), n, [None, views.slice(k * n * 16, n * 16), data])
                    for k in range(5)]
        if self.rows is None:
            raise RuntimeError("this chunk was parsed without columns")
        cols = list(zip(*self.rows)) if self.rows else [()] * 5
        return [pa.array(list(c), pa.string()) for c in cols]


def parse_python(data, final: bool, columns: bool = True) -> Parsed:
    data = bytes(data)
    lines = data.split(b"\n")
    tail = lines.pop()
    if final and tail:
        lines.append(tail)
    rows, bad, dash, pos = [], [], 0, 0
    codes = {name: code for code, name in REASON_NAMES.items()}
    for i, raw in enumerate(lines):
        start, pos = pos, pos + len(raw) + 1
        try:
            fields = contract.parse_line(raw)
        except contract.Malformed as exc:
            bad.append((i, start, start + len(raw), codes[exc.reason]))
            continue
        if contract.keeps(fields):
            rows.append(fields)
        else:
            dash += 1
    tsv = "".join("\t".join(r) + "\n" for r in rows).encode("utf-8")
    return Parsed(data, tsv, len(rows), len(lines), dash, bad, rows=rows)


def parse(data, final: bool, columns: bool = True) -> Parsed:
    """Parse a chunk of whole lines (any buffer). ``columns=False`` when no operator will need columns:
    the native kernel then only writes the TSV."""
    if _native is None:
        return parse_python(data, final, columns)
    tsv, views, n, n_lines, n_dash, bad = _native(data, final, columns)
    return Parsed(data, tsv, n, n_lines, n_dash, bad, views=views)
