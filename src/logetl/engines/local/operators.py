"""The local engine's operators: one class per assembly node (``OPS``), pushed batches in input order.
A node whose traits say ``maps_records`` is a ``PerRecordOp`` (a map over a frame, which the parse threads
may run: ``scan.ParseOp``); a blocking one emits when its input is done, within the run's memory budget."""
from __future__ import annotations

from logetl import assembly
from logetl import expressions as E
from logetl.engines.local.expressions import (
    AGGREGATES, HISTOGRAM, Compiler, _dtype, aggregate_input, percentile)
from logetl.engines.base import StepContext
from logetl.engines.local.spill import (
    ExternalSort, HashPartitions, MemoryLimitExceeded, frame_bytes)
from logetl.listener import StepRun
from logetl.engines.local.batch import Batch, _pl


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

    def abort(self) -> None:
        """The step ends without this operator finishing (a failure, a stop): end what it runs beside the
        engine's own thread (a query's thread)."""


class PerRecordOp(Op):
    """The operator of a node whose traits say ``maps_records``: its output for a frame depends on that frame
    alone (``map``, which touches no state of the run, so a parse thread may run it: see ``ParseOp``)."""

    def map(self, frame):
        raise NotImplementedError

    def process(self, batch, port):
        self.emit(batch.derive(self.node.fields, self.map(batch.frame())))


class FilterOp(PerRecordOp):
    def __init__(self, *args):
        super().__init__(*args)
        self.predicate = Compiler(self.node.previous[0].types)(self.node.predicate)

    def map(self, frame):
        return frame.filter(self.predicate)


class SelectOp(PerRecordOp):
    def map(self, frame):
        return frame.select(self.node.keep)


class RenameOp(PerRecordOp):
    def map(self, frame):
        return frame.rename(self.node.mapping)

    def process(self, batch, port):
        if batch._frame is None:  # a kernel batch renames for free
            self.emit(Batch(self.node.fields, parsed=batch.parsed))
        else:
            super().process(batch, port)


class DeriveOp(PerRecordOp):
    """Every computed field reads the input's fields: one ``with_columns`` computes them side by side."""

    def __init__(self, *args):
        super().__init__(*args)
        compile_ = Compiler(self.node.previous[0].types)
        self.computed = [compile_(e).alias(f) for f, e in self.node.computed.items()]

    def map(self, frame):
        return frame.with_columns(self.computed)


