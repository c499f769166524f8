"""The local engine's SQL node (``assembly.Sql``, of ``pipe.sql`` and ``logetl sql``): the query runs in
DuckDB over the node's input, read as the table ``node.table``.

A query that reads its table once, straight off the parse (``Sql.streamed``), gets the kernel's Arrow strings
(no copy): held while they fit the run's memory budget, then read whole by DuckDB on all of its threads;
past the budget, streamed to the query as they are parsed, through a stream a few batches deep, so the log
is never held whole outside DuckDB's own operators. Any other query's input is held as Polars frames
(their own copy of the strings, not the parse's chunks), counted in the run's memory budget, and handed to
DuckDB as one Arrow table, without a copy; an input that outgrows the budget (or ``HOLD_BYTES``) goes
instead into Parquet files in the operator's spill directory (in the run's working directory), one a batch,
which DuckDB reads back (``read_parquet``) as often as the query reads its table. Polars writes a batch's
Parquet at memory speed (dictionary pages, LZ4); a DuckDB database file would take a copy of the strings
and compress them again when it is closed. DuckDB runs within what the budget leaves (``memory_limit``)
and spills its own intermediate results (a big join, sort or aggregation) to the same directory; a query
that needs more than that fails naming ``--memory-limit``, and nothing is published.

The query runs on a thread of its own (``Runner``), whose rows come back as Arrow record batches, each cast
to the node's declared types (DuckDB's HUGEINT sums and DECIMAL literals as logetl's integers and floats, a
timestamp without a zone as UTC). A run that ends early (a failure, a stop) interrupts the query
(``abort``): no DuckDB thread outlives it.
"""
from __future__ import annotations

import os
import queue
import threading

from logetl.engines.local.batch import Batch
from logetl.engines.local.expressions import DTYPES
from logetl.engines.local.operators import Op
from logetl.engines.local.spill import MiB, MemoryLimitExceeded, frame_bytes

#: rows per record batch DuckDB hands back (as the local engine's batches)
RESULT_ROWS = 131_072
#: DuckDB's threads: the two cores the parse kernel uses too
THREADS = 2
#: the least memory DuckDB is given, whatever the other operators of the run hold
MIN_DUCKDB = 64 * MiB
#: the most a query read more than once holds in memory before its input goes to Parquet files: Polars
#: writes them at memory speed, and what stays in memory beside DuckDB is DuckDB's (its groupings and joins
#: within their limit, spilled past it) rather than the whole input
HOLD_BYTES = 64 * MiB
#: the batches a streamed input may be ahead of DuckDB
STREAM_DEPTH = 4
#: seconds between two looks of the operator's thread at a signal while it waits for the query's (a signal
#: DuckDB's threads received wakes no wait of its own)
WAKE = 0.1

_END = object()


