"""Report dictionaries for the page's tests, computed in plain Python from a real log (so the numbers the page
shows are real ones), and a small MaxMind-format database of the tests' own.

The families here (operating systems, browsers, crawlers) come from a few substring rules: they are what the
page is given to show, not logetl's classification of user agents, which this does not test."""
from __future__ import annotations

import ipaddress
import os
import re
from collections import defaultdict
from datetime import datetime
from urllib.parse import urlsplit

COMBINED = re.compile(r'^(\S+) \S+ \S+ \[([^\]]+)\] "((?:[^"\\]|\\.)*)" (\d{3}) (\S+) '
                      r'"((?:[^"\\]|\\.)*)" "((?:[^"\\]|\\.)*)"\s*$')
CRAWLER = re.compile(r"bot|crawl|spider|slurp|feedfetcher|monitor|wget|curl|python|java/|ruby|perl|"
                     r"go-http|libwww|apache-httpclient|nutch|archiver|yandex|baidu|facebookexternalhit", re.I)
OS_RULES = [("Android", "Android"), ("iPhone", "iOS"), ("iPad", "iOS"), ("Windows", "Windows"),
            ("Mac OS X", "Mac OS X"), ("CrOS", "Chrome OS"), ("Linux", "Linux")]
BROWSER_RULES = [("Edge/", "Edge"), ("OPR/", "Opera"), ("Opera", "Opera"), ("Firefox/", "Firefox"),
                 ("Chromium/", "Chromium"), ("Chrome/", "Chrome"), ("Safari/", "Safari"), ("MSIE", "IE"),
                 ("Trident/", "IE")]
TOP = 20


def family(ua: str, rules) -> str:
    return next((name for needle, name in rules if needle in ua), "Other")


def crawler_name(ua: str) -> str:
    """A crawler's name: the first product token of its user agent (``Googlebot/2.1`` -> ``Googlebot``)."""
    for token in re.findall(r"[A-Za-z][\w.\-]*(?:/[\w.\-]+)?", ua):
        if CRAWLER.search(token):
            return token.split("/")[0]
    return ua.split("/")[0].split(" ")[0] or "Other"


class Panel:
    """Hits, visitors (client, day, user agent) and bytes per label."""

    def __init__(self):
        self.hits, self.bytes, self.visitors = defaultdict(int), defaultdict(int), defaultdict(set)

    def add(self, label, visitor, size):
        self.hits[label] += 1
        self.bytes[label] += size
        self.visitors[label].add(visitor)

    def rows(self, key, *, order="hits", top=None, with_bytes=True):
        labels = sorted(self.hits, key=(lambda k: (-self.hits[k], k)) if order == "hits" else (lambda k: k))
        out = []
        for k in labels[:top]:
            row = {key: k, "hits": self.hits[k], "visitors": len(self.visitors[k])}
            if with_bytes:
                row["bytes"] = self.bytes[k]
            out.append(row)
        return out


def build_report(log_path: str, who: str = "all") -> dict:
    """The report dictionary of the combined log at ``log_path``: every panel the page knows, from plain Python."""
    return build(log_path, who)[0]


