"""The ends of a flow: its input (``Source``), the read that parses it (``Parse``, and ``DropSizeDash``,
which the read does in its own scan) and its outputs (``Sink``)."""
from __future__ import annotations

from logetl import formats
from logetl.assembly.base import AssemblyError, MissingField, Pipe
from logetl.expressions import FLOAT, STRING, TIMESTAMP, field_name
from logetl.traits import PARSE_FOLD, STREAM


class Source(Pipe, traits=STREAM):
    """The input tap: raw lines of the input files, in input order (files in name order). Bound to the
    paths at run time under the tap name ``tap``."""

    kind = "source"

    def __init__(self, name: str | None = "input", tap: str = "input"):
        self.tap = tap
        super().__init__(name)

    def _resolve(self) -> None:
        self.fields = ("line",)
        self.types = {"line": "bytes"}

    def describe(self) -> str:
        return f"tap {self.tap}"


class Parse(Pipe, traits=STREAM):
    """Applies the line contract to the lines of a Source with log format ``format``
    (``logetl.formats``; default ``combined``, the original expression): counts malformed lines by reason
    and sends them to the trap, and emits every other line as a record: the fields ``keep`` (the format's
    field names, in that order; default all of them) as strings, in input order (``combined`` has ``ip,
    time, request, response, size, referer, user_agent``; its last two are null on a line without their
    tail). Only the fields kept are copied out of the line. Streaming: holds one batch at a time.

    ``drops_size_dash`` is set when the flow folded a ``DropSizeDash`` step into this parse (``Flow``): the
    kernel then drops the records whose size is ``-`` in its scan, counted as ``dropped_size_dash``."""

    kind = "parse"

    def __init__(self, name: str | None, previous: Pipe, format: "formats.LogFormat | None" = None,
                 keep: tuple[str, ...] | None = None):
        self.format = format or formats.LEGACY
        self.keep = tuple(keep) if keep else None
        self.drops_size_dash = False
        super().__init__(name, previous)

    def _resolve(self) -> None:
        if not isinstance(self._input(), Source):
            raise AssemblyError(f"parse {self.label} must read a source")
        fmt = self.format
        for f in self.keep or ():
            field_name(f)
        twice = sorted({f for f in self.keep or () if self.keep.count(f) > 1})
        if twice:
            raise AssemblyError(f"parse {self.label}: field {twice[0]!r} is named twice")
        for f in self.keep or ():
            if f not in fmt.fields:
                raise MissingField(formats.missing_field(fmt, f), f)
        self.fields = self.keep or fmt.fields
        self.types = {f: STRING for f in self.fields}

    def describe(self) -> str:
        what = "line contract" if self.format.legacy else self.format.describe()
        return what + ("; drop size '-'" if self.drops_size_dash else "")


class DropSizeDash(Pipe, traits=PARSE_FOLD):
    """The three programs' rule: drops the records whose ``size`` (the log format's, whether the read keeps
    it or not) is exactly ``-``, counted as ``dropped_size_dash`` (the summary's ``dropped (size '-')``); a
    format without ``size`` drops nothing. It reads a ``read`` (``Parse``) directly, as that read's only
    consumer: the flow folds it into the read (``folds_into_parse``), whose kernel drops those records in its
    scan, on every engine. Streaming, order-preserving."""

    kind = "drop_size_dash"
    #: a step the parse before it does in its own scan: ``Flow`` folds it into that parse

    def _resolve(self) -> None:
        if not isinstance(self._input(), Parse):
            raise AssemblyError(f"drop_size_dash {self.label} must read a read() directly "
                                f"(L.read(...).drop_size_dash()), not {self._input().kind} {self._input().label}")
        self._inherit()

    def fold(self, parse: Parse) -> None:
        """Makes ``parse`` do this step."""
        parse.drops_size_dash = True

    def describe(self) -> str:
        return "drop size '-'"


#: the types a sink does not partition by: type -> what to do instead (a directory name per second, with
#: ``:`` escaped, is no use to anyone)
UNPARTITIONED = {TIMESTAMP: "partition by a string of it (trunc_local(time, 'day'), day(time), ...)",
                 FLOAT: "partition by a string or an integer (round(...).to_int() or to_string())"}

#: what a sink can write: the contract's TSV (the default), CSV, Parquet, JSON Lines
SINK_FORMATS = ("tsv", "csv", "parquet", "jsonl")
#: the formats that may start each part file with a header line (the field names): whether they do by default
HEADERS = {"tsv": False, "csv": True}


