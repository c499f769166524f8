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
working directory with a ``_COMPLETE`` marker written when the storing step ends.
"""
from __future__ import annotations

import io
import os
import shutil
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from logetl import assembly, contract
from logetl import expressions as E
from logetl.engines import kernel
from logetl.engines.local.expressions import (
    AGGREGATES, COMPILE, HISTOGRAM, SINK_TEXT, Compiler, _dtype, _text, aggregate_input, percentile)
from logetl.engines.base import Engine, RunState, StepContext, partitioned_taps
from logetl.engines.local.spill import (
    DEFAULT_LIMIT, ExternalSort, HashPartitions, MemoryBudget, MemoryLimitExceeded, SpillDir, frame_bytes)
from logetl.io import inputs
from logetl.io import parquet as parquet_strings
from logetl.io.fs import LOCAL
from logetl.io.outputs import DELIMITED, StagedOutput, header_line, partition_name
from logetl.listener import StepRun

PARSE_THREADS = 2
MIN_SPLIT_CHUNK = 256 << 10   # a small read is split between the parse threads down to chunks this big
BATCH_ROWS = 131_072          # kernel chunks are coalesced into batches this big: Polars calls pay per call
STORE_ROWS = 131_072          # rows buffered before a stored part is written


def _pl():
    import polars as pl  # imported on first use: Branch never needs it

    return pl


class Batch:
    """Records with named fields: kernel chunks (``parsed``, a list) or a Polars DataFrame (``frame``).

    ``shares_chunk`` is true while the frame's strings are views into the kernel's chunk buffer: free for
    streaming operators, but an operator that keeps rows past the batch must ``kept()`` them, or it would
    keep every whole chunk alive."""

    __slots__ = ("fields", "_frame", "parsed", "shares_chunk", "_arrow")

    def __init__(self, fields, frame=None, parsed: list[kernel.Parsed] | None = None, shares_chunk: bool = False):
        self.fields = tuple(fields)
        self._frame = frame
        self.parsed = parsed
        self.shares_chunk = shares_chunk or parsed is not None
        self._arrow = None

    def arrow(self, schema=None):
        """The records as an Arrow table, converted once however many sinks write them: a kernel batch
        straight from its Arrow columns (strings or string views, without a Polars frame or a copy), a
        frame with Polars' own string views; cast to ``schema`` when one is given and differs."""
        if self._arrow is None or (schema is not None and self._arrow.schema != schema):
            import pyarrow as pa

            if self.parsed is not None and self._frame is None:
                names = list(self.fields)
                tables = [pa.Table.from_arrays(p.columns(), names=names) for p in self.parsed]
                table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
            else:
                table = self._frame.to_arrow(compat_level=_pl().CompatLevel.newest())
            self._arrow = table if schema is None or table.schema == schema else table.cast(schema)
        return self._arrow

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
            pl = _pl()
            frames = [p.frame(self.fields) for p in self.parsed]
            self._frame = pl.concat(frames, rechunk=False) if len(frames) > 1 else frames[0]
        return self._frame

    def text(self, format: str):
        """The records as ``format`` (``tsv`` or ``csv``: ``outputs.DELIMITED``), in pieces (an iterator):
        TSV unquoted, CSV quoted as RFC 4180 (a field holding the separator, ``"``, CR or LF, and the empty
        string), each value rendered the same way in both."""
        if format == "tsv" and self.parsed is not None and self._frame is None \
                and all(p.tsv is not None for p in self.parsed):
            yield from (p.tsv for p in self.parsed)
            return
        self.frame()     # parsed as kernel.STRINGS, without the TSV (no TSV sink reads this parse)
        separator, end = DELIMITED[format]
        options = {"quote_style": "never"} if format == "tsv" else {
            # a record of one null field is "" (an empty line is a record readers skip)
            "quote_style": "necessary", "null_value": '""' if len(self.fields) == 1 else ""}
        # slice by slice, made as they are written: a whole merged frame's text (and getvalue's copy of
        # it) would otherwise be held at once
        for start in range(0, self._frame.height, 65_536):
            buf = io.BytesIO()
            self._frame.slice(start, 65_536).write_csv(buf, separator=separator, include_header=False,
                                                       line_terminator=end, **options)
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


def as_text(batch: Batch, types: dict) -> Batch:
    """The batch with each field of a type that has a text form of its own (``local_expressions.SINK_TEXT``:
    a float, a timestamp) as that text, for TSV, CSV and JSON Lines; the batch itself when it has none."""
    rendered = [_text(types[f], _pl().col(f)).alias(f) for f in batch.fields if types.get(f) in SINK_TEXT]
    return batch.derive(batch.fields, batch.frame().with_columns(rendered)) if rendered else batch


