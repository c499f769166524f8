"""A query over the parsed log as a node of a flow (``Query``), and how each engine runs it.

``logetl sql`` builds ``read(format) -> Query -> write``, so a query is counted, trapped, thresholded,
monitored and written like every other run. The local engine streams the records into DuckDB as Arrow
batches (the kernel's string views, no copy, no re-parse), within the run's memory budget, spilling to the
run's working directory; the Spark engine runs the query translated to Spark SQL over the parsed DataFrame.
"""
from __future__ import annotations

import functools
import os
import queue
import threading

from logetl import assembly
from logetl.sql import dialect
from logetl.traits import BLOCKING

#: the table a query reads: the records of the log, one string column per field of its format
TABLE = "log"


class Query(assembly.Pipe, traits=BLOCKING):
    """The rows of the DuckDB query ``query`` over the table ``log`` (its input's records); fields and types
    are the query's result columns (``dialect.check``). Blocking; its output is in the query's order
    (``ORDER BY``), else in no defined order."""

    kind = "sql"

    def __init__(self, name: str | None, previous: assembly.Pipe, query: str, engine: str = "local"):
        self.query, self.engine = query, engine
        super().__init__(name, previous)

    def _resolve(self) -> None:
        checked = dialect.check(self.query, self.engine, {TABLE: list(self._input().fields)})
        self.checked = checked
        self.fields = checked.fields
        self.types = dict(checked.columns)

    def describe(self) -> str:
        text = " ".join(self.query.split())
        return text if len(text) <= 80 else text[:77] + "..."


# --- the local engine: DuckDB, fed the records as Arrow batches ----------------------------------------------------

_END = object()


class LocalQuery:
    """Runs the query in DuckDB on a thread of its own, reading the records as they come (an Arrow stream the
    operator feeds, a few batches ahead at most), so the log is never held whole outside DuckDB's own
    operators, which spill past the memory limit."""

    def __init__(self, op):
        from logetl.engines.local import batch, scan

        self.op, self.batch, self.scan = op, batch, scan
        self.inbox: queue.Queue = queue.Queue(maxsize=4)
        self.outbox: queue.Queue = queue.Queue()
        self.thread = None
        self.schema = None
        self.con = None

    def start(self, schema) -> None:
        import duckdb

        state = self.op.ctx.state
        spill = state.spill_dir(self.op.node.name)
        os.makedirs(spill.path, exist_ok=True)
        self.limit, self.budget = state.memory.limit, state.memory.buffers
        self.con = duckdb.connect(config={
            "memory_limit": f"{max(self.budget >> 20, 16)}MiB", "temp_directory": spill.path,
            "threads": os.cpu_count() or 1})
        try:    # times in UTC, as on Spark (without DuckDB's ICU extension they are UTC already)
            self.con.execute("SET TimeZone = 'UTC'")
        except duckdb.Error:
            pass
        self.schema = schema
        self.thread = threading.Thread(target=self._run, name="logetl-sql", daemon=True)
        self.thread.start()

    def _batches(self):
        while True:
            item = self.inbox.get()
            if item is _END:
                return
            yield item

    def _run(self) -> None:
        import pyarrow as pa

        try:
            self.con.register(TABLE, pa.RecordBatchReader.from_batches(self.schema, self._batches()))
            reader = self.con.sql(self.op.node.query).to_arrow_reader(self.scan.BATCH_ROWS)
            for batch in reader:
                self.outbox.put(batch)
            self.outbox.put(_END)
        except BaseException as exc:   # handed to the operator's thread, which raises it
            self.outbox.put(exc)
            while self.inbox.get() is not _END:    # let the feeding side finish
                pass

    def feed(self, table) -> None:
        if self.schema is not None and table.schema != self.schema:
            table = table.cast(self.schema)
        for batch in table.to_batches():
            self.inbox.put(batch)
        self._drain(wait=False)

    def finish(self) -> None:
        self.inbox.put(_END)
        try:
            self._drain(wait=True)
            self.thread.join()
        finally:
            self.con.close()

    def _drain(self, wait: bool) -> None:
        while True:
            try:
                item = self.outbox.get(block=wait)
            except queue.Empty:
                return
            if item is _END:
                return
            if isinstance(item, BaseException):
                if not wait:            # the query's thread waits for the end of the input to finish
                    self.inbox.put(_END)
                    self.thread.join()
                    self.con.close()
                raise self._failure(item)
            self.op.emit(self.batch.Batch(self.op.node.fields, _typed(item, self.op.node)))

    def _failure(self, exc: BaseException) -> BaseException:
        import duckdb

        if isinstance(exc, duckdb.OutOfMemoryException):
            return MemoryError(f"the SQL query needs more memory than the memory limit allows ({_size(self.limit)}, "
                               f"{_size(self.budget)} of it for the query): give a higher --memory-limit")
        if isinstance(exc, duckdb.Error):
            return RuntimeError(f"SQL: {str(exc).splitlines()[0]}")
        return exc


