"""The most requested pages.

    logetl run examples/cookbook/top_pages.py --input access.log --output pages=out/pages [--hdfs]

Output ``pages``: TSV ``path requests``, the 20 paths with the most requests (the request line's path as
written, without its query string: ``GET /a/b?q=1 HTTP/1.1`` counts for ``/a/b``), sorted by requests
descending, then path (UTF-8 byte order), so ties at the 20th place are decided by the path. A request
line without a path (malformed, ``*``) is left out (``has_path``).
"""
import logetl.api as L


def flow(fmt):
    pages = (L.read(fmt, fields=("request",))
             .derive(path=L.path("request"), name="path")
             .filter(L.col("path").is_not_null(), name="has_path")
             .group_by("path", name="per_path").agg(requests=L.count())
             .top(20, by=[L.desc("requests"), "path"], name="top_20"))
    return L.Flow("top_pages", [pages.write("pages")], "the 20 most requested paths")
