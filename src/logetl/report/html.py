"""The report's page, ``DIR/index.html``: one self-contained HTML file that needs no network and no JavaScript.

Every panel is a real HTML table (the numbers, readable in any browser, a text browser or a screen reader),
and the panels a person would rather look at than read also get a chart: inline SVG drawn here, in Python,
so that the page loads nothing (its Content-Security-Policy forbids it to: no script, no fetch, no image
from elsewhere). Everything that comes from the log (paths, user agents, host names, referrers) is text
escaped by Jinja2's autoescape, in the tables and in the charts alike.

The input is the report's dictionary (what ``report.json`` holds): ``general`` and ``shares`` (dicts),
``who``, and panels that are lists of flat dicts whose first key is the row's label. The known panels get
their own title, description and chart; any other panel is shown the same way, with a bar chart of its
first numeric column.
"""
from __future__ import annotations

import http
import json
import math
import re

import jinja2
from markupsafe import Markup, escape

#: the known panels, in the order of the page: key -> (title, what it shows, chart)
PANELS = {
    "visitors": ("Unique visitors per day", "Hits, visitors and bandwidth of each day, the day as written in the "
                 "log. A visitor is one client, day and user agent.", "days"),
    "requests": ("Requested files", "The most requested paths (the query string included).", "bars"),
    "not_found": ("Not found URLs (404)", "The most requested paths answered 404 Not Found.", "bars"),
    "hosts": ("Hosts", "The clients that made the most requests.", "bars"),
    "os": ("Operating systems", "Requests by operating system family of the user agent.", "bars"),
    "browsers": ("Browsers", "Requests by browser family of the user agent.", "bars"),
    "visit_time": ("Time distribution", "Hits and visitors by hour of the day, the hour as written in the log.",
                   "hours"),
    "referring_sites": ("Referring sites", "The sites of the referrers (the Referer header's host).", "bars"),
    "status_codes": ("HTTP status codes", "Requests by status code of the response.", "status"),
    "crawlers": ("Crawlers", "Requests by crawler (robots, spiders, monitors: user agents on the crawlers' "
                 "list).", "bars"),
    "countries": ("Countries", "Requests by country of the client's address (--geoip).", "bars"),
    "asns": ("Networks (ASN)", "Requests by autonomous system of the client's address (--geoip).", "bars"),
}

#: the overview (``general``), in order: key -> label
GENERAL = {
    "total_requests": "Total requests", "valid_requests": "Valid requests",
    "failed_requests": "Failed requests (malformed lines)", "unique_visitors": "Unique visitors",
    "bandwidth": "Bandwidth", "start_date": "Start date", "end_date": "End date", "log_size": "Log size",
}

#: column headings of the known keys (any other key: its name, spaced)
HEADINGS = {
    "day": "Day", "hour": "Hour", "path": "Request", "host": "Host", "name": "Name", "site": "Site",
    "code": "Status", "country": "Country", "asn": "Network (ASN)", "hits": "Hits", "visitors": "Visitors",
    "bytes": "Bandwidth",
}

#: keys whose numbers are sizes in bytes (shown as KiB, MiB...; the exact number in data-value and title)
SIZES = {"bytes", "bandwidth", "log_size"}

WHO = {"all": "all clients", "humans": "humans only", "crawlers": "crawlers only"}
TOP = 10               # rows drawn in a bar chart (the table has them all)
WIDTH = 720            # the charts' drawing width (they scale to the page)
SHARES_WIDTH = 360     # the shares' bar, in half the page's width
LABEL_CHARS = 38       # a bar's label longer than this is cut (the full text in its tooltip and the table)

_ENV = jinja2.Environment(loader=jinja2.PackageLoader("logetl.report", "templates"),
                          autoescape=True, undefined=jinja2.StrictUndefined,
                          trim_blocks=True, lstrip_blocks=True)


def render(report: dict) -> str:
    """The page of ``report`` (the dictionary of ``report.json``) as one self-contained HTML document."""
    general = report.get("general") or {}
    panels, others = [], []
    known = [k for k in PANELS if k in report]
    extra = [k for k in report if k not in PANELS and k not in ("general", "shares", "who")]
    for key in known + extra:
        value = report[key]
        if _is_panel(value):
            panel = _panel(key, value, len(panels))
            if any(p["id"] == panel["id"] for p in panels):     # two keys that differ only in punctuation
                panel["id"] += f"-{len(panels)}"
            panels.append(panel)
        elif key in extra:
            others.append((_heading(key), _cell(key, value)))
    return _ENV.get_template("report.html").render(
        title=_title(general), who=WHO.get(_who(report), _who(report)),
        general=_general(general), shares=_shares(report.get("shares")), panels=panels, others=others)


def _is_panel(value) -> bool:
    return isinstance(value, list) and all(isinstance(row, dict) for row in value)


