"""The Spark engine's session: the master, the driver JVM's options and settings, the files shipped to
the executors, and the session's start as named steps (``SessionSteps.session``)."""
from __future__ import annotations

import os
import re
import shutil
import socket
import sys
import threading
from contextlib import contextmanager, nullcontext

from logetl import settings
from logetl.errors import UsageError
from logetl.engines.base import EngineUnavailable, RunState
from logetl.engines.spark.signals import between_java_calls, sigint_kept
from logetl.io.fs import local_path
from logetl.engines.spark.fs import HadoopFS
from logetl.engines.spark.errors import _java_message


MASTER_ENV = settings.SPARK_MASTER.name


#: the archives the executors unpack into their working directories (a packed venv with logetl's kernel)
ARCHIVES = "spark.archives"


CDS_CONF = settings.JVM_CDS.name


JIT_CONF = settings.JVM_JIT.name


#: a cluster's driver JVM compiles with C1 only (``logetl.jvm.jit=auto``; ``SparkEngine.session``)
DRIVER_C1 = "-XX:TieredStopAtLevel=1"


EXECUTOR_OPTIONS = "spark.executor.extraJavaOptions"


EXECUTOR_DEFAULT_OPTIONS = "spark.executor.defaultJavaOptions"


_GC_OPTION = re.compile(r"-XX:[+-]Use\w*GC\b")     # a collector chosen (or one turned off)


_CDS_OPTION = re.compile(r"-XX:(SharedArchiveFile|ArchiveClassesAtExit|[+-]AutoCreateSharedArchive)\b|-Xshare:")


class _Shipping:
    """The archives of spark.archives, added to a running session by a thread of their own (see
    ``SparkEngine.session``); ``wait`` returns once they are, or says in one line why they could not be."""

    def __init__(self, sc, given: str):
        import threading

        self.given = given       # the setting's value, as the user gave it: what a failure names
        self.failure: str | None = None
        self._thread = threading.Thread(target=self._add, args=(sc,), name="logetl-archives", daemon=True)
        self._thread.start()

    def _add(self, sc) -> None:
        for archive in (a.strip() for a in self.given.split(",")):
            try:
                if archive:
                    sc.addArchive(archive)
            except Exception as exc:   # py4j: the JVM's exception, whose last "Caused by" says why
                self.failure = _java_message(str(exc))
                return

    def wait(self) -> None:
        self._thread.join()
        if self.failure:
            raise EngineUnavailable(f"cannot ship --conf {ARCHIVES}={self.given} to the executors: {self.failure}")


#: the settings whose files Spark copies into the SparkContext when it starts (a missing one fails it)
SHIPPED_FILES = (ARCHIVES, "spark.files")


def _check_shipped_files(conf: dict) -> None:
    """A local file named in spark.archives or spark.files that is missing, or a directory, is named in one
    line before Spark starts. Spark would fail its SparkContext with a stack trace for the first; for a
    directory in spark.archives, the executors failed to fetch it, died and were started again, and the run
    waited for them forever."""
    from urllib.parse import urlparse

    for key in SHIPPED_FILES:
        for entry in (conf.get(key) or "").split(","):
            path = entry.strip().split("#", 1)[0]
            if not path or urlparse(path).scheme not in ("", "file"):
                continue
            shown = local_path(path)
            if not os.path.exists(shown):
                raise UsageError(f"--conf {key}={conf[key]}: no such file {shown!r}")
            if os.path.isdir(shown):
                raise UsageError(f"--conf {key}={conf[key]}: {shown!r} is a directory, not a file"
                                 + (" (an archive: .tar.gz, .tgz, .tar or .zip)" if key == ARCHIVES else ""))


def _check_java() -> None:
    if os.environ.get("JAVA_HOME") or shutil.which("java"):
        return
    raise EngineUnavailable("the spark engine needs Java 17 or later, and no java was found "
                            "(install a JDK or set JAVA_HOME)")


#: the master URLs Spark takes; anything else made the JVM print a stack trace before the one line
_MASTER = re.compile(r"local(\[(\*|[1-9][0-9]*)(\s*,\s*[0-9]+)?\])?"
                     r"|local-cluster\[\s*[0-9]+\s*,\s*[0-9]+\s*,\s*[0-9]+\s*\]|spark://\S+|yarn|k8s://\S+")


def check_master_url(master) -> None:
    """A master URL of a form Spark takes (``--master``, ``run_flow``'s ``master``), without asking anyone:
    checked before anything runs."""
    if master == "":
        raise EngineUnavailable("--master is empty: give a Spark master URL, or leave it out for "
                                f"${MASTER_ENV} or local[*]")
    if not isinstance(master, str) or not _MASTER.fullmatch(master):
        raise EngineUnavailable(f"--master {master!r} is not a Spark master URL (local, local[N], local[*], "
                                "spark://HOST:PORT, yarn, k8s://URL)")


