"""A flow: the nodes reachable from its sinks, in topological order, cut into steps; ``explain`` and
``dot`` draw it."""
from __future__ import annotations

from dataclasses import dataclass

from logetl.assembly.base import AssemblyError, Pipe
from logetl.assembly.ends import HEADERS, SINK_FORMATS, Sink, Source
from logetl.assembly.records import Checkpoint


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