def _title(general: dict) -> str:
    start, end = general.get("start_date"), general.get("end_date")
    if start and end:
        return f"Traffic report, {start} to {end}" if start != end else f"Traffic report, {start}"
    return "Traffic report"


def _general(general: dict) -> list[dict]:
    keys = [k for k in GENERAL if k in general] + [k for k in general if k not in GENERAL]
    return [{"key": k, "label": GENERAL.get(k) or _heading(k), "cell": _cell(k, general[k])} for k in keys]


def _panel(key: str, rows: list[dict], index: int) -> dict:
    title, about, chart = PANELS.get(key, (_heading(key), "", "bars"))
    columns = list(dict.fromkeys(k for row in rows for k in row))
    return {
        "id": f"panel-{_slug(key) or index}", "key": key, "title": title, "about": about,
        "columns": [{"key": c, "head": _heading(c), "numeric": _numeric(rows, c)} for c in columns],
        "rows": _rows_html(rows, columns),
        "chart": _chart(chart, rows, columns),
    }


def _rows_html(rows: list[dict], columns: list[str]) -> list[Markup]:
    """A panel's table rows, as markup made here rather than in the template: a panel of many thousands of
    rows (every client, ten years of days) renders in a second, not in a minute of template macro calls.
    Every value goes through ``escape``, as in the template."""
    classes = [' class="num"' if _numeric(rows, c) else (' class="label"' if i == 0 else "")
               for i, c in enumerate(columns)]
    return [Markup("<tr>" + "".join(_td(_cell(c, row.get(c)), cls) for c, cls in zip(columns, classes)) + "</tr>")
            for row in rows]


def _td(cell: dict, cls: str) -> str:
    value = "" if cell["value"] is None else f' data-value="{escape(cell["value"])}"'
    title = f' title="{escape(cell["title"])}"' if cell["title"] else ""
    return f"<td{cls}{value}{title}>{escape(cell['text'])}</td>"


def _chart(kind: str, rows: list[dict], columns: list[str]) -> dict | None:
    """The chart of a panel of ``kind`` (``days``, ``hours``: columns of hits and visitors; ``bars``,
    ``status``: the top rows' hits, or the first numeric column of a panel without hits), or None."""
    if not rows or not columns:
        return None
    label = columns[0]
    if kind in ("days", "hours"):
        series = [c for c in ("hits", "visitors") if _numeric(rows, c)]
        if not series:
            return None
        every = 1 if kind == "hours" else max(1, math.ceil(len(rows) / 12))
        return _columns([str(r.get(label, "")) for r in rows], [(c, [r.get(c) or 0 for r in rows]) for c in series],
                        every)
    value = "hits" if _numeric(rows, "hits") else next((c for c in columns[1:] if _numeric(rows, c)), None)
    if value is None:
        return None
    bars = []
    for r in sorted(rows, key=lambda r: -(r.get(value) or 0))[:TOP]:      # stable: ties keep the report's order
        text = str(r.get(label, ""))
        cls = f"s{text[0]}" if kind == "status" and text[:1] and text[0] in "12345" else "bar"
        shown = _status_text(text) if kind == "status" else text
        bars.append((shown, r.get(value) or 0, cls))
    return _bars(bars, _heading(value).lower())


def _status_text(code: str) -> str:
    try:
        return f"{code} {http.HTTPStatus(int(code)).phrase}"
    except ValueError:
        return code


def _columns(labels: list[str], series: list[tuple[str, list]], every: int) -> dict:
    """A column chart: one group of columns per label (a day, an hour), one column per series."""
    left, right, top, bottom, height = 64, 8, 12, 30, 240
    plot_w, plot_h = WIDTH - left - right, height - top - bottom
    highest, step = _scale(max((v for _, values in series for v in values), default=0))
    slot = min(plot_w / max(len(labels), 1), 120)     # a few days: columns of a readable width, centred
    start = left + (plot_w - slot * len(labels)) / 2
    gap = slot * 0.2
    width = (slot - gap) / len(series)
    marks = []
    for j, (name, values) in enumerate(series):
        for i, v in enumerate(values):
            h = v / highest * plot_h
            marks.append({"x": _r(start + i * slot + gap / 2 + j * width), "y": _r(top + plot_h - h),
                          "w": _r(max(width, 0.5)), "h": _r(h), "cls": f"series{j}",
                          "title": f"{labels[i]}: {_count(v)} {name}"})
    ticks = [{"y": _r(top + plot_h - t / highest * plot_h), "text": _short(t)}
             for t in range(0, highest + 1, step)]
    xlabels = [{"x": _r(start + (i + 0.5) * slot), "text": text} for i, text in enumerate(labels) if i % every == 0]
    return {"kind": "columns", "width": WIDTH, "height": height, "left": left, "right": WIDTH - right,
            "base": _r(top + plot_h), "label_y": height - 10, "marks": marks, "ticks": ticks, "xlabels": xlabels,
            "legend": [{"name": name, "cls": f"series{j}"} for j, (name, _) in enumerate(series)]}


