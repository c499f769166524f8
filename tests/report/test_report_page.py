"""The report's page (logetl.report.html): every panel's table shows exactly the report's numbers, the charts
have one mark per row drawn, everything from the log is escaped, and the page asks for nothing from the network."""
from __future__ import annotations

import os
import re

import pytest

from conftest import SAMPLE, require
from reportpage_data import build_report
from reportpage_reader import Page
from logetl.report.html import GENERAL, HEADINGS, PANELS, render

SIZES = {"bytes", "bandwidth", "log_size"}


@pytest.fixture(scope="module")
def real():
    require(os.path.isfile(SAMPLE), f"the real sample log is not at {SAMPLE} (../shared is absent)")
    report = build_report(SAMPLE)
    return report, Page(render(report))


def count(n: int) -> str:
    return f"{n:,}"


def test_every_known_panel_has_its_table_with_the_reports_rows(real):
    report, page = real
    for key in PANELS:
        if key not in report:
            continue
        panel = page.panels[key]
        rows = report[key]
        assert panel["head"] == [HEADINGS[k] for k in rows[0]], key
        assert len(panel["rows"]) == len(rows), key
        for row, cells in zip(rows, panel["rows"]):
            assert len(cells) == len(row)
            for (name, value), cell in zip(row.items(), cells):
                if isinstance(value, int):
                    assert cell["attrs"]["data-value"] == str(value), (key, name)
                    if name in SIZES:
                        assert cell["attrs"]["title"] == f"{value:,} bytes"
                    else:
                        assert cell["text"] == count(value), (key, name)
                else:
                    assert cell["text"] == value and "data-value" not in cell["attrs"], (key, name)


def test_the_overview_shows_the_general_numbers(real):
    report, page = real
    rows = page.panels["general"]["rows"]
    general = report["general"]
    assert [r[0]["text"] for r in rows] == [GENERAL[k] for k in general]
    values = {r[0]["text"]: r[1] for r in rows}
    assert values["Total requests"]["text"] == "5,000" and values["Total requests"]["attrs"]["data-value"] == "5000"
    assert values["Failed requests (malformed lines)"]["text"] == "0"
    assert values["Unique visitors"]["attrs"]["data-value"] == str(general["unique_visitors"])
    assert values["Bandwidth"]["attrs"]["data-value"] == str(general["bandwidth"])
    assert values["Bandwidth"]["text"] == "1.22 GiB"          # 1,312,869,333 bytes
    assert values["Log size"]["text"] == "1.11 MiB"           # 1,162,930 bytes
    assert values["Start date"]["text"] == "2015-05-17" and values["End date"]["text"] == "2015-05-19"
    # the shares of humans and crawlers, in the overview
    assert len(rows) == 8
    shares = page.panels["shares"]
    assert shares["head"] == ["Clients", "Share"]
    assert [(r[0]["text"], r[1]["attrs"]["data-value"]) for r in shares["rows"]] == [
        ("Humans", str(report["shares"]["humans"])), ("Crawlers", str(report["shares"]["crawlers"]))]


def test_the_charts_have_one_mark_per_row_drawn(real):
    report, page = real
    assert len(page.panels["visitors"]["marks"]) == 2 * 3                  # hits and visitors, three days
    assert len(page.panels["visit_time"]["marks"]) == 2 * 24               # every hour of the day
    for key in ("requests", "not_found", "hosts", "os", "browsers", "referring_sites", "status_codes", "crawlers"):
        assert len(page.panels[key]["marks"]) == min(10, len(report[key])), key
    # the status codes' bars are coloured by class and named by their phrase
    status = page.panels["status_codes"]
    assert [m["class"] for m in status["marks"]] == [f"mark s{r['code'][0]}" for r in report["status_codes"]]
    assert status["texts"][:2] == ["200 OK", count(report["status_codes"][0]["hits"])]
    # the longest bar is the most hits; the others in proportion
    widths = [float(m["width"]) for m in page.panels["requests"]["marks"]]
    hits = [r["hits"] for r in report["requests"][:10]]
    assert widths[0] == 360.0 and widths == [round(h / hits[0] * 360, 2) for h in hits]


