"""A seeded generator of realistic Apache combined-format access-log lines.

Same lines and seed give the same bytes on every machine (only ``random.Random`` with an explicit seed).
Clients repeat with a heavy-headed distribution, like real traffic (a few crawlers and heavy users, a long
tail); about a quarter of requests are for ``/images/``; sizes are ``-`` for 304s and some others; a small
share of lines is malformed in the ways real logs are (truncated, bad timestamp, invalid UTF-8, junk).
"""
from __future__ import annotations

import random
import time

METHODS = (("GET", 90), ("POST", 6), ("HEAD", 4))
STATUSES = (("200", 80), ("304", 8), ("404", 6), ("301", 3), ("206", 2), ("500", 1))
IMAGES = ("logo", "banner", "kibana-search", "header-bg", "avatar", "icon-rss", "photo", "sprite", "chart")
EXTS = ("png", "jpg", "gif", "svg")
PAGES = (
    "/", "/blog/", "/blog/geekery/disabling-battery-in-ubuntu-vms.html", "/articles/dynamic-dns-with-dhcp/",
    "/presentations/logstash-monitorama-2013/", "/presentations/logstash-monitorama-2013/images/kibana.png",
    "/projects/xdotool/", "/favicon.ico", "/robots.txt", "/style2.css", "/reset.css", "/blog/tags/puppet",
    "/blog/geekery/solaris-10-and-ssh.html", "/misc/Title.php.txt", "/files/logstash/logstash-1.3.2.jar",
)
REFERERS = (
    "-", "http://semicomplete.com/presentations/logstash-monitorama-2013/",
    "http://www.semicomplete.com/projects/xdotool/", "http://semicomplete.com/blog/geekery/ssl-latency.html",
    "https://www.google.com/url?sa=t&rct=j&q=&esrc=s&source=web&cd=1&ved=0CCkQFjAA",
    "http://example.org/search?q=logstash+kibana+dashboard", "http://t.co/xYz12AbCd",
    "http://www.semicomplete.com/articles/dynamic-dns-with-dhcp/",
)
AGENTS = (
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_9_1) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/32.0.1700.77 Safari/537.36",
    "Mozilla/5.0 (Windows NT 6.1; WOW64; rv:27.0) Gecko/20100101 Firefox/27.0",
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/33.0.1750.91 Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 7_0 like Mac OS X) AppleWebKit/537.51.1 (KHTML, like Gecko) Version/7.0 Mobile/11A465 Safari/9537.53",
    "UniversalFeedParser/4.2-pre-314-svn +http://feedparser.org/",
    "curl/7.35.0",
    "Tiny Tiny RSS/1.11 (http://tt-rss.org/)",
)
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
MALFORMED_SHARE = 0.002


def _weights(pairs):
    values = [v for v, _ in pairs]
    cum, total = [], 0
    for _, w in pairs:
        total += w
        cum.append(total)
    return values, cum


def _clients(rng: random.Random, n: int) -> list[str]:
    out = []
    for i in range(n):
        r = rng.random()
        if r < 0.90:
            out.append(f"{rng.randint(1, 223)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}")
        elif r < 0.97:
            out.append(f"2001:db8:{rng.randint(0, 0xffff):x}::{rng.randint(1, 0xffff):x}")
        else:
            out.append(f"crawl-{i}.search{rng.randint(1, 9)}.example.net")
    return out


def _timestamp(t: float) -> str:
    tm = time.gmtime(t)
    return f"{tm.tm_mday:02d}/{MONTHS[tm.tm_mon - 1]}/{tm.tm_year}:{tm.tm_hour:02d}:{tm.tm_min:02d}:{tm.tm_sec:02d} +0000"


def _malformed(rng: random.Random, good: str) -> bytes:
    kind = rng.randrange(4)
    if kind == 0:
        return good[: rng.randint(0, len(good) // 2)].encode()           # truncated
    if kind == 1:
        return good.replace("+0000]", "]").encode()                      # timestamp without zone
    if kind == 2:
        return good.encode().replace(b"HTTP/1.1", b"HTTP/1.1\xff\xfe")   # invalid UTF-8
    return b"\x16\x03\x01 junk from a TLS client"                        # binary junk


def lines(n: int, seed: int):
    """Yields ``n`` lines (bytes, without ``\\n``)."""
    rng = random.Random(seed)
    clients = _clients(rng, max(50, min(200_000, n // 40)))
    n_clients = len(clients)
    methods, mw = _weights(METHODS)
    statuses, sw = _weights(STATUSES)
    t = 1431857103.0  # 17/May/2015:10:05:03 +0000, like the sample the programs were first run on
    ts_cache: dict[int, str] = {}
    for _ in range(n):
        client = clients[int(n_clients * rng.random() ** 3)]
        t += rng.random() * 0.5
        sec = int(t)
        ts = ts_cache.get(sec)
        if ts is None:
            ts_cache.clear()
            ts = ts_cache[sec] = _timestamp(sec)
        method = rng.choices(methods, cum_weights=mw)[0]
        if rng.random() < 0.25:
            path = f"/images/{rng.choice(IMAGES)}{rng.randint(1, 60)}.{rng.choice(EXTS)}"
        else:
            path = rng.choice(PAGES)
            if rng.random() < 0.1:
                path += f"?page={rng.randint(1, 20)}"
        status = rng.choices(statuses, cum_weights=sw)[0]
        size = "-" if status == "304" or rng.random() < 0.03 else str(int(rng.lognormvariate(8.5, 1.6)))
        proto = "HTTP/1.1" if rng.random() < 0.9 else "HTTP/1.0"
        line = (f'{client} - - [{ts}] "{method} {path} {proto}" {status} {size} '
                f'"{rng.choice(REFERERS)}" "{rng.choice(AGENTS)}"')
        if rng.random() < MALFORMED_SHARE:
            yield _malformed(rng, line)
        else:
            yield line.encode()


def write(path: str, n: int, seed: int) -> None:
    with open(path, "wb") as f:
        batch = []
        for line in lines(n, seed):
            batch.append(line)
            if len(batch) >= 10_000:
                f.write(b"\n".join(batch) + b"\n")
                batch = []
        if batch:
            f.write(b"\n".join(batch) + b"\n")
