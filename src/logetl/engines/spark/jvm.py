"""The Spark engine's parse in the executors' JVMs: logetl's C kernel called through JNI, no Python worker.

On Spark, the Python-worker path (``spark_native``) hands every line from the executor's JVM to a Python
worker as Arrow batches and back: on a 2-core standalone cluster that round trip alone, parsing nothing,
costs about 0.4 of a hand-written PySpark Branch (docs/guides/spark.md). Here the same kernel
(``_kernel.h``) runs inside the executors' JVMs: ``java/logetl/spark/NativeParse.java`` takes a partition's
lines a batch at a time and gives back the rows of the Python path's ``parse_batches`` or ``join_batches``,
in the same schemas, so the engine plans and reads both paths alike.

What the executors need is one jar, logetl's, which holds the classes and the JNI library (``_jni.c``): it
travels with the application (``spark.jars``, fetched by every executor as any application jar), so nothing
is installed on the cluster and no Python environment is shipped for the parse. The jar is built on the
driver, the first time a session needs it, against the Spark it runs with (``javac`` from the JDK, the C
compiler with the JDK's JNI headers), and kept in logetl's cache directory (``$LOGETL_CACHE_DIR``, else
``$XDG_CACHE_HOME/logetl``, else ``~/.cache/logetl``), one file per logetl build and Spark installation
(~20 KB; ~2 s to build; a build that fails is remembered beside it, and said again without building, until
the sources, the JDK or the C compiler change). A machine without a JDK or a C compiler cannot build it: the
engine then takes the Python-worker path, and the notice says why. The library is built for the driver's
machine: executors must run the same platform (as a packed venv's interpreter must).
"""
from __future__ import annotations

import hashlib
import os
import platform
import shlex
import shutil
import struct
import subprocess
import tempfile
import zipfile

from logetl import __version__
from logetl.engines.spark.cds import _java, cache_dir
from logetl.io.fs import LOCAL

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # the logetl package
JAVA_SOURCES = [os.path.join(HERE, "java", "logetl", "spark", n) for n in ("Kernel.java", "NativeParse.java",
                                                                                      "Lines.java")]
C_SOURCES = [os.path.join(HERE, "_jni.c"), os.path.join(HERE, "_kernel.h"), os.path.join(HERE, "_json.h")]
LIBRARY = "liblogetl_jvm.so"
#: the Java release the classes are compiled for: what Spark 4 runs on, whatever javac compiles them
RELEASE = "17"


class Unavailable(Exception):
    """Why the kernel cannot run in the JVMs here (the notice's reason)."""


def _jdk() -> str:
    """The JDK of the java that Spark runs with (JAVA_HOME, else java on the PATH): where javac and the JNI
    headers are."""
    java = _java()   # (the class archive's: its real path)
    if java is None:
        raise Unavailable("no java")
    jdk = os.path.dirname(os.path.dirname(java))
    if not os.path.exists(os.path.join(jdk, "bin", "javac")):
        raise Unavailable(f"no javac beside {java} (building the kernel for the JVM needs a JDK, not only a JRE)")
    if not os.path.exists(os.path.join(jdk, "include", "jni.h")):
        raise Unavailable(f"no JNI headers in {jdk}/include (building the kernel for the JVM needs a JDK)")
    return jdk


def _compiler() -> str:
    """The C compiler: $CC, else cc, else gcc."""
    given = os.environ.get("CC")
    cc = shutil.which(given) if given else (shutil.which("cc") or shutil.which("gcc"))
    if not cc:
        raise Unavailable(f"no C compiler ({given or 'cc'}) to build the kernel for the JVM")
    return cc


def _spark_jars() -> str:
    from pyspark.find_spark_home import _find_spark_home

    return os.path.join(_find_spark_home(), "jars")