def small(**panels) -> dict:
    report = {"general": {"total_requests": 3, "valid_requests": 3, "failed_requests": 0, "unique_visitors": 1,
                          "bandwidth": 1536, "start_date": "2024-02-29", "end_date": "2024-02-29", "log_size": 999}}
    report.update(panels)
    return report


def test_sizes_and_counts_as_people_read_them():
    rows = [{"path": f"/{n}", "hits": n, "visitors": 1, "bytes": n} for n in
            (0, 1023, 1024, 203023, 1048576, 1312869333, 5 * 1024 ** 4)]
    page = Page(render(small(requests=rows)))
    cells = page.panels["requests"]["rows"]
    assert [c[3]["text"] for c in cells] == ["0 B", "1023 B", "1.00 KiB", "198.26 KiB", "1.00 MiB", "1.22 GiB",
                                              "5.00 TiB"]
    assert [c[1]["text"] for c in cells] == ["0", "1,023", "1,024", "203,023", "1,048,576", "1,312,869,333",
                                              "5,497,558,138,880"]
    assert [c[3]["attrs"]["data-value"] for c in cells] == [str(r["bytes"]) for r in rows]


def test_hostile_text_from_the_log_is_shown_as_text():
    script = "/<script>alert('x')</script>?a=1&b=\"2\"&c=<3>"
    agent = "\"><img src=x onerror=alert(1)>"
    report = small(requests=[{"path": script, "hits": 2, "visitors": 1, "bytes": 10}],
                   browsers=[{"name": agent, "hits": 1, "visitors": 1}],
                   hosts=[{"host": "evil&amp;host", "hits": 1, "visitors": 1, "bytes": 0}],
                   **{"<b>panel</b>": [{"<i>label</i>": "</td></tr></table><script>x()</script>", "hits": 4}]})
    html = render(report)
    assert "<script" not in html.lower() and "<img" not in html.lower() and "<b>" not in html and "<i>" not in html
    page = Page(html)
    assert page.panels["requests"]["rows"][0][0]["text"] == script
    assert page.panels["requests"]["texts"][0] == script[:37] + "…"      # the bar's label, cut
    assert page.panels["browsers"]["rows"][0][0]["text"] == agent
    assert page.panels["browsers"]["texts"][0] == agent
    assert page.panels["hosts"]["rows"][0][0]["text"] == "evil&amp;host"
    odd = page.panels["<b>panel</b>"]
    assert odd["id"] == "panel-b-panel-b" and odd["head"] == ["<i>label</i>", "Hits"]
    assert odd["rows"][0][0]["text"] == "</td></tr></table><script>x()</script>"
    # the chart's tooltip holds the full text, escaped too
    assert f"<title>{script[:8]}" not in html and "&lt;script&gt;alert(&#39;x&#39;)" in html


