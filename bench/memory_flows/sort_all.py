"""Every record sorted by request, then size descending."""
import logetl.api as L


def flow(fmt):
    return L.Flow("sort_all", [L.read(fmt).sort("request", L.desc("size"), name="sort_all").write("out")])
