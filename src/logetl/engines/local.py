"""The embedded engine: runs a flow in this process, with no JVM and no server.

Why this shape: the parse dominates the cost, so it runs in a native kernel (``_scan.c``) on two threads
over 4 MiB chunks of whole lines, without the GIL. Records then move as batches: a batch fresh from the
kernel carries its TSV bytes, so a sink of the unchanged fields (Branch) writes them as they are, and it
turns into a Polars DataFrame (zero-copy, Arrow string views) only when an operator needs columns.
Polars runs the columnar operators (filter, unique, join, sort) in Rust. Streaming operators hold one
batch; the blocking ones hold what their docstrings in ``logetl.assembly`` say.

Each step is a push graph: roots (the source's parse, or stored outputs of earlier steps) push batches
to their children; when all inputs of an operator are done it flushes (``finish``) and tells its
children. Stored outputs (checkpoints, and anything a later step reads) are Arrow IPC parts in the run's
working directory with a ``_COMPLETE`` marker written when the storing step ends.
"""
from __future__ import annotations

import io
import os
import shutil
import zlib
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from logetl import assembly, contract
from logetl.engines import kernel
from logetl.engines.base import Engine, StepContext
from logetl.engines.spill import (
    DEFAULT_LIMIT, ExternalSort, HashPartitions, MemoryBudget, MemoryLimitExceeded, SpillDir, frame_bytes)
from logetl.io import inputs
from logetl.io.outputs import StagedOutput
from logetl.listener import StepRun

PARSE_THREADS = 2
BATCH_ROWS = 131_072          # kernel chunks are coalesced into batches this big: Polars calls pay per call
STORE_ROWS = 131_072          # rows buffered before a stored part is written
MEMO_ROWS = 1_000_000         # FunctionOp forgets its memo of computed values past this many


def _pl():
    import polars as pl  # imported on first use: Branch never needs it

    return pl


class Batch:
    """Records with named fields: kernel chunks (``parsed``, a list) or a Polars DataFrame (``frame``).

    ``shares_chunk`` is true while the frame's strings are views into the kernel's chunk buffer: free for
    streaming operators, but an operator that keeps rows past the batch must ``kept()`` them, or it would
    keep every whole chunk alive."""

    __slots__ = ("fields", "_frame", "parsed", "shares_chunk")

    def __init__(self, fields, frame=None, parsed: list[kernel.Parsed] | None = None, shares_chunk: bool = False):
        self.fields = tuple(fields)
        self._frame = frame
        self.parsed = parsed
        self.shares_chunk = shares_chunk or parsed is not None

    def derive(self, fields, frame) -> "Batch":
        """A batch computed from this one by a streaming operator."""
        return Batch(fields, frame, shares_chunk=self.shares_chunk)

    def kept(self):
        """The frame with its own compact copy of the strings it uses."""
        frame = self.frame()
        return _pl().from_arrow(frame.to_arrow()) if self.shares_chunk else frame

    def __len__(self) -> int:
        if self._frame is None:
            return sum(p.n_records for p in self.parsed)
        return self._frame.height

    def frame(self):
        if self._frame is None:
            import pyarrow as pa

            pl = _pl()
            names = list(self.fields)
            frames = [pl.from_arrow(pa.Table.from_arrays(p.columns(), names=names)) for p in self.parsed]
            self._frame = pl.concat(frames, rechunk=False) if len(frames) > 1 else frames[0]
        return self._frame

    def tsv(self):
        """The records as TSV, in pieces (an iterator)."""
        if self.parsed is not None and self._frame is None:
            yield from (p.tsv for p in self.parsed)
            return
        # slice by slice, made as they are written: a whole merged frame's text (and getvalue's copy of
        # it) would otherwise be held at once
        for start in range(0, self._frame.height, 65_536):
            buf = io.BytesIO()
            self._frame.slice(start, 65_536).write_csv(buf, separator="\t", include_header=False,
                                                       quote_style="never", line_terminator="\n")
            yield buf.getvalue()


