"""The monitor in a real browser: Playwright driving Debian's Chromium against a real server on loopback.
Screenshots go to each test's own folder (tmp_path). Skips where Chromium or Playwright is missing,
never under CI."""
from __future__ import annotations

import os
import shutil

import pytest

from conftest import require
from test_monitor_api import make_doc, rid
from test_monitor_runs import Server
from logetl.monitor.store import Store, row_of

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
DAY = 86400.0
BASE = 1_760_000_000.0   # 2025-10-09


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require(False, "Playwright for Python is not installed")
    require(os.path.exists(CHROMIUM), f"Chromium is not installed ({CHROMIUM}; Debian package chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


@pytest.fixture
def site(tmp_path):
    store = Store(f"sqlite:///{tmp_path}/monitor.db")
    rows = []
    for i in range(80):
        status = ["SUCCESSFUL", "FAILED", "RUNNING", "SUCCESSFUL"][i % 4]
        rows.append(row_of(make_doc(rid(i), status=status, app=["logetl-join", "nightly"][i % 2],
                                    owner=["alice", "bob"][i % 2], started=BASE + i * DAY / 4,
                                    duration=1.0 + i)))
    store.ingest_many(rows)
    with Server(store) as srv:
        yield srv, store


@pytest.fixture
def page(browser, tmp_path):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    pg = context.new_page()
    errors = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    context.close()
    assert errors == [], errors


def rows(page):
    return page.locator("#runs tbody tr")


def test_all_applications_filters_columns_and_sorting(site, page, tmp_path):
    srv, _ = site
    page.goto(srv.url + "/")
    page.wait_for_selector("#runs tbody tr[data-run-id]")
    assert page.locator("#page-info").inner_text() == "page 1 of 2 · 80 runs"
    assert rows(page).count() == 50
    assert rows(page).first.get_attribute("data-run-id") == rid(79)           # newest first
    page.screenshot(path=str(tmp_path / "all-applications.png"), full_page=True)

    # status filter
    page.check('#filters input[value="FAILED"]')
    page.wait_for_function("document.querySelector('#page-info').textContent.includes('20 runs')")
    statuses = page.locator('#runs tbody td[data-column="status"]').all_inner_texts()
    assert len(statuses) == 20 and set(statuses) == {"FAILED"}
    page.uncheck('#filters input[value="FAILED"]')
    page.wait_for_function("document.querySelector('#page-info').textContent.includes('80 runs')")

    # dates: one day holds four runs
    page.fill("#f-since", "2025-10-10")
    page.fill("#f-until", "2025-10-10")
    page.locator("#f-until").dispatch_event("change")
    page.wait_for_function("document.querySelector('#page-info').textContent.includes(' 4 runs')")
    assert rows(page).count() == 4
    page.screenshot(path=str(tmp_path / "filtered-by-date.png"), full_page=True)
    page.fill("#f-since", "")
    page.locator("#f-since").dispatch_event("change")
    page.fill("#f-until", "")
    page.locator("#f-until").dispatch_event("change")
    page.wait_for_function("document.querySelector('#page-info').textContent.includes('80 runs')")

    # columns: drop Owner, add Program; the choice is remembered
    page.click("#column-chooser summary")
    page.uncheck('input[data-column="owner"]')
    page.check('input[data-column="program"]')
    page.wait_for_selector('#runs thead th[data-column="program"]')
    headers = page.locator("#runs thead th").evaluate_all("ths => ths.map(t => t.dataset.column)")
    assert "owner" not in headers and "program" in headers
    page.reload()
    page.wait_for_selector('#runs thead th[data-column="program"]')
    headers = page.locator("#runs thead th").evaluate_all("ths => ths.map(t => t.dataset.column)")
    assert "owner" not in headers and "program" in headers

    # sorting: by duration, ascending then descending
    page.click('#runs thead th[data-column="duration"]')
    page.wait_for_function("location.search.includes('sort=duration')")
    page.wait_for_function("document.querySelector('#runs tbody tr').dataset.runId === '%s'" % rid(79))
    page.click('#runs thead th[data-column="duration"]')
    page.wait_for_function("document.querySelector('#runs tbody tr').dataset.runId === '%s'" % rid(0))
    page.screenshot(path=str(tmp_path / "sorted-columns.png"), full_page=True)

    # paging
    page.click("#next")
    page.wait_for_function("document.querySelector('#page-info').textContent.startsWith('page 2 of 2')")
    assert rows(page).count() == 30


def test_run_page_graph_timeline_counters_and_durations(site, page, tmp_path):
    srv, store = site
    doc = make_doc(rid(200), status="FAILED", app="nightly", started=BASE + 30 * DAY, duration=3.0)
    doc["run"]["steps"][1]["status"] = "FAILED"
    doc["run"]["error"] = "injected failure at step 'join' (LOGETL_FAIL_AT)"
    store.ingest(doc)
    page.goto(f"{srv.url}/runs/{rid(200)}")
    page.wait_for_selector("#graph g.node")
    ops = [n for n in doc["run"]["graph"]["nodes"] if n["type"] == "operator"]
    assert page.locator("#graph g.node").count() == len(ops) == 12
    assert page.locator("#graph path.edge").count() == 12
    assert page.locator('#graph g.node[data-node="sink"]').get_attribute("data-status") == "FAILED"
    assert page.locator('#graph g.node[data-node="parse"]').get_attribute("data-status") == "SUCCESSFUL"
    assert page.locator('#graph g.node[data-node="sink"] rect').get_attribute("fill") == "#fecaca"
    assert page.locator("#graph g.step").count() == 2
    assert page.locator("#timeline g.bar").count() == 2
    assert page.locator('#timeline g.bar[data-step="join"]').get_attribute("data-status") == "FAILED"
    assert "injected failure at step 'join'" in page.locator("#error").inner_text()
    assert page.locator('#counters td:text-is("parse")').count() == 2     # the step and its operator
    page.wait_for_selector("#durations rect")
    assert page.locator("#durations rect").count() == 30                  # the 30 newest runs of nightly, this one too
    assert page.locator("#durations rect.current").count() == 1
    page.click('#graph g.node[data-node="images"]')
    assert "filter images" in page.locator("#node-details").inner_text()
    page.screenshot(path=str(tmp_path / "run.png"), full_page=True)


def test_refresh_toggle_and_in_place_updates(site, page, tmp_path):
    srv, store = site
    page.clock.install()
    page.goto(srv.url + "/?per_page=200")
    page.wait_for_selector("#runs tbody tr[data-run-id]")
    toggle = page.locator("#refresh-toggle")
    assert toggle.inner_text() == "Auto-refresh: ON" and toggle.get_attribute("data-state") == "on"

    # select a row, scroll the table, mark the row's DOM node: a refresh must keep all three
    target = page.locator(f'#runs tbody tr[data-run-id="{rid(43)}"]')
    target.locator('td[data-column="application"]').click()
    page.evaluate("document.querySelector('.table-wrap').scrollTop = 600")
    page.evaluate(f"document.querySelector('tr[data-run-id=\"{rid(43)}\"]').__mark = 'kept'")
    assert "FAILED" not in target.inner_text()
    doc = make_doc(rid(43), status="FAILED", app="nightly", owner="bob", started=BASE + 43 * DAY / 4, duration=42, seq=2)
    store.ingest(doc)
    page.clock.run_for(30_000)
    page.wait_for_function(f"document.querySelector('tr[data-run-id=\"{rid(43)}\"]').innerText.includes('FAILED')")
    assert page.evaluate(f"document.querySelector('tr[data-run-id=\"{rid(43)}\"]').__mark") == "kept"
    assert "selected" in (target.get_attribute("class") or "")
    assert page.evaluate("document.querySelector('.table-wrap').scrollTop") == 600
    page.screenshot(path=str(tmp_path / "after-refresh.png"), full_page=True)

    # OFF: no refresh happens, and the choice is remembered
    toggle.click()
    assert toggle.inner_text() == "Auto-refresh: OFF" and toggle.get_attribute("data-state") == "off"
    store.ingest(make_doc(rid(43), status="SUCCESSFUL", app="nightly", owner="bob", started=BASE + 43 * DAY / 4,
                          duration=42, seq=3))
    page.clock.run_for(65_000)
    assert "FAILED" in target.inner_text()
    page.reload()
    page.wait_for_selector("#runs tbody tr[data-run-id]")
    assert page.locator("#refresh-toggle").inner_text() == "Auto-refresh: OFF"


def test_run_page_refresh_keeps_the_selected_node_and_scroll(site, page, tmp_path):
    srv, store = site
    doc = make_doc(rid(300), status="RUNNING", app="nightly", started=BASE + 40 * DAY)
    doc["run"]["steps"][1]["status"] = "RUNNING"
    store.ingest(doc)
    page.clock.install()
    page.set_viewport_size({"width": 1280, "height": 500})
    page.goto(f"{srv.url}/runs/{rid(300)}")
    page.wait_for_selector("#graph g.node")
    page.click('#graph g.node[data-node="join"]')
    page.evaluate("window.scrollTo(0, 300)")
    page.evaluate("document.querySelector('#graph g.node[data-node=\"join\"]').__mark = 'kept'")
    assert page.locator('#graph g.node[data-node="join"]').get_attribute("data-status") == "RUNNING"
    done = make_doc(rid(300), status="SUCCESSFUL", app="nightly", started=BASE + 40 * DAY, seq=2)
    store.ingest(done)
    page.clock.run_for(30_000)
    page.wait_for_function("document.querySelector('#graph g.node[data-node=\"join\"]').dataset.status === 'SUCCESSFUL'")
    assert page.evaluate("document.querySelector('#graph g.node[data-node=\"join\"]').__mark") == "kept"
    assert "selected" in page.locator('#graph g.node[data-node="join"]').get_attribute("class")
    assert page.evaluate("window.scrollY") == 300
    assert page.locator("#run-status").inner_text() == "SUCCESSFUL"
    page.screenshot(path=str(tmp_path / "run-after-refresh.png"), full_page=True)


def test_login_page_in_the_browser(tmp_path, browser):
    store = Store(f"sqlite:///{tmp_path}/monitor.db")
    key = store.create_key("alice")
    store.ingest(make_doc(rid(1)), owner="alice")
    with Server(store) as srv:
        context = browser.new_context()
        pg = context.new_page()
        r = pg.goto(srv.url + "/")
        assert r.status == 401 and pg.locator("form.login").count() == 1
        pg.fill('input[name="key"]', key)
        pg.click('form.login button[type="submit"]')
        pg.wait_for_selector(f'#runs tbody tr[data-run-id="{rid(1)}"]')
        assert pg.locator(".who").inner_text() == "alice"
        pg.screenshot(path=str(tmp_path / "logged-in.png"))
        context.close()
