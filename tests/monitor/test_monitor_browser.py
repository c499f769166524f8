"""The monitor in a real browser: Playwright driving Debian's Chromium against a real server on loopback.
Screenshots go to each test's own folder (tmp_path). Chromium starts once for the whole run (``browser`` in
tests/conftest.py). Skips where Chromium or Playwright is missing, never under CI."""
from __future__ import annotations

import pytest

from test_monitor_api import make_doc, rid
from test_monitor_runs import Server
from logetl.monitor.store import Store, row_of

DAY = 86400.0
BASE = 1_760_000_000.0   # 2025-10-09


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
    doc["run"]["steps"][1]["counters"] = {"join": {"in": 7, "out": 3}, "sort_score": {"in": 3, "out": 0}}
    doc["run"]["error"] = "injected failure at step 'join' (LOGETL_FAIL_AT)"
    store.ingest(doc)
    page.goto(f"{srv.url}/runs/{rid(200)}")
    page.wait_for_selector("#graph g.node")
    ops = [n for n in doc["run"]["graph"]["nodes"] if n["type"] == "operator"]
    assert page.locator("#graph g.node").count() == len(ops) == 13
    assert page.locator("#graph path.edge").count() == 13
    assert page.locator('#graph g.node[data-node="sort_score"]').get_attribute("data-status") == "FAILED"
    assert page.locator('#graph g.node[data-node="sink"]').get_attribute("data-status") == "PENDING"   # never started
    assert page.locator('#graph g.node[data-node="parse"]').get_attribute("data-status") == "SUCCESSFUL"
    assert page.locator('#graph g.node[data-node="sort_score"] rect').get_attribute("fill") == "#fecaca"
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


# --- warnings, odd step names, cross-site requests ------------------------------------------------------------

@pytest.fixture(scope="module")
def small_site(tmp_path_factory):
    """A keyless server on loopback with a few runs, shared by the tests below."""
    store = Store(f"sqlite:///{tmp_path_factory.mktemp('small')}/monitor.db")
    with Server(store) as srv:
        yield srv, store


