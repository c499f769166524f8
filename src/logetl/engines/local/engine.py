"""The embedded engine: runs a flow in this process, with no JVM and no server.

Why this shape: the parse dominates the cost, so it runs in a native kernel (``_scan.c``) on two threads
over 4 MiB chunks of whole lines, without the GIL. Records then move as batches: a batch fresh from the
kernel carries its TSV bytes, so a sink of the unchanged fields (Branch) writes them as they are, and it
turns into a Polars DataFrame (zero-copy, Arrow string views) only when an operator needs columns; a
parse that feeds only Parquet sinks gets Arrow strings from the kernel instead, which Parquet's encoder
(in a thread of its own) takes as they are.
Polars runs the columnar operators (filter, unique, join, sort) in Rust. Streaming operators hold one
batch; the blocking ones hold what their docstrings in ``logetl.assembly`` say.

Each step is a push graph: roots (the source's parse, or stored outputs of earlier steps) push batches
to their children; when all inputs of an operator are done it flushes (``finish``) and tells its
children. Stored outputs (checkpoints, and anything a later step reads) are Arrow IPC parts in the run's
working directory with a ``_COMPLETE`` marker written when the storing step ends."""
from __future__ import annotations

import os
import shutil

from logetl import assembly
from logetl.engines import kernel
from logetl.engines.local.expressions import (
    AGGREGATES, COMPILE)
from logetl.engines.base import Engine, RunState, partitioned_taps
from logetl.engines.local.spill import (
    DEFAULT_LIMIT, MemoryBudget, SpillDir)
from logetl.io import inputs
from logetl.io.fs import LOCAL
from logetl.engines.local.batch import Batch
from logetl.engines.local.scan import MIN_SPLIT_CHUNK, PARSE_THREADS, ParseOp, Scan, StoreReader
from logetl.engines.local.operators import OPS, Op
from logetl.io.writers import ParquetWriter
from logetl.engines.local.outputs import SinkOp, StoreWriter


class LocalRun(RunState):
    """The local engine's state of one run: besides the staged outputs, the trap file, bytes read, the
    memory budget that blocking operators share, and where they spill."""

    def __init__(self, taps, memory_limit: int, spill_buffers: int | None = None, partitioned=None):
        super().__init__(taps, LOCAL, partitioned=partitioned)
        self.trap_file = None
        self.done_bytes = 0
        self.memory = MemoryBudget(memory_limit, spill_buffers)
        self.spill_root = os.path.join(taps.work.path, "spill")
        self.encoders: list[ParquetWriter] = []   # background encoders, ended by close whatever happened
        self.sinks: list[SinkOp] = []             # their open files, closed by close whatever happened

    def spill_dir(self, name: str) -> SpillDir:
        return SpillDir(self.spill_root, name)

    def close(self, ok: bool) -> None:
        """Releases what the run holds, each part whatever another's release raised: a file closed on a
        full file system fails to flush what it buffered, and the staged outputs must still be discarded
        (they hold the space)."""
        try:
            for encoder in self.encoders:
                encoder.abort()
            for sink in self.sinks:
                sink.discard()      # a failed run's files (a run_flow caller's process goes on; its mounts too)
            if self.trap_file is not None and not self.trap_file.closed:
                _close_discarded(self.trap_file)    # a published run closed it in finish_trap
        finally:
            shutil.rmtree(self.spill_root, ignore_errors=True)
            super().close(ok)


def _close_discarded(f) -> None:
    """Closes a file whose content is discarded: what it buffered is lost anyway, so its flush failing
    (a full file system) is no failure of the close."""
    try:
        f.close()
    except OSError:
        pass


