"""User agents, classified once each in the driver: browser, OS and device families by uap-core's patterns
(``ua-parser``), crawlers by CrawlerDetect's maintained list (``crawlerdetect``).

A log has few distinct user agents (thousands, against millions of lines), so the report's flow groups
its records by agent and the classification runs here, on the distinct agents only; the panels by
browser, OS or crawler are those per-agent rows rolled up (sums: a visitor is one client, day *and* agent,
so an agent's visitors belong to exactly one family), and ``--who`` filters records by membership in the
set of crawler agents. Both engines thus get the same answers with no per-record Python function.

Building the parsers takes seconds (uap-core's ~1,000 patterns, CrawlerDetect's one large pattern), so
``Classifier`` builds them in a background thread from the moment it is made, while the engine reads
the log.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

#: the family of an agent ua-parser does not know, and of an empty agent
OTHER = "Other"


@dataclass(frozen=True)
class Agent:
    """One user agent's classification: ``crawler`` is the name CrawlerDetect matched (None: a human's
    agent, as far as the list knows)."""
    browser: str
    os: str
    device: str
    crawler: str | None


class Classifier:
    """Classifies user agents; the parsers are built in a background thread from construction on."""

    def __init__(self):
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._parse = self._detect = None
        self._cache: dict[str, Agent] = {}
        # not a daemon: a run that fails while the parsers are built waits for them (well under a second)
        # at exit, rather than have the interpreter end the thread inside the parsers' native code
        threading.Thread(target=self._build, name="report-agents").start()

    def _build(self) -> None:
        try:
            from crawlerdetect import CrawlerDetect
            from ua_parser import parse

            detect = CrawlerDetect()
            detect.isCrawler("warm-up")      # compiles the pattern now, not on the first agent
            parse("Mozilla/5.0")              # builds uap-core's matchers now
            self._parse, self._detect = parse, detect
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread by classify
            self._error = exc
        finally:
            self._ready.set()

    def classify(self, agent: str) -> Agent:
        """The classification of one user agent (as written; ``""`` when the log has none)."""
        known = self._cache.get(agent)
        if known is not None:
            return known
        self._ready.wait()
        if self._error is not None:
            raise self._error
        crawler = None
        if agent and self._detect.isCrawler(agent):
            crawler = self._detect.getMatches() or OTHER
        result = self._parse(agent) if agent else None
        ua = result.user_agent if result is not None else None
        os_ = result.os if result is not None else None
        device = result.device if result is not None else None
        known = Agent(browser=ua.family if ua else OTHER, os=os_.family if os_ else OTHER,
                      device=device.family if device else OTHER, crawler=crawler)
        self._cache[agent] = known
        return known