class Op:
    """Runtime of one assembly node inside a step."""

    def __init__(self, node: assembly.Pipe, ctx: StepContext, state: StepRun, n_inputs: int):
        self.node, self.ctx, self.state = node, ctx, state
        self.children: list[tuple[Op, int]] = []
        self.n_inputs = n_inputs
        self._done = 0

    def emit(self, batch: Batch) -> None:
        if len(batch) == 0:
            return
        self.state.count(self.node.name, "out", len(batch))
        for child, port in self.children:
            child.push(batch, port)

    def push(self, batch: Batch, port: int) -> None:
        self.state.count(self.node.name, "in", len(batch))
        self.process(batch, port)

    def process(self, batch: Batch, port: int) -> None:
        self.emit(batch)

    def input_done(self, port: int) -> None:
        self._done += 1
        if self._done == self.n_inputs:
            self.finish()
            for child, p in self.children:
                child.input_done(p)

    def finish(self) -> None:
        """All input seen: blocking operators emit here."""


class FilterOp(Op):
    def process(self, batch, port):
        pl = _pl()
        pred = self.node.predicate
        if isinstance(pred, assembly.StartsWith):
            expr = pl.col(pred.field).str.starts_with(pred.prefix)
        elif isinstance(pred, assembly.AtLeast):
            expr = pl.col(pred.field) >= pred.value
        else:  # pragma: no cover - check() refuses unknown predicates first
            raise TypeError(pred)
        self.emit(batch.derive(batch.fields, batch.frame().filter(expr)))


class RetainOp(Op):
    def process(self, batch, port):
        self.emit(batch.derive(self.node.fields, batch.frame().select(self.node.keep)))


class RenameOp(Op):
    def process(self, batch, port):
        if batch._frame is None:  # a kernel batch renames for free
            self.emit(Batch(self.node.fields, parsed=batch.parsed))
        else:
            self.emit(batch.derive(self.node.fields, batch.frame().rename({self.node.old: self.node.new})))


class FunctionOp(Op):
    """CRC-32 is computed once per distinct value (client addresses repeat a lot): the scores seen so far
    are kept in a table, and each batch is joined with it. The table is a cache: past MEMO_ROWS values it
    starts afresh, so its memory is bounded whatever the number of distinct values."""

    def __init__(self, *args):
        super().__init__(*args)
        pl = _pl()
        fn = self.node.function
        self.known = pl.DataFrame(schema={fn.field: pl.String, self.node.field: pl.Int64})

    def process(self, batch, port):
        pl = _pl()
        fn, out = self.node.function, self.node.field
        frame = batch.frame()
        new = frame.select(pl.col(fn.field).unique()).join(self.known, on=fn.field, how="anti")
        if new.height and self.known.height + new.height > MEMO_ROWS:
            self.known = self.known.clear()
            new = frame.select(pl.col(fn.field).unique())
        if new.height:
            values = new.get_column(fn.field).to_list()
            scores = [zlib.crc32(v.encode("utf-8")) % fn.modulus for v in values]
            self.known = pl.concat([self.known, pl.DataFrame(
                {fn.field: values, out: scores}, schema={fn.field: pl.String, out: pl.Int64})])
        scored = frame.join(self.known, on=fn.field, how="left", maintain_order="left")
        self.emit(batch.derive(self.node.fields, scored.select(list(self.node.fields))))


class UniqueOp(Op):
    """Distinct records within the run's memory budget (``spill.HashPartitions``)."""

    def __init__(self, *args):
        super().__init__(*args)
        local = self.ctx.state
        self.distinct = HashPartitions(local.memory, local.spill_dir(self.node.name))

    def process(self, batch, port):
        # the distinct records are copied out of the batch after they are found (fewer than the batch's)
        self.distinct.add(batch.frame())

    def finish(self):
        for frame in self.distinct.result():
            self.emit(Batch(self.node.fields, frame))
        self.distinct.spill.report(self.ctx.run, self.node.name)


class SortOp(Op):
    """A stable sort within the run's memory budget (``spill.ExternalSort``): the same bytes whether or not
    it spills."""

    def __init__(self, *args):
        super().__init__(*args)
        local = self.ctx.state
        node = self.node
        self.sorter = ExternalSort(node.by, [node.descending] * len(node.by), local.memory,
                                   local.spill_dir(node.name))

    def process(self, batch, port):
        self.sorter.add(batch.kept())

    def finish(self):
        for frame in self.sorter.result():
            self.emit(Batch(self.node.fields, frame))
        self.sorter.spill.report(self.ctx.run, self.node.name)


