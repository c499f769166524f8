"""The cookbook (examples/cookbook/*.py) on every engine, against independent computations written from
each flow's docstring and sharing no code with logetl: plain Python with its own regular expressions for
every flow, and DuckDB SQL over the raw text (regexp_extract) for three of them. Run on the real sample
log and on a hand-written log of edge cases (no quoted tail, a referrer of ``-``, sizes of ``-``, invalid
times, upper-case bots, non-ASCII agents, query strings, ties at the 20th place)."""
from __future__ import annotations

import math
import os
import re
from collections import Counter, defaultdict
from datetime import datetime, timedelta

import pytest

from conftest import ROOT, logetl, parts, read, require
from logetl import flowfile
from logetl.job import run_flow

COOKBOOK = os.path.join(ROOT, "examples", "cookbook")

# --- the independent parse -----------------------------------------------------------------------------

LINE = re.compile(r'(\S*) \S+ \S+ \[([^\]]+)\] "(.+?)" ([0-9]{3}) (\S*)(.*)', re.DOTALL)
QUOTED = r'"((?:[^"\\]|\\.)*)"'
TAIL = re.compile(rf" {QUOTED} {QUOTED}(?: .*)?", re.DOTALL)
TIME_FORMAT = "%d/%b/%Y:%H:%M:%S %z"


def parse(data: bytes) -> list[dict]:
    """The records of a raw combined log: ip, time, request, response, size, referer, user_agent (the last
    two None when the line lacks the quoted tail)."""
    out = []
    for raw in data.split(b"\n"):
        m = LINE.fullmatch(raw.removesuffix(b"\r").decode("utf-8"))
        if m is None:
            continue
        ip, time, request, response, size, tail = m.groups()
        quoted = TAIL.fullmatch(tail)
        referer, agent = quoted.groups() if quoted else (None, None)
        out.append(dict(ip=ip, time=time, request=request, response=response, size=size, referer=referer,
                        user_agent=agent))
    return out


def when(time: str) -> datetime | None:
    """The aware datetime of a log time, None when it is not one (29 February 2015, hour 24)."""
    try:
        return datetime.strptime(time, TIME_FORMAT)
    except ValueError:
        return None


def path_of(request: str) -> str | None:
    parts_ = request.split(" ")
    if len(parts_) != 3 or "" in parts_:
        return None
    target = parts_[1]
    if target.startswith("/"):
        return re.split(r"[?#]", target)[0]
    absolute = re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*([^?#]*).*", target)
    if absolute:
        return absolute.group(1) or "/"
    return None


def host_of(url: str) -> str | None:
    m = re.match(r"[A-Za-z][A-Za-z0-9+.-]*://(?:[^/?#@]*@)?(\[[^\]/?#]*\]|[^/?#:]*)", url)
    if not m or m.group(1) in ("", "[]"):
        return None
    host = m.group(1).strip("[]")
    return host.translate(str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz"))


def number(size: str) -> int:
    return int(size) if re.fullmatch(r"-?[0-9]{1,18}", size) else 0


def round4(x: float) -> float:
    """Ties away from zero, on the product with 10**4 (as the flows' round documents)."""
    p = x * 10_000
    return math.copysign(math.floor(abs(p) + 0.5), p) / 10_000


def tsv(rows) -> bytes:
    return b"".join("\t".join(str(v) for v in row).encode() + b"\n" for row in rows)


def top20(counts: Counter) -> list:
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0].encode()))[:20]


# --- the ten answers, in plain Python --------------------------------------------------------------------

def daily_traffic(recs):
    requests, visitors = Counter(), defaultdict(set)
    for r in recs:
        t = when(r["time"])
        if t:
            day = t.strftime("%Y-%m-%d")
            requests[day] += 1
            visitors[day].add((r["ip"], r["user_agent"] or ""))
    return tsv((d, requests[d], len(visitors[d])) for d in sorted(requests))


def top_pages(recs):
    return tsv(top20(Counter(p for r in recs if (p := path_of(r["request"])) is not None)))


def top_not_found(recs):
    return tsv(top20(Counter(p for r in recs if r["response"] == "404" and (p := path_of(r["request"])))))


def status_classes(recs):
    classes = Counter(r["response"][0] + "xx" for r in recs)
    return tsv((c, n, round4(n / len(recs))) for c, n in sorted(classes.items()))


def daily_bandwidth(recs):
    requests, sent = Counter(), Counter()
    for r in recs:
        t = when(r["time"])
        if t:
            requests[t.strftime("%Y-%m-%d")] += 1
            sent[t.strftime("%Y-%m-%d")] += number(r["size"])
    return tsv((d, requests[d], sent[d]) for d in sorted(requests))


def top_referrers(recs):
    return tsv(top20(Counter(h for r in recs if r["referer"] not in (None, "-") and (h := host_of(r["referer"])))))


def top_agents(recs):
    return tsv(top20(Counter(r["user_agent"] for r in recs if r["user_agent"] is not None)))


