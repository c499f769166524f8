"""docs/images/make_report_screenshot.py, which made docs/images/report.png, still makes it: Chromium opens the
sample log's page offline. (The script runs in a process of its own: it starts a Playwright of its own, which
cannot start beside the tests' browser in this process.)"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from conftest import SAMPLE, require
from reportpage_data import require_writer

pytestmark = pytest.mark.browser   # Chromium, started by the script

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
    output = tmp_path / "report.png"
    p = subprocess.run([sys.executable, script, "--output", str(output)], capture_output=True)
    assert p.returncode == 0, p.stderr.decode()
    with open(output, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    assert (int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")) == (1200, 1400)