class HashJoinOp(Op):
    """Port 0 is the left (accumulated) side, port 1 the right (streamed) side. The left side is held in
    memory by contract: past the run's memory budget the run fails, naming the operator and the limit."""

    def __init__(self, *args):
        super().__init__(*args)
        self.left_parts, self.left, self.pending = [], None, []
        self.left_size = 0

    def process(self, batch, port):
        if port == 0:
            part = batch.kept()
            self.left_parts.append(part)
            self.left_size += frame_bytes(part)
            memory = self.ctx.state.memory
            if memory.hold(self, self.left_size):
                raise MemoryLimitExceeded(
                    f"operator {self.node.name!r} (hashjoin) holds its left side in memory, and it outgrew the "
                    f"memory limit ({memory.limit / (1 << 20):,.0f} MiB, of which blocking operators may hold "
                    f"{memory.buffers / (1 << 20):,.0f} MiB): raise --memory-limit, or put the smaller side left")
        elif self.left is None:
            self.pending.append(batch)      # the right side arrived first: hold it until the left is done
        else:
            self._probe(batch)

    def _probe(self, batch):
        node = self.node
        joined = batch.frame().join(self.left, left_on=node.right_key, right_on=node.left_key, how="inner",
                                    coalesce=False, maintain_order="left_right")
        self.emit(batch.derive(node.fields, joined.select(list(node.fields))))

    def input_done(self, port):
        if port == 0:
            pl = _pl()
            fields = list(self.node.left.fields)
            self.left = pl.concat(self.left_parts) if self.left_parts else pl.DataFrame(
                {f: [] for f in fields}, schema={f: pl.String for f in fields})
            self.left_parts = []
            for b in self.pending:
                self._probe(b)
            self.pending = []
        super().input_done(port)

    def finish(self):
        self.ctx.state.memory.release(self)


class SinkOp(Op):
    def __init__(self, *args, output: StagedOutput):
        super().__init__(*args)
        self.file = open(output.part, "wb")
        self.written = 0

    def process(self, batch, port):
        for piece in batch.tsv():
            self.file.write(piece)
        self.written += len(batch)
        self.emit(batch)

    def finish(self):
        self.file.close()
        run = self.ctx.run
        run.written[self.node.tap] = run.written.get(self.node.tap, 0) + self.written


class StoreWriter(Op):
    """Writes a node's output for later steps: Arrow IPC parts, then ``_COMPLETE``."""

    def __init__(self, *args, work):
        super().__init__(*args)
        self.work = work
        self.directory = work.prepare_store(self.node.name)
        self.parts, self.rows, self.n = [], 0, 0

    def push(self, batch, port):
        self.parts.append(batch.kept())
        self.rows += len(batch)
        if self.rows >= STORE_ROWS:
            self._flush()

    def _flush(self):
        if not self.parts:
            return
        import pyarrow as pa

        # one record batch per kept batch, exported as they are (string views, no concatenated copy): a
        # reader then holds one batch at a time, not a whole part. Through a Python file: the crash-point
        # test's audit hook sees every write logetl makes (a stored part only counts once its _COMPLETE
        # exists, so it needs no sync against a kill)
        newest = _pl().CompatLevel.newest()
        with open(os.path.join(self.directory, f"part-{self.n:05d}.arrow"), "wb") as f:
            writer = None
            for frame in self.parts:
                table = frame.to_arrow(compat_level=newest)
                if writer is None:
                    writer = pa.ipc.new_file(f, table.schema)
                writer.write_table(table)
            writer.close()
        self.parts, self.rows, self.n = [], 0, self.n + 1

    def finish(self):
        self._flush()
        self.work.mark_complete(self.node.name)


