"""A GroupBy whose key is nearly unique (ip, time and request): as many groups as records."""
import logetl.api as L


def flow(fmt):
    s = L.read(fmt, fields=("ip", "time", "request", "size")) \
        .derive(k=L.concat(L.col("ip"), L.col("time"), L.col("request")), name="key") \
        .group_by("k", name="groups").agg(n=L.count(), b=L.sum(L.col("size").to_int()), d=L.count_distinct("ip"))
    return L.Flow("group_near_unique", [s.write("out")])