class LocalEngine(Engine):
    name = "local"
    #: bytes read per kernel call; tests make it tiny so that lines cross chunk boundaries
    chunk_bytes = inputs.CHUNK
    operators = (assembly.Source, assembly.Parse, assembly.Sink, *OPS)
    expressions = (*COMPILE, *AGGREGATES)

    def __init__(self, memory_limit: int | None = None, spill_buffers: int | None = None, **options):
        """``spill_buffers`` overrides the bytes blocking operators may buffer (tests make it tiny)."""
        super().__init__(**options)
        self.memory_limit = memory_limit or DEFAULT_LIMIT
        self.spill_buffers = spill_buffers

    def prepare(self, ctx):
        plan = ctx.taps.incremental
        for note in (plan.notes if plan is not None else []):
            self._notice(ctx.run, ctx.listener, note)
        return LocalRun(ctx.taps, self.memory_limit, self.spill_buffers, partitioned_taps(ctx.flow))

    def commit(self, ctx):
        """An incremental run commits each output with its state (``incremental.commit``)."""
        plan = ctx.taps.incremental
        if plan is None:
            return super().commit(ctx)
        from logetl import incremental

        incremental.commit(ctx, plan, lambda text: self._notice(ctx.run, ctx.listener, text))

    def execute_step(self, ctx, step, state):
        # the parse threads start first: building the operators imports Polars (see Scan)
        scans = {id(n): self._scan(ctx, step, n).start() for n in step.nodes if isinstance(n, assembly.Parse)}
        try:
            self._execute(ctx, step, state, scans)
        finally:
            for s in scans.values():
                s.close()

    def _scan(self, ctx, step, node) -> Scan:
        local: LocalRun = ctx.state
        total = ctx.taps.input_bytes

        def on_bytes(n):
            local.done_bytes += n
            ctx.listener.progress(ctx.run, local.done_bytes, total)

        plan = ctx.taps.incremental
        chunk = self.chunk_bytes
        if 0 < total < chunk * PARSE_THREADS:
            # a small read (an incremental run's new lines, a small file) in whole chunks would leave a
            # parse thread idle: split it between them (20,000 new lines: 4.3 MB, one chunk and a sliver)
            chunk = max(MIN_SPLIT_CHUNK, -(-total // PARSE_THREADS))
        return Scan(ctx.taps.inputs, on_bytes, columns=self._columns(ctx.flow, step, node), chunk=chunk,
                    parser=kernel.Parser(node.format, node.fields, drop_dash=node.drops_size_dash),
                    ranges=ctx.taps.ranges, reached=plan.reached if plan is not None else None,
                    identities=plan.identities if plan is not None else None, keep=bool(local.trap))

    def _execute(self, ctx, step, state, scans):
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
                    os.makedirs(local.work.trap_dir, exist_ok=True)
                    local.trap_file = open(local.work.trap_part, "wb")
                op = ParseOp(node, ctx, state, n_in, trap_file=local.trap_file)
                parse_ops.append((op, node.previous[0]))
            elif isinstance(node, assembly.Sink):
                twin = self._twin(step, node, ops)
                op = SinkOp(node, ctx, state, n_in, output=local.outputs[node.tap], twin=twin)
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
        for parse_op, _source in parse_ops:
            scan, chain = scans[id(parse_op.node)], parse_op.fusable()
            if chain and scan.columns == kernel.VIEWS:
                scan.then = parse_op.fuse(chain)
        try:
            # roots: stored outputs of earlier steps, then the sources
            for stored in step.reads:
                reader = StoreReader(local.work.store(stored.name))
                if not local.work.is_complete(stored.name):
                    raise RuntimeError(f"stored output of {stored.name!r} is incomplete")
                targets = [(ops[id(c)], c.previous.index(stored)) for c in flow.children(stored) if id(c) in in_step]
                # progress: records replayed of the count the storing step recorded ("out" of the stored node)
                stored_total, replayed = ctx.run.steps[flow.step_of(stored).index].counters.get(stored.name, {}).get("out"), 0
                for frame in reader.batches():
                    # a stored part's buffers hold all its rows: an operator keeping some of them compacts
                    batch = Batch(stored.fields, frame, shares_chunk=True)
                    for op, port in targets:
                        op.push(batch, port)
                    replayed += frame.height
                    ctx.listener.step_progress(ctx.run, state, replayed, stored_total, "records")
                for op, port in targets:
                    op.input_done(port)
            for parse_op, _source in parse_ops:
                for parsed, path in scans[id(parse_op.node)]:
                    parse_op.consume(parsed, path)
                parse_op.input_done(0)
        except BaseException:
            for op in ops.values():
                op.abort()
            raise
        for op in ops.values():
            if isinstance(op, SinkOp) and op.twin is not None:
                op.copy_from_twin()
        if parse_ops and local.trap_file is not None:
            local.trap_file.flush()     # in the kernel's hands: a killed process loses none of it (no fsync, fs.py)

    @staticmethod
    def _twin(step, sink, ops):
        """An earlier sink of this step that writes exactly what ``sink`` would (the same records through
        branches only, the same fields and format, not partitioned): ``sink`` then copies its file
        instead of encoding the records again (Branch's two outputs)."""
        def origin(node):
            while type(node) is assembly.Pipe:
                node = node.previous[0]
            return node

        if sink.partition_by or sink.format == "tsv":
            return None          # TSV costs no encoding: writing the kernel's bytes twice, while parsing, is cheaper
        for node in step.nodes:
            if node is sink:
                return None
            op = ops.get(id(node))
            if isinstance(node, assembly.Sink) and isinstance(op, SinkOp) and op.twin is None \
                    and not node.partition_by and node.format == sink.format and node.header == sink.header \
                    and origin(node.previous[0]) is origin(sink.previous[0]):
                return op
        return None

    @staticmethod
    def _columns(flow, step, parse) -> int:
        """What the parse must build (``kernel.NONE``, ``VIEWS``, ``STRINGS``): only the TSV when everything
        it feeds in this step passes records through untouched to TSV sinks; Arrow strings instead of the
        TSV when it feeds only Parquet sinks of one file (Parquet's writer encodes strings faster than
        views) or queries that stream the records into DuckDB (``Sql.streamed``); else the TSV and string views over it, which Polars takes without a copy."""
        todo, seen, strings, tsv, sql = [parse], set(), False, False, False
        while todo:
            node = todo.pop()
            for child in flow.children(node):
                if id(child) in seen:
                    continue
                seen.add(id(child))
                if isinstance(child, assembly.Sink) and child.format == "parquet" and not child.partition_by \
                        and child in step.nodes and child not in step.writes:
                    strings = True
                    continue
                if isinstance(child, assembly.Sql) and child.streamed and child in step.nodes \
                        and child not in step.writes:
                    sql = True      # DuckDB reads Arrow strings faster than views, and needs no TSV
                    continue
                if type(child) not in (assembly.Pipe, assembly.Sink) or child not in step.nodes \
                        or child in step.writes or (isinstance(child, assembly.Sink) and (
                            child.format != "tsv" or child.partition_by)):
                    return kernel.VIEWS
                tsv = tsv or isinstance(child, assembly.Sink)
                todo.append(child)
        if parse in step.writes or ((strings or sql) and tsv):
            return kernel.VIEWS
        if sql:
            return kernel.STRINGS
        if strings and any(parse.format.nullable(f) for f in parse.fields):
            return kernel.VIEWS     # logetl's own Parquet encoder of the kernel's strings writes no null
        return kernel.STRINGS if strings else kernel.NONE

    def finish_trap(self, ctx):
        local: LocalRun = ctx.state
        if local.trap_file:
            local.trap_file.close()
        if os.path.exists(local.work.trap_part):
            shutil.copyfile(local.work.trap_part, local.trap.part)
