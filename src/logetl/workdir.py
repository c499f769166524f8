"""A flow's working directory: what makes a failed flow restartable after its last checkpoint.

It holds the flow's identity (``flow.json``), the stored outputs of steps (each a directory of parts with a
``_COMPLETE`` marker written last), the trapped lines, and one record per completed step
(``steps/NAME.json``, written atomically once everything the step stores is complete). A later run of the
*same flow* (same program and definition, same inputs by path, size and modification time, same outputs
and options) finds those records and skips the steps before the last completed checkpoint; any other run
starts from scratch and says why. Nothing incomplete is ever used: a record or marker is written only after
the data it vouches for, with a rename, so a SIGKILL at any moment leaves either a usable state or none.

logetl deletes only what it created. A working directory is created whole, its marker (``.logetl-workdir``)
inside, by one rename of a fresh sibling; an existing directory without the marker is refused, never
emptied. ``--work-dir DIR`` is a place *under which* logetl makes its own directory (``DIR/logetl-work-…``),
so DIR and whatever else it holds are never touched. A directory bound with ``--checkpoint-dir`` must be
absent, empty or a logetl checkpoint (its marker ``_LOGETL_CHECKPOINT`` written first), and only the
checkpoint's own files are ever removed from it.

Cleanup is crash-safe whatever the file system's directory order: a directory is retired with one rename
first (to ``NAME.trash-PID-…``, or after success to ``NAME.published-FLOWID``) and only then deleted, so a
half-deleted state is never read as a working directory. The ``published`` name also tells a rerun of the
same flow, killed after it published its outputs but before its cleanup ended, that those outputs are its
own: the rerun replaces them (same bytes) instead of refusing them as "not empty".
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import time
import uuid
from dataclasses import dataclass, field

from logetl.errors import RunFailed, UsageError, signals_held
from logetl.io.outputs import output_listing, short_name

FLOW_FILE = "flow.json"
COMPLETE = "_COMPLETE"
#: the first thing in every working directory logetl makes: a directory without it is not logetl's
MARKER = ".logetl-workdir"
#: the first thing logetl writes into a directory bound with --checkpoint-dir
CHECKPOINT_MARKER = "_LOGETL_CHECKPOINT"
COMMITTING = "committing"


class WorkDirError(UsageError):
    """A working or checkpoint directory logetl must not use; the message names it."""


def file_fingerprint(path: str, fs) -> dict:
    if path == "-":   # standard input cannot be read again: a run reading it never restarts (a fresh nonce)
        return {"path": "-", "stdin": uuid.uuid4().hex}
    size, mtime = fs.stat(path)
    return {"path": fs.abspath(path), "size": size, "mtime_ns": mtime, **fs.change_marks(path)}


def flow_identity(program: str, definition: str, engine: str, inputs: list[str], outputs: dict[str, str],
                  options: dict, fs) -> dict:
    return {
        "program": program,
        "definition": hashlib.sha256(definition.encode()).hexdigest()[:16],
        "engine": engine,
        "inputs": [file_fingerprint(p, fs) for p in inputs],
        "outputs": {k: fs.abspath(v) for k, v in sorted(outputs.items())},
        "options": {k: v for k, v in sorted(options.items())},
    }


def identity_id(identity: dict) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:32]


def why_different(old: dict, new: dict) -> str:
    """One phrase naming the first difference between two identities."""
    if old.get("program") != new.get("program"):
        return f"the program changed ({old.get('program')} -> {new.get('program')})"
    if old.get("definition") != new.get("definition"):
        return "the program's flow definition changed"
    if old.get("engine") != new.get("engine"):
        return f"the engine changed ({old.get('engine')} -> {new.get('engine')})"
    old_in = {i["path"]: i for i in old.get("inputs", [])}
    new_in = {i["path"]: i for i in new.get("inputs", [])}
    for path in new_in:
        if path not in old_in:
            return f"input {path!r} is new"
        if path == "-" and old_in[path] != new_in[path]:
            return "the input is standard input, which cannot be read again"
        if old_in[path] != new_in[path]:
            return f"input {path!r} changed (size, modification time or inode)"
    for path in old_in:
        if path not in new_in:
            return f"input {path!r} is gone"
    if old.get("outputs") != new.get("outputs"):
        return "the outputs changed"
    for key in sorted(set(old.get("options", {})) | set(new.get("options", {}))):
        if old.get("options", {}).get(key) != new.get("options", {}).get(key):
            return f"option {key} changed"
    return "the flow changed"


@dataclass
class Resume:
    """What an earlier, failed run of the same flow left: completed steps by name, and why not, if not."""

    completed: dict[str, dict] = field(default_factory=dict)
    reason: str | None = None      # why an earlier state was discarded
    previous_run: str | None = None


_SIBLING = re.compile(r"\.(?:(new|trash)-(\d+)-[0-9a-f]{8}|published-[0-9A-F]{32})")
_CHECKPOINT_FILE = re.compile(r"part-.*|\.part-.*\.crc|_SUCCESS|\._SUCCESS\.crc|_COMPLETE(?:\.tmp-[0-9]+)?|_temporary")


def default_path(output: str, work_dir: str | None, fs) -> str:
    """The working directory of a flow whose first output is ``output``: ``.OUT.logetl-work`` beside it, or
    a directory of logetl's own under ``--work-dir`` (named after the output, so that flows with different
    outputs can share one DIR)."""
    if work_dir:
        digest = hashlib.sha256(fs.abspath(output).encode()).hexdigest()[:12]
        return fs.join(fs.abspath(work_dir), f"logetl-work-{digest}")
    return fs.join(fs.parent(output), f".{short_name(fs.basename(output))}.logetl-work")


class WorkDir:
    """The working directory of one flow, on the engine's file system."""

    def __init__(self, path: str, identity: dict, checkpoint_dirs: dict[str, str] | None, fs):
        self.fs = fs
        self.path = fs.abspath(path)
        self.identity = identity
        self.id = identity_id(identity)
        #: checkpoints bound to a place of the user's (kept after success)
        self.checkpoint_dirs = {k: fs.abspath(v) for k, v in (checkpoint_dirs or {}).items()}

    # --- layout --------------------------------------------------------------------------------------------

    def store(self, name: str) -> str:
        return self.checkpoint_dirs.get(name) or self.fs.join(self.path, "stored", name)

    @property
    def trap_dir(self) -> str:
        return self.fs.join(self.path, "trap")

    @property
    def trap_part(self) -> str:
        return self.fs.join(self.trap_dir, "part-00000")

    @property
    def published_path(self) -> str:
        return f"{self.path}.published-{self.id.upper()}"

    def _step_record(self, step: str) -> str:
        return self.fs.join(self.path, "steps", f"{step}.json")

    # --- stored outputs -----------------------------------------------------------------------------------

    def prepare_store(self, name: str) -> str:
        """An empty place for stored output ``name`` (discarding an earlier one); returns its path. In a
        bound directory the marker comes first and only a checkpoint's own files are removed."""
        fs, path = self.fs, self.store(name)
        if name in self.checkpoint_dirs:
            fs.makedirs(path)
            if not fs.exists(fs.join(path, CHECKPOINT_MARKER)):
                fs.touch(fs.join(path, CHECKPOINT_MARKER))
            _clear_checkpoint(path, fs)
        else:
            fs.rmtree(path)
            fs.makedirs(path)
        return path

    def is_complete(self, name: str) -> bool:
        """Complete, and stored by this very flow (a bound checkpoint directory may be shared by flows)."""
        return self.fs.read_text(self.fs.join(self.store(name), COMPLETE)) == self.id

    def mark_complete(self, name: str) -> None:
        self.fs.write_text_atomic(self.fs.join(self.store(name), COMPLETE), self.id)

    # --- life cycle ----------------------------------------------------------------------------------------

    def check(self) -> None:
        """Refuses (before anything runs or is changed) a directory at this path that logetl did not make."""
        fs = self.fs
        if not fs.exists(self.path):
            return
        if not fs.isdir(self.path):
            raise WorkDirError(f"working directory {self.path!r} exists and is not a directory")
        if not fs.exists(fs.join(self.path, MARKER)):
            raise WorkDirError(f"working directory {self.path!r} exists and was not made by logetl "
                               f"(no {MARKER} in it): remove it or choose another --work-dir")

    def inspect(self) -> Resume:
        """What an earlier failed run of the same flow left here (nothing is changed)."""
        resume = Resume()
        state = self._read(self.fs.join(self.path, FLOW_FILE))
        if state is None:
            return resume
        if state.get("id") != self.id:
            resume.reason = why_different(state.get("identity", {}), self.identity)
            return resume
        resume.previous_run = state.get("run_id")
        steps_dir = self.fs.join(self.path, "steps")
        if self.fs.isdir(steps_dir):
            for name in self.fs.listdir(steps_dir):
                if name.endswith(".json"):
                    record = self._read(self.fs.join(steps_dir, name))
                    if record is not None:
                        resume.completed[name[:-5]] = record
        return resume

    def _committing_record(self, where: str) -> dict | None:
        record = self._read(self.fs.join(where, COMMITTING))
        return record if record and record.get("id") == self.id else None

    def replaceable(self, paths: list[str]) -> dict[str, dict]:
        """The outputs among ``paths`` that an earlier run of this very flow published before it died
        (while publishing, or after, before its working directory was gone), with what they hold. An
        output is this flow's when it holds exactly the files (names and sizes) recorded just before the
        earlier run published; a result that someone else put there is not."""
        fs = self.fs
        record = self._committing_record(self.published_path) if fs.isdir(self.published_path) else None
        if record is None and fs.isdir(self.published_path):
            # retired after publishing, and its record is gone: the last moments before it was deleted
            return {p: listing for p in paths if (listing := output_listing(p, fs)) is not None}
        if record is None:
            state = self._read(fs.join(self.path, FLOW_FILE))
            record = self._committing_record(self.path) if state and state.get("id") == self.id else None
        if record is None:
            return {}
        recorded = record.get("outputs", {})
        return {p: recorded[fs.abspath(p)] for p in paths
                if fs.abspath(p) in recorded and output_listing(p, fs) == recorded[fs.abspath(p)]}

    def claim(self, run_id: str, fresh: bool, carry: dict[str, dict] | None = None) -> None:
        """Takes the directory for this run; ``fresh`` discards whatever an earlier run left. ``carry``
        (output path -> files) are outputs an earlier run of this flow published: recorded again at once,
        so that they stay recognised if this run is interrupted too."""
        fs = self.fs
        try:
            self._clean_siblings()
            if fresh:
                if fs.exists(self.path):
                    self._retire(self.path)
                for d in self.checkpoint_dirs.values():
                    if fs.isdir(d):
                        _clear_checkpoint(d, fs)
            if not fs.exists(self.path):
                self._create()
            # no steps/ or trap/ yet: made when a step record or trapped line is first written (most runs
            # have one step, which writes no record, and no trap); each directory made is one more to remove
        except OSError as exc:
            raise WorkDirError(f"cannot use the working directory {self.path!r}: {exc.strerror or exc}") from None
        fs.write_text_atomic(fs.join(self.path, FLOW_FILE), json.dumps(
            {"id": self.id, "run_id": run_id, "identity": self.identity, "opened_at": time.time()}, indent=2))
        if carry:
            self.committing(carry)
        else:
            fs.remove(fs.join(self.path, COMMITTING))

    def step_completed(self, step: str, record: dict) -> None:
        self.fs.makedirs(self.fs.join(self.path, "steps"))
        self.fs.write_text_atomic(self._step_record(step), json.dumps(record, indent=2))

    def forget_step(self, step: str) -> None:
        self.fs.remove(self._step_record(step))

    def committing(self, outputs: dict[str, dict]) -> None:
        """Outputs (path -> the files they will hold) are about to be published: a rerun of this flow may
        replace those that still hold exactly that."""
        record = {"id": self.id, "outputs": {self.fs.abspath(p): files for p, files in outputs.items()}}
        self.fs.write_text_atomic(self.fs.join(self.path, COMMITTING), json.dumps(record))

    def finish(self) -> None:
        """After success: the directory is retired with one rename (its new name still says which flow
        published its outputs), then deleted, its record and marker last; bound checkpoints stay where
        the user put them."""
        fs = self.fs
        if fs.exists(self.published_path):
            self._delete_owned(self.published_path)
        fs.rename(self.path, self.published_path)
        self._delete_owned(self.published_path)

    # --- helpers -------------------------------------------------------------------------------------------

    def _create(self) -> None:
        """Makes the directory whole, marker inside, with one rename: it never exists without its marker."""
        fs = self.fs
        fs.makedirs(fs.parent(self.path))
        fresh = f"{self.path}.new-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        # three calls that a stop must not part: a stopped run leaves the directory or nothing, never the
        # half-made copy (a rerun would remove it, but a user would see it beside the outputs meanwhile)
        with signals_held():
            fs.makedirs(fresh)
            fs.touch(fs.join(fresh, MARKER))
            fs.rename(fresh, self.path)

    def _retire(self, path: str) -> None:
        # one rename, then a removal that may be long (an earlier run's stored outputs): a stop during it
        # leaves the retired copy, which the stopped run's cleanup removes (``discard_own``)
        trash = f"{self.path}.trash-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.fs.rename(path, trash)
        self._delete_owned(trash)

    def discard_own(self) -> None:
        """After a stop or a failure: removes the half-made or retired copies of the directory that this
        process made (``NAME.new-PID-…``, ``NAME.trash-PID-…``), so that a stopped run leaves no more than
        the working directory itself. Those of other processes stay (a run that is gone: the next run's
        ``claim`` removes them)."""
        fs = self.fs
        parent, base = fs.parent(self.path), fs.basename(self.path)
        if not fs.isdir(parent):
            return
        for name in fs.listdir(parent):
            m = _SIBLING.fullmatch(name[len(base):]) if name.startswith(base + ".") else None
            where = fs.join(parent, name)
            if m and m.group(2) is not None and int(m.group(2)) == os.getpid() and self._owned(where):
                self._delete_owned(where)

    def _owned(self, path: str) -> bool:
        """A directory of logetl's: it holds the marker (deleted last), or nothing at all."""
        fs = self.fs
        if not fs.isdir(path) or fs.islink(path):
            return False
        names = fs.listdir(path)
        return not names or MARKER in names

    def _delete_owned(self, path: str) -> None:
        """Deletes a retired working directory: its contents, then its record, then its marker, then the
        directory, so that until it is gone it is recognisably logetl's (and the record says whose)."""
        fs = self.fs
        last = (COMMITTING, MARKER)
        for name in fs.listdir(path):
            if name not in last:
                fs.rmtree(fs.join(path, name))
        for name in last:
            fs.remove(fs.join(path, name))
        fs.rmtree(path)

    def _clean_siblings(self) -> None:
        """Removes what killed runs left beside the directory: half-made or retired copies of it."""
        fs = self.fs
        parent, base = fs.parent(self.path), fs.basename(self.path)
        if not fs.isdir(parent):
            return
        for name in fs.listdir(parent):
            if not name.startswith(base + "."):
                continue
            m = _SIBLING.fullmatch(name[len(base):])
            where = fs.join(parent, name)
            if m and (m.group(2) is None or not fs.pid_alive(int(m.group(2)))) and self._owned(where):
                self._delete_owned(where)

    def _read(self, path: str) -> dict | None:
        text = self.fs.read_text(path)
        if text is None:
            return None
        try:
            return json.loads(text)
        except ValueError:
            return None


