"""Pipe assemblies: the engine-neutral description of a program.

Nodes only *describe* a computation, as Cascading's ``Pipe``/``Each``/``HashJoin``/``Checkpoint`` do; an
engine (``logetl.engines``) interprets them. Every node has a unique ``name``, its upstream nodes
(``previous``) and the fields it emits (``fields``), checked when the flow is defined so that a mistake in a
program fails before any data is read.

Memory and ordering contracts are part of each node's docstring; every engine honours them, so that the
bytes a program writes do not depend on the engine.
"""
from __future__ import annotations

from dataclasses import dataclass

from logetl import contract, formats

STRING = "string"
INTEGER = "integer"


class AssemblyError(ValueError):
    """A flow definition that cannot run (unknown field, duplicate name, ...)."""


class MissingField(AssemblyError):
    """A log format without a field the flow needs (``field``)."""

    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.field = field


# --- expressions: what a Filter keeps and what a Function computes -------------------------------------


@dataclass(frozen=True)
class StartsWith:
    """True when string field ``field`` begins with ``prefix`` (compared as characters)."""

    field: str
    prefix: str

    def describe(self) -> str:
        return f"{self.field} starts with {self.prefix!r}"


@dataclass(frozen=True)
class AtLeast:
    """True when integer field ``field`` is >= ``value``."""

    field: str
    value: int

    def describe(self) -> str:
        return f"{self.field} >= {self.value}"


@dataclass(frozen=True)
class Crc32Mod:
    """CRC-32 (IEEE 802.3, as ``zlib.crc32``) of the UTF-8 bytes of string field ``field``, modulo
    ``modulus``: an integer that is the same on every machine and engine."""

    field: str
    modulus: int

    def describe(self) -> str:
        return f"crc32({self.field}) % {self.modulus}"


# --- pipe nodes -------------------------------------------------------------------------------------------


class Pipe:
    """Base of all nodes. ``kind`` names the operator in plans, ``explain`` and the monitor."""

    kind = "pipe"

    def __init__(self, name: str, *previous: "Pipe"):
        if not name or not name.replace("_", "").replace("-", "").isalnum():
            raise AssemblyError(f"invalid operator name {name!r}")
        self.name = name
        self.previous: tuple[Pipe, ...] = previous
        self.fields: tuple[str, ...] = ()
        self.types: dict[str, str] = {}
        self._resolve()

    def _input(self) -> "Pipe":
        return self.previous[0]

    def _inherit(self) -> None:
        self.fields = self._input().fields
        self.types = dict(self._input().types)

    def _require(self, *names: str) -> None:
        for n in names:
            if n not in self.fields:
                raise AssemblyError(f"{self.kind} {self.name!r}: no field {n!r} in {', '.join(self.fields)}")

    def _resolve(self) -> None:
        self._inherit()

    def describe(self) -> str:
        return ""

    @property
    def blocking(self) -> bool:
        """True when the node must see all of its input before it emits anything."""
        return False

    def __repr__(self) -> str:
        return f"<{self.kind} {self.name}>"


class Source(Pipe):
    """The input tap: raw lines of the input files, in input order (files in name order). Bound to the
    paths at run time under the tap name ``tap``."""

    kind = "source"

    def __init__(self, name: str = "input", tap: str = "input"):
        self.tap = tap
        super().__init__(name)

    def _resolve(self) -> None:
        self.fields = ("line",)
        self.types = {"line": "bytes"}

    def describe(self) -> str:
        return f"tap {self.tap}"


class Parse(Pipe):
    """Applies the line contract to the lines of a Source with log format ``format``
    (``logetl.formats``; default ``combined``, the original expression): counts malformed lines by reason
    and sends them to the trap, drops records whose ``size`` is ``-``, and emits the fields ``keep`` (the
    format's field names, in that order; default all of them) as strings, in input order. The original
    expression always emits ``ip, time, request, response, size``. Streaming: holds one batch at a time."""

    kind = "parse"

    def __init__(self, name: str, previous: Pipe, format: "formats.LogFormat | None" = None,
                 keep: tuple[str, ...] | None = None):
        self.format = format or formats.LEGACY
        self.keep = tuple(keep) if keep else None
        super().__init__(name, previous)

    def _resolve(self) -> None:
        if not isinstance(self._input(), Source):
            raise AssemblyError(f"parse {self.name!r} must read a source")
        fmt = self.format
        for f in self.keep or ():
            if f not in fmt.fields:
                raise MissingField(f"the log format has no field {f!r} (it has: {', '.join(fmt.fields)})", f)
        self.fields = contract.FIELDS if fmt.legacy else (self.keep or fmt.fields)
        self.types = {f: STRING for f in self.fields}

    def describe(self) -> str:
        if self.format.legacy:
            return "line contract; drop size '-'"
        return f"{self.format.describe()}; drop size '-'"


class Filter(Pipe):
    """Keeps the records for which ``predicate`` holds. Streaming, order-preserving."""

    kind = "filter"

    def __init__(self, name: str, previous: Pipe, predicate):
        self.predicate = predicate
        super().__init__(name, previous)

    def _resolve(self) -> None:
        self._inherit()
        self._require(self.predicate.field)
        want = INTEGER if isinstance(self.predicate, AtLeast) else STRING
        if self.types[self.predicate.field] != want:
            raise AssemblyError(f"filter {self.name!r}: field {self.predicate.field!r} is not {want}")

    def describe(self) -> str:
        return self.predicate.describe()


