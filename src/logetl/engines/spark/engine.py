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

- Lines: ``spark.read.text`` with ``lineSep="\\n"`` (Spark's default also splits on ``\\r``); the raw
  bytes are kept, so ``is_valid_utf8`` finds invalid UTF-8; one trailing ``\\r`` is cut with
  ``\\r\\z``; Java's regex engine has ASCII classes by default, and ``(?s)`` makes ``.`` match anything.
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
  context, never on the engine.
"""
from __future__ import annotations

import errno
import os
import re
import shutil
import socket
import sys
import threading
from contextlib import contextmanager, nullcontext
from functools import lru_cache, partial, reduce, wraps
from itertools import count

from logetl import __version__, assembly, contract
from logetl.errors import RunFailed, UsageError
from logetl.engines.base import Engine, EngineUnavailable, RunState, StepContext, partitioned_taps
from logetl import expressions as E
from logetl.engines.spark.expressions import AGGREGATES, COMPILE, Compiler, column
from logetl.engines.spark.expressions import SESSION
from logetl.engines.spark.expressions import text as text_of
from logetl.engines.spark.native import DASH, INPUT, KEPT, SAMPLE, SAMPLES, STATUS, TAG
from logetl.engines.spark.progress import StepProgress
from logetl.engines.spark.signals import between_java_calls, sigint_kept, stopping
from logetl.io.fs import LOCAL, LocalFS, hadoop_local_path, local_path
from logetl.io.inputs import InputReadError
from logetl.io.outputs import DELIMITED, NAME_MAX, PART, header_line, partition_name

SPARK_PATTERN = "(?s)" + contract.PATTERN
SPARK_TAIL_PATTERN = "(?s)" + contract.TAIL_PATTERN
MASTER_ENV = "LOGETL_SPARK_MASTER"
#: the archives the executors unpack into their working directories (a packed venv with logetl's kernel)
ARCHIVES = "spark.archives"
PARSE_CONF = "logetl.parse"
CDS_CONF = "logetl.jvm.cds"
JIT_CONF = "logetl.jvm.jit"
#: a cluster's driver JVM compiles with C1 only (``logetl.jvm.jit=auto``; ``SparkEngine.session``)
DRIVER_C1 = "-XX:TieredStopAtLevel=1"
CACHE_COMPRESSED = "spark.sql.inMemoryColumnarStorage.compressed"
MAX_WRITERS = "spark.sql.maxConcurrentOutputFileWriters"
SPLIT_BYTES = "spark.sql.files.maxPartitionBytes"
EXECUTOR_OPTIONS = "spark.executor.extraJavaOptions"
EXECUTOR_DEFAULT_OPTIONS = "spark.executor.defaultJavaOptions"
_GC_OPTION = re.compile(r"-XX:[+-]Use\w*GC\b")     # a collector chosen (or one turned off)
_CDS_OPTION = re.compile(r"-XX:(SharedArchiveFile|ArchiveClassesAtExit|[+-]AutoCreateSharedArchive)\b|-Xshare:")
#: logetl's settings given with --conf (never passed to Spark): name -> the values it takes
#: the parse paths: the kernel in the executors' JVMs, in their Python workers, or Spark's regular expressions
JVM, PYTHON, BUILTIN = "jvm", "python", "builtin"
#: the notices of the parse paths
JVM_NOTICE = "Spark parses with logetl's native kernel in the executors' JVMs"
PYTHON_NOTICE = "Spark parses with logetl's native kernel in the executors' Python workers"
BUILTIN_NOTICE = "Spark parses with its built-in regular expressions"
LOGETL_CONF = {PARSE_CONF: ("auto", "native", JVM, PYTHON, BUILTIN), CDS_CONF: ("auto", "off"),
               JIT_CONF: ("auto", "tiered")}
#: what the session's checks found, by (Spark application, path): (the executors can run the kernel, why not)
_NATIVE_CHECKS: dict[tuple[str, str], tuple[bool, str]] = {}
ORDER = "_order"
#: what a Hadoop path string starts with that names its file system (``HadoopFS._p``)
_FS_PREFIX = re.compile(r"(?:[^/:]*:)?(?://[^/]+)?")
#: how stores (a step's output that later steps read, checkpoints included) are written: without Parquet's
#: dictionary encoding, which a store (written once, read once) pays for on every high-cardinality string
#: column (request, time: 2M-line Join, local[*]: the parse-and-store job 7.9 s of executor CPU against
#: 11.3 s, and the step that reads it 1.2 s against 2.2 s); bigger files on the working directory's disk
STORE_OPTIONS = {"parquet.enable.dictionary": "false"}

#: the types a JSON Lines sink writes as JSON numbers from their text (``spark_expressions.SINK_TEXT``): the
#: text is made a string first, then the quotes around it are taken off (``SparkEngine._json_line``)
JSON_NUMBERS = {E.FLOAT}


_OBSERVATIONS = count()     # observation names are unique within the session: numbered, whatever the run


@contextmanager
def counting_jvm_calls():
    """The number of JVM calls made while in it (``[n]``; each is a py4j round trip), for the tests and
    benchmarks of binding. Not counted: the releases of the Java objects Python dropped (a round trip each
    too), which py4j makes on a thread of its own when it gets to them, so how many land in a count varies."""
    import py4j.clientserver
    import py4j.java_gateway
    from py4j.protocol import MEMORY_COMMAND_NAME

    made = [0]
    connections = (py4j.clientserver.ClientServerConnection, py4j.java_gateway.GatewayConnection)
    real = [c.send_command for c in connections]

    def counting(send):
        def counted(self, command, *args, **kwargs):
            made[0] += not command.startswith(MEMORY_COMMAND_NAME)
            return send(self, command, *args, **kwargs)
        return counted

    for c, send in zip(connections, real):
        c.send_command = counting(send)
    try:
        yield made
    finally:
        for c, send in zip(connections, real):
            c.send_command = send


def _locally(query):
    """``HadoopFS.query`` answered by ``LocalFS.query`` for a local path (``file:``, what a path without a
    scheme is unless ``fs.defaultFS`` says otherwise), so that Spark tells the local engine's inputs and
    outputs apart as the local engine does. Hadoop's local file system follows a symbolic link in a status
    (one is never a link; a broken one is left out of a listing and does not exist), takes a FIFO or a
    device for a file, and answers ``access`` by starting a shell command, two processes a file, which
    says no to root; each status is a few JVM calls, too. So on Spark a broken link or a FIFO in an input
    directory was skipped without a word, a FIFO given as the input read as empty, a symbolic link given
    as an output not refused, binding 2,000 local files took 7.5 s more, and a file of mode 000 that root
    reads refused (and a broken link in an output was not seen). What changes files stays Hadoop's."""
    local_query = getattr(LocalFS, query.__name__)

    @wraps(query)
    def answered(self, p: str):
        local = self.local(p)
        return query(self, p) if local is None else local_query(LOCAL, local)
    return answered


class HadoopFS:
    """``logetl.io.fs.LocalFS``'s interface over Hadoop's FileSystem API (through the Spark driver's JVM)."""

    name = "hadoop"

    def __init__(self, spark):
        jvm = spark._jvm
        self.spark = spark
        self.conf = spark._jsc.hadoopConfiguration()
        # Every JVM call is a round trip (~0.1 ms), and every Java object handed back costs one more when
        # Python drops it. Binding a directory of 2,000 small files took 105,000 of them (13 s, longer than
        # the run): so the Java classes are looked up once (py4j resolves each name of a dotted path in a
        # round trip of its own), each file system once (``_p``), each path's qualified names once
        # (``_names``), a directory's entries come with their kinds from one listing (``entries``), and
        # what a local path is, the operating system says (``_locally``).
        self._Path = jvm.org.apache.hadoop.fs.Path
        self._read = jvm.org.apache.hadoop.fs.permission.FsAction.READ
        self._IOUtils = jvm.org.apache.commons.io.IOUtils
        self._StringUtils = jvm.org.apache.hadoop.util.StringUtils
        self._filesystems: dict[str, object] = {}
        self._default_scheme = (jvm.org.apache.hadoop.fs.FileSystem.getDefaultUri(self.conf).getScheme() or "").lower()
        # a path's qualified names depend only on the path and the session's Hadoop configuration (its
        # default file system; the JVM's working directory): kept for the session, bounded
        self._names = lru_cache(maxsize=1 << 16)(self._qualify)

    def _p(self, p: str):
        """(the file system of path ``p``, ``p`` as a Hadoop Path). The file system is the one Hadoop's
        ``Path.getFileSystem`` gives, looked up once for each scheme and authority ``p`` starts with
        (Hadoop's own parse of a path string: a scheme before the first ``/``, then ``//authority``; none
        is the default file system). A name that is not UTF-8 (a local file's, which Python keeps as it
        is) cannot be sent to the JVM: refused, naming it."""
        try:
            p.encode()
        except UnicodeEncodeError:
            raise UsageError(f"path {p!r} is not UTF-8: Spark cannot name it; rename it") from None
        path = self._Path(p)
        key = _FS_PREFIX.match(p).group(0)
        fs = self._filesystems.get(key)
        if fs is None:
            fs = self._filesystems[key] = path.getFileSystem(self.conf)
        return fs, path

    def _qualify(self, p: str) -> tuple[str, str]:
        fs, path = self._p(p)
        qualified = fs.makeQualified(path)
        return qualified.toString(), qualified.toUri().toString()

    def abspath(self, p: str) -> str:
        return self._names(p)[0]

    def strings(self, paths) -> list[str]:
        """A Java array of paths (``String[]``) as a list, in one round trip, not one an element (the
        array is joined in the JVM with NUL, which no path holds)."""
        joined = self._StringUtils.join("\0", paths)
        return joined.split("\0") if joined else []

    def file_uris(self, p: str) -> list[str]:
        """The names a Spark scan may give file ``p`` (``_metadata.file_path``, ``inputFiles``): its
        qualified path as a URI. A local file has two: Hadoop qualifies ``/a`` as ``file:///a``, and
        Spark's ``_metadata.file_path`` names it ``file:/a``."""
        uri = self._names(p)[1]
        if uri.startswith("file:///"):
            return [uri, "file:/" + uri[len("file:///"):]]
        if uri.startswith("file:/") and not uri.startswith("file://"):
            return [uri, "file:///" + uri[len("file:/"):]]
        return [uri]

    def join(self, *parts: str) -> str:
        return "/".join([parts[0].rstrip("/")] + [x.strip("/") for x in parts[1:]])

    def parent(self, p: str) -> str:
        return self._Path(self.abspath(p)).getParent().toString()

    def basename(self, p: str) -> str:
        return self._Path(p).getName()

    def _status(self, p: str):
        fs, path = self._p(p)
        try:
            return fs.getFileStatus(path)
        except Exception as exc:  # py4j wraps java.io.FileNotFoundException
            if "FileNotFoundException" in str(exc):
                return None
            raise

    @_locally
    def exists(self, p: str) -> bool:
        fs, path = self._p(p)
        return bool(fs.exists(path))

    @_locally
    def isdir(self, p: str) -> bool:
        st = self._status(p)
        return bool(st is not None and st.isDirectory())

    @_locally
    def isfile(self, p: str) -> bool:
        st = self._status(p)
        return bool(st is not None and st.isFile())

    @_locally
    def islink(self, p: str) -> bool:
        st = self._status(p)
        return bool(st is not None and st.isSymlink())

    @_locally
    def listdir(self, p: str) -> list[str]:
        fs, path = self._p(p)
        return sorted(s.getPath().getName() for s in fs.listStatus(path))

    @_locally
    def entries(self, p: str) -> list[tuple[str, str]]:
        """``LocalFS.entries``, from the statuses of one listing, not a status query an entry. A link in
        the listing (a ViewFS mount point is listed as one) is followed, as a status query follows it."""
        fs, path = self._p(p)
        return sorted((s.getPath().getName(), self._kind(s)) for s in fs.listStatus(path))

    def _kind(self, status) -> str:
        """An entry's kind (``entries``) from its status in a listing, a link's from its target's."""
        if status.isFile():
            return "file"
        if status.isDirectory():
            return "dir"
        if status.isSymlink():
            target = self._status(status.getPath().toString())
            if target is not None and (target.isFile() or target.isDirectory()):
                return "file" if target.isFile() else "dir"
        return "other"

    def glob(self, pattern: str) -> list[str]:
        fs, path = self._p(pattern)
        found = fs.globStatus(path)
        return sorted(s.getPath().toString() for s in (found or []))

    def has_magic(self, p: str) -> bool:
        return any(c in p for c in "*?[{")

    def stat(self, p: str) -> tuple[int, int]:
        local = self.local(p)
        if local is not None:   # (see _locally) in Hadoop's milliseconds, as fingerprints made before hold
            size, mtime_ns = LOCAL.stat(local)
            return size, mtime_ns // 1_000_000 * 1_000_000
        st = self._status(p)
        return int(st.getLen()), int(st.getModificationTime()) * 1_000_000

    def local(self, p: str) -> str | None:
        """``p``'s path on this machine when Hadoop takes it for a local file (``file:``), else None (known
        from its scheme, or the default file system's, without a JVM call)."""
        prefix = _FS_PREFIX.match(p).group(0)
        scheme = prefix.split(":", 1)[0].lower() if ":" in prefix else self._default_scheme
        if scheme != "file":
            return None
        qualified = self.abspath(p)
        return hadoop_local_path(qualified) if qualified.startswith("file:") else None

    @_locally
    def change_marks(self, p: str) -> dict:
        """A local file's inode and inode change time (``LocalFS.change_marks``); Hadoop's file status has
        neither, so on HDFS and object stores size and modification time alone tell files apart."""
        return {}

    @_locally
    def readable(self, p: str) -> bool:
        fs, path = self._p(p)
        try:
            fs.access(path, self._read)
            return True
        except Exception:
            return False

    def writable_ancestor(self, p: str) -> str | None:
        return None  # the cluster's permissions are checked when the output is written

    def non_directory_ancestor(self, p: str) -> str | None:
        probe = self._Path(self.abspath(p)).getParent()
        while probe is not None and not self.exists(probe.toString()):
            probe = probe.getParent()
        return None if probe is None or self.isdir(probe.toString()) else probe.toString()

    def makedirs(self, p: str) -> None:
        fs, path = self._p(p)
        with _java_io(f"cannot make directory {p!r}"):
            fs.mkdirs(path)

    def rmtree(self, p: str) -> None:
        fs, path = self._p(p)
        with _java_io(f"cannot remove {p!r}"):
            fs.delete(path, True)

    def remove(self, p: str) -> None:
        fs, path = self._p(p)
        with _java_io(f"cannot remove {p!r}"):
            fs.delete(path, False)

    def rename(self, src: str, dst: str) -> None:
        fs, s = self._p(src)
        _, d = self._p(dst)
        # (between two local file systems Hadoop copies: the copy may find the target's file system full)
        with _java_io(f"cannot rename {src!r} to {dst!r}"):
            renamed = fs.rename(s, d)
        if not renamed:
            raise OSError(f"cannot rename {src!r} to {dst!r}")

    def replace_dir(self, src: str, dst: str) -> None:
        # Hadoop moves a directory *into* an existing one: an empty target is removed first. The result
        # still appears whole, in one rename.
        if self.isdir(dst):
            self.remove(dst)
        self.rename(src, dst)

    def read_bytes(self, p: str) -> bytes | None:
        fs, path = self._p(p)
        if not fs.exists(path):
            return None
        stream = fs.open(path)
        try:
            return bytes(self._IOUtils.toByteArray(stream))
        finally:
            stream.close()

    def read_tail(self, p: str, n: int) -> bytes:
        """The last ``n`` bytes of a file (all of it, when it is shorter)."""
        fs, path = self._p(p)
        size = int(fs.getFileStatus(path).getLen())
        n = min(n, size)
        stream = fs.open(path)
        try:
            stream.seek(size - n)
            return bytes(self._IOUtils.toByteArray(stream, n))
        finally:
            stream.close()

    def read_text(self, p: str) -> str | None:
        data = self.read_bytes(p)
        return None if data is None else data.decode("utf-8")

    def write_text_atomic(self, p: str, text: str) -> None:
        tmp = f"{p}.tmp-{os.getpid()}"
        fs, tpath = self._p(tmp)
        with _java_io(f"cannot write {p!r}"):
            out = fs.create(tpath, True)
            try:
                out.write(bytearray(text.encode("utf-8")))
                out.hsync()
            finally:
                out.close()
        if self.exists(p):
            self.remove(p)
        self.rename(tmp, p)

    def touch(self, p: str) -> None:
        fs, path = self._p(p)
        with _java_io(f"cannot write {p!r}"):
            fs.create(path, True).close()

    def prepend(self, p: str, data: bytes) -> None:
        """``LocalFS.prepend``: a local file by Python (Hadoop's local file system would write a checksum
        file beside the copy), any other by a copy within the JVM."""
        local = self.local(p)
        if local is not None:
            LOCAL.prepend(local, data)
            return
        tmp = f"{p}.tmp-{os.getpid()}"
        fs, path = self._p(p)
        _, tpath = self._p(tmp)
        with _java_io(f"cannot write {p!r}"):
            out = fs.create(tpath, True)
            try:
                out.write(bytearray(data))
                source = fs.open(path)
                try:
                    self._IOUtils.copyLarge(source, out)
                finally:
                    source.close()
            finally:
                out.close()
        self.remove(p)
        self.rename(tmp, p)

    pid_alive = staticmethod(LocalFS.pid_alive)   # the driver runs here, whatever file system it writes


@contextmanager
def _java_io(what: str):
    """A change HadoopFS makes, failing as LocalFS's would: an OSError, ENOSPC for a full file system (the
    run then names which of its places are full), else ``WHAT: REASON`` (Java's root cause, no trace)."""
    try:
        yield
    except Exception as exc:
        if type(exc).__name__ != "Py4JJavaError":
            raise
        text = str(exc)
        if "No space left on device" in text:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)) from None
        raise OSError(f"{what}: {_java_message(text)}") from None


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


