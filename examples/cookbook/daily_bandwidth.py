"""Bytes sent per day.

    logetl run examples/cookbook/daily_bandwidth.py --input access.log --output bandwidth=out/bandwidth [--hdfs]

Output ``bandwidth``: TSV ``day requests bytes``, one row per day (``YYYY-MM-DD`` of the log's own time),
sorted by day: the day's records and the sum of their ``size`` (a size that is not a number, ``-`` for a
response without a body among them, counts 0). Records whose time is not valid are left out.
"""
import logetl.api as L


def flow(fmt):
    days = (L.read(fmt, fields=("time", "size"))
            .derive(day=L.day("time"), bytes=L.coalesce(L.col("size").to_int(), 0), name="day_and_bytes")
            .filter(L.col("day").is_not_null(), name="valid_time")
            .group_by("day", name="per_day").agg(requests=L.count(), bytes=L.sum("bytes"))
            .sort("day", name="by_day"))
    return L.Flow("daily_bandwidth", [days.write("bandwidth")], "requests and bytes sent per day")
