"""The parsed log as a table for Python: ``logetl.read_log``."""
from __future__ import annotations

from logetl.errors import UsageError

#: what ``read_log`` returns, by ``into``
INTO = ("arrow", "polars", "duckdb")


def read_log(path: str, format=None, *, fields=None, into: str = "arrow", connection=None):
    """The records of the log at ``path`` (a file, a directory or a glob; compressed files too) parsed by
    logetl's kernel with log format ``format`` (a preset name such as ``combined``, ``common``, ``nginx``, an
    Apache ``LogFormat`` or nginx ``log_format`` string, a ``logetl.formats.LogFormat``; default
    ``combined``): one string column per field of the format (``fields``: those, in that order), exactly as
    parsed, the fields a format may lack (``combined``'s ``referer`` and ``user_agent``) null where the line
    lacks them. Malformed lines are not rows (``logetl sql`` and the runs count and trap them).

    ``into`` chooses what comes back:

    - ``"arrow"`` (default): a ``pyarrow.RecordBatchReader``, streamed: the kernel parses the log on its
      threads, a few chunks ahead of the reader, so a log of any size is read in bounded memory;
    - ``"polars"``: a ``polars.LazyFrame`` over the records (read whole into memory, then lazy);
    - ``"duckdb"``: a DuckDB relation over the stream (on ``connection``, default DuckDB's default one),
      which SQL can query as it streams.

    Example::

        import logetl
        reader = logetl.read_log("access.log")              # pyarrow.RecordBatchReader
        top = logetl.read_log("access.log", into="duckdb").aggregate("response, count(*) AS n", "response")
    """
    import pyarrow as pa

    from logetl import formats
    from logetl.engines import kernel
    from logetl.engines.local import scan as local
    from logetl.io import inputs
    from logetl.io.fs import LOCAL

    if into not in INTO:
        raise UsageError(f"read_log: into is one of {', '.join(INTO)}, not {into!r}")
    fmt = format if isinstance(format, formats.LogFormat) else formats.compile_format(format or "combined")
    keep = tuple(fields) if fields is not None else fmt.fields
    for f in keep:
        if f not in fmt.fields:
            raise UsageError(formats.missing_field(fmt, f))
    files = inputs.resolve(path, LOCAL)     # an input that cannot be read: one line (a UsageError)
    parser = kernel.Parser(fmt, keep, drop_dash=False)
    schema = pa.schema([(f, pa.string()) for f in keep])

    def batches():
        scan = local.Scan(files, columns=kernel.STRINGS, parser=parser).start()
        try:
            for parsed, _ in scan:
                if parsed.n_records:
                    yield pa.RecordBatch.from_arrays(_strings(parsed), schema=schema)
        finally:
            scan.close()

    reader = pa.RecordBatchReader.from_batches(schema, batches())
    if into == "polars":
        import polars as pl

        return pl.from_arrow(reader.read_all()).lazy()
    if into == "duckdb":
        import duckdb

        return (connection or duckdb.default_connection()).from_arrow(reader)
    return reader


def _strings(parsed):
    """A chunk's columns as Arrow strings (the kernel's own, or its views cast when it made views)."""
    import pyarrow as pa

    return [c if c.type == pa.string() else c.cast(pa.string()) for c in parsed.columns()]
