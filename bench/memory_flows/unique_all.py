"""The distinct (ip, time, request) records: nearly every record."""
import logetl.api as L


def flow(fmt):
    return L.Flow("unique_all", [L.read(fmt, fields=("ip", "time", "request")).unique(name="unique_all").write("out")])
