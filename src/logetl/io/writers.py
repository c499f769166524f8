"""The local engine's file writers, one per sink format: TSV, CSV, Parquet (through logetl's own
encoder, or Arrow for what it does not write) and JSON Lines; each writes a ``Batch``'s records."""
from __future__ import annotations

import io

from logetl import assembly, settings
from logetl import expressions as E
from logetl.engines.local.expressions import (
    SINK_TEXT, _text)
from logetl.io import parquet as parquet_strings
from logetl.io.outputs import header_line
from logetl.engines.local.batch import Batch, _pl


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
        self.encoder_takes_lines = parquet_strings.takes(settings.MAX_LINE.read())
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
        # a parsed field is never longer than its line: when lines longer than the encoder's values are
        # read, pyarrow's writer (which takes values up to 2 GiB) writes the file from its start
        if not self.encoder_takes_lines:
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
