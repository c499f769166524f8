"""The base of every node, ``Pipe`` (which is also the builder of flows: ``pipe.filter(...)``, ...), and
the errors of a flow's definition."""
from __future__ import annotations

from typing import TYPE_CHECKING

from logetl.diagnostics import nearest
from logetl.errors import UsageError
from logetl.expressions import Expr, ExpressionError, field_name
from logetl.traits import STREAM, Traits

if TYPE_CHECKING:
    from logetl.assembly.ends import DropSizeDash, Sink
    from logetl.assembly.holding import GroupBy, HashJoin, Limit, Sort, Sql, Top, Unique, Visits
    from logetl.assembly.records import Checkpoint, Derive, Filter, Rename, Select


class AssemblyError(UsageError, ValueError):
    """A flow definition that cannot run (unknown field, duplicate name, ...): a usage error (exit 2). A
    ``ValueError`` too, as it was before it joined the error tree, for the callers that catch that."""


class MissingField(AssemblyError):
    """A log format without a field the flow needs (``field``)."""

    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.field = field


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


def _nodes():
    """The package of the node classes, which derive from ``Pipe``: the builder methods and ``Pipe`` itself
    name them when called, once they are all defined."""
    from logetl import assembly

    return assembly


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
            if isinstance(p, _nodes().Sink):
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
        return _nodes().Filter(name, self, predicate)

    def select(self, *fields: str, name: str | None = None) -> "Select":
        return _nodes().Select(name, self, fields)

    def rename(self, mapping: dict[str, str] | None = None, name: str | None = None, **renames: str) -> "Rename":
        return _nodes().Rename(name, self, {**(mapping or {}), **renames})

    def derive(self, name: str | None = None, **fields) -> "Derive":
        return _nodes().Derive(name, self, fields)

    def unique(self, name: str | None = None) -> "Unique":
        return _nodes().Unique(name, self)

    def group_by(self, *keys: str, name: str | None = None) -> "_Grouping":
        return _Grouping(self, keys, name)

    def join(self, held: "Pipe", on, how: str = "inner", name: str | None = None) -> "HashJoin":
        return _nodes().HashJoin(name, self, held, on, how)

    def sort(self, *keys, name: str | None = None) -> "Sort":
        return _nodes().Sort(name, self, keys)

    def limit(self, n: int, name: str | None = None) -> "Limit":
        return _nodes().Limit(name, self, n)

    def top(self, n: int, by, per=(), name: str | None = None) -> "Top":
        return _nodes().Top(name, self, n, by, per)

    def checkpoint(self, name: str | None = None) -> "Checkpoint":
        return _nodes().Checkpoint(name, self)

    def visits(self, by, time: str, gap_minutes: int = 30, field: str = "visit",
               name: str | None = None) -> "Visits":
        """Numbers each client's visits (``Visits``): ``by`` the client's fields, ``time`` a timestamp
        field, a new visit after more than ``gap_minutes`` of inactivity, numbered in field ``field``."""
        return _nodes().Visits(name, self, by, time, gap_minutes, field)

    def sql(self, query: str, name: str | None = None) -> "Sql":
        """A SQL step: ``query``, in DuckDB's SQL, over this pipe's records as the table ``input``; its
        rows are the records that follow (``Sql``)::

            hits = logs.sql("SELECT response, count(*) AS n FROM input GROUP BY response")

        Each column of the result is a field, named as the query names it (``count(*) AS n``), of the
        type the query gives it. A syntax error, an unknown column or a column of a type logetl does not
        carry fails here, in one line."""
        return _nodes().Sql(name, self, query)

    def drop_size_dash(self, name: str | None = None) -> "DropSizeDash":
        """The three programs' rule as a step: drops the records whose size is ``-`` (``DropSizeDash``)."""
        return _nodes().DropSizeDash(name, self)

    def write(self, tap: str = "output", format: str = "tsv", partition_by=(), name: str | None = None,
              header: bool | None = None) -> "Sink":
        """The records, written to the output tap ``tap`` as ``format`` (``tsv``, ``csv``, ``parquet``,
        ``jsonl``; see ``Sink``); ``header``: a first line of field names in each part file (TSV and CSV;
        default: CSV has one, TSV none)."""
        return _nodes().Sink(name, self, tap, format, partition_by, header)


class _Grouping:
    """``pipe.group_by(keys)`` waiting for its aggregates: ``.agg(name=count(), ...)``."""

    def __init__(self, pipe: Pipe, keys, name):
        self.pipe, self.keys, self.name = pipe, tuple(keys), name

    def agg(self, **aggregates) -> "GroupBy":
        return _nodes().GroupBy(self.name, self.pipe, self.keys, aggregates)
