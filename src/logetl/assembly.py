"""Pipe assemblies: the engine-neutral description of a program.

Nodes only *describe* a computation, as Cascading's ``Pipe``/``Each``/``HashJoin``/``Checkpoint`` do; an
engine (``logetl.engines``) interprets them. Every node has a unique ``name``, its upstream nodes
(``previous``) and the fields it emits (``fields``), checked when the flow is defined so that a mistake in a
program fails before any data is read.

Memory and ordering contracts are part of each node's docstring; every engine honours them, so that the
bytes a program writes do not depend on the engine.

A field's type is one of ``logetl.expressions``' types; a ``timestamp`` flows through every node (sorts,
joins, group keys, ``min``/``max``, checkpoints, every sink format) but is refused as a partition field.
``Visits`` (``pipe.visits``) numbers each client's visits in time order.
"""
from __future__ import annotations

from dataclasses import dataclass

from logetl import formats
from logetl.diagnostics import nearest
from logetl.errors import UsageError
from logetl.expressions import (
    BOOLEAN, FLOAT, INTEGER, STRING, TIMESTAMP, Aggregate, Col, Expr, ExpressionError, field_name)
from logetl.traits import BLOCKING, JOIN, MAP, PARSE_FOLD, STORE, STREAM, Traits


class AssemblyError(UsageError, ValueError):
    """A flow definition that cannot run (unknown field, duplicate name, ...): a usage error (exit 2). A
    ``ValueError`` too, as it was before it joined the error tree, for the callers that catch that."""


class MissingField(AssemblyError):
    """A log format without a field the flow needs (``field``)."""

    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.field = field


# --- pipe nodes -------------------------------------------------------------------------------------------


def _expr(value) -> Expr:
    """A field name or an expression, as an expression."""
    if isinstance(value, str):
        return Col(value)
    if isinstance(value, Expr):
        return value
    raise AssemblyError(f"expected a field name or an expression, not {value!r}")


def _sort_keys(keys) -> tuple[tuple[str, bool], ...]:
    """``"f"`` / ``asc("f")`` / ``desc("f")`` / ``("f", descending)`` as ``(field, descending)`` pairs."""
    out = []
    for k in keys:
        if isinstance(k, str):
            out.append((k, False))
        elif isinstance(k, tuple) and len(k) == 2 and isinstance(k[0], str) and isinstance(k[1], bool):
            out.append(k)
        else:
            raise AssemblyError(f"a sort key is a field name, asc(name) or desc(name), not {k!r}")
    if not out:
        raise AssemblyError("sort needs at least one key")
    return tuple(out)


def _field_names(fields, what: str) -> tuple[str, ...]:
    """One field name, or a list of them (``per``): each a name."""
    names = (fields,) if isinstance(fields, str) else fields
    if not isinstance(names, (tuple, list)):
        raise AssemblyError(f"{what} is a field name or a list of them, not {fields!r}")
    for f in names:
        if not isinstance(f, str):
            raise AssemblyError(f"{what}: a field is a name, not {f!r}")
    return tuple(names)


def _describe_keys(keys) -> str:
    return ", ".join(f + (" descending" if d else "") for f, d in keys)