def checkpoint_dir_problem(path: str, fs) -> str | None:
    """Why logetl may not bind a checkpoint to ``path``, or None: it must be absent, an empty directory, or
    a logetl checkpoint (its marker, and nothing but a checkpoint's files)."""
    if not fs.exists(path):
        return None
    if not fs.isdir(path):
        return f"checkpoint directory {path!r} exists and is not a directory"
    names = fs.listdir(path)
    if not names:
        return None
    for name in names:
        if name != CHECKPOINT_MARKER and not _CHECKPOINT_FILE.fullmatch(name):
            return (f"checkpoint directory {path!r} holds {name!r}: not a logetl checkpoint "
                    "(choose an absent or empty directory)")
    if CHECKPOINT_MARKER not in names:
        return (f"checkpoint directory {path!r} holds files without logetl's {CHECKPOINT_MARKER} marker: "
                "not a logetl checkpoint (choose an absent or empty directory)")
    return None


def _clear_checkpoint(path: str, fs) -> None:
    """Removes a checkpoint's files from a bound directory, keeping the directory and its marker."""
    for name in fs.listdir(path):
        if _CHECKPOINT_FILE.fullmatch(name):
            fs.rmtree(fs.join(path, name))


#: beside each output while a run writes it: the lock that keeps a second run off (``OutputLocks``)
LOCK_SUFFIX = ".logetl-lock"


