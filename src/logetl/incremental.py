"""Incremental runs (``--incremental``): each run reads only the complete lines that are new since the last
one, and adds its records to the outputs as new part files.

State. Every output (and the trap) holds ``_INCREMENTAL``, a JSON record of the run that made it: the flow
(its definition's hash and log format), the run number, the trap directory the run wrote (None without one),
per input file its identity (path, device and inode, and a SHA-256 fingerprint of its first ``fp_len``
uncompressed bytes) and ``offset``, the uncompressed bytes consumed through its last complete line; the
output's part files and the records they hold; and ``previous``, the same record of the run before
(without its own ``previous``), and ``totals``, the line counters of every run the output holds (lines
read, malformed lines, the records each filter left out; ``run_totals``). The record is written into the output's staging directory with the parts,
so it is published with them in one step: an output's state and its parts always agree. A run with nothing
new that decompressed a compressed file to its end for nothing adds it to ``read_compressed`` (the run, its
inputs and the parts stay), so that later runs do not decompress it again (``record_read``).

Matching. A file of this run continues a file of the state when the SHA-256 of its first ``fp_len``
(uncompressed) bytes equals the state's fingerprint (and, uncompressed, it holds at least ``offset``
bytes): it is read from ``offset``. Device and inode are recorded and reported, but the fingerprint
decides, because the rotations logrotate makes keep the bytes and change the inode (a gzipped or copied
rotation), or keep the inode and change the bytes (``copytruncate``). A file that matches nothing is new
and read from its start; a state entry whose file is gone is dropped. In an uncompressed file the bytes
after its last ``\\n`` are left for the next run (a writer may be in the middle of the line); a compressed
file is final, its unterminated last line counts. A compressed file whose uncompressed twin is present too
(``NAME.1.gz`` beside ``NAME.1``: logrotate is compressing it) is left for the next run. A compressed file
with the device, inode, size and modification time of one already read to its end (in the state's inputs
or ``read_compressed``) holds nothing new: it is not opened.

Commit. Each output is rebuilt in a staging sibling from hard links to the parts of the base state, the
run's new parts (named ``part-RRRRRR-NNNNN``: run, then part, so name order is input order), the new
``_INCREMENTAL`` and ``_SUCCESS``, then swapped with the published directory in one
``renameat2(RENAME_EXCHANGE)``: readers see the old output or the new one, never neither. Outputs are
committed one after the other, the trap last, so a kill between them leaves them one run apart; the next
run starts from the lowest (``base``), rolls the outputs that are one run ahead back to their ``previous``
(dropping the parts of their newest run, which logetl made) and rebuilds every output from the base: nothing
is lost or repeated. A trap behind the other outputs is behind only if the newer run wrote it (its state
names the trap); a trap that the runs since did not write resumes from its own state. A part without
records is left out, but an output without records keeps one empty part (``commit_output``).
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
from dataclasses import dataclass, field

from logetl import assembly
from logetl.errors import RunFailed, UsageError
from logetl.io import inputs
from logetl.io.outputs import INCREMENTAL, SUCCESS

FP_LEN = 4096            # bytes fingerprinted: enough to hold a few whole lines with their timestamps
_NEW_PART = re.compile(r"part-(\d{5})(.*)")
SHOWN_FILES = 8          # files named in the notice that says what a run reads
TRAP = "trap"            # the trap's tap (``job.bind``): the one output a run may leave out


class IncrementalError(UsageError):
    """A flow, engine or output that cannot run incrementally; the message says why."""


#: ``run_flow(incremental=PER_RUN)``: each run's operators that need all of the data (``group_by``) see only
#: that run's new lines, and its caller merges the runs' parts (the report's state, ``report.persist``)
PER_RUN = "per-run"


def refuse(flow: assembly.Flow, engine: str, input_path: str, per_run: bool = False) -> None:
    """Refuses, before anything runs, what cannot run incrementally. ``per_run``: the caller merges what
    each run wrote (``PER_RUN``), so operators that need all of the data are allowed."""
    if engine != "local":
        raise IncrementalError("--incremental runs on the local engine")
    for node in flow.nodes:
        if node.traits.needs_all_data and not per_run:   # a flow of nodes that need only their records runs on new lines
            raise IncrementalError(f"--incremental: operator {node.name!r} ({node.kind}) needs all of the data, "
                                   "not only the new lines")
    if input_path == inputs.STDIN:
        raise IncrementalError("--incremental reads files: standard input cannot be read again")


def flow_key(flow: assembly.Flow) -> dict:
    """What an output's state says about the flow that made it: the definition's hash (as the working
    directory's identity has it; the explanation names every operator, field and sink format) and the
    log format(s) read."""
    return {"definition": hashlib.sha256(flow.explain().encode()).hexdigest()[:16],
            "format": ", ".join(n.format.name for n in flow.nodes if isinstance(n, assembly.Parse))}


# --- input files --------------------------------------------------------------------------------------------

def _examine(path: str, packed: bool) -> tuple[os.stat_result, bytes]:
    """The status of a file and its first ``FP_LEN`` uncompressed bytes (fewer when it is shorter), both of
    the one file opened (a rotation renaming another file to ``path`` meanwhile cannot mix them up)."""
    out = bytearray()
    try:
        with inputs.open_input(path) as f:
            st = os.fstat(inputs.underlying_fd(f))
            limit = FP_LEN if packed else min(FP_LEN, st.st_size)
            while len(out) < limit:
                got = f.read(limit - len(out))
                if not got:
                    break
                out += got
    except (OSError, EOFError, ValueError) as exc:
        raise inputs.InputReadError(f"cannot read input {path!r}: {getattr(exc, 'strerror', None) or exc}") \
            from None
    return st, bytes(out)


def _complete_end(path: str, start: int, size: int, ident: dict) -> int:
    """The offset after the last ``\\n`` in ``[start, size)`` of an uncompressed file (the one ``ident``
    describes, ``inputs.open_planned``), else ``start``."""
    block = 1 << 16
    fd = inputs.open_planned(path, ident, lambda p: os.open(p, os.O_RDONLY))
    try:
        pos = size
        while pos > start:
            lo = max(start, pos - block)
            data = os.pread(fd, pos - lo, lo)
            i = data.rfind(b"\n")
            if i >= 0:
                return lo + i + 1
            pos = lo
    finally:
        os.close(fd)
    return start


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Output:
    """One output of the run: its tap, path, the state it holds (None: absent or empty) and the parts of
    the base state it is rebuilt from."""

    tap: str
    path: str
    state: dict | None
    base_parts: list[str] = field(default_factory=list)
    previous: dict = field(default_factory=dict)
    rolled_back: bool = False
    resumed: bool = False      # a trap that runs since its own did not write (``_base``)


@dataclass
class Plan:
    """What one incremental run reads and how it commits."""

    flow: dict
    base_run: int
    run: int
    outputs: dict[str, Output]                   # path -> output (sinks', then the trap)
    trap: str | None                             # the trap's path, recorded in the state (``_base``)
    entries: list[dict]                          # the new state's inputs (offsets of compressed files after reading)
    ranges: dict[str, tuple[int, int | None]]    # input path -> (start, end) to read; end None: to the end
    keys: list[str] = field(default_factory=list)   # the input path (as given) of each entry
    reached: dict[str, int] = field(default_factory=dict)   # filled by the reader
    continues: dict[str, dict | None] = field(default_factory=dict)   # input path -> the state entry it continues
    known: list[dict] = field(default_factory=list)   # the base's ``read_compressed`` records that still hold
    notes: list[str] = field(default_factory=list)
    bytes_to_read: int = 0
    identities: dict[str, dict] = field(default_factory=dict)   # input path -> the file planned (``_identity``)
    twins: dict[str, str] = field(default_factory=dict)   # a copy's input path -> its original's (``_match``)

    @property
    def nothing_new(self) -> bool:
        """Nothing to add since the base run: every output at it, and no new complete line was read (before
        the run: none can be; a compressed file to read to its end counts once it was read)."""
        return self.base_run > 0 and not any(o.rolled_back for o in self.outputs.values()) and all(
            (end is not None and end <= start) or (end is None and self.reached.get(key, start) <= start
                                                   and key in self.reached)
            for key, (start, end) in self.ranges.items())

    @property
    def owned(self) -> set[str]:
        """Outputs this run may replace (they hold this flow's state)."""
        return {p for p, o in self.outputs.items() if o.state is not None}


def _read_state(path: str, tap: str, overwrite: bool, key: dict) -> dict | None:
    """An output's state: None when it is absent or empty (or ``--overwrite`` starts it afresh)."""
    if not os.path.isdir(path) or os.path.islink(path) or not os.listdir(path):
        return None
    where = os.path.join(path, INCREMENTAL)
    if overwrite:
        return None
    if not os.path.isfile(where):
        raise IncrementalError(f"{tap} directory {path!r} is not empty and holds no {INCREMENTAL}: it was not "
                               "written by an incremental run (--overwrite starts it afresh)")
    try:
        with open(where) as f:
            state = json.load(f)
        state["run"], state["inputs"], state["parts"]   # noqa: B018 - the keys every state has
    except (OSError, ValueError, KeyError, TypeError):
        raise IncrementalError(f"{tap} {path!r}: its {INCREMENTAL} cannot be read (--overwrite starts it "
                               "afresh)") from None
    if state.get("flow") != key:
        raise IncrementalError(f"{tap} {path!r} holds the incremental state of another flow (definition "
                               f"{(state.get('flow') or {}).get('definition')}, this flow's is "
                               f"{key['definition']}): choose another directory, or --overwrite to start afresh")
    return state


def _same(a: dict, b: dict) -> bool:
    return a.get("run") == b.get("run") and a.get("inputs") == b.get("inputs")


def _wrote(state: dict, trap: str) -> bool:
    """Whether the run of ``state`` wrote the trap directory ``trap`` (a state that does not say, made
    before the trap was recorded, is taken to have written it)."""
    return state.get("trap", trap) == trap


def _runs(first: int, last: int) -> str:
    return f"run {first}" if first == last else f"runs {first} to {last}"


def _kept(state: dict) -> dict:
    """What the next run's state keeps of ``state`` as its ``previous``."""
    return {k: state[k] for k in ("run", "trap", "inputs", "parts", "records", "totals") if k in state}


def _base(outputs: dict[str, Output]) -> tuple[dict, list[str]]:
    """The base state B and notes; sets each output's base parts. B is the lowest run among the sinks'
    outputs (an absent output is run 0, empty), or the one before when that run wrote the trap and was
    stopped before committing it (the trap is a run behind). Outputs one run ahead of B are rolled back to
    their ``previous``. A trap that the runs after its own did not write (run without ``--trap``, or with
    another directory) is not behind: it resumes from its own state, and the note says which runs' malformed
    lines it lacks. Any other disagreement is refused, naming the outputs."""
    empty = {"run": 0, "inputs": [], "parts": [], "records": 0}
    runs = {p: (o.state["run"] if o.state else 0) for p, o in outputs.items()}
    low = min(r for p, r in runs.items() if outputs[p].tap != TRAP)
    # the state of run ``low`` as the sinks' outputs hold it (or, below, as their ``previous`` does)
    last = next((o.state for p, o in outputs.items() if o.tap != TRAP and runs[p] == low), None) or {}
    notes = []
    counted = dict(outputs)
    trap = next((p for p, o in outputs.items() if o.tap == TRAP), None)
    if trap is not None and runs[trap] < low:
        if _wrote(last, trap):
            # run ``low`` wrote the trap, which does not hold it: that run was stopped between committing
            # the other outputs and the trap, and is made again from the run before
            low -= 1
            last = last.get("previous") or {}
        if runs[trap] < low and not _wrote(last, trap):
            o = counted.pop(trap)
            o.previous = _kept(o.state) if o.state else dict(empty)
            o.resumed = True
            lacks = _runs(runs[trap] + 1, low)
            notes.append(f"{o.tap} was last written by run {runs[trap]}: the malformed lines of {lacks}, which "
                         "did not write it, are missing from it; it resumes with the lines read from now on"
                         if runs[trap] else
                         f"{o.tap} is new: the malformed lines of {lacks}, which did not write it, are missing "
                         "from it; it starts with the lines read from now on")
    base = {"run": low, "inputs": last.get("inputs", [])}
    at_base = [o.state for p, o in counted.items() if runs[p] == low and o.state]
    # compressed files that a run with nothing new read to their end (``record_read``): each output at the
    # base may hold them (a run killed while recording them leaves some outputs without)
    seen = {}
    for state in at_base:
        for record in state.get("read_compressed", []):
            seen.setdefault(json.dumps(record, sort_keys=True), record)
    base["read_compressed"] = list(seen.values())
    for p, o in counted.items():
        state = o.state or empty
        if runs[p] == low:
            if not _same(state, base):
                raise IncrementalError(f"{o.tap} {p!r} holds another state of run {low} than the other outputs: "
                                       "they were not written by the same runs (--overwrite starts them afresh)")
            o.previous = _kept(state) if o.state else dict(empty)
        elif runs[p] == low + 1 and _same(state.get("previous") or {}, base):
            o.previous = _kept(state["previous"])
            o.rolled_back = True
            notes.append(f"{o.tap} is one run ahead (run {runs[p]}; an earlier run was stopped while "
                         f"committing): its run {runs[p]} is made again")
        else:
            behind = [f"{x.tap} (run {runs[q]})" for q, x in outputs.items()]
            raise IncrementalError(f"the outputs are more than one run apart or do not follow each other: "
                                   f"{', '.join(behind)}; --overwrite starts them afresh")
    for p, o in outputs.items():
        # an output that holds no records holds at most one empty part, which this run's parts replace
        # (so it is not needed: the run ahead of a rollback may have dropped it already)
        o.base_parts = list(o.previous.get("parts", [])) if o.previous.get("records") != 0 else []
        for rel in o.base_parts:
            if not os.path.isfile(os.path.join(p, rel)):
                raise IncrementalError(f"{o.tap} {p!r} lacks {rel!r}, which its {INCREMENTAL} names: it was "
                                       "changed by hand (--overwrite starts it afresh)")
    return base, notes


def _known(st: os.stat_result, unused: list[dict], records: list[dict]) -> tuple | None:
    """A compressed file that was read to its end and is unchanged since (same device, inode, size and
    modification time): (the state entry it continues, or None; its own entry; the ``read_compressed``
    record that knows it, or None when the state's inputs do), else None."""
    ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    for e in unused:
        if e.get("compressed") and (e.get("dev"), e.get("ino"), e.get("size"), e.get("mtime_ns")) == ident:
            return e, e, None
    for r in records:
        f = r["file"]
        if (f["dev"], f["ino"], f["size"], f["mtime_ns"]) == ident and (
                r["continues"] is None or r["continues"] in unused):
            return r["continues"], f, r
    return None


@dataclass
class _Seen:
    """An input file as the plan saw it: its status and first bytes, of one opening (``_examine``)."""

    given: str
    path: str
    st: os.stat_result
    packed: bool
    head: bytes


def _fits(f: _Seen, e: dict) -> bool:
    """Whether ``f`` can continue the state entry ``e``: its first bytes are ``e``'s, and (uncompressed) it
    holds the bytes read of it, unless ``e`` is a copy whose bytes were read in its original."""
    return (len(f.head) >= e["fp_len"] and _sha(f.head[: e["fp_len"]]) == e["fp"] and e["offset"] > 0
            and (f.packed or bool(e.get("copy_of")) or f.st.st_size >= e["offset"]))


def _copy_of(head: bytes, original: bytes) -> bool:
    """Whether a file beginning with ``head`` is a copy of one beginning with ``original`` (whole, or being
    made): one begins as the other does, over at least one whole line."""
    n = min(len(head), len(original))
    return n > 0 and head[:n] == original[:n] and b"\n" in head[:n]


def _match(seen: list[_Seen], unused: list[dict]) -> tuple[dict[str, dict | None], dict[str, str]]:
    """Which state entry each file continues (given -> entry or None: new), and the copies (given -> the
    given path of their original). Entries taken are removed from ``unused``.

    First, a file at its recorded path that is the same file (device and inode) keeps its entry, whatever
    else shares its first bytes. Then a file that begins as one of those does is its copy (logrotate's
    ``copy``; ``copytruncate`` before its truncation; either while it copies): the bytes they share are read
    once, in the original, and the copy's entry records the original's offset. The other files continue
    the entry whose first bytes they have, one of their own path first (a rename rotation, a compressed
    rotation, the copy once ``copytruncate`` truncated its original)."""
    match: dict[str, dict | None] = {}
    originals: list[_Seen] = []
    for f in seen:
        e = next((e for e in unused if not e.get("copy_of") and e["path"] == f.path
                  and (e.get("dev"), e.get("ino")) == (f.st.st_dev, f.st.st_ino) and _fits(f, e)), None)
        if e is not None:
            unused.remove(e)
            match[f.given] = e
            originals.append(f)
    twins: dict[str, str] = {}
    for f in seen:
        original = next((o for o in originals if o is not f and _copy_of(f.head, o.head)), None)
        if f.given in match or original is None:
            continue
        twins[f.given] = original.given
        for e in [e for e in unused if e.get("copy_of") and e["path"] == f.path]:
            unused.remove(e)           # its entry as a copy in the run before: this run's replaces it
    for f in seen:
        if f.given in match or f.given in twins:
            continue
        found = None
        for e in unused:
            if _fits(f, e) and (found is None or e["path"] == f.path):
                found = e
        if found is not None:
            unused.remove(found)
        match[f.given] = found
    return match, twins


def _what(path: str, st: os.stat_result, match: dict | None, packed: bool, new: str) -> str:
    """What the notice says of a file the run reads: how it continues the state entry ``match``."""
    if match is None:
        return new
    inode = (match.get("dev"), match.get("ino")) != (st.st_dev, st.st_ino)
    if match["path"] != path:
        return f"was {os.path.basename(match['path'])}" + (
            ", now compressed" if packed and not match.get("compressed") else "") + (", inode changed" if inode else "")
    return "inode changed" if inode else ""


def plan(flow: assembly.Flow, files: list[str], outputs: list[tuple[str, str]], overwrite: bool) -> Plan:
    """The plan of an incremental run: the base state, which bytes of which file to read, and the
    outputs to rebuild. ``outputs``: (tap, path) of every output, the trap last."""
    key = flow_key(flow)
    outs = {os.path.abspath(path): Output(tap, os.path.abspath(path),
                                          _read_state(os.path.abspath(path), tap, overwrite, key))
            for tap, path in outputs}
    base, notes = _base(outs)
    present = {os.path.abspath(f) for f in files}
    unused = list(base["inputs"])
    said: list[str] = []
    result = Plan(flow=key, base_run=base["run"], run=base["run"] + 1, outputs=outs, entries=[], ranges={},
                  trap=next((p for p, o in outs.items() if o.tap == TRAP), None), notes=notes)
    known: dict[str, tuple] = {}
    seen: list[_Seen] = []
    for given in files:
        path = os.path.abspath(given)
        packed = inputs.compressed(path)
        if packed and path.rsplit(".", 1)[0] in present:
            said.append(f"{os.path.basename(path)} left for the next run (its uncompressed twin is still there)")
            continue
        if packed:
            st = os.stat(path)
            found = _known(st, unused, base["read_compressed"])
            if found is not None:
                # read to its end before and unchanged since (device, inode, size, modification time):
                # nothing in it is new, and it is not decompressed again, not even its first bytes
                known[given] = found
                if found[0] is not None:
                    unused.remove(found[0])
                continue
        st, head = _examine(path, packed)
        seen.append(_Seen(given, path, st, packed, head))
    match, twins = _match(seen, unused)
    result.twins = twins
    by_given = {f.given: f for f in seen}
    for given in files:
        if given in known:
            entry_of, entry, record = known[given]
            start = entry_of["offset"] if entry_of is not None else 0
            if record is not None:
                result.known.append(record)
            _add(result, given, dict(entry, path=os.path.abspath(given), offset=start), (start, start), entry_of)
            continue
        f = by_given.get(given)
        if f is None:
            continue
        path, st, packed, e = f.path, f.st, f.packed, match.get(given)
        entry = {"path": path, "dev": st.st_dev, "ino": st.st_ino, "fp": _sha(f.head), "fp_len": len(f.head),
                 "offset": 0, "compressed": packed, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
        if given in twins:
            # read in its original; its offset is the original's (``finish_state``). A compressed copy
            # records no size: once its original is gone, what it holds past that offset is read
            entry.update(copy_of=os.path.abspath(twins[given]), **({"size": None} if packed else {}))
            _add(result, given, entry, (0, 0), None)
            notes.append(f"{os.path.basename(path)} is a copy of {os.path.basename(twins[given])} (logrotate's copy "
                         f"or copytruncate): the lines they share are read once, from "
                         f"{os.path.basename(twins[given])}")
            continue
        start = e["offset"] if e is not None else 0
        if packed:
            unchanged = e is not None and e.get("compressed") and e.get("size") == st.st_size \
                and e.get("mtime_ns") == st.st_mtime_ns
            # a compressed file read to its end once is final: not decompressed again while it is unchanged
            end = start if unchanged else None
            entry["offset"] = start
            if not unchanged:
                result.bytes_to_read += st.st_size
        else:
            end = _complete_end(path, start, st.st_size, _identity(entry))
            entry["offset"] = end
            if e is not None and e.get("copy_of") and st.st_size < start:
                entry["copy_of"] = e["copy_of"]      # a copy shorter than what its original had read
            result.bytes_to_read += end - start
        _add(result, given, entry, (start, end), e)
        what = _what(path, st, e, packed, "new file" if base["inputs"] else "")
        if end is None or end > start:
            said.append(f"{os.path.basename(path)} from byte {start:,}"
                        + (f" to {end:,}" if end is not None else " to its end") + (f" ({what})" if what else ""))
    gone = [os.path.basename(e["path"]) + ("" if e["path"] not in present else " (its first bytes changed)")
            for e in unused if e["offset"] > 0]
    if gone:
        notes.append(f"files of run {base['run']} that no input continues (dropped from the state): "
                     + ", ".join(gone[:SHOWN_FILES])
                     + (f" and {len(gone) - SHOWN_FILES} more" if len(gone) > SHOWN_FILES else ""))
    _copies_at_original(result)
    if not result.nothing_new:
        reads = said[:SHOWN_FILES] + ([f"and {len(said) - SHOWN_FILES} more"] if len(said) > SHOWN_FILES else [])
        after = f"after run {base['run']}" if base["run"] else "from the start"
        result.notes.insert(0, f"incremental run {result.run} ({after}): reading "
                               + ("; ".join(reads) if reads else "no new complete lines"))
    return result


def _add(plan: Plan, given: str, entry: dict, span: tuple[int, int | None], continues: dict | None) -> None:
    plan.entries.append(entry)
    plan.keys.append(given)
    plan.ranges[given] = span
    plan.continues[given] = continues
    plan.identities[given] = _identity(entry)


def _identity(entry: dict) -> dict:
    """Which file the plan saw (``inputs.open_planned``): device and inode, and its first bytes, or,
    compressed, its size and modification time."""
    keys = ("dev", "ino", "size", "mtime_ns") if entry["compressed"] else ("dev", "ino", "fp", "fp_len")
    return {k: entry[k] for k in keys}


def _copies_at_original(plan: Plan) -> None:
    """A copy's entry records its original's offset (planned, or reached once read)."""
    at = {key: e for key, e in zip(plan.keys, plan.entries)}
    for copy, original in plan.twins.items():
        at[copy]["offset"] = at[original]["offset"]


# --- commit ---------------------------------------------------------------------------------------------

_AT_FDCWD = -100
_NO_TOTALS = {"lines_read": 0, "malformed": 0, "apart": 0, "left_out": {}}   # before the first run
_RENAME_EXCHANGE = 2


def exchange(a: str, b: str) -> None:
    """Swaps two directories in one step (Linux ``renameat2(RENAME_EXCHANGE)``, through libc)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fn = getattr(libc, "renameat2", None)
    if fn is None:
        raise RunFailed("--incremental needs renameat2(RENAME_EXCHANGE) (Linux 3.15 and glibc 2.28 or later) "
                        "to replace an output atomically, and this C library has none")
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) != 0:
        err = ctypes.get_errno()
        if err in (22, 38, 95):   # EINVAL, ENOSYS, EOPNOTSUPP: the file system cannot exchange
            raise RunFailed(f"cannot replace {b!r} atomically: its file system does not support "
                            f"renameat2(RENAME_EXCHANGE) ({os.strerror(err)}), which --incremental needs")
        raise OSError(err, os.strerror(err), b)


def _new_parts(staging: str, run: int) -> list[str]:
    """Renames the parts the run wrote in ``staging`` to ``part-RRRRRR-NNNNN…`` and returns them (relative
    paths, name order)."""
    found = []
    for directory, dirs, names in os.walk(staging):
        dirs.sort()
        for name in sorted(names):
            m = _NEW_PART.fullmatch(name)
            if m:
                found.append((directory, name, m))
    out = []
    for directory, name, m in found:
        where = os.path.join(directory, name)
        target = os.path.join(directory, f"part-{run:06d}-{m.group(1)}{m.group(2)}")
        os.rename(where, target)
        out.append(os.path.relpath(target, staging))
    return out


def _publish(out: Output, staging: str, links: list[str], state: dict) -> None:
    """Completes ``staging`` with hard links to ``links`` (parts of the published output), ``state`` and
    ``_SUCCESS``, then replaces the output with it in one exchange."""
    for rel in links:
        target = os.path.join(staging, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.link(os.path.join(out.path, rel), target)
    # written in place: the staging directory is nobody's output until the exchange below. Not fsynced: the
    # state is published by the same exchange as the parts it describes, which are not either (what is
    # guaranteed is a killed process, not a power cut), and an fsync costs ~4 ms of every run on a busy disk
    with open(os.path.join(staging, INCREMENTAL), "w") as f:
        json.dump(state, f, indent=1)
    if not os.path.exists(os.path.join(staging, SUCCESS)):
        open(os.path.join(staging, SUCCESS), "wb").close()
    if os.path.isdir(out.path):
        exchange(staging, out.path)
        import shutil

        shutil.rmtree(staging)     # now the earlier output: its parts live on as links in the new one
    else:
        os.rename(staging, out.path)


def run_totals(run) -> dict | None:
    """A run's line counters (``FlowRun``): lines read, malformed lines, lines counted apart (header lines,
    non-HTTP lines), records each filter left out; None when they are not known."""
    if run.lines_read is None:
        return None
    return {"lines_read": run.lines_read, "malformed": sum(run.malformed.values()),
            "apart": run.header_lines + run.non_http_lines, "left_out": run.left_out()}


def add_totals(before: dict | None, run: dict | None) -> dict | None:
    """The counters of the runs an output holds: ``before`` (its base state's) plus this run's."""
    if before is None or run is None:
        return None
    left = dict(before["left_out"])
    for name, n in run["left_out"].items():
        left[name] = left.get(name, 0) + n
    return {"lines_read": before["lines_read"] + run["lines_read"],
            "malformed": before["malformed"] + run["malformed"],
            "apart": before.get("apart", 0) + run.get("apart", 0), "left_out": dict(sorted(left.items()))}


def commit_output(out: Output, staging: str, plan: Plan, records: int, totals: dict | None = None) -> None:
    """Publishes one output: its staging directory (already holding the run's parts and ``_SUCCESS``) gets
    hard links to the base parts and the new state, then replaces the output in one exchange. ``records``:
    how many the run wrote to it; ``totals``: the run's line counters (``run_totals``), added to those of
    the runs before in the state's ``totals`` (committed with the parts, so counted exactly once).

    A part without records adds nothing to the concatenation, so it is left out (a Parquet part without rows
    is not 0 bytes: it holds the schema, hence the count). An output that holds no records keeps one empty
    part, as an output of a run that is not incremental does, so that ``cat out/part-*`` and readers given
    the directory (Parquet: its schema) find one; the first run that adds records replaces it."""
    new = _new_parts(staging, plan.run)
    keep = [rel for rel in new if records and os.path.getsize(os.path.join(staging, rel))]
    if not out.base_parts and not keep:
        keep = new[:1]
    for rel in new:
        if rel not in keep:
            os.remove(os.path.join(staging, rel))
    for directory, dirs, names in os.walk(staging, topdown=False):   # partitions this run left empty
        if directory != staging and not names and not dirs:
            os.rmdir(directory)
    held = out.previous.get("records")      # None: counted by no run before (a state of an earlier logetl)
    state = {"flow": plan.flow, "run": plan.run, "trap": plan.trap, "inputs": plan.entries,
             "parts": sorted(out.base_parts + keep), "records": None if held is None else held + records,
             "totals": add_totals(out.previous.get("totals", _NO_TOTALS if not out.previous.get("run") else None),
                                  totals),
             "previous": {"flow": plan.flow, **out.previous}}
    _publish(out, staging, out.base_parts, state)


def read_to_end(plan: Plan) -> list[dict]:
    """The compressed files this run (with nothing new) decompressed to their end: records for the outputs'
    ``read_compressed``, so that later runs know them without decompressing them again (``_known``). A
    run with new lines records them in its state's inputs instead."""
    return [{"file": e, "continues": plan.continues.get(key)} for key, e in zip(plan.keys, plan.entries)
            if e["compressed"] and plan.ranges[key][1] is None]


def record_read(out: Output, staging: str, plan: Plan, fresh: list[dict]) -> None:
    """Publishes one output of a run with nothing new unchanged but for its state, which now lists the
    compressed files ``fresh`` (``read_to_end``) besides those already known. The run and the inputs stay
    those of the base run, so the outputs agree whether or not a kill leaves some of them unrecorded."""
    import shutil

    shutil.rmtree(staging)         # the run's parts: empty, nothing was read
    os.mkdir(staging)
    state = {**out.state, "read_compressed": plan.known + fresh}
    _publish(out, staging, list(out.state["parts"]), state)


def finish_state(plan: Plan) -> None:
    """The offsets reached in compressed files (known only once they were read) go into the new state;
    an uncompressed file's offset is the end of its range, fixed when the run was planned."""
    for key, e in zip(plan.keys, plan.entries):
        start, end = plan.ranges[key]
        if e["compressed"]:
            e["offset"] = plan.reached.get(key, start) if end is None else start
        elif end > start:
            e["offset"] = min(end, plan.reached.get(key, end))
    _copies_at_original(plan)


def commit(ctx, plan: Plan, notice) -> None:
    """Commits each output of an incremental run with its state (``commit_output``), or, with nothing new
    to read, changes nothing but the state of what was read to the end; ``notice`` says so in one line."""
    if plan.nothing_new:
        # a compressed file decompressed to its end for nothing: the outputs' state records it, so that
        # the next runs do not decompress it again (their parts, run and inputs stay)
        fresh = read_to_end(plan)
        for out in ctx.state.staged():
            kept = plan.outputs[out.path]
            if fresh and kept.state is not None and not kept.resumed:
                record_read(kept, out.staging, plan, fresh)
            else:
                out.discard()
        names = [os.path.basename(r["file"]["path"]) for r in fresh]
        shown = ", ".join(names[:SHOWN_FILES]) + (
            f" and {len(names) - SHOWN_FILES} more" if len(names) > SHOWN_FILES else "")
        notice(f"nothing new since run {plan.base_run}: the outputs are unchanged"
               + (f" but for their state, which records {shown} as read to the end (not decompressed "
                  "again)" if fresh else ""))
        return
    finish_state(plan)
    trapped = sum(ctx.run.malformed.values())
    totals = run_totals(ctx.run)
    for out in ctx.state.staged():
        kept = plan.outputs[out.path]
        commit_output(kept, out.staging, plan, trapped if kept.tap == TRAP else ctx.run.written.get(kept.tap, 0),
                      totals)