#: the types a JSON Lines sink writes as JSON numbers from their text (``SINK_TEXT``): the text is made a
#: string first, then the quotes around it are taken off (``JsonLinesWriter``)
JSON_NUMBERS = {E.FLOAT}


class TsvWriter:
    """The contract's TSV: a kernel batch's bytes as they are, else Polars' CSV writer without quoting
    (a float or a timestamp as ``as_text`` writes it). ``header``: the file starts with the field names (a
    file opened again to append has its header)."""

    suffix = ""
    format = "tsv"

    def __init__(self, file, fields, types, header: bool = False):
        self.file = file
        self.types = types
        if header:
            file.write(header_line(self.format, fields))

    def write(self, batch):
        for piece in as_text(batch, self.types).text(self.format):
            self.file.write(piece)

    def close(self):
        pass


class CsvWriter(TsvWriter):
    """CSV as RFC 4180 has it (``assembly.Sink``), from Polars' CSV writer: values rendered as in TSV."""

    suffix = ".csv"
    format = "csv"


def _arrow_parquet_writer():
    """pyarrow's Parquet writer class, from its extension module: ``pyarrow.parquet`` wraps the same class
    (for paths and file systems, which a writer given an open file does not use) but imports pyarrow's file
    system layer with it (pyarrow.fs, ssl, platform: ~15 ms of CPU on the encoder's critical path). The
    public class if the module ever moves."""
    try:
        from pyarrow._parquet import ParquetWriter
    except ImportError:     # pragma: no cover (pyarrow 16 to 26 have it)
        from pyarrow.parquet import ParquetWriter
    return ParquetWriter


def _arrow_compute():
    """``call_function(name, args)`` of pyarrow's compute functions, without ``pyarrow.compute``, which
    builds a Python function and its docstring for each of its ~300 kernels at import (~40 ms of CPU, on
    the Parquet encoder's critical path); ``pyarrow.compute.call_function`` is this one, re-exported."""
    try:
        from pyarrow._compute import call_function
    except ImportError:     # pragma: no cover
        from pyarrow.compute import call_function
    return call_function


def _import_arrow_for_parquet() -> None:
    """Imports what the Parquet encoder uses (pyarrow's writer and compute functions: ~0.12 s of CPU,
    numpy's included), without the cyclic collector, which would walk the new modules' objects again and
    again (~8 % of the import)."""
    import gc

    collecting = gc.isenabled()
    try:
        gc.disable()
        _arrow_parquet_writer()
        _arrow_compute()
    finally:
        if collecting:
            gc.enable()


def parquet_needs_arrow(flow: assembly.Flow) -> bool:
    """Whether a local run of ``flow`` may encode Parquet with pyarrow: not when every Parquet sink is
    logetl's own encoder's (strings straight from a parse that feeds nothing but such sinks, the case in which
    the parse makes Arrow strings: ``LocalEngine._columns``), so that such a run never imports pyarrow.
    A flow this says no to but whose steps differ (a checkpoint between) imports pyarrow when it needs it."""
    if not parquet_strings.available():
        return True
    for sink in flow.sinks:
        if sink.format != "parquet":
            continue
        if sink.partition_by or any(sink.types[f] != "string" for f in sink.file_fields):
            return True
        node = sink.previous[0]
        while type(node) is assembly.Pipe:
            node = node.previous[0]
        if not isinstance(node, assembly.Parse):
            return True
        todo = [node]
        while todo:
            for child in flow.children(todo.pop()):
                if type(child) is assembly.Pipe:
                    todo.append(child)
                elif not (isinstance(child, assembly.Sink) and child.format == "parquet" and not child.partition_by):
                    return True
    return False


def start_parquet_import() -> None:
    """Begins ``_import_arrow_for_parquet`` in a thread of its own as a run that writes Parquet starts
    (``job.run_flow``): the encoder's first batch waits for that import, which otherwise began only when
    the step built its operators, and the run's start leaves a core idle meanwhile (Branch over 2M lines
    to Parquet: 0.83 s against 0.935 s, medians of 12 interleaved runs). An error is the encoder's to
    report, when it imports again."""
    import threading

    def run():
        try:
            _import_arrow_for_parquet()
        except BaseException:       # the encoder's own import raises it where it is reported
            pass

    threading.Thread(target=run, name="logetl-import-pyarrow", daemon=True).start()


