"""The file system of the Spark engine's inputs and outputs: whatever Hadoop's FileSystem reaches
(``HadoopFS``: HDFS, S3, ...), through the driver JVM, with the local disk's own calls where it is one."""
from __future__ import annotations

import contextlib
import errno
import os
import re
from contextlib import contextmanager
from functools import lru_cache, wraps

from logetl.errors import UsageError
from logetl.io.fs import LOCAL, LocalFS, hadoop_local_path
from logetl.engines.spark.errors import _java_message


#: what a Hadoop path string starts with that names its file system (``HadoopFS._p``)
_FS_PREFIX = re.compile(r"(?:[^/:]*:)?(?://[^/]+)?")


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
        try:
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
        except BaseException:       # a stop too: no temporary left beside the record
            with contextlib.suppress(Exception):
                self.remove(tmp)
            raise

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
