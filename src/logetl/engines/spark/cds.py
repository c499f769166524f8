"""A class-data archive (the JDK's AppCDS) for the Spark driver JVM that logetl starts itself.

Starting Spark loads some 15,000 classes from Spark's jars (the JVM, the SparkContext, the session's
analyzer and planner, the first query's code generation): on 2 cores most of a session's start.
The JDK can archive the classes a JVM loaded (``-XX:ArchiveClassesAtExit``) and map them at the next start
(``-XX:SharedArchiveFile``), already parsed and verified: measured on the 2M-line Branch, ``local[*]``,
about 6 s less wall time per run (docs/performance.md, "Spark").

- The archive is per Java installation and Spark installation (their paths, the JVM library's size and
  time, the jars' names and sizes: the key below). The JVM itself checks that the archive fits (its build,
  the class path) and ignores one that does not, silently (``-Xlog:cds*=off``): a stale archive costs the
  start it would have saved, never a failure.
- The first run with no archive records one: its JVM writes the archive when it exits, into a temporary
  file named after this process; at this process's exit logetl waits for the JVM to finish (once: a few
  seconds) and renames the file into place, atomically, if the JVM exited cleanly and a step ran (a
  process that only started a session would archive too few classes). One process records at a time: a
  temporary file whose process still runs means "someone is recording"; one whose process is gone is
  removed.
- Where: ``$LOGETL_CACHE_DIR``, else ``$XDG_CACHE_HOME/logetl``, else ``~/.cache/logetl`` (one file per
  installation pair, ~170-190 MB). ``--conf logetl.jvm.cds=off`` starts the JVM without it. Only a JVM
  that logetl launches gets it (not under spark-submit, not a session that already runs).
- No archive is recorded while a directory that is not empty is on the driver JVM's class path (a Spark
  distribution's ``conf`` with its templates, a ``SPARK_CONF_DIR``, ``HADOOP_CONF_DIR``): the JDK refuses
  to archive then, and says so on the JVM's stdout at its exit ("Cannot have non-empty directory in
  paths"), after every run (``blocking_directory``).
- The executors of a cluster whose workers run on this machine start from the same archive
  (``for_executors``; ``SparkEngine`` decides where): Spark's classes are the same jars there. A JVM whose
  class path differs (another Spark installation, another ``conf`` directory) does not use it, silently.
  Executors never record one: a worker kills its executor 10 s after asking it to stop, and writing an
  archive of the executor's classes took ~6 s of that here.
"""
from __future__ import annotations

import atexit
import glob
import hashlib
import os
import shutil

from logetl import settings
from logetl.io.fs import LocalFS

SUFFIX = ".jsa"
QUIET = "-Xlog:cds*=off"     # no warnings on the run's stderr/stdout: a missing or unfit archive is just not used