class Pipe:
    """Base of all nodes, and the identity operator (a named branch). ``kind`` names the operator in
    plans, ``explain`` and the monitor. ``name`` may be left out: the flow then names the node after its
    kind (``filter``, ``filter_2``, ... in flow order). Streaming, order-preserving.

    The builder methods (``filter``, ``select``, ``derive``, ...) return a new node reading this one; a
    node can feed several (a branch)."""

    kind = "pipe"
    #: how the node treats records (``logetl.traits``), which every engine's planners read: each node
    #: class declares its own on its class line
    traits: Traits = STREAM

    def __init_subclass__(cls, traits: Traits | None = None, **kwargs):
        super().__init_subclass__(**kwargs)
        if traits is None:
            raise TypeError(f"node class {cls.__name__} declares no traits: class {cls.__name__}(Pipe, traits=...)")
        cls.traits = traits

    def __init__(self, name: str | None, *previous: "Pipe"):
        if name is not None and (not isinstance(name, str) or not name
                                 or not name.replace("_", "").replace("-", "").isalnum()):
            raise AssemblyError(f"invalid operator name {name!r} (letters, digits, _ and -)")
        self.name = name
        for p in previous:
            if not isinstance(p, Pipe):
                raise AssemblyError(f"{self.kind}: expected a pipe, not {p!r}")
            if isinstance(p, Sink):
                raise AssemblyError(f"{self.kind}: a sink ({p.label}) has no output to read")
        self.previous: tuple[Pipe, ...] = previous
        self.fields: tuple[str, ...] = ()
        self.types: dict[str, str] = {}
        try:
            self._resolve()
            self._check_names()
        except ExpressionError as exc:
            error = AssemblyError(f"{self.kind} {self.label}: {exc}")
            error.origin = getattr(exc, "origin", None)     # where the expression at fault was written
            raise error from None

    @property
    def label(self) -> str:
        return repr(self.name) if self.name else "(unnamed)"

    def _input(self) -> "Pipe":
        return self.previous[0]

    def _inherit(self) -> None:
        self.fields = self._input().fields
        self.types = dict(self._input().types)

    def _check_names(self) -> None:
        """Every field this node emits has a valid name (``expressions.field_name``), and no two differ
        only in case: Spark (by default), Hive and DuckDB take such names for one column (on Spark a
        derived ``IP`` would replace ``ip``)."""
        seen: dict[str, str] = {}
        for f in self.fields:
            field_name(f)
            other = seen.setdefault(f.lower(), f)
            if other != f:
                raise ExpressionError(f"fields {other!r} and {f!r} differ only in case (Spark, Hive and DuckDB "
                                      "take them for one field)")

    def _require(self, *names: str) -> None:
        for n in names:
            field_name(n)
            if n not in self.fields:
                raise AssemblyError(f"{self.kind} {self.label}: no field {n!r} in {', '.join(self.fields)}"
                                    f"{nearest(n, self.fields)}")

    def _resolve(self) -> None:
        self._inherit()

    def describe(self) -> str:
        return ""

    def expressions(self) -> list:
        """The expressions and aggregates this node evaluates (an engine checks it can compile each)."""
        return []

    def check_engine(self, engine: str) -> None:
        """Refuses (a ``UsageError``, one line), before a run on ``engine`` starts, what this node cannot do
        there beyond its expressions; by default nothing."""

    @property
    def blocking(self) -> bool:
        """True when the node must see all of its input before it emits anything (its traits)."""
        return self.traits.blocking

    def __repr__(self) -> str:
        return f"<{self.kind} {self.name}>"

    # --- the builder: the public way to define a flow (``logetl.api``) -------------------------------

    def branch(self, name: str | None = None) -> "Pipe":
        """A named branch of this stream (the records unchanged)."""
        return Pipe(name, self)

    def filter(self, predicate: Expr, name: str | None = None) -> "Filter":
        return Filter(name, self, predicate)

    def select(self, *fields: str, name: str | None = None) -> "Select":
        return Select(name, self, fields)

    def rename(self, mapping: dict[str, str] | None = None, name: str | None = None, **renames: str) -> "Rename":
        return Rename(name, self, {**(mapping or {}), **renames})

    def derive(self, name: str | None = None, **fields) -> "Derive":
        return Derive(name, self, fields)

    def unique(self, name: str | None = None) -> "Unique":
        return Unique(name, self)

    def group_by(self, *keys: str, name: str | None = None) -> "_Grouping":
        return _Grouping(self, keys, name)

    def join(self, held: "Pipe", on, how: str = "inner", name: str | None = None) -> "HashJoin":
        return HashJoin(name, self, held, on, how)

    def sort(self, *keys, name: str | None = None) -> "Sort":
        return Sort(name, self, keys)

    def limit(self, n: int, name: str | None = None) -> "Limit":
        return Limit(name, self, n)

    def top(self, n: int, by, per=(), name: str | None = None) -> "Top":
        return Top(name, self, n, by, per)

    def checkpoint(self, name: str | None = None) -> "Checkpoint":
        return Checkpoint(name, self)

    def visits(self, by, time: str, gap_minutes: int = 30, field: str = "visit",
               name: str | None = None) -> "Visits":
        """Numbers each client's visits (``Visits``): ``by`` the client's fields, ``time`` a timestamp
        field, a new visit after more than ``gap_minutes`` of inactivity, numbered in field ``field``."""
        return Visits(name, self, by, time, gap_minutes, field)

    def sql(self, query: str, name: str | None = None) -> "Sql":
        """A SQL step: ``query``, in DuckDB's SQL, over this pipe's records as the table ``input``; its
        rows are the records that follow (``Sql``)::

            hits = logs.sql("SELECT response, count(*) AS n FROM input GROUP BY response")

        Each column of the result is a field, named as the query names it (``count(*) AS n``), of the
        type the query gives it. A syntax error, an unknown column or a column of a type logetl does not
        carry fails here, in one line."""
        return Sql(name, self, query)

    def drop_size_dash(self, name: str | None = None) -> "DropSizeDash":
        """The three programs' rule as a step: drops the records whose size is ``-`` (``DropSizeDash``)."""
        return DropSizeDash(name, self)

    def write(self, tap: str = "output", format: str = "tsv", partition_by=(), name: str | None = None,
              header: bool | None = None) -> "Sink":
        """The records, written to the output tap ``tap`` as ``format`` (``tsv``, ``csv``, ``parquet``,
        ``jsonl``; see ``Sink``); ``header``: a first line of field names in each part file (TSV and CSV;
        default: CSV has one, TSV none)."""
        return Sink(name, self, tap, format, partition_by, header)


