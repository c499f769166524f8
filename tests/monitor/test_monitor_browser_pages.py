"""The monitor's comparison, quality, graph and progress pages in a real browser (Playwright driving Debian's Chromium, a real server on loopback):
run comparison, the run list's data-quality columns and filter, the graph laid out by dagre, PENDING
operators of a failed step, the restart notice's link, and a running run's progress.

Screenshots go to each test's folder, or to ``$LOGETL_SCREENSHOTS`` (the monitor guide's come from
``LOGETL_SCREENSHOTS=docs/monitor pytest tests/monitor/test_monitor_browser_pages.py``)."""
from __future__ import annotations

import os
import time

import pytest

from conftest import CORPUS, ROOT
from test_monitor_api import make_doc, rid
from test_monitor_browser import BASE, DAY, page  # noqa: F401 - fixtures
from test_monitor_compare import pair, uncounted_doc
from test_monitor_runs import Server
from logetl import programs
from logetl.monitor.documents import graph
from logetl.monitor.store import Store

CORPUS_LOG = os.path.join(CORPUS, "corpus.log")
GREY, RED, GREEN = "#f3f4f6", "#fecaca", "#bbf7d0"


def shot(page, tmp_path, name):
    where = os.environ.get("LOGETL_SCREENSHOTS") or str(tmp_path)
    os.makedirs(where, exist_ok=True)
    page.screenshot(path=os.path.join(where, name), full_page=True)


@pytest.fixture
def served(tmp_path):
    store = Store(f"sqlite:///{tmp_path}/monitor.db")
    with Server(store) as srv:
        yield srv, store


def test_compare_with_the_previous_successful_run_from_the_run_page(served, page, tmp_path):
    srv, store = served
    a, b = pair()
    between = make_doc(rid(3), status="FAILED", started=1_700_000_050.0)   # not successful: passed over
    for doc in (a, between, b):
        store.ingest(doc)
    page.goto(f"{srv.url}/runs/{rid(2)}")
    page.wait_for_selector("#graph g.node")
    link = page.locator("#compare-previous")
    page.wait_for_function("!document.querySelector('#compare-previous').hidden")
    assert link.get_attribute("href") == f"/runs/{rid(1)}/compare/{rid(2)}"
    link.click()
    page.wait_for_url(f"{srv.url}/runs/{rid(1)}/compare/{rid(2)}")
    assert page.locator("#compare-summary").inner_text() == "10 differences, highlighted."
    assert page.locator("#compare tr.differs").count() == 10
    row = page.locator('#compare tr[data-label="overwrite"]')
    assert row.locator('td[data-side="a"]').inner_text() == "False"
    assert row.locator('td[data-side="b"]').inner_text() == "True"
    assert row.locator('td[data-side="b"]').evaluate("td => getComputedStyle(td).backgroundColor") == "rgb(254, 249, 195)"
    same = page.locator('#compare tbody[data-section="Options"] tr[data-label="engine"]')
    assert "differs" not in (same.get_attribute("class") or "")
    assert same.locator('td[data-side="b"]').evaluate("td => getComputedStyle(td).backgroundColor") == "rgba(0, 0, 0, 0)"
    lines = page.locator('#compare tr[data-label="lines read"]')
    assert lines.locator("td").all_inner_texts() == ["10", "12", "+2 (+20.0%)"]
    assert page.locator('#compare tr[data-label="/logs/more.log"] td').all_inner_texts() == ["—", "7 B", ""]
    shot(page, tmp_path, "compare.png")
    page.click("#swap")
    page.wait_for_url(f"{srv.url}/runs/{rid(2)}/compare/{rid(1)}")
    assert page.locator('#compare tr[data-label="lines read"] td').all_inner_texts() == ["12", "10", "-2 (-16.7%)"]
    # the oldest run has no previous successful run: no link
    page.goto(f"{srv.url}/runs/{rid(1)}")
    page.wait_for_selector("#graph g.node")
    page.wait_for_function("document.querySelector('#updated').textContent.startsWith('updated')")
    assert page.locator("#compare-previous").is_hidden()