class OutputsHeld(RunFailed):
    """Another run (of this flow or another) is writing an output of this run; nothing was done."""


class OutputLocks:
    """Exclusive locks on a run's output directories, held from before it reads their state until they are
    published (``engines.base``; on failure, until the run has cleaned up): a second run on the same outputs
    (a cron job that overlaps its predecessor) stops at once, one line naming the output, instead of both
    staging, publishing and retiring each other's working directory. Once the outputs are published, what
    is left, removing the retired working directory, any run may do (a kill then leaves what a rerun
    recognises, with or without the locks).

    Each output ``DIR/NAME`` is locked with ``flock`` on ``DIR/.NAME.logetl-lock`` (in the nearest existing
    ancestor when ``DIR`` is not made yet), which holds the holder's process id; the holder removes it when
    it is done, while still holding the lock. A process that locked the file meanwhile removed checks that
    the path still names the file it locked, and tries again. A killed run leaves the file, unlocked (the
    kernel drops a dead process's locks): the next run takes it and removes it. Outputs of another file
    system (HDFS) and directories logetl cannot write into are not locked (the checks that follow say why
    the latter cannot be written)."""

    def __init__(self):
        self.held: list[tuple[str, int]] = []       # (lock path, descriptor)

    @staticmethod
    def lock_path(output: str) -> str:
        """The lock of the local output directory ``output``."""
        here = os.path.abspath(output)
        while True:
            parent = os.path.dirname(here)
            if os.path.isdir(parent) or parent == here:
                return os.path.join(parent, f".{short_name(os.path.basename(here))}{LOCK_SUFFIX}")
            here = parent

    def acquire(self, outputs: list[tuple[str, str]], fs) -> None:
        """Locks every output (``(name, path)``: name as messages say it, e.g. ``output1``), in path order;
        ``OutputsHeld`` when another run holds one (those taken are released)."""
        wanted = {}
        for name, path in outputs:
            local = fs.local(path)
            if local is not None:
                wanted.setdefault(self.lock_path(local), (name, path))
        try:
            for where in sorted(wanted):
                self._take(where, *wanted[where])
        except BaseException:
            self.release()
            raise

    def _take(self, where: str, name: str, path: str) -> None:
        # a signal (which stops the run) waits until the lock is held and recorded, or not taken: the
        # lock file is never left behind by a run that stopped half-way through taking it
        with signals_held():
            self._lock(where, name, path)

    def _lock(self, where: str, name: str, path: str) -> None:
        for _ in range(100):
            try:
                fd = os.open(where, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
            except OSError:
                return                 # a directory logetl cannot write into: the output checks say so
            st = os.fstat(fd)
            if any(os.path.samestat(st, os.fstat(mine)) for _, mine in self.held):
                os.close(fd)           # another output of this run, through a bind mount: refused after this
                return
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                raise OutputsHeld(f"{name} {path!r} is being written by another logetl run"
                                  + (f" (process {holder})" if holder else "")
                                  + ": wait for it to end, or choose another directory") from None
            except BaseException:
                os.close(fd)
                raise
            try:
                same = os.path.samestat(st, os.stat(where, follow_symlinks=False))
            except FileNotFoundError:
                same = False
            if same:
                self.held.append((where, fd))
                os.ftruncate(fd, 0)
                os.pwrite(fd, str(os.getpid()).encode(), 0)
                return
            os.close(fd)               # removed by its holder as it released it: lock the new one
        raise OutputsHeld(f"{name} {path!r}: its lock {where!r} keeps being replaced")

    def release(self) -> None:
        """Removes and unlocks every lock held (removed first: a waiting run then locks a fresh file)."""
        with signals_held():      # all of them, or a signal half-way leaves the others' files
            while self.held:
                where, fd = self.held.pop()
                with contextlib.suppress(OSError):
                    os.remove(where)
                os.close(fd)


def _holder(fd: int, wait: float = 1.0) -> str:
    """The process id a lock file holds ("" when it says none). A holder writes its id just after it takes
    the lock: a file still empty is read again for up to ``wait`` seconds, so the refusal can name it."""
    deadline = time.monotonic() + wait
    while True:
        with contextlib.suppress(OSError, ValueError):
            text = os.pread(fd, 32, 0).decode().strip()
            if text.isdigit():
                return text
        if time.monotonic() >= deadline:
            return ""
        time.sleep(0.02)