def _check_master(master: str) -> None:
    """A master URL Spark takes, checked here so that a bad one is one line; a standalone master that does
    not answer makes Spark retry for a minute: say so at once."""
    check_master_url(master)
    if master == "yarn" and not (os.environ.get("HADOOP_CONF_DIR") or os.environ.get("YARN_CONF_DIR")):
        raise EngineUnavailable("--master yarn needs HADOOP_CONF_DIR or YARN_CONF_DIR: the directory of the "
                                "cluster's configuration")
    if not master.startswith("spark://"):
        return
    for hostport in master[len("spark://"):].split(","):
        host, _, port = hostport.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=5):
                return
        except (OSError, ValueError):
            continue
    raise EngineUnavailable(f"cannot reach the Spark master at {master} (is it running?)")


EXCLUDED_RULES = "spark.sql.adaptive.optimizer.excludedRules"


EMPTY_RELATION_RULE = "org.apache.spark.sql.execution.adaptive.AQEPropagateEmptyRelation"


@contextmanager
def _session_conf(spark, settings: dict):
    """The session's runtime ``settings`` (key -> value) for the block; its own values are back after it.
    After a block that failed, a value that cannot be put back (the JVM died in the block) does not hide
    the block's error: it is noted on it."""
    before: dict = {}
    try:
        for k, v in settings.items():
            before[k] = spark.conf.get(k, None)
            spark.conf.set(k, v)
        yield
    except BaseException as exc:
        failed = _put_back(spark, before)
        if failed:
            exc.add_note(f"(the session's {', '.join(failed)} could not be put back: {failed[next(iter(failed))]})")
        raise
    failed = _put_back(spark, before)
    if failed:
        raise failed[next(iter(failed))]


def _put_back(spark, before: dict) -> dict:
    """Puts the session's ``before`` values back, each on its own (None: unset); key -> the error of
    each that failed."""
    failed = {}
    for k, v in before.items():
        try:
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)
        except Exception as exc:
            failed[k] = exc
    return failed


def with_executor_options(conf: dict, archive: list[str] = ()) -> dict:
    """The settings of a driver JVM to launch for a cluster (``conf``) with logetl's options for the
    executors' JVMs, added to the options the JVM would take (``conf``'s own, else those of the properties
    spark-submit reads):

    - the throughput collector (``-XX:+UseParallelGC``), as the driver's is on a local master: a batch's
      rows are short-lived (a standalone Join runs faster on it); unless the given or
      the administrator's default options name a collector already (two would stop the executors' JVM
      from starting);
    - ``archive``, the options of a class archive to start from (``ClassArchive.for_executors``): unless
      the given or default options name a class archive or sharing already.

    Nothing is added when ``PYSPARK_SUBMIT_ARGS`` sets either (it would replace this)."""
    from logetl.engines.spark.jvm import spark_defaults

    submit_args = os.environ.get("PYSPARK_SUBMIT_ARGS", "")
    if EXECUTOR_OPTIONS in submit_args or EXECUTOR_DEFAULT_OPTIONS in submit_args:
        return conf
    found = spark_defaults()
    given = conf.get(EXECUTOR_OPTIONS, found.get(EXECUTOR_OPTIONS, ""))
    default = conf.get(EXECUTOR_DEFAULT_OPTIONS, found.get(EXECUTOR_DEFAULT_OPTIONS, ""))
    added = []
    if not (_GC_OPTION.search(given) or _GC_OPTION.search(default)):
        added.append("-XX:+UseParallelGC")
    if archive and not (_CDS_OPTION.search(given) or _CDS_OPTION.search(default)):
        added += archive
    if not added:
        return conf
    return {**conf, EXECUTOR_OPTIONS: " ".join([given, *added]).strip()}


def workers_here(master: str) -> bool:
    """Whether every worker of ``master`` runs on this machine: ``local-cluster[...]``, or a standalone
    master on loopback addresses only (a worker on another machine could not reach it, short of a tunnel
    to it). A master named by this machine's host name or address does not count: other machines'
    workers may have joined it."""
    from logetl.io.net import is_loopback

    if master.startswith("local-cluster"):
        return True
    if not master.startswith("spark://"):
        return False
    return all(is_loopback(_host(a)) for a in master[len("spark://"):].split(","))


