"""The file-system operations taps, outputs and working directories need, so that they work on the local
disk (``LocalFS``) and on whatever Hadoop's FileSystem reaches (``logetl.engines.spark.fs.HadoopFS``: HDFS,
object stores) alike. Paths are strings; each engine says which file system its paths live on."""
from __future__ import annotations

import contextlib
import glob as _glob
import os
import shutil
from urllib.parse import unquote, urlparse


def local_path(path: str) -> str:
    """A path as the user reads it: a local file's ``file:`` URI (what Spark reports: encoded, ``a%20b``) as
    its path, anything else unchanged."""
    return unquote(urlparse(path).path) if path.startswith("file:") else path


def hadoop_local_path(path: str) -> str:
    """A path as the user reads it: a local file's path as Hadoop's ``Path`` spells it (``file:/a b``, not
    encoded: read as a URI, ``a%41`` would be ``aA``) as its path, anything else unchanged."""
    return "/" + path[len("file:"):].lstrip("/") if path.startswith("file:") else path


@contextlib.contextmanager
def _removed_on_failure(tmp: str):
    """A temporary file written aside and renamed over its target: removed if anything (a signal that
    stops the run too) comes before the rename, so that a stopped run leaves no ``*.tmp-PID`` beside it."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


class LocalFS:
    name = "local"

    def abspath(self, p: str) -> str:
        return os.path.abspath(p)

    def local(self, p: str) -> str:
        """``p``'s path on this machine (``HadoopFS.local``: None for a path of another file system)."""
        return os.path.abspath(p)

    def join(self, *parts: str) -> str:
        return os.path.join(*parts)

    def parent(self, p: str) -> str:
        return os.path.dirname(os.path.abspath(p))

    def basename(self, p: str) -> str:
        return os.path.basename(os.path.abspath(p))

    def exists(self, p: str) -> bool:
        return os.path.lexists(p)

    def isdir(self, p: str) -> bool:
        return os.path.isdir(p)

    def isfile(self, p: str) -> bool:
        return os.path.isfile(p)

    def islink(self, p: str) -> bool:
        return os.path.islink(p)

    def listdir(self, p: str) -> list[str]:
        return sorted(os.listdir(p))

    def entries(self, p: str) -> list[tuple[str, str]]:
        """Directory ``p``'s entries by name, each with its kind: ``"file"`` (a regular file, or a symbolic
        link to one), ``"dir"`` (likewise) or ``"other"`` (a broken link, a FIFO, a socket...)."""
        def kind(e: os.DirEntry) -> str:
            try:
                return "file" if e.is_file() else "dir" if e.is_dir() else "other"
            except OSError:   # (os.path.isfile's answer when the status cannot be had)
                return "other"

        with os.scandir(p) as found:
            return sorted((e.name, kind(e)) for e in found)

    def glob(self, pattern: str) -> list[str]:
        return sorted(_glob.glob(pattern))

    def has_magic(self, p: str) -> bool:
        return _glob.has_magic(p)

    def stat(self, p: str) -> tuple[int, int]:
        st = os.stat(p)
        return st.st_size, st.st_mtime_ns

    def change_marks(self, p: str) -> dict:
        """What tells a file apart from another of the same size and modification time (which anyone can
        set, ``touch -d``): its inode, and its inode change time, which only the kernel sets."""
        st = os.stat(p)
        return {"inode": st.st_ino, "ctime_ns": st.st_ctime_ns}

    def readable(self, p: str) -> bool:
        return os.access(p, os.R_OK)

    @staticmethod
    def nearest_existing(p: str, exists=os.path.exists) -> str:
        """``p`` (absolute) if it exists, else its nearest ancestor that does (at worst ``/``)."""
        probe = os.path.abspath(p)
        while not exists(probe):
            probe = os.path.dirname(probe)
        return probe

    def writable_ancestor(self, p: str) -> str | None:
        """The nearest existing ancestor of ``p`` if it cannot be written to, else None."""
        probe = self.nearest_existing(os.path.dirname(os.path.abspath(p)))
        return None if os.access(probe, os.W_OK) else probe

    def non_directory_ancestor(self, p: str) -> str | None:
        """The nearest existing ancestor of ``p`` when it is not a directory (``p`` cannot be made), else None."""
        probe = self.nearest_existing(os.path.dirname(os.path.abspath(p)), os.path.lexists)
        return None if os.path.isdir(probe) else probe

    def makedirs(self, p: str) -> None:
        os.makedirs(p, exist_ok=True)

    def rmtree(self, p: str) -> None:
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p, ignore_errors=True)
        elif os.path.lexists(p):
            os.remove(p)

    def remove(self, p: str) -> None:
        try:
            os.remove(p)
        except FileNotFoundError:
            pass

    def replace_dir(self, src: str, dst: str) -> None:
        """Moves directory ``src`` to ``dst`` (absent or empty) in one rename."""
        os.rename(src, dst)

    def rename(self, src: str, dst: str) -> None:
        os.rename(src, dst)

    def read_text(self, p: str) -> str | None:
        try:
            with open(p) as f:
                return f.read()
        except OSError:
            return None

    # No fsync in these two: logetl's crash model is a killed process (SIGKILL, the OOM killer), not a power
    # cut. What a killed process wrote is in the page cache, and renames are seen in the order made, so
    # the write-then-rename below is atomic to every later reader; the part files these records vouch for
    # are not synced either. Each fsync cost 4-14 ms of every run on a busy disk (after a big run's
    # writes, a small file's fsync waits for the journal to flush them).
    def write_text_atomic(self, p: str, text: str, encoding: str | None = None) -> None:
        """``text`` in file ``p``, whole or not at all: written aside (``p.tmp-PID``, removed if anything
        stops the write), then renamed over ``p``. The copies a killed process left (``p.tmp-PID`` of a
        process gone, SIGKILL giving it no moment to remove its own) are removed first."""
        self._remove_left_copies(p)
        tmp = f"{p}.tmp-{os.getpid()}"
        with _removed_on_failure(tmp):
            with open(tmp, "w", encoding=encoding) as f:
                f.write(text)
            os.replace(tmp, p)

    def _remove_left_copies(self, p: str) -> None:
        parent, base = os.path.split(p)
        prefix = base + ".tmp-"
        try:
            names = [n for n in os.listdir(parent or ".") if n.startswith(prefix)]
        except OSError:
            return
        for name in names:
            pid = name[len(prefix):]
            if pid.isdigit() and int(pid) != os.getpid() and not self.pid_alive(int(pid)):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(os.path.join(parent, name))

    def touch(self, p: str) -> None:
        open(p, "wb").close()

    def prepend(self, p: str, data: bytes) -> None:
        """Puts ``data`` before the bytes of file ``p`` (a header line before a part Spark wrote): a copy
        that replaces it in one rename."""
        tmp = f"{p}.tmp-{os.getpid()}"
        with _removed_on_failure(tmp):
            with open(p, "rb") as src, open(tmp, "wb") as dst:
                dst.write(data)
                shutil.copyfileobj(src, dst, 1 << 20)
            os.replace(tmp, p)

    @staticmethod
    def pid_alive(pid: int) -> bool:
        """Whether process ``pid`` of this machine still runs (staging directories name their writer)."""
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


LOCAL = LocalFS()