def _cast_to(target):
    """The options of ``call_function("cast", ...)``: ``Array.cast`` would import ``pyarrow.compute``."""
    try:
        from pyarrow._compute import CastOptions
    except ImportError:     # pragma: no cover
        from pyarrow.compute import CastOptions
    return CastOptions.safe(target)


#: type -> its Parquet column's Arrow type (a function of the pyarrow module, imported on first use)
PARQUET_TYPES = {"string": lambda pa: pa.string(), "integer": lambda pa: pa.int64(), "boolean": lambda pa: pa.bool_()}
# --- times: a timestamp is Parquet's timestamp in microseconds, adjusted to UTC
PARQUET_TYPES[E.TIMESTAMP] = lambda pa: pa.timestamp("us", tz="UTC")
PARQUET_TYPES[E.FLOAT] = lambda pa: pa.float64()


class ParquetWriter:
    """Parquet with the sink's field names, in order, typed by the flow (strings, 64-bit integers,
    booleans, doubles, timestamps in microseconds adjusted to UTC: ``PARQUET_TYPES``), zstd-compressed; one row group per batch, so memory holds one batch. An empty output is a
    file with the schema and no rows.

    Two encoders, chosen on the first batch: logetl's own (``io.parquet``, C) when the batches are the parse
    kernel's Arrow strings (a parse that feeds only Parquet sinks: ``LocalEngine._columns``) and every field
    is a string; pyarrow's for everything else. The notes below are pyarrow's; ``io.parquet`` makes the
    same choices of dictionary and statistics.

    Why it looks like this (bench/output_formats.py, Branch over 2M lines; Parquet took 2.5x the TSV run):

    - Strings come as Arrow strings straight from the parse kernel (``kernel.STRINGS``, written in place
      of the TSV), or as Polars' string views from a frame; neither is cast (Arrow's cast from views cost ~0.15 s of CPU
      and its writer encodes strings faster than views). Only Parquet's own logical types are recorded
      (``store_schema=False``): every reader maps them to plain strings, 64-bit integers, doubles and booleans.
    - Dictionary encoding only for the columns where it holds: decided on the first batch, a column whose
      distinct values would pass the dictionary page limit is written plain. Arrow's writer would build
      that dictionary and abandon it at the limit, for every row group (a log's timestamps: half the
      encoding time, and a file 3x larger than plain + zstd).
    - Statistics where a reader can use them to skip row groups: numbers, booleans, and strings in order
      (``_statistics_columns``); a quarter of the encoding time went into the min and max of strings in no
      order, which skip nothing.
    - With ``background``, the encoding runs in a thread of its own (pyarrow releases the GIL while it
      encodes), which also imports pyarrow: the parse goes on meanwhile. At most QUEUE batches wait for
      it, so memory stays bounded (the parse blocks when the queue is full).
    """

    suffix = ".parquet"
    #: Arrow's writer abandons a column's dictionary when its page passes this (Arrow's default, stated
    #: here so that the up-front choice in ``_dictionary_columns`` and the writer agree)
    DICTIONARY_PAGE_LIMIT = 1 << 20
    #: batches waiting for a background encoder: the encoder is the slower side (Branch over 2M lines: the
    #: parse waits ~0.5 s for it), so one waiting batch keeps it busy; two only added ~15 MB of peak RSS
    QUEUE = 1
    #: a string column counts as in order when this share of neighbours among its first ORDER_SAMPLE
    #: values are (a log's lines from concurrent requests are a little out of order)
    IN_ORDER, ORDER_SAMPLE = 0.9, 16_384

    def __init__(self, file, fields, types, background: bool = False):
        self.file = file
        self.fields, self.types = list(fields), types
        self.writer = None
        self.native: parquet_strings.StringsParquetFile | None = None
        self.thread = None
        self.error: BaseException | None = None
        if background:
            import queue
            import threading

            self.queue = queue.Queue(self.QUEUE)
            self.thread = threading.Thread(target=self._encode, name="logetl-parquet", daemon=True)
            self.thread.start()

    def _schema(self, first=None):
        """The file's Arrow schema: the flow's types; a string field as ``first`` (a table) has it, Arrow
        strings or string views (Parquet's type is the same), so that it needs no cast."""
        import pyarrow as pa

        fields = []
        for f in self.fields:
            kind = PARQUET_TYPES[self.types[f]](pa)
            if first is not None and kind == pa.string() and first.schema.field(f).type == pa.string_view():
                kind = pa.string_view()
            fields.append((f, kind))
        return pa.schema(fields)

    def _open(self, first):
        """Opens the writer, its dictionary columns chosen from ``first`` (a table, or None: no rows)."""
        _import_arrow_for_parquet()     # begun by start_parquet_import when the run started
        self.schema = self._schema(first)
        dictionary, statistics = True, True
        if first is not None:
            first = first if first.schema == self.schema else first.cast(self.schema)
            dictionary, statistics = self._dictionary_columns(first), self._statistics_columns(first)
        self.writer = _arrow_parquet_writer()(
            self.file, self.schema, compression="zstd", use_dictionary=dictionary,
            dictionary_pagesize_limit=self.DICTIONARY_PAGE_LIMIT, write_statistics=statistics, store_schema=False,
            # what pyarrow.parquet.ParquetWriter passes by default, stated for the writer used directly
            version="2.6", writer_engine_version="V2")

    def _dictionary_columns(self, table) -> list[str]:
        """The columns whose distinct values in ``table`` fit one dictionary page (Parquet's plain encoding
        of the dictionary: a 4-byte length per string, 8 bytes per integer). Booleans never: Parquet
        does not dictionary-encode them."""
        import pyarrow as pa

        call = _arrow_compute()
        chosen = []
        for name, column in zip(table.column_names, table.columns):
            if pa.types.is_boolean(column.type):
                continue
            distinct = call("unique", [column])
            if pa.types.is_integer(column.type) or pa.types.is_floating(column.type) or pa.types.is_temporal(column.type):
                size = 8 * len(distinct)
            else:
                lengths = call("binary_length", [call("cast", [distinct], _cast_to(pa.large_string()))])
                size = 4 * len(distinct) + (call("sum", [lengths]).as_py() or 0)
            if size <= self.DICTIONARY_PAGE_LIMIT:
                chosen.append(name)
        return chosen

    def _statistics_columns(self, table) -> list[str]:
        """The columns whose statistics (min, max, nulls per row group) are written: numbers and booleans
        (cheap to compare), and strings in order, or nearly, in ``table``'s first rows (a log's time). Not
        the strings in no order (addresses, requests, sizes as text): their min and max span nearly every
        value in every row group, so they let a reader skip nothing, and they cost a quarter of the
        encoding (two string comparisons a value)."""
        import pyarrow as pa

        call = _arrow_compute()
        chosen = []
        for name, column in zip(table.column_names, table.columns):
            if not (pa.types.is_string(column.type) or pa.types.is_string_view(column.type)):
                chosen.append(name)
                continue
            head = call("cast", [column.slice(0, self.ORDER_SAMPLE)], _cast_to(pa.string()))
            if len(head) < 2:
                chosen.append(name)
                continue
            rising = call("sum", [call("less_equal", [head.slice(0, len(head) - 1), head.slice(1)])]).as_py() or 0
            if rising >= self.IN_ORDER * (len(head) - 1):
                chosen.append(name)
        return chosen

    def _write(self, batch):
        if self.native is not None:
            pieces = self._kernel_strings(batch)
            if pieces is None:
                raise RuntimeError("a Parquet sink written by logetl's encoder was given a frame")
            self.native.write(pieces, len(batch))
            return
        if self.writer is None:
            pieces = self._kernel_strings(batch)
            if pieces is not None:
                self.native = parquet_strings.StringsParquetFile(self.file, self.fields)
                self.native.write(pieces, len(batch))
                return
            self._open(batch.arrow())
        self.writer.write_table(batch.arrow(self.schema))

    def _kernel_strings(self, batch):
        """The batch's columns for logetl's own encoder (``io.parquet``), field by field as the pieces
        ``(offsets, values, count)`` of its parsed chunks; None when that encoder does not take it: not all
        strings, records that are not the kernel's Arrow strings, or no libzstd."""
        if batch._frame is not None or not batch.parsed or any(p.strings is None for p in batch.parsed) \
                or any(self.types[f] != "string" for f in self.fields) or not parquet_strings.available():
            return None
        index = [batch.fields.index(f) for f in self.fields]
        columns = [[] for _ in self.fields]
        for p in batch.parsed:
            n, (offsets, values) = p.n_records, p.strings
            offsets = memoryview(offsets)
            for column, k in zip(columns, index):
                column.append((offsets[k * (n + 1) * 4:(k + 1) * (n + 1) * 4], values[k], n))
        return columns

    def _encode(self):
        """The background encoder: batches from the queue until None. After a failure it keeps taking
        them (so that ``write`` never blocks on a full queue) and the next ``write`` or ``close`` raises."""
        while True:
            batch = self.queue.get()
            if batch is None:
                break
            if self.error is None:
                try:
                    self._write(batch)
                except BaseException as exc:       # raised in the run's thread, by write or close
                    self.error = exc
        if self.error is None:
            try:
                self._close_writer()
            except BaseException as exc:
                self.error = exc

    def _close_writer(self):
        if self.native is not None:
            self.native.close()
            return
        if self.writer is None:
            self._open(None)
        self.writer.close()

    def _raise(self):
        if self.error is not None:
            error, self.error = self.error, None
            raise error

    def write(self, batch):
        if self.thread is None:
            self._write(batch)
            return
        self._raise()
        self.queue.put(batch)

    def close(self):
        if self.thread is None:
            self._close_writer()
            return
        self.abort()
        self._raise()

    def abort(self):
        """Ends the background encoder (after what is queued): a run that failed must not leave it
        waiting."""
        if self.thread is not None and self.thread.is_alive():
            self.queue.put(None)
            self.thread.join()
        if self.native is not None:
            self.native.abandon()


