"""Makes docs/images/report.png, the picture of the report's page in the documentation: the page of a report
opened from file:// in Debian's Chromium (headless, offline), the top of it at 1200 pixels wide.

    .venv/bin/python docs/images/make_report_screenshot.py [--report-json DIR/report.json] [--output PNG]

With ``--report-json`` it shows that report (what ``logetl report`` wrote). Without it, the report of the real
sample log (../shared/data/access_sample_5k.log) computed in plain Python by the tests' builder
(tests/report/reportpage_data.py), with countries and networks from the tests' small MaxMind-format database.
The documentation uses the PNG checked in beside this script: nothing runs it when the site is built.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SAMPLE = os.path.join(os.path.dirname(ROOT), "shared", "data", "access_sample_5k.log")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def sample_report(folder: str) -> dict:
    """The sample log's report, from the tests' plain-Python builder, with its geoip panels."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "report"))
    from reportpage_data import build, make_mmdb

    from logetl.report import geoip

    report, clients = build(SAMPLE)
    report.update(geoip.panels(clients, make_mmdb(os.path.join(folder, "places.mmdb"))))
    return report


def screenshot(report: dict, output: str, *, width: int = 1200, height: int = 1400) -> None:
    """Renders ``report``'s page and saves the top ``width`` x ``height`` pixels of it to ``output``."""
    from playwright.sync_api import sync_playwright

    from logetl.report.html import render

    with tempfile.TemporaryDirectory() as folder:
        page_path = os.path.join(folder, "index.html")
        with open(page_path, "w", encoding="utf-8") as f:
            f.write(render(report))
        url = "file://" + page_path
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            try:
                context = browser.new_context(viewport={"width": width, "height": height}, offline=True,
                                              color_scheme="light")
                context.route("**/*", lambda route: route.continue_() if route.request.url == url else route.abort())
                page = context.new_page()
                page.goto(url, wait_until="load")
                page.screenshot(path=output)
            finally:
                browser.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report-json", help="a report.json to show (default: the sample log's report)")
    parser.add_argument("--output", default=os.path.join(HERE, "report.png"), help="the PNG to write")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        if args.report_json:
            with open(args.report_json, encoding="utf-8") as f:
                report = json.load(f)
        else:
            report = sample_report(folder)
        screenshot(report, args.output)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
