"""``logetl sql``'s pieces: the query's text, its flow, and the result shown the way a database shell shows it
(an aligned table on a terminal, TSV when piped)."""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

from logetl.errors import UsageError, signals_held

#: the table a query of ``logetl sql`` reads: the records of the log, one string column per field of its format
TABLE = "log"
#: the rows an aligned table shows (the whole result goes to a pipe)
SHOWN_ROWS = 40
#: a wider cell is cut, ending in an ellipsis
CELL_WIDTH = 60


def query_text(given: str) -> str:
    """The query: ``given`` itself, or the text of the file ``@FILE``."""
    if not given.startswith("@"):
        return given
    path = given[1:]
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"cannot read the query file {path!r}: {reason}") from None


def query_flow(query: str, engine: str, log_format: str | None, format_file: str | None,
               output_format: str | None, to_output: bool):
    """``read(format) -> sql(query) -> write``, the query checked for ``engine`` (before anything runs) over
    the table ``log``; the parse builds only the fields the query reads."""
    from logetl import assembly, formats
    from logetl.api import read
    from logetl.sql.dialect import referenced

    if not to_output and output_format not in (None, "tsv"):
        raise UsageError(f"--output-format {output_format} needs --output (a printed result is a table or TSV)")
    fmt = formats.resolve(log_format, format_file)
    result = assembly.Sql("sql", read(fmt), query, TABLE, engine)
    fields = list(fmt.fields)
    kept = referenced(query, fields)
    if kept is not None and kept != fields:
        narrow = assembly.Sql("sql", read(fmt, fields=kept), query, TABLE, engine)
        if (narrow.fields, narrow.types) == (result.fields, result.types):
            result = narrow
    return assembly.Flow("sql", [result.write("output")], "a SQL query over the log")


@contextlib.contextmanager
def result_directory(output_format: str | None):
    """A directory for a printed result (removed after)."""
    root = None
    try:
        with signals_held():    # made and known together: a stop as it is made still removes it
            root = tempfile.mkdtemp(prefix="logetl-sql-")
        yield os.path.join(root, "result")
    finally:
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)


def show(directory: str, flow, stream, header: bool = True) -> None:
    """The result in ``directory`` (TSV parts without a header) on ``stream``: an aligned table of its first
    rows on a terminal, else TSV (with a line of the column names when ``header``)."""
    node = flow.sinks[0].previous[0]
    names = sorted(n for n in os.listdir(directory) if n.startswith("part-"))
    out = stream.buffer if hasattr(stream, "buffer") else None
    if not stream.isatty():
        if out is None:
            raise RuntimeError("a printed result needs a binary stream")
        if header:
            out.write(("\t".join(node.fields) + "\n").encode())
        for name in names:
            with open(os.path.join(directory, name), "rb") as f:
                shutil.copyfileobj(f, out)
        out.flush()
        return
    rows, total = [], 0
    for name in names:
        with open(os.path.join(directory, name), encoding="utf-8", newline="\n") as f:
            for line in f:
                total += 1
                if len(rows) < SHOWN_ROWS:
                    rows.append(line.rstrip("\n").split("\t"))
    stream.write(table(node.fields, [node.types[f] for f in node.fields], rows))
    more = f", the first {len(rows)} shown (--output DIR, or a pipe, for all)" if total > len(rows) else ""
    stream.write(f"({total:,} row{'s' if total != 1 else ''}{more})\n")
    stream.flush()


def table(fields, types, rows) -> str:
    """``rows`` under ``fields`` as an aligned text table: numbers right-aligned, cells past ``CELL_WIDTH``
    cut."""
    def cut(cell: str) -> str:
        return cell if len(cell) <= CELL_WIDTH else cell[:CELL_WIDTH - 1] + "…"

    cells = [[cut(c) for c in row] for row in rows]
    widths = [max([len(f)] + [len(r[i]) for r in cells]) for i, f in enumerate(fields)]
    right = [t in ("integer", "float") for t in types]

    def line(values) -> str:
        return "  ".join(v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right)).rstrip() + "\n"

    return line(fields) + line(["-" * w for w in widths]) + "".join(line(r) for r in cells)
