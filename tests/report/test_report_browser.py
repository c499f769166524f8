"""The report's page in a real browser: Debian's Chromium driven by Playwright opens DIR/index.html from file://
with the network cut off. Every panel renders (its table has its rows, its chart its marks), nothing is
asked of the network, the console stays clean, and with JavaScript disabled the page reads the same.
Skips where Chromium or Playwright is missing, never under CI."""
from __future__ import annotations

import os
import shutil

import pytest

from conftest import SAMPLE, require
from reportpage_data import build, make_mmdb, require_writer
from logetl.report import geoip
from logetl.report.html import PANELS, render

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SIZES = {"bytes", "bandwidth", "log_size"}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """DIR/index.html of the real sample log's report, its countries and networks from a database of the tests'."""
    require(os.path.isfile(SAMPLE), f"the real sample log is not at {SAMPLE} (../shared is absent)")
    require_writer()
    folder = tmp_path_factory.mktemp("report")
    report, clients = build(SAMPLE)
    report.update(geoip.panels(clients, make_mmdb(folder / "places.mmdb")))
    (folder / "index.html").write_text(render(report), encoding="utf-8")
    return folder, report


class Visit:
    """One page in a context of its own, offline: what it asked for, what its console said."""

    def __init__(self, browser, url: str, *, javascript: bool):
        self.url = url
        self.context = browser.new_context(viewport={"width": 1280, "height": 900}, offline=True,
                                           java_script_enabled=javascript)
        self.blocked, self.requests, self.console, self.dialogs = [], [], [], []
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}"))
        self.page.on("pageerror", lambda e: self.console.append(f"pageerror: {e}"))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.goto(url, wait_until="load")

    def _route(self, route):
        if route.request.url == self.url:
            route.continue_()
        else:
            self.blocked.append(route.request.url)
            route.abort()

    def close(self):
        self.context.close()


def text(key: str, value) -> str:
    if value is None:
        return ""
    return str(value) if not isinstance(value, int) or key in SIZES else f"{value:,}"


def check_every_panel(page, report: dict) -> None:
    for key in [k for k in PANELS if k in report]:
        rows = report[key]
        section = page.locator(f'section[data-panel="{key}"]')
        assert section.is_visible(), key
        body = section.locator("table.rows tbody tr")
        assert body.count() == len(rows), key
        for i in sorted({0, len(rows) // 2, len(rows) - 1}):
            cells = body.nth(i).locator("td")
            expected = [text(k, v) for k, v in rows[i].items()]
            shown = cells.all_inner_texts()
            # sizes are shown in binary units; their exact number is the cell's data-value
            assert [s for s, k in zip(shown, rows[i]) if k not in SIZES] == \
                   [e for e, k in zip(expected, rows[i]) if k not in SIZES], (key, i)
            assert [cells.nth(j).get_attribute("data-value") for j, k in enumerate(rows[i]) if k in SIZES] == \
                   [str(rows[i][k]) for k in rows[i] if k in SIZES], (key, i)
        marks = section.locator("svg rect.mark")
        drawn = 2 * len(rows) if key in ("visitors", "visit_time") else min(10, len(rows))
        assert marks.count() == drawn, key
        box = marks.first.bounding_box()
        assert box and box["width"] > 0 and box["height"] > 0 and box["x"] + box["width"] <= 1280, (key, box)


def test_every_panel_renders_offline(browser, site):
    folder, report = site
    url = (folder / "index.html").as_uri()
    visit = Visit(browser, url, javascript=True)
    try:
        page = visit.page
        assert page.title() == "Traffic report, 2015-05-17 to 2015-05-19"
        check_every_panel(page, report)
        assert {"countries", "asns"} <= {k for k in PANELS if page.locator(f'section[data-panel="{k}"]').count()}
        overview = page.locator("table.general tr")
        assert overview.nth(0).inner_text().split("\t") == ["Total requests", "5,000"]
        assert page.locator('[data-panel="shares"] svg rect.mark').count() == 2
        # the navigation's links lead to the panels
        page.click('nav a[href="#panel-status_codes"]')
        assert page.evaluate("location.hash") == "#panel-status_codes"
        page.screenshot(path=str(folder / "report.png"), full_page=True)
        assert visit.requests == [url] and visit.blocked == []
        assert visit.console == [] and visit.dialogs == []
    finally:
        visit.close()


def test_the_page_reads_the_same_without_javascript(browser, site):
    folder, report = site
    url = (folder / "index.html").as_uri()
    visit = Visit(browser, url, javascript=False)
    try:
        check_every_panel(visit.page, report)
        visit.page.screenshot(path=str(folder / "report-no-js.png"), full_page=True)
        assert visit.requests == [url] and visit.blocked == [] and visit.console == []
    finally:
        visit.close()


def test_hostile_text_stays_text_in_the_browser(browser, tmp_path):
    script = "/<script>alert('path')</script>"
    agent = "\"><img src=x onerror=alert('agent')>"
    report = {"general": {"total_requests": 3}, "who": "all",
              "requests": [{"path": script, "hits": 2, "visitors": 1, "bytes": 10}],
              "browsers": [{"name": agent, "hits": 1, "visitors": 1}],
              "referring_sites": [{"site": "<iframe src=https://example.com>", "hits": 1, "visitors": 1}]}
    (tmp_path / "index.html").write_text(render(report), encoding="utf-8")
    url = (tmp_path / "index.html").as_uri()
    visit = Visit(browser, url, javascript=True)
    try:
        page = visit.page
        assert page.locator('[data-panel="requests"] tbody td').first.inner_text() == script
        assert page.locator('[data-panel="browsers"] tbody td').first.inner_text() == agent
        assert page.locator("script, img, iframe").count() == 0
        assert visit.dialogs == [] and visit.console == []
        assert visit.requests == [url] and visit.blocked == []
    finally:
        visit.close()

