"""Filter: the distinct client addresses that requested the images area, one per line, byte order.

"Requested the images area" means the request starts with ``GET /images/``; the original program's
literal-equality rule would keep nothing useful, and its stated purpose governs (docs/reference/programs.md).

Records whose size is exactly ``-`` are dropped first (``drop_size_dash``, the original programs' rule)."""
import logetl.api as L

IMAGES = L.col("request").starts_with("GET /images/")


def flow(fmt=None) -> L.Flow:
    """``fmt``: the log format (``logetl.formats``; default ``combined``)."""
    ips = (L.read(fmt, fields=("ip", "request"))
           .drop_size_dash()
           .filter(IMAGES, name="images")
           .select("ip", name="retain_ip")
           .unique(name="unique_ip")
           .sort("ip", name="sort_ip"))
    return L.Flow("filter", [ips.write("output", name="sink")], "distinct clients that requested /images/")
