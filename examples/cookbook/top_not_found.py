"""The paths most often not found (response 404).

    logetl run examples/cookbook/top_not_found.py --input access.log --output not_found=out/not_found [--hdfs]

Output ``not_found``: TSV ``path requests``, the 20 paths (without query string) with the most 404
responses, sorted by requests descending, then path. A request line without a path is left out.
"""
import logetl.api as L


def flow(fmt):
    missing = (L.read(fmt, fields=("request", "response"))
               .filter(L.col("response") == "404", name="not_found")
               .derive(path=L.path("request"), name="path")
               .filter(L.col("path").is_not_null(), name="has_path")
               .group_by("path", name="per_path").agg(requests=L.count())
               .top(20, by=[L.desc("requests"), "path"], name="top_20"))
    return L.Flow("top_not_found", [missing.write("not_found")], "the 20 paths most often answered 404")