class LimitOp(Op):
    """Passes the first ``n`` records and drops the rest (they are still counted in)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.left = self.node.n

    def process(self, batch, port):
        if self.left <= 0:
            return
        frame = batch.frame()
        if frame.height > self.left:
            frame = frame.head(self.left)
        self.left -= frame.height
        self.emit(batch.derive(batch.fields, frame))


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
        self.sorter = ExternalSort(node.by, node.descending, local.memory,
                                   local.spill_dir(node.name))

    def process(self, batch, port):
        self.sorter.add(batch.kept())

    def finish(self):
        for frame in self.sorter.result():
            self.emit(Batch(self.node.fields, frame))
        self.sorter.spill.report(self.ctx.run, self.node.name)


class GroupByOp(Op):
    """Aggregates each batch into partial states per group (``local_expressions.AGGREGATES``), which are
    combined within the run's memory budget (``spill.HashPartitions`` on the keys: in memory while they
    fit, else partitioned to disk by the keys and combined one partition at a time). Values of a
    ``count_distinct`` join the keys of the partial stage, so that the final stage can count them; so do
    the values of a median or percentile (``HISTOGRAM``), with the count of their records beside."""

    RECORDS = "__logetl_records"

    def __init__(self, *args):
        super().__init__(*args)
        pl = _pl()
        node, local = self.node, self.ctx.state
        compile_ = Compiler(node.previous[0].types)
        self.keys = list(node.keys)
        self.inputs, self.partials, self.combines, self.finals = [], [], [], []
        distinct, histograms = [], []
        for i, (field, agg) in enumerate(node.aggregates.items()):
            value = f"__logetl_v{i}"
            if agg.arg is not None:
                self.inputs.append(aggregate_input(compile_, agg).alias(value))
            if isinstance(agg, E.CountDistinct):
                distinct.append(value)
                self.finals.append(pl.col(value).drop_nulls().n_unique().cast(pl.Int64).alias(field))
                continue
            if AGGREGATES[type(agg)] == HISTOGRAM:
                distinct.append(value)
                histograms.append((field, agg, value))
                continue
            partial, combine, *final = AGGREGATES[type(agg)]    # final: combine unless given
            p = f"__logetl_p{i}"
            self.partials.append(partial(agg, pl.col(value)).alias(p))
            self.combines.append(combine(agg, pl.col(p)).alias(p))
            self.finals.append((final[0] if final else combine)(agg, pl.col(p)).alias(field))
        if histograms:
            records = pl.col(self.RECORDS)
            self.partials.append(pl.len().cast(pl.Int64).alias(self.RECORDS))
            self.combines.append(records.sum().alias(self.RECORDS))
            self.finals += [percentile(agg, pl.col(value), records).alias(field) for field, agg, value in histograms]
        self.out_types = [pl.col(f).cast(_dtype(t)) for f, t in node.types.items()]
        self.partial_keys = self.keys + distinct
        self.groups = HashPartitions(local.memory, local.spill_dir(node.name), hash_on=self.keys,
                                     reduce=self._combine)

    def _combine(self, frame):
        if not self.combines:
            return frame.unique(self.partial_keys, maintain_order=True)
        return frame.group_by(self.partial_keys, maintain_order=True).agg(self.combines)

    def process(self, batch, port):
        frame = batch.frame().select(*self.keys, *self.inputs)
        if self.partials:
            partial = frame.group_by(self.partial_keys, maintain_order=True).agg(self.partials)
        else:
            partial = frame.unique(self.partial_keys, maintain_order=True)
        # partial states are small and own their memory (group_by copies the keys out of the batch)
        self.groups.add(partial, reduced=True)

    def finish(self):
        for frame in self.groups.result():
            result = frame.group_by(self.keys, maintain_order=True).agg(self.finals)
            self.emit(Batch(self.node.fields, result.select(self.out_types)))
        self.groups.spill.report(self.ctx.run, self.node.name)


class TopOp(Op):
    """A stable sort by the ``per`` fields then the ``by`` keys (``spill.ExternalSort``, within the run's
    memory budget), then a cut that keeps the first ``n`` rows of each group; a group may span several
    sorted frames, so the last group's count carries over."""

    def __init__(self, *args):
        super().__init__(*args)
        local, node = self.ctx.state, self.node
        self.sorter = ExternalSort([f for f, _ in node.keys], [d for _, d in node.keys], local.memory,
                                   local.spill_dir(node.name))

    def process(self, batch, port):
        self.sorter.add(batch.kept())

    def finish(self):
        pl = _pl()
        node, per = self.node, list(self.node.per)
        carry_key, carry = None, 0
        for frame in self.sorter.result():
            if not per:
                frame = frame.head(max(0, node.n - carry))
                carry += frame.height
            else:
                rank = pl.int_range(pl.len()).over(per)
                first = frame.select(per).row(0)
                if carry_key is not None and first == carry_key:
                    same = pl.all_horizontal([pl.col(f).eq_missing(pl.lit(v)) for f, v in zip(per, first)])
                    rank = rank + pl.when(same).then(carry).otherwise(0)
                frame = frame.filter(rank < node.n)
                last = frame.select(per).row(-1) if frame.height else None
                if last is not None:
                    tail = frame.filter(pl.all_horizontal([pl.col(f).eq_missing(pl.lit(v)) for f, v in zip(per, last)]))
                    carry = tail.height + (carry if last == carry_key else 0)
                    carry_key = last
            self.emit(Batch(node.fields, frame))
        self.sorter.spill.report(self.ctx.run, node.name)


# --- times: visits -------------------------------------------------------------------------------------------