def _key(jars: str) -> str:
    """What the jar depends on, hashed: logetl's version and the sources it is built from, the Spark it is
    compiled against (the names of its jars hold its version), the machine's architecture (the library's)."""
    h = hashlib.sha256(f"{__version__}\n{platform.machine()}".encode())
    for path in JAVA_SOURCES + C_SOURCES:
        with open(path, "rb") as f:
            h.update(f.read())
    h.update("\n".join(sorted(n for n in os.listdir(jars) if n.startswith("spark-"))).encode())
    return h.hexdigest()[:20]


def jar() -> str:
    """The path of logetl's jar for this Spark installation, built into the cache on first use; raises
    ``Unavailable`` with the reason when it cannot be built here."""
    try:
        jars = _spark_jars()
        key = _key(jars)
    except (ImportError, OSError) as exc:
        raise Unavailable(f"cannot read logetl's JVM sources or Spark's jars: {exc}") from None
    directory = cache_dir()
    path = os.path.join(directory, f"logetl-jvm-{key}.jar")
    if "," in path:
        raise Unavailable(f"the cache directory {directory!r} holds a comma, which spark.jars cannot take "
                          "(set LOGETL_CACHE_DIR)")
    if os.path.isfile(path):
        return path
    jdk, cc = _jdk(), _compiler()
    # a build that failed with these tools, for these sources: said again, not tried again at every session
    tools = hashlib.sha256(f"{os.path.realpath(jdk)}\n{os.path.realpath(cc)}".encode()).hexdigest()[:12]
    failed = os.path.join(directory, f"logetl-jvm-{key}-{tools}.failed")
    try:
        with open(failed, encoding="utf-8") as f:
            raise Unavailable(f.read().strip())
    except OSError:
        pass
    try:
        os.makedirs(directory, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".logetl-jvm-", dir=directory) as tmp:
            classes = os.path.join(tmp, "classes")
            _run([os.path.join(jdk, "bin", "javac"), "--release", RELEASE, "-nowarn", "-d", classes,
                  "-cp", os.path.join(jars, "*"), *JAVA_SOURCES], "javac")
            library = os.path.join(classes, "logetl", "spark", LIBRARY)
            _run([cc, "-O3", "-shared", "-fPIC", f"-I{jdk}/include", f"-I{jdk}/include/linux",
                  f'-DLOGETL_VERSION="{__version__}"', C_SOURCES[0], "-o", library], os.path.basename(cc))
            built = os.path.join(tmp, "logetl-jvm.jar")
            with zipfile.ZipFile(built, "w", zipfile.ZIP_DEFLATED) as z:
                for root, _, names in os.walk(classes):
                    for name in sorted(names):
                        full = os.path.join(root, name)
                        z.write(full, os.path.relpath(full, classes))
            os.replace(built, path)   # atomic: a concurrent build puts the same bytes in place
    except OSError as exc:
        raise Unavailable(f"cannot build logetl's jar in {directory}: {exc.strerror or exc}") from None
    except Unavailable as exc:
        try:
            LOCAL.write_text_atomic(failed, str(exc), encoding="utf-8")   # (its temporary never left behind)
        except OSError:
            pass
        raise
    return path


def _run(cmd: list[str], what: str) -> None:
    """Runs a build step; a failure is ``Unavailable`` naming the step and its first error line."""
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=300)
    except subprocess.TimeoutExpired:
        raise Unavailable(f"{what} did not finish in 300 s building the kernel for the JVM") from None
    if done.returncode != 0:
        said = [l.strip() for l in (done.stderr + done.stdout).decode(errors="replace").splitlines() if l.strip()]
        # (a compiler's first line may say where it was: "In file included from ...")
        first = next((l for l in said if "error" in l.lower()), said[0] if said else f"exit status {done.returncode}")
        raise Unavailable(f"{what} failed building the kernel for the JVM: {first}")


