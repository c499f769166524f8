"""Plain-Python reference implementations of the three programs, straight from their contract and the
reference line parser. Used to write the expected files of the conformance corpus (checked in) and to
check them; engines are tested against the checked-in files, never against this code directly."""
from __future__ import annotations

import zlib

from logetl import contract


def parse(data: bytes, drop_dash: bool = True):
    """(records kept, malformed raw lines, reasons, dropped size '-'); ``drop_dash``: the programs' rule
    (a flow's read keeps those records: False)"""
    records, bad, reasons, dash = [], [], {}, 0
    for raw in contract.split_lines(data):
        try:
            fields = contract.parse_line(raw)
        except contract.Malformed as exc:
            bad.append(raw)
            reasons[exc.reason] = reasons.get(exc.reason, 0) + 1
            continue
        if not drop_dash or contract.keeps(fields):
            records.append(fields)
        else:
            dash += 1
    return records, bad, reasons, dash


def tsv(rows) -> bytes:
    return "".join("\t".join(str(v) for v in r) + "\n" for r in rows).encode("utf-8")


def branch(records) -> bytes:
    return tsv(records)


def images(records):
    return [r for r in records if r[2].startswith("GET /images/")]


def filter_(records) -> bytes:
    ips = sorted({r[0] for r in images(records)}, key=lambda s: s.encode("utf-8"))
    return tsv((ip,) for ip in ips)


def score(ip: str) -> int:
    return zlib.crc32(ip.encode("utf-8")) % 100


def join(records) -> bytes:
    a = {r[0] for r in images(records)}
    b = [(r[0],) + tuple(r[1:]) + (score(r[0]),) for r in records if score(r[0]) >= 60]
    joined = [(ip,) + rec for rec in b for ip in [rec[0]] if ip in a]
    joined.sort(key=lambda r: -r[-1])  # stable
    return tsv(joined)