def _pl():
    import polars as pl

    return pl


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class SqlOp(Op):
    """``process`` streams each batch to the query (``streamed``) or holds it; ``finish`` ends the input and
    emits the rows."""

    def __init__(self, *args):
        super().__init__(*args)
        local = self.ctx.state
        self.budget = local.memory
        self.spill = local.spill_dir(self.node.name)
        self.held: list = []
        self.held_bytes = 0
        self.disk: list[str] = []   # the Parquet files of the input, once it outgrew memory
        self.spilled_rows = 0
        self.runner: Runner | None = None
        self.arrow: list = []       # a streamed input's batches while it fits the budget

    def process(self, batch, port):
        if self.node.streamed:
            self._stream(batch.arrow())
            return
        if self.disk:       # written at once: the batch's own frame, no copy of the strings it shares
            frame = batch.frame()
            if frame.height:
                self._insert(frame)
            return
        frame = batch.kept()
        if frame.height == 0:
            return
        self.held.append(frame)
        self.held_bytes += frame_bytes(frame)
        if self.budget.hold(self, self.held_bytes) or self.held_bytes > HOLD_BYTES:
            self._to_disk()

    def _stream(self, table) -> None:
        """A batch of a streamed input: held (as the kernel's Arrow arrays) while the input fits the budget, so
        that DuckDB reads it whole on all of its threads; past it, streamed to the query, the held first."""
        if self.runner is not None:
            self.runner.feed(table)
            return
        self.arrow.append(table)
        self.held_bytes += table.nbytes
        if self.budget.hold(self, self.held_bytes):
            held, self.arrow, self.held_bytes = self.arrow, [], 0
            self.runner = Runner(self, self._connect(), held[0].schema)
            for table in held:
                self.runner.feed(table)
            del held, table
            self.budget.release(self)

    def finish(self):
        if self.runner is None:
            self.runner = self._held_runner()
        try:
            self.runner.finish()
        finally:
            self.held = []
            self.budget.release(self)
        if self.spilled_rows:
            self.spill.runs = 1
        self.spill.report(self.ctx.run, self.node.name)

    def abort(self) -> None:
        """The run ends without this operator finishing: the query is interrupted and its thread ended."""
        if self.runner is not None:
            self.runner.abort()

    # --- DuckDB ----------------------------------------------------------------------------------------------

    def _connect(self, reserved: int = 0):
        import duckdb

        os.makedirs(self.spill.path, exist_ok=True)
        limit = max(MIN_DUCKDB, self.budget.share(self) - reserved)
        self.duckdb_limit = limit
        con = duckdb.connect(":memory:", config={
            "memory_limit": f"{limit // MiB}MB", "threads": THREADS,
            "temp_directory": os.path.join(self.spill.path, "duckdb.tmp"),
            # results in the query's order (ORDER BY) and, in a plain scan, the input's
            "preserve_insertion_order": True})
        con.execute("SET TimeZone='UTC'")
        return con

    def _to_disk(self) -> None:
        """The held batches into Parquet files in the spill directory, one a batch; what comes next too."""
        os.makedirs(self.spill.path, exist_ok=True)
        while self.held:
            self._insert(self.held.pop(0))
        self.held, self.held_bytes = [], 0
        self.budget.release(self)

    def _insert(self, frame) -> None:
        path = os.path.join(self.spill.path, f"input-{len(self.disk):06d}.parquet")
        frame.write_parquet(path, compression="lz4", statistics=False)
        self.disk.append(path)
        self.spilled_rows += frame.height
        self.spill.bytes_written += os.path.getsize(path)

    def _held_runner(self) -> "Runner":
        """The query over the held input (or its Parquet files), or over an empty one."""
        pl = _pl()
        if self.disk:       # the files in the input's order, which a plain scan keeps
            con = self._connect()
            files = ", ".join("'" + p.replace("'", "''") + "'" for p in self.disk)
            con.execute(f"CREATE VIEW {_quoted(self.node.table)} AS SELECT * FROM read_parquet([{files}])")
            return Runner(self, con, None)
        if self.arrow:      # the kernel's arrays, handed to DuckDB's scan: the query gets the whole share
            import pyarrow as pa

            self.budget.release(self)
            con = self._connect()
            schema = self.arrow[0].schema
            con.register(self.node.table, pa.concat_tables([t if t.schema == schema else t.cast(schema)
                                                            for t in self.arrow]))
            self.arrow = []
            return Runner(self, con, None)
        con = self._connect(reserved=self.held_bytes)
        frames = self.held or [self._empty()]
        table = pl.concat(frames, rechunk=False) if len(frames) > 1 else frames[0]
        con.register(self.node.table, table.to_arrow(compat_level=pl.CompatLevel.newest()))
        return Runner(self, con, None)

    def _empty(self):
        pl = _pl()
        previous = self.node.previous[0]
        return pl.DataFrame(schema={f: DTYPES[previous.types[f]](pl) for f in previous.fields})

    def emit_rows(self, batch) -> None:
        frame = _pl().from_arrow(batch)
        if frame.height:
            self.emit(Batch(self.node.fields, _typed(frame, self.node.types)))

    def failure(self, exc: BaseException) -> BaseException:
        """The exception the run fails with for one of the query's thread."""
        import duckdb

        if isinstance(exc, duckdb.OutOfMemoryException) and self.node.engine is not None:   # logetl sql
            return MemoryLimitExceeded(
                f"the SQL query needs more memory than the memory limit allows ({_size(self.budget.limit)}, "
                f"{_size(self.duckdb_limit)} of it for the query): give a higher --memory-limit")
        if isinstance(exc, duckdb.OutOfMemoryException):
            return MemoryLimitExceeded(
                f"operator {self.node.name!r} (sql) needs more memory than --memory-limit allows "
                f"({self.budget.limit / MiB:,.0f} MiB; DuckDB had {self.duckdb_limit / MiB:,.0f} MiB of it and "
                "spilled what it could to disk): raise --memory-limit")
        if isinstance(exc, duckdb.Error):
            return RuntimeError(f"SQL: {str(exc).splitlines()[0]}")
        return exc