class VisitsOp(Op):
    """A stable sort by the client's fields then the time (``spill.ExternalSort``, within the run's memory
    budget), then one pass over the sorted frames that numbers the visits. A client's records may span
    several frames: the last record's client, time and visit carry over to the next frame's first."""

    def __init__(self, *args):
        super().__init__(*args)
        local, node = self.ctx.state, self.node
        self.sorter = ExternalSort([f for f, _ in node.keys], [d for _, d in node.keys], local.memory,
                                   local.spill_dir(node.name))
        self.carry = None           # (the last record's client fields, its time, its visit or 0)

    def process(self, batch, port):
        self.sorter.add(batch.kept())

    def _numbered(self, frame):
        pl = _pl()
        node, by = self.node, list(self.node.by)
        t = pl.col(node.time)
        first = pl.int_range(pl.len()) == 0
        prev_time = t.shift(1)
        same = [pl.col(f).eq_missing(pl.col(f).shift(1)) for f in by]
        carried = 0
        if self.carry is not None:
            key, time, carried = self.carry
            prev_time = pl.when(first).then(pl.lit(time, dtype=frame.schema[node.time])).otherwise(prev_time)
            same = [pl.when(first).then(pl.col(f).eq_missing(pl.lit(v, dtype=frame.schema[f]))).otherwise(s)
                    for f, v, s in zip(by, key, same)]
        else:
            same = [pl.when(first).then(False).otherwise(s) for s in same]
        new_client = ~pl.all_horizontal(same)
        gap = t.dt.epoch("s") - prev_time.dt.epoch("s")
        # a visit starts at a client's first record with a time, and after more than the gap (null
        # comparisons are null: fill_null(True) where there is no previous time)
        starts = t.is_not_null() & (new_client | (gap > node.gap_minutes * 60).fill_null(True))
        client = new_client.cum_sum()
        visit = starts.cast(pl.Int64).cum_sum().over(client)
        # the first client continues the previous frame's when it is the same one (its number 0)
        visit = visit + pl.when(client == 0).then(carried).otherwise(0)
        numbered = frame.with_columns(pl.when(t.is_not_null()).then(visit).cast(pl.Int64).alias(node.field))
        last = numbered.row(-1, named=True)
        self.carry = (tuple(last[f] for f in by), last[node.time], last[node.field] or 0)
        return numbered

    def finish(self):
        for frame in self.sorter.result():
            if frame.height:
                self.emit(Batch(self.node.fields, self._numbered(frame)))
        self.sorter.spill.report(self.ctx.run, self.node.name)


class HashJoinOp(Op):
    """Port 0 is the held (accumulated) side, port 1 the streamed side. The held side is in memory by
    contract: past the run's memory budget the run fails, naming the operator and the limit."""

    HELD_KEY = "__logetl_held_key"

    def __init__(self, *args):
        super().__init__(*args)
        self.left_parts, self.left, self.pending = [], None, []
        self.left_size = 0
        node = self.node
        self.held_key = self.HELD_KEY if node.held_key == node.stream_key else node.held_key

    def process(self, batch, port):
        if port == 0:
            part = batch.kept()
            self.left_parts.append(part)
            self.left_size += frame_bytes(part)
            memory = self.ctx.state.memory
            if memory.hold(self, self.left_size):
                raise MemoryLimitExceeded(
                    f"operator {self.node.name!r} (hashjoin) holds its held side in memory, and it outgrew the "
                    f"memory limit ({memory.limit / (1 << 20):,.0f} MiB, of which blocking operators may hold "
                    f"{memory.buffers / (1 << 20):,.0f} MiB): raise --memory-limit, or hold the smaller side")
        elif self.left is None:
            self.pending.append(batch)      # the streamed side arrived first: hold it until the held is done
        else:
            self._probe(batch)

    def _probe(self, batch):
        node = self.node
        joined = batch.frame().join(self.left, left_on=node.stream_key, right_on=self.held_key, how=node.how,
                                    coalesce=False, maintain_order="left_right")
        self.emit(batch.derive(node.fields, joined.select(list(node.fields))))

    def input_done(self, port):
        if port == 0:
            pl = _pl()
            held = self.node.held
            self.left = pl.concat(self.left_parts) if self.left_parts else pl.DataFrame(
                schema={f: _dtype(held.types[f]) for f in held.fields})
            if self.held_key != self.node.held_key:
                self.left = self.left.rename({self.node.held_key: self.held_key})
            self.left_parts = []
            for b in self.pending:
                self._probe(b)
            self.pending = []
        super().input_done(port)

    def finish(self):
        self.ctx.state.memory.release(self)


#: the local engine's operator table: one entry per assembly node class (Source, Parse and Sink are the
#: step's roots and leaves, built by ``execute_step`` with their run state)
OPS = {
    assembly.Pipe: Op,
    assembly.Checkpoint: Op,
    assembly.Filter: FilterOp,
    assembly.Select: SelectOp,
    assembly.Rename: RenameOp,
    assembly.Derive: DeriveOp,
    assembly.Unique: UniqueOp,
    assembly.GroupBy: GroupByOp,
    assembly.Sort: SortOp,
    assembly.Top: TopOp,
    assembly.Limit: LimitOp,
    assembly.HashJoin: HashJoinOp,
}


OPS[assembly.Visits] = VisitsOp


def _sql_op(*args) -> Op:
    from logetl.engines.local.sql import SqlOp  # it builds on Op: imported once this module is

    return SqlOp(*args)


OPS[assembly.Sql] = _sql_op