def _size(n: int) -> str:
    return f"{n / (1 << 30):g} GiB" if n >= 1 << 30 else f"{n / (1 << 20):g} MiB"


def _typed(batch, node):
    """A result batch as a Polars frame of the node's types (DuckDB's HUGEINT sums, DECIMAL literals, DATEs
    and naive timestamps made logetl's integers, floats, strings and UTC timestamps)."""
    import polars as pl

    from logetl.engines.local.expressions import DTYPES

    frame = pl.from_arrow(batch)
    casts = []
    for name, kind in node.types.items():
        target = DTYPES[kind](pl)
        dtype = frame.schema[name]
        if dtype == target:
            continue
        column = pl.col(name)
        if isinstance(dtype, pl.Datetime):
            column = column.dt.cast_time_unit("us")
            column = column.dt.replace_time_zone("UTC") if dtype.time_zone is None \
                else column.dt.convert_time_zone("UTC")
        casts.append(column.cast(target).alias(name))
    return frame.with_columns(casts) if casts else frame


@functools.cache
def local_op():
    """The local engine's operator class for ``Query`` (``engines/local/operators.py``'s ``OPS``)."""
    from logetl.engines.local.operators import Op

    class QueryOp(Op):
        def __init__(self, *args):
            super().__init__(*args)
            self.runner = LocalQuery(self)

        def process(self, batch, port):
            table = batch.arrow()
            if self.runner.thread is None:
                self.runner.start(table.schema)
            self.runner.feed(table)

        def finish(self):
            if self.runner.thread is None:      # no records: the query over an empty table
                import pyarrow as pa

                fields = self.node.previous[0].fields
                self.runner.start(pa.schema([(f, pa.string()) for f in fields]))
            self.runner.finish()

    return QueryOp


# --- Spark: the query translated, over the parsed DataFrame ---------------------------------------------------------

_SPARK_TYPES = {"string": "string", "integer": "bigint", "float": "double", "boolean": "boolean",
                "timestamp": "timestamp"}
_views = iter(range(1, 1 << 62))
_views_lock = threading.Lock()


def spark_query(node: Query, inputs):
    """The node's DataFrame: its input as a temporary view of a name of its own, the query translated to Spark
    SQL over it, each column cast to the node's type; numbered in the query's order when it has one."""
    from pyspark.sql import functions as F

    from logetl.engines.spark.expressions import column
    from logetl.engines.spark.operators import _renumbered

    df = inputs[0]
    with _views_lock:
        view = f"logetl_sql_{os.getpid()}_{next(_views)}"
    df.select(*[column(f) for f in node.previous[0].fields]).createOrReplaceTempView(view)
    result = df.sparkSession.sql(dialect.to_spark(node.query, tables={TABLE: view}))
    result = result.select(*[F.col(f"`{c}`").cast(_SPARK_TYPES[node.types[f]]).alias(f)
                             for c, f in zip(result.columns, node.fields)])
    return _renumbered(result) if node.checked.ordered else result
