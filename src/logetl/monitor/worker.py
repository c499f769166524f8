"""The monitor server's background worker: alerts and OpenLineage events for the runs it sees, and their
delivery.

One daemon thread, started and stopped with the app (its lifespan). It wakes when a document is posted and
at least every ``poll`` seconds, so runs that an embedded store records (``logetl join ...`` writing into the
SQLite store this server serves) are seen too, within a second while the server runs, or when it next starts.

- It looks at runs whose ``updated_at`` is past its watermark (kept in ``settings``, so runs recorded while
  the server was down are handled at its next start; a new store starts at the server's first start, so
  history never fires) and handles each run once per state (``run_checks``): a run seen for the first time
  gets an OpenLineage START, a finished run its COMPLETE / FAIL / ABORT and its alert rules' evaluation.
- Deliveries (alert webhooks, OpenLineage events) are rows of ``deliveries``: each attempt is a row of
  ``delivery_attempts`` (time, HTTP status or error, milliseconds). A 2xx answer delivers; no answer, 408,
  429 and 5xx are retried after ``backoff`` x 2^(attempt-1) seconds, up to ``max_attempts`` attempts in all;
  any other answer fails the delivery at once (retrying cannot help).
- Deliveries are sent by ``senders`` threads of their own (8), so that a slow endpoint never holds up
  anyone else's: the worker's thread only hands each due delivery to them, while at most
  ``per_destination`` (2) deliveries to one destination (scheme, host and port) and at most ``per_owner``
  (4) deliveries of one user's runs are in flight, and goes back to looking for runs. One user's slow or
  dead webhooks (each attempt waits at most ``timeout``, 5 s) thus take at most that user's share of the
  senders, and a destination that answers slowly is sent to two at a time; every other user's alerts go
  out at once. Each pass looks at the first ``PER_URL`` due deliveries of each owner's URL, so no backlog
  (a long outage of one endpoint, many runs) hides a delivery queued after it.
- Nothing here runs in a request: a POST only wakes the thread. On shutdown the threads are asked to stop
  and waited for at most the HTTP timeout plus a second; a delivery still pending (or in flight, then
  abandoned with its daemon thread and not counted) stays ``pending`` in the store and is sent by the next
  start, its attempts so far kept.
"""
from __future__ import annotations

import http.client
import json
import logging
import queue
import threading
import time
import urllib.error
import urllib.request
from urllib.parse import urlsplit

from sqlalchemy import func, select

from logetl import __version__
from logetl.monitor import alerts as alerting
from logetl.monitor import lineage
from logetl.monitor.outbound import WebhookPolicy, WebhookRefused
from logetl.monitor.store import (alert_rules, alerts, deliveries, delivery_attempts, run_checks, runs,
                                  settings)

log = logging.getLogger("logetl.monitor")
#: runs committed out of order of their ``updated_at`` (concurrent writers) are still seen
SLACK = 30.0
WATERMARK = "worker_watermark"
SINCE = "worker_since"
RETRY_STATUSES = (408, 429)
#: how many of the due deliveries of one owner's URL each pass considers (more than can be in flight)
PER_URL = 8


