"""Requests per status where the benchmark's regex captures group 1 (``bench/strings.py``): the same
records as ``matches.py`` when the group takes part in every match, so the same output."""
import os

import logetl.api as L

PATTERN = os.environ["LOGETL_BENCH_REGEX"]


def flow(fmt):
    counts = (L.read(fmt, fields=("request", "response"))
              .derive(captured=L.col("request").extract(PATTERN, 1), name="capture")
              .filter(L.col("captured").is_not_null(), name="matching")
              .group_by("response").agg(n=L.count()).sort("response"))
    return L.Flow("bench_extract", [counts.write("counts")])
