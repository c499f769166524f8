"""The Spark engine's parse paths (logetl's kernel in the executors' JVMs or Python workers, or Spark's
built-ins) and the input's reads: splits and packed small files."""
from __future__ import annotations

import operator
import os
from functools import partial, reduce

from logetl import __version__, assembly, contract, settings
from logetl.engines.base import EngineUnavailable, StepContext
from logetl.engines.spark.native import DASH, HEADER, INPUT, KEPT, OTHER, SAMPLE, STATUS
from logetl.engines.spark.signals import between_java_calls, stopping
from logetl.io.fs import hadoop_local_path
from logetl.io.inputs import InputReadError
from logetl.engines.spark.operators import ORDER
from logetl.engines.spark.session import _in_process, _session_conf
from logetl.engines.spark.errors import _worker_failure


SPARK_PATTERN = "(?s)" + contract.PATTERN


#: the status of a line longer than ``LOGETL_MAX_LINE`` (after 1-3, the reasons of ``contract.REASONS``,
#: 4, a size of ``-``, 5, a header line of the format, and 6, a line of it that is not a request), and the byte
#: (hex) put before it so that the kernel calls it malformed (``_marked``)
TOO_LONG, MARK = 7, "FF"


def malformed_status(status):
    """Whether a parsed line's ``_status`` (a Column) is a malformed line's."""
    return status.between(1, len(contract.REASONS)) | (status == TOO_LONG)


def reason_of(code: int) -> str:
    """The reason of a malformed line's status."""
    return contract.TOO_LONG if code == TOO_LONG else contract.REASONS[code - 1]


#: what starts the row of a line too long that logetl's line reader read (``jvm.lines``): a token of this
#: process, so that no line of a log can be taken for one; the row then holds where the line is, its size
#: and its first bytes (``placeholder``), and the trap gets the line itself (``jvm.patch``)
MARKER = "\0logetl-too-long-" + os.urandom(16).hex() + "\0"


def placeholder(value: bytes) -> tuple[int, bytes] | None:
    """The size and first bytes of the line too long whose row holds ``value`` (``MARKER``, then ``OFFSET SIZE
    N:``, the N bytes of its file's name, its first bytes), or None when ``value`` is a line's own bytes."""
    marker = MARKER.encode()
    if not value.startswith(marker):
        return None
    said, _, rest = value[len(marker):].partition(b":")
    _, size, name = (int(x) for x in said.split(b" "))
    return size, rest[name:]


def sample_text(reason: str, value: bytes) -> str:
    """A malformed line's sample as the local engine shows it (a too-long line: its size, its first bytes)."""
    if reason == contract.TOO_LONG:
        from logetl.io.inputs import HEAD

        size, head = placeholder(value) or (len(value), value)
        return f"{size:,} bytes: {contract.display(head[:HEAD])}"
    return contract.display(value)


SPARK_TAIL_PATTERN = "(?s)" + contract.TAIL_PATTERN


PARSE_CONF = settings.PARSE.name


SPLIT_BYTES = "spark.sql.files.maxPartitionBytes"


#: logetl's settings given with --conf (never passed to Spark): name -> the values it takes
#: the parse paths: the kernel in the executors' JVMs, in their Python workers, or Spark's regular expressions
JVM, PYTHON, BUILTIN = "jvm", "python", "builtin"


#: the notices of the parse paths
JVM_NOTICE = "Spark parses with logetl's native kernel in the executors' JVMs"


PYTHON_NOTICE = "Spark parses with logetl's native kernel in the executors' Python workers"


BUILTIN_NOTICE = "Spark parses with its built-in regular expressions"


#: what the session's checks found, by (Spark application, path): (the executors can run the kernel, why not)
_NATIVE_CHECKS: dict[tuple[str, str], tuple[bool, str]] = {}


