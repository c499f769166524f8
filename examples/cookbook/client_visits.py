"""Visits per client: how many times each address came back.

    logetl run examples/cookbook/client_visits.py --input access.log --output clients=out/clients [--hdfs]

Output ``clients``: TSV ``ip visits requests first last``: each client address's visits (a new visit
after more than 30 minutes without a request, as web analytics tools count sessions), its records, and the
UTC instants of its first and last request (``2015-05-17T10:05:03Z``). Sorted by visits descending,
requests descending, then ip. Records whose time is not valid are left out (``valid_time``).
"""
import logetl.api as L


def flow(fmt):
    clients = (L.read(fmt, fields=("ip", "time"))
               .derive(ts=L.timestamp("time"), name="instant")
               .filter(L.col("ts").is_not_null(), name="valid_time")
               .visits(by="ip", time="ts", gap_minutes=30, name="visits")
               .group_by("ip", name="per_client").agg(visits=L.max("visit"), requests=L.count(),
                                                      first=L.min("ts"), last=L.max("ts"))
               .sort(L.desc("visits"), L.desc("requests"), "ip", name="most_visits"))
    return L.Flow("client_visits", [clients.write("clients")], "visits and requests per client")
