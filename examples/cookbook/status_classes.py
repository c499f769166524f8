"""Responses by status class, with their share of all requests.

    logetl run examples/cookbook/status_classes.py --input access.log --output classes=out/classes [--hdfs]

Output ``classes``: TSV ``class requests share``, one row per class present (``2xx``, ``3xx``, ``4xx``,
``5xx``: the response's first digit then ``xx``), sorted by class. ``share``: the class's requests divided
by all the records' (a float), rounded to 4 places; the shares add up to 1 up to rounding.
"""
import logetl.api as L


def flow(fmt):
    records = (L.read(fmt, fields=("response",))
               .derive(**{"class": L.concat(L.col("response").substring(1, 1), "xx"), "all": L.lit("all")},
                       name="class"))
    total = records.group_by("all", name="all_records").agg(total=L.count())
    classes = (records.group_by("all", "class", name="per_class").agg(requests=L.count())
               .join(total, on="all", name="with_total")
               .derive(share=L.round(L.col("requests") / L.col("total"), 4), name="share")
               .select("class", "requests", "share", name="report_fields")
               .sort("class", name="by_class"))
    return L.Flow("status_classes", [classes.write("classes")], "requests per status class and their share")
