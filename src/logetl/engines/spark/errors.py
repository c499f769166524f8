"""What the Spark engine makes of a Java error: Spark's and Hadoop's messages (read by regular
expressions) as one line that names the input, the output or the memory setting at fault."""
from __future__ import annotations

import errno
import os
import re

from logetl.errors import RunFailed
from logetl.io.fs import local_path
from logetl.io.inputs import InputReadError


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


#: the same failure in logetl's own line reader (``java/logetl/spark/Lines.java``): the file, then the reason
_LINES_FAILED = re.compile(r"RuntimeException: cannot read (file:[^\n]+?|/[^\n]+?): ([^\n]*)$", re.M)


_CAUSE = re.compile(r"^Caused by: ([\w.$]+)(?:: ([^\n]*))?$", re.M)


#: the marker of a row whose partition value no directory name can hold (``_sink``)
PARTITION_REFUSED = "logetl: a partition value no directory name can hold"


#: what ``io.outputs.partition_name`` escapes as %XX, as a Java regex class
_ESCAPED_CLASS = r"""[\x01-\x1f"#%'*/:=?\\\x7f{\[\]^]"""


def _read_failure(text: str) -> InputReadError | None:
    """A job that failed reading an input (a truncated or corrupt compressed file), its failure's ``text``,
    as the local engine says it, in one line: ``cannot read input 'FILE': REASON`` (Spark's root cause),
    else None."""
    found = _READ_FAILED.search(text) or _LINES_FAILED.search(text)
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