def test_the_page_asks_for_nothing():
    """No script, no style sheet, no image, no frame, no link out: its policy forbids any (default-src 'none')."""
    report = small(requests=[{"path": "http://example.com/x.js", "hits": 1, "visitors": 1, "bytes": 1}],
                   referring_sites=[{"site": "https://tracker.example", "hits": 1, "visitors": 1}])
    page = Page(render(report))
    names = {tag for tag, _ in page.tags}
    assert names.isdisjoint({"script", "link", "img", "iframe", "object", "embed", "image", "use", "form",
                             "audio", "video", "source", "base"})
    for tag, attrs in page.tags:
        assert "src" not in attrs and "srcset" not in attrs and "xlink:href" not in attrs, (tag, attrs)
        assert attrs.get("href", "#").startswith("#"), (tag, attrs)
        assert "style" not in attrs
    csp = [a["content"] for t, a in page.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert csp == ["default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
                   "form-action 'none'"]


def test_a_panel_the_page_does_not_know_is_shown_all_the_same():
    report = small(user_agents=[{"agent": "curl/8.5.0", "hits": 7, "share": 0.4375},
                                {"agent": "Wget/1.21", "hits": 9, "share": None}],
                   engine="local", filters={"from": "2024-02-01"}, who="humans", shares={"humans": 3, "crawlers": 1})
    page = Page(render(report))
    panel = page.panels["user_agents"]
    assert panel["id"] == "panel-user_agents"
    assert panel["head"] == ["Agent", "Hits", "Share"]
    assert [[c["text"] for c in r] for r in panel["rows"]] == [["curl/8.5.0", "7", "0.438"], ["Wget/1.21", "9", ""]]
    assert [m["width"] for m in panel["marks"]] == ["360.0", "280.0"]    # sorted by hits: 9, then 7
    assert panel["texts"] == ["Wget/1.21", "9", "curl/8.5.0", "7"]
    about = page.panels["about"]["rows"]
    assert [[c["text"] for c in r] for r in about] == [["Engine", "local"], ["Filters", '{"from": "2024-02-01"}']]
    text = "".join(page.texts)
    assert "Clients: humans only." in text and "Humans 75.0%" in text and "Crawlers 25.0%" in text


def test_empty_panels_and_a_one_day_report():
    report = small(visitors=[{"day": "2024-02-29", "hits": 3, "visitors": 1, "bytes": 1536}], not_found=[],
                   visit_time=[{"hour": "23", "hits": 3, "visitors": 1, "bytes": 1536}])
    html = render(report)
    page = Page(html)
    assert "<title>Traffic report, 2024-02-29</title>" in html
    assert page.panels["not_found"]["rows"] == [] and page.panels["not_found"]["marks"] == []
    assert page.panels["not_found"]["tables"] == 1 and "Nothing to show." in html
    marks = page.panels["visitors"]["marks"]
    assert [(m["class"], m["height"]) for m in marks] == [("mark series0", "198.0"), ("mark series1", "66.0")]
    # the axis: 0 to 3 in steps of 1
    assert page.panels["visitors"]["texts"] == ["0", "1", "2", "3", "2024-02-29"]
    assert [s for s in PANELS if s in page.panels] == ["visitors", "not_found", "visit_time"]


def test_non_ascii_text_is_kept():
    report = small(requests=[{"path": "/café/ünïcode/日本語/😀", "hits": 1, "visitors": 1, "bytes": 1}])
    html = render(report)
    assert '<meta charset="utf-8">' in html
    assert Page(html).panels["requests"]["rows"][0][0]["text"] == "/café/ünïcode/日本語/😀"


def test_the_page_of_a_report_without_panels():
    html = render({})
    assert "<title>Traffic report</title>" in html and "No overview in this report." in html
    assert re.findall(r'data-panel="([^"]+)"', html) == ["general"]


def test_status_codes_of_every_kind():
    rows = [{"code": "404", "hits": 5}, {"code": "200", "hits": 9}, {"code": "999", "hits": 2},
            {"code": "-", "hits": 1}, {"code": "", "hits": 1}]
    panel = Page(render(small(status_codes=rows))).panels["status_codes"]
    # the table keeps the report's order; the chart draws the most hits first (ties in the report's order)
    assert [r[0]["text"] for r in panel["rows"]] == ["404", "200", "999", "-", ""]
    assert [m["class"] for m in panel["marks"]] == ["mark s2", "mark s4", "mark bar", "mark bar", "mark bar"]
    assert panel["texts"] == ["200 OK", "9", "404 Not Found", "5", "999", "2", "-", "1", "", "1"]


def test_numbers_that_are_not_counts():
    rows = [{"name": "a", "hits": 2, "visitors": 1.5}, {"name": "b", "hits": 1, "visitors": float("nan")},
            {"name": "d", "hits": 0, "visitors": 1.0001}, {"name": "e", "hits": 0, "visitors": 12345.6789},
            {"name": "c", "hits": 0, "visitors": True}]
    page = Page(render(small(os=rows, general={"bandwidth": float("inf"), "log_size": 2048.0})))
    assert [[c["text"] for c in r] for r in page.panels["os"]["rows"]] == [["a", "2", "1.5"], ["b", "1", "nan"],
                                                                         ["d", "0", "1"], ["e", "0", "12,345.679"],
                                                                         ["c", "0", "True"]]
    assert [m["width"] for m in page.panels["os"]["marks"]] == ["360.0", "180.0", "0", "0", "0"]
    assert [[c["text"] for c in r] for r in page.panels["general"]["rows"]] == [["Bandwidth", "inf"],
                                                                              ["Log size", "2.00 KiB"]]