def test_run_list_quality_columns_sorting_and_the_malformed_filter(served, page, tmp_path):
    srv, store = served
    shares = {30: {}, 31: {"no_match": 1}, 32: {"no_match": 5}, 33: {"no_match": 10}}
    for i, bad in shares.items():
        doc = make_doc(rid(i), app="quality", started=BASE + i * DAY, malformed=bad)
        doc["run"]["steps"][0]["dropped_size_dash"] = i - 30
        store.ingest(doc)
    page.set_viewport_size({"width": 1600, "height": 700})
    page.goto(srv.url + "/?application=quality")
    page.wait_for_selector(f'#runs tbody tr[data-run-id="{rid(33)}"]')
    headers = page.locator("#runs thead th").evaluate_all("ths => ths.map(t => t.dataset.column)")
    assert headers == ["application", "run_id", "owner", "status", "progress", "started_at", "duration",
                       "records_read", "malformed_share", "dropped", "records_written", "engine"]

    def column(name):
        return page.locator(f'#runs tbody td[data-column="{name}"]').all_inner_texts()

    assert column("malformed_share") == ["100.00 %", "50.00 %", "10.00 %", "0.00 %"]
    assert column("dropped") == ["3", "2", "1", "0"]
    assert column("records_read") == ["10"] * 4
    marked = page.locator("#runs tbody tr.has-warning").evaluate_all("trs => trs.map(t => t.dataset.runId)")
    assert marked == [rid(33), rid(32), rid(31)]                        # a tenth or more: the ⚠ marker stays
    assert page.locator(f'#runs tbody tr[data-run-id="{rid(33)}"] .warning-marker').inner_text() == "⚠"
    # sort by malformed share, ascending
    page.click('#runs thead th[data-column="malformed_share"]')
    page.wait_for_function("location.search.includes('sort=malformed_share')")
    page.click('#runs thead th[data-column="malformed_share"]')
    page.wait_for_function(f"document.querySelector('#runs tbody tr').dataset.runId === '{rid(30)}'")
    assert column("malformed_share") == ["0.00 %", "10.00 %", "50.00 %", "100.00 %"]
    # at least 50 %
    page.fill("#f-min-malformed", "50")
    page.locator("#f-min-malformed").dispatch_event("change")
    page.wait_for_function("document.querySelector('#page-info').textContent.includes(' 2 runs')")
    assert column("malformed_share") == ["50.00 %", "100.00 %"]
    assert "min_malformed_share=0.5" in page.url
    shot(page, tmp_path, "run-list-quality.png")
    page.reload()
    page.wait_for_selector(f'#runs tbody tr[data-run-id="{rid(33)}"]')
    assert page.locator("#f-min-malformed").input_value() == "50" and len(column("malformed_share")) == 2
    page.fill("#f-min-malformed", "")
    page.locator("#f-min-malformed").dispatch_event("change")
    page.wait_for_function("document.querySelector('#page-info').textContent.includes(' 4 runs')")


#: every edge's path sampled: points strictly inside an operator other than the edge's own two
CROSSINGS = """() => {
  const boxes = [...document.querySelectorAll('#graph g.node')].map((g) => {
    const r = g.querySelector('rect');
    return { id: 'op:' + g.dataset.node, x: +r.getAttribute('x'), y: +r.getAttribute('y'),
             w: +r.getAttribute('width'), h: +r.getAttribute('height') };
  });
  const found = [];
  for (const path of document.querySelectorAll('#graph path.edge')) {
    const len = path.getTotalLength();
    for (let i = 0; i <= 400; i++) {
      const p = path.getPointAtLength((len * i) / 400);
      for (const b of boxes) {
        if (b.id === path.dataset.from || b.id === path.dataset.to) continue;
        if (p.x > b.x + 1 && p.x < b.x + b.w - 1 && p.y > b.y + 1 && p.y < b.y + b.h - 1)
          found.push(`${path.dataset.from}->${path.dataset.to} through ${b.id}`);
      }
    }
  }
  return [...new Set(found)];
}"""