class JsonLinesWriter:
    """JSON Lines: one object per record, keys in field order, integers and booleans as JSON values,
    a timestamp as its text (``as_text``), null as ``null`` (Polars' NDJSON writer); floats as JSON numbers
    written as ``render_float`` says (``JSON_NUMBERS``: each is written as a string of its text, then its
    quotes are taken off: a value follows its key, ``{"f":`` or ``,"f":``, which no string's text can hold
    unescaped)."""

    suffix = ".jsonl"

    def __init__(self, file, fields, types):
        import re

        self.file = file
        self.types = types
        numbers = [f for f in fields if types[f] in JSON_NUMBERS]
        self.unquote = re.compile(rb'([{,]"(?:' + b"|".join(re.escape(f.encode()) for f in numbers)
                                  + rb')":)"(-?[0-9]+\.[0-9]+)"') if numbers else None

    def write(self, batch):
        buf = io.BytesIO()
        as_text(batch, self.types).frame().write_ndjson(buf)
        data = buf.getvalue()
        self.file.write(data if self.unquote is None else self.unquote.sub(rb"\1\2", data))

    def close(self):
        pass


#: the sink formats of the local engine: one writer class per format of ``assembly.SINK_FORMATS``
SINK_WRITERS = {"tsv": TsvWriter, "csv": CsvWriter, "parquet": ParquetWriter, "jsonl": JsonLinesWriter}