def bot_share(recs):
    bots = sum(1 for r in recs if r["user_agent"] and re.search("bot|crawler|spider", r["user_agent"],
                                                              re.IGNORECASE | re.ASCII))
    return tsv([(len(recs), bots, round4(bots / len(recs)))])


def busiest_hours(recs):
    hours = Counter(t.hour for r in recs if (t := when(r["time"])))
    return tsv(sorted(hours.items(), key=lambda kv: (-kv[1], kv[0])))


def client_visits(recs):
    times = defaultdict(list)
    for r in recs:
        t = when(r["time"])
        if t:
            times[r["ip"]].append(t)
    rows = []
    for ip, ts in times.items():
        ts.sort()
        visits = 1 + sum(1 for a, b in zip(ts, ts[1:]) if b - a > timedelta(minutes=30))
        first, last = (t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in (to_utc(ts[0]), to_utc(ts[-1])))
        rows.append((ip, visits, len(ts), first, last))
    rows.sort(key=lambda r: (-r[1], -r[2], r[0].encode()))
    return tsv(rows)


def to_utc(t: datetime) -> datetime:
    return (t - t.utcoffset()).replace(tzinfo=None)


#: flow file -> (its output tap, the independent answer)
CASES = {
    "daily_traffic": ("days", daily_traffic),
    "top_pages": ("pages", top_pages),
    "top_not_found": ("not_found", top_not_found),
    "status_classes": ("classes", status_classes),
    "daily_bandwidth": ("bandwidth", daily_bandwidth),
    "top_referrers": ("referrers", top_referrers),
    "top_agents": ("agents", top_agents),
    "bot_share": ("bots", bot_share),
    "busiest_hours": ("hours", busiest_hours),
    "client_visits": ("clients", client_visits),
}


def _edge_log() -> bytes:
    lines = []

    def add(ip="10.0.0.1", time="17/May/2015:10:05:03 +0000", request="GET /a HTTP/1.1", response="200",
            size="100", tail=' "-" "agent"'):
        lines.append(f'{ip} - - [{time}] "{request}" {response} {size}{tail}'.encode())

    for i in range(23):        # 23 paths with one 404 each: ties at the 20th place, decided by the path
        add(ip=f"10.0.1.{i}", request=f"GET /p{i:02d}?q={i} HTTP/1.1", response="404",
            tail=f' "http://Ref{i % 3}.example:8080/x" "Agent {i % 4}"')
    add(tail="")                                                         # no quoted tail: null referer, agent
    add(size="-", tail=' "-" "Googlebot/2.1"')                           # a bot; size '-' counts 0
    add(tail=' "https://user@WWW.Example.com/p" "Mozilla/5.0 (compatible; BINGBOT)"')
    add(tail=' "android-app://x" "Baiduspider"')
    add(tail=' "" "Ägent é"')                                           # empty referrer, non-ASCII agent
    add(tail=' "-" "robot-ish crawler"')
    add(time="29/Feb/2015:10:00:00 +0000", size="7")                     # not a day: left out of daily flows
    add(time="17/May/2015:24:00:00 +0000")                               # hour 24: not valid
    add(time="18/May/2015:00:10:00 +0200", response="500", size="12a")   # 2015-05-17T22:10Z, day as written
    add(time="17/May/2015:10:34:03 +0000", response="301")               # 31 minutes: a new visit
    add(time="17/May/2015:11:04:03 +0000", response="302")               # exactly 30 minutes: same visit
    add(ip="10.0.0.2", time="19/May/2015:23:59:59 -0700", request="POST http://h/x/y?z HTTP/1.1")
    add(ip="10.0.0.2", request="*")                                      # no path
    add(ip="10.0.0.3", request="GET  /double-space HTTP/1.1", response="404")
    lines.append(b"a malformed line")
    return b"\n".join(lines) + b"\n"


def _logs(tmp_path, sample) -> dict[str, str]:
    edge = tmp_path / "edge.log"
    edge.write_bytes(_edge_log())
    return {"edge": str(edge), "sample": sample}


@pytest.mark.shared
@pytest.mark.parametrize("recipe", sorted(CASES))
def test_recipe_gives_the_independent_answer(engine, tmp_path, recipe, sample):
    tap, answer = CASES[recipe]
    for name, log in _logs(tmp_path, sample).items():
        out = tmp_path / f"{name}-out"
        run_flow(flowfile.load(os.path.join(COOKBOOK, f"{recipe}.py")), log, {tap: str(out)}, engine=engine,
                 monitor=False)
        want = answer(parse(read(log)))
        assert parts(out) == want, f"{recipe} on {name}"
        assert want.count(b"\n") >= (1 if recipe == "bot_share" else 3), f"{recipe} on {name} proves little"