class Retain(Pipe):
    """Keeps only ``keep`` fields, in that order. Streaming, order-preserving."""

    kind = "retain"

    def __init__(self, name: str, previous: Pipe, keep: tuple[str, ...]):
        self.keep = tuple(keep)
        super().__init__(name, previous)

    def _resolve(self) -> None:
        self._inherit()
        self._require(*self.keep)
        self.fields = self.keep
        self.types = {f: self.types[f] for f in self.keep}

    def describe(self) -> str:
        return ", ".join(self.keep)


class Rename(Pipe):
    """Renames field ``old`` to ``new`` in place. Streaming, order-preserving."""

    kind = "rename"

    def __init__(self, name: str, previous: Pipe, old: str, new: str):
        self.old, self.new = old, new
        super().__init__(name, previous)

    def _resolve(self) -> None:
        self._inherit()
        self._require(self.old)
        if self.new in self.fields:
            raise AssemblyError(f"rename {self.name!r}: field {self.new!r} exists")
        self.fields = tuple(self.new if f == self.old else f for f in self.fields)
        self.types[self.new] = self.types.pop(self.old)

    def describe(self) -> str:
        return f"{self.old} -> {self.new}"


class Function(Pipe):
    """Appends field ``field`` computed by ``function`` from each record. Streaming, order-preserving."""

    kind = "function"

    def __init__(self, name: str, previous: Pipe, field: str, function):
        self.field, self.function = field, function
        super().__init__(name, previous)

    def _resolve(self) -> None:
        self._inherit()
        self._require(self.function.field)
        if self.field in self.fields:
            raise AssemblyError(f"function {self.name!r}: field {self.field!r} exists")
        self.fields = self.fields + (self.field,)
        self.types[self.field] = INTEGER

    def describe(self) -> str:
        return f"{self.field} = {self.function.describe()}"


class Unique(Pipe):
    """Removes duplicate records (all fields compared). Blocking: holds the distinct records in memory up to
    the run's memory budget, then hash-partitions them to disk and deduplicates one partition at a time.
    Output order is not part of the contract (engines differ, and so do spilled and unspilled runs); sort
    afterwards when order matters."""

    kind = "unique"

    @property
    def blocking(self) -> bool:
        return True


class HashJoin(Pipe):
    """Inner join of ``left`` on ``left_key`` with ``right`` on ``right_key``.

    Memory: the left side is accumulated in memory (keep it the small side; past the run's memory budget
    the run fails, naming this operator); the right side is streamed through it, one batch at a time. Output fields are the left's then the right's, so the two key fields
    must have different names. Order: records come out in the right side's order (for one right record,
    left matches in the left's order)."""

    kind = "hashjoin"

    def __init__(self, name: str, left: Pipe, left_key: str, right: Pipe, right_key: str):
        self.left_key, self.right_key = left_key, right_key
        super().__init__(name, left, right)

    @property
    def left(self) -> Pipe:
        return self.previous[0]

    @property
    def right(self) -> Pipe:
        return self.previous[1]

    def _resolve(self) -> None:
        left, right = self.previous
        if self.left_key not in left.fields or self.right_key not in right.fields:
            raise AssemblyError(f"hashjoin {self.name!r}: unknown key field")
        clash = set(left.fields) & set(right.fields)
        if clash:
            raise AssemblyError(f"hashjoin {self.name!r}: fields on both sides: {', '.join(sorted(clash))}")
        if left.types[self.left_key] != right.types[self.right_key]:
            raise AssemblyError(f"hashjoin {self.name!r}: key types differ")
        self.fields = left.fields + right.fields
        self.types = {**left.types, **right.types}

    def describe(self) -> str:
        return f"{self.left.name}.{self.left_key} = {self.right.name}.{self.right_key} (left in memory)"


class Checkpoint(Pipe):
    """Materializes its input: everything downstream reads the stored copy, and a flow that fails later
    can restart after it. Anonymous by default (deleted when the flow completes). Order-preserving."""

    kind = "checkpoint"

    @property
    def blocking(self) -> bool:
        return True


class Sort(Pipe):
    """Sorts by ``by`` (ascending by byte order of strings / numeric for integers, or ``descending``).
    Stable: equal keys keep their input order; null is the smallest value. Blocking: holds its input up
    to the run's memory budget, then sorts it into runs on disk and merges them (local engine), with the
    same result; on Spark a global, range-partitioned sort."""

    kind = "sort"

    def __init__(self, name: str, previous: Pipe, by: tuple[str, ...], descending: bool = False):
        self.by, self.descending = tuple(by), descending
        super().__init__(name, previous)

    def _resolve(self) -> None:
        self._inherit()
        self._require(*self.by)

    @property
    def blocking(self) -> bool:
        return True

    def describe(self) -> str:
        return ", ".join(self.by) + (" descending" if self.descending else "") + ", stable"


class Sink(Pipe):
    """Writes its input as TSV (fields in order, no header, ``\\n`` line ends, integers in decimal) to the
    output tap named ``tap``, in input order, committed atomically."""

    kind = "sink"

    def __init__(self, name: str, previous: Pipe, tap: str):
        self.tap = tap
        super().__init__(name, previous)

    def describe(self) -> str:
        return f"tap {self.tap}: " + "\t".join(self.fields)


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
        self.name = name
        self.description = description
        self.sinks = list(sinks)
        self.nodes = self._topological(self.sinks)
        names = [n.name for n in self.nodes]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise AssemblyError(f"flow {name!r}: duplicate operator names {sorted(dup)}")
        self.sources = [n for n in self.nodes if isinstance(n, Source)]
        self.steps = self._plan()

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
