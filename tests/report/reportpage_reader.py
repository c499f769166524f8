"""Reads the report's page back with the standard library's HTML parser: each panel's table (its headings and
its cells: text and attributes) and chart (its marks and texts), as the tests compare them with the
report's dictionary."""
from __future__ import annotations

from html.parser import HTMLParser

#: HTML's elements without an end tag (SVG's shapes close with "/>" or with an end tag: both handled)
VOID = {"meta", "link", "br", "img", "input", "hr", "area", "base", "col", "embed", "source", "track", "wbr"}


class Page(HTMLParser):
    """``panels``: data-panel -> {"head": [...], "rows": [[cell, ...]], "marks": [attrs], "texts": [...],
    "id": section id}; a cell is ``{"text", "attrs"}``. ``tags``: every start tag's (name, attrs)."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.panels: dict[str, dict] = {}
        self.tags: list[tuple[str, dict]] = []
        self.texts: list[str] = []
        self._stack: list[tuple[str, dict]] = []
        self._cell = None
        self._svg_text = None
        self._current = None
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        attrs = {k: (v if v is not None else "") for k, v in attrs}
        self.tags.append((tag, attrs))
        if "data-panel" in attrs:
            self._current = self.panels.setdefault(attrs["data-panel"], {
                "id": attrs.get("id"), "head": [], "rows": [], "marks": [], "texts": [], "tables": 0})
        if self._current is not None:
            if tag == "table":
                self._current["tables"] += 1
            elif tag == "tr" and self._inside("tbody"):
                self._current["rows"].append([])
            elif tag in ("td", "th"):
                self._cell = {"text": "", "attrs": attrs, "tag": tag, "head": self._inside("thead")}
            elif tag == "rect" and "mark" in attrs.get("class", "").split():
                self._current["marks"].append(attrs)
            elif tag == "text" and self._inside("svg"):
                self._svg_text = ""
        if tag not in VOID:
            self._stack.append((tag, attrs))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            if self._cell["head"]:
                self._current["head"].append(self._cell["text"])
            elif self._current["rows"]:
                self._current["rows"][-1].append({"text": self._cell["text"], "attrs": self._cell["attrs"]})
            self._cell = None
        if tag == "text" and self._svg_text is not None:
            self._current["texts"].append(self._svg_text)
            self._svg_text = None
        if not any(name == tag for name, _ in self._stack):
            return
        while self._stack:
            name, attrs = self._stack.pop()
            if "data-panel" in attrs:    # back to the panel around it, if any
                around = [a["data-panel"] for _, a in self._stack if "data-panel" in a]
                self._current = self.panels[around[-1]] if around else None
            if name == tag:
                break

    def handle_data(self, data):
        self.texts.append(data)
        if self._cell is not None:
            self._cell["text"] += data
        if self._svg_text is not None:
            self._svg_text += data

    def _inside(self, tag: str) -> bool:
        return any(name == tag for name, _ in self._stack)