def _raw(value) -> bytes:
    return value.encode("utf-8", "surrogateescape") if isinstance(value, str) else bytes(value)


def _worker_failure(exc: Exception) -> str:
    """One line from a failed job of the check: why the Python worker could not start (Spark's message for
    a missing interpreter), or the last exception it raised, without Spark's stack traces."""
    text = str(exc)
    m = re.search(r"Cannot run program [^\n]*", text)
    if m:
        return m.group(0).strip()
    found = re.findall(r"^\s*(?:[\w.]+\.)?(\w+(?:Error|Exception)): (.+)$", text, re.M)
    found = [(name, msg) for name, msg in found if not name.startswith(("Py4J", "Spark"))]
    if found:
        return f"{found[-1][0]}: {found[-1][1].strip()}"
    return _java_message(text) if text.strip() else type(exc).__name__


#: a job that failed reading an input: Spark's message names the file (a URI), its cause the reason
_READ_FAILED = re.compile(r"\[FAILED_READ_FILE[\w.]*\] Encountered error while reading file ([^\n]+?)\.?\s+SQLSTATE")
_CAUSE = re.compile(r"^Caused by: ([\w.$]+)(?:: ([^\n]*))?$", re.M)
#: the marker of a row whose partition value no directory name can hold (``_sink``)
PARTITION_REFUSED = "logetl: a partition value no directory name can hold"
#: what ``io.outputs.partition_name`` escapes as %XX, as a Java regex class
_ESCAPED_CLASS = r"""[\x01-\x1f"#%'*/:=?\\\x7f{\[\]^]"""