class _Grouping:
    """``pipe.group_by(keys)`` waiting for its aggregates: ``.agg(name=count(), ...)``."""

    def __init__(self, pipe: Pipe, keys, name):
        self.pipe, self.keys, self.name = pipe, tuple(keys), name

    def agg(self, **aggregates) -> "GroupBy":
        return GroupBy(self.name, self.pipe, self.keys, aggregates)


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


class Filter(Pipe, traits=MAP):
    """Keeps the records for which the boolean expression ``predicate`` is true (false and null drop
    the record). Streaming, order-preserving."""

    kind = "filter"

    def __init__(self, name: str | None, previous: Pipe, predicate: Expr):
        self.predicate = predicate
        super().__init__(name, previous)

    def _resolve(self) -> None:
        self._inherit()
        if not isinstance(self.predicate, Expr):
            raise AssemblyError(f"filter {self.label}: the predicate must be an expression, not {self.predicate!r}")
        got = self.predicate.check(self.types)
        if got != BOOLEAN:
            raise AssemblyError(f"filter {self.label}: {self.predicate.describe()} is {got}, not boolean")

    def expressions(self):
        return [self.predicate]

    def describe(self) -> str:
        return self.predicate.describe()


class Select(Pipe, traits=MAP):
    """Keeps only the fields ``keep``, in that order. Streaming, order-preserving."""

    kind = "select"

    def __init__(self, name: str | None, previous: Pipe, keep):
        self.keep = tuple(keep)
        super().__init__(name, previous)

    def _resolve(self) -> None:
        self._inherit()
        if not self.keep:
            raise AssemblyError(f"select {self.label}: no fields")
        for f in self.keep:
            if not isinstance(f, str):
                raise AssemblyError(f"select {self.label}: a field is a name, not {f!r} (select('ip', 'time'))")
        self._require(*self.keep)
        twice = [f for i, f in enumerate(self.keep) if f in self.keep[:i]]
        if twice:
            raise AssemblyError(f"select {self.label}: field {twice[0]!r} is named twice")
        self.fields = self.keep
        self.types = {f: self.types[f] for f in self.keep}

    def describe(self) -> str:
        return ", ".join(self.keep)


class Rename(Pipe, traits=MAP):
    """Renames fields (``{old: new}``) in place. Streaming, order-preserving."""

    kind = "rename"

    def __init__(self, name: str | None, previous: Pipe, mapping: dict[str, str]):
        self.mapping = dict(mapping)
        super().__init__(name, previous)

    def _resolve(self) -> None:
        self._inherit()
        if not self.mapping:
            raise AssemblyError(f"rename {self.label}: nothing to rename")
        self._require(*self.mapping)
        for new in self.mapping.values():
            field_name(new)
        fields = tuple(self.mapping.get(f, f) for f in self.fields)
        if len(set(fields)) != len(fields):
            raise AssemblyError(f"rename {self.label}: two fields would be named alike ({', '.join(fields)})")
        self.types = {self.mapping.get(f, f): self.types[f] for f in self.fields}
        self.fields = fields

    def describe(self) -> str:
        return ", ".join(f"{old} -> {new}" for old, new in self.mapping.items())


class Derive(Pipe, traits=MAP):
    """Appends computed fields (``name=expression``, in that order; each reads the input's fields).
    Streaming, order-preserving."""

    kind = "derive"

    def __init__(self, name: str | None, previous: Pipe, computed: dict):
        for k, v in computed.items():
            if not isinstance(v, Expr):
                raise AssemblyError(f"derive: {k} must be an expression (col(...), lit(...), ...), not {v!r}")
        self.computed = dict(computed)
        super().__init__(name, previous)

    def _resolve(self) -> None:
        self._inherit()
        if not self.computed:
            raise AssemblyError(f"derive {self.label}: no fields to compute")
        types = dict(self.types)
        for field, expr in self.computed.items():
            field_name(field)
            if field in self.fields:
                raise AssemblyError(f"derive {self.label}: field {field!r} exists (rename or select first)")
            self.types[field] = expr.check(types)
        self.fields = self.fields + tuple(self.computed)

    def expressions(self):
        return list(self.computed.values())

    def describe(self) -> str:
        return "; ".join(f"{f} = {e.describe()}" for f, e in self.computed.items())


