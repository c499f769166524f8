"""Alerts, search and trend in a real browser (Playwright driving Debian's Chromium) against a real server
on loopback whose worker fires a rule to a real HTTP receiver. Screenshots go to the test's own folder."""
from __future__ import annotations

import json
import urllib.request

from receiver import Receiver
from test_monitor_api import make_doc, rid
from test_monitor_browser import BASE, DAY, page  # noqa: F401 - the shared page fixture
from test_monitor_runs import Server
from logetl.monitor import alerts as alerting
from logetl.monitor.store import Store, row_of


def post(url, doc):
    req = urllib.request.Request(url + "/api/documents", data=json.dumps(doc).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 202


def test_alert_list_markers_search_and_trend(page, tmp_path):  # noqa: F811
    store = Store(f"sqlite:///{tmp_path}/monitor.db")
    store.ingest_many([row_of(make_doc(rid(i), app="nightly", started=BASE + i * DAY / 2, duration=1.0 + i % 3))
                       for i in range(6)])
    with Receiver() as hook, Server(store, public_url="http://monitor.example", webhook_allow=("127.0.0.1",)) as srv:
        alerting.add_rule(store, application="nightly", kind="failed", webhook=hook.url)
        failed = make_doc(rid(50), status="FAILED", app="nightly", started=BASE + 10 * DAY)
        failed["run"]["error"] = "input file '/logs/web-7.log' is not readable"
        failed["run"]["inputs"] = ["/logs/web-7.log"]
        post(srv.url, failed)
        post(srv.url, make_doc(rid(51), app="nightly", started=BASE + 11 * DAY))
        hook.wait(1)

        # the run list: a marker on the failed run's row only, whatever the columns
        page.goto(srv.url + "/")
        marker = page.locator(f'#runs tbody tr[data-run-id="{rid(50)}"] .alert-marker')
        marker.wait_for()
        assert marker.inner_text() == "⚑ 1"
        assert marker.get_attribute("title") == "run failed: input file '/logs/web-7.log' is not readable"
        assert page.locator("#runs tbody .alert-marker").count() == 1
        page.screenshot(path=str(tmp_path / "runs-with-alert-marker.png"), full_page=True)

        # the marker leads to the alert list, filtered to that run
        marker.click()
        page.wait_for_selector("#alerts tbody tr[data-alert-id]")
        row = page.locator("#alerts tbody tr[data-alert-id]")
        assert row.count() == 1 and row.get_attribute("data-run-id") == rid(50)
        cells = row.locator("td").all_inner_texts()
        assert cells[1:] == ["nightly", rid(50), "#1 failed", "run failed: input file '/logs/web-7.log' is not readable",
                             "delivered (1)"]
        assert page.locator("#rules tbody tr[data-rule-id]").locator("td").all_inner_texts() == [
            "1", "nightly", "", "failed", "", "", "everyone", hook.url]
        page.screenshot(path=str(tmp_path / "alert-list.png"), full_page=True)

        # the run page: the marker beside the status and the alert in a box
        page.click(f'#alerts a[href="/runs/{rid(50)}"]')
        page.wait_for_selector("#run-alert:not([hidden])")
        assert page.locator("#run-alert").inner_text() == "⚑ 1"
        assert page.locator("#alerts-box li").all_inner_texts() == [
            "failed: run failed: input file '/logs/web-7.log' is not readable"]
        page.screenshot(path=str(tmp_path / "run-with-alert.png"), full_page=True)
        page.goto(f"{srv.url}/runs/{rid(51)}")
        page.wait_for_selector("#graph g.node")
        page.wait_for_timeout(300)
        assert page.locator("#run-alert").is_hidden() and page.locator("#alerts-box").is_hidden()

        # the search box in the header finds the run by its input path
        page.fill("header form.search-box input", "web-7")
        page.press("header form.search-box input", "Enter")
        page.wait_for_selector("#results tbody tr[data-run-id]")
        assert page.locator("#results tbody tr[data-run-id]").evaluate_all("rs => rs.map(r => r.dataset.runId)") == [
            rid(50)]
        assert page.locator("#search-info").inner_text() == "1 run(s) match “web-7”"
        page.screenshot(path=str(tmp_path / "search.png"), full_page=True)

        # the daily trend of the application, from the run page's link
        page.goto(f"{srv.url}/runs/{rid(51)}")
        page.click("a.trend-link")
        page.wait_for_selector("#trend tbody tr[data-day]")
        days = page.locator("#trend tbody tr[data-day]").evaluate_all("rs => rs.map(r => r.dataset.day)")
        assert days == ["2025-10-09", "2025-10-10", "2025-10-11", "2025-10-19", "2025-10-20"]
        assert page.locator("#trend-duration rect.trend-bar").count() == 5
        assert page.locator("#trend-records rect.trend-bar").count() == 5
        page.screenshot(path=str(tmp_path / "trend.png"), full_page=True)


def test_the_alert_list_shows_a_user_no_webhook_url_of_a_rule_not_theirs(browser, tmp_path):  # noqa: F811
    """An administrator's rule (the command line) fires on alice's run: her alert list shows the alert and
    its delivery state, and nowhere its URL or a reason naming its host; her own rule is hers to see."""
    from receiver import wait_for
    from logetl.monitor.worker import delivery_log

    store = Store(f"sqlite:///{tmp_path}/monitor.db")
    key = store.create_key("alice")
    secret = "http://10.255.255.1/hooks/T0KEN-s3cret"        # on the local network: refused at delivery
    alerting.add_rule(store, application="nightly", kind="failed", webhook=secret)
    with Server(store, webhook_allow=("127.0.0.1",)) as srv:
        req = urllib.request.Request(srv.url + "/api/documents", method="POST",
                                     data=json.dumps(make_doc(rid(1), status="FAILED", app="nightly")).encode(),
                                     headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.status == 202
        wait_for(lambda: [d for d in delivery_log(store) if d["state"] == "failed"], what="the refused delivery")
        context = browser.new_context()
        pg = context.new_page()
        pg.goto(srv.url + "/login")
        pg.fill('input[name="key"]', key)
        pg.click('form.login button[type="submit"]')
        pg.wait_for_selector("#runs tbody tr[data-run-id]")
        pg.goto(srv.url + "/alerts")
        row = pg.locator("#alerts tbody tr[data-alert-id]")
        row.wait_for()
        assert row.locator("td").all_inner_texts()[1:] == ["nightly", rid(1), "#1 failed", "run failed", "failed (1)"]
        assert row.locator(".badge").get_attribute("title") == (
            "attempt 1: the webhook was refused or failed (the rule's owner sees why: the reason names its host)")
        assert pg.locator("#rules tbody").inner_text() == "No rules."
        html = pg.content()
        assert "s3cret" not in html and "10.255.255.1" not in html
        pg.screenshot(path=str(tmp_path / "alert-list-of-a-user.png"), full_page=True)
        context.close()