def _bars(bars: list[tuple[str, int, str]], value_name: str) -> dict:
    """A bar chart: one horizontal bar per row, its label on the left and its number at its end."""
    left, right, row = 270, 90, 22
    plot_w = WIDTH - left - right
    highest = max((v for _, v, _ in bars), default=0) or 1
    marks = []
    for i, (label, v, cls) in enumerate(bars):
        w = v / highest * plot_w
        marks.append({"y": 4 + i * row, "w": _r(max(w, 1.0) if v else 0), "cls": cls,
                      "label": label if len(label) <= LABEL_CHARS else label[:LABEL_CHARS - 1] + "…",
                      "full": label, "value": _count(v), "value_x": _r(left + w + 6),
                      "title": f"{label}: {_count(v)} {value_name}"})
    return {"kind": "bars", "width": WIDTH, "height": 8 + len(bars) * row, "left": left, "row": row,
            "marks": marks}


def _who(report: dict):
    """Whose requests the report counts: ``general.who`` ("all", "humans" or "crawlers"); a report whose
    top-level ``who`` is that word (rather than the hits of each side) says it there."""
    who = report.get("who")
    return who if isinstance(who, str) else (report.get("general") or {}).get("who")


def _shares(shares) -> dict | None:
    """The humans' and crawlers' shares: a table and one stacked bar (of hits, where the shares are dicts)."""
    if not isinstance(shares, dict) or not shares:
        return None
    if all(isinstance(v, dict) for v in shares.values()):
        columns = list(dict.fromkeys(k for v in shares.values() for k in v))
        rows = [[{"text": _heading(name), "value": None, "title": None}] + [_cell(c, v.get(c)) for c in columns]
                for name, v in shares.items()]
        amounts = {name: v.get("hits") for name, v in shares.items()}
    else:
        columns, rows = [], [[{"text": _heading(name), "value": None, "title": None}, _cell("share", v)]
                             for name, v in shares.items()]
        amounts = dict(shares)
    columns = [{"key": c, "head": _heading(c), "numeric": True} for c in (columns or ["share"])]
    segments, total = [], sum(v for v in amounts.values() if _is_number(v) and v > 0)
    x = 0.0
    for j, (name, v) in enumerate(amounts.items()):
        if not total or not _is_number(v) or v <= 0:
            continue
        w = v / total * SHARES_WIDTH
        segments.append({"x": _r(x), "w": _r(w), "cls": f"share{j}", "text": f"{_heading(name)} {v / total:.1%}",
                         "text_x": _r(x + 8), "fits": w >= 120})
        x += w
    return {"columns": columns, "rows": rows, "segments": segments, "width": SHARES_WIDTH}


def _cell(key: str, value) -> dict:
    """A table cell: the text shown, the exact value (``data-value``) of a number, a tooltip if the text
    rounds it."""
    if _is_number(value) and key in SIZES and math.isfinite(value):
        return {"text": _size(value), "value": value, "title": f"{_count(value)} bytes"}
    if _is_number(value):
        return {"text": _count(value), "value": value, "title": None}
    if value is None:
        return {"text": "", "value": None, "title": None}
    if isinstance(value, (dict, list)):
        return {"text": json.dumps(value, ensure_ascii=False, sort_keys=True), "value": None, "title": None}
    return {"text": str(value), "value": None, "title": None}


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _numeric(rows: list[dict], key: str) -> bool:
    present = [r[key] for r in rows if r.get(key) is not None]
    return bool(present) and all(_is_number(v) for v in present)


def _count(n) -> str:
    """A number as people read it: 1,234,567 (a float to at most three decimals)."""
    if isinstance(n, float) and not math.isfinite(n):
        return str(n)
    if isinstance(n, float) and not n.is_integer():
        return f"{n:,.3f}".rstrip("0").rstrip(".")
    return f"{int(n):,}"


def _size(n) -> str:
    """A size in bytes in binary units, as GoAccess shows it: 512 B, 198.26 KiB, 1.50 MiB."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{int(n)} B" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _short(n: int) -> str:
    """An axis tick: 950, 1.2k, 35k, 1.5M."""
    for div, suffix in ((1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k")):
        if n >= div:
            text = f"{n / div:.1f}".removesuffix(".0")
            return text + suffix
    return str(n)


def _scale(highest) -> tuple[int, int]:
    """The top of a count axis and its tick step: a round step (1, 2 or 5 times a power of ten), about four
    ticks, the top at or above ``highest``."""
    if highest <= 0:
        return 1, 1
    raw = highest / 4
    magnitude = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    step = max(int(step), 1)
    return math.ceil(highest / step) * step, step


def _heading(key: str) -> str:
    return HEADINGS.get(key) or str(key).replace("_", " ").capitalize()


def _slug(key: str) -> str:
    return re.sub(r"[^a-z0-9_-]+", "-", str(key).lower()).strip("-")


def _r(x: float) -> float:
    return round(x, 2)