def with_jar(conf: dict, jar: str) -> dict:
    """The settings of a driver JVM to launch (``conf``: spark-submit's ``--conf``) with ``jar`` first in
    ``spark.jars``, before the jars it would have had anyway: ``conf``'s own, else those of
    ``spark-defaults.conf`` (a ``--conf`` replaces the file's value, it does not add to it); and before
    those of ``--jars`` in ``PYSPARK_SUBMIT_ARGS``, which replaces ``spark.jars`` whole (the variable is
    changed in place for the launch). First: an older logetl jar among them does not hide this one's
    classes."""
    args = shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    for i, arg in enumerate(args):
        if arg == "--jars" and i + 1 < len(args):
            args[i + 1] = f"{jar},{args[i + 1]}"
        elif arg.startswith("--jars="):
            args[i] = f"--jars={jar},{arg[len('--jars='):]}"
        else:
            continue
        os.environ["PYSPARK_SUBMIT_ARGS"] = shlex.join(args)
        return conf
    given = conf.get("spark.jars") or spark_defaults().get("spark.jars", "")
    return {**conf, "spark.jars": f"{jar},{given}" if given.strip() else jar}


def submit_values(*flags: str) -> list[str]:
    """The values ``PYSPARK_SUBMIT_ARGS`` gives spark-submit's ``flags`` (``--flag V`` or ``--flag=V``), in
    order."""
    args = shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    found = []
    for i, arg in enumerate(args):
        for flag in flags:
            if arg == flag and i + 1 < len(args):
                found.append(args[i + 1])
            elif arg.startswith(f"{flag}="):
                found.append(arg[len(flag) + 1:])
    return found


def spark_defaults() -> dict:
    """The settings spark-submit reads from a file when it launches a driver: the properties file given
    with ``--properties-file`` in ``PYSPARK_SUBMIT_ARGS`` (and ``spark-defaults.conf`` below it only with
    ``--load-spark-defaults``), else ``spark-defaults.conf`` (in ``$SPARK_CONF_DIR``, else the Spark
    home's ``conf``). A Java properties file: ``key value``, ``key=value`` or ``key:value``."""
    args = shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    given = next(iter(submit_values("--properties-file")), None)
    found = {}
    if given is None or "--load-spark-defaults" in args:
        try:
            from pyspark.find_spark_home import _find_spark_home

            where = os.environ.get("SPARK_CONF_DIR") or os.path.join(_find_spark_home(), "conf")
            found.update(_properties(os.path.join(where, "spark-defaults.conf")))
        except ImportError:
            pass
    if given is not None:
        found.update(_properties(given))
    return found