@pytest.mark.parametrize("program", ["join", "filter", "branch"])
def test_the_graph_is_layered_by_dagre_and_no_edge_runs_through_another_operator(served, page, tmp_path, program):
    srv, store = served
    doc = make_doc(rid(40), app=program, started=BASE)
    doc["run"]["program"] = program
    doc["run"]["graph"] = graph(programs.get(program))
    doc["run"]["steps"] = [{"name": s.name, "index": s.index, "status": "SUCCESSFUL", "counters": {}}
                           for s in programs.get(program).steps]
    store.ingest(doc)
    page.goto(f"{srv.url}/runs/{rid(40)}")
    page.wait_for_selector("#graph g.node")
    assert page.evaluate("typeof dagre.layout") == "function"
    ops = [n for n in doc["run"]["graph"]["nodes"] if n["type"] == "operator"]
    data = [e for e in doc["run"]["graph"]["edges"] if e["type"] == "data"]
    assert page.locator("#graph g.node").count() == len(ops)
    assert page.locator("#graph path.edge").count() == len(data)
    assert page.evaluate(CROSSINGS) == []
    # layered left to right: every edge goes from a column to a later one
    xs = page.evaluate("() => Object.fromEntries([...document.querySelectorAll('#graph g.node')].map("
                       "(g) => ['op:' + g.dataset.node, +g.querySelector('rect').getAttribute('x')]))")
    assert all(xs[e["from"]] < xs[e["to"]] for e in data)
    # every operator inside its step's box
    inside = page.evaluate("""() => [...document.querySelectorAll('#graph g.node')].every((g) => {
      const r = g.querySelector('rect').getBBox();
      const box = document.querySelector(`#graph g.step[data-step="${CSS.escape(g.dataset.step)}"] rect`).getBBox();
      return r.x >= box.x && r.y >= box.y && r.x + r.width <= box.x + box.width && r.y + r.height <= box.y + box.height;
    })""")
    assert inside
    if program == "join":
        edge = page.locator('#graph path.edge[data-from="op:unique_ip"][data-to="op:join"]')
        assert edge.count() == 1
        shot(page, tmp_path, "run-graph.png")


def test_the_vendored_layout_library_is_served_by_the_app(served, page):
    srv, _ = served
    r = page.request.get(srv.url + "/static/vendor/dagre.min.js")
    vendor = os.path.join(ROOT, "src", "logetl", "monitor", "static", "vendor")
    with open(os.path.join(vendor, "dagre.min.js"), "rb") as f:
        assert r.status == 200 and r.body() == f.read()
    assert "javascript" in r.headers["content-type"]
    assert page.request.get(srv.url + "/static/vendor/dagre.LICENSE").status == 200


def test_a_failed_run_and_its_restart_in_the_browser(tmp_path, page, monkeypatch):
    """Real runs: Join fails at the start of its join step (LOGETL_FAIL_AT), then restarts after the
    checkpoint. The failed step's operators never started: PENDING; the restart notice links the
    failed run."""
    from logetl.job import run_program

    home = tmp_path / "home"
    monkeypatch.setenv("LOGETL_HOME", str(home))
    out = {"output": str(tmp_path / "out")}
    monkeypatch.setenv("LOGETL_FAIL_AT", "join")
    with pytest.raises(Exception, match="injected failure"):
        run_program("join", CORPUS_LOG, out, quiet=True)
    monkeypatch.delenv("LOGETL_FAIL_AT")
    again = run_program("join", CORPUS_LOG, out, quiet=True)
    store = Store(f"sqlite:///{home}/monitor.db")
    failed = [r for r in store.list_runs()[0] if r["status"] == "FAILED"][0]["run_id"]
    with Server(store) as srv:
        page.goto(f"{srv.url}/runs/{failed}")
        page.wait_for_selector("#graph g.node")
        status = page.evaluate("() => Object.fromEntries([...document.querySelectorAll('#graph g.node')].map("
                               "(g) => [g.dataset.node, [g.dataset.status, g.querySelector('rect').getAttribute('fill')]]))")
        assert status == {**{n: ["SUCCESSFUL", GREEN] for n in ("input", "parse", "images", "retain_ip", "unique_ip",
                                                                "rename_ip", "score", "min_score", "checkpoint")},
                          **{n: ["PENDING", GREY] for n in ("join", "fields", "sort_score", "sink")}}
        assert page.locator('#graph g.step[data-step="join"]').get_attribute("data-status") == "FAILED"
        assert page.locator('#timeline g.bar[data-step="join"]').get_attribute("data-status") == "FAILED"
        page.click('#graph g.node[data-node="sink"]')
        assert "step join: FAILED; operator: PENDING" in page.locator("#node-details").inner_text()
        shot(page, tmp_path, "failed-run.png")

        page.goto(f"{srv.url}/runs/{again.run_id}")
        page.wait_for_selector("#notices a.earlier-run")
        assert page.locator("#notices").inner_text() == (
            f"restarting after checkpoint 'checkpoint': skipping step(s) parse, completed by the failed run {failed}")
        link = page.locator("#notices a.earlier-run")
        assert link.get_attribute("href") == f"/runs/{failed}" and link.inner_text() == failed
        assert page.locator('#graph g.node[data-node="parse"]').get_attribute("data-status") == "SKIPPED"
        assert page.locator('#graph g.node[data-node="sink"]').get_attribute("data-status") == "SUCCESSFUL"
        shot(page, tmp_path, "restarted-run.png")
        link.click()
        page.wait_for_url(f"{srv.url}/runs/{failed}")
        page.wait_for_selector("#graph g.node")
        assert page.locator("#run-status").inner_text() == "FAILED"


