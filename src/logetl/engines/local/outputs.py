"""The local engine's operators that write: a sink's part files (``SinkOp``) and a stored intermediate
for later steps (``StoreWriter``)."""
from __future__ import annotations

import os
import shutil

from logetl.io.outputs import StagedOutput, partition_name
from logetl.engines.local.batch import Batch, _pl
from logetl.engines.local.operators import Op
from logetl.io.writers import ParquetWriter, SINK_WRITERS, TsvWriter


STORE_ROWS = 131_072          # rows buffered before a stored part is written


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
            try:
                f.close()
            except OSError:
                pass        # what it buffered is discarded with it (a full file system fails the flush)
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
