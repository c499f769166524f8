"""The busiest hours of the day.

    logetl run examples/cookbook/busiest_hours.py --input access.log --output hours=out/hours [--hdfs]

Output ``hours``: TSV ``hour requests``, one row per hour of the day (0 to 23, of the log's own time as
written, no zone conversion) that has records, all days together, sorted by requests descending, then
hour. Records whose time is not valid are left out (``valid_time``).
"""
import logetl.api as L


def flow(fmt):
    hours = (L.read(fmt, fields=("time",))
             .derive(hour=L.hour_of_day("time"), name="hour")
             .filter(L.col("hour").is_not_null(), name="valid_time")
             .group_by("hour", name="per_hour").agg(requests=L.count())
             .sort(L.desc("requests"), "hour", name="busiest_first"))
    return L.Flow("busiest_hours", [hours.write("hours")], "requests per hour of the day, busiest first")
