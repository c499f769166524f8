"""The local engine's reads: the parse threads' scan of the input files (``Scan``), the parse's operator
(``ParseOp``, which fuses the per-record chain after it into those threads) and a stored intermediate's
reader (``StoreReader``)."""
from __future__ import annotations

import os
import stat
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from logetl import contract, settings
from logetl.engines import kernel
from logetl.io import inputs
from logetl.engines.local.batch import Batch, _pl
from logetl.engines.local.operators import Op, PerRecordOp


PARSE_THREADS = 2


MIN_SPLIT_CHUNK = 256 << 10   # a small read is split between the parse threads down to chunks this big


BATCH_ROWS = 131_072          # kernel chunks are coalesced into batches this big: Polars calls pay per call


SMALL_FILE = 64 << 10         # plain files below this are read together, as one piece: a piece, its parse
                              # and its frame cost about 1 ms each, whatever their size


class FileGroup(tuple):
    """Small plain files read and parsed as one piece (in order; each ends with a line break in the piece):
    ``lines`` is how many lines each holds, filled in by the parse thread, to number its lines."""

    lines: list

    def where(self, line: int) -> tuple[str, int]:
        """(the file, its line number from 0) of the piece's ``line``."""
        for path, n in zip(self, self.lines):
            if line < n:
                return path, line
            line -= n
        raise IndexError(line)


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

    def _at(self, path) -> None:
        if isinstance(path, FileGroup):
            return      # small files parsed together: their lines are numbered by ``_consume_group``
        if path != self.path:
            self.path, self.line_base = path, 0
            # an incremental run reads a file from where the last one stopped: its line numbers count from
            # there, and the sample says so (``FILE@BYTE:LINE``)
            start = (self.ctx.taps.ranges or {}).get(path, (0, None))[0]
            self.where = f"{path}@{start}" if start else path

    def _too_long(self, line: inputs.LongLine) -> None:
        """A line longer than the limit: one line read, malformed (``too_long``), sampled with its size and
        first bytes, and trapped whole, copied a piece at a time."""
        st = self.state
        try:
            st.lines_read += 1
            st.count(self.node.name, "in", 1)
            st.malformed[contract.TOO_LONG] = st.malformed.get(contract.TOO_LONG, 0) + 1
            samples = self.ctx.run.malformed_samples
            if len(samples) < 5:
                samples.append((f"{self.where}:{self.line_base + 1}", contract.TOO_LONG,
                                f"{line.size:,} bytes: {contract.display(line.head)}"))
            if self.trap_file is not None:
                line.copy_to(self.trap_file)
                self.trap_file.write(b"\n")
            self.line_base += 1
        finally:
            line.close()

    def consume(self, result, path: str) -> None:
        st = self.state
        self._at(path)
        if isinstance(result, inputs.LongLine):
            self._too_long(result)
            return
        parsed = result.parsed if isinstance(result, Fused) else result
        if isinstance(path, FileGroup):
            self._consume_group(parsed, path)
        st.lines_read += parsed.n_lines
        st.count(self.node.name, "in", parsed.n_lines)
        st.dropped_size_dash += parsed.n_dash
        st.header_lines += parsed.n_header
        st.non_http_lines += parsed.n_other
        if parsed.malformed and not isinstance(path, FileGroup):
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
        if isinstance(path, FileGroup):
            self.path = None    # the next file numbers its lines from 1
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

    def _consume_group(self, parsed, group: FileGroup) -> None:
        """The malformed lines of small files parsed together, counted, sampled and trapped as those of each
        file (line numbers within it)."""
        st, samples, data = self.state, self.ctx.run.malformed_samples, parsed.data
        for line, start, end, code in parsed.malformed:
            reason = kernel.REASON_NAMES[code]
            st.malformed[reason] = st.malformed.get(reason, 0) + 1
            if len(samples) < 5:
                path, number = group.where(line)
                text = contract.display(data[start:end])
                why = self.node.format.why(bytes(data[start:end])) if code == 2 else None
                samples.append((f"{path}:{number + 1}", reason, f"{why}: {text}" if why else text))
        if self.trap_file is not None and parsed.malformed:
            self.trap_file.write(b"".join(bytes(data[s:e]) + b"\n" for _, s, e, _ in parsed.malformed))

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

    def resolve(self, find=None):
        """``find()``'s result (a chunk's pieces and their last ``#Fields:`` line, or None) as (its pieces,
        the last ``#Fields:`` line before the chunk: None for none), once the chunk before has said that;
        the chunk's own last one is said on to the next, as is the one before when it has none (or when
        ``find`` is None or fails: a chunk that cannot be read holds no header of its own)."""
        pieces = own = None
        try:
            if find is not None:
                pieces, own = find()
        finally:
            self.prev.done.wait()
            before = self.prev.after
            self.after = own if own is not None else before
            self.prev = None
            self.done.set()
        return pieces, before