class SinkOp(Op):
    """Writes records to a staged output in the sink's format; a partitioned sink keeps one writer per
    partition, at most MAX_OPEN_PARTITIONS open at once (a partition written again after its writer was
    closed appends to its file, or starts the next Parquet part, so name order stays input order)."""

    MAX_OPEN_PARTITIONS = 128

    def __init__(self, *args, output: StagedOutput, twin: "SinkOp | None" = None):
        super().__init__(*args)
        node = self.node
        self.kind = SINK_WRITERS[node.format]
        self.output = output
        self.twin = twin
        self.written = 0
        self.open: dict[str, tuple] = {}      # partition -> (file, writer), least recently used first
        self.parts: dict[str, int] = {}       # partition -> number of its current part file
        self.path = output.part + self.kind.suffix
        self.ctx.state.sinks.append(self)
        if not node.partition_by and twin is None:
            # one file: Parquet encodes in a thread of its own, alongside the parse (a partitioned sink
            # keeps up to MAX_OPEN_PARTITIONS writers, and threads for each would only compete)
            self.open[""] = self._start(self.path, "wb", background=self.kind is ParquetWriter)
            if self.kind is ParquetWriter:
                self.ctx.state.encoders.append(self.open[""][1])

    def copy_from_twin(self) -> None:
        """Its twin wrote the same records: the same bytes, copied (in the kernel where it can)."""
        shutil.copyfile(self.twin.path, self.path)

    def _start(self, path: str, mode: str, background: bool = False):
        f = open(path, mode)
        extra = {"background": True} if background else {}
        if issubclass(self.kind, TsvWriter):       # a file appended to has its header already
            extra["header"] = self.node.header and mode == "wb"
        return f, self.kind(f, self.node.file_fields, self.node.types, **extra)

    def _writer(self, leaf: str):
        found = self.open.pop(leaf, None)
        if found is None:
            if len(self.open) >= self.MAX_OPEN_PARTITIONS:
                oldest = next(iter(self.open))
                self._close(self.open.pop(oldest))
            directory = os.path.join(self.output.staging, leaf)
            if leaf in self.parts:
                appendable = self.kind is not ParquetWriter
                self.parts[leaf] += 0 if appendable else 1
                mode = "ab" if appendable else "wb"
            else:
                os.makedirs(directory, exist_ok=True)
                self.parts[leaf], mode = 0, "wb"
            found = self._start(os.path.join(directory, f"part-{self.parts[leaf]:05d}{self.kind.suffix}"), mode)
        self.open[leaf] = found
        return found[1]

    @staticmethod
    def _close(opened) -> None:
        f, writer = opened
        writer.close()
        f.close()

    def process(self, batch, port):
        node = self.node
        if self.twin is not None:
            pass                                # the twin writes these records; copied at the end
        elif len(batch) and not node.partition_by:
            self.open[""][1].write(batch)
        elif len(batch):
            by, fields = list(node.partition_by), list(node.file_fields)
            for key, part in batch.frame().partition_by(by, as_dict=True, maintain_order=True).items():
                leaf = "/".join(partition_name(f, v) for f, v in zip(by, key))
                self._writer(leaf).write(Batch(fields, part.select(fields)))
        self.written += len(batch)
        self.emit(batch)

    def discard(self) -> None:
        """Closes the files a failed run left open, without finishing them (they are staged: discarded)."""
        for f, _writer in self.open.values():
            f.close()
        self.open = {}

    def finish(self):
        for opened in self.open.values():
            self._close(opened)
        self.open = {}
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