def _host(address: str) -> str:
    """The host of a master's ``host:port``, ``[v6]:port``, or host alone."""
    address = address.strip()
    if address.startswith("["):
        return address[1:].partition("]")[0]
    return address.rsplit(":", 1)[0] if address.count(":") == 1 else address


def _in_process(master: str) -> bool:
    """Whether ``master`` runs the executors in the driver's JVM (``local``, ``local[...]``; not
    ``local-cluster[...]``, whose executors have JVMs of their own, as on a cluster)."""
    return re.fullmatch(r"local(\[.*\])?", master) is not None


ACCUMULATOR_SHUTDOWN_THREAD = "logetl-accumulator-server-shutdown"


def _accumulators_stopped_aside(sc) -> None:
    """Makes ``sc.stop()`` leave the shutdown of PySpark's accumulator server to a thread of its own. The
    server is a ``socketserver`` whose loop looks every 0.5 s (a connection's handler every 1 s) whether to
    stop, and its ``shutdown()`` waits for that look: 0.25 s of every run's end on average, with the run's
    work all done. The thread (a daemon: the process does not wait for it) does the same shutdown, and
    closes the server's socket, at the loop's pace, or the process's exit closes it first. Only a TCP
    server: one on a Unix domain socket removes its socket file when its shutdown ends, which a process
    that exits first would leave behind."""
    server = getattr(sc, "_accumulatorServer", None)
    if server is None or not isinstance(server.server_address, tuple):
        return
    blocking = server.shutdown
    server.shutdown = lambda: threading.Thread(target=blocking, name=ACCUMULATOR_SHUTDOWN_THREAD, daemon=True).start()


class SparkRun(RunState):
    """The Spark engine's state of one run: besides the staged outputs and the trap (``RunState``), the
    frames a step persisted (unpersisted when it ends)."""

    def __init__(self, fs: HadoopFS, taps, partitioned=None):
        super().__init__(taps, fs, create=False, partitioned=partitioned)
        self.persisted: list = []
        self.accounted: set[str] = set()   # the steps whose parse counters came back (``_account``)

    def close(self, ok: bool) -> None:
        for df in self.persisted:
            df.unpersist()
        self.persisted = []
        super().close(ok)


def _session_class():
    """PySpark's ``SparkSession``, or the reason the engine is unavailable."""
    import warnings

    # PySpark warns about the pandas version when pandas happens to be installed; logetl never uses
    # pandas on Spark, so a user would only be puzzled by it
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise EngineUnavailable("the spark engine needs PySpark: pip install 'logetl[spark]'") from None
    return SparkSession


def _local_environment(master: str | None, conf: dict) -> None:
    """A local master's environment: loopback only, and this interpreter for the Python workers."""
    if master and master.startswith("local") and "SPARK_LOCAL_IP" not in os.environ:
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"   # a local run binds to loopback only
    if master and master.startswith("local") and "PYSPARK_PYTHON" not in os.environ \
            and "spark.pyspark.python" not in conf:
        # local executors run on this machine: their Python workers (that parse path) are this
        # interpreter, with logetl and its kernel, rather than PySpark's default, whatever python3 is
        os.environ["PYSPARK_PYTHON"] = sys.executable


def _archives_held(conf: dict, master: str | None, launched: bool) -> tuple[dict, str | None]:
    """The settings without ``spark.archives`` when they are shipped after the session starts, and those
    archives (else the settings as they are, and None)."""
    if launched and master and not master.startswith("local") and conf.get(ARCHIVES):
        # Spark unpacks every archive of spark.archives in the driver too, in the SparkContext's
        # constructor, before it asks the cluster for executors (a 66 MB packed venv added ~1.7 s to
        # the session's start here, in client mode, where the driver never uses it). Added right after
        # the session starts, the same archives are unpacked while the executors' JVMs start, and every
        # task (the check's first) carries them: each executor fetches them before its first Python
        # worker starts.
        conf = dict(conf)
        return conf, conf.pop(ARCHIVES)
    return conf, None


