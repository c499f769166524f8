"""A flow's working directory: what makes a failed flow restartable after its last checkpoint.

It holds the flow's identity (``flow.json``), the stored outputs of steps (each a directory of parts with a
``_COMPLETE`` marker written last), the trapped lines, and one record per completed step
(``steps/NAME.json``, written atomically once everything the step stores is complete). A later run of the
*same flow* (same program and definition, same inputs by path, size and modification time, same outputs
and options) finds those records and skips the steps before the last completed checkpoint; any other run
starts from scratch and says why. Nothing incomplete is ever used: a record or marker is written only after
the data it vouches for, with a rename, so a SIGKILL at any moment leaves either a usable state or none.
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field

from logetl.io.fs import LOCAL

FLOW_FILE = "flow.json"
COMPLETE = "_COMPLETE"


def file_fingerprint(path: str, fs=LOCAL) -> dict:
    size, mtime = fs.stat(path)
    return {"path": fs.abspath(path), "size": size, "mtime_ns": mtime}


def flow_identity(program: str, definition: str, engine: str, inputs: list[str], outputs: dict[str, str],
                  options: dict, fs=LOCAL) -> dict:
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
        if old_in[path] != new_in[path]:
            return f"input {path!r} changed (size or modification time)"
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


class WorkDir:
    """The working directory of one flow on the local file system."""

    def __init__(self, path: str, identity: dict, checkpoint_dirs: dict[str, str] | None = None, fs=LOCAL):
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

    def _step_record(self, step: str) -> str:
        return self.fs.join(self.path, "steps", f"{step}.json")

    def is_complete(self, name: str) -> bool:
        return self.fs.exists(self.fs.join(self.store(name), COMPLETE))

    def mark_complete(self, name: str) -> None:
        self.fs.touch(self.fs.join(self.store(name), COMPLETE))

    # --- life cycle ----------------------------------------------------------------------------------------

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

    def claim(self, run_id: str, fresh: bool) -> None:
        """Takes the directory for this run; ``fresh`` discards whatever an earlier run left."""
        fs = self.fs
        if fresh:
            self.clear()
        fs.makedirs(fs.join(self.path, "steps"))
        fs.makedirs(self.trap_dir)
        fs.remove(fs.join(self.path, "committing"))
        fs.write_text_atomic(fs.join(self.path, FLOW_FILE), json.dumps(
            {"id": self.id, "run_id": run_id, "identity": self.identity, "opened_at": time.time()}, indent=2))

    def step_completed(self, step: str, record: dict) -> None:
        self.fs.write_text_atomic(self._step_record(step), json.dumps(record, indent=2))

    def forget_step(self, step: str) -> None:
        self.fs.remove(self._step_record(step))

    def clear(self) -> None:
        self.fs.rmtree(self.path)
        for d in self.checkpoint_dirs.values():
            if self.fs.isdir(d):
                _clear_dir(d, self.fs)

    def committing(self) -> None:
        """Outputs are about to be published: a rerun of this flow may replace those already published."""
        self.fs.write_text_atomic(self.fs.join(self.path, "committing"), self.id)

    def was_committing(self) -> bool:
        state = self._read(self.fs.join(self.path, FLOW_FILE))
        return bool(state and state.get("id") == self.id and self.fs.exists(self.fs.join(self.path, "committing")))

    def finish(self) -> None:
        """After success: anonymous stored outputs go; bound checkpoints stay where the user put them."""
        self.fs.rmtree(self.path)

    def _read(self, path: str) -> dict | None:
        text = self.fs.read_text(path)
        if text is None:
            return None
        try:
            return json.loads(text)
        except ValueError:
            return None


def is_checkpoint_dir(path: str, fs=LOCAL) -> bool:
    """A directory logetl may clear: absent, empty, or holding only a checkpoint's parts and marker."""
    if not fs.isdir(path):
        return not fs.exists(path)
    return all(n == COMPLETE or n.startswith("part-") or n.startswith(".") or n == "_SUCCESS"
               for n in fs.listdir(path))


def _clear_dir(path: str, fs) -> None:
    """Empties a directory the user bound a checkpoint to of the checkpoint's files, keeping the directory."""
    for name in fs.listdir(path):
        if name == COMPLETE or name.startswith("part-") or name == "_SUCCESS" or name.endswith(".crc"):
            fs.rmtree(fs.join(path, name))