class Fused:
    """A chunk parsed and run through the per-record operators that follow the parse (in a parse thread):
    the kernel's result, the last operator's frame, and each operator's (records in, records out)."""

    __slots__ = ("parsed", "frame", "sizes")

    def __init__(self, parsed, frame, sizes):
        self.parsed, self.frame, self.sizes = parsed, frame, sizes


class ParseOp(Op):
    """Receives kernel results from the source; accounts for malformed lines and traps them.

    The chain of per-record operators that follows a parse which builds columns (``fusable``) runs in the
    parse threads, chunk by chunk (``fuse``: Polars releases the GIL, so they run beside this thread,
    which only accounts for their records and passes the last one's frames on, in input order); chunks
    parsed before the operators were built go through them here. The two kinds may alternate around the
    moment of the fusion: each kind's held records are passed on before the other kind's next chunk."""

    def __init__(self, *args, trap_file=None):
        super().__init__(*args)
        self.trap_file = trap_file
        self.path, self.line_base, self.where = None, 0, None
        self.pending: list[kernel.Parsed] = []
        self.pending_rows = 0
        self.chain: list[PerRecordOp] = []
        self.fused: list[Fused] = []
        self.fused_parsed = 0       # records the kernel parsed in the chunks held in ``fused``

    def fusable(self) -> list:
        """The per-record operators that follow this parse one after the other, each the only reader of
        the one before."""
        chain, op = [], self
        while len(op.children) == 1:
            child, _ = op.children[0]
            if not child.node.traits.maps_records or child.n_inputs != 1:
                break
            chain.append(child)
            op = child
        return chain

    def fuse(self, chain: list) -> "callable":
        """What a parse thread runs on each parsed chunk once ``chain`` is fused."""
        self.chain = chain
        fields = self.node.fields

        def run(parsed):
            frame = parsed.frame(fields)
            sizes = []
            for op in chain:
                n = frame.height
                if n:
                    frame = op.map(frame)
                sizes.append((n, frame.height))
            return Fused(parsed, frame, sizes)

        return run

    def consume(self, result, path: str) -> None:
        st = self.state
        parsed = result.parsed if isinstance(result, Fused) else result
        if path != self.path:
            self.path, self.line_base = path, 0
            # an incremental run reads a file from where the last one stopped: its line numbers count from
            # there, and the sample says so (``FILE@BYTE:LINE``)
            start = (self.ctx.taps.ranges or {}).get(path, (0, None))[0]
            self.where = f"{path}@{start}" if start else path
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
                    samples.append((f"{self.where}:{self.line_base + line + 1}", reason, text))
            if self.trap_file is not None:
                self.trap_file.write(b"".join(bytes(data[s:e]) + b"\n" for _, s, e, _ in parsed.malformed))
        self.line_base += parsed.n_lines
        parsed.data = None  # trapped and sampled: the raw chunk is not needed any more
        if isinstance(result, Fused):
            self._flush()   # chunks parsed before the fusion go first
            self.fused.append(result)
            # batched by the records parsed, as unfused chunks are, not by the records left: a fused
            # frame is a view into its whole chunk, so a filter that keeps few records would otherwise
            # hold a hundred chunks before a batch filled (Filter: 230 MB at 2M lines, 331 MB at 10M)
            self.fused_parsed += result.parsed.n_records
            if self.fused_parsed >= BATCH_ROWS:
                self._flush_fused()
            return
        # and fused chunks go before a later one that was not fused: the parse threads look at the fusion
        # when a chunk is parsed, so one that began earlier may be fused and a later one not
        self._flush_fused()
        self.pending.append(parsed)
        self.pending_rows += parsed.n_records
        if self.pending_rows >= BATCH_ROWS:
            self._flush()

    def _flush(self):
        if self.pending:
            self.emit(Batch(self.node.fields, parsed=self.pending))
        self.pending, self.pending_rows = [], 0

    def _flush_fused(self):
        """The fused chunks' records counted as each operator would count them, and the last operator's
        frames passed on as one batch."""
        if not self.fused:
            return
        st, fused = self.state, self.fused
        self.fused, self.fused_parsed = [], 0
        parsed = sum(f.parsed.n_records for f in fused)
        if parsed:
            st.count(self.node.name, "out", parsed)
        for i, op in enumerate(self.chain):
            n_in, n_out = sum(f.sizes[i][0] for f in fused), sum(f.sizes[i][1] for f in fused)
            if n_in:
                st.count(op.node.name, "in", n_in)
            if n_out:
                st.count(op.node.name, "out", n_out)
        frames = [f.frame for f in fused if f.frame.height]
        if not frames:
            return
        frame = _pl().concat(frames, rechunk=False) if len(frames) > 1 else frames[0]
        last = self.chain[-1]
        batch = Batch(last.node.fields, frame, shares_chunk=True)
        for child, port in last.children:
            child.push(batch, port)

    def finish(self):
        self._flush()
        self._flush_fused()


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


