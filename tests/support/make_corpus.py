"""Writes the conformance corpus and its expected outputs: python tests/support/make_corpus.py
(test_corpus.py checks that the checked-in files are what this writes)."""
from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import reference  # noqa: E402
from corpus_cases import CASES  # noqa: E402

HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "corpus")


def build() -> dict[str, bytes]:
    log = b"\n".join(line for _, line, _ in CASES)  # the last line has no newline
    records, bad, reasons, dash = reference.parse(log)
    counts = {"lines": len(CASES), "malformed": reasons, "dropped_size_dash": dash, "records": len(records)}
    return {
        "corpus.log": log,
        "branch.tsv": reference.branch(records),
        "filter.tsv": reference.filter_(records),
        "join.tsv": reference.join(records),
        "trap.log": b"".join(raw + b"\n" for raw in bad),
        "counts.json": (json.dumps(counts, indent=2, sort_keys=True) + "\n").encode(),
    }


if __name__ == "__main__":
    os.makedirs(HERE, exist_ok=True)
    for name, data in build().items():
        with open(os.path.join(HERE, name), "wb") as f:
            f.write(data)
    print(f"wrote {len(build())} files to {HERE}")
