"""Top clients: per day, the 10 client addresses with the most bytes.

    logetl run examples/top_clients.py --input access.log --output top=out/top [--hdfs]

Output ``top``: TSV ``day ip bytes``. ``day`` is ``YYYY-MM-DD`` from the log's own time (no zone
conversion); ``bytes`` the sum of ``size`` as an integer (a size that is not a decimal number counts 0).
Sorted by day, then bytes descending, then ip (byte order); ties at the tenth place are broken by that
order. Records whose time is not a valid ``dd/Mon/yyyy:HH:MM:SS ±zzzz`` are left out (the summary counts
them at ``valid_time``), as are malformed lines (the line contract); a size of ``-`` counts 0.
"""
import logetl.api as L


def flow(fmt):
    records = L.read(fmt, fields=("ip", "time", "size"))
    dated = records.derive(day=L.day(L.col("time")), bytes=L.coalesce(L.col("size").to_int(), 0),
                           name="day_and_bytes")
    valid = dated.filter(L.col("day").is_not_null(), name="valid_time")
    per_client = valid.group_by("day", "ip", name="bytes_per_client").agg(bytes=L.sum("bytes"))
    top = per_client.top(10, by=[L.desc("bytes"), "ip"], per="day", name="top_10_per_day")
    return L.Flow("top_clients", [top.write("top")], "per day, the 10 clients with the most bytes")