class Unique(Pipe, traits=BLOCKING):
    """Removes duplicate records (all fields compared; nulls equal). Blocking: holds the distinct records
    in memory up to the run's memory budget, then hash-partitions them to disk and deduplicates one
    partition at a time. Output order is not part of the contract (engines differ, and so do spilled and
    unspilled runs); sort afterwards when order matters."""

    kind = "unique"


class GroupBy(Pipe, traits=BLOCKING):
    """One record per distinct value of ``keys`` (nulls form one group), with the ``aggregates``
    (``name=count()``, ``sum(...)``, ``min``, ``max``, ``count_distinct``): fields are the keys, then the
    aggregates, in the order given. Blocking: partial aggregates are kept per group within the run's
    memory budget, then hash-partitioned to disk by the keys and combined one partition at a time.
    Output order is not part of the contract: sort afterwards."""

    kind = "groupby"

    def __init__(self, name: str | None, previous: Pipe, keys, aggregates: dict):
        self.keys = tuple(keys)
        self.aggregates = dict(aggregates)
        super().__init__(name, previous)

    def _resolve(self) -> None:
        self._inherit()
        if not self.keys:
            raise AssemblyError(f"groupby {self.label}: no key fields (use a constant derived field to "
                                "aggregate everything)")
        for k in self.keys:
            if not isinstance(k, str):
                raise AssemblyError(f"groupby {self.label}: a key is a field name, not {k!r} "
                                    "(group_by('ip', 'time'))")
        self._require(*self.keys)
        twice = [k for i, k in enumerate(self.keys) if k in self.keys[:i]]
        if twice:
            raise AssemblyError(f"groupby {self.label}: key {twice[0]!r} is named twice")
        if not self.aggregates:
            raise AssemblyError(f"groupby {self.label}: no aggregates (use unique() for distinct keys)")
        types = {k: self.types[k] for k in self.keys}
        for field, agg in self.aggregates.items():
            field_name(field)
            if not isinstance(agg, Aggregate):
                raise AssemblyError(f"groupby {self.label}: {field} must be an aggregate (count(), sum(...), ...)")
            if field in types:
                raise AssemblyError(f"groupby {self.label}: field {field!r} is named twice")
            types[field] = agg.check(self.types)
        self.fields, self.types = tuple(types), types

    def expressions(self):
        return list(self.aggregates.values()) + [a.arg for a in self.aggregates.values() if a.arg is not None]

    def describe(self) -> str:
        aggs = "; ".join(f"{f} = {a.describe()}" for f, a in self.aggregates.items())
        return f"by {', '.join(self.keys)}: {aggs}"


class HashJoin(Pipe, traits=JOIN):
    """Joins the streamed side ``stream`` with the ``held`` side on ``on``: a field name both sides have,
    or ``(stream_field, held_field)``. ``how``: ``inner`` (records with a match) or ``left`` (every
    streamed record; the held side's fields null where none matches). Keys match when equal and not null.

    Fields: the streamed side's, then the held side's (without its key when both keys have one name);
    other fields on both sides are refused (rename first). Memory: the held side is accumulated in
    memory (keep it the small side; past the run's memory budget the run fails, naming this operator);
    the streamed side passes through it one batch at a time. Order: the streamed side's order (for one
    streamed record, its matches in the held side's order)."""

    kind = "hashjoin"

    def __init__(self, name: str | None, stream: Pipe, held: Pipe, on, how: str = "inner"):
        if isinstance(on, str):
            self.stream_key = self.held_key = on
        elif isinstance(on, (tuple, list)) and len(on) == 2 and all(isinstance(x, str) for x in on):
            self.stream_key, self.held_key = on
        else:
            raise AssemblyError(f"hashjoin: on is a field name or (stream_field, held_field), not {on!r}")
        if how not in ("inner", "left"):
            raise AssemblyError(f"hashjoin: how is 'inner' or 'left', not {how!r}")
        self.how = how
        # the held side is input port 0: it is complete before the first streamed batch is joined
        super().__init__(name, held, stream)

    @property
    def held(self) -> Pipe:
        return self.previous[0]

    @property
    def stream(self) -> Pipe:
        return self.previous[1]

    @property
    def held_fields(self) -> tuple[str, ...]:
        """The held side's fields in the output."""
        same = self.stream_key == self.held_key
        return tuple(f for f in self.held.fields if not (same and f == self.held_key))

    def _resolve(self) -> None:
        held, stream = self.previous
        field_name(self.stream_key)
        field_name(self.held_key)
        if self.stream_key not in stream.fields:
            raise AssemblyError(f"hashjoin {self.label}: the streamed side has no field {self.stream_key!r}"
                                f"{nearest(self.stream_key, stream.fields)}")
        if self.held_key not in held.fields:
            raise AssemblyError(f"hashjoin {self.label}: the held side has no field {self.held_key!r}"
                                f"{nearest(self.held_key, held.fields)}")
        if held.types[self.held_key] != stream.types[self.stream_key]:
            raise AssemblyError(f"hashjoin {self.label}: key types differ: the streamed side's {self.stream_key} is "
                                f"{stream.types[self.stream_key]}, the held side's {self.held_key} is "
                                f"{held.types[self.held_key]} (convert one: to_int() or concat())")
        clash = set(stream.fields) & set(self.held_fields)
        if clash:
            raise AssemblyError(f"hashjoin {self.label}: fields on both sides: {', '.join(sorted(clash))} "
                                "(rename one side first)")
        self.fields = stream.fields + self.held_fields
        self.types = {**stream.types, **{f: held.types[f] for f in self.held_fields}}

    def describe(self) -> str:
        return (f"{self.stream.name}.{self.stream_key} = {self.held.name}.{self.held_key}, {self.how} "
                f"({self.held.name} held in memory)")


