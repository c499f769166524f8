"""The local engine's unit of records: a ``Batch`` of kernel chunks or a Polars DataFrame."""
from __future__ import annotations

import io

from logetl.engines import kernel
from logetl.io.outputs import DELIMITED


def _pl():
    import polars as pl  # imported on first use: Branch never needs it

    return pl


class Batch:
    """Records with named fields: kernel chunks (``parsed``, a list) or a Polars DataFrame (``frame``).

    ``shares_chunk`` is true while the frame's strings are views into the kernel's chunk buffer: free for
    streaming operators, but an operator that keeps rows past the batch must ``kept()`` them, or it would
    keep every whole chunk alive."""

    __slots__ = ("fields", "_frame", "parsed", "shares_chunk", "_arrow")

    def __init__(self, fields, frame=None, parsed: list[kernel.Parsed] | None = None, shares_chunk: bool = False):
        self.fields = tuple(fields)
        self._frame = frame
        self.parsed = parsed
        self.shares_chunk = shares_chunk or parsed is not None
        self._arrow = None

    def arrow(self, schema=None):
        """The records as an Arrow table, converted once however many sinks write them: a kernel batch
        straight from its Arrow columns (strings or string views, without a Polars frame or a copy), a
        frame with Polars' own string views; cast to ``schema`` when one is given and differs."""
        if self._arrow is None or (schema is not None and self._arrow.schema != schema):
            import pyarrow as pa

            if self.parsed is not None and self._frame is None:
                names = list(self.fields)
                tables = [pa.Table.from_arrays(p.columns(), names=names) for p in self.parsed]
                table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
            else:
                table = self._frame.to_arrow(compat_level=_pl().CompatLevel.newest())
            self._arrow = table if schema is None or table.schema == schema else table.cast(schema)
        return self._arrow

    def derive(self, fields, frame) -> "Batch":
        """A batch computed from this one by a streaming operator."""
        return Batch(fields, frame, shares_chunk=self.shares_chunk)

    def kept(self):
        """The frame with its own compact copy of the strings it uses."""
        frame = self.frame()
        return _pl().from_arrow(frame.to_arrow()) if self.shares_chunk else frame

    def __len__(self) -> int:
        if self._frame is None:
            return sum(p.n_records for p in self.parsed)
        return self._frame.height

    def frame(self):
        if self._frame is None:
            pl = _pl()
            frames = [p.frame(self.fields) for p in self.parsed]
            self._frame = pl.concat(frames, rechunk=False) if len(frames) > 1 else frames[0]
        return self._frame

    def text(self, format: str):
        """The records as ``format`` (``tsv`` or ``csv``: ``outputs.DELIMITED``), in pieces (an iterator):
        TSV unquoted, CSV quoted as RFC 4180 (a field holding the separator, ``"``, CR or LF, and the empty
        string), each value rendered the same way in both."""
        if format == "tsv" and self.parsed is not None and self._frame is None \
                and all(p.tsv is not None for p in self.parsed):
            yield from (p.tsv for p in self.parsed)
            return
        self.frame()     # parsed as kernel.STRINGS, without the TSV (no TSV sink reads this parse)
        separator, end = DELIMITED[format]
        options = {"quote_style": "never"} if format == "tsv" else {
            # a record of one null field is "" (an empty line is a record readers skip)
            "quote_style": "necessary", "null_value": '""' if len(self.fields) == 1 else ""}
        # slice by slice, made as they are written: a whole merged frame's text (and getvalue's copy of
        # it) would otherwise be held at once
        for start in range(0, self._frame.height, 65_536):
            buf = io.BytesIO()
            self._frame.slice(start, 65_536).write_csv(buf, separator=separator, include_header=False,
                                                       line_terminator=end, **options)
            yield buf.getvalue()
