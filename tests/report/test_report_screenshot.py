"""docs/images/make_report_screenshot.py, which made docs/images/report.png, still makes it: Chromium opens the
sample log's page offline. (A module of its own: the script runs a Playwright of its own, which cannot start
while another module's browser is open in this process.)"""
from __future__ import annotations

import os
import runpy
import shutil


from conftest import SAMPLE, require
from reportpage_data import require_writer

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def test_the_documentations_screenshot_is_made_offline(tmp_path):
    """The script writes a PNG of the page's top, 1200 by 1400 pixels."""
    try:
        import playwright  # noqa: F401
    except ImportError:
        require(False, "Playwright for Python is not installed")
    require(os.path.exists(CHROMIUM), f"Chromium is not installed ({CHROMIUM}; Debian package chromium)")
    require(os.path.isfile(SAMPLE), f"the real sample log is not at {SAMPLE} (../shared is absent)")
    require_writer()
    script = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "images", "make_report_screenshot.py")
    main = runpy.run_path(script)["main"]
    output = tmp_path / "report.png"
    assert main(["--output", str(output)]) == 0
    with open(output, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    assert (int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")) == (1200, 1400)