def _read_failure(text: str) -> InputReadError | None:
    """A job that failed reading an input (a truncated or corrupt compressed file), its failure's ``text``,
    as the local engine says it, in one line: ``cannot read input 'FILE': REASON`` (Spark's root cause),
    else None."""
    found = _READ_FAILED.search(text)
    if found is None:
        return None
    path = local_path(found.group(1).strip())
    return InputReadError(f"cannot read input {path!r}: {_root_cause(text, 'read failed')}")


#: the exception a py4j call raised in the JVM, as py4j shows it (": java.io.FileNotFoundException: ...")
_PY4J_THROWN = re.compile(r"^: ([\w.$]+)(?:: ([^\n]*))?$", re.M)


def _java_message(text: str) -> str:
    """What a failed py4j call says: the root cause's message, else the thrown exception's."""
    thrown = _PY4J_THROWN.search(text)
    otherwise = (thrown.group(2) or thrown.group(1)).strip() if thrown else (text.strip().splitlines() or ["?"])[0]
    return _root_cause(text, otherwise)


def _root_cause(text: str, otherwise: str) -> str:
    """The last ``Caused by`` of a Java failure's text: its message, else its exception's simple name."""
    causes = _CAUSE.findall(text)
    return (causes[-1][1].strip() or causes[-1][0].rsplit(".", 1)[-1]) if causes else otherwise


#: a job that failed writing (an output, a store, the trap), and Java's text of a full file system
_WRITE_FAILED = re.compile(r"\[TASK_WRITE_FAILED\]")
_NO_SPACE = re.compile(r"^Caused by: [\w.$]+: (?:[\w.$]+: )*No space left on device", re.M)


def _write_failure(text: str) -> Exception | None:
    """A job that failed writing (its failure's ``text``), in one line as the local engine says it, else
    None: a full file system is the OSError ENOSPC (the run then names which of its places are full),
    anything else ``writing failed: REASON`` (Spark's root cause, without its traces)."""
    if not _WRITE_FAILED.search(text):
        return None
    if _NO_SPACE.search(text):
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return RunFailed(f"writing failed: {_root_cause(text, 'a task failed')}")


#: Java's OutOfMemoryError as a failure's text gives it: thrown by the call (": java.lang.OutOfMemoryError:
#: ..."), as a cause, or as a task's failure ("(TID 3) (host executor 1): java.lang.OutOfMemoryError: ...")
_OUT_OF_MEMORY = re.compile(r"(?:^: |^Caused by: |\): )java\.lang\.OutOfMemoryError(?:: ([^\n]*))?", re.M)
#: the reasons that more heap cures (a bare OutOfMemoryError is one): not Metaspace, direct buffers,
#: native threads or an array past the VM's limit
_HEAP_REASONS = ("Java heap space", "GC overhead limit exceeded", "")
#: a memory setting's value as Spark reads it: a number and a unit (none: MiB)
_MEMORY_SIZE = re.compile(r"(\d+)\s*b|(\d+)\s*([kmgtp]?)b?", re.I)
_MIB = {"k": 1 / 1024, "": 1, "m": 1, "g": 1024, "t": 1024 ** 2, "p": 1024 ** 3}


def _twice(size: str) -> str | None:
    """Twice a Spark memory size (``512m`` -> ``1g``), in g when whole, else in m; None if unreadable."""
    found = _MEMORY_SIZE.fullmatch(size.strip())
    if found is None:
        return None
    mib = 2 * (int(found.group(1)) / 2 ** 20 if found.group(1) else int(found.group(2)) * _MIB[found.group(3).lower()])
    return f"{int(mib // 1024)}g" if mib >= 1024 and mib % 1024 == 0 else f"{max(round(mib), 1)}m"


def _memory_failure(text: str, master: str, memory: dict, launched: bool) -> RunFailed | None:
    """A JVM that ran out of memory, in one line, else None: when more heap cures it, the line names the
    setting that gives it more, with what it had (``memory``: the session's ``spark.driver.memory`` and
    ``spark.executor.memory``, None where unset). On a local master the tasks run in the driver, whose
    memory is then the one; on a cluster it may be the driver's (planning, thousands of input files) or an
    executor's (a task), and both are named. A JVM logetl did not launch (spark-submit, a session of the
    caller's) took its memory when it started: spark-submit's options are named."""
    found = _OUT_OF_MEMORY.search(text)
    if found is None:
        return None
    reason = (found.group(1) or "").strip()
    line = f"Spark ran out of memory ({reason or 'OutOfMemoryError'})"
    if reason not in _HEAP_REASONS:
        return RunFailed(line)
    advice = []
    local = master == "local" or master.startswith("local[")
    for side, they in [("driver", "it")] + ([] if local else [("executors", "they")]):
        key = f"spark.{side.rstrip('s')}.memory"
        had = memory.get(key) or "1g"            # Spark's default, for both
        more = _twice(had) or "SIZE"
        how = f"--conf {key}={more}" if launched else f"spark-submit --{side.rstrip('s')}-memory {more}"
        advice.append(f"the {side} more ({they} had {had}: e.g. {how})")
    return RunFailed(f"{line}: give " + " or ".join(advice))


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


def _bad_partition(field: str):
    """Whether a row's value of partition field ``field`` makes no directory name (the Column): it holds a
    NUL, or its name ``FIELD=VALUE``, escaped as ``partition_name`` escapes it, passes 255 bytes."""
    from pyspark.sql import functions as F

    value = column(field).cast("string")
    escaped = F.length(value) - F.length(F.regexp_replace(value, _ESCAPED_CLASS, ""))
    return value.rlike("\\x00") | (F.octet_length(value) + 2 * escaped > NAME_MAX - 1 - len(field.encode()))


def _metrics(observation) -> dict:
    """An observation's metrics, read after its action succeeded. A plan with no partitions (an empty
    input) reports none: it saw no rows, so every metric is zero."""
    try:
        return dict(observation.get)
    except Exception:
        return {}


def _part_key(name: str) -> tuple:
    """Where a part file Spark wrote falls in the output: by task (partition) number, then by file within
    the task (``c000``, ``c001``, ... when a task rolls over to a new file), numerically."""
    m = re.match(r"part-(\d+)-.*-c(\d+)(\..*)?$", name)
    return (int(m.group(1)), int(m.group(2)), name) if m else (-1, -1, name)


# --- the operator table ---------------------------------------------------------------------------------------
# Each entry: function(node, inputs) -> DataFrame, ``inputs`` the DataFrames of ``node.previous``. A frame
# carries ``_order`` while its order is defined (input order, or a sort's order); operators that define an
# order (Sort, Top, a join whose held side is ordered) re-assign it, so that what follows (Limit, another
# Sort, a sink's part order) follows theirs.

def _keep_order(df) -> list:
    return [ORDER] if ORDER in df.columns else []


def _renumbered(df):
    """``df`` with ``_order`` re-assigned in its partition order (partition index, then row within the
    partition: increasing along the order the partitions hold)."""
    from pyspark.sql import functions as F

    return df.withColumn(ORDER, F.monotonically_increasing_id())


def _sort_key(field: str, descending: bool):
    # null is the smallest value: first ascending, last descending
    return column(field).desc_nulls_last() if descending else column(field).asc_nulls_first()


def _pass(node, inputs):
    return inputs[0]            # Pipe, Checkpoint: the records as they are


def _filter(node, inputs):
    df = inputs[0]
    return df.filter(Compiler(node.previous[0].types)(node.predicate))   # null drops the record


def _select(node, inputs):
    df = inputs[0]
    return df.select(*[column(f) for f in node.keep], *_keep_order(df))


def _rename(node, inputs):
    df = inputs[0]
    # one projection: the renames happen at once, so a swap (a -> b, b -> a) is a swap
    return df.select(*[column(f).alias(node.mapping.get(f, f)) for f in df.columns])


