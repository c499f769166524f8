"""Bounded memory for the local engine's blocking operators: a shared budget, and spilling to disk.

``--memory-limit`` (default 512 MiB) is what the whole process should stay under. A fixed share of it is
kept for the runtime (Python, Polars, the parse kernel's chunks in flight, one batch per streaming
operator); the rest is the **buffer budget** that the blocking operators of a run share, counted with
Polars' ``estimated_size``. An operator whose buffer would take the run past it spills:

- ``ExternalSort`` (Sort): the buffer is sorted (stably) into a *run*, an Arrow IPC file of small record
  batches in the spill directory; at the end the runs are merged batch-wise (below), in several passes
  when there are more runs than the budget can hold a block of at once. Runs are made in input order and
  the merge prefers the earlier run on equal keys, so the result is exactly the stable in-memory sort.
- ``HashPartitions`` (Unique, and aggregation when it exists): records are hash-partitioned on all their
  fields into files; each partition is then deduplicated alone (recursively partitioned again, with
  another seed, if it is still too big). Unique's output order is not part of its contract.
- HashJoin's left side stays in memory by contract; past the budget the run fails with one line naming
  the operator and the limit (``MemoryLimitExceeded``), never an out-of-memory kill.

The batch-wise merge: each run contributes its current block; ``B`` is the smallest of the blocks' last
keys (in sort order). Every row before ``B`` can go out now, and so can rows equal to ``B`` from the runs
up to the first one whose block ends at ``B`` (later rows equal to ``B`` may still follow in that run's next
block, and they must precede equal rows of later runs). The rows that go are concatenated in run order and
sorted stably: equal keys keep run order, then order within the run, which is input order. At least one
block is used up each round, so the merge always progresses; a round costs a few Polars calls whatever
the number of rows it moves.
"""
from __future__ import annotations

import functools
import io
import os
import re
import shutil

from logetl import settings
from logetl.errors import RunFailed, UsageError

MiB = 1 << 20
DEFAULT_LIMIT = settings.MEMORY_LIMIT.default
#: kept for everything but the blocking operators' buffers (measured: runtime, imports, parse chunks in
#: flight, one batch per streaming operator and a stored part being written)
RESERVE = 256 * MiB
#: the least the blocking operators get, which makes the smallest --memory-limit (384M): the runtime's own
#: floor depends on the flow's per-batch work, and with 8 MiB of buffers user-shaped flows peaked at 280-354
#: MiB over 2M lines (bench/memory.py: a GroupBy of nearly unique keys the highest); with 128 MiB, at 384M,
#: every one stayed under the limit (295-366 MiB)
MIN_BUFFERS = 128 * MiB
BLOCK_BYTES = 2 * MiB          # rows per record batch of a run: about this many bytes
SORT_BUFFER_PART = 4           # a sort buffers at most this part of its share before it writes a run
PARTITIONS = 16
#: what reducing a buffer of records (a Polars group_by or unique over it, and the compact copy of the
#: result) takes at its peak, in multiples of the buffer's bytes: its keys' row encoding and hash table,
#: the gathered result and its copy, beside the buffer itself (measured: 60 MB of partial states of a
#: GroupBy of nearly unique paths took the process 250 MB higher while they were combined)
REDUCE_FACTOR = 5


class MemoryLimitExceeded(RunFailed):
    """A blocking operator that cannot spill outgrew the budget."""