class Scan:
    """Parsed chunks of the input files in order (iterate it); the kernel runs ahead on ``threads`` threads
    (with ``parser``'s format and fields; default the original expression). ``ranges`` and ``reached``: an
    incremental run's bytes to read (``inputs.read_chunks``); files without new bytes are not opened.
    ``identities``: the device and inode of each file the incremental run planned (``inputs.open_planned``).

    A plain file is read by the parse threads themselves (``inputs.regions``: this thread only finds where
    the pieces end), so that reading runs beside the operators; a compressed file or standard input is
    read here, as one stream (``inputs.read_chunks``). ``start()`` sets the threads to work before the
    caller iterates: a step starts its scans before it builds its operators, whose first use of Polars
    imports it (~0.13 s, holding the GIL, which the kernel does not need)."""

    def __init__(self, files: list[str], on_bytes=None, threads: int = PARSE_THREADS, columns: int = kernel.VIEWS,
                 chunk: int = inputs.CHUNK, parser: kernel.Parser | None = None, ranges: dict | None = None,
                 reached: dict | None = None, identities: dict | None = None):
        self.parse = parser.parse if parser is not None else kernel.parse
        self.files, self.on_bytes, self.threads, self.columns = files, on_bytes, threads, columns
        self.chunk, self.ranges, self.reached, self.identities = chunk, ranges, reached, identities or {}
        # chunks parsed ahead: enough that the parse threads keep working while the main thread runs the
        # step's operators on a batch (measured: status_by_hour 1.9 s -> 1.5 s from 4 to 8 chunks, +30 MB)
        self.depth = threads * 4
        self.pool = None
        self.then = None                # what the parse threads run on each parsed chunk (ParseOp.fuse)
        self.pending: deque = deque()   # (future, path, bytes it covers or None, whether the file's last piece)
        self.opened: dict[str, int] = {}
        self.pieces = None

    def _read_and_parse(self, fd, offset, length, final, path):
        return self._parse(inputs.read_region(fd, offset, length, path), final)

    def _parse(self, data, final):
        parsed = self.parse(data, final, self.columns)
        then = self.then
        return then(parsed) if then is not None else parsed

    def _plan(self):
        """What to parse, as (submit arguments, path, bytes, last piece of its file), in order."""
        for path in self.files:
            # an incremental run reads only the files its plan gives a range of bytes
            start, bound = self.ranges.get(path, (0, 0)) if self.ranges is not None else (0, None)
            if bound is not None and bound <= start:
                continue
            if inputs.plain(path):
                fd = self.opened[path] = inputs.open_plain(path, self.identities.get(path))
                pos = start
                for offset, length, final in inputs.regions(fd, path, self.chunk, start, bound):
                    yield (self._read_and_parse, fd, offset, length, final, path), path, length, final
                    pos = offset + length
                if self.reached is not None:
                    self.reached[path] = pos
                if path in self.opened and not (self.pending and self.pending[-1][1] == path):
                    os.close(self.opened.pop(path))   # no piece of it is left to read
                continue
            for data, final in inputs.read_chunks([path], self.chunk, on_bytes=self.on_bytes, ranges=self.ranges,
                                                  reached=self.reached, identities=self.identities):
                yield (self._parse, data, final), path, None, False

    def _fill(self) -> None:
        while len(self.pending) < self.depth:
            item = next(self.pieces, None)
            if item is None:
                return
            call, path, n, last = item
            self.pending.append((self.pool.submit(*call), path, n, last))

    def start(self) -> "Scan":
        if self.pool is None:
            self.pool = ThreadPoolExecutor(self.threads, thread_name_prefix="logetl-parse")
            self.pieces = self._plan()
            try:
                self._fill()
            except BaseException:
                self.close()
                raise
        return self

    def __iter__(self):
        self.start()
        try:
            while self.pending:
                fut, path, n, last = self.pending.popleft()
                result = fut.result()
                if self.on_bytes is not None and n is not None:
                    self.on_bytes(n)
                if last and path in self.opened:
                    os.close(self.opened.pop(path))
                self._fill()
                yield result, path
        finally:
            self.close()

    def close(self) -> None:
        for fut, *_ in self.pending:
            fut.cancel()
        self.pending.clear()
        if self.pool is not None:
            self.pool.shutdown(wait=True)   # no thread reads the files any more
        if self.pieces is not None:
            self.pieces.close()
        for fd in self.opened.values():
            os.close(fd)
        self.opened.clear()