class Checkpoint(Pipe, traits=STORE):
    """Materializes its input: everything downstream reads the stored copy, and a flow that fails later
    can restart after it. Anonymous by default (deleted when the flow completes). Order-preserving."""

    kind = "checkpoint"


class Sort(Pipe, traits=BLOCKING):
    """Sorts by ``keys`` (field names, ``asc(f)`` or ``desc(f)``): strings in UTF-8 byte order, integers
    numerically, null the smallest value (first ascending, last descending). Stable: equal keys keep
    their input order. Blocking: holds its input up to the run's memory budget, then sorts it into runs on
    disk and merges them (local engine), with the same result; on Spark a global, range-partitioned sort."""

    kind = "sort"

    def __init__(self, name: str | None, previous: Pipe, keys):
        self.keys = _sort_keys(keys)
        super().__init__(name, previous)

    @property
    def by(self) -> tuple[str, ...]:
        return tuple(f for f, _ in self.keys)

    @property
    def descending(self) -> tuple[bool, ...]:
        return tuple(d for _, d in self.keys)

    def _resolve(self) -> None:
        self._inherit()
        self._require(*self.by)

    def describe(self) -> str:
        return _describe_keys(self.keys) + ", stable"


#: the largest count ``limit`` and ``top`` take: Spark's ``limit`` and row numbers are 32-bit integers, and
#: every engine takes the same counts
MAX_COUNT = (1 << 31) - 1


class Limit(Pipe, traits=BLOCKING):
    """The first ``n`` records in input order (an input whose order is not defined, after ``unique`` or
    ``group_by``, gives some ``n`` of them: sort first). Streaming; holds nothing."""

    kind = "limit"

    def __init__(self, name: str | None, previous: Pipe, n: int):
        if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= MAX_COUNT:
            raise AssemblyError(f"limit: n is a count from 0 to {MAX_COUNT:,}, not {n!r}")
        self.n = n
        super().__init__(name, previous)

    def describe(self) -> str:
        return f"first {self.n}"


class Top(Pipe, traits=BLOCKING):
    """For each group of equal ``per`` fields (all records when ``per`` is empty), the first ``n``
    records in ``by`` order (sort keys as for ``Sort``; ties keep input order). Output: sorted by ``per``
    ascending, then ``by``. Blocking: a sort within the run's memory budget (spilling as ``Sort``), then
    a streaming cut; on Spark a window per group."""

    kind = "top"

    def __init__(self, name: str | None, previous: Pipe, n: int, by, per=()):
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_COUNT:
            raise AssemblyError(f"top: n is a count from 1 to {MAX_COUNT:,}, not {n!r}")
        self.n = n
        single = not isinstance(by, (tuple, list)) or (isinstance(by, tuple) and len(by) == 2
                                                        and isinstance(by[0], str) and isinstance(by[1], bool))
        self.by_keys = _sort_keys([by] if single else by)     # an expression is refused as a key, naming it
        self.per = _field_names(per, "top: per")
        super().__init__(name, previous)

    @property
    def keys(self) -> tuple[tuple[str, bool], ...]:
        """The order of the output: ``per`` ascending, then ``by``."""
        return tuple((f, False) for f in self.per) + self.by_keys

    def _resolve(self) -> None:
        self._inherit()
        self._require(*self.per, *(f for f, _ in self.by_keys))

    def describe(self) -> str:
        per = f" per {', '.join(self.per)}" if self.per else ""
        return f"first {self.n}{per} by {_describe_keys(self.by_keys)}"


# --- times: visits -----------------------------------------------------------------------------------------

