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

One module per concern: ``base`` (``Pipe``, the base of every node and the builder of flows, and
``AssemblyError``), ``ends`` (``Source``, ``Parse``, ``DropSizeDash``, ``Sink``), ``records`` (the nodes that
treat one record at a time), ``holding`` (the blocking nodes and ``HashJoin``) and ``flow`` (``Flow``, cut into
``Step`` objects); every name is imported from ``logetl.assembly``.
"""
from __future__ import annotations

# the API reference lists the nodes in this order: by module, each module's in the order of a flow
from logetl.assembly.base import AssemblyError, MissingField, Pipe
from logetl.assembly.ends import Source, Parse, DropSizeDash, Sink, UNPARTITIONED, SINK_FORMATS, HEADERS
from logetl.assembly.records import Filter, Select, Rename, Derive, Checkpoint
from logetl.assembly.holding import Unique, GroupBy, HashJoin, Sort, MAX_COUNT, Limit, Top, Visits, Sql
from logetl.assembly.flow import Step, Flow

#: the public names (the API reference documents each)
__all__ = [
    "AssemblyError", "MissingField", "Pipe", "Source", "Parse", "DropSizeDash", "Filter", "Select", "Rename",
    "Derive", "Unique", "GroupBy", "HashJoin", "Checkpoint", "Sort", "MAX_COUNT", "Limit", "Top", "Visits", "Sql",
    "UNPARTITIONED", "SINK_FORMATS", "HEADERS", "Sink", "Step", "Flow"]
