"""Status by hour: how many requests got each response status, hour by hour.

    logetl run examples/status_by_hour.py --input access.log --output counts=out/counts [--hdfs]

Output ``counts``: TSV ``hour response count``, ``hour`` as ``YYYY-MM-DDTHH`` from the log's own time (no
zone conversion), one row per hour and status, sorted by hour then response. Records whose time is not a
valid ``dd/Mon/yyyy:HH:MM:SS ±zzzz`` are left out (counted at ``valid_time`` in the summary); every other
record counts, whatever its size (``-`` included).
"""
import logetl.api as L


def flow(fmt):
    counts = (L.read(fmt, fields=("time", "response"))
              .derive(hour=L.hour(L.col("time")), name="hour")
              .filter(L.col("hour").is_not_null(), name="valid_time")
              .group_by("hour", "response", name="per_hour_and_status").agg(count=L.count())
              .sort("hour", "response", name="by_hour"))
    return L.Flow("status_by_hour", [counts.write("counts")], "requests per response status per hour")