class SessionSteps:
    """The Spark engine's session: the driver JVM's launch (with logetl's jar and class archive), the
    master, the settings, the shipped files; one per engine, kept or shut down with it."""

    # --- the session ------------------------------------------------------------------------------------

    def session(self):
        """This engine's Spark session, started on first use in named steps: the master, the driver JVM's
        options, the settings, the launch, then the session's own settings."""
        if self._spark is not None:
            return self._spark
        SparkSession = _session_class()
        _check_java()
        settings.SPARK_LOG_LEVEL.read()     # a bad level is refused before the JVM starts
        _check_shipped_files(self.conf)
        under_submit = "PYSPARK_GATEWAY_PORT" in os.environ   # launched by spark-submit: it set the master
        active = SparkSession.getActiveSession()
        master = self._master(under_submit, active)
        java_options = self._driver_java_options(master, under_submit, active)
        conf = self._session_settings(master, java_options, under_submit, active)
        _local_environment(master, conf)
        from pyspark import SparkContext

        launching = SparkContext._gateway is None and not under_submit
        conf, shipped = _archives_held(conf, master, launching and active is None)
        builder = SparkSession.builder.appName("logetl")
        if master:
            builder = builder.master(master)
        for k, v in conf.items():
            builder = builder.config(k, v)
        self._owns_session = active is None and not under_submit
        self._launched = launching and active is None
        self._start(builder, master, conf, launching)
        self._started(shipped)
        return self._spark

    def _master(self, under_submit: bool, active) -> str | None:
        """The master URL, checked: the engine's, else none under spark-submit or beside an active session
        (theirs holds), else ``LOGETL_SPARK_MASTER`` or ``local[*]``."""
        if self.master == "":
            check_master_url(self.master)
        master = self.master or (None if under_submit or active else settings.SPARK_MASTER.read())
        if master:
            _check_master(master)
        return master

    def _driver_java_options(self, master: str | None, under_submit: bool, active) -> list[str]:
        """The driver JVM's options: logetl's log4j settings, the collector of a local master, the JIT's
        compilers, and the class archive when this process launches the JVM."""
        log4j = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")
        from logetl.engines.spark.cds import option

        java_options = [option("-Dlog4j2.configurationFile=file:", log4j)]
        if master and master.startswith("local"):
            # the executors run in this JVM: the throughput collector spends less CPU than the default
            # (G1) on a batch's short-lived rows (2M-line Branch, local[*]: ~4 s less wall, 5-10 s less CPU)
            java_options.append("-XX:+UseParallelGC")
        java_options += self._driver_compilers(master)
        from pyspark import SparkContext

        if self.cds and SparkContext._gateway is None and not under_submit and active is None \
                and "spark.driver.extraJavaOptions" not in self.conf:
            # this process launches the driver JVM: with the class archive, its start costs less
            from logetl.engines.spark.cds import ClassArchive

            self._archive = ClassArchive(self.conf)
            java_options += self._archive.options()
        return java_options

    def _session_settings(self, master: str | None, java_options: list[str], under_submit: bool, active) -> dict:
        """The session's settings: logetl's, the driver's options, the user's (``--conf``), and, when this
        process launches the driver JVM, logetl's jar and the executors' options."""
        from pyspark import SparkContext

        conf = {
            "spark.ui.showConsoleProgress": "false",
            # no .crc files beside local outputs: a local output must hold exactly part-* and _SUCCESS
            "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
            "spark.hadoop.fs.file.impl.disable.cache": "true",
            "spark.driver.extraJavaOptions": " ".join(java_options),
            **self.conf,
        }
        if SparkContext._gateway is None and not under_submit and active is None:
            # this process launches the driver JVM: with logetl's jar (the kernel for the executors' JVMs)
            conf = self._with_jar(conf)
            if master and not _in_process(master):
                conf = with_executor_options(conf, self._executors_archive(master))
        return conf

    def _start(self, builder, master: str | None, conf: dict, launching: bool) -> None:
        """Starts the session (launching the driver JVM when this process does); a failure is one line that
        names the user's settings."""
        try:
            # a signal while the JVM answers is raised when it has (spark_signals); PySpark's SIGINT handler
            # is not kept for a session of logetl's
            with between_java_calls(), (sigint_kept() if self._owns_session else nullcontext()):
                if launching:
                    # this process launches the driver JVM: through a pipe of ours for its stderr (spark_launch)
                    from logetl.engines.spark.launch import launch

                    launch({**({"spark.master": master} if master else {}), "spark.app.name": "logetl", **conf})
                self._spark = builder.getOrCreate()
        except Exception as exc:
            # the user's settings are named: Spark's message ("Executor memory must be a positive number")
            # does not say which value it refused
            given = f" with {', '.join(f'--conf {k}={v}' for k, v in self.conf.items())}" if self.conf else ""
            raise EngineUnavailable(f"cannot start Spark ({master or 'from spark-submit'}){given}: "
                                    f"{str(exc).strip().splitlines()[0]}") from None

    def _started(self, shipped) -> None:
        """What follows the session's start: the memory settings a failure names, the archives shipped
        after it, the log level, and the optimizer rules left out."""
        # what a run out of memory names (_memory_failure): read now, as the JVM may not answer after it
        jconf = self._spark.sparkContext._conf
        self._memory = {k: jconf.get(k) for k in ("spark.driver.memory", "spark.executor.memory")}
        if shipped:
            self._shipping = _Shipping(self._spark.sparkContext, shipped)
        self._spark.sparkContext.setLogLevel(settings.SPARK_LOG_LEVEL.read())
        # Adaptive execution replaces a plan whose stage came out empty with an empty relation, and the
        # observations (lines read, malformed, every counter) in the replaced part are lost with it: a
        # Filter whose filter kept nothing reported 0 lines read. The rule is left out, kept with the
        # session's own exclusions.
        excluded = [r for r in (self._spark.conf.get(EXCLUDED_RULES, "") or "").split(",") if r.strip()]
        if EMPTY_RELATION_RULE not in excluded:
            self._spark.conf.set(EXCLUDED_RULES, ",".join(excluded + [EMPTY_RELATION_RULE]))

    def _driver_compilers(self, master: str | None) -> list[str]:
        """The driver JVM's options of its JIT compilers: C1 only on a cluster master (``logetl.jvm.jit=auto``).
        Like logetl's other driver options, they give way to a ``spark.driver.extraJavaOptions`` of the user's."""
        # A cluster's driver runs no task: it plans, schedules and answers the executors, code that runs
        # thousands of times a run, not millions. C2's compiling of it cost more than its faster code
        # saved, on cores the executors share (standalone, 2 cores, 2M-line Join: the driver's compiler
        # threads took 9.8 s of CPU in a 23 s run); with C1 only, Join 19.1 s against 23.0 s, Branch
        # 10.7 against 12.9 s. On a local master the driver's JVM runs the tasks: C2 stays.
        return [DRIVER_C1] if master and not _in_process(master) and self.driver_c1 else []

    def _executors_archive(self, master: str) -> list[str]:
        """The options of the class archive the executors' JVMs start from: the driver's, once it is in
        place, where the executors run on this machine (``workers_here``) from the same Spark class path
        (no ``spark.executor.extraClassPath``: a JVM whose class path differs ignores the archive); none
        with ``logetl.jvm.cds=off``. Whether or not the driver itself starts from it."""
        # about a tenth off a standalone run: without it, an executor's JVM loads Spark's classes from the
        # jars before it registers (docs/guides/spark.md)
        if not self.cds or not workers_here(master) or "spark.executor.extraClassPath" in self.conf:
            return []
        from logetl.engines.spark.cds import ClassArchive

        return (self._archive or ClassArchive(self.conf)).for_executors()

    def _with_jar(self, conf: dict) -> dict:
        """``conf`` with logetl's jar added to ``spark.jars``, when it can be built here: Spark puts it on the
        driver's class path and every executor fetches it, as any application jar, so nothing need be
        installed on the cluster (``spark_jvm``). Whatever this engine's parse path: the session may serve
        other runs (a notebook's, a test session's), and the jar costs nothing once built."""
        from logetl.engines.spark import jvm as spark_jvm

        try:
            self._jar = spark_jvm.jar()
        except spark_jvm.Unavailable as exc:
            self._no_jar = str(exc)
            return conf
        return spark_jvm.with_jar(conf, self._jar)

    def filesystem(self):
        """The session's file systems (``HadoopFS``): one for the session, so that what it looked up once
        (classes, file systems, qualified names) serves all of the session's runs."""
        spark = self.session()
        if self._fs is None or self._fs.spark is not spark:
            self._fs = HadoopFS(spark)
        return self._fs

    def shipped(self):
        """The session, once the archives of spark.archives are added to it: what every job waits for, so
        that its tasks carry them."""
        spark = self.session()
        if self._shipping is not None:
            shipping, self._shipping = self._shipping, None
            shipping.wait()
        return spark

    def keep_session(self):
        """Hands the session over to the caller (a test fixture, a notebook): shutdown will not stop it."""
        spark = self.shipped()
        self._owns_session = False
        return spark

    def shutdown(self) -> None:
        if self._spark is not None and self._owns_session:
            with between_java_calls():
                if not settings.SPARK_LOG_LEVEL.is_set():
                    # what Spark logs while it stops is not about the run: an executor that was still
                    # starting (a session refused right after its start) reports to a scheduler already
                    # gone, and the driver logged "Could not find CoarseGrainedScheduler" with its stack
                    try:
                        self._spark.sparkContext.setLogLevel("OFF")
                    except Exception:   # a JVM that is gone: stop() below tolerates it too (with a warning)
                        pass
                _accumulators_stopped_aside(self._spark.sparkContext)
                self._spark.stop()
        self._spark = self._fs = None