def build(log_path: str, who: str = "all") -> tuple[dict, list[dict]]:
    """The report dictionary of the log at ``log_path`` and its per-client rows (every client, the input of
    the geoip panels)."""
    panels = defaultdict(Panel)
    statuses = defaultdict(int)
    failed = valid = 0
    everyone, days = set(), []
    shares = {"humans": 0, "crawlers": 0}
    with open(log_path, encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            m = COMBINED.match(line)
            if not m:
                failed += 1
                continue
            host, when, request, status, size, referer, ua = m.groups()
            is_crawler = bool(CRAWLER.search(ua))
            shares["crawlers" if is_crawler else "humans"] += 1
            if who != "all" and is_crawler != (who == "crawlers"):
                continue
            valid += 1
            t = datetime.strptime(when, "%d/%b/%Y:%H:%M:%S %z")
            day, nbytes = t.strftime("%Y-%m-%d"), 0 if size == "-" else int(size)
            visitor = (host, day, ua)
            everyone.add(visitor)
            days.append(day)
            parts = request.split(" ")
            path = parts[1] if len(parts) == 3 else request
            panels["visitors"].add(day, visitor, nbytes)
            panels["requests"].add(path, visitor, nbytes)
            if status == "404":
                panels["not_found"].add(path, visitor, nbytes)
            panels["hosts"].add(host, visitor, nbytes)
            panels["visit_time"].add(t.strftime("%H"), visitor, nbytes)
            statuses[status] += 1
            if is_crawler:
                panels["crawlers"].add(crawler_name(ua), visitor, nbytes)
            else:
                panels["os"].add(family(ua, OS_RULES), visitor, nbytes)
                panels["browsers"].add(family(ua, BROWSER_RULES), visitor, nbytes)
            site = urlsplit(referer).hostname if referer not in ("-", "") else None
            if site:
                panels["referring_sites"].add(site, visitor, nbytes)
    report = {
        "general": {"total_requests": valid + failed, "valid_requests": valid, "failed_requests": failed,
                    "unique_visitors": len(everyone), "bandwidth": sum(panels["visitors"].bytes.values()),
                    "start_date": min(days), "end_date": max(days), "log_size": os.path.getsize(log_path)},
        "who": who,
        "shares": shares,
        "visitors": panels["visitors"].rows("day", order="label"),
        "requests": panels["requests"].rows("path", top=TOP),
        "not_found": panels["not_found"].rows("path", top=TOP),
        "hosts": panels["hosts"].rows("host", top=TOP),
        "os": panels["os"].rows("name", with_bytes=False),
        "browsers": panels["browsers"].rows("name", with_bytes=False),
        "visit_time": panels["visit_time"].rows("hour", order="label"),
        "referring_sites": panels["referring_sites"].rows("site", top=TOP, with_bytes=False),
        "status_codes": [{"code": c, "hits": statuses[c]} for c in sorted(statuses, key=lambda c: (-statuses[c], c))],
        "crawlers": panels["crawlers"].rows("name", top=TOP, with_bytes=False),
    }
    return report, panels["hosts"].rows("host")


#: the tests' own database: a few networks of the sample's clients, with MaxMind's record layout
NETWORKS = {
    "66.249.64.0/19": ("US", "United States", 15169, "Google LLC"),
    "208.115.111.0/24": ("US", "United States", 13768, "Cogeco Peer 1"),
    "83.149.9.0/24": ("RU", "Russia", 8402, "PJSC \"Vimpelcom\""),
    "46.105.0.0/16": ("FR", "France", 16276, "OVH SAS"),
    "2001:db8::/32": ("DE", "Germany", 64500, "Documentation <Net> & Co"),
}


def require_writer() -> None:
    """Skips (fails under CI) where mmdb-writer, the test dependency that writes the databases, is missing."""
    from conftest import require

    try:
        import mmdb_writer  # noqa: F401
    except ImportError:
        require(False, "mmdb-writer (a test dependency: pip install -e '.[test]') is not installed")


def make_mmdb(path, networks: dict = NETWORKS, *, kind: str = "Test-City-ASN", fields=("country", "asn"),
              ipv6: bool = True) -> str:
    """Writes a MaxMind-format database of ``networks`` (cidr -> (iso, country, asn, organization)) to
    ``path``, of database type ``kind``, its records holding the ``fields`` asked (country, asn)."""
    from mmdb_writer import MMDBWriter
    from netaddr import IPSet

    writer = MMDBWriter(ip_version=6 if ipv6 else 4, database_type=kind, ipv4_compatible=ipv6)
    for cidr, (iso, name, asn, org) in networks.items():
        if not ipv6 and ipaddress.ip_network(cidr).version == 6:
            continue
        record = {}
        if "country" in fields:
            record["country"] = {"iso_code": iso, "names": {"en": name}}
        if "asn" in fields:
            record["autonomous_system_number"] = asn
            record["autonomous_system_organization"] = org
        writer.insert_network(IPSet([cidr]), record)
    writer.to_db_file(str(path))
    return str(path)
