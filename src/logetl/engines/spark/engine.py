"""The distributed engine: runs the same flow definitions on Apache Spark (``--hdfs``).

Each step compiles to Spark DataFrame operations with built-in functions only on the per-record path after
the parse (no Python UDFs). The parse runs logetl's native kernel in the executors' JVMs (``spark_jvm``: a
``mapPartitions`` of logetl's Java class calling the kernel through JNI, its jar going with the application)
when they can load it, else on the executors' Python workers over Arrow batches (``spark_native``,
``mapInArrow``) when their Python can import it, else with Spark's regular expressions; each path is checked
once per Spark application (``jvm_check``, ``python_check``), ``--conf
logetl.parse=auto|native|jvm|python|builtin`` forces one, and each run says which in a notice. Paths are
whatever Hadoop's FileSystem accepts (``hdfs://``, ``file://``, ``s3a://`` when configured); plain paths use
the cluster's default file system.

How the contract and the orderings are kept, so that outputs are byte-identical to the local engine's:

- Lines: ``spark.read.text`` with ``lineSep="\n"`` (Spark's default also splits on ``\r``); the raw
  bytes are kept, so ``is_valid_utf8`` finds invalid UTF-8; one trailing ``\r`` is cut with
  ``\r\\z``; Java's regex engine has ASCII classes by default, and ``(?s)`` makes ``.`` match anything.
  The kernel paths cast the raw bytes to binary and the kernel applies the contract itself; every path
  gives each line a ``_status`` (0 kept, 1-3 the reasons in ``contract.REASONS`` order, 4 size ``-``).
- Input order: one ``read.text`` per input file, each with its input's index, or one per run of
  consecutive small files, sorted back to input order (``_packed``: Spark orders the files of a
  multi-file read by size); the reads are unioned in input order and then parsed by one operator; within
  a file, splits keep their offset order. So partition order is input order, ``monotonically_increasing_id``
  is a global input-order key (``_order``), and a sink of unsorted records writes parts whose
  concatenation in name order is the input order, with no shuffle but the small files'.
- TAB/CR in a field: only fields and the separators ' ', '[', ']', '"' precede the end of the size, and
  ident, user and status cannot hold TAB/CR; so a field holds one exactly when the TSV of the five fields
  holds a CR or more than four TABs.
- Expressions compile through ``spark_expressions.COMPILE`` (one entry per ``logetl.expressions`` class)
  and operators through ``OPERATORS`` (one entry per assembly node class); ``check`` refuses anything
  missing from them before the run starts.
- ``_order`` travels with the records while their order is defined, and every operator that defines an
  order re-assigns it (``monotonically_increasing_id`` over the new partition order), so that what follows
  keeps that order. Sort is a global sort (``orderBy``) on its keys (null smallest) plus ``_order``
  (stable, and a total order): Spark range-partitions the rows by the keys and every task sorts one key
  range, so no partition holds all the rows; the sink writes one part per non-empty range (adaptive
  execution merges adjacent small ones), in key order, and the parts concatenated in name order are the
  sorted result. Top ranks each ``per`` group in a window (a hash shuffle by the group) and sorts what it
  keeps as Sort does. Limit takes the first ``n`` by ``_order`` (a top-n per task, then one small
  partition). HashJoin broadcasts its held (small, in-memory) side and keeps the streamed side's
  partitions and ``_order``; when the held side is ordered too, each partition is sorted by (streamed,
  held) order, which puts one record's matches in the held side's order. Unique and GroupBy are hash
  shuffles (their order is undefined, as documented): no step funnels its rows through one task.
- Checkpoints and other stored outputs are Parquet in the working directory on the cluster's file system,
  read back part by part in part order (a directory read orders its splits by size), so stored records
  keep their order; counters come from ``DataFrame.observe`` (no extra pass over the data).
- The input is read once per step: a step whose parsed records reach TSV sinks through per-record
  operators only writes every output, its trap and its samples in one action (``_execute_one_pass``;
  sinks that take the parse's records as they are get their lines joined by the kernel's side, JVM or
  Python workers, a few rows per batch); any other step with several outputs persists its parse for its actions.
- Per-run state (file system, staged outputs, persisted frames) lives in a ``SparkRun`` in the run's
  context, never on the engine."""