class ParseOp(Op):
    """Receives kernel results from the source; accounts for malformed lines and traps them."""

    def __init__(self, *args, trap_file=None):
        super().__init__(*args)
        self.trap_file = trap_file
        self.parser = kernel.Parser(self.node.format, self.node.fields)
        self.path, self.line_base = None, 0
        self.pending: list[kernel.Parsed] = []
        self.pending_rows = 0

    def consume(self, parsed: kernel.Parsed, path: str) -> None:
        st = self.state
        if path != self.path:
            self.path, self.line_base = path, 0
        st.lines_read += parsed.n_lines
        st.count(self.node.name, "in", parsed.n_lines)
        st.dropped_size_dash += parsed.n_dash
        if parsed.malformed:
            samples = self.ctx.run.malformed_samples
            data = parsed.data
            for line, start, end, code in parsed.malformed:
                reason = kernel.REASON_NAMES[code]
                st.malformed[reason] = st.malformed.get(reason, 0) + 1
                if len(samples) < 5:
                    text = contract.display(data[start:end])
                    why = self.node.format.why(bytes(data[start:end])) if code == 2 else None
                    if why:
                        text = f"{why}: {text}"
                    samples.append((f"{self.path}:{self.line_base + line + 1}", reason, text))
            if self.trap_file is not None:
                self.trap_file.write(b"".join(bytes(data[s:e]) + b"\n" for _, s, e, _ in parsed.malformed))
        self.line_base += parsed.n_lines
        parsed.data = None  # trapped and sampled: the raw chunk is not needed any more
        self.pending.append(parsed)
        self.pending_rows += parsed.n_records
        if self.pending_rows >= BATCH_ROWS:
            self._flush()

    def _flush(self):
        if self.pending:
            self.emit(Batch(self.node.fields, parsed=self.pending))
        self.pending, self.pending_rows = [], 0

    def finish(self):
        self._flush()


class StoreReader:
    """A root that replays a stored output of an earlier step."""

    def __init__(self, directory: str):
        self.directory = directory

    def batches(self):
        pl = _pl()
        names = sorted(n for n in os.listdir(self.directory) if n.endswith(".arrow"))
        import pyarrow as pa

        for n in names:
            # record batch by record batch, with plain reads into Arrow buffers that Polars takes without a
            # copy (not mapped: mapped pages that later operators hold count as resident; not pl.read_ipc of
            # a file object, which reads the whole part into memory and then decodes a second copy)
            with pa.OSFile(os.path.join(self.directory, n), "rb") as f:
                reader = pa.ipc.open_file(f)
                for i in range(reader.num_record_batches):
                    yield pl.from_arrow(reader.get_batch(i))


OPS = {
    assembly.Pipe: Op,
    assembly.Checkpoint: Op,
    assembly.Filter: FilterOp,
    assembly.Retain: RetainOp,
    assembly.Rename: RenameOp,
    assembly.Function: FunctionOp,
    assembly.Unique: UniqueOp,
    assembly.Sort: SortOp,
    assembly.HashJoin: HashJoinOp,
}


def scan(files: list[str], on_bytes=None, threads: int = PARSE_THREADS, columns: bool = True,
         chunk: int = inputs.CHUNK, parser: kernel.Parser | None = None):
    """Parsed chunks of the input files in order; the kernel runs ahead on ``threads`` threads (with
    ``parser``'s format and fields; default the original expression)."""
    parse = parser.parse if parser is not None else kernel.parse
    depth = threads * 2
    with ThreadPoolExecutor(threads, thread_name_prefix="logetl-parse") as pool:
        pending: deque = deque()
        try:
            for path in files:
                for data, final in inputs.read_chunks([path], chunk, on_bytes=on_bytes):
                    pending.append((pool.submit(parse, data, final, columns), path))
                    if len(pending) >= depth:
                        fut, p = pending.popleft()
                        yield fut.result(), p
            while pending:
                fut, p = pending.popleft()
                yield fut.result(), p
        finally:
            for fut, _ in pending:
                fut.cancel()


class LocalRun:
    """The local engine's state of one run: staged outputs, the trap file, bytes read, the memory budget
    that blocking operators share, and where they spill."""

    def __init__(self, taps, memory_limit: int, spill_buffers: int | None = None):
        self.work = taps.work
        self.outputs = {tap: StagedOutput(path, taps.may_replace(path)) for tap, path in taps.outputs.items()}
        self.trap = StagedOutput(taps.trap, taps.may_replace(taps.trap)) if taps.trap else None
        self.trap_file = None
        self.done_bytes = 0
        self.memory = MemoryBudget(memory_limit, spill_buffers)
        self.spill_root = os.path.join(taps.work.path, "spill")

    def staged(self) -> list[StagedOutput]:
        """The outputs, then the trap: the order they are published in."""
        return [*self.outputs.values(), *([self.trap] if self.trap else [])]

    def spill_dir(self, name: str) -> SpillDir:
        return SpillDir(self.spill_root, name)

    def close(self, ok: bool) -> None:
        if self.trap_file is not None and not self.trap_file.closed:
            self.trap_file.close()
        shutil.rmtree(self.spill_root, ignore_errors=True)
        if not ok:
            for out in self.outputs.values():
                out.discard()
            if self.trap is not None:
                self.trap.discard()


