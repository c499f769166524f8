"""The local engine's reads: the parse threads' scan of the input files (``Scan``), the parse's operator
(``ParseOp``, which fuses the per-record chain after it into those threads) and a stored intermediate's
reader (``StoreReader``)."""
from __future__ import annotations

import os
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from logetl import contract
from logetl.engines import kernel
from logetl.io import inputs
from logetl.engines.local.batch import Batch, _pl
from logetl.engines.local.operators import Op, PerRecordOp


PARSE_THREADS = 2


MIN_SPLIT_CHUNK = 256 << 10   # a small read is split between the parse threads down to chunks this big


BATCH_ROWS = 131_072          # kernel chunks are coalesced into batches this big: Polars calls pay per call


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
        st.header_lines += parsed.n_header
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


class _Link:
    """A chunk's place in its file for a format whose columns change within it (``w3c``): the chunk's parse
    needs the last ``#Fields:`` line before it, which the chunks before it give. Each chunk's parse first
    finds its own last one (a search, no parse), then takes the one before it from the link before and
    says its own on: so the parse threads wait only for the chunks before theirs to have started (the pool
    starts them in order), never for their parse."""

    __slots__ = ("prev", "after", "done")

    def __init__(self, prev: "_Link | None", after: bytes | None = None):
        self.prev, self.after, self.done = prev, after, threading.Event()
        if prev is None:
            self.done.set()

    def parse(self, parser, data, final: bool, columns: int):
        from logetl import w3c

        try:
            own = w3c.last_fields(data)
            self.prev.done.wait()
            before = self.prev.after
            self.after = own[1] if own else before
        finally:
            self.prev = None
            self.done.set()
        return parser.parse_from(data, final, columns, before)


def fields_before(path: str, start: int) -> bytes | None:
    """The last ``#Fields:`` line of ``path`` before byte ``start`` (an incremental run that reads a ``w3c``
    log from where the last one stopped), or None."""
    from logetl import w3c

    if start <= 0:
        return None
    found, done, tail = None, 0, b""
    with inputs.open_input(path) as f:
        while done < start:
            block = f.read(min(1 << 20, start - done))
            if not block:
                break
            data = tail + block
            got = w3c.last_fields(data)
            if got is not None and data.find(b"\n", got[0]) >= 0:   # (a line cut by the block: next time)
                found = got[1]
            cut = data.rfind(b"\n")
            tail, done = data[cut + 1:] if cut >= 0 else data, done + len(block)
    return found


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
        self.parser = parser
        #: the format's columns change within a file (w3c): each chunk is parsed after the header before it
        self.segmented = parser is not None and parser.segmented
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

    def _read_and_parse(self, fd, offset, length, final, path, link=None):
        return self._parse(inputs.read_region(fd, offset, length, path), final, link)

    def _parse(self, data, final, link=None):
        parsed = link.parse(self.parser, data, final, self.columns) if link is not None \
            else self.parse(data, final, self.columns)
        then = self.then
        return then(parsed) if then is not None else parsed

    def _plan(self):
        """What to parse, as (submit arguments, path, bytes, last piece of its file), in order."""
        for path in self.files:
            # an incremental run reads only the files its plan gives a range of bytes
            start, bound = self.ranges.get(path, (0, 0)) if self.ranges is not None else (0, None)
            if bound is not None and bound <= start:
                continue
            link = _Link(None, fields_before(path, start)) if self.segmented else None
            if inputs.plain(path):
                fd = self.opened[path] = inputs.open_plain(path, self.identities.get(path))
                pos = start
                for offset, length, final in inputs.regions(fd, path, self.chunk, start, bound):
                    link = _Link(link) if link is not None else None
                    yield (self._read_and_parse, fd, offset, length, final, path, link), path, length, final
                    pos = offset + length
                if self.reached is not None:
                    self.reached[path] = pos
                if path in self.opened and not (self.pending and self.pending[-1][1] == path):
                    os.close(self.opened.pop(path))   # no piece of it is left to read
                continue
            for data, final in inputs.read_chunks([path], self.chunk, on_bytes=self.on_bytes, ranges=self.ranges,
                                                  reached=self.reached, identities=self.identities):
                link = _Link(link) if link is not None else None
                yield (self._parse, data, final, link), path, None, False

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