class Worker:
    def __init__(self, store, *, public_url: str, openlineage_url: str | None = None,
                 openlineage_namespace: str = "logetl", backoff: float = 2.0, max_attempts: int = 5,
                 timeout: float = 5.0, poll: float = 1.0, webhooks: WebhookPolicy | None = None,
                 senders: int = 8, per_destination: int = 2, per_owner: int = 4):
        self.store = store
        self.webhooks = webhooks or WebhookPolicy()
        self.public_url = public_url.rstrip("/")
        self.ol_url = lineage.endpoint(openlineage_url) if openlineage_url else None
        self.ol_namespace = openlineage_namespace
        self.backoff, self.max_attempts, self.timeout, self.poll = backoff, max_attempts, timeout, poll
        self.wake = threading.Event()
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="logetl-monitor-worker", daemon=True)
        self.per_destination, self.per_owner = per_destination, per_owner
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.senders = [threading.Thread(target=self._send_loop, name=f"logetl-monitor-sender-{i}", daemon=True)
                        for i in range(senders)]
        #: deliveries handed to the senders and not done yet: id -> (destination, owner)
        self.in_flight: dict[int, tuple[str, str]] = {}
        #: when each delivery's last attempt ended (monotonic): a pass whose list of due deliveries was read
        #: before that does not hand it out again (its attempt is recorded; the list is stale for it)
        self.attempted: dict[int, float] = {}
        self.lock = threading.Lock()
        self.watermark: float | None = None
        #: whether there is anything to do for a run (a rule, or OpenLineage): a posted document wakes the
        #: thread only then, so a busy server without rules pays nothing per document
        self.active = bool(self.ol_url)

    # --- life ---------------------------------------------------------------------------------------------

    def notify(self) -> None:
        """A document was stored."""
        if self.active:
            self.wake.set()

    def start(self) -> None:
        self._load_watermark()
        for t in self.senders:
            t.start()
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        self.wake.set()
        for _ in self.senders:
            self.jobs.put(None)
        deadline = time.monotonic() + self.timeout + 1.0
        for t in (self.thread, *self.senders):
            t.join(timeout=max(0.0, deadline - time.monotonic()))

    def _loop(self) -> None:
        while not self.stop_event.is_set():
            try:
                self.scan()
                self.deliver_due()
            except Exception:   # a broken store or a bug must not end the thread: log, try again later
                log.exception("the monitor's background worker failed; it tries again in %s s", self.poll)
            self.wake.wait(timeout=self._sleep())
            self.wake.clear()

    def _sleep(self) -> float:
        """Until the next poll, or sooner when a retry falls due. A delivery due now but not handed out (its
        destination or owner has its share in flight) goes when a sender finishes: that wakes the thread."""
        now = time.time()
        with self.store.engine.connect() as conn:
            due = conn.execute(select(deliveries.c.next_at)
                               .where(deliveries.c.state == "pending", deliveries.c.next_at > now)
                               .order_by(deliveries.c.next_at).limit(1)).scalar()
        return self.poll if due is None else max(0.0, min(self.poll, due - now))

    # --- runs -> alerts and lineage events ----------------------------------------------------------------

    def _load_watermark(self) -> None:
        """``worker_since``: when this store first had a worker (runs updated before it are never handled);
        ``worker_watermark``: the newest ``updated_at`` handled. Set before the app serves, so nothing posted
        after the start can fall before them."""
        with self.store.engine.begin() as conn:
            got = dict(conn.execute(select(settings.c.key, settings.c.value)
                                    .where(settings.c.key.in_([SINCE, WATERMARK]))).all())
            if SINCE not in got:
                got[SINCE] = repr(time.time())
                conn.execute(self.store._insert()(settings).values(key=SINCE, value=got[SINCE])
                             .on_conflict_do_nothing())
        self.since = float(got[SINCE])
        self.watermark = max(self.since, float(got.get(WATERMARK, self.since)))

    def scan(self) -> int:
        """Handles the runs updated since the watermark; returns how many it handled."""
        engine = self.store.engine
        if self.watermark is None:
            self._load_watermark()
        with engine.begin() as conn:
            rules = [dict(r._mapping) for r in conn.execute(select(alert_rules).order_by(alert_rules.c.id))]
            self.active = bool(rules or self.ol_url)
            if not rules and not self.ol_url:   # nothing to do for any run (rules apply to later runs only)
                self.watermark = max(self.watermark, time.time() - SLACK)
                return 0
            q = (select(runs.c.owner, runs.c.run_id, runs.c.status, runs.c.updated_at, runs.c.document,
                        run_checks.c.status.label("checked"))
                 .select_from(runs.outerjoin(run_checks, (run_checks.c.owner == runs.c.owner)
                                             & (run_checks.c.run_id == runs.c.run_id)))
                 .where(runs.c.updated_at > max(self.since, self.watermark - SLACK))
                 .where((run_checks.c.status.is_(None)) | (run_checks.c.status != runs.c.status))
                 .order_by(runs.c.updated_at))
            todo = list(conn.execute(q))
        handled = 0
        for r in todo:
            if self.stop_event.is_set():
                break
            with engine.begin() as conn:
                self._handle(conn, r, rules)
            handled += 1
        if todo:
            newest = max(r.updated_at for r in todo)
            if newest > self.watermark:
                self.watermark = newest
                with engine.begin() as conn:
                    conn.execute(settings.delete().where(settings.c.key == WATERMARK))
                    conn.execute(settings.insert().values(key=WATERMARK, value=repr(newest)))
        return handled

    def _queue(self, conn, kind: str, owner: str, run_id: str, event: str, url: str, payload: str,
               now: float) -> None:
        stmt = self.store._insert()(deliveries).values(
            kind=kind, alert_id=None, owner=owner, run_id=run_id, event=event, url=url, payload=payload,
            state="pending", attempts=0, next_at=now, created_at=now)
        conn.execute(stmt.on_conflict_do_nothing(index_elements=["kind", "owner", "run_id", "event"]))

    def _handle(self, conn, r, rules: list[dict]) -> None:
        now = time.time()
        run = json.loads(r.document)["run"]
        run["owner"] = r.owner
        terminal = r.status in alerting.TERMINAL
        was_terminal = r.checked in alerting.TERMINAL
        if was_terminal:        # a finished run is handled once, whatever arrives later
            return
        if self.ol_url:
            if r.checked is None:
                self._queue(conn, "openlineage", r.owner, r.run_id, "START", self.ol_url,
                            lineage.event(run, "START", self.ol_namespace), now)
            if terminal:
                state = lineage.EVENTS[r.status]
                self._queue(conn, "openlineage", r.owner, r.run_id, state, self.ol_url,
                            lineage.event(run, state, self.ol_namespace), now)
        if terminal:
            live = [x for x in rules if x["created_at"] <= r.updated_at]
            alerting.evaluate(conn, live, r.owner, run, f"{self.public_url}/runs/{r.run_id}", now)
        stmt = self.store._insert()(run_checks).values(owner=r.owner, run_id=r.run_id, status=r.status,
                                                       checked_at=now)
        conn.execute(stmt.on_conflict_do_update(index_elements=["owner", "run_id"],
                                                set_={"status": r.status, "checked_at": now}))

    # --- deliveries ---------------------------------------------------------------------------------------

    def deliver_due(self) -> int:
        """Hands each delivery that is due to the senders for one attempt, as far as the limits in flight
        allow (``per_destination``, ``per_owner``, one per sender); returns how many it handed out."""
        engine = self.store.engine
        # the first few due deliveries of each owner's URL, so that no backlog, however long, of one user
        # or of one endpoint hides anyone else's
        rank = func.row_number().over(partition_by=(deliveries.c.owner, deliveries.c.url),
                                      order_by=deliveries.c.id).label("rank")
        ranked = (select(deliveries, rank).where(deliveries.c.state == "pending", deliveries.c.next_at <= time.time())
                  .subquery())
        read_at = time.monotonic()
        with engine.connect() as conn:
            due = list(conn.execute(select(ranked).where(ranked.c.rank <= PER_URL).order_by(ranked.c.id)))
            pending_ol = {}
            for d in conn.execute(select(deliveries.c.id, deliveries.c.owner, deliveries.c.run_id)
                                  .where(deliveries.c.state == "pending", deliveries.c.kind == "openlineage")
                                  .order_by(deliveries.c.id)):
                pending_ol.setdefault((d.owner, d.run_id), d.id)
        made = 0
        for d in due:
            if self.stop_event.is_set():
                break
            if d.kind == "openlineage" and pending_ol.get((d.owner, d.run_id)) != d.id:
                continue        # an earlier event of this run goes first
            where = destination(d.url)
            with self.lock:
                if len(self.in_flight) >= len(self.senders):
                    break
                if d.id in self.in_flight or self.attempted.get(d.id, -1.0) >= read_at:
                    continue
                busy = list(self.in_flight.values())
                if sum(w == where for w, _ in busy) >= self.per_destination or \
                        sum(o == d.owner for _, o in busy) >= self.per_owner:
                    continue
                self.in_flight[d.id] = (where, d.owner)
            self.jobs.put(d)
            made += 1
        return made

    def _send_loop(self) -> None:
        while True:
            d = self.jobs.get()
            if d is None or self.stop_event.is_set():
                return
            try:
                self._attempt(d)
            except Exception:   # a broken store: the delivery stays pending, tried again later
                log.exception("the monitor failed to record an attempt to deliver %s", d.event)
            finally:
                with self.lock:
                    self.in_flight.pop(d.id, None)
                    now = time.monotonic()
                    self.attempted[d.id] = now
                    if len(self.attempted) > 10_000:    # older than any pass still going on
                        self.attempted = {k: v for k, v in self.attempted.items() if v > now - 600}
                self.wake.set()

    def _attempt(self, d) -> None:
        started = time.monotonic()
        status, error, refused = None, None, False
        headers = {"Content-Type": "application/json", "User-Agent": f"logetl-monitor/{__version__}"}
        try:
            if d.kind == "webhook":   # a URL a user gave: only where the server's policy lets it go
                status = self.webhooks.post(d.url, d.payload.encode(), headers, self.timeout)
                if not 200 <= status < 300:
                    error = f"HTTP {status} {http.client.responses.get(status, '')}".rstrip()
            else:
                req = urllib.request.Request(d.url, data=d.payload.encode(), method="POST", headers=headers)
                with urllib.request.urlopen(req, timeout=self.timeout) as answer:
                    status = answer.status
                    answer.read(65536)
        except WebhookRefused as exc:
            error, refused = str(exc), True
        except urllib.error.HTTPError as exc:
            status = exc.code
            error = f"HTTP {exc.code} {exc.reason}"
        except (OSError, ValueError, http.client.HTTPException) as exc:   # refused, reset, timed out, DNS, a bad URL
            error = str(getattr(exc, "reason", None) or exc) or type(exc).__name__
        ms = (time.monotonic() - started) * 1000
        now = time.time()
        attempt = d.attempts + 1
        if status is not None and 200 <= status < 300:
            state, next_at, error = "delivered", now, None
        elif not refused and (status is None or status in RETRY_STATUSES or status >= 500) \
                and attempt < self.max_attempts:
            state, next_at = "pending", now + self.backoff * 2 ** (attempt - 1)
        else:
            state, next_at = "failed", now
        with self.store.engine.begin() as conn:
            conn.execute(delivery_attempts.insert().values(delivery_id=d.id, attempt=attempt, at=now, status=status,
                                                           error=error, ms=ms))
            conn.execute(deliveries.update().where(deliveries.c.id == d.id)
                         .values(state=state, attempts=attempt, next_at=next_at))


