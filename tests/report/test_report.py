"""``logetl report`` on the real sample log: every panel equals a plain-Python computation over an
independent regex parse (both engines), and the totals, visitors per day and status codes equal GoAccess's
own JSON for the same log, in the combined and the common format."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import urllib.parse

import pytest

from conftest import SAMPLE, logetl, require

MONTHS = {m: i + 1 for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split())}
LINE = re.compile(r'^(\S+) \S+ \S+ \[(\d\d)/(\w{3})/(\d{4}):(\d\d):\d\d:\d\d [+-]\d{4}\] "(.*?)" (\d{3}) (\S+)'
                  r'(?: "(.*?)" "(.*?)")?$')


def parse(path: str, common: bool = False) -> list[dict]:
    """The sample's records, by a regex of this test's own (every line of the sample is well-formed)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = LINE.match(line.rstrip("\n"))
            assert m, line
            ip, dd, mon, yyyy, hh, request, status, size, referer, agent = m.groups()
            parts = request.split(" ")
            target = parts[1] if len(parts) == 3 and all(parts) else request
            out.append({"ip": ip, "day": f"{yyyy}-{MONTHS[mon]:02d}-{dd}", "hour": hh, "status": status,
                        "bytes": int(size) if size.isdigit() else 0, "target": target,
                        "referer": None if common else referer, "agent": "" if common else (agent or "")})
    return out


def site(referer: str | None) -> str | None:
    if not referer or "://" not in referer:
        return None
    return urllib.parse.urlsplit(referer).hostname or None


def measures(records: list[dict]) -> dict:
    visitors = {(r["ip"], r["day"], r["agent"]) for r in records if not r["status"].startswith("4")}
    return {"hits": len(records), "visitors": len(visitors), "bytes": sum(r["bytes"] for r in records)}


def grouped(records, key, label, keys=("hits", "visitors", "bytes")) -> list[dict]:
    groups: dict = {}
    for r in records:
        k = key(r)
        if k is not None:
            groups.setdefault(k, []).append(r)
    rows = [{label: k, **{m: v for m, v in measures(rs).items() if m in keys}} for k, rs in groups.items()]
    return rows


def ranked(rows, label):
    return sorted(rows, key=lambda r: (-r["hits"], str(r[label])))


def expected(records: list[dict], who: str = "all", keep=None) -> dict:
    """The report, computed here in plain Python (the agents classified by the libraries directly);
    ``keep``: the filters (--from, --until, --where), a function of the records."""
    lines = len(records)
    if keep is not None:
        records = keep(records)
    from crawlerdetect import CrawlerDetect
    from ua_parser import parse as ua

    detect = CrawlerDetect()
    kind = {}
    for a in {r["agent"] for r in records}:
        crawler = detect.getMatches() if a and detect.isCrawler(a) else None
        p = ua(a) if a else None
        kind[a] = {"crawler": crawler, "os": p.os.family if p and p.os else "Other",
                   "browser": p.user_agent.family if p and p.user_agent else "Other"}
    humans = [r for r in records if kind[r["agent"]]["crawler"] is None]
    crawlers = [r for r in records if kind[r["agent"]]["crawler"] is not None]
    sides = {"humans": measures(humans), "crawlers": measures(crawlers)}
    kept = {"all": records, "humans": humans, "crawlers": crawlers}[who]
    total = measures(kept)
    days = sorted(r["day"] for r in kept)
    return {
        "general": {"total_requests": lines, "valid_requests": lines, "failed_requests": 0,
                    "excluded_hits": lines - len(kept), "hits": total["hits"],
                    "unique_visitors": total["visitors"], "bandwidth": total["bytes"],
                    "start_date": days[0], "end_date": days[-1], "log_size": os.path.getsize(SAMPLE), "who": who},
        "who": sides,
        "shares": {k: round(v["hits"] / len(records), 4) for k, v in sides.items()},
        "visitors": sorted(grouped(kept, lambda r: r["day"], "day"), key=lambda r: r["day"]),
        "requests": ranked(grouped(kept, lambda r: r["target"], "path"), "path"),
        "not_found": ranked(grouped(kept, lambda r: r["target"] if r["status"] == "404" else None, "path"), "path"),
        "hosts": ranked(grouped(kept, lambda r: r["ip"], "host"), "host"),
        "os": ranked(grouped(kept, lambda r: kind[r["agent"]]["os"], "name"), "name"),
        "browsers": ranked(grouped(kept, lambda r: kind[r["agent"]]["browser"], "name"), "name"),
        "visit_time": sorted(grouped(kept, lambda r: r["hour"], "hour"), key=lambda r: r["hour"]),
        "referring_sites": ranked(grouped(kept, lambda r: site(r["referer"]), "site"), "site"),
        "status_codes": sorted(grouped(kept, lambda r: r["status"], "code"), key=lambda r: r["code"]),
        "crawlers": ranked(grouped(kept, lambda r: kind[r["agent"]]["crawler"], "name"), "name"),
    }