class LocalEngine(Engine):
    name = "local"
    #: bytes read per kernel call; tests make it tiny so that lines cross chunk boundaries
    chunk_bytes = inputs.CHUNK
    supports = (assembly.Source, assembly.Parse, assembly.Sink, *OPS)

    def __init__(self, memory_limit: int | None = None, spill_buffers: int | None = None, **options):
        """``spill_buffers`` overrides the bytes blocking operators may buffer (tests make it tiny)."""
        super().__init__(**options)
        self.memory_limit = memory_limit or DEFAULT_LIMIT
        self.spill_buffers = spill_buffers

    def prepare(self, ctx):
        ctx.state = LocalRun(ctx.taps, self.memory_limit, self.spill_buffers)

    def execute_step(self, ctx, step, state):
        flow = ctx.flow
        local: LocalRun = ctx.state
        in_step = {id(n) for n in step.nodes}
        ops: dict[int, Op] = {}
        parse_ops: list[tuple[ParseOp, assembly.Source]] = []
        for node in step.nodes:
            if isinstance(node, assembly.Source):
                continue
            n_in = len(node.previous)
            if isinstance(node, assembly.Parse):
                if local.trap and local.trap_file is None:
                    # trapped lines belong to the step that parses: kept with it, for a restart
                    local.trap_file = open(local.work.trap_part, "wb")
                op = ParseOp(node, ctx, state, n_in, trap_file=local.trap_file)
                parse_ops.append((op, node.previous[0]))
            elif isinstance(node, assembly.Sink):
                op = SinkOp(node, ctx, state, n_in, output=local.outputs[node.tap])
            else:
                op = OPS[type(node)](node, ctx, state, n_in)
            ops[id(node)] = op
        for node in step.nodes:
            if id(node) not in ops:
                continue
            for port, prev in enumerate(node.previous):
                if id(prev) in ops:
                    ops[id(prev)].children.append((ops[id(node)], port))
        for node in step.writes:
            writer = StoreWriter(node, ctx, state, 1, work=local.work)
            ops[id(node)].children.append((writer, 0))
        # roots: stored outputs of earlier steps, then the sources
        for stored in step.reads:
            reader = StoreReader(local.work.store(stored.name))
            if not os.path.exists(os.path.join(reader.directory, "_COMPLETE")):
                raise RuntimeError(f"stored output of {stored.name!r} is incomplete")
            targets = [(ops[id(c)], c.previous.index(stored)) for c in flow.children(stored) if id(c) in in_step]
            for frame in reader.batches():
                # a stored part's buffers hold all its rows: an operator keeping some of them compacts
                batch = Batch(stored.fields, frame, shares_chunk=True)
                for op, port in targets:
                    op.push(batch, port)
            for op, port in targets:
                op.input_done(port)
        for parse_op, source in parse_ops:
            files = ctx.taps.inputs
            total = ctx.taps.input_bytes

            def on_bytes(n, total=total):
                local.done_bytes += n
                ctx.listener.progress(ctx.run, local.done_bytes, total)

            columns = self._needs_columns(flow, step, parse_op.node)
            for parsed, path in scan(files, on_bytes, columns=columns, chunk=self.chunk_bytes,
                                     parser=parse_op.parser):
                parse_op.consume(parsed, path)
            parse_op.input_done(0)
        if parse_ops and local.trap_file is not None:
            local.trap_file.flush()
            os.fsync(local.trap_file.fileno())

    @staticmethod
    def _needs_columns(flow, step, parse) -> bool:
        """False when everything the parse feeds in this step passes records through untouched to sinks."""
        todo, seen = [parse], set()
        while todo:
            node = todo.pop()
            for child in flow.children(node):
                if id(child) in seen:
                    continue
                seen.add(id(child))
                if type(child) not in (assembly.Pipe, assembly.Sink) or child not in step.nodes \
                        or child in step.writes:
                    return True
                todo.append(child)
        return parse in step.writes

    def seal(self, ctx):
        local: LocalRun = ctx.state
        if local.trap_file:
            local.trap_file.close()
        if local.trap and os.path.exists(local.work.trap_part):
            shutil.copyfile(local.work.trap_part, local.trap.part)
        return [out.seal() for out in local.staged()]

    def commit(self, ctx):
        for out in ctx.state.staged():
            out.commit()

    def close(self, ctx, ok):
        if ctx.state is not None:
            ctx.state.close(ok)
