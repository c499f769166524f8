"""``logetl report`` on every vendor preset, over the real lines of their documentation and other parsers'
test suites (``test_vendor_real_lines``) and a W3C log with a header that changes mid-file: the totals,
visitors per day, hours, status codes and requests equal a plain-Python computation over the format's
reference matcher, with each vendor's time read by ``datetime`` (UTC, the zone they write; HAProxy's clock
as written), on both engines. Header lines and HAProxy's non-HTTP lines are no requests."""
from __future__ import annotations

import collections
import datetime
import json

import pytest

from conftest import logetl
from test_report import grouped, ranked
from test_vendor_real_lines import JSON_LINES, LINES
from test_w3c_format import LOG as W3C_LOG
from logetl import contract, formats, w3c
from logetl.report.build import build

#: a HAProxy log with a TCP-mode line and a notice beside its request (counted apart, not requests)
HAPROXY_EXTRA = [
    b'Feb  6 12:12:56 localhost haproxy[14387]: 10.0.1.2:33313 [06/Feb/2009:12:12:51.443] fnt bck/srv1 0/0/5007 '
    b'212 -- 0/0/0/0/3 0/0',
    b"Proxy fnt started.",
]


def logs() -> dict[str, bytes]:
    by_spec: dict = collections.OrderedDict()
    for spec, raw, _ in LINES + JSON_LINES:
        if spec in formats.VENDOR or spec in formats.JSON_NAMES:
            by_spec.setdefault(spec, []).append(raw)
    by_spec["haproxy"] += HAPROXY_EXTRA
    out = {spec: b"\n".join(raws) + b"\n" for spec, raws in by_spec.items()}
    out["w3c"] = W3C_LOG
    return out


def _instant(spec: str, f: dict) -> tuple[str, str]:
    """The record's day and hour, by ``datetime``."""
    if spec in ("cloudfront", "w3c"):
        clock = f["time"] if spec == "cloudfront" else f["time_of_day"]
        t = datetime.datetime.fromisoformat(f"{f['date']}T{clock[:8]}")
    elif spec == "caddy":
        t = datetime.datetime.fromtimestamp(int(f["time"].split(".")[0]), datetime.timezone.utc)
    elif spec == "haproxy":
        t = datetime.datetime.strptime(f["time"][:20], "%d/%b/%Y:%H:%M:%S")
    elif spec in ("alb", "elb", "traefik"):
        t = datetime.datetime.fromisoformat(f["time"][:19])
    else:                        # s3, nginx_json: an access-log time, as written
        t = datetime.datetime.strptime(f["time"][:20], "%d/%b/%Y:%H:%M:%S")
    return t.strftime("%Y-%m-%d"), t.strftime("%H")


def _target(f: dict) -> str:
    if "path" in f:
        q = f.get("query")
        return f["path"] + (f"?{q}" if q not in (None, "", "-") else "")
    parts = f["request"].split(" ")
    return parts[1] if len(parts) == 3 and all(parts) else f["request"]


def records(spec: str, log: bytes) -> tuple[list[dict], int]:
    """The log's requests, by the format's reference matcher (one line at a time; a W3C line by the
    columns of the ``#Fields:`` line before it), and how many of its lines are malformed."""
    fmt = formats.compile_format(spec)
    cols = w3c.columns(w3c.DEFAULT_FIELDS)
    out, malformed = [], 0
    for raw in log.splitlines():
        raw = raw.rstrip(b"\r")
        try:
            if spec == "w3c":
                if raw.startswith(w3c.FIELDS_DIRECTIVE):
                    cols = w3c.columns(raw[len(w3c.FIELDS_DIRECTIVE):])
                if raw.startswith(b"#"):
                    continue
                f = dict(zip(w3c.FIELDS, w3c.parse_line(raw, cols)))
            else:
                f = fmt.parse_line(raw)
        except (formats.Header, formats.NotRequest):
            continue
        except contract.Malformed:
            malformed += 1
            continue
        f = f if isinstance(f, dict) else dict(zip(fmt.fields, f))
        day, hour = _instant(spec, f)
        size = f.get("size") or ""
        out.append({"ip": f["ip"] or "-", "day": day, "hour": hour, "status": f["response"],
                    "bytes": int(size) if size.isdigit() else 0, "target": _target(f),
                    "agent": f.get("user_agent") or ""})
    return out, malformed


def expected(recs: list[dict], malformed: int) -> dict:
    visitors = {(r["ip"], r["day"], r["agent"]) for r in recs if not r["status"].startswith("4")}
    days = sorted(r["day"] for r in recs)
    return {
        "general": {"total_requests": len(recs) + malformed, "valid_requests": len(recs),
                    "failed_requests": malformed,
                    "unique_visitors": len(visitors), "bandwidth": sum(r["bytes"] for r in recs),
                    "start_date": days[0], "end_date": days[-1]},
        "visitors": sorted(grouped(recs, lambda r: r["day"], "day"), key=lambda r: r["day"]),
        "requests": ranked(grouped(recs, lambda r: r["target"], "path"), "path"),
        "visit_time": sorted(grouped(recs, lambda r: r["hour"], "hour"), key=lambda r: r["hour"]),
        "status_codes": sorted(grouped(recs, lambda r: r["status"], "code"), key=lambda r: r["code"]),
    }


def report(tmp_path, spec: str, log: bytes, engine: str) -> dict:
    """The report.json of ``log`` read with ``spec``: on the local engine by the command line; on Spark by
    the command's own ``build`` with its run options, on the shared session (a command line with --hdfs
    would start a JVM for each preset; its options are the local engine's but for the engine)."""
    path = tmp_path / f"{spec}.log"
    path.write_bytes(log)
    out = tmp_path / f"report-{spec}"
    if engine == "spark":
        build(str(path), str(out), formats.resolve(spec, None),
              run_options={"engine": "spark", "monitor": False, "quiet": True})
    else:
        p = logetl("report", "--input", str(path), "--format", spec, "--output", str(out), "--quiet",
                   env={"LOGETL_MONITOR": "off"})
        assert p.returncode == 0, p.stderr.decode()
    return json.loads((out / "report.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("spec", list(logs()))
def test_each_vendor_preset_reports_what_plain_python_counts(tmp_path, spec, engine):
    log = logs()[spec]
    want = expected(*records(spec, log))
    got = report(tmp_path, spec, log, engine)
    assert {k: got["general"][k] for k in want["general"]} == want["general"]
    for panel in ("visitors", "requests", "visit_time", "status_codes"):
        assert got[panel] == want[panel], panel


def test_the_vendor_logs_hold_what_the_test_means_to_check():
    """Every vendor preset is here, and the lines counted apart and the malformed one are there to be
    left out."""
    have = logs()
    assert set(have) == {*formats.VENDOR, *formats.JSON_NAMES, "w3c"}
    assert have["cloudfront"].count(b"\n#") + have["cloudfront"].startswith(b"#") >= 2
    assert records("haproxy", have["haproxy"]) == (records("haproxy", have["haproxy"])[0], 0)
    assert len(records("haproxy", have["haproxy"])[0]) == have["haproxy"].count(b"\n") - 2
    assert [len(x) if isinstance(x, list) else x for x in records("w3c", have["w3c"])] == [5, 1]