class Visits(Pipe, traits=BLOCKING):
    """Cuts each client's requests into visits, as web analytics tools do: the records of each group of
    equal ``by`` fields (the client: one field or a list; nulls form one group) in ``time`` order (a
    timestamp field; equal times in input order), a visit starting at the group's first record with a
    time and again at every record more than ``gap_minutes`` minutes after the one before it (exactly
    ``gap_minutes`` later is the same visit; equal times, a gap of 0, too). Appends the integer field
    ``field`` (default ``visit``): 1, 2, ... within each group; null for a record whose time is null
    (those come first in their group, and the group's first visit is the first record with a time).

    Output: sorted by ``by`` ascending, then ``time`` ascending (null first), ties in input order (when
    the input's order is defined: not after ``unique`` or ``group_by``). Blocking: a stable sort within
    the run's memory budget (spilling as ``Sort``), then one streaming pass that carries the last record's
    group, time and visit from one sorted block to the next; on Spark a window per group (a hash shuffle
    by ``by``), then a global sort."""

    kind = "visits"

    def __init__(self, name: str | None, previous: Pipe, by, time: str, gap_minutes: int = 30,
                 field: str = "visit"):
        self.by = _field_names(by, "visits: by")
        if not self.by:
            raise AssemblyError("visits: by names at least one field (the client: by='ip')")
        if not isinstance(time, str):
            raise AssemblyError(f"visits: time is a field name, not {time!r}")
        if not isinstance(gap_minutes, int) or isinstance(gap_minutes, bool) or gap_minutes < 1:
            raise AssemblyError(f"visits: gap_minutes is a whole number of minutes >= 1, not {gap_minutes!r}")
        if not isinstance(field, str):
            raise AssemblyError(f"visits: field is a field name, not {field!r}")
        self.time, self.gap_minutes, self.field = time, gap_minutes, field
        super().__init__(name, previous)

    @property
    def keys(self) -> tuple[tuple[str, bool], ...]:
        """The order of the output (and of the numbering): ``by`` then ``time``, ascending."""
        return tuple((f, False) for f in (*self.by, self.time))

    def _resolve(self) -> None:
        self._inherit()
        self._require(*self.by, self.time)
        twice = [f for i, f in enumerate(self.by) if f in self.by[:i]]
        if twice:
            raise AssemblyError(f"visits {self.label}: field {twice[0]!r} is named twice in by")
        if self.time in self.by:
            raise AssemblyError(f"visits {self.label}: the time field {self.time!r} is also in by")
        kind = self.types[self.time]
        if kind != TIMESTAMP:
            hint = f" (derive one: ts=timestamp({self.time!r}))" if kind == STRING else ""
            raise AssemblyError(f"visits {self.label}: the time field {self.time!r} is {kind}, not timestamp{hint}")
        field_name(self.field)
        if self.field in self.fields:
            raise AssemblyError(f"visits {self.label}: field {self.field!r} exists (rename it, or name the visit "
                                "field: field='...')")
        self.fields = self.fields + (self.field,)
        self.types[self.field] = INTEGER

    def describe(self) -> str:
        return (f"{self.field} per {', '.join(self.by)} in {self.time} order, a new one after a gap of more "
                f"than {self.gap_minutes} min")


# --- SQL steps ----------------------------------------------------------------------------------------------

class Sql(Pipe, traits=BLOCKING):
    """A query over its input's records, read as the table ``table`` (``input`` for ``pipe.sql``, ``log`` for
    ``logetl sql``): DuckDB's SQL, run by DuckDB on the local engine and, translated by sqlglot, by Spark
    SQL. The fields are the query's columns, named and typed as it gives them, found when the flow is
    defined: with ``engine`` None (``pipe.sql``) by ``logetl.sqlstep`` over the input's typed fields, the
    engine's own subset checked when a run starts (``check_engine``); with ``engine`` (``logetl sql``) by
    ``logetl.sql.dialect.check`` for that engine, over records of strings.

    Blocking and not per record (a query may aggregate, join or number its whole input): on the local
    engine DuckDB reads the input as Arrow, without a copy. A query that reads its table once, straight off
    the parse, reads the records as they are parsed (``streamed``); any other holds its input while it
    fits the run's memory budget, and past it reads it from a database file in the run's spill directory.
    DuckDB runs within ``--memory-limit`` and spills there too; a query that needs more fails naming the
    limit. Order: the query's ``ORDER BY`` (make it total for the same bytes on both engines); without one,
    the order is not defined."""

    kind = "sql"

    def __init__(self, name: str | None, previous: Pipe, query: str, table: str = "input",
                 engine: str | None = None):
        self.query, self.table, self.engine = query, table, engine
        super().__init__(name, previous)

    def _resolve(self) -> None:
        from logetl import sqlstep

        source = self._input()
        if self.engine is not None:
            from logetl.sql import dialect

            checked = dialect.check(self.query, self.engine, {self.table: list(source.fields)})
            self.fields, self.types = checked.fields, dict(checked.columns)
        else:
            try:
                self.fields, self.types = sqlstep.output_of(self.query, source.fields, source.types, self.table)
            except sqlstep.SqlError as exc:
                raise AssemblyError(f"sql {self.label}: {exc}") from None
        from logetl.sql.dialect import reads_once

        self.streamed = isinstance(source, Parse) and reads_once(self.query, self.table)

    @property
    def ordered(self) -> bool:
        """Whether the query's rows come in a defined order (an ``ORDER BY`` on its outermost query)."""
        from logetl.sqlstep import ordered

        return ordered(self.query)

    def check_engine(self, engine: str) -> None:
        from logetl.sql import dialect

        try:
            dialect.portable(self.query, engine)
        except dialect.SqlError as exc:
            raise dialect.SqlError(f"sql {self.label}: {exc}") from None

    @property
    def blocking(self) -> bool:
        return True

    def describe(self) -> str:
        from logetl.sqlstep import one_line

        text = one_line(self.query)
        return text if self.engine is None or len(text) <= 80 else text[:77] + "..."


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