def _properties(path: str) -> dict:
    """The settings of a Java properties file as spark-submit reads them; none when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return {}
    found = {}
    for line in lines:
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find(c) for c in " \t=:") if i > 0), default=len(line))
        found[line[:cut]] = line[cut:].lstrip(" \t").lstrip("=:").strip()
    return found


def program_bytes(program) -> bytes | None:
    """A token program (``Format.native_program``; None: the original expression) as _jni.c decodes it:
    kind, stop, literal length (4 bytes, little-endian) and literal, per token."""
    if program is None:
        return None
    return b"".join(bytes([kind, stop]) + struct.pack("<I", len(lit)) + lit for kind, lit, stop in program)


def classes(spark):
    """logetl's classes in the driver's JVM (a py4j JavaClass), or None when the JVM was started without
    the jar (a session logetl did not launch: spark-submit without ``--jars``)."""
    from py4j.java_gateway import JavaClass

    found = spark._jvm.logetl.spark.NativeParse
    return found if isinstance(found, JavaClass) else None


def check(spark, on_cluster: bool, tasks: int) -> tuple[bool, str]:
    """Whether the executors' JVMs can run the kernel, the driver's JVM having logetl's classes
    (``classes``): (True, "") or (False, why). On a local master the executors are the driver's JVM, asked
    directly; on a cluster, a job of ``tasks`` tasks (one a core the session knows) asks them, each loading
    the library from the jar (JVM code only: no Python worker)."""
    found = classes(spark)
    answers = list(found.probe(spark._jsparkSession, tasks)) if on_cluster else [found.check()]
    for answer in answers:
        status, _, said = answer.partition("\t")
        if status != "ok":
            return False, said
        if said != __version__:
            return False, f"they have logetl {said}, the driver {__version__}"
    return True, ""


#: the lines of a batch (at most): the Python workers' Arrow batches', so both paths hold alike
BATCH = "spark.sql.execution.arrow.maxRecordsPerBatch"


def _batch(spark) -> int:
    size = int(spark.conf.get(BATCH, "10000"))
    return size if size > 0 else 10000   # (Arrow's "no limit": one batch a partition; here a bounded one)


def parsed(lines, schema: str, spec: tuple):
    """``spark_native.parse_batches``'s rows, made in the executors' JVMs: ``lines`` (``value`` binary,
    ``_input`` int) parsed by ``spec`` (program, output field indexes, size field index); ``schema``: the
    rows' DDL, its fields binary (the engine casts them to strings: a cast that keeps the bytes)."""
    from pyspark.sql import DataFrame

    program, out, size_index = spec
    spark = lines.sparkSession
    if _segmented(program):
        jdf = classes(spark).parsedSegments(lines._jdf, schema, *_segments_args(program), _batch(spark))
    else:
        jdf = classes(spark).parsed(lines._jdf, schema, program_bytes(program), list(out), size_index, _batch(spark))
    return DataFrame(jdf, spark)


def _segmented(program) -> bool:
    from logetl.engines.spark.native import Segments

    return isinstance(program, Segments)


def _segments_args(segments) -> list:
    """A segmented parse's programs (``native.Segments``) as ``NativeParse.parsedSegments`` takes them."""
    return [[program_bytes(p) for p in segments.programs], [list(o) for o in segments.outs], list(segments.sizes),
            [bool(p) for p in segments.plus]]


def joined(lines, schema: str, spec: tuple, sinks: tuple, trap: bool):
    """``spark_native.join_batches``'s rows, made in the executors' JVMs."""
    from pyspark.sql import DataFrame

    program, out, size_index = spec
    spark = lines.sparkSession
    if _segmented(program):
        jdf = classes(spark).joinedSegments(lines._jdf, schema, *_segments_args(program), _batch(spark),
                                            [list(s) for s in sinks], trap)
    else:
        jdf = classes(spark).joined(lines._jdf, schema, program_bytes(program), list(out), size_index,
                                    _batch(spark), [list(s) for s in sinks], trap)
    return DataFrame(jdf, spark)


def lines(spark, paths: list[str], sizes: list[int], split: int, small: int, limit: int, head: int, marker: bytes):
    """The lines of ``paths`` (input 0, 1, ..., of ``sizes`` bytes) read by logetl's line reader in the
    executors' JVMs (``java/logetl/spark/Lines.java``), ``value`` binary and ``_input`` int, in input order:
    a line longer than ``limit`` is never held whole, and comes as a placeholder (``marker``, where it is,
    its size and its first ``head`` bytes: ``parse.placeholder``) that ``patch`` replaces by the line in the trap."""
    from pyspark.sql import DataFrame

    jdf = spark._jvm.logetl.spark.Lines.read(spark._jsparkSession, "\0".join(paths), ",".join(map(str, sizes)),
                                             int(split), int(small), int(limit), int(head), bytearray(marker))
    return DataFrame(jdf, spark)


def patch(spark, directory: str, marker: bytes) -> int:
    """Puts each line too long in the trap's part files in ``directory`` in place of its placeholder (see
    ``lines``), copied from its file by the driver's JVM a buffer at a time; how many."""
    return int(spark._jvm.logetl.spark.Lines.patch(spark._jsparkSession, directory, bytearray(marker)))