def _last_fields(pieces: list) -> bytes | None:
    """The last ``#Fields:`` line of the pieces of a chunk that are parsed (not its ``inputs.LongLine``)."""
    from logetl import w3c

    for piece in reversed(pieces):
        if not isinstance(piece, inputs.LongLine) and (got := w3c.last_fields(piece)) is not None:
            return got[1]
    return None


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
                 reached: dict | None = None, identities: dict | None = None, limit: int | None = None,
                 keep: bool = True):
        self.parse = parser.parse if parser is not None else kernel.parse
        # lines longer than ``limit`` (``LOGETL_MAX_LINE``) come as ``inputs.LongLine`` among the parsed
        # chunks; a stream's are spooled to a temporary file only when they are kept (``keep``: a trap)
        self.limit = settings.MAX_LINE.read() if limit is None else limit
        self.keep = keep
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
        try:
            data = inputs.read_region(fd, offset, length, path)
        except BaseException:
            if link is not None:
                link.resolve()    # the chunks after this one are not left waiting for it
            raise
        return self._parse(data, final, link)

    def _parse(self, data, final, link=None) -> list:
        """The results of a piece of whole lines (a parsed chunk, or ``then``'s of it), in order: more than
        one around the lines in it longer than the limit (``inputs.LongLine``, not parsed). ``link``: the
        piece's place in its file for a segmented format (``_Link``)."""
        if isinstance(data, inputs.LongLine):
            if link is not None:
                link.resolve()    # (a line too long is no ``#Fields:`` line: the columns go on)
            return [data]
        if link is None:
            pieces, before = inputs.split_long(data, final, self.limit), None
        else:
            def find():
                got = inputs.split_long(data, final, self.limit)
                return got, _last_fields(got)

            pieces, before = link.resolve(find)
        out = []
        for i, piece in enumerate(pieces):
            if isinstance(piece, inputs.LongLine):
                out.append(piece)
                continue
            last = final and i == len(pieces) - 1
            if link is not None:    # each piece after the ``#Fields:`` line before it
                parsed = self.parser.parse_from(piece, last, self.columns, before)
                before = _last_fields([piece]) or before
            else:
                parsed = self.parse(piece, last, self.columns)
            then = self.then
            out.append(then(parsed) if then is not None else parsed)
        return out

    @staticmethod
    def _long(fd, offset, length, path):
        return [inputs.LongLine.of_file(fd, offset, length, path)]

    def _read_group(self, group: FileGroup):
        """Small files as one piece: each file's bytes, with a line break after an unterminated last line
        (which the kernel reads as the line it is at the end of a file)."""
        pieces, group.lines = [], []
        for path in group:
            fd = inputs.open_plain(path)
            try:
                data = inputs.read_region(fd, 0, os.fstat(fd).st_size, path)
            finally:
                os.close(fd)
            if data and not data.endswith(b"\n"):
                data += b"\n"
            pieces.append(data)
            group.lines.append(data.count(b"\n"))
        return self._parse(b"".join(pieces), True)

    def _plan(self):
        """What to parse, as (submit arguments, path, bytes, last piece of its file), in order: small plain
        files together (``FileGroup``), unless the run reads ranges of bytes (an incremental run)."""
        group, group_bytes = [], 0
        for path in self.files:
            # an incremental run reads only the files its plan gives a range of bytes
            start, bound = self.ranges.get(path, (0, 0)) if self.ranges is not None else (0, None)
            if bound is not None and bound <= start:
                continue
            # (a segmented format's file starts with its own columns: never parsed with another's lines)
            size = _small_plain(path) if self.ranges is None and not self.segmented else None
            # a file no longer than the line limit holds no line over it: its lines are all parsed together
            if size is not None and size <= self.limit:
                group.append(path)
                group_bytes += size
                if group_bytes >= self.chunk:
                    yield self._group(group, group_bytes)
                    group, group_bytes = [], 0
                continue
            if group:
                yield self._group(group, group_bytes)
                group, group_bytes = [], 0
            link = _Link(None, fields_before(path, start)) if self.segmented else None
            if inputs.plain(path):
                fd = self.opened[path] = inputs.open_plain(path, self.identities.get(path))
                pos = start
                for offset, length, final, long in inputs.pieces(fd, path, self.chunk, start, bound, self.limit):
                    if long:    # a line too long to read: kept aside, its bytes read again only to be trapped
                        n = length + (0 if final and offset + length == os.fstat(fd).st_size else 1)
                        yield (self._long, fd, offset, length, path), path, n, final
                        pos = offset + n
                        continue
                    call = (self._read_and_parse, fd, offset, length, final, path)
                    if link is not None:    # (a segmented format's chunk: its place in the file)
                        link = _Link(link)
                        call += (link,)
                    yield call, path, length, final
                    pos = offset + length
                if self.reached is not None:
                    self.reached[path] = pos
                if path in self.opened and not (self.pending and self.pending[-1][1] == path):
                    os.close(self.opened.pop(path))   # no piece of it is left to read
                continue
            for data, final in inputs.read_chunks([path], self.chunk, on_bytes=self.on_bytes, ranges=self.ranges,
                                                  reached=self.reached, identities=self.identities,
                                                  limit=self.limit, keep=self.keep):
                call = (self._parse, data, final)
                if link is not None:
                    link = _Link(link)
                    call += (link,)
                yield call, path, None, False
        if group:
            yield self._group(group, group_bytes)

    def _group(self, paths: list[str], n: int):
        group = FileGroup(paths)
        return (self._read_group, group), group, n, False

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
                results = fut.result()
                if self.on_bytes is not None and n is not None:
                    self.on_bytes(n)
                if last and path in self.opened:
                    os.close(self.opened.pop(path))
                self._fill()
                for result in results:
                    yield result, path
        finally:
            self.close()

    def close(self) -> None:
        for fut, *_ in self.pending:
            if not fut.cancel() and fut.done() and fut.exception() is None:
                for result in fut.result():     # a too-long line's descriptor or spool, not consumed
                    if isinstance(result, inputs.LongLine):
                        result.close()
        self.pending.clear()
        if self.pool is not None:
            self.pool.shutdown(wait=True)   # no thread reads the files any more
        if self.pieces is not None:
            self.pieces.close()
        for fd in self.opened.values():
            os.close(fd)
        self.opened.clear()


def _small_plain(path: str) -> int | None:
    """The size of ``path`` when it is a plain file below ``SMALL_FILE``, else None."""
    if path == inputs.STDIN or inputs.compressed(path):
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None     # read on its own, which says why it cannot be
    return st.st_size if stat.S_ISREG(st.st_mode) and st.st_size < SMALL_FILE else None


def scan(files: list[str], **options):
    """``Scan(files, ...)``, iterated."""
    return iter(Scan(files, **options))