def scan(files: list[str], **options):
    """``Scan(files, ...)``, iterated."""
    return iter(Scan(files, **options))


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
        for encoder in self.encoders:
            encoder.abort()
        for sink in self.sinks:
            sink.discard()      # a failed run's files (a run_flow caller's process goes on; its mounts too)
        if self.trap_file is not None and not self.trap_file.closed:
            self.trap_file.close()
        shutil.rmtree(self.spill_root, ignore_errors=True)
        super().close(ok)


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
        """An incremental run commits each output with its state (``incremental.commit_output``), or, with
        nothing new to read, changes nothing."""
        plan = ctx.taps.incremental
        if plan is None:
            return super().commit(ctx)
        from logetl import incremental

        if plan.nothing_new:
            # a compressed file decompressed to its end for nothing: the outputs' state records it, so that
            # the next runs do not decompress it again (their parts, run and inputs stay)
            fresh = incremental.read_to_end(plan)
            for out in ctx.state.staged():
                kept = plan.outputs[out.path]
                if fresh and kept.state is not None and not kept.resumed:
                    incremental.record_read(kept, out.staging, plan, fresh)
                else:
                    out.discard()
            names = [os.path.basename(r["file"]["path"]) for r in fresh]
            shown = ", ".join(names[:incremental.SHOWN_FILES]) + (
                f" and {len(names) - incremental.SHOWN_FILES} more" if len(names) > incremental.SHOWN_FILES else "")
            self._notice(ctx.run, ctx.listener, f"nothing new since run {plan.base_run}: the outputs are unchanged"
                         + (f" but for their state, which records {shown} as read to the end (not decompressed "
                            "again)" if fresh else ""))
            return
        incremental.finish_state(plan)
        trapped = sum(ctx.run.malformed.values())
        for out in ctx.state.staged():
            kept = plan.outputs[out.path]
            incremental.commit_output(kept, out.staging, plan,
                                      trapped if kept.tap == incremental.TRAP else ctx.run.written.get(kept.tap, 0))

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
                    identities=plan.identities if plan is not None else None)

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
        views); else the TSV and string views over it, which Polars takes without a copy."""
        todo, seen, strings, tsv = [parse], set(), False, False
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
                if type(child) not in (assembly.Pipe, assembly.Sink) or child not in step.nodes \
                        or child in step.writes or (isinstance(child, assembly.Sink) and (
                            child.format != "tsv" or child.partition_by)):
                    return kernel.VIEWS
                tsv = tsv or isinstance(child, assembly.Sink)
                todo.append(child)
        if parse in step.writes or (strings and tsv):
            return kernel.VIEWS
        if strings and any(parse.format.nullable(f) for f in parse.fields):
            return kernel.VIEWS     # logetl's own Parquet encoder of the kernel's strings writes no null
        return kernel.STRINGS if strings else kernel.NONE

    def finish_trap(self, ctx):
        local: LocalRun = ctx.state
        if local.trap_file:
            local.trap_file.close()
        if os.path.exists(local.work.trap_part):
            shutil.copyfile(local.work.trap_part, local.trap.part)