def parse_size(text: str | int) -> int:
    """``512M``, ``2G``, ``1.5GB``, ``300MiB``, ``1048576``: bytes (K, M, G are powers of 1024); an
    integer is bytes (``run_flow``'s ``memory_limit``). Either is at least the reserve and a little more."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(?:i?[bB])?\s*", text if isinstance(text, str) else "")
        if not m:
            raise UsageError(f"--memory-limit {text!r} is not a size (examples: 512M, 2G)")
        scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[m.group(2).lower()]
        value = int(float(m.group(1)) * scale)
    if value < RESERVE + MIN_BUFFERS:
        raise UsageError(f"--memory-limit {text!r} is too small: at least {(RESERVE + MIN_BUFFERS) // MiB}M")
    return value


def _pl():
    import polars as pl

    return pl


def frame_bytes(frame) -> int:
    """What a frame really holds: Polars' ``estimated_size`` leaves out the 16-byte view of every string
    (measured: it reports about half of the resident size of string-heavy frames)."""
    pl = _pl()
    views = sum(1 for t in frame.schema.values() if t in (pl.String, pl.Binary))
    return frame.estimated_size() + 16 * frame.height * views


def owned(frame):
    """A copy that holds only the strings its rows use. A unique (or filtered) frame's string views keep
    every buffer they point into alive: Filter's distinct set pinned the addresses of every batch it had
    seen while its frame size stayed a few MB (Filter's peak: 221, 298, 408 MB at 2M, 10M, 50M lines;
    202, 264, 271 MB with this copy).

    A small frame (a batch's partial aggregates, typically) is copied through Polars' own IPC writer and
    reader, so that a run that never holds a big frame does not import pyarrow (a tenth of a second); a big
    one through pyarrow, which copies about twice as fast (measured: 0.037 s against 0.065 s a million
    rows)."""
    pl = _pl()
    if frame.height <= SMALL_ROWS:
        buf = io.BytesIO()
        frame.write_ipc(buf, compression="uncompressed")
        buf.seek(0)
        return pl.read_ipc(buf)
    return pl.from_arrow(frame.to_arrow())


SMALL_ROWS = 65_536


class MemoryBudget:
    """The bytes the blocking operators of one run may hold together, and who holds what."""

    def __init__(self, limit: int = DEFAULT_LIMIT, buffers: int | None = None):
        self.limit = limit
        self.buffers = buffers if buffers is not None else max(MIN_BUFFERS, limit - RESERVE)
        self.held: dict[int, int] = {}
        self.peak = 0

    def hold(self, owner, nbytes: int) -> bool:
        """Records what ``owner`` holds; true when the run is now over its budget."""
        self.held[id(owner)] = nbytes
        total = sum(self.held.values())
        self.peak = max(self.peak, total)
        return total > self.buffers

    def release(self, owner) -> None:
        self.held.pop(id(owner), None)

    def share(self, owner) -> int:
        """What ``owner`` may use when the others keep what they hold."""
        return max(0, self.buffers - sum(v for k, v in self.held.items() if k != id(owner)))


class SpillDir:
    """Numbered spill files of one operator, in the run's working directory (removed with it)."""

    def __init__(self, root: str, name: str):
        self.path = os.path.join(root, name)
        shutil.rmtree(self.path, ignore_errors=True)
        self.n = 0
        self.bytes_written = 0
        self.runs = 0          # sorted runs or partitions written
        self.passes = 0        # merge passes over the spilled data

    def new_file(self, kind: str) -> str:
        os.makedirs(self.path, exist_ok=True)
        self.n += 1
        return os.path.join(self.path, f"{kind}-{self.n:05d}.arrow")

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

    def report(self, run, operator: str) -> None:
        """Removes the files and tells the run what spilling cost (the summary and monitor show it)."""
        self.remove()
        if self.bytes_written:
            run.spilled[operator] = {"bytes": self.bytes_written, "files": self.runs, "passes": self.passes}


# --- reading and writing runs ------------------------------------------------------------------------------

def _write_batches(path: str, frames) -> int:
    """Writes frames to one Arrow IPC file, one record batch per frame (callers pass blocks of about
    BLOCK_BYTES); returns the bytes written. Frames are converted one at a time, so the conversion costs
    one block of memory."""
    import pyarrow as pa

    writer = None
    with open(path, "wb") as f:
        try:
            for frame in frames:
                if frame.height == 0:
                    continue
                table = frame.to_arrow()
                if writer is None:
                    writer = pa.ipc.new_file(f, table.schema)
                writer.write_table(table)
        finally:
            if writer is not None:
                writer.close()
        return f.tell()


def _block_rows(frame) -> int:
    per_row = max(1, frame_bytes(frame) // max(1, frame.height))
    return max(16, BLOCK_BYTES // per_row)


def _blocks(frame, rows: int):
    for start in range(0, frame.height, rows):
        yield frame.slice(start, rows)


class _RunReader:
    """One run, block by block (read with plain reads, not mapped: mapped pages would count as resident)."""

    def __init__(self, path: str):
        import pyarrow as pa

        self.file = pa.OSFile(path, "rb")
        self.reader = pa.ipc.open_file(self.file)
        self.next_batch = 0
        self.block = None

    def fill(self) -> bool:
        """Makes ``block`` hold unread rows; false when the run is used up."""
        pl = _pl()
        while self.block is None or self.block.height == 0:
            if self.next_batch >= self.reader.num_record_batches:
                self.block = None
                self.file.close()
                return False
            batch = self.reader.get_batch(self.next_batch)
            self.next_batch += 1
            self.block = pl.from_arrow(batch)
        return True

    def rest(self):
        """Every unread row, block by block."""
        while self.fill():
            block, self.block = self.block, None
            yield block


# --- comparison in sort order ----------------------------------------------------------------------------

def _compare(a, b, descending) -> int:
    """-1, 0, 1: key tuple ``a`` against ``b`` in sort order (null is the smallest value, as in Spark:
    first ascending, last descending)."""
    for x, y, desc in zip(a, b, descending):
        if x == y:
            continue
        smaller = True if x is None else False if y is None else x < y
        return (1 if smaller else -1) if desc else (-1 if smaller else 1)
    return 0


def _before(by, descending, bound, or_equal: bool):
    """A Polars expression: the row's key is before ``bound`` in sort order (or equal, ``or_equal``)."""
    pl = _pl()
    result = pl.lit(or_equal)
    for col, desc, b in reversed(list(zip(by, descending, bound))):
        c = pl.col(col)
        if b is None:
            lt, eq = (c.is_not_null() if desc else pl.lit(False)), c.is_null()
        else:
            lt = (c.is_not_null() & (c > b)) if desc else (c.is_null() | (c < b))
            eq = c.is_not_null() & (c == b)
        result = lt | (eq & result)
    return result


def stable_sort(frame, by, descending):
    """The engine's sort: stable, null the smallest value (first ascending, last descending)."""
    return frame.sort(list(by), descending=list(descending), nulls_last=list(descending), maintain_order=True)


class ExternalSort:
    """A stable sort of everything ``add``-ed, within a share of the budget (see the module docstring)."""

    def __init__(self, by, descending, budget: MemoryBudget, spill: SpillDir):
        self.by = list(by)
        self.descending = list(descending)
        self.budget, self.spill = budget, spill
        self.parts, self.size = [], 0
        self.runs: list[str] = []

    def _sorted(self, frame):
        return stable_sort(frame, self.by, self.descending)

    def add(self, frame) -> None:
        """Takes a frame that owns its memory (the caller compacts views into bigger buffers)."""
        self.parts.append(frame)
        self.size += frame_bytes(frame)
        # sorting makes a copy of the views beside it, and blocks are converted one at a time: the buffer
        # may take a quarter of the share (measured, 10M-line Join: a 90 MB buffer took the process ~100 MB
        # higher while it was sorted and written; the allocator keeps freed pages a while on top of that)
        if self.budget.hold(self, self.size) or self.size > self.budget.share(self) // SORT_BUFFER_PART:
            self._spill_buffer()

    def _buffer_blocks(self):
        # one stable sort in Polars (multi-threaded), then zero-copy slices: the buffer is at most a quarter
        # of the share, so the sorted copy fits beside it
        frame = self._sorted(_pl().concat(self.parts, rechunk=False))
        self.parts = []
        return _blocks(frame, _block_rows(frame))

    def _spill_buffer(self) -> None:
        if not self.parts:
            return
        path = self.spill.new_file("run")
        self.spill.bytes_written += _write_batches(path, self._buffer_blocks())
        self.size = 0
        self.budget.hold(self, 0)
        self.spill.runs += 1
        self.runs.append(path)

    def result(self):
        """The sorted records, as frames, in order."""
        if not self.runs:
            if self.parts:
                yield from self._buffer_blocks()
            self.size = 0
            self.budget.release(self)
            return
        self._spill_buffer()
        self.budget.release(self)
        # a merge holds one block of every run it reads, its round of taken rows sorted, and that round's
        # text in slices: measured about 2.4 MB per run with 2 MiB blocks (75 MB over the step's base with
        # 31 runs), so 2 blocks per run keeps a pass within the share; one pass where the runs of a 50M-line
        # Join need it (a second pass writes and reads every spilled byte once more)
        fan_in = max(2, self.budget.share(self) // (2 * BLOCK_BYTES))
        runs = self.runs
        while len(runs) > fan_in:              # merge passes until one pass can take every run
            self.spill.passes += 1
            merged = []
            for i in range(0, len(runs), fan_in):
                group = runs[i:i + fan_in]
                if len(group) == 1:
                    merged.extend(group)
                    continue
                path = self.spill.new_file("run")
                blocks = (b for frame in self._merge(group) for b in _blocks(frame, _block_rows(frame)))
                self.spill.bytes_written += _write_batches(path, blocks)
                for p in group:
                    os.remove(p)
                merged.append(path)
            runs = merged
        self.spill.passes += 1
        yield from self._merge(runs)

    def _merge(self, paths):
        pl = _pl()
        readers = [_RunReader(p) for p in paths]
        cmp = functools.cmp_to_key(lambda a, b: _compare(a, b, self.descending))
        while True:
            live = [r for r in readers if r.fill()]
            if not live:
                return
            if len(live) == 1:
                yield from live[0].rest()
                return
            lasts = [r.block.select(self.by).row(-1) for r in live]
            bound = min(lasts, key=cmp)
            first_at_bound = next(i for i, last in enumerate(lasts) if _compare(last, bound, self.descending) == 0)
            taken = []
            for i, r in enumerate(live):
                # a block none of whose rows are taken, or all of them, is told by its first and last key:
                # with few distinct keys (Join's 40 scores) most rounds take one block of one run, and
                # counting every run's block would make the merge's work grow with the number of runs
                first = _compare(r.block.select(self.by).row(0), bound, self.descending)
                if first > 0 or (first == 0 and i > first_at_bound):
                    continue
                if i <= first_at_bound and _compare(lasts[i], bound, self.descending) <= 0:
                    n = r.block.height
                else:
                    mask = _before(self.by, self.descending, bound, or_equal=i <= first_at_bound)
                    n = r.block.select(mask.cast(pl.UInt32).sum()).item()
                # the rows before the bound are a prefix of the sorted block
                if n:
                    taken.append(r.block.slice(0, n))
                    r.block = r.block.slice(n)
            yield self._sorted(pl.concat(taken, rechunk=False)) if len(taken) > 1 else taken[0]


class HashPartitions:
    """Distinct records within a share of the budget: in memory while they fit, else hash-partitioned
    files deduplicated one at a time (a partition still too big is split once more, into as many
    partitions as it needs)."""

    def __init__(self, budget: MemoryBudget, spill: SpillDir, seed: int = 0, partitions: int = PARTITIONS,
                 hash_on: list[str] | None = None, reduce=None):
        """``reduce`` combines records that belong together (default: drops duplicates; a group-by combines
        partial aggregates), and ``hash_on`` names the fields that decide where a record belongs (default:
        all of them)."""
        self.budget, self.spill, self.seed = budget, spill, seed
        self.hash_on, self.reduce = hash_on, reduce or (lambda frame: frame.unique(maintain_order=True))
        self.n_partitions = partitions
        self.parts, self.size = [], 0
        self.compacted = 0                  # the size of the last compaction's result
        self.working = 0                    # what reducing its biggest batch took (see add)
        self.files: list | None = None      # per partition: [path, writer, file] once spilling

    def add(self, frame, reduced: bool = False) -> None:
        """Takes any frame (it may be views into a bigger batch): what is kept is a compact copy of its
        reduced records (``reduced``: the caller reduced it already), so the batch's buffers go with the
        batch."""
        pl = _pl()
        if not reduced:
            frame = self.reduce(frame)
        if self.files is not None:
            self._write(frame)
            return
        frame = owned(frame)
        self.parts.append(frame)
        nbytes = frame_bytes(frame)
        self.size += nbytes
        # what the buffer really costs is its bytes and what reducing it takes beside them (below), and
        # what reducing each batch takes (the allocator keeps a batch's freed memory resident a while, so
        # the groupings of one flow take theirs side by side): that is what it holds of the budget, and it
        # spills before reducing it would go past its share
        self.working = max(self.working, nbytes * REDUCE_FACTOR)
        if self.budget.hold(self, self._holds()) or self._holds() > self.budget.share(self):
            self._start_spilling()
            return
        # compact (duplicates across batches) once the parts added since the last compaction are as big as
        # its result: the work stays linear in the input whether or not the records reduce
        if self.size > max(4 * BLOCK_BYTES, 2 * self.compacted) and len(self.parts) > 8:
            merged = owned(self.reduce(pl.concat(self.parts, rechunk=False)))
            self.parts, self.size = [merged], frame_bytes(merged)
            self.compacted = self.size
            self.budget.hold(self, self._holds())

    def _holds(self) -> int:
        return self.size * REDUCE_FACTOR + self.working

    def _start_spilling(self) -> None:
        self.files = [[self.spill.new_file("part"), None, None] for _ in range(self.n_partitions)]
        self.spill.runs += self.n_partitions
        self.spill.passes = max(self.spill.passes, 1)
        parts, self.parts, self.size = self.parts, [], 0
        self.budget.hold(self, self.working)
        for frame in parts:
            self._write(frame)

    def _write(self, frame) -> None:
        import pyarrow as pa

        pl = _pl()
        keyed = frame.select(self.hash_on) if self.hash_on else frame
        which = (keyed.hash_rows(seed=self.seed) % self.n_partitions).cast(pl.UInt32)
        for (key,), group in frame.with_columns(_p=which).group_by("_p", maintain_order=True):
            slot = self.files[key]
            table = group.drop("_p").to_arrow()
            if slot[1] is None:
                slot[2] = open(slot[0], "wb")
                slot[1] = pa.ipc.new_file(slot[2], table.schema)
            slot[1].write_table(table)

    def _closed_files(self):
        for path, writer, f in self.files:
            if writer is None:
                continue
            writer.close()
            self.spill.bytes_written += f.tell()
            f.close()
            yield path

    def result(self):
        pl = _pl()
        if self.files is None:
            if self.parts:
                yield self.reduce(pl.concat(self.parts, rechunk=False))
            self.parts = []
            self.budget.release(self)
            return
        self.budget.release(self)
        for path in list(self._closed_files()):
            yield from self._partition(path, split=True)
            os.remove(path)

    def _partition(self, path: str, split: bool):
        """The distinct records of one partition file (split once more if it does not fit)."""
        import pyarrow as pa

        pl = _pl()
        size, share = os.path.getsize(path), max(1, self.budget.share(self))
        if not split or size * REDUCE_FACTOR <= share:
            with pa.OSFile(path, "rb") as f:
                table = pa.ipc.open_file(f).read_all()
            yield self.reduce(pl.from_arrow(table))
            return
        inner = HashPartitions(self.budget, self.spill, self.seed + 1,
                               min(256, -(-size * REDUCE_FACTOR // share) + 1),
                               self.hash_on, self.reduce)
        inner._start_spilling()
        for block in _RunReader(path).rest():
            inner._write(block)
        self.spill.passes = 2
        for p in list(inner._closed_files()):
            yield from inner._partition(p, split=False)
            os.remove(p)