def test_a_run_whose_parse_was_not_counted_says_so_on_its_page_and_in_the_comparison(served, page, tmp_path):
    """A Spark run whose parse step failed before its counters came back: its lines read and drops are
    "not counted" on its page, not 0, and the comparison leaves its counts empty."""
    srv, store = served
    store.ingest(uncounted_doc(40))
    store.ingest(make_doc(rid(41), started=41.0))
    page.goto(f"{srv.url}/runs/{rid(40)}")
    page.wait_for_selector('#counters tr.extra')
    facts = page.evaluate("() => Object.fromEntries([...document.querySelectorAll('#facts dd')].map("
                          "(dd) => [dd.dataset.key, dd.textContent]))")
    assert {k: facts[k] for k in ("Lines read", "Malformed share", "Dropped (size '-')")} == {
        "Lines read": "not counted", "Malformed share": "", "Dropped (size '-')": "not counted"}
    assert page.locator("#counters tr.extra").all_inner_texts() == [
        "lines read not counted (the step failed before its counters came back)"]
    page.goto(f"{srv.url}/runs/{rid(40)}/compare/{rid(41)}")
    page.wait_for_selector('#compare tr[data-label="lines read"]')
    for label, b in (("lines read", "10"), ("malformed lines", "0"), ("dropped (size '-')", "0")):
        assert page.locator(f'#compare tr[data-label="{label}"] td').all_inner_texts()[:2] == ["—", b]
    shot(page, tmp_path, "uncounted-run.png")


NOW = time.time()


def running(seq, done, rate, eta):
    doc = make_doc(rid(50), status="RUNNING", app="live", started=NOW - 42, seq=seq)
    run = doc["run"]
    run["steps"][1]["status"], run["steps"][1]["finished_at"] = "RUNNING", None
    run["progress"] = {"step": "join", "done": done, "total": 4000, "unit": "records",
                       "percent": 100 * done / 4000, "rate": rate, "eta": eta}
    return doc


def test_a_running_runs_progress_on_its_page_and_in_the_list(served, page, tmp_path):
    srv, store = served
    store.ingest(running(1, 1000, 500.0, 6.0))
    page.clock.install()
    page.goto(f"{srv.url}/runs/{rid(50)}")
    page.wait_for_selector("#progress .progress")
    assert page.locator("#progress").inner_text() == "Now join · 25.0 % · 1,000 of 4,000 records · 500 records/s · ETA 6.00 s"
    assert page.locator("#progress .bar span").get_attribute("style") == "width: 25.0%"
    shot(page, tmp_path, "running-run.png")
    # a running run's page refreshes every 5 s (30 s otherwise)
    store.ingest(running(2, 3000, 600.0, 1.67))
    page.clock.run_for(5_000)
    page.wait_for_function("document.querySelector('#progress').innerText.includes('75.0 %')")
    assert page.locator("#progress").inner_text() == "Now join · 75.0 % · 3,000 of 4,000 records · 600 records/s · ETA 1.67 s"
    done = make_doc(rid(50), status="SUCCESSFUL", app="live", started=NOW - 42, duration=40.0, seq=3)
    store.ingest(done)
    page.clock.run_for(5_000)
    page.wait_for_function("document.querySelector('#run-status').textContent === 'SUCCESSFUL'")
    assert page.locator("#progress").is_hidden()

    store.ingest(running(1, 2000, 400.0, 5.0) | {"run": {**running(1, 2000, 400.0, 5.0)["run"], "run_id": rid(51)}})
    page.set_viewport_size({"width": 1600, "height": 700})
    page.goto(srv.url + "/?application=live")
    page.wait_for_selector(f'#runs tbody tr[data-run-id="{rid(51)}"] .progress')
    cell = page.locator(f'#runs tbody tr[data-run-id="{rid(51)}"] td[data-column="progress"]')
    assert cell.inner_text() == "join · 50.0 % · 2,000 of 4,000 records · 400 records/s · ETA 5.00 s"
    assert page.locator(f'#runs tbody tr[data-run-id="{rid(50)}"] td[data-column="progress"]').inner_text() == ""
    shot(page, tmp_path, "run-list-progress.png")