from __future__ import annotations

from functools import reduce

from logetl import assembly, contract, settings
from logetl.engines.base import Engine, StepContext, partitioned_taps
from logetl.engines.spark.expressions import AGGREGATES, COMPILE, column
from logetl.engines.spark.expressions import SESSION
from logetl.engines.spark.progress import StepProgress
from logetl.engines.spark.signals import between_java_calls
from logetl.engines.spark.parse import BUILTIN, MARKER, PARSE_CONF, ParsePaths, sample_text
from logetl.engines.spark.session import CDS_CONF, JIT_CONF, SessionSteps, SparkRun, _session_conf
from logetl.engines.spark.operators import OPERATORS, _keep_order, _metrics
from logetl.engines.spark.planning import OnePass, _OBSERVATIONS
from logetl.engines.spark.sinks import Sinks
from logetl.engines.spark.errors import _memory_failure, _raw, _read_failure, _write_failure


CACHE_COMPRESSED = "spark.sql.inMemoryColumnarStorage.compressed"




class SparkEngine(SessionSteps, ParsePaths, OnePass, Sinks, Engine):
    """The Spark engine: a step's DataFrames from its nodes (``OPERATORS``), its actions and the run's
    commit; the session (``SessionSteps``), the parse paths (``ParsePaths``), the one-pass planner
    (``OnePass``) and the outputs (``Sinks``) are each a class of their own module."""

    name = "spark"
    operators = (assembly.Source, assembly.Parse, assembly.Sink, *OPERATORS)
    expressions = (*COMPILE, *AGGREGATES)

    def __init__(self, master: str | None = None, conf: dict | None = None, **options):
        super().__init__(**options)
        self.master = master
        conf = dict(conf or {})
        # logetl's own settings ride on --conf too; they never reach Spark
        ours = settings.spark_conf(conf)
        self.parse_mode = ours[PARSE_CONF]
        self.cds = ours[CDS_CONF] == "auto"
        self.driver_c1 = ours[JIT_CONF] == "auto"
        self._archive = None     # the driver JVM's class archive (spark_cds), when this engine launched the JVM
        self.conf = conf
        self._spark = None
        self._fs = None          # the session's HadoopFS (filesystem)
        self._shipping = None    # spark.archives being added to the running session (session)
        self._owns_session = False
        self.path = BUILTIN      # the parse path of this engine's runs (JVM, PYTHON, BUILTIN), chosen by ready
        self._jar: str | None = None   # logetl's jar, given to the JVM this engine launched (spark_jvm)
        self._no_jar = ""        # why there is none
        self._launched = False   # whether this engine launched the driver JVM (the settings of its memory are ours)
        self._memory: dict = {}  # the session's memory settings (session)

    # what publishes or cleans up calls the JVM too (HadoopFS): a signal there is raised when it is done
    def seal(self, ctx: StepContext) -> list:
        with between_java_calls():
            return super().seal(ctx)

    def commit(self, ctx: StepContext) -> None:
        with between_java_calls():
            super().commit(ctx)

    def close(self, ctx: StepContext, ok: bool) -> None:
        with between_java_calls():
            super().close(ctx, ok)

    def prepare(self, ctx: StepContext) -> SparkRun:
        self.shipped()
        return SparkRun(self.filesystem(), ctx.taps, partitioned_taps(ctx.flow))

    def _apply(self, node, inputs):
        """The DataFrame of ``node`` from those of its inputs (``OPERATORS``)."""
        return OPERATORS[type(node)](node, inputs)

    def _read_store(self, run: SparkRun, node):
        """The stored output of ``node`` (an earlier step's), its parts unioned in part order
        (``_read_parts``: they hold the stored records in order): its fields, and ``_order`` if stored
        (a one-pass step's stores share one file's columns, ``_store_columns``)."""
        df = self._read_parts(run.fs, run.work.store(node.name))
        return df.select(*[column(f) for f in node.fields], *_keep_order(df))

    def _counted(self, df, key, counts: list):
        """``df`` with a row count observed on its way (no extra pass); read after the actions."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        obs = Observation(f"logetl_{next(_OBSERVATIONS)}")
        counts.append((key, obs))
        return df.observe(obs, F.count(F.lit(1)).alias("n"))

    def execute_step(self, ctx: StepContext, step: assembly.Step, state) -> None:
        try:
            with between_java_calls():   # an interrupt cancels the step's jobs, and is raised when they end
                # (the expressions' session settings: spark_expressions.SESSION, UTC for times)
                with _session_conf(self.session(), {**self._split_settings(ctx, step), **SESSION}):
                    self._execute_step(ctx, step, state)
        except BaseException as exc:
            if any(isinstance(n, assembly.Parse) for n in step.nodes) and state.name not in ctx.state.accounted:
                # observe's counters come back with a successful action only: this step's are not known
                state.lines_read = None
            if not isinstance(exc, Exception):
                raise
            text = str(exc)   # (a py4j error's text is a round trip to the JVM: made once)
            # memory first: a task that ran out of it while reading or writing fails that read or write
            failure = _memory_failure(text, self._spark.sparkContext.master if self._spark is not None else "",
                                      self._memory, self._launched) or _read_failure(text) or _write_failure(text)
            if failure is None:
                raise
            raise failure from exc

    def _execute_step(self, ctx: StepContext, step: assembly.Step, state) -> None:
        if self._in_one_pass(ctx, step):
            self._execute_one_pass(ctx, step, state)
            from logetl.engines.spark.cds import step_ran

            step_ran()
            return
        from pyspark.sql import functions as F

        run: SparkRun = ctx.state
        frames: dict[int, object] = {}
        observations: list = []
        counts: list = []          # (node or ("read", node), observation): records out of each operator
        malformed = []
        # everything this step writes: each is one Spark action
        actions = [("store", n) for n in step.writes] + [
            ("sink", n) for n in step.nodes if isinstance(n, assembly.Sink)]
        trap = run.trap is not None and any(isinstance(n, assembly.Parse) for n in step.nodes)
        persist = len(actions) + (1 if trap else 0) > 1
        spark = self.session()
        compressed = spark.conf.get(CACHE_COMPRESSED, None)
        if persist:
            # The persisted parse lives for this step only. Compressing its string columns costs more than
            # parsing them natively (2M lines, local[*]: 15.3 s of executor CPU for the action that builds
            # the cache, 8.0 s uncompressed), so this cache is not compressed. Spark takes the setting when
            # the frame is persisted (or when the first action builds it): it is set before the parse and
            # the session's own value is back once the step ends.
            spark.conf.set(CACHE_COMPRESSED, "false")
        try:
            for stored in step.reads:
                frames[id(stored)] = self._counted(self._read_store(run, stored), ("read", stored), counts)
            for node in step.nodes:
                if isinstance(node, (assembly.Source, assembly.Sink)):
                    continue
                if isinstance(node, assembly.Parse):
                    frames[id(node)], bad = self._parse(ctx, node, observations, persist)
                    malformed.append(bad)
                else:
                    df = self._apply(node, [frames[id(p)] for p in node.previous])
                    frames[id(node)] = self._counted(df, node, counts)
            with self._progress(ctx, state):
                for kind, node in actions:
                    if kind == "store":
                        self._store(run, node, frames[id(node)])
                    else:
                        self._sink(ctx, node, frames[id(node.previous[0])], state)
                if trap:
                    run.fs.rmtree(run.work.trap_dir)
                    reduce(lambda a, b: a.union(b), malformed).select("value").write.text(run.work.trap_dir)
            outs: dict = {}
            for node, obs in observations:
                metrics = _metrics(obs)
                self._account(ctx, node, metrics, state)
                outs[id(node)] = int(metrics.get("kept") or 0)
            read_outs = {}
            for key, obs in counts:
                n = int(_metrics(obs).get("n") or 0)
                if isinstance(key, tuple):
                    read_outs[id(key[1])] = n
                else:
                    outs[id(key)] = n
            for node in step.nodes:
                if isinstance(node, (assembly.Source, assembly.Parse, assembly.Sink)):
                    continue
                state.count(node.name, "out", outs.get(id(node), 0))
                state.count(node.name, "in", sum(outs.get(id(p), read_outs.get(id(p), 0)) for p in node.previous))
            if malformed and sum(state.malformed.values()) and len(ctx.run.malformed_samples) < 5:
                want = 5 - len(ctx.run.malformed_samples)
                # the raw bytes, not the string: Python decodes an invalid line's string with U+FFFD, and
                # the sample must show what the local engine shows (its bad bytes as \xNN)
                bad = reduce(lambda a, b: a.union(b), [
                    m.select(F.col("value").cast("binary").alias("value"), "_file", "_reason") for m in malformed])
                # a limit without a sort: Spark takes partitions in order and stops once it has enough,
                # so the first malformed lines cost a look at the start of the input, not a full pass
                formats_of = [n.format for n in step.nodes if isinstance(n, assembly.Parse)]
                for row in bad.limit(want).collect():
                    text = sample_text(row["_reason"], row["value"])
                    why = formats_of[0].why(_raw(row["value"])) \
                        if row["_reason"] == contract.NO_MATCH and len(formats_of) == 1 else None
                    ctx.run.malformed_samples.append((row["_file"], row["_reason"], f"{why}: {text}" if why else text))
            from logetl.engines.spark.cds import step_ran

            step_ran()   # the JVM loaded what a run loads: if it records its class archive, worth keeping
        finally:
            for df in run.persisted:
                df.unpersist()
            run.persisted = []
            if persist:
                if compressed is None:
                    spark.conf.unset(CACHE_COMPRESSED)
                else:
                    spark.conf.set(CACHE_COMPRESSED, compressed)

    def _progress(self, ctx: StepContext, state) -> StepProgress:
        """Around the step's actions: its tasks done, told to the run's listeners as they finish."""
        return StepProgress(self.session().sparkContext, f"logetl-{ctx.run.run_id}-{state.name}",
                            lambda done, total: ctx.listener.step_progress(ctx.run, state, done, total, "tasks"))

    @staticmethod
    def _account(ctx, node, metrics, state) -> None:
        ctx.state.accounted.add(state.name)
        lines = int(metrics.get("lines") or 0)
        state.lines_read += lines
        for r in (*contract.REASONS, contract.TOO_LONG):
            n = int(metrics.get(r) or 0)
            if n:
                state.malformed[r] = state.malformed.get(r, 0) + n
        state.dropped_size_dash += int(metrics.get("dash") or 0)
        state.header_lines += int(metrics.get("header") or 0)
        state.non_http_lines += int(metrics.get("other") or 0)
        state.count(node.name, "in", lines)
        state.count(node.name, "out", int(metrics.get("kept") or 0))

    def finish_trap(self, ctx: StepContext) -> None:
        run: SparkRun = ctx.state
        fs = run.fs
        fs.makedirs(run.trap.staging)
        if fs.isdir(run.work.trap_dir):
            if ctx.run.malformed.get(contract.TOO_LONG) and self.line_reader():
                # the lines too long came as placeholders (``jvm.lines``): the trap gets the lines themselves
                from logetl.engines.spark import jvm as spark_jvm

                spark_jvm.patch(self.session(), run.work.trap_dir, MARKER.encode())
            self._name_parts(fs, run.work.trap_dir)
            for name in fs.listdir(run.work.trap_dir):
                if name.startswith("part-"):
                    fs.rename(fs.join(run.work.trap_dir, name), fs.join(run.trap.staging, name))
