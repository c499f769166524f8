"""Filter: the distinct client addresses that requested the images area, one per line, byte order.

"Requested the images area" means the request starts with ``GET /images/``; the original program's
literal-equality rule would keep nothing useful, and its stated purpose governs (README, decisions)."""
from logetl.assembly import Filter, Flow, Parse, Retain, Sink, Sort, Source, StartsWith, Unique

IMAGES = StartsWith("request", "GET /images/")


def flow(fmt=None) -> Flow:
    """``fmt``: the log format (``logetl.formats``; default ``combined``)."""
    parsed = Parse("parse", Source("input"), fmt, keep=("ip", "request"))
    images = Filter("images", parsed, IMAGES)
    ips = Retain("retain_ip", images, ("ip",))
    distinct = Unique("unique_ip", ips)
    ordered = Sort("sort_ip", distinct, ("ip",))
    return Flow("filter", [Sink("sink", ordered, tap="output")], "distinct clients that requested /images/")
