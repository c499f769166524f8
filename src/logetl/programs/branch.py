"""Branch: one parsed stream split into two branches, each written whole to its own output.

Both outputs hold ``ip time request response size`` as TSV in input order, so they are byte-identical."""
from logetl.contract import FIELDS
from logetl.assembly import Flow, Parse, Pipe, Sink, Source


def flow(fmt=None) -> Flow:
    """``fmt``: the log format (``logetl.formats``; default ``combined``)."""
    parsed = Parse("parse", Source("input"), fmt, keep=FIELDS)
    left = Pipe("branch1", parsed)
    right = Pipe("branch2", parsed)
    return Flow(
        "branch",
        [Sink("sink1", left, tap="output1"), Sink("sink2", right, tap="output2")],
        "one parsed stream written to two identical outputs",
    )