def _derive(node, inputs):
    df = inputs[0]
    compile_ = Compiler(node.previous[0].types)
    # one projection: every computed field reads the input's fields
    return df.withColumns({f: compile_(e) for f, e in node.computed.items()})


def _unique(node, inputs):
    return inputs[0].select(*[column(f) for f in node.fields]).distinct()   # a hash shuffle; nulls equal


def _group_by(node, inputs):
    compile_ = Compiler(node.previous[0].types, order=column(ORDER) if ORDER in inputs[0].columns else None)
    aggs = [AGGREGATES[type(a)](compile_, a).alias(f) for f, a in node.aggregates.items()]
    return inputs[0].groupBy(*[column(k) for k in node.keys]).agg(*aggs)   # nulls form one group


HELD_KEY = "__logetl_held_key"
HELD_ORDER = "__logetl_held_order"


def _hash_join(node, inputs):
    from pyspark.sql import functions as F

    held, stream = inputs
    ordered_held = ORDER in held.columns and ORDER in stream.columns
    held = held.select(column(node.held_key).alias(HELD_KEY), *[column(f) for f in node.held_fields],
                       *([column(ORDER).alias(HELD_ORDER)] if ordered_held else []))
    # the held side is broadcast to every task of the streamed side, which is not moved: the output keeps
    # the streamed side's partitions and their order; an equality never matches a null key
    joined = stream.join(F.broadcast(held), column(node.stream_key) == column(HELD_KEY), node.how)
    out = joined.select(*[column(f) for f in node.fields], *_keep_order(stream),
                        *([HELD_ORDER] if ordered_held else []))
    if not ordered_held:
        return out
    # a streamed record's matches come in the hash table's order: put them in the held side's order
    # (within each partition: no shuffle), then number the records again, as several share one _order
    return _renumbered(out.sortWithinPartitions(ORDER, HELD_ORDER).drop(HELD_ORDER))


def _sort(node, inputs):
    # A global sort: Spark samples the keys, range-partitions the rows by them (every task sorts one key
    # range) and numbers the ranges in key order, so partition i precedes partition i+1. With _order last
    # the keys are a total order, so the result does not depend on where the sampled bounds fall (nor on
    # how adaptive execution coalesces adjacent ranges). _order is then re-assigned in sorted order.
    df = inputs[0]
    keys = [_sort_key(f, d) for f, d in node.keys] + [column(o).asc() for o in _keep_order(df)]
    return _renumbered(df.orderBy(*keys))


def _limit(node, inputs):
    from pyspark.sql import functions as F

    df = inputs[0]
    if node.n == 0:
        # Spark would replace a limit 0 (or a filter on a constant false) by an empty relation and skip its
        # input, and with it the counters observed there; a test it cannot fold passes nothing, after the
        # input has been counted in, as on the local engine
        return df.filter(F.spark_partition_id() < 0)
    if ORDER not in df.columns:
        return df.limit(node.n)     # an input with no defined order: some n records
    # the first n by _order: a top-n per task, then of those (no full sort, one small result partition)
    return df.orderBy(column(ORDER).asc()).limit(node.n)


def _top(node, inputs):
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    df = inputs[0]
    order = [column(o).asc() for o in _keep_order(df)]
    by = [_sort_key(f, d) for f, d in node.by_keys] + order
    if not node.per:
        return _renumbered(df.orderBy(*by).limit(node.n))
    # a window per group (a hash shuffle by the group; Spark keeps only n rows per group and task before
    # it), then the output order: per ascending, by, input order
    rank = "__logetl_rank"
    window = Window.partitionBy(*[column(p) for p in node.per]).orderBy(*by)
    kept = df.withColumn(rank, F.row_number().over(window)).filter(F.col(rank) <= node.n).drop(rank)
    return _renumbered(kept.orderBy(*[_sort_key(p, False) for p in node.per], *by))


# --- times: visits


def _visits(node, inputs):
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    df = inputs[0]
    order = [column(o).asc() for o in _keep_order(df)]
    t = column(node.time)
    # a window per client in time order, ties in input order: the previous record's time (lag), and the
    # visit as the running count of the records that start one
    window = Window.partitionBy(*[column(f) for f in node.by]).orderBy(t.asc_nulls_first(), *order)
    gap = F.unix_seconds(t) - F.unix_seconds(F.lag(t).over(window))
    starts = t.isNotNull() & F.coalesce(gap > node.gap_minutes * 60, F.lit(True))
    running = window.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    visit = F.when(t.isNotNull(), F.sum(starts.cast("long")).over(running))
    numbered = df.withColumn(node.field, visit)
    return _renumbered(numbered.orderBy(*[_sort_key(f, d) for f, d in node.keys], *order))


#: the Spark engine's operator table: one entry per assembly node class (Source, Parse and Sink are the
#: step's roots and actions, handled by ``execute_step``)
OPERATORS = {
    assembly.Pipe: _pass,
    assembly.Checkpoint: _pass,
    assembly.Filter: _filter,
    assembly.Select: _select,
    assembly.Rename: _rename,
    assembly.Derive: _derive,
    assembly.Unique: _unique,
    assembly.GroupBy: _group_by,
    assembly.HashJoin: _hash_join,
    assembly.Sort: _sort,
    assembly.Limit: _limit,
    assembly.Top: _top,
}
OPERATORS[assembly.Visits] = _visits


def _pass_view(node, cond, cols):
    return cond, cols           # Pipe, Checkpoint, Sink: the records as they are


def _filter_view(node, cond, cols):
    from pyspark.sql import functions as F

    # null drops the record
    return cond & F.coalesce(Compiler(node.previous[0].types, cols)(node.predicate), F.lit(False)), cols


def _select_view(node, cond, cols):
    return cond, {f: cols[f] for f in node.keep}


def _rename_view(node, cond, cols):
    return cond, {node.mapping.get(f, f): c for f, c in cols.items()}


def _derive_view(node, cond, cols):
    compile_ = Compiler(node.previous[0].types, cols)   # every computed field reads the input's fields
    return cond, {**cols, **{f: compile_(e) for f, e in node.computed.items()}}


#: the one-pass planner's table: a per-record node (its traits) as expressions over the parsed rows, from
#: its input's (the condition a parsed row meets to reach it, its fields as Columns) to its own; one entry
#: per per-record node class, beside its entry in ``OPERATORS``
VIEWS = {
    assembly.Pipe: _pass_view,
    assembly.Checkpoint: _pass_view,
    assembly.Filter: _filter_view,
    assembly.Select: _select_view,
    assembly.Rename: _rename_view,
    assembly.Derive: _derive_view,
    assembly.Sink: _pass_view,
}


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