def run_report(tmp_path, *args) -> dict:
    out = tmp_path / "report"
    p = logetl("report", "--input", SAMPLE, "--output", str(out), "--quiet", *args, env={"LOGETL_MONITOR": "off"})
    assert p.returncode == 0, p.stderr.decode()
    assert p.stderr == b""
    assert not (out / ".report-panels").exists()
    return json.loads((out / "report.json").read_text(encoding="utf-8"))


@pytest.mark.shared
@pytest.mark.parametrize("who", ["all", "humans", "crawlers"])
def test_every_panel_equals_an_independent_computation(tmp_path, sample, who):
    got = run_report(tmp_path, "--who", who)
    want = expected(parse(sample), who)
    for panel in want:
        assert got[panel] == want[panel], panel
    assert set(got) == set(want)
    if who == "all":      # the sample has both, and a known mix
        assert got["who"]["crawlers"]["hits"] > 0 and got["who"]["humans"]["hits"] > 0


def common_log(sample: str, path: str) -> str:
    """The sample's requests in the common format (without the referer and agent), written at ``path``."""
    with open(sample, encoding="utf-8") as f, open(path, "w", encoding="utf-8") as out:
        for line in f:
            out.write(line[:LINE.match(line.rstrip("\n")).end(8)] + "\n")
    return path


def goaccess(log: str, log_format: str, out: str) -> dict:
    require(shutil.which("goaccess") is not None, "goaccess is not installed (apt-get install goaccess)")
    subprocess.run(["goaccess", log, f"--log-format={log_format}", "-o", out, "--no-progress"], check=True,
                   capture_output=True, timeout=300)
    with open(out, encoding="utf-8") as f:
        return json.load(f)


def agrees_with_goaccess(report: dict, ga: dict) -> None:
    g, gg = report["general"], ga["general"]
    for key in ("total_requests", "valid_requests", "failed_requests", "unique_visitors", "bandwidth", "log_size"):
        assert g[key] == gg[key], key
    days = [{"day": f"{d['data'][:4]}-{d['data'][4:6]}-{d['data'][6:]}", "hits": d["hits"]["count"],
             "visitors": d["visitors"]["count"], "bytes": d["bytes"]["count"]} for d in ga["visitors"]["data"]]
    assert report["visitors"] == sorted(days, key=lambda r: r["day"])
    codes = sorted((item["data"].split(" ")[0], item["hits"]["count"])
                   for group in ga["status_codes"]["data"] for item in group["items"])
    assert [(r["code"], r["hits"]) for r in report["status_codes"]] == codes
    months = {v: k for k, v in MONTHS.items()}
    for ours, theirs in ((g["start_date"], gg["start_date"]), (g["end_date"], gg["end_date"])):
        y, m, d = ours.split("-")
        assert f"{d}/{months[int(m)]}/{y}" == theirs


@pytest.mark.shared
@pytest.mark.parametrize("log_format", ["combined", "common"])
def test_totals_days_and_status_codes_equal_goaccess(tmp_path, sample, log_format):
    log = common_log(sample, str(tmp_path / "common.log")) if log_format == "common" else sample
    ga = goaccess(log, log_format.upper(), str(tmp_path / "goaccess.json"))
    out = tmp_path / "report"
    p = logetl("report", "--input", log, "--output", str(out), "--format", log_format, "--quiet",
               env={"LOGETL_MONITOR": "off"})
    assert p.returncode == 0, p.stderr.decode()
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    agrees_with_goaccess(report, ga)
    if log_format == "common":
        want = expected(parse(log, common=True))
        want["general"]["log_size"] = os.path.getsize(log)
        assert report == want
