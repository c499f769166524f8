"""The nodes that hold records: the blocking ones, which see all of their input before they emit
(``Unique``, ``GroupBy``, ``Sort``, ``Limit``, ``Top``, ``Visits``, ``Sql``), and ``HashJoin``, which holds
its held side."""
from __future__ import annotations

from logetl.assembly.base import AssemblyError, Pipe, _describe_keys, _field_names, _sort_keys
from logetl.assembly.ends import Parse
from logetl.diagnostics import nearest
from logetl.expressions import INTEGER, STRING, TIMESTAMP, Aggregate, field_name
from logetl.traits import BLOCKING, JOIN


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
    fits the run's memory budget, and past it reads it from Parquet files in the run's spill directory.
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