class Runner:
    """The query on a thread of its own over ``con``: reading its table from the batches ``feed`` gives
    (``schema`` given: a stream), else from what ``con`` already holds; its result batches go back to the
    operator's thread, which emits them (``feed`` without waiting, ``finish`` until the last)."""

    def __init__(self, op: SqlOp, con, schema):
        self.op, self.con, self.schema = op, con, schema
        self.inbox: queue.Queue = queue.Queue(maxsize=STREAM_DEPTH)
        self.outbox: queue.Queue = queue.Queue()
        self.closed = False
        self.thread = threading.Thread(target=self._run, name="logetl-sql", daemon=True)
        self.thread.start()

    def _batches(self):
        while True:
            item = self.inbox.get()
            if item is _END:
                return
            yield item

    def _run(self) -> None:
        try:
            if self.schema is not None:
                import pyarrow as pa

                self.con.register(self.op.node.table, pa.RecordBatchReader.from_batches(self.schema, self._batches()))
            reader = self.con.sql(self.op.node.query).to_arrow_reader(RESULT_ROWS)
            for batch in reader:
                self.outbox.put(batch)
            self.outbox.put(_END)
        except BaseException as exc:   # handed to the operator's thread, which raises it
            self.outbox.put(exc)
            if self.schema is not None:
                while self.inbox.get() is not _END:    # let the feeding side finish
                    pass

    def feed(self, table) -> None:
        if table.schema != self.schema:
            table = table.cast(self.schema)
        for batch in table.to_batches():
            self._put(batch)
        self._drain(wait=False)

    def _put(self, item) -> None:
        while True:
            try:
                self.inbox.put(item, timeout=WAKE)
                return
            except queue.Full:
                continue

    def finish(self) -> None:
        try:
            if self.schema is not None:
                self._put(_END)
            self._drain(wait=True)
            self.thread.join()
        except BaseException:      # a stop while the query runs: interrupted before its connection closes
            self.abort()
            raise
        self._close()

    def abort(self) -> None:
        """Interrupts the query and ends its thread (the input's end given, what it emitted dropped)."""
        if self.closed:
            return
        self.con.interrupt()
        if self.schema is not None:
            while True:         # room for the end of the input, however full the stream was
                try:
                    self.inbox.put_nowait(_END)
                    break
                except queue.Full:
                    self._discard(self.inbox)
        while self.thread.is_alive():
            self._discard(self.outbox)
            self.thread.join(0.05)
        self._close()

    @staticmethod
    def _discard(q: queue.Queue) -> None:
        try:
            q.get_nowait()
        except queue.Empty:
            pass

    def _close(self) -> None:
        if not self.closed:
            self.closed = True
            self.con.close()

    def _drain(self, wait: bool) -> None:
        while True:
            try:
                item = self.outbox.get(timeout=WAKE) if wait else self.outbox.get_nowait()
            except queue.Empty:
                if wait:
                    continue
                return
            if item is _END:
                return
            if isinstance(item, BaseException):
                self.abort()
                raise self.op.failure(item)
            self.op.emit_rows(item)


def _size(n: int) -> str:
    return f"{n / (1 << 30):g} GiB" if n >= 1 << 30 else f"{n / (1 << 20):g} MiB"


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
