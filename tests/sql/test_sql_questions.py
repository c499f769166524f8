"""Real questions in DuckDB's SQL over the real sample log, on the local engine (DuckDB) and on Spark (the query
translated), each compared with plain Python over an independent regex parse of the same log.

All the questions run in one flow per engine (one parse, one query node and one output per question), so
Spark is started and the log parsed once."""
from __future__ import annotations

import datetime as dt
import re
from collections import Counter, defaultdict

from conftest import parts

from logetl import assembly
from logetl.api import read
from logetl.engines import get_engine
from logetl.job import bind
from logetl.listener import FlowListener

TIME = "strptime(time, '%d/%b/%Y:%H:%M:%S %z')"

QUESTIONS = {
    "per_day": f"""
        SELECT strftime({TIME}, '%Y-%m-%d') AS day, count(*) AS requests, sum(try_cast(size AS BIGINT)) AS bytes
        FROM log GROUP BY day ORDER BY day""",
    "top_404": """
        SELECT split_part(request, ' ', 2) AS path, count(*) AS n FROM log WHERE response = '404'
        GROUP BY path ORDER BY n DESC, path LIMIT 10""",
    "status_classes": """
        SELECT left(response, 1) || 'xx' AS class, count(*) AS n FROM log GROUP BY class ORDER BY class""",
    "utc_hours": f"""
        WITH t AS (SELECT CAST(epoch({TIME}) AS BIGINT) AS e FROM log)
        SELECT e // 3600 % 24 AS hour, count(*) AS n FROM t GROUP BY hour ORDER BY hour""",
    "top_agents": """
        SELECT user_agent, count(*) AS n FROM log GROUP BY user_agent ORDER BY n DESC, user_agent LIMIT 5""",
    "bot_share": """
        SELECT CASE WHEN lower(user_agent) LIKE '%bot%' OR lower(user_agent) LIKE '%spider%' THEN 'bot'
                    ELSE 'human' END AS kind,
               count(*) AS n, sum(count(*)) OVER () AS total,
               round(CAST(count(*) AS DOUBLE) * 100 / sum(count(*)) OVER (), 2) AS pct
        FROM log GROUP BY kind ORDER BY kind""",
    "referrer_hosts": """
        SELECT regexp_extract(referer, '^https?://([^/:]+)', 1) AS host, count(*) AS n FROM log
        WHERE referer LIKE 'http%' GROUP BY host ORDER BY n DESC, host LIMIT 10""",
    "visits": f"""
        WITH t AS (SELECT ip, epoch({TIME}) AS ts FROM log),
             g AS (SELECT ip, ts, lag(ts) OVER (PARTITION BY ip ORDER BY ts) AS before FROM t)
        SELECT count(*) FILTER (WHERE before IS NULL OR ts - before > 1800) AS visits,
               count(DISTINCT ip) AS clients FROM g""",
    "filters": """
        SELECT count(*) AS total, count(*) FILTER (WHERE response = '200') AS ok,
               count(*) FILTER (WHERE response LIKE '4%') AS client_errors,
               count(DISTINCT ip) FILTER (WHERE response = '404') AS ips_404,
               count(*) FILTER (WHERE size = '-') AS no_size FROM log""",
    "averages": """
        SELECT response, count(*) AS n, round(avg(try_cast(size AS BIGINT)), 2) AS avg_size,
               max(try_cast(size AS BIGINT)) AS max_size
        FROM log GROUP BY response ORDER BY response""",
}


# --- the independent computation: a regex of its own, then plain Python ----------------------------------------

LINE = re.compile(r'(\S*) \S+ \S+ \[([^\]]+)\] "(.+?)" (\d{3}) (\S*) "(.*?)" "(.*?)"\s*')