@pytest.fixture(scope="module")
def elsewhere():
    """Another site: a real HTTP server on 127.0.0.1 reached as http://localhost:PORT (127.0.0.1 and
    localhost are different sites to a browser), serving whatever page a test puts in ``pages``."""
    import http.server
    import threading

    pages: dict[str, str] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = pages.get(self.path, "not here").encode()
            self.send_response(200 if self.path in pages else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://localhost:{httpd.server_address[1]}", pages
    httpd.shutdown()
    httpd.server_close()


def test_runs_with_a_warning_are_marked_in_the_list_and_on_their_page(small_site, page, tmp_path):
    from test_monitor_api import warned_doc

    srv, store = small_site
    doc = warned_doc(rid(500), app="warned", started=BASE + 50 * DAY)
    warning = doc["run"]["warning"]
    assert warning == "80.0% of the lines are malformed (8 of 10): is the input an access log in the expected layout?"
    store.ingest(doc)
    store.ingest(make_doc(rid(501), app="warned", started=BASE + 49 * DAY))
    page.goto(srv.url + "/?application=warned")
    page.wait_for_selector(f'#runs tbody tr[data-run-id="{rid(500)}"]')
    marked = page.locator(f'#runs tbody tr[data-run-id="{rid(500)}"] .warning-marker')
    assert marked.count() == 1 and marked.inner_text() == "⚠" and marked.get_attribute("title") == warning
    assert marked.is_visible()
    assert page.locator(f'#runs tbody tr[data-run-id="{rid(501)}"] .warning-marker').count() == 0
    page.click("#column-chooser summary")                   # the marker stays whatever the columns shown
    page.uncheck('input[data-column="application"]')
    page.wait_for_selector('#runs thead th[data-column="run_id"]:first-child')
    first = page.locator(f'#runs tbody tr[data-run-id="{rid(500)}"] td').first
    assert first.get_attribute("data-column") == "run_id"
    assert first.locator(".warning-marker").get_attribute("title") == warning
    page.screenshot(path=str(tmp_path / "warning-in-list.png"), full_page=True)
    page.goto(f"{srv.url}/runs/{rid(500)}")
    page.wait_for_selector("#graph g.node")
    assert page.locator("#run-warning").is_visible() and page.locator("#run-warning").get_attribute("title") == warning
    assert page.locator("#warning").inner_text() == "Warning: " + warning
    page.screenshot(path=str(tmp_path / "warning-on-run.png"), full_page=True)
    page.goto(f"{srv.url}/runs/{rid(501)}")
    page.wait_for_selector("#graph g.node")
    assert not page.locator("#run-warning").is_visible() and not page.locator("#warning").is_visible()


def test_a_quote_in_a_step_name_does_not_break_the_run_page(small_site, page):
    srv, store = small_site
    doc = make_doc(rid(502), app="quoted", started=BASE + 51 * DAY)
    odd = 'join "all" \\ of it'
    run = doc["run"]
    run["steps"][1]["name"] = odd
    for n in run["graph"]["nodes"]:
        if n["type"] == "step" and n["name"] == "join":
            n["name"], n["id"] = odd, f"step:{odd}"
        if n.get("step") == "join":
            n["step"] = odd
    for e in run["graph"]["edges"]:
        e["from"], e["to"] = (x.replace("step:join", f"step:{odd}") for x in (e["from"], e["to"]))
    store.ingest(doc)
    page.goto(f"{srv.url}/runs/{rid(502)}")
    page.wait_for_selector("#timeline g.bar")
    bars = page.locator("#timeline g.bar").evaluate_all("bars => bars.map(b => b.dataset.step)")
    assert bars == ["parse", odd]
    assert page.locator("#graph g.step").count() == 2
    assert page.locator("#counters tr[data-step]").count() >= 2          # and no page error (the fixture)


def test_a_web_page_elsewhere_cannot_plant_runs_in_a_keyless_monitor(small_site, elsewhere, browser):
    """The classic attack: a simple (no-preflight) cross-site POST with a text/plain type that still says
    application/json; the page cannot read the answer but the write must not happen."""
    import json

    srv, store = small_site
    site, pages = elsewhere
    doc = make_doc(rid(503), app="planted")
    pages["/plant"] = f"""<!doctype html><title>waiting</title><script>
      fetch("{srv.url}/api/documents", {{method: "POST", mode: "no-cors",
        headers: {{"Content-Type": "text/plain; application/json"}}, body: {json.dumps(json.dumps(doc))}}})
      .then(() => fetch("{srv.url}/api/runs"))                  // and reading: no CORS, no answer
      .then((r) => r.json()).then(() => document.title = "read", () => document.title = "not read");
    </script>"""
    context = browser.new_context()
    pg = context.new_page()
    pg.goto(site + "/plant")
    pg.wait_for_function("document.title !== 'waiting'")
    assert pg.title() == "not read"
    context.close()
    assert store.get_run(rid(503)) is None


def test_a_web_page_elsewhere_cannot_log_the_user_in(tmp_path, elsewhere, browser):
    """Login CSRF: another site's form posts the attacker's key to /login; the user must not end up in the
    attacker's session (where their own runs would then be sent)."""
    srv_store = Store(f"sqlite:///{tmp_path}/monitor.db")
    mallory = srv_store.create_key("mallory")
    site, pages = elsewhere
    with Server(srv_store) as srv:
        pages["/login-as-mallory"] = f"""<!doctype html><form method="post" action="{srv.url}/login">
          <input name="key" value="{mallory}"><input name="csrf" value="{'x' * 43}"></form>
          <script>document.forms[0].submit()</script>"""
        context = browser.new_context()
        pg = context.new_page()
        with pg.expect_navigation(url=srv.url + "/**") as nav:
            pg.goto(site + "/login-as-mallory")
        assert nav.value.status == 403
        assert "came from another site or has expired" in pg.content()
        assert not [c for c in context.cookies() if c["name"] == "logetl_session"]
        r = pg.goto(srv.url + "/api/runs")
        assert r.status == 401
        context.close()
