"""Requests per status whose request line matches the benchmark's regex (``bench/strings.py``)."""
import os

import logetl.api as L

PATTERN = os.environ["LOGETL_BENCH_REGEX"]


def flow(fmt):
    counts = (L.read(fmt, fields=("request", "response"))
              .filter(L.col("request").matches(PATTERN), name="matching")
              .group_by("response").agg(n=L.count()).sort("response"))
    return L.Flow("bench_matches", [counts.write("counts")])
