"""What each node of a flow declares about how it treats records, read by every engine's planners.

A node class states its traits once, on its class line (``class Filter(Pipe, traits=MAP)``); the fast
paths read them, never a list of node classes: the local engine fuses a chain of ``maps_records`` nodes into
its parse threads, the Spark engine writes a step of ``per_record`` nodes in one pass, and ``--incremental``
runs a flow none of whose nodes ``needs_all_data`` on the new lines alone. A new per-record operator is one
node class with its traits plus one entry in each engine's operator tables.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Traits:
    """How a node treats records.

    ``per_record``: what it gives for a record depends on that record alone, and its output keeps the
    input's order (it streams: memory does not grow with the input). ``blocking``: it sees all of its input
    before it gives its first record. ``maps_records``: a per-record node that
    changes the records (keeps, drops or computes fields); engines run it as a map over a batch.
    ``needs_all_data``: its result is a whole of its input (a blocking operator, or a checkpoint's store), so
    a run over the new lines alone would give another one. ``folds_into_parse``: the parse before it does
    it in its own scan; the flow folds it into that parse, so that no engine receives it."""

    per_record: bool
    blocking: bool = False
    maps_records: bool = False
    needs_all_data: bool = False
    folds_into_parse: bool = False


#: records pass one at a time and unchanged (a source, a parse, a named branch, a sink)
STREAM = Traits(per_record=True)
#: one record in, at most one out, computed from it alone (filter, select, rename, derive)
MAP = Traits(per_record=True, maps_records=True)
#: needs all of its input before it gives its first record (unique, group by, sort, limit, top, visits)
BLOCKING = Traits(per_record=False, blocking=True, needs_all_data=True)
#: streams one input through, holding the other whole (a hash join)
JOIN = Traits(per_record=False, needs_all_data=True)
#: streams its records on unchanged, and stores them whole for later steps and restarts (a checkpoint)
STORE = Traits(per_record=True, needs_all_data=True)
#: drops records in the parse's own scan (``DropSizeDash``)
PARSE_FOLD = Traits(per_record=True, maps_records=True, folds_into_parse=True)