# --- flows and their steps --------------------------------------------------------------------------------


@dataclass
class Step:
    """A unit of execution: the nodes between materialization points. ``reads`` are nodes of earlier steps
    whose stored output this step reads; ``writes`` are this step's nodes whose output later steps read."""

    index: int
    name: str
    nodes: list[Pipe]
    reads: list[Pipe]
    writes: list[Pipe]


class Flow:
    """A program: the assembly reachable from ``sinks``, its topological order and its steps.

    Steps are cut after every Checkpoint: a node is in the step after the latest step of its inputs, plus
    one when an input is a Checkpoint. A step takes the name of its first operator. Any other edge that
    crosses a step boundary (the accumulated side of a HashJoin, say) is materialized too, so that a
    restart after a checkpoint never needs the steps before it."""

    def __init__(self, name: str, sinks: list[Sink], description: str = ""):
        if not isinstance(name, str) or not name.replace("_", "").replace("-", "").isalnum():
            raise AssemblyError(f"invalid flow name {name!r} (letters, digits, _ and -)")
        self.name = name
        self.description = description
        self.sinks = [sinks] if isinstance(sinks, Pipe) else list(sinks)
        if not self.sinks or not all(isinstance(s, Sink) for s in self.sinks):
            raise AssemblyError(f"flow {name!r}: give it its sinks (pipe.write(...)), at least one")
        self.nodes = self._fold(self._topological(self.sinks))
        self._name_unnamed()
        taps = [s.tap for s in self.sinks]
        twice = [t for i, t in enumerate(taps) if t in taps[:i]]
        if twice:
            raise AssemblyError(f"flow {name!r}: two sinks write the same output tap {twice[0]!r}")
        # a run binds one input (--input): a second read, whatever its tap, would read the same files again
        sources = [n for n in self.nodes if isinstance(n, Source)]
        if len(sources) > 1:
            read_taps = list(dict.fromkeys(s.tap for s in sources))
            by = f", by taps {', '.join(read_taps[:-1])} and {read_taps[-1]}" if len(read_taps) > 1 else ""
            raise AssemblyError(f"flow {name!r}: the input is read more than once{by} (a run binds one input: "
                                "read it once and branch)")
        names = [n.name for n in self.nodes]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise AssemblyError(f"flow {name!r}: duplicate operator names {sorted(dup)}")
        self.sources = [n for n in self.nodes if isinstance(n, Source)]
        self.steps = self._plan()

    def _fold(self, nodes: list[Pipe]) -> list[Pipe]:
        """Folds each step that a parse does in its own scan (``folds_into_parse``) into the parse it reads,
        which must feed nothing else (a stream that both drops and keeps those records would need the
        parse twice): its consumers then read the parse. The nodes in topological order, without them."""
        folded = [n for n in nodes if n.traits.folds_into_parse]
        for step in folded:
            parse = step.previous[0]
            others = [n for n in nodes if n is not step and any(p is parse for p in n.previous)]
            if others:
                raise AssemblyError(f"flow {self.name!r}: {step.kind} {step.label} must be the only reader of "
                                    f"{parse.kind} {parse.label}, which {others[0].kind} {others[0].label} reads too")
            step.fold(parse)
            for n in nodes:
                n.previous = tuple(parse if p is step else p for p in n.previous)
        return [n for n in nodes if n not in folded]

    def set_output_format(self, format: str) -> None:
        """Makes every sink write ``format`` (``--output-format``); before the flow runs."""
        if format not in SINK_FORMATS:
            raise AssemblyError(f"output format {format!r} is not one of {', '.join(SINK_FORMATS)}")
        for s in self.sinks:
            s.format = format

    def set_header(self, header: bool) -> None:
        """Gives every TSV and CSV sink a header line, or none (``--header`` / ``--no-header``); before the
        flow runs, after ``set_output_format``."""
        delimited = [s for s in self.sinks if s.format in HEADERS]
        if not delimited:
            kinds = ", ".join(dict.fromkeys(s.format for s in self.sinks))
            raise AssemblyError(f"a header line is for TSV and CSV outputs: flow {self.name!r} writes {kinds}")
        for s in delimited:
            s.header_choice = header

    def _name_unnamed(self) -> None:
        """Names nodes defined without one after their kind, in flow order: ``filter``, ``filter_2``..."""
        taken = {n.name for n in self.nodes if n.name}
        counts: dict[str, int] = {}
        for n in self.nodes:
            if n.name:
                continue
            base = n.kind
            while True:
                counts[base] = counts.get(base, 0) + 1
                candidate = base if counts[base] == 1 else f"{base}_{counts[base]}"
                if candidate not in taken:
                    break
            n.name = candidate
            taken.add(candidate)

    @staticmethod
    def _topological(sinks: list[Pipe]) -> list[Pipe]:
        order: list[Pipe] = []
        seen: set[int] = set()

        def visit(node: Pipe) -> None:
            if id(node) in seen:
                return
            seen.add(id(node))
            for p in node.previous:
                visit(p)
            order.append(node)

        for s in sinks:
            visit(s)
        return order

    def node(self, name: str) -> Pipe:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def children(self, node: Pipe) -> list[Pipe]:
        return [n for n in self.nodes if any(p is node for p in n.previous)]

    def _plan(self) -> list[Step]:
        level: dict[int, int] = {}
        for n in self.nodes:
            level[id(n)] = max(
                (level[id(p)] + (1 if isinstance(p, Checkpoint) else 0) for p in n.previous), default=0
            )
        steps = []
        for i in range(max(level.values()) + 1):
            nodes = [n for n in self.nodes if level[id(n)] == i]
            reads = []
            for n in nodes:
                for p in n.previous:
                    if level[id(p)] < i and p not in reads:
                        reads.append(p)
            writes = [n for n in nodes if any(level[id(c)] > i for c in self.children(n))]
            steps.append(Step(i, nodes[0].name if i else self._first_name(nodes), nodes, reads, writes))
        return steps

    @staticmethod
    def _first_name(nodes: list[Pipe]) -> str:
        for n in nodes:
            if not isinstance(n, Source):
                return n.name
        return nodes[0].name

    def step_of(self, node: Pipe) -> Step:
        for s in self.steps:
            if node in s.nodes:
                return s
        raise KeyError(node.name)

    def edges(self) -> list[tuple[Pipe, Pipe]]:
        return [(p, n) for n in self.nodes for p in n.previous]

    # --- explain -----------------------------------------------------------------------------------------

    def explain(self) -> str:
        out = [f"flow {self.name}: {self.description}".rstrip(": "), "", "operators:"]
        width = max(len(n.name) for n in self.nodes)
        for n in self.nodes:
            ins = ", ".join(p.name for p in n.previous) or "-"
            out.append(f"  {n.name:<{width}}  {n.kind:<10}  <- {ins:<18}  {n.describe()}")
            out.append(f"  {'':<{width}}  {'':<10}     fields: {', '.join(n.fields)}")
        out += ["", "steps:"]
        for s in self.steps:
            out.append(f"  {s.index + 1}. {s.name}: {' -> '.join(n.name for n in s.nodes)}")
            if s.reads:
                out.append(f"     reads the stored output of: {', '.join(n.name for n in s.reads)}")
            if s.writes:
                out.append(f"     stores for later steps: {', '.join(n.name for n in s.writes)}")
        return "\n".join(out) + "\n"

    def dot(self) -> str:
        out = [f'digraph "{self.name}" {{', "  rankdir=TB;", '  node [shape=box, fontname="Helvetica"];']
        for s in self.steps:
            out.append(f'  subgraph "cluster_{s.index}" {{')
            out.append(f'    label="step {s.index + 1}: {s.name}";')
            for n in s.nodes:
                shape = {"source": "cylinder", "sink": "cylinder", "checkpoint": "box3d"}.get(n.kind, "box")
                label = f"{n.kind}\\n{n.name}" + (f"\\n{_dot_escape(n.describe())}" if n.describe() else "")
                out.append(f'    "{n.name}" [shape={shape}, label="{label}"];')
            out.append("  }")
        for a, b in self.edges():
            out.append(f'  "{a.name}" -> "{b.name}" [label="{_dot_escape(", ".join(a.fields))}"];')
        out.append("}")
        return "\n".join(out) + "\n"


def _dot_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\t", " ")
