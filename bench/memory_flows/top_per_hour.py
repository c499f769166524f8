"""Top requests by bytes per hour, and top clients by bytes per hour with their distinct paths: two Tops and a
GroupBy with count_distinct in one step (a new user's flow that reached 1.7x --memory-limit)."""
import logetl.api as L


def flow(fmt):
    r = L.read(fmt, fields=("ip", "time", "request", "size"))
    d = r.derive(hour=L.hour(L.col("time")), n=L.coalesce(L.col("size").to_int(), 0), name="d") \
        .filter(L.col("hour").is_not_null(), name="valid_time")
    t = d.top(5, by=[L.desc("n"), "request"], per="hour", name="top_requests")
    g = d.group_by("hour", "ip", name="per_client").agg(bytes=L.sum("n"), reqs=L.count(),
                                                        paths=L.count_distinct("request"))
    t2 = g.top(3, by=[L.desc("bytes"), "ip"], per="hour", name="top_clients")
    return L.Flow("top_per_hour", [t.write("requests"), t2.write("clients")])
