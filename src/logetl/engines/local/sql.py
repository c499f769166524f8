"""The local engine's SQL step (``assembly.Sql``): the query runs in DuckDB over the step's input.

The input's batches are held as Polars frames (their own copy of the strings, not the parse's chunks),
counted in the run's memory budget, and handed to DuckDB as one Arrow table, without a copy. An input that
outgrows the budget goes instead into a DuckDB database file in the operator's spill directory (in the
run's working directory), which DuckDB reads back in blocks. DuckDB runs within what the budget leaves
(``memory_limit``) and spills its own intermediate results (a big join, sort or aggregation) to the same
directory; a query that needs more than that fails naming ``--memory-limit``, and nothing is published.

The rows come back as Arrow record batches, each cast to the step's declared types (``Sql.types``: DuckDB's
HUGEINT sums and DECIMAL literals as logetl's integers and floats, a timestamp without a zone as UTC).
"""
from __future__ import annotations

import os

from logetl.engines.local.batch import Batch
from logetl.engines.local.expressions import DTYPES
from logetl.engines.local.operators import Op
from logetl.engines.local.spill import MiB, MemoryLimitExceeded, frame_bytes
from logetl.sqlstep import INPUT, INPUT_TYPES

#: rows per record batch DuckDB hands back (as the local engine's batches)
RESULT_ROWS = 131_072
#: DuckDB's threads: the two cores the parse kernel uses too
THREADS = 2
#: the least memory DuckDB is given, whatever the other operators of the run hold
MIN_DUCKDB = 64 * MiB


def _pl():
    import polars as pl

    return pl


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class SqlOp(Op):
    """``process`` holds each batch, ``finish`` runs the query and emits its rows."""

    def __init__(self, *args):
        super().__init__(*args)
        local = self.ctx.state
        self.budget = local.memory
        self.spill = local.spill_dir(self.node.name)
        self.held: list = []
        self.held_bytes = 0
        self.disk = None            # the DuckDB connection of the database file, once the input outgrew memory
        self.spilled_rows = 0

    def process(self, batch, port):
        frame = batch.kept()
        if frame.height == 0:
            return
        if self.disk is not None:
            self._insert(self.disk, frame)
            return
        self.held.append(frame)
        self.held_bytes += frame_bytes(frame)
        if self.budget.hold(self, self.held_bytes):
            self._to_disk()

    # --- DuckDB ----------------------------------------------------------------------------------------------

    def _connect(self, database: str = ":memory:", reserved: int = 0):
        import duckdb

        os.makedirs(self.spill.path, exist_ok=True)
        limit = max(MIN_DUCKDB, self.budget.share(self) - reserved)
        self.duckdb_limit = limit
        con = duckdb.connect(database, config={
            "memory_limit": f"{limit // MiB}MB", "threads": THREADS,
            "temp_directory": os.path.join(self.spill.path, "duckdb.tmp"),
            # results in the query's order (ORDER BY) and, in a plain scan, the input's
            "preserve_insertion_order": True})
        con.execute("SET TimeZone='UTC'")
        return con

    def _input_types(self) -> list[tuple[str, str]]:
        previous = self.node.previous[0]
        return [(f, INPUT_TYPES[previous.types[f]]) for f in previous.fields]

    def _to_disk(self) -> None:
        """The held batches into a table of a database file in the spill directory; what comes next too."""
        self.disk = self._connect(os.path.join(self.spill.path, "input.duckdb"))
        columns = ", ".join(f"{_quoted(f)} {t}" for f, t in self._input_types())
        self.disk.execute(f"CREATE TABLE {INPUT} ({columns})")
        for frame in self.held:
            self._insert(self.disk, frame)
        self.held, self.held_bytes = [], 0
        self.budget.release(self)

    def _insert(self, con, frame) -> None:
        arrow = frame.to_arrow(compat_level=_pl().CompatLevel.newest())
        con.register("logetl_batch", arrow)
        try:
            con.execute(f"INSERT INTO {INPUT} SELECT * FROM logetl_batch")
        finally:
            con.unregister("logetl_batch")
        self.spilled_rows += frame.height
        self.spill.bytes_written = os.path.getsize(os.path.join(self.spill.path, "input.duckdb"))

    def _empty(self):
        pl = _pl()
        previous = self.node.previous[0]
        return pl.DataFrame(schema={f: DTYPES[previous.types[f]](pl) for f in previous.fields})

    def finish(self):
        import duckdb

        pl = _pl()
        con = self.disk
        if con is None:
            con = self._connect(reserved=self.held_bytes)
            frames = self.held or [self._empty()]
            table = pl.concat(frames, rechunk=False) if len(frames) > 1 else frames[0]
            con.register(INPUT, table.to_arrow(compat_level=pl.CompatLevel.newest()))
        else:
            self.spill.runs = 1
        try:
            reader = con.sql(self.node.query).to_arrow_reader(RESULT_ROWS)
            for batch in reader:
                self._emit_rows(pl.from_arrow(batch))
        except duckdb.OutOfMemoryException:
            memory = self.budget
            raise MemoryLimitExceeded(
                f"operator {self.node.name!r} (sql) needs more memory than --memory-limit allows "
                f"({memory.limit / MiB:,.0f} MiB; DuckDB had {self.duckdb_limit / MiB:,.0f} MiB of it and spilled "
                "what it could to disk): raise --memory-limit") from None
        finally:
            con.close()
            self.held = []
            self.budget.release(self)
        self.spill.report(self.ctx.run, self.node.name)

    def _emit_rows(self, frame) -> None:
        if frame.height == 0:
            return
        self.emit(Batch(self.node.fields, _typed(frame, self.node.types)))


def _typed(frame, types: dict[str, str]):
    """``frame`` with each column of its declared logetl type (DuckDB's own types cast: see the module)."""
    pl = _pl()
    columns = []
    for f, kind in types.items():
        target = DTYPES[kind](pl)
        got = frame.schema[f]
        c = pl.col(f)
        if got == target:
            columns.append(c)
        elif isinstance(got, pl.Datetime):
            c = c.dt.replace_time_zone("UTC") if got.time_zone is None else c.dt.convert_time_zone("UTC")
            columns.append(c.dt.cast_time_unit("us"))
        else:
            columns.append(c.cast(target, strict=True))
    return frame.select(columns)