class Sink(Pipe, traits=STREAM):
    """Writes its input to the output tap named ``tap``, in input order, committed atomically, as
    ``format``:

    - ``tsv`` (default): fields in order, no header, ``\\n`` line ends, integers in decimal, floats as
      ``expressions.render_float`` (``0.5``, ``3.0``, no exponent), booleans ``true``/``false``, timestamps
      ``2015-05-17T10:05:03Z``, null as the empty field; no quoting (no field holds TAB, CR or LF);
    - ``csv`` (RFC 4180): fields in order separated by ``,``, each record ending with CRLF (``\\r\\n``),
      values rendered as in TSV; a field that holds ``,``, ``"``, CR or LF, and the empty string, is
      enclosed in ``"`` with each ``"`` doubled; nothing else is quoted (spaces are data). Null is the
      empty field, the empty string ``""``; a record of one field that is null is written ``""`` too
      (an empty line, which readers skip, would lose the record). UTF-8, no byte order mark. A header
      line by default;
    - ``parquet``: the fields as typed columns (strings, 64-bit integers, doubles, booleans, timestamps in
      microseconds adjusted to UTC), same names and order, compressed (zstd);
    - ``jsonl``: one JSON object per record, keys in field order, floats as numbers written as in TSV, a
      timestamp as its TSV text, null as ``null``.

    ``header`` (TSV and CSV; None: the format's default, ``HEADERS``): every part file starts with a line
    of the field names, as Spark's CSV writer and the readers of a directory of parts expect (DuckDB's
    ``read_csv('out/part-*')``, pandas, Spark take the first line of each file for the header); an
    output without records has one part holding the header alone.

    Part files are ``part-NNNNN`` plus ``.csv`` / ``.parquet`` / ``.jsonl``; concatenated (TSV, JSON
    Lines; CSV and TSV without a header) or read (Parquet; with a header, each file) in name order they
    give the records in order.

    ``partition_by`` (fields): Hive-style partitions, ``FIELD=VALUE/part-…`` (nested in the order given),
    the partition fields left out of the files; each partition holds its records in input order. A run
    over an earlier output (``--overwrite``) replaces exactly the partitions it writes, each with one
    rename, and keeps the others of its fields and format; what an earlier output of another shape left
    (``part-*`` beside the partitions, partitions by other fields) is removed (``io.outputs.layout_scan``).
    Values are escaped as Hive and Spark do (``%XX`` for control characters
    and ``"#%'*/:=?\\{[]^``); null and the empty string are ``__HIVE_DEFAULT_PARTITION__``. A float or
    timestamp field is refused as a partition field (``UNPARTITIONED``)."""

    kind = "sink"

    def __init__(self, name: str | None, previous: Pipe, tap: str, format: str = "tsv", partition_by=(),
                 header: bool | None = None):
        if not isinstance(tap, str) or not tap.replace("_", "").replace("-", "").isalnum():
            raise AssemblyError(f"invalid output tap name {tap!r} (letters, digits, _ and -)")
        if format not in SINK_FORMATS:
            raise AssemblyError(f"sink format {format!r} is not one of {', '.join(SINK_FORMATS)}")
        if header is not None and not isinstance(header, bool):
            raise AssemblyError(f"sink {tap}: header is True or False, not {header!r}")
        if header and format not in HEADERS:
            raise AssemblyError(f"sink {tap}: a {format} output has no header line (tsv and csv have one)")
        self.tap, self.format = tap, format
        #: the header asked for (None: the format's default); ``header`` is what is written
        self.header_choice = header
        self.partition_by = (partition_by,) if isinstance(partition_by, str) else tuple(partition_by)
        super().__init__(name, previous)

    def _resolve(self) -> None:
        self._inherit()
        self._require(*self.partition_by)
        if len(set(self.partition_by)) != len(self.partition_by):
            raise AssemblyError(f"sink {self.label}: a partition field is named twice")
        if self.partition_by and not self.file_fields:
            raise AssemblyError(f"sink {self.label}: partitioned by every field, its files would hold nothing")
        for f in self.partition_by:
            if self.types[f] in UNPARTITIONED:
                raise AssemblyError(f"sink {self.label}: cannot partition by {f!r}, a {self.types[f]}: "
                                    f"{UNPARTITIONED[self.types[f]]}")

    @property
    def file_fields(self) -> tuple[str, ...]:
        """The fields in the part files (the partition fields are in the directory names)."""
        return tuple(f for f in self.fields if f not in self.partition_by)

    @property
    def header(self) -> bool:
        """Whether each part file starts with a line of the field names (``HEADERS``)."""
        default = HEADERS.get(self.format)
        return bool(default if self.header_choice is None else self.header_choice and default is not None)

    def describe(self) -> str:
        notes = ["header" if self.header else "no header"] \
            if self.format in HEADERS and self.header != HEADERS[self.format] else []
        notes = [self.format, *notes] if self.format != "tsv" or notes else []
        kind = f" ({', '.join(notes)})" if notes else ""
        parts = f", partitioned by {', '.join(self.partition_by)}" if self.partition_by else ""
        return f"tap {self.tap}{kind}{parts}: " + "\t".join(self.file_fields)