def test_the_independent_parse_reads_the_hand_written_cases():
    recs = parse(_edge_log())
    assert len(recs) == 37
    assert recs[23]["referer"] is None and recs[23]["user_agent"] is None
    assert recs[27]["referer"] == "" and recs[27]["user_agent"] == "Ägent é"
    assert [path_of(r["request"]) for r in recs[-3:]] == ["/x/y", None, None]
    assert host_of("https://user@WWW.Example.com:80/p") == "www.example.com"
    assert bot_share(recs) == b"37\t4\t0.1081\n"
    assert status_classes(recs) == b"2xx\t10\t0.2703\n3xx\t2\t0.0541\n4xx\t24\t0.6486\n5xx\t1\t0.027\n"


@pytest.mark.shared
def test_the_sample_answers_are_not_vacuous(sample):
    recs = parse(read(sample))
    assert len(recs) == 5000
    assert daily_traffic(recs).count(b"\n") == 3
    assert top_pages(recs).count(b"\n") == top_not_found(recs).count(b"\n") == 20
    assert busiest_hours(recs).count(b"\n") == 24


# --- the second check: DuckDB over the raw text ------------------------------------------------------------

def _duckdb(sample: str, query: str, tmp_path) -> bytes:
    try:
        import duckdb
    except ImportError:
        require(False, "DuckDB is not installed (pip install 'logetl[test]')")
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    target = str(tmp_path / "duckdb.tsv")
    con.execute(f"COPY ({DUCKDB_RECORDS} {query}) TO '{target}' (FORMAT csv, DELIMITER '\t', HEADER false, "
                f"QUOTE '')", [sample])
    con.close()
    return read(target)


#: the records of a combined log, by regexp_extract over each raw line
DUCKDB_RECORDS = r"""
WITH lines AS (
    SELECT unnest(string_split(content, chr(10))) AS line FROM read_text(?)
), recs AS (
    SELECT regexp_extract(line, '^(\S*) \S+ \S+ \[([^\]]+)\] "(.+?)" ([0-9]{3}) (\S*)(?: "((?:[^"\\]|\\.)*)" "((?:[^"\\]|\\.)*)")?',
                          ['ip', 'time', 'request', 'response', 'size', 'referer', 'user_agent']) AS r
    FROM lines WHERE line <> ''
), parsed AS (
    SELECT r.ip AS ip, r.time AS time, r.response AS response,
           r.size AS size, r.user_agent AS user_agent
    FROM recs
)
"""

DUCKDB = {
    "daily_bandwidth": ("bandwidth", """
        SELECT strftime(try_strptime(substr(time, 1, 11), '%d/%b/%Y'), '%Y-%m-%d') AS day,
               count(*), sum(CASE WHEN regexp_full_match(size, '-?[0-9]{1,18}') THEN size::BIGINT ELSE 0 END)
        FROM parsed WHERE try_strptime(time, '%d/%b/%Y:%H:%M:%S %z') IS NOT NULL GROUP BY day ORDER BY day"""),
    "status_classes": ("classes", """
        SELECT response[1] || 'xx' AS class, count(*),
               round(count(*) / (SELECT count(*) FROM parsed), 4)
        FROM parsed GROUP BY class ORDER BY class"""),
    "bot_share": ("bots", """
        SELECT count(*), count(*) FILTER (WHERE regexp_matches(user_agent, 'bot|crawler|spider', 'i')),
               round(count(*) FILTER (WHERE regexp_matches(user_agent, 'bot|crawler|spider', 'i')) / count(*), 4)
        FROM parsed"""),
}


@pytest.mark.shared
@pytest.mark.parametrize("recipe", sorted(DUCKDB))
def test_duckdb_agrees_on_the_sample(recipe, sample, tmp_path):
    assert _duckdb(sample, DUCKDB[recipe][1], tmp_path) == CASES[recipe][1](parse(read(sample)))


@pytest.mark.shared
def test_recipes_run_from_the_command_line(tmp_path, sample):
    recipe, (tap, answer) = "top_referrers", CASES["top_referrers"]
    out = tmp_path / recipe
    p = logetl("run", os.path.join(COOKBOOK, f"{recipe}.py"), "--input", sample, "--output", f"{tap}={out}")
    assert p.returncode == 0, p.stderr
    assert parts(out) == answer(parse(read(sample)))
    assert f"logetl {recipe}: SUCCESSFUL" in p.stderr.decode()


def test_the_guide_shows_each_flow_and_check_as_they_are():
    root = os.path.dirname(COOKBOOK.rstrip(os.sep))
    guide = read(os.path.join(root, "..", "docs", "guides", "cookbook.md")).decode()
    for recipe, (tap, _) in CASES.items():
        text = read(os.path.join(COOKBOOK, f"{recipe}.py")).decode()
        assert text[text.index("import logetl.api as L"):] in guide, recipe
        assert f"logetl run examples/cookbook/{recipe}.py --input access.log --output {tap}=" in guide, recipe
    this = read(__file__).decode()
    for start, end in (("LINE = re.compile", "\n\n\ndef path_of("), ("def daily_traffic(", "\n\n\ndef top_pages(")):
        assert this[this.index(start):this.index(end, this.index(start))] in guide, start
    assert DUCKDB_RECORDS.strip("\n") in guide