def parse_split_bytes(largest: int, cores: int, spark_split: int, most: int) -> int | None:
    """The most bytes of a split of a parse's input whose largest file read on its own has ``largest``
    bytes, read by ``cores`` cores at once, when Spark's own splits of it (``spark_split``,
    ``spark.sql.files.maxPartitionBytes``) would take more than one wave of tasks; None when they take one
    (Spark then splits each file evenly over the cores). That file then comes in whole waves of one split
    per core, each at most ``most`` bytes (the fewest waves that allows: ``most`` is at least
    ``spark_split``), all of a size; Spark caps each file's splits at its share per core, so a smaller file
    is split as before, or in fewer splits. A task of logetl's parse holds one batch of lines whatever its
    split, while each task has costs of its own (its start, its own output files), and Spark's 128 MB
    splits left a ragged last wave (450 MB on 2 cores: 128, 128, then 128 and 66 MB)."""
    cores = max(1, cores)
    if largest <= cores * spark_split:
        return None
    waves = -(-largest // (cores * max(most, spark_split)))
    return -(-largest // (cores * waves))


def _union_all(frames: list):
    """The frames unioned in their order (partitions too), as a balanced tree: each union is analysed when it
    is made, and a chain of n (one per read) walked the chain below it every time, n² in all."""
    while len(frames) > 1:
        frames = [frames[i].union(frames[i + 1]) if i + 1 < len(frames) else frames[i]
                  for i in range(0, len(frames), 2)]
    return frames[0]


def _runs(sizes: list[int], small: int) -> list[tuple[int, int]]:
    """The inputs (of ``sizes`` bytes, in input order) as reads: [first, last) ranges of the indexes. Each
    run of two or more consecutive files of at most ``small`` bytes is one read (``SparkEngine._packed``);
    every other file is a read of its own, whose splits Spark reads in parallel and in order."""
    runs: list[list[int]] = []
    for i, size in enumerate(sizes):
        if size <= small and runs and runs[-1][2] and runs[-1][1] == i:
            runs[-1][1] = i + 1
        else:
            runs.append([i, i + 1, size <= small])
    return [(first, last) for first, last, _ in runs]


class ParsePaths:
    """The Spark engine's parse paths: logetl's kernel in the executors' JVMs or Python workers, or Spark's
    built-ins, chosen once per application; the input's reads, splits and packed small files."""

    # --- running ------------------------------------------------------------------------------------------

    def ready(self, flow: assembly.Flow, steps: list[assembly.Step]) -> list[str]:
        """The parse path, when a step that runs parses (a restart after Join's checkpoint does not): a
        forced native path that the executors cannot take is refused here, before the run starts."""
        if not any(isinstance(n, assembly.Parse) for s in steps for n in s.nodes):
            return []
        with between_java_calls():   # the check may run a job
            self.path, notice = self.choose_parse()
        segmented = next((n.format for s in steps for n in s.nodes
                          if isinstance(n, assembly.Parse) and n.format.segmented), None)
        if segmented is not None and self.path == BUILTIN:
            from logetl.formats import FormatError

            raise FormatError(f"the {segmented.name} format needs logetl's kernel on Spark (its columns change with "
                              f"each '#Fields:' line), but {notice}")
        return [notice]

    @property
    def native(self) -> bool:
        """Whether this engine's runs parse with logetl's kernel (in the executors' JVMs or Python workers)."""
        return self.path != BUILTIN

    def choose_parse(self) -> tuple[str, str]:
        """The parse path of this engine's runs (``JVM``, ``PYTHON`` or ``BUILTIN``), and the notice that
        says which and why: logetl's kernel in the executors' JVMs when they can run it, else in their
        Python workers when those can, else Spark's regular expressions (``--conf logetl.parse=auto``, the
        default); ``native``: either kernel path; ``jvm``, ``python``, ``builtin``: that path."""
        mode = self.parse_mode
        forced = "" if mode == "auto" else f" (--conf {PARSE_CONF}={mode})"
        if mode == BUILTIN:
            return BUILTIN, f"{BUILTIN_NOTICE}{forced}"
        jvm_why = python_why = ""
        if mode != PYTHON:
            ok, jvm_why = self.jvm_check()
            if ok:
                return JVM, f"{JVM_NOTICE}{forced}"
            if stopping():   # the check was cancelled: the interrupt is raised once ready's block ends
                return BUILTIN, BUILTIN_NOTICE
            if mode == JVM:
                raise EngineUnavailable(f"--conf {PARSE_CONF}=jvm, but the executors' JVMs cannot run logetl's "
                                        f"kernel: {jvm_why}")
        if mode != JVM:
            ok, python_why = self.python_check()
            if ok:
                return PYTHON, PYTHON_NOTICE + forced + (f": it cannot run in their JVMs ({jvm_why})" if jvm_why else "")
            if mode == PYTHON:
                raise EngineUnavailable(f"--conf {PARSE_CONF}=python, but the executors' Python workers cannot "
                                        f"run logetl's kernel: {python_why}")
        why = f"in their JVMs: {jvm_why}; in their Python workers: {python_why}"
        if mode == "native":
            raise EngineUnavailable(f"--conf {PARSE_CONF}=native, but the executors cannot run logetl's kernel: {why}")
        return BUILTIN, f"{BUILTIN_NOTICE}: the executors cannot run logetl's kernel ({why})"

    def jvm_check(self) -> tuple[bool, str]:
        """Whether the executors' JVMs can run logetl's kernel (``spark_jvm``), once per Spark application
        (then remembered): the driver's JVM must have logetl's jar (it does when logetl launched it), and
        each executor must load the kernel's library from it, in the driver's logetl version: on a local
        master the driver's JVM is the executors', asked directly; on a cluster, a job of one task per core
        (JVM code only). No Python worker is started."""
        from logetl.engines.spark import jvm as spark_jvm

        spark = self.shipped()
        sc = spark.sparkContext
        key = (sc.applicationId, JVM)
        if key not in _NATIVE_CHECKS:
            if spark_jvm.classes(spark) is None:
                # a driver JVM logetl did not launch (spark-submit, a notebook's session), or no jar
                if self._no_jar:
                    _NATIVE_CHECKS[key] = (False, self._no_jar)
                else:
                    try:
                        _NATIVE_CHECKS[key] = (False, "the driver's JVM was started without logetl's jar: give "
                                                      f"it with --jars {spark_jvm.jar()} (spark.jars)")
                    except spark_jvm.Unavailable as exc:
                        _NATIVE_CHECKS[key] = (False, str(exc))
                return _NATIVE_CHECKS[key]
            # (local-cluster: executors in JVMs of their own, as on a cluster)
            cluster = not _in_process(sc.master)
            if cluster:
                sc.setJobDescription("logetl: can the executors' JVMs run logetl's kernel?")
                # a task that cannot load the classes fails, and Spark would log its stack traces: the
                # notice says it in one line instead
                sc.setLogLevel("OFF")
            try:
                found = spark_jvm.check(spark, cluster, max(1, sc.defaultParallelism))
            except Exception as exc:   # the job failed (an executor that cannot even fetch the jar)
                found = (False, _worker_failure(exc))
            finally:
                if cluster:
                    sc.setLogLevel(settings.SPARK_LOG_LEVEL.read())
                    sc.setJobDescription(None)
            if stopping():   # the check's job was cancelled: it found nothing (and is not remembered)
                return False, "stopped"
            _NATIVE_CHECKS[key] = found
        return _NATIVE_CHECKS[key]

    def python_check(self) -> tuple[bool, str]:
        """Whether the executors' Python workers can import logetl's kernel (and pyarrow), in the driver's
        logetl version, once per Spark application (then remembered): on a local master, whose workers are
        the interpreter ``sc.pythonExec`` on this machine, by a fresh process of that interpreter; on a
        cluster, by a tiny mapInArrow job of one task per core (``spark_native.probe_batches``)."""
        spark = self.shipped()
        sc = spark.sparkContext
        key = (sc.applicationId, PYTHON)
        if key not in _NATIVE_CHECKS:
            from logetl.engines.spark.native import PROBE_SCHEMA, probe, probe_batches, probe_in

            try:   # what PySpark's mapInArrow itself requires on the driver
                from pyspark.sql.pandas.utils import require_minimum_pandas_version, require_minimum_pyarrow_version

                require_minimum_pandas_version()
                require_minimum_pyarrow_version()
            except Exception as exc:
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                _NATIVE_CHECKS[key] = (False, f"the driver cannot use mapInArrow: {first}")
                return _NATIVE_CHECKS[key]
            if sc.master.startswith("local"):
                found = probe_in(sc.pythonExec)
            else:
                sc.setJobDescription("logetl: can the executors' Python workers run logetl's kernel?")
                # a worker that cannot start fails the task, and Spark would log its stack traces: the
                # notice says it in one line instead
                sc.setLogLevel("OFF")
                try:
                    # one task per core (as far as the session knows them yet): the step's first tasks
                    # find a worker each, started and with the kernel imported (standalone, 2M-line Branch:
                    # ~1 s less, against one task of an RDD job, whose workers are of another kind)
                    n = max(1, sc.defaultParallelism)
                    found = tuple(spark.range(0, n, 1, n).mapInArrow(probe_batches, PROBE_SCHEMA).collect()[0])
                except Exception as exc:   # the worker did not even start (no such python, another version)
                    found = ("missing", _worker_failure(exc))
                    if not found[1].startswith("Cannot run program"):
                        # it started, but could not take Arrow batches (no pyarrow): the worker of an RDD
                        # job needs no pyarrow, and probe names what is missing first (logetl, its kernel,
                        # pyarrow), as the notice should
                        try:
                            found = sc.parallelize([0], 1).map(probe).collect()[0]
                        except Exception as exc:
                            found = ("missing", _worker_failure(exc))
                finally:
                    sc.setLogLevel(settings.SPARK_LOG_LEVEL.read())
                    sc.setJobDescription(None)
            if stopping():   # the check's job was cancelled: it found nothing (and is not remembered)
                return False, "stopped"
            if found[0] != "ok":
                _NATIVE_CHECKS[key] = (False, found[1])
            elif found[1] != __version__:
                _NATIVE_CHECKS[key] = (False, f"they have logetl {found[1]}, the driver {__version__}")
            else:
                _NATIVE_CHECKS[key] = (True, "")
        return _NATIVE_CHECKS[key]

    def _parsed(self, ctx: StepContext, node, observations: list):
        """The input's lines parsed, one row each, in input order: the fields (``fields``: name -> Column),
        ``_status``, the raw ``value`` (of malformed lines), ``_input`` (the input's index), ``_order`` and,
        on the native path, ``_sample``; the parse's counters observed (``observations``)."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        # _order, assigned after the parse (which keeps each partition's rows and their order), is the
        # input-order key
        parse = self._parse_native if self.native else self._parse_builtin
        checked, fields = parse(self._marked(self._lines(ctx)), node)
        checked = self._unmarked(checked).withColumn(ORDER, F.monotonically_increasing_id())
        # _status: 0 kept, 1 2 3 the reasons of contract.REASONS (in their order), 4 dropped (size "-"): a
        # small integer, cheap to count, to cache and to filter on; the reason's name only for malformed lines;
        # 5 a header line of the format; 6 a line of it that is not a request; 7 a line too long (``_unmarked``)
        status = F.col(STATUS)
        obs = Observation(f"parse_{node.name}")
        checked = checked.observe(
            obs, F.count(F.lit(1)).alias("lines"),
            *[F.count_if(status == code).alias(r) for code, r in enumerate(contract.REASONS, 1)],
            F.count_if(status == TOO_LONG).alias(contract.TOO_LONG),
            F.count_if(status == DASH).alias("dash"), F.count_if(status == KEPT).alias("kept"),
            F.count_if(status == HEADER).alias("header"), F.count_if(status == OTHER).alias("other"))
        observations.append((node, obs))
        return checked, fields

    def _marked(self, lines):
        """The lines with those longer than ``LOGETL_MAX_LINE`` marked for ``_unmarked``: their input's index
        negated, and (on the native paths) an invalid byte put before them, so that every parse path calls
        them malformed and gives their raw bytes back. logetl's line reader (``_lines``) gives such a line as
        a placeholder (``MARKER``); Spark's text source, where the driver has no logetl jar, as the line
        itself (Hadoop's line reader holds each line whole, up to its 2 GiB)."""
        from pyspark.sql import functions as F

        long = (F.octet_length("value") > F.lit(settings.MAX_LINE.read())) | \
            F.col("value").cast("string").startswith(MARKER)
        lines = lines.withColumn(INPUT, F.when(long, -F.col(INPUT) - 1).otherwise(F.col(INPUT)))
        if self.native:
            value = F.col("value").cast("binary")
            lines = lines.withColumn("value", F.when(long, F.concat(F.unhex(F.lit(MARK)), value)).otherwise(value))
        return lines

    def _unmarked(self, checked):
        """The parse's rows with the lines ``_marked`` as too long given their status (``TOO_LONG``), their own
        bytes and their input's index back."""
        from pyspark.sql import functions as F

        long = F.col(INPUT) < 0
        checked = checked.withColumn(STATUS, F.when(long, F.lit(TOO_LONG)).otherwise(F.col(STATUS)).cast("tinyint"))
        if self.native:
            checked = checked.withColumn("value", F.when(long, F.expr(f"substring(value, {len(MARK) // 2 + 1})"))
                                         .otherwise(F.col("value")))
        return checked.withColumn(INPUT, F.when(long, -F.col(INPUT) - 1).otherwise(F.col(INPUT)))

    def _lines(self, ctx: StepContext):
        """The input's lines, one row each (``value``, the raw line; ``_input``, its input's index), in input
        order: a read of each file (its splits in file order), or of each run of consecutive small files
        (``_packed``, sorted back to input order), with the index, unioned in input order, so the union's
        partitions are in input order. The parse is then one operator over the union: parsing each file's
        read and unioning those planned an operator (a Python one, on the native path) per file: 500 small
        files on ``local[1]`` take several times longer read one by one than packed (docs/performance.md,
        "Many small files on Spark")."""
        from pyspark.sql import functions as F

        read = self.session().read.option("lineSep", "\n")
        inputs, sizes = ctx.taps.inputs, self._input_sizes(ctx)
        if self.line_reader():
            return self._read_lines(read, inputs, sizes)
        frames = []
        for first, last in self._reads(sizes):
            if last == first + 1:
                frames.append(self._scanned(read.text(inputs[first]), inputs[first:last]).withColumn(INPUT, F.lit(first)))
            else:
                frames.append(self._packed(read, first, inputs[first:last], sizes[first:last]))
        return _union_all(frames)

    def line_reader(self) -> bool:
        """Whether the input's lines are read by logetl's line reader (``jvm.lines``, in memory bounded by
        ``LOGETL_MAX_LINE``): when the driver's JVM has logetl's jar, whatever the parse path; else by
        Spark's text source."""
        from logetl.engines.spark import jvm as spark_jvm

        return spark_jvm.classes(self.session()) is not None

    def _read_lines(self, read, inputs: list[str], sizes: list[int]):
        """The input's lines (``_lines``) read by logetl's line reader: every file's splits in input order,
        consecutive small files packed into one partition, as Spark's scan would cut them (a split of
        ``spark.sql.files.maxPartitionBytes``, or less to give every core one, not less than
        ``openCostInBytes``). A file's name that Spark's own reads would skip is refused as they refuse it
        (``_scanned``): the same inputs are read on every path."""
        from pyspark.sql import functions as F

        from logetl.engines.spark import jvm as spark_jvm
        from logetl.io.inputs import HEAD

        spark = self.session()
        for first, last in self._reads(sizes):
            self._scanned(read.text(inputs[first:last] if last > first + 1 else inputs[first]), inputs[first:last])
        conf = spark._jsparkSession.sessionState().conf()
        most, opening = conf.filesMaxPartitionBytes(), conf.filesOpenCostInBytes()
        total = sum(size + opening for size in sizes)
        split = max(1, min(most, max(opening, -(-total // max(1, spark.sparkContext.defaultParallelism)))))
        fs = self.filesystem()
        paths = [fs.file_uris(f)[0] for f in inputs]
        lines = spark_jvm.lines(spark, paths, sizes, split, min(opening, most),
                                settings.MAX_LINE.read(), HEAD, MARKER.encode())
        return lines.select(F.col("value").cast("string").alias("value"), INPUT)

    def _input_sizes(self, ctx: StepContext) -> list[int]:
        """The bytes of each input, as binding found them (else asked of the file system)."""
        return ctx.taps.input_sizes or [self.filesystem().stat(f)[0] for f in ctx.taps.inputs]

    def _reads(self, sizes: list[int]) -> list[tuple[int, int]]:
        """The reads of inputs of ``sizes`` bytes (``_runs``): a file of at most Spark's cost of opening one
        (nor more than a split) is small, and read with its small neighbours."""
        conf = self.session()._jsparkSession.sessionState().conf()
        return _runs(sizes, min(conf.filesOpenCostInBytes(), conf.filesMaxPartitionBytes()))

    def _scanned(self, scan, files: list[str]):
        """``scan``, a read of ``files``, once it is known to read each of them (``inputFiles``: the files of
        Spark's index, known to the driver, no job); else the run fails naming the first it does not.
        Spark's index leaves out names it takes for hidden or unfinished (``_x``, ``.x``, ``x._COPYING_``),
        even given one by one, and takes a name with ``[`` ``]`` ``*`` ``?`` ``{`` ``}`` for a pattern (for
        ``a[1].log`` it read ``a1.log``): those lines were missing, or another file's, without a word."""
        fs = self.filesystem()
        listed = set(fs.strings(scan._jdf.inputFiles()))
        for f in files:
            names = fs.file_uris(f)   # (kept for the session: the packed scan's index asked first)
            if not listed.intersection(names):
                name = fs.basename(f)
                why = ("takes '[', ']', '*', '?', '{' and '}' in a name for a pattern" if any(c in name for c in "[]*?{}")
                       else "skips files whose names start with '_' or '.' or end with '._COPYING_'")
                raise InputReadError(f"cannot read input {hadoop_local_path(f)!r} on Spark: Spark {why}; rename it")
        return scan

    def _packed(self, read, first: int, files: list[str], sizes: list[int]):
        """The lines of small ``files`` (inputs ``first``, ``first`` + 1, ...; of ``sizes`` bytes) read as
        one scan, in input order.

        Read one by one, each small file was a scan and at least one task of its own (500 files of 3 lines,
        ``local[1]``: 94 s, most of it tasks' overhead), and each scan kept its copy of the Hadoop
        configuration in the driver's memory (2,000 files failed in a 1 GB driver). One scan packs many
        files in a task, but orders them by size; so each line is tagged with its file's index (by the
        file's name in the scan: ``_metadata``) and where its split starts, and the lines are sorted back
        (a range shuffle of these small files' lines; with more than one range, Spark samples them for the
        bounds first).

        Ordering contract: the lines come back in input order, in partitions in that order. The key holds
        whatever splits a file gets (a file that grew since it was bound may be split): a split's lines are
        consecutive in one task, in their order, and the split's start orders the splits. Memory: the sort
        spills, as any Spark sort."""
        from pyspark.sql import functions as F

        spark, fs = self.session(), self.filesystem()
        path, start, row = "__logetl_path", "__logetl_start", "__logetl_row"
        uris = [fs.file_uris(f) for f in files]
        index = spark.createDataFrame([(uri, first + k) for k, names in enumerate(uris) for uri in names],
                                      f"{path} string, {INPUT} int")
        # more than 32 paths are listed by a Spark job of a task per path: listed here, by the driver
        with _session_conf(spark, {"spark.sql.sources.parallelPartitionDiscovery.threshold": str(2 ** 31 - 1)}):
            scan = self._scanned(read.text(files), files)
        tagged = scan.select("value", F.col("_metadata.file_path").alias(path),
                             F.col("_metadata.file_block_start").alias(start)).join(F.broadcast(index), path, "left")
        # a file named otherwise than file_uris says would have no index: the run fails, naming it
        known = F.when(F.col(INPUT).isNull(), F.raise_error(F.concat(
            F.lit("logetl cannot tell which input this file is: "), F.col(path)))).otherwise(F.col(INPUT))
        keyed = tagged.select("value", known.alias(INPUT), start, F.monotonically_increasing_id().alias(row))
        keys = [INPUT, start, row]
        return keyed.repartitionByRange(self._packed_partitions(sizes), *keys).sortWithinPartitions(*keys) \
            .select("value", INPUT)

    def _packed_partitions(self, sizes: list[int]) -> int:
        """How many tasks the sorted lines of files of ``sizes`` bytes go to: their bytes in partitions of
        ``spark.sql.files.maxPartitionBytes``, or smaller ones to give every core one, none smaller than
        ``openCostInBytes`` (Spark's rule for a scan, without the cost of opening each file: 500 files of a
        few lines are one task, not the sixteen that 500 openings would make)."""
        spark = self.session()
        conf = spark._jsparkSession.sessionState().conf()
        total = sum(sizes)
        per = max(1, min(conf.filesMaxPartitionBytes(),
                         max(conf.filesOpenCostInBytes(), -(-total // spark.sparkContext.defaultParallelism))))
        return max(1, min(len(sizes), -(-total // per)))

    @staticmethod
    def _binary_lines(lines):
        """The raw bytes of each line as binary (a cast that keeps them, invalid UTF-8 included), with its
        input's index: what the kernel on the executors is given."""
        from pyspark.sql import functions as F

        return lines.select(F.col("value").cast("binary").alias("value"), INPUT)

    @staticmethod
    def _sample_line(status, text):
        """A malformed-line sample as a one-pass step writes it aside: ``status TAB input TAB line``."""
        from pyspark.sql import functions as F

        return F.concat_ws("\t", status.cast("string"), F.col(INPUT).cast("string"), text)

    def _parse(self, ctx: StepContext, node, observations: list, persist: bool):
        """(records, malformed) of the input: records with the format's fields and ``_order``; malformed
        lines with their raw ``value``, ``_file``, ``_reason`` and ``_order``."""
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        checked, fields = self._parsed(ctx, node, observations)
        if persist:   # one scan of the input serves all of the step's actions
            checked = checked.persist(StorageLevel.MEMORY_AND_DISK)
            ctx.state.persisted.append(checked)
        status = F.col(STATUS)
        records = checked.filter(status == KEPT).select(*[fields[f].alias(f) for f in node.fields], ORDER)
        reason = (F.when(status == 1, F.lit(contract.INVALID_UTF8)).when(status == 2, F.lit(contract.NO_MATCH))
                  .when(status == 3, F.lit(contract.TAB_OR_CR)).when(status == TOO_LONG, F.lit(contract.TOO_LONG)))
        # the input paths as one literal split into an array (a literal an input was three JVM calls each);
        # the optimizer folds it to a constant. No path holds NUL
        files = F.split(F.lit("\0".join(hadoop_local_path(f) for f in ctx.taps.inputs)), "\0")
        # (the native path's raw line is binary: as a string again it holds the same bytes, as read.text's)
        malformed = checked.filter(malformed_status(status)).select(
            F.col("value").cast("string").alias("value"), F.element_at(files, F.col(INPUT) + 1).alias("_file"),
            reason.alias("_reason"), ORDER)
        return records, malformed

    def _parse_native(self, lines, node):
        """The lines (``_lines``) parsed by logetl's kernel on the executors, in their JVMs (``spark_jvm``)
        or their Python workers (``spark_native``): the fields, ``_status``, the raw ``value`` of malformed
        lines, ``_sample`` and ``_input``; the fields by name."""
        from pyspark.sql import functions as F

        from logetl.engines.spark.native import field_column, parse_batches

        binary, spec = self._native_input(lines, node)
        columns = [field_column(i) for i in range(len(node.fields))]
        rest = [f"{STATUS} tinyint", "value binary", f"{SAMPLE} boolean", f"{INPUT} int"]
        if self.path == JVM:
            from logetl.engines.spark import jvm as spark_jvm

            # the JVM gives each field's bytes; the cast to a string keeps them (they are valid UTF-8)
            made = spark_jvm.parsed(binary, ", ".join([f"{c} binary" for c in columns] + rest), spec)
            checked = made.select(*[F.col(c).cast("string").alias(c) for c in columns], STATUS, "value", SAMPLE, INPUT)
        else:
            schema = ", ".join([f"{c} string" for c in columns] + rest)
            checked = binary.mapInArrow(partial(parse_batches, spec), schema)
        return checked, {f: F.col(c) for f, c in zip(node.fields, columns)}

    def _native_input(self, lines, node) -> tuple:
        """The lines as the kernel on the executors takes them (``_binary_lines``), and what it parses them
        with (``_native_spec``); for a format whose columns change within a log (``w3c``), each line with the
        index of its segment's program (``_segments``)."""
        if not node.format.segmented:
            return self._binary_lines(lines), self._native_spec(node)
        from pyspark.sql import functions as F

        from logetl.engines.spark.native import SEG

        lines, spec = self._segments(lines, node)
        return lines.select(F.col("value").cast("binary").alias("value"), INPUT, SEG), spec

    def _segments(self, lines, node) -> tuple:
        """A ``w3c`` log's lines, each with ``_seg``: the index of the program of the columns of the last
        ``#Fields:`` line before it in its file (0: none, IIS's default columns); and the spec of those
        programs (``native.Segments``). A job first looks at the ``#Fields:`` lines: when every line of
        every file has the same columns (each file's first ``#Fields:`` line before its first record, and
        one set of columns in all of them: IIS writes its header again, unchanged, at each restart), the one
        program parses every line, in the partitions as they are. Otherwise each line takes its segment from
        the lines before it in its file, which needs them in one task (a window over each file's lines, in
        order), and the lines are then put back in input order (a range shuffle and a sort): slower, as it
        must be when a file's columns change in it."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        from logetl import w3c
        from logetl.engines.spark.native import SEG

        # (the lines may be ``_marked``: a line too long has its input's index negated and, on these paths,
        # binary bytes; it is no directive, and stays in its file's place)
        row, file, value = "__logetl_row", "__logetl_file", F.col("value").cast("string")
        text = F.regexp_replace(value, "\r$", "")
        is_fields = value.startswith(w3c.FIELDS_DIRECTIVE.decode())
        tagged = lines.withColumn(row, F.monotonically_increasing_id()).withColumn(
            file, F.when(F.col(INPUT) < 0, -F.col(INPUT) - 1).otherwise(F.col(INPUT)))
        facts = tagged.groupBy(file).agg(
            F.min(F.when(is_fields, F.col(row))).alias("f"), F.min(F.when(~value.startswith("#"), F.col(row))).alias("d"),
            F.collect_set(F.when(is_fields, text)).alias("h")).collect()
        default = w3c.columns(w3c.DEFAULT_FIELDS)
        texts = sorted({h for r in facts for h in r["h"]})
        found = sorted({w3c.columns(h) for h in texts})
        uniform = len(found) == 0 or (len(found) == 1 and all(
            r["d"] is None or (r["f"] is not None and r["f"] < r["d"]) or found[0] == default for r in facts))
        every = [default] + [c for c in found if c != default] if not uniform else [found[0] if found else default]
        spec = self._segments_spec(node, every)
        if uniform:
            return lines.withColumn(SEG, F.lit(0)), spec
        index = {c: i for i, c in enumerate(every)}
        here = None
        for h in texts:
            here = (F.when if here is None else here.when)(text == h, F.lit(index[w3c.columns(h)]))
        in_file = Window.partitionBy(file).orderBy(row).rowsBetween(Window.unboundedPreceding, Window.currentRow)
        segmented = tagged.withColumn(SEG, F.coalesce(F.last(F.when(is_fields, here), ignorenulls=True).over(in_file),
                                                      F.lit(0)))
        parts = max(1, lines.rdd.getNumPartitions())
        ordered = segmented.repartitionByRange(parts, file, row).sortWithinPartitions(file, row)
        return ordered.select("value", INPUT, SEG), spec

    @staticmethod
    def _segments_spec(node, every: list) -> tuple:
        """The spec (``_native_spec``'s shape) of a ``w3c`` parse whose lines have the columns ``every``
        (a program each, by ``_seg``): its first element a ``native.Segments``."""
        from logetl.engines.kernel import Parser
        from logetl.engines.spark.native import Segments

        parser = Parser(node.format, node.fields, drop_dash=node.drops_size_dash)
        made = [parser._segment_program(c) for c in every]
        spec = Segments(tuple(m[0] for m in made), tuple(m[1] for m in made), tuple(m[2] for m in made), parser.plus)
        return (spec, tuple(range(len(node.fields))), -1)

    @staticmethod
    def _native_spec(node) -> tuple:
        """What the kernel on the executors parses ``node``'s lines with: (the format's program, or None for
        the original expression; the indexes of the node's fields among the format's; the size field's, -1
        when the parse keeps a size of ``-``)."""
        fmt = node.format
        size = fmt.size_index() if node.drops_size_dash else -1
        return (None if fmt.legacy else fmt.native_program(), tuple(fmt.fields.index(f) for f in node.fields), size)

    @staticmethod
    def _parse_builtin(raw, node):
        """The lines (``_lines``) parsed by Spark's regular expressions (Java's): with the fields' TSV and
        ``_status``; the fields by name."""
        from pyspark.sql import functions as F

        line = F.regexp_replace("value", r"\r\z", "")
        fmt = node.format
        # the format's fields as TSV: a field holds a TAB or CR exactly when that TSV holds a CR or more
        # TABs than separators (the original expression's fields are its five groups, see the docstring;
        # its tail's, when the node keeps one, groups 7 and 8, then the whole tail, 6: empty when there is
        # none, and the tail's fields are null. The tail's groups cannot hold a TAB or CR: contract.QUOTED)
        tail = fmt.legacy and any(fmt.nullable(f) for f in node.fields)
        if fmt.legacy:
            pattern, groups = (SPARK_TAIL_PATTERN, (1, 2, 3, 4, 5, 7, 8, 6)) if tail else (SPARK_PATTERN, (1, 2, 3, 4, 5))
        else:
            pattern, groups = fmt.spark_regex(), fmt.group_refs()
        n_fields = len(groups)
        tsv = F.regexp_replace(line, pattern, "\t".join(g if isinstance(g, str) else f"${g}" for g in groups))
        tabs = F.length(F.col("_tsv")) - F.length(F.regexp_replace(F.col("_tsv"), "\t", ""))
        with_tsv = raw.withColumn("_tsv", tsv)
        size = fmt.size_index() if node.drops_size_dash else -1
        if fmt.legacy and not tail and size >= 0:    # the size is the TSV's last field
            is_dash = F.col("_tsv").endswith("\t-")
        elif size >= 0:
            # F.get: NULL past the end (lines that did not match have one piece), where getItem fails
            is_dash = F.coalesce(F.get(F.split(F.col("_tsv"), "\t"), F.lit(size)) == "-", F.lit(False))
        else:
            is_dash = F.lit(False)
        # the reasons in contract.REASONS' order (the first that applies), then the dropped records
        status = F.when(~F.expr("is_valid_utf8(value)"), F.lit(1))
        if fmt.header:   # a header line of the format: counted apart, as the kernel counts it
            status = status.when(line.startswith(fmt.header), F.lit(HEADER))
        if fmt.others:   # a line that is not a request (HAProxy's TCP lines, notices): as the kernel counts it
            status = status.when(~line.rlike(pattern) & line.rlike(fmt.others_regex()), F.lit(OTHER))
        fields = F.split(F.col("_tsv"), "\t")
        # the fields the format percent-decodes (CloudFront's): as url_decode decodes, null when the decoded
        # bytes are not UTF-8, and the line is then malformed as one that is not UTF-8 (the kernel's T_DECODE)
        from logetl.engines.spark.expressions import _url_decode

        decoded = {f: _url_decode(fields.getItem(fmt.fields.index(f)), False) for f in getattr(fmt, "decode", ())}
        status = (status.when(~line.rlike(pattern), F.lit(2))
                  .when((F.instr(F.col("_tsv"), "\r") > 0) | (tabs != n_fields - 1), F.lit(3)))
        if decoded:
            status = status.when(reduce(operator.or_, (v.isNull() for v in decoded.values())), F.lit(1))
        status = status.when(is_dash, F.lit(DASH)).otherwise(F.lit(KEPT))
        checked = with_tsv.withColumn(STATUS, status.cast("tinyint"))
        present = fields.getItem(7) != ""

        def field(f):
            value = decoded.get(f, fields.getItem(fmt.fields.index(f)))
            return F.when(present, value) if fmt.nullable(f) else value
        return checked, {f: field(f) for f in node.fields}

    #: the largest split of a parse's input that logetl asks for (``parse_split_bytes``)
    PARSE_SPLIT_MOST = 256 * 1024 * 1024

    def _split_settings(self, ctx: StepContext, step: assembly.Step) -> dict:
        """The session's settings while ``step`` runs: for a step that parses, the split size of
        ``parse_split_bytes``; none when the user set ``spark.sql.files.maxPartitionBytes``, when the cores
        are not known (``_cores``), or when Spark's own rule takes one wave."""
        if not any(isinstance(n, assembly.Parse) for n in step.nodes):
            return {}
        return self.split_settings(self._input_sizes(ctx))

    def split_settings(self, sizes: list[int]) -> dict:
        """The session's settings for a parse of inputs of ``sizes`` bytes (``_split_settings``)."""
        spark = self.session()
        conf = spark._jsparkSession.sessionState().conf()
        cores = self._cores(spark)
        if conf.contains(SPLIT_BYTES) or cores is None:
            return {}
        # the files read on their own (as _lines reads them: not those packed in runs of small files)
        alone = [sizes[first] for first, last in self._reads(sizes) if last == first + 1]
        size = parse_split_bytes(max(alone, default=0), cores, self._spark_split(conf), self.PARSE_SPLIT_MOST)
        return {} if size is None else {SPLIT_BYTES: str(size)}

    @staticmethod
    def _cores(spark) -> int | None:
        """How many tasks the application runs at once, where that is known: on a local master, its
        threads; on a cluster, the cores it asked for (``spark.cores.max``, or executors times their
        cores), or more if more have registered. None with dynamic allocation, or when the cluster gives
        what it has (the executors registered so far may be a few of them: larger splits would then
        leave the others idle)."""
        sc = spark.sparkContext
        if _in_process(sc.master):
            return sc.defaultParallelism
        get = sc.getConf().get
        if (get("spark.dynamicAllocation.enabled") or "false").strip().lower() == "true":
            return None
        try:
            asked = int(get("spark.cores.max") or 0) or \
                int(get("spark.executor.instances") or 0) * int(get("spark.executor.cores") or 0)
        except ValueError:
            return None
        return max(asked, sc.defaultParallelism) if asked else None

    @staticmethod
    def _spark_split(conf) -> int:
        """Spark's own largest split: ``spark.sql.files.maxPartitionBytes`` (the tests change it here)."""
        return conf.filesMaxPartitionBytes()
