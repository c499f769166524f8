"""MkDocs hook: the settings reference page (``reference/settings.md``) gets its tables from the one settings
table, ``logetl.settings``, each time the site is built, so the page cannot differ from what logetl reads."""
from __future__ import annotations

PAGE = "reference/settings.md"


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri != PAGE:
        return markdown
    from logetl import settings

    missing = [marker for marker in settings.TABLES if marker not in markdown]
    if missing:     # a page edited without its tables must not build as if it had them
        raise ValueError(f"{PAGE} has lost its marker(s) {', '.join(missing)}")
    return settings.render_page(markdown)