def cache_dir() -> str:
    """Absolute: the JVMs' options name files in it, and an executor's JVM runs in a directory of its own."""
    env = settings.CACHE_DIR.read()
    if env:
        return os.path.abspath(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.abspath(os.path.join(base, "logetl"))


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(java) if java and os.path.exists(java) else None


def _stamp(path: str) -> str:
    st = os.stat(path)
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def option(flag: str, path: str) -> str:
    """A JVM option naming ``path``, as one word of Spark's ``extraJavaOptions`` (split at white space,
    with quotes and backslashes as a shell's: the launcher's ``parseOptionString``, the executors'
    ``splitCommandString``). Unquoted, a cache directory with a space in its name (``a b``) made the JVM
    take the path's second half for its main class and not start."""
    word = flag + path
    if not any(c.isspace() or c in "\"'\\" for c in word):
        return word
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def key(conf: dict) -> str | None:
    """What the archive depends on, hashed: the Java installation, Spark's jars, the settings that add
    classes to the driver's class path. None when there is no java to key on."""
    java = _java()
    if java is None:
        return None
    try:
        from pyspark.find_spark_home import _find_spark_home

        jars = os.path.join(_find_spark_home(), "jars")
        parts = [_stamp(java)]
        jvm_lib = os.path.join(os.path.dirname(os.path.dirname(java)), "lib", "server", "libjvm.so")
        if os.path.exists(jvm_lib):
            parts.append(_stamp(jvm_lib))
        parts += [_stamp(os.path.join(jars, n)) for n in sorted(os.listdir(jars))]
    except (ImportError, OSError):
        return None
    parts += [f"{k}={conf.get(k, '')}" for k in ("spark.jars", "spark.jars.packages", "spark.driver.extraClassPath")]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


#: the archive this process's JVM records, if any: whichever engine of the process runs a step (a test
#: session's engines share one JVM) makes it worth keeping
_RECORDING: "ClassArchive | None" = None


def step_ran() -> None:
    if _RECORDING is not None:
        _RECORDING.worth_keeping = True


class ClassArchive:
    """The archive of one installation pair: the JVM options for the next launch, and, when this process
    records it, the finishing at exit."""

    def __init__(self, conf: dict, directory: str | None = None):
        self.conf = conf
        self.dir = directory or cache_dir()
        k = key(conf)
        self.path = os.path.join(self.dir, f"spark-driver-{k}{SUFFIX}") if k else None
        self.recording: str | None = None     # the temporary file this process's JVM writes at exit
        self.worth_keeping = False             # set once a step ran: the JVM loaded what runs load

    def _temporaries(self) -> list[tuple[str, int]]:
        found = []
        for p in glob.glob(f"{glob.escape(self.path)}.*.tmp"):
            pid = p[len(self.path) + 1:-len(".tmp")]
            if pid.isdigit():
                found.append((p, int(pid)))
        return found

    def options(self) -> list[str]:
        """The JVM options: use the archive, or record it, or nothing (no key, an unwritable cache,
        another process recording)."""
        if self.path is None:
            return []
        if os.path.isfile(self.path):
            return [option("-XX:SharedArchiveFile=", self.path), QUIET]
        if blocking_directory(self.conf) is not None:
            return []
        try:
            os.makedirs(self.dir, exist_ok=True)
            busy = False
            for p, pid in self._temporaries():
                if LocalFS.pid_alive(pid):
                    busy = True
                else:
                    os.remove(p)      # a recording whose process died: never renamed into place
            if busy or not os.access(self.dir, os.W_OK):
                return []
            self.recording = f"{self.path}.{os.getpid()}.tmp"
            open(self.recording, "wb").close()   # claims the recording until the JVM writes it
        except OSError:
            self.recording = None
            return []
        global _RECORDING
        _RECORDING = self
        atexit.register(self.finish)
        return [option("-XX:ArchiveClassesAtExit=", self.recording), QUIET]

    def for_executors(self) -> list[str]:
        """The options of executors' JVMs that start from this archive: none while it is not in place."""
        if not self.path or not os.path.isfile(self.path):
            return []
        return [option("-XX:SharedArchiveFile=", self.path), QUIET]

    def finish(self) -> None:
        """At this process's exit: let the JVM exit (its stdin closes, as PySpark's gateway expects), wait
        while it writes the archive, and move the archive into place; or drop it."""
        tmp, self.recording = self.recording, None
        if tmp is None:
            return
        try:
            from pyspark import SparkContext

            proc = getattr(SparkContext._gateway, "proc", None)
            if proc is not None and self.worth_keeping:
                try:
                    proc.stdin.close()
                    code = proc.wait(timeout=300)
                except Exception:
                    code = None
                if code == 0 and os.path.getsize(tmp) > 0:
                    os.replace(tmp, self.path)
                    return
            # nothing to keep (or the JVM did not finish): the JVM may still write the file after this
            # process is gone; the next start removes it (its process is dead by then)
            if proc is None or proc.poll() is not None:
                os.remove(tmp)
        except OSError:
            pass


def blocking_directory(conf: dict) -> str | None:
    """The directory that keeps the driver JVM from recording an archive, or None. The JDK archives nothing
    while a directory that is not empty is on the class path. These are the directories Spark's launcher
    puts there (``AbstractCommandBuilder.buildClassPath``): ``spark.driver.extraClassPath`` (``--conf``,
    ``--driver-class-path`` or ``--conf`` in ``PYSPARK_SUBMIT_ARGS``, the properties file), the
    configuration directory (``SPARK_CONF_DIR``, else the Spark home's ``conf``), ``HADOOP_CONF_DIR``,
    ``YARN_CONF_DIR``, ``SPARK_DIST_CLASSPATH``; and a Spark build's own classes (with
    ``SPARK_PREPEND_CLASSES`` or ``SPARK_TESTING=1``: ``<project>/target/scala-*/classes``)."""
    from logetl.engines.spark.jvm import spark_defaults, submit_values

    try:
        from pyspark.find_spark_home import _find_spark_home

        home = _find_spark_home()
    except ImportError:
        home = None
    entries = [conf.get("spark.driver.extraClassPath", ""), spark_defaults().get("spark.driver.extraClassPath", ""),
               *submit_values("--driver-class-path"),
               *(v.split("=", 1)[1] for v in submit_values("--conf", "-c")
                 if v.split("=", 1)[0].strip() == "spark.driver.extraClassPath" and "=" in v),
               os.environ.get("HADOOP_CONF_DIR", ""), os.environ.get("YARN_CONF_DIR", ""),
               os.environ.get("SPARK_DIST_CLASSPATH", ""),
               os.environ.get("SPARK_CONF_DIR") or (os.path.join(home, "conf") if home else "")]
    if home and (os.environ.get("SPARK_PREPEND_CLASSES") or os.environ.get("SPARK_TESTING") == "1"):
        entries += glob.glob(os.path.join(glob.escape(home), "*", "target", "scala-*", "*classes"))
        entries += glob.glob(os.path.join(glob.escape(home), "*", "*", "target", "scala-*", "*classes"))
    for entry in (e for joined in entries for e in joined.split(os.pathsep)):
        try:
            if entry and os.path.isdir(entry) and os.listdir(entry):
                return entry
        except OSError:
            return entry    # a directory the JVM may not read either: not worth a failed archive
    return None