def destination(url: str) -> str:
    """Where a delivery goes, as its share of the senders is counted: scheme, host and port."""
    try:
        parts = urlsplit(url)
        return f"{parts.scheme}://{(parts.hostname or '').lower()}:{parts.port or ''}"
    except ValueError:
        return url


def delivery_log(store, owner: str | None = None, run_id: str | None = None, kind: str | None = None) -> list[dict]:
    """Deliveries of ``owner``'s runs (None: everyone's) with their attempts (the API's and the tests' view
    of what was sent). A delivery's URL is shown to ``owner`` only as ``alerts.url_shown`` says (else None):
    a webhook's to the owner of its rule, an OpenLineage event's (the server's setting) to none."""
    conds = []
    if owner is not None:
        conds.append(deliveries.c.owner == owner)
    if run_id is not None:
        conds.append(deliveries.c.run_id == run_id)
    if kind is not None:
        conds.append(deliveries.c.kind == kind)
    q = (select(deliveries, alert_rules.c.owner.label("rule_owner"))
         .select_from(deliveries.outerjoin(alerts, alerts.c.id == deliveries.c.alert_id)
                      .outerjoin(alert_rules, alert_rules.c.id == alerts.c.rule_id))
         .where(*conds).order_by(deliveries.c.id))
    with store.engine.connect() as conn:
        ds = [dict(r._mapping) for r in conn.execute(q)]
        tries = {}
        if ds:
            for a in conn.execute(select(delivery_attempts).where(
                    delivery_attempts.c.delivery_id.in_([d["id"] for d in ds])).order_by(delivery_attempts.c.id)):
                tries.setdefault(a.delivery_id, []).append({"attempt": a.attempt, "at": a.at, "status": a.status,
                                                             "error": a.error, "ms": round(a.ms, 1)})
    for d in ds:
        shown = alerting.url_shown(owner, d.pop("rule_owner"))
        d["payload"] = json.loads(d["payload"])
        d["tries"] = alerting.shown_tries(tries.get(d["id"], []), d["url"], shown)
        d["url"] = d["url"] if shown else None
    return ds
