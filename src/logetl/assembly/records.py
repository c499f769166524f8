"""The nodes that treat one record at a time, in order: ``Filter``, ``Select``, ``Rename``, ``Derive``, and
``Checkpoint``, which stores the records as they pass."""
from __future__ import annotations

from logetl.assembly.base import AssemblyError, Pipe
from logetl.expressions import BOOLEAN, Expr, field_name
from logetl.traits import MAP, STORE


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


class Checkpoint(Pipe, traits=STORE):
    """Materializes its input: everything downstream reads the stored copy, and a flow that fails later
    can restart after it. Anonymous by default (deleted when the flow completes). Order-preserving."""

    kind = "checkpoint"
