"""Requests and visitors per day.

    logetl run examples/cookbook/daily_traffic.py --input access.log --output days=out/days [--hdfs]

Output ``days``: TSV ``day requests visitors``, one row per day (``YYYY-MM-DD`` of the log's own time, no
zone conversion), sorted by day. ``requests``: the day's records; ``visitors``: the distinct pairs of
client address and user agent seen that day, as GoAccess counts unique visitors (a record without a user
agent counts with the empty agent). Records whose time is not valid are left out (``valid_time``).
"""
import logetl.api as L


def flow(fmt):
    days = (L.read(fmt, fields=("ip", "time", "user_agent"))
            .derive(day=L.day("time"),
                    visitor=L.concat(L.col("ip"), " ", L.coalesce(L.col("user_agent"), "")), name="day_and_visitor")
            .filter(L.col("day").is_not_null(), name="valid_time")
            .group_by("day", name="per_day").agg(requests=L.count(), visitors=L.count_distinct("visitor"))
            .sort("day", name="by_day"))
    return L.Flow("daily_traffic", [days.write("days")], "requests and unique visitors per day")
