"""Branch: one parsed stream split into two branches, each written whole to its own output.

Both outputs hold ``ip time request response size`` as TSV in input order, so they are byte-identical.
Written on the public API (``logetl.api``) alone, like every program logetl ships.

Records whose size is exactly ``-`` are dropped first (``drop_size_dash``, the original programs' rule)."""
import logetl.api as L
from logetl.contract import FIELDS


def flow(fmt=None) -> L.Flow:
    """``fmt``: the log format (``logetl.formats``; default ``combined``)."""
    parsed = L.read(fmt, fields=FIELDS).drop_size_dash()
    return L.Flow(
        "branch",
        [parsed.branch("branch1").write("output1", name="sink1"),
         parsed.branch("branch2").write("output2", name="sink2")],
        "one parsed stream written to two identical outputs",
    )