def records(path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = LINE.fullmatch(line.rstrip("\n"))
            assert m, line        # every line of the sample is well formed
            yield dict(zip(("ip", "time", "request", "response", "size", "referer", "user_agent"), m.groups()))


def instant(time: str) -> dt.datetime:
    return dt.datetime.strptime(time, "%d/%b/%Y:%H:%M:%S %z").astimezone(dt.timezone.utc)


def size(value: str):
    return int(value) if value.isdigit() else None


def number(x) -> str:
    if x is None:
        return ""
    return repr(float(x)) if isinstance(x, float) else str(x)


def tsv(rows) -> bytes:
    return "".join("\t".join(number(v) for v in row) + "\n" for row in rows).encode()


def top(counter: Counter, n: int):
    return sorted(counter.items(), key=lambda kv: (-kv[1], kv[0].encode()))[:n]


def expected(path) -> dict[str, bytes]:
    recs = list(records(path))
    days = defaultdict(lambda: [0, None])
    for r in recs:
        d = days[instant(r["time"]).strftime("%Y-%m-%d")]
        d[0] += 1
        if size(r["size"]) is not None:
            d[1] = (d[1] or 0) + size(r["size"])
    bots = Counter("bot" if "bot" in r["user_agent"].lower() or "spider" in r["user_agent"].lower() else "human"
                   for r in recs)
    hosts = Counter()
    for r in recs:
        if r["referer"].startswith("http"):
            m = re.match(r"https?://([^/:]+)", r["referer"])
            hosts[m.group(1) if m else ""] += 1
    last, visits = {}, 0
    for ip, ts in sorted((r["ip"], instant(r["time"]).timestamp()) for r in recs):
        visits += ip not in last or ts - last[ip] > 1800
        last[ip] = ts
    by_status = defaultdict(list)
    for r in recs:
        by_status[r["response"]].append(size(r["size"]))
    averages = []
    for status in sorted(by_status):
        known = [s for s in by_status[status] if s is not None]
        averages.append((status, len(by_status[status]), round(sum(known) / len(known), 2) if known else None,
                         max(known) if known else None))
    return {
        "per_day": tsv((d, n, b) for d, (n, b) in sorted(days.items())),
        "top_404": tsv(top(Counter(r["request"].split(" ")[1] if len(r["request"].split(" ")) > 1 else ""
                                   for r in recs if r["response"] == "404"), 10)),
        "status_classes": tsv(sorted(Counter(r["response"][0] + "xx" for r in recs).items())),
        "utc_hours": tsv(sorted(Counter(instant(r["time"]).hour for r in recs).items())),
        "top_agents": tsv(top(Counter(r["user_agent"] for r in recs), 5)),
        "bot_share": tsv((k, n, len(recs), round(n * 100 / len(recs), 2)) for k, n in sorted(bots.items())),
        "referrer_hosts": tsv(top(hosts, 10)),
        "visits": tsv([(visits, len(last))]),
        "filters": tsv([(len(recs), sum(r["response"] == "200" for r in recs),
                         sum(r["response"].startswith("4") for r in recs),
                         len({r["ip"] for r in recs if r["response"] == "404"}),
                         sum(r["size"] == "-" for r in recs))]),
        "averages": tsv(averages),
    }


def run_questions(engine: str, sample: str, where, **options) -> dict[str, bytes]:
    log = read()
    sinks = [assembly.Sql(name, log, text, "log", engine).write(name) for name, text in QUESTIONS.items()]
    flow = assembly.Flow("questions", sinks)
    run_questions.nodes = [s.previous[0] for s in sinks]
    runner = get_engine(engine)(**options)
    outs = {name: str(where / name) for name in QUESTIONS}
    try:
        taps = bind(flow, sample, outs, engine=engine, fs=runner.filesystem())
        run = runner.run(flow, taps, FlowListener())
    finally:
        runner.shutdown()
    assert run.lines_read == 5000 and not run.malformed
    return {name: parts(path) for name, path in outs.items()}


def test_the_independent_answers_are_not_trivial(sample):
    answers = expected(sample)
    assert answers["status_classes"] == b"2xx\t4471\n3xx\t418\n4xx\t109\n5xx\t2\n"
    assert answers["filters"].startswith(b"5000\t4450\t109\t")
    assert all(answers[name].count(b"\n") >= 1 for name in QUESTIONS)


def test_every_question_gives_the_independent_answer(engine, sample, tmp_path):
    got = run_questions(engine, sample, tmp_path)
    want = expected(sample)
    assert {name: got[name] for name in QUESTIONS} == want


def test_every_question_gives_the_same_answer_streamed_past_the_memory_budget(sample, tmp_path):
    """With a budget of one byte each query reads the records as they are parsed, a stream of Arrow batches,
    instead of whole once parsed."""
    got = run_questions("local", sample, tmp_path, spill_buffers=1)
    assert all(node.streamed for node in run_questions.nodes)
    assert {name: got[name] for name in QUESTIONS} == expected(sample)