class SparkEngine(Engine):
    name = "spark"
    operators = (assembly.Source, assembly.Parse, assembly.Sink, *OPERATORS)
    expressions = (*COMPILE, *AGGREGATES)

    def __init__(self, master: str | None = None, conf: dict | None = None, **options):
        super().__init__(**options)
        self.master = master
        conf = dict(conf or {})
        # logetl's own settings ride on --conf too; they never reach Spark
        ours = {k: conf.pop(k) for k in list(conf) if k.startswith("logetl.")}
        unknown = sorted(set(ours) - set(LOGETL_CONF))
        if unknown:
            raise UsageError(f"unknown setting --conf {unknown[0]}={ours[unknown[0]]} "
                             f"(logetl's are {', '.join(sorted(LOGETL_CONF))})")
        for k, v in ours.items():
            if v not in LOGETL_CONF[k]:
                raise UsageError(f"--conf {k}={v}: choose from {', '.join(LOGETL_CONF[k])}")
        self.parse_mode = ours.get(PARSE_CONF, "auto")
        self.cds = ours.get(CDS_CONF, "auto") == "auto"
        self.driver_c1 = ours.get(JIT_CONF, "auto") == "auto"
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

    # --- the session ------------------------------------------------------------------------------------

    def session(self):
        if self._spark is not None:
            return self._spark
        import warnings

        # PySpark warns about the pandas version when pandas happens to be installed; logetl never uses
        # pandas on Spark, so a user would only be puzzled by it
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
        try:
            from pyspark.sql import SparkSession
        except ImportError:
            raise EngineUnavailable("the spark engine needs PySpark: pip install 'logetl[spark]'") from None
        _check_java()
        _check_shipped_files(self.conf)
        under_submit = "PYSPARK_GATEWAY_PORT" in os.environ   # launched by spark-submit: it set the master
        active = SparkSession.getActiveSession()
        builder = SparkSession.builder.appName("logetl")
        if self.master == "":
            check_master_url(self.master)
        master = self.master or (None if under_submit or active else os.environ.get(MASTER_ENV, "local[*]"))
        if master:
            _check_master(master)
            builder = builder.master(master)
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
        if master and master.startswith("local") and "SPARK_LOCAL_IP" not in os.environ:
            os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"   # a local run binds to loopback only
        if master and master.startswith("local") and "PYSPARK_PYTHON" not in os.environ \
                and "spark.pyspark.python" not in conf:
            # local executors run on this machine: their Python workers (that parse path) are this
            # interpreter, with logetl and its kernel, rather than PySpark's default, whatever python3 is
            os.environ["PYSPARK_PYTHON"] = sys.executable
        launching = SparkContext._gateway is None and not under_submit
        shipped = None
        if launching and active is None and master and not master.startswith("local") and conf.get(ARCHIVES):
            # Spark unpacks every archive of spark.archives in the driver too, in the SparkContext's
            # constructor, before it asks the cluster for executors (a 66 MB packed venv added ~1.7 s to
            # the session's start here, in client mode, where the driver never uses it). Added right after
            # the session starts, the same archives are unpacked while the executors' JVMs start, and every
            # task (the check's first) carries them: each executor fetches them before its first Python
            # worker starts.
            conf = dict(conf)
            shipped = conf.pop(ARCHIVES)
        for k, v in conf.items():
            builder = builder.config(k, v)
        self._owns_session = active is None and not under_submit
        self._launched = launching and active is None
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
        # what a run out of memory names (_memory_failure): read now, as the JVM may not answer after it
        jconf = self._spark.sparkContext._conf
        self._memory = {k: jconf.get(k) for k in ("spark.driver.memory", "spark.executor.memory")}
        if shipped:
            self._shipping = _Shipping(self._spark.sparkContext, shipped)
        self._spark.sparkContext.setLogLevel(os.environ.get("LOGETL_SPARK_LOG_LEVEL", "ERROR"))
        # Adaptive execution replaces a plan whose stage came out empty with an empty relation, and the
        # observations (lines read, malformed, every counter) in the replaced part are lost with it: a
        # Filter whose filter kept nothing reported 0 lines read. The rule is left out, kept with the
        # session's own exclusions.
        excluded = [r for r in (self._spark.conf.get(EXCLUDED_RULES, "") or "").split(",") if r.strip()]
        if EMPTY_RELATION_RULE not in excluded:
            self._spark.conf.set(EXCLUDED_RULES, ",".join(excluded + [EMPTY_RELATION_RULE]))
        return self._spark

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
                if "LOGETL_SPARK_LOG_LEVEL" not in os.environ:
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

    # --- running ------------------------------------------------------------------------------------------

    def ready(self, flow: assembly.Flow, steps: list[assembly.Step]) -> list[str]:
        """The parse path, when a step that runs parses (a restart after Join's checkpoint does not): a
        forced native path that the executors cannot take is refused here, before the run starts."""
        if not any(isinstance(n, assembly.Parse) for s in steps for n in s.nodes):
            return []
        with between_java_calls():   # the check may run a job
            self.path, notice = self.choose_parse()
        return [notice]

    @property
    def native(self) -> bool:
        """Whether this engine's runs parse with logetl's kernel (in the executors' JVMs or Python workers)."""
        return self.path != BUILTIN

    def prepare(self, ctx: StepContext) -> SparkRun:
        self.shipped()
        return SparkRun(self.filesystem(), ctx.taps, partitioned_taps(ctx.flow))

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
                    sc.setLogLevel(os.environ.get("LOGETL_SPARK_LOG_LEVEL", "ERROR"))
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
                    sc.setLogLevel(os.environ.get("LOGETL_SPARK_LOG_LEVEL", "ERROR"))
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
        checked, fields = parse(self._lines(ctx), node)
        checked = checked.withColumn(ORDER, F.monotonically_increasing_id())
        # _status: 0 kept, 1 2 3 the reasons of contract.REASONS (in their order), 4 dropped (size "-"): a
        # small integer, cheap to count, to cache and to filter on; the reason's name only for malformed lines
        status = F.col(STATUS)
        obs = Observation(f"parse_{node.name}")
        checked = checked.observe(
            obs, F.count(F.lit(1)).alias("lines"),
            *[F.count_if(status == code).alias(r) for code, r in enumerate(contract.REASONS, 1)],
            F.count_if(status == DASH).alias("dash"), F.count_if(status == KEPT).alias("kept"))
        observations.append((node, obs))
        return checked, fields

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
        frames = []
        for first, last in self._reads(sizes):
            if last == first + 1:
                frames.append(self._scanned(read.text(inputs[first]), inputs[first:last]).withColumn(INPUT, F.lit(first)))
            else:
                frames.append(self._packed(read, first, inputs[first:last], sizes[first:last]))
        return _union_all(frames)

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
                  .when(status == 3, F.lit(contract.TAB_OR_CR)))
        # the input paths as one literal split into an array (a literal an input was three JVM calls each);
        # the optimizer folds it to a constant. No path holds NUL
        files = F.split(F.lit("\0".join(hadoop_local_path(f) for f in ctx.taps.inputs)), "\0")
        # (the native path's raw line is binary: as a string again it holds the same bytes, as read.text's)
        malformed = checked.filter(status.between(1, len(contract.REASONS))).select(
            F.col("value").cast("string").alias("value"), F.element_at(files, F.col(INPUT) + 1).alias("_file"),
            reason.alias("_reason"), ORDER)
        return records, malformed

    def _parse_native(self, lines, node):
        """The lines (``_lines``) parsed by logetl's kernel on the executors, in their JVMs (``spark_jvm``)
        or their Python workers (``spark_native``): the fields, ``_status``, the raw ``value`` of malformed
        lines, ``_sample`` and ``_input``; the fields by name."""
        from pyspark.sql import functions as F

        from logetl.engines.spark.native import field_column, parse_batches

        spec = SparkEngine._native_spec(node)
        columns = [field_column(i) for i in range(len(node.fields))]
        rest = [f"{STATUS} tinyint", "value binary", f"{SAMPLE} boolean", f"{INPUT} int"]
        if self.path == JVM:
            from logetl.engines.spark import jvm as spark_jvm

            # the JVM gives each field's bytes; the cast to a string keeps them (they are valid UTF-8)
            made = spark_jvm.parsed(self._binary_lines(lines), ", ".join([f"{c} binary" for c in columns] + rest), spec)
            checked = made.select(*[F.col(c).cast("string").alias(c) for c in columns], STATUS, "value", SAMPLE, INPUT)
        else:
            schema = ", ".join([f"{c} string" for c in columns] + rest)
            checked = self._binary_lines(lines).mapInArrow(partial(parse_batches, spec), schema)
        return checked, {f: F.col(c) for f, c in zip(node.fields, columns)}

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
            pattern, groups = fmt.spark_regex(), range(1, len(fmt.fields) + 1)
        n_fields = len(groups)
        tsv = F.regexp_replace(line, pattern, "\t".join(f"${i}" for i in groups))
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
        status = (F.when(~F.expr("is_valid_utf8(value)"), F.lit(1))
                  .when(~line.rlike(pattern), F.lit(2))
                  .when((F.instr(F.col("_tsv"), "\r") > 0) | (tabs != n_fields - 1), F.lit(3))
                  .when(is_dash, F.lit(DASH)).otherwise(F.lit(KEPT)))
        checked = with_tsv.withColumn(STATUS, status.cast("tinyint"))
        fields = F.split(F.col("_tsv"), "\t")
        present = fields.getItem(7) != ""

        def field(f):
            value = fields.getItem(fmt.fields.index(f))
            return F.when(present, value) if fmt.nullable(f) else value
        return checked, {f: field(f) for f in node.fields}

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

    def _in_one_pass(self, ctx: StepContext, step: assembly.Step) -> bool:
        """Whether the step writes its outputs in one pass over its parse (``_execute_one_pass``): on the
        native path, a step of one parse that reads nothing stored, whose records reach either TSV sinks
        (not partitioned) or stores for later steps (not both: one writer per pass) through per-record
        operators only, with two or more things to write (sinks or stores, trap). A store may be a Unique
        of such records (written after the pass, from its input's rows)."""
        nodes = [n for n in step.nodes if not isinstance(n, (assembly.Source, assembly.Parse, assembly.Sink))]
        sinks = [n for n in step.nodes if isinstance(n, assembly.Sink)]
        if not (self.native and not step.reads and sum(isinstance(n, assembly.Parse) for n in step.nodes) == 1
                and bool(sinks) != bool(step.writes)
                and len(sinks) + len(step.writes) + (ctx.state.trap is not None) >= 2):
            return False
        if sinks:
            return (all(s.format == "tsv" and not s.partition_by and not s.header for s in sinks)
                    and all(n.traits.per_record for n in nodes))

        def stored_unique(n) -> bool:   # a Unique this step stores, of per-record rows, read by no node here
            return (type(n) is assembly.Unique and any(n is w for w in step.writes)
                    and n.previous[0].traits.per_record and not isinstance(n.previous[0], assembly.Source)
                    and not any(p is n for m in step.nodes for p in m.previous))

        return (all(n.traits.per_record or stored_unique(n) for n in nodes)
                and self._store_columns(step) is not None)

    #: a one-pass step's stores: the columns of its malformed lines (raw line, status, input index)
    RAW, RAW_STATUS, RAW_INPUT = "__logetl_raw", "__logetl_status", "__logetl_input"

    def _store_columns(self, step: assembly.Step) -> dict | None:
        """The columns of the file a one-pass step writes its stores through: the stored fields of every
        store (a field several stores hold is one column: each row fills its store's own), ``_order``
        (stores other than a Unique keep the input order), the malformed lines' columns; name -> the
        owners' logetl type. None when two stores give one name different types."""
        columns: dict[str, str] = {}
        for node in step.writes:
            owned = dict(node.types) if type(node) is assembly.Unique else {**node.types, ORDER: "order"}
            for name, kind in owned.items():
                if columns.setdefault(name, kind) != kind or name in (TAG, self.RAW, self.RAW_STATUS, self.RAW_INPUT):
                    return None
        return columns

    def _one_pass_views(self, ctx: StepContext, step: assembly.Step):
        """The step's parse, and every node after it as expressions over the parsed rows: (parse, checked,
        observations, nodes, views); ``views[id(node)]``: (the condition a parsed row meets when it reaches
        the node, the node's fields as Columns); the rows reaching each node are counted on the way
        (``checked``'s observation, ``n<i>`` for ``nodes[i]``; a Unique counts its input)."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        parse = next(n for n in step.nodes if isinstance(n, assembly.Parse))
        observations: list = []
        checked, fields = self._parsed(ctx, parse, observations)
        views = {id(parse): (F.col(STATUS) == KEPT, {f: fields[f] for f in parse.fields})}
        nodes = []
        for node in step.nodes:
            if isinstance(node, (assembly.Source, assembly.Parse)):
                continue
            nodes.append(node)
            view = views[id(node.previous[0])]
            # a per-record node composes its view (``VIEWS``); a stored Unique's rows are its input's
            views[id(node)] = VIEWS[type(node)](node, *view) if node.traits.per_record else view
        counted = Observation(f"logetl_{next(_OBSERVATIONS)}")
        checked = checked.observe(counted, *[F.count_if(views[id(n)][0]).alias(f"n{i}") for i, n in enumerate(nodes)])
        observations.append((None, counted))
        return parse, checked, observations, nodes, views

    def _joined_sinks(self, step: assembly.Step) -> tuple | None:
        """For a one-pass step whose sinks take the parse's records as they are (through Pipes, Selects and
        Renames: no filter, nothing computed), each sink's fields as indexes into the parse's: the kernel's
        side (the JVMs' ``NativeParse.joined``, the Python workers' ``spark_native.join_batches``) then writes
        the sinks' TSV lines itself, joined, a few rows per batch. None for any other step."""
        if step.writes:
            return None
        fields: dict[int, dict[str, int]] = {}
        sinks = []
        for node in step.nodes:
            if isinstance(node, assembly.Source):
                continue
            if isinstance(node, assembly.Parse):
                fields[id(node)] = {f: i for i, f in enumerate(node.fields)}
                continue
            if type(node) not in (assembly.Pipe, assembly.Select, assembly.Rename, assembly.Sink):
                return None
            known = fields[id(node.previous[0])]
            if isinstance(node, assembly.Select):
                known = {f: known[f] for f in node.keep}
            elif isinstance(node, assembly.Rename):
                known = {node.mapping.get(f, f): i for f, i in known.items()}
            elif isinstance(node, assembly.Sink):
                sinks.append(tuple(known[f] for f in node.file_fields))
            fields[id(node)] = known
        return tuple(sinks)

    def _joined_rows(self, ctx: StepContext, step: assembly.Step, sinks: tuple):
        """The rows of a step whose sinks the executors write (``_joined_sinks``): (parse, rows,
        observations, nodes) as ``_execute_one_pass`` takes them. Every input is read and parsed as by
        ``_parsed`` (the reads of ``_lines``, in input order); the counters are the sums of each batch's."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        from logetl.engines.spark.native import join_batches, joined_schema

        parse = next(n for n in step.nodes if isinstance(n, assembly.Parse))
        nodes = [n for n in step.nodes if not isinstance(n, (assembly.Source, assembly.Parse))]
        spec, trap, lines = self._native_spec(parse), ctx.state.trap is not None, self._binary_lines(self._lines(ctx))
        if self.path == JVM:
            from logetl.engines.spark import jvm as spark_jvm

            rows = spark_jvm.joined(lines, joined_schema(), spec, sinks, trap)
        else:
            rows = lines.mapInArrow(partial(join_batches, spec, sinks, trap), joined_schema())
        counted = Observation(f"logetl_{next(_OBSERVATIONS)}")
        kept = F.sum("kept")
        rows = rows.observe(counted, F.sum("lines").alias("lines"),
                            *[F.sum(f"reason{code}").alias(r) for code, r in enumerate(contract.REASONS, 1)],
                            F.sum("dash").alias("dash"), kept.alias("kept"),
                            *[kept.alias(f"n{i}") for i in range(len(nodes))])   # every record reaches every node
        samples_tag = len(sinks) + 1
        tag, text = F.col(TAG), F.col("value").cast("string")
        value = F.when(tag == samples_tag, self._sample_line(F.col(STATUS), text)).otherwise(text)
        rows = rows.where(tag >= 0).select(tag, value.alias("value"))
        return parse, rows, [(parse, counted), (None, counted)], nodes

    def _execute_one_pass(self, ctx: StepContext, step: assembly.Step, state) -> None:
        """Writes the step's outputs (its sinks, or its stores), its trap and its malformed-line samples with
        one action, nothing persisted. The per-record operators after the parse are composed into
        expressions over the parsed rows (``_one_pass_views``); every parsed row becomes one row per output
        it goes to, tagged with the output, and Spark writes them partitioned by the tag, each task with one
        open file per tag (concurrent writers: no sort, so each tag's rows keep input order); each tag's
        directory then becomes its output. Sinks are written as text (a sink's TSV line, the trap's raw
        line, ``status TAB input TAB raw line`` for the samples, which the parse marks on the first few
        malformed lines of each task); stores as Parquet with the columns of every store
        (``_store_columns``), of which each store is read back with its own (``_read_store``), and the
        malformed lines' raw bytes, status and input; a stored Unique's input rows are written, then
        deduplicated into the store, and the trap's lines written as text, each by a job over that
        tag's rows only. Persisting the parse for three actions cost more than the parse itself:
        2M-line Branch, ``local[*]``, warm session: 3.4-3.5 s in one pass against 5.7-6.1 s. Sinks that take
        the parse's records as they are get their TSV lines made and joined by the executors instead (in
        their JVMs, or their Python workers), a few rows per batch (``_joined_sinks``)."""
        from pyspark.sql import functions as F

        run: SparkRun = ctx.state
        fs, spark = run.fs, self.session()
        joined = self._joined_sinks(step)
        if joined is not None:
            parse, rows, observations, nodes = self._joined_rows(ctx, step, joined)
            checked = views = None
            write = lambda writer, where: writer.text(where)
        else:
            parse, checked, observations, nodes, views = self._one_pass_views(ctx, step)
            rows, write = self._tagged_rows(ctx, step, checked, nodes, views)
        outputs = [n for n in nodes if isinstance(n, assembly.Sink)] or list(step.writes)
        trap_tag, samples_tag = len(outputs), len(outputs) + 1
        where = fs.join(run.work.path, "written")
        fs.rmtree(where)

        def written(t: int) -> str | None:
            d = fs.join(where, f"{TAG}={t}")
            return d if fs.isdir(d) else None

        # A file per tag open at once in each task, and no sort (with concurrent writers, Spark plans no
        # sort by the partition column). One more writer than tags: a task that has opened as many writers
        # as the limit sorts the rest of its rows by tag, and that sort does not keep the input order of
        # equal tags. The session's own setting is back once the write ends.
        uniques: dict[int, int] = {}
        with self._progress(ctx, state):
            with _session_conf(spark, {MAX_WRITERS: str(samples_tag + 2)}):
                write(rows.write.partitionBy(TAG), where)
            if step.writes:
                for t, store in enumerate(outputs):
                    uniques.update(self._place_store(run, store, written(t), views, checked))
            else:
                for t, sink in enumerate(outputs):
                    out = run.outputs[sink.tap]
                    out.suffix = ""
                    if written(t):   # else nothing was written: sealing makes the empty output
                        fs.rename(written(t), out.staging)
                        self._name_parts(fs, out.staging)
            if run.trap is not None:
                fs.rmtree(run.work.trap_dir)
                if written(trap_tag) and step.writes:
                    self._read_parts(fs, written(trap_tag)).select(F.col(self.RAW).cast("string").alias("value")) \
                        .write.text(run.work.trap_dir)
                elif written(trap_tag):
                    fs.rename(written(trap_tag), run.work.trap_dir)
        if written(samples_tag) and len(ctx.run.malformed_samples) < SAMPLES:
            found = self._written_samples(fs, written(samples_tag), parquet=bool(step.writes))
            for code, index, value in found[:SAMPLES - len(ctx.run.malformed_samples)]:
                reason, text = contract.REASONS[code - 1], contract.display(value)
                why = parse.format.why(value) if reason == contract.NO_MATCH else None
                ctx.run.malformed_samples.append((hadoop_local_path(ctx.taps.inputs[index]), reason,
                                                  f"{why}: {text}" if why else text))
        fs.rmtree(where)

        metrics = _metrics(observations[0][1])
        self._account(ctx, parse, metrics, state)
        outs = {id(parse): int(metrics.get("kept") or 0)}
        counts = _metrics(observations[-1][1])
        for i, node in enumerate(nodes):
            n = int(counts.get(f"n{i}") or 0)
            if isinstance(node, assembly.Sink):
                state.count(node.name, "in", n)
                state.count(node.name, "out", n)
                ctx.run.written[node.tap] = ctx.run.written.get(node.tap, 0) + n
            else:
                outs[id(node)] = uniques.get(id(node), n)
                state.count(node.name, "out", outs[id(node)])
                state.count(node.name, "in", sum(outs.get(id(p), 0) for p in node.previous))

    def _tagged_rows(self, ctx: StepContext, step: assembly.Step, checked, nodes: list, views: dict):
        """A one-pass step's rows to write, each tagged with its output (``_execute_one_pass``): every parsed
        row once per output it reaches; and how they are written."""
        from pyspark.sql import functions as F

        status, bad = F.col(STATUS), F.col(STATUS).between(1, len(contract.REASONS))
        outputs = [n for n in nodes if isinstance(n, assembly.Sink)] or list(step.writes)
        trap_tag, samples_tag = len(outputs), len(outputs) + 1
        # the node whose rows an output takes: a stored Unique's input (deduplicated after the pass)
        source = lambda o: views[id(o.previous[0] if type(o) is assembly.Unique else o)]
        tagged = [F.when(source(o)[0], F.lit(t)) for t, o in enumerate(outputs)]
        if ctx.state.trap is not None:
            tagged.append(F.when(bad, F.lit(trap_tag)))
        tagged.append(F.when(F.col(SAMPLE), F.lit(samples_tag)))
        rows = checked.select("*", F.explode(F.array(*tagged)).alias(TAG)).where(F.col(TAG).isNotNull())
        tag = F.col(TAG)

        def by_tag(values: list):   # (tag, Column) -> the Column of a row's tag (null for other tags)
            case = F.when(tag == values[0][0], values[0][1])
            for t, value in values[1:]:
                case = case.when(tag == t, value)
            return case

        raw = by_tag([(trap_tag, F.col("value")), (samples_tag, F.col("value"))])
        if step.writes:
            def store_column(name: str):   # the value of each store that holds the column
                return by_tag([(t, F.col(ORDER) if name == ORDER else source(o)[1][name])
                               for t, o in enumerate(outputs) if name in self._store_fields(o)]).alias(name)

            rows = rows.select(tag, *[store_column(c) for c in self._store_columns(step)], raw.alias(self.RAW),
                               by_tag([(samples_tag, status)]).alias(self.RAW_STATUS),
                               by_tag([(samples_tag, F.col(INPUT))]).alias(self.RAW_INPUT))
            write = lambda writer, where: writer.options(**STORE_OPTIONS).parquet(where)
        else:
            def line(sink):   # the sink's TSV, as _sink writes it
                cols = source(sink)[1]
                return self._delimited_line("tsv", [text_of(sink.types[f], cols[f]) for f in sink.file_fields])

            text = raw.cast("string")
            sample = self._sample_line(status, text)
            value = by_tag([(t, line(o)) for t, o in enumerate(outputs)] + [(trap_tag, text), (samples_tag, sample)])
            rows = rows.select(tag, value.alias("value"))
            write = lambda writer, where: writer.text(where)

        return rows, write

    @staticmethod
    def _store_fields(node) -> tuple:
        """The columns a store holds: its fields, and ``_order`` unless it is a Unique (no order)."""
        return tuple(node.fields) if type(node) is assembly.Unique else (*node.fields, ORDER)

    def _place_store(self, run: SparkRun, node, written: str | None, views, checked) -> dict:
        """Makes a one-pass step's written rows of ``node`` its store: the part files moved in, or, for a
        Unique, its input's rows deduplicated into it (a job over those rows); no rows: an empty store
        with the store's columns. Returns {id(node): records} for a Unique."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        fs = run.fs
        path = run.work.prepare_store(node.name)
        unique = type(node) is assembly.Unique
        found = {}
        if written and not unique:
            for name in sorted((n for n in fs.listdir(written) if n.startswith("part-")), key=_part_key):
                fs.rename(fs.join(written, name), fs.join(path, name))
        else:
            if written:
                rows = self._read_parts(fs, written).select(*[column(f) for f in node.fields]).distinct()
            else:   # no rows: an empty frame with the columns the store would have had (their types: analysis only)
                cols = views[id(node.previous[0] if unique else node)][1]
                schema = checked.select(*[cols[f].alias(f) for f in node.fields],
                                        *([] if unique else [F.col(ORDER)])).schema
                rows = self.session().createDataFrame([], schema)
            obs = Observation(f"logetl_{next(_OBSERVATIONS)}")
            rows.observe(obs, F.count(F.lit(1)).alias("n")).write.mode("append").options(**STORE_OPTIONS).parquet(path)
            found = {id(node): int(_metrics(obs).get("n") or 0)} if unique else {}
        run.work.mark_complete(node.name)
        return found

    def _read_parts(self, fs, directory: str):
        """The Parquet part files in ``directory``, read one by one and unioned in part order: a directory
        read would order its splits by size. The parts share one schema: read from the first part's
        footer, given to the other reads (each read that infers it runs a job of its own)."""
        spark = self.session()
        files = sorted((n for n in fs.listdir(directory) if n.startswith("part-") and n.endswith(".parquet")),
                       key=_part_key)
        if not files:
            return spark.read.parquet(directory)
        schema = self._written_schema(fs, fs.join(directory, files[0]))
        first = (spark.read if schema is None else spark.read.schema(schema)).parquet(fs.join(directory, files[0]))
        rest = [spark.read.schema(first.schema).parquet(fs.join(directory, n)) for n in files[1:]]
        return _union_all([first, *rest])

    #: where Spark's Parquet writer keeps the written frame's schema, in the file's footer
    SPARK_SCHEMA_KEY = b"org.apache.spark.sql.parquet.row.metadata"

    def _written_schema(self, fs, part: str):
        """The schema Spark wrote a Parquet part file with, from the file's footer (a few KB read in the
        driver), or None when the footer does not hold it. ``spark.read.parquet`` without a schema infers
        it with a job of its own (one task reading the footer): three of them in a 2M-line Join."""
        import json
        import struct

        import pyarrow as pa
        import pyarrow.parquet as pq
        from pyspark.sql.types import StructType

        try:
            tail = fs.read_tail(part, 1 << 16)
            size = struct.unpack("<I", tail[-8:-4])[0] + 8   # the footer, its length and the magic bytes
            if size > len(tail):
                tail = fs.read_tail(part, size)
            # (the footer alone, behind the magic bytes a Parquet file starts with: what the reader checks)
            metadata = pq.read_schema(pa.BufferReader(b"PAR1" + tail[-size:])).metadata or {}
            return StructType.fromJson(json.loads(metadata[self.SPARK_SCHEMA_KEY]))
        except Exception:   # not Spark's, or not Parquet: Spark's own reading says what is wrong with it
            return None

    @staticmethod
    def _written_samples(fs, directory: str, parquet: bool):
        """The first ``SAMPLES`` malformed lines a one-pass step marked, in input order: (status, input
        index, raw bytes), read in the driver from the part files (Parquet through pyarrow: no job)."""
        found: list = []
        for name in sorted((n for n in fs.listdir(directory) if n.startswith("part-")), key=_part_key):
            data = fs.read_bytes(fs.join(directory, name))
            if parquet:
                import io

                import pyarrow.parquet as pq

                table = pq.read_table(io.BytesIO(data), columns=[SparkEngine.RAW_STATUS, SparkEngine.RAW_INPUT,
                                                                 SparkEngine.RAW])
                found += zip(*[table.column(i).to_pylist() for i in range(3)])
            else:
                # one row a line: split on LF only (a raw line may hold a CR, which splitlines would split at)
                rows = data.split(b"\n")[:-1] if data.endswith(b"\n") else data.split(b"\n")
                found += [(int(c), int(i), v) for c, i, v in (row.split(b"\t", 2) for row in rows)]
            if len(found) >= SAMPLES:
                break
        return found[:SAMPLES]

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
                    text = contract.display(row["value"])
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
        for r in contract.REASONS:
            n = int(metrics.get(r) or 0)
            if n:
                state.malformed[r] = state.malformed.get(r, 0) + n
        state.dropped_size_dash += int(metrics.get("dash") or 0)
        state.count(node.name, "in", lines)
        state.count(node.name, "out", int(metrics.get("kept") or 0))

    @staticmethod
    def _store(run: SparkRun, node, df) -> None:
        # appended into the place the working directory prepared: a bound --checkpoint-dir keeps its
        # marker and is never deleted (Spark's "overwrite" mode would remove the directory itself)
        path = run.work.prepare_store(node.name)
        df.write.mode("append").options(**STORE_OPTIONS).parquet(path)
        run.work.mark_complete(node.name)

    #: how each sink format is written: (the DataFrameWriter method, its options, the part files' suffix)
    SINK_FORMATS = {
        "tsv": ("text", {}, ""),
        # (the text writer: Spark's CSV writer turns an LF in a value into CRLF and leaves a record of one
        # null field out; see _delimited_line)
        "csv": ("text", {"lineSep": "\r\n"}, ".csv"),
        "parquet": ("parquet", {"compression": "zstd"}, ".parquet"),
        # a null is written as null, not left out: every object has every field, in field order
        # (written as text: the JSON of each record, from Spark's JSON writer's own generator, with its
        # escapes made the local engine's; see _json_line)
        "jsonl": ("text", {}, ".jsonl"),
    }

    #: the settings of a Parquet sink's write: a timestamp as Parquet's timestamp in microseconds, adjusted
    #: to UTC, as the local engine writes it (Spark's default is the legacy INT96)
    PARQUET_SETTINGS = {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}

    @staticmethod
    def _json_line(fields, types):
        r"""A record as the JSON Lines writer's object (``to_json`` is Spark's JSON writer's generator: the
        same text), with a null written as null, not left out (every object has every field, in field
        order), and the escapes of control characters in lower-case hex (``\u001b``) as the local engine,
        Python's json and most tools write them: Jackson writes ``\u001B``. The only upper-case hex Jackson
        writes is the last digit of ``\u000B``-``\u001F``. An escape's backslash follows an even run of
        backslashes (none, or escaped backslashes ``\\``), so a user's text ``\u001B``, written
        ``\\u001B``, stays as it is. A float or a timestamp is written as its text (``SINK_TEXT``); a
        field of a type in ``JSON_NUMBERS`` is written as a string of its text, whose quotes are then taken
        off (its value follows its key, ``{"f":`` or ``,"f":``, which no string's text holds unescaped)."""
        from pyspark.sql import functions as F

        values = [text_of(types[f], column(f)).alias(f) for f in fields]     # a float, a timestamp: its text
        line = F.to_json(F.struct(*values), {"ignoreNullFields": "false"})
        for digit in "ABCDEF":
            line = F.regexp_replace(line, r"(?<!\\)((?:\\\\)*\\u00[01])" + digit, "$1" + digit.lower())
        numbers = [f for f in fields if types[f] in JSON_NUMBERS]
        if numbers:
            line = F.regexp_replace(line, r'([{,]"(?:' + "|".join(re.escape(f) for f in numbers)
                                    + r')":)"(-?[0-9]+\.[0-9]+)"', "$1$2")
        return line

    @staticmethod
    def _delimited_line(format: str, values: list):
        """A record as the local engine writes it in ``format`` (``outputs.DELIMITED``): each value cast to
        a string (longs in decimal, booleans true/false), null as the empty field (concat_ws would leave
        a null out, separator and all). TSV as it is; CSV quoted as RFC 4180 (``assembly.Sink``): a value
        holding ``,``, ``"``, CR or LF, and the empty string, in ``"`` with ``"`` doubled; a record of one
        null field is ``""``."""
        from pyspark.sql import functions as F

        texts = [v.cast("string") for v in values]
        if format == "tsv":
            return F.concat_ws("\t", *[F.coalesce(t, F.lit("")) for t in texts])
        null = F.lit('""' if len(texts) == 1 else "")

        def field(t):
            quoted = (t == "") | t.contains(",") | t.contains('"') | t.contains("\r") | t.contains("\n")
            return (F.when(t.isNull(), null)
                    .when(quoted, F.concat(F.lit('"'), F.replace(t, F.lit('"'), F.lit('""')), F.lit('"')))
                    .otherwise(t))
        return F.concat_ws(",", *[field(t) for t in texts])

    @staticmethod
    def _head_parts(fs, directory: str, suffix: str, header: bytes, one_at_least: bool) -> None:
        """Starts every part file in ``directory`` with ``header`` (after ``_name_parts``), as the local
        engine writes them; ``one_at_least``: a directory without a part (no records) gets one holding the
        header alone."""
        parts = [n for n in fs.listdir(directory) if n.startswith("part-")]
        if not parts and one_at_least:
            parts = [f"{PART}{suffix}"]
            fs.touch(fs.join(directory, parts[0]))
        for name in parts:
            fs.prepend(fs.join(directory, name), header)

    @staticmethod
    def _nullable(spark, selected, columns):
        """The columns, each one Spark knows is never null (a count, a coalesce with a literal, an
        is_null) marked nullable, so that its Parquet column is ``optional`` as the local engine writes
        every column, not ``required``: Catalyst's KnownNullable, which changes nothing but the
        nullability and stays in the plan (no pass of its own, no cast)."""
        from pyspark.sql.classic.column import Column

        jvm = spark._jvm
        utils = jvm.org.apache.spark.sql.classic.ExpressionUtils
        known = jvm.org.apache.spark.sql.catalyst.expressions.KnownNullable
        return [c if f.nullable else Column(utils.column(known(utils.expression(c._jc)))).alias(f.name)
                for c, f in zip(columns, selected.schema.fields)]

    def _sink(self, ctx, node, df, state) -> None:
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        run: SparkRun = ctx.state
        out = run.outputs[node.tap]
        obs = Observation(f"sink_{node.name}")
        method, options, suffix = self.SINK_FORMATS[node.format]
        out.suffix = suffix
        by = list(node.partition_by)
        if node.format in DELIMITED:
            # a float or a timestamp as spark_expressions.text writes it
            line = self._delimited_line(node.format, [text_of(node.types[f], column(f)) for f in node.file_fields])
            # (the text writer takes one column of any name: not "value", which a partition field may be)
            columns = [line.alias("__logetl_line")]
        elif node.format == "jsonl":
            columns = [self._json_line(node.file_fields, node.types).alias("__logetl_line")]
        else:
            columns = [column(f) for f in node.file_fields]
            if not all(f.nullable for f in df.select(*columns).schema.fields):
                columns = self._nullable(df.sparkSession, df.select(*columns), columns)
        if by:
            # a value no directory name can hold fails the job at once, on any file system (else: Mkdirs
            # failed, or a name the local engine does not write); the failure then names it (below). Checked
            # before the sort: the writer must see the very columns that were sorted, or it sorts again by
            # the partition fields alone and the optimizer drops the sort below (input order then rests on
            # a sort that is not stable)
            refused = F.raise_error(F.lit(PARTITION_REFUSED))
            checked = df.withColumns({f: F.when(_bad_partition(f), refused).otherwise(column(f)) for f in by})
            # each task writes its rows of a partition in input order: sorted by the partition fields, then
            # _order (Spark's writer then needs no sort of its own); the files of a partition, by task,
            # concatenate in input order
            ordered = checked.sortWithinPartitions(*by, *([ORDER] if ORDER in df.columns else []))
            selected = ordered.select(*columns, *[column(f) for f in by])
        else:
            selected = df.select(*columns)
        writer = selected.observe(obs, F.count(F.lit(1)).alias("n")).write.options(**options)
        if by:
            writer = writer.partitionBy(*by)
        try:
            with _session_conf(df.sparkSession, self.PARQUET_SETTINGS if node.format == "parquet" else {}):
                getattr(writer, method)(out.staging)
        except Exception as exc:
            if by and PARTITION_REFUSED in str(exc):
                self._refuse_partition(df, by)
            raise
        for leaf in self._leaves(run.fs, out.staging) if by else [out.staging]:
            self._name_parts(run.fs, leaf, suffix)
            if node.header:
                self._head_parts(run.fs, leaf, suffix, header_line(node.format, node.file_fields), not by)
        n = int(_metrics(obs).get("n") or 0)
        state.count(node.name, "in", n)
        state.count(node.name, "out", n)
        ctx.run.written[node.tap] = ctx.run.written.get(node.tap, 0) + n

    @staticmethod
    def _refuse_partition(df, by: list[str]) -> None:
        """Raises the local engine's error (``partition_name``) for the first row, in input order, whose
        partition value no directory name can hold (a job over the sink's rows, run once the write failed)."""
        rows = df.where(reduce(lambda a, b: a | b, [_bad_partition(f) for f in by]))
        if ORDER in df.columns:
            rows = rows.orderBy(ORDER)
        for row in rows.select(*[column(f) for f in by]).limit(1).collect():
            for field, value in zip(by, row):
                partition_name(field, value)

    @classmethod
    def _leaves(cls, fs, directory: str) -> list[str]:
        """The partition directories (``FIELD=VALUE``, nested) under ``directory`` that hold part files."""
        found = []
        for name in fs.listdir(directory):
            where = fs.join(directory, name)
            if "=" in name and fs.isdir(where):
                inner = cls._leaves(fs, where)
                found += inner or [where]
        return found

    @staticmethod
    def _name_parts(fs, directory: str, suffix: str = "") -> None:
        """Spark's part-<task>-<uuid>-c<file>.txt become part-00000, part-00001, ... in task order (the
        partition order: input order, or key order after a sort), numbered wide enough that name order
        stays that order past 100,000 parts; empty tasks write no file. Checksum files of the local file
        system go."""
        names = fs.listdir(directory)
        parts = sorted((n for n in names if n.startswith("part-")), key=_part_key)
        width = max(5, len(str(len(parts) - 1)))
        for i, name in enumerate(parts):
            fs.rename(fs.join(directory, name), fs.join(directory, f"part-{i:0{width}d}{suffix}"))
        for name in names:
            if name.endswith(".crc"):
                fs.remove(fs.join(directory, name))

    def finish_trap(self, ctx: StepContext) -> None:
        run: SparkRun = ctx.state
        fs = run.fs
        fs.makedirs(run.trap.staging)
        if fs.isdir(run.work.trap_dir):
            self._name_parts(fs, run.work.trap_dir)
            for name in fs.listdir(run.work.trap_dir):
                if name.startswith("part-"):
                    fs.rename(fs.join(run.work.trap_dir, name), fs.join(run.trap.staging, name))
