"""Sending run documents while a run goes, and the lines a run prints about them when it ends.

- Embedded (default): documents go straight into the SQLite store under ``LOGETL_HOME`` (``~/.logetl``),
  with the standard library's ``sqlite3`` (cheap enough for a 0.3 s run); ``logetl monitor`` serves it.
- Remote (``LOGETL_MONITOR_URL``, ``LOGETL_API_KEY``): documents are POSTed by a background thread with
  retries and back-off. Only the newest document of a run matters (they are idempotent), so a backlog
  collapses to one document per run. The run never waits for a slow or absent monitor beyond a short grace
  at its end; what is still undelivered is kept in ``LOGETL_HOME/outbox`` and sent by the next run, and the
  run says so.
- ``LOGETL_MONITOR=off`` sends nothing.
"""
from __future__ import annotations

import getpass
import json
import os
import sys
import threading
import time

from logetl.listener import FlowListener, FlowRun
from logetl.monitor.documents import FORMAT, MESSAGING_VERSION, graph, row_of, run_document

DEFAULT_UI = "http://127.0.0.1:8080"
LIVE_AFTER = 1.0   # seconds: step updates of a run are sent once it has been running this long


def home() -> str:
    return os.path.abspath(os.path.expanduser(os.environ.get("LOGETL_HOME", "~/.logetl")))


def log_line(logger: str, message: str) -> str:
    return f"{time.strftime('%y/%m/%d %H:%M:%S')} INFO {logger}: {message}"


class EmbeddedSink:
    """Upserts documents into the local store's ``runs`` table (the newest ``seq`` wins)."""

    def __init__(self, directory: str):
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, "monitor.db")
        self.conn = None

    def _connect(self):
        if self.conn is None:
            import sqlite3

            conn = sqlite3.connect(self.path, timeout=30)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            if conn.execute("SELECT 1 FROM sqlite_master WHERE name='runs'").fetchone() is None:
                from logetl.monitor.store import Store   # first run on this machine: make the schema

                Store(f"sqlite:///{self.path}").engine.dispose()
            self.conn = conn
        return self.conn

    def send(self, doc: dict) -> None:
        row = row_of(doc)
        cols = list(row)
        sql = (f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)}) "
               f"ON CONFLICT(run_id) DO UPDATE SET "
               + ", ".join(f"{c}=excluded.{c}" for c in cols if c != "run_id")
               + " WHERE runs.seq < excluded.seq")
        conn = self._connect()
        with conn:
            conn.execute(sql, [row[c] for c in cols])

    def close(self, grace: float) -> int:
        if self.conn is not None:
            self.conn.close()
        return 0


class RemoteSink:
    """POSTs documents to a monitor server from a background thread."""

    def __init__(self, url: str, key: str | None, outbox: str, timeout: float = 5.0):
        self.url = url.rstrip("/") + "/api/documents"
        self.key = key
        self.outbox = outbox
        self.timeout = timeout
        self.latest: dict[str, dict] = {}     # run id -> newest undelivered document
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.stop = threading.Event()
        self.delivered = 0
        self.thread = threading.Thread(target=self._loop, name="logetl-monitor", daemon=True)
        for doc in self._spooled():
            self._put(doc)
        self.thread.start()

    def _spooled(self):
        if not os.path.isdir(self.outbox):
            return []
        docs = []
        for name in sorted(os.listdir(self.outbox)):
            if name.endswith(".json"):
                try:
                    with open(os.path.join(self.outbox, name)) as f:
                        docs.append(json.load(f))
                except (OSError, ValueError):
                    pass
        return docs

    def _put(self, doc: dict) -> None:
        rid = doc["run"]["run_id"]
        with self.lock:
            old = self.latest.get(rid)
            if old is None or old["seq"] < doc["seq"]:
                self.latest[rid] = doc
        self.wake.set()

    def send(self, doc: dict) -> None:
        self._put(doc)

    def _post(self, doc: dict) -> bool:
        import urllib.error
        import urllib.request   # only a remote monitor needs HTTP (and its import is not free)

        req = urllib.request.Request(self.url, data=json.dumps(doc).encode(), method="POST",
                                     headers={"Content-Type": "application/json",
                                              **({"Authorization": f"Bearer {self.key}"} if self.key else {})})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return 200 <= r.status < 300
        except urllib.error.HTTPError as exc:
            return 400 <= exc.code < 500 and exc.code not in (408, 429)  # refused for good: do not retry
        except (OSError, ValueError):
            return False

    def _loop(self) -> None:
        backoff = 0.1
        while not self.stop.is_set():
            self.wake.wait(timeout=1.0)
            self.wake.clear()
            while True:
                with self.lock:
                    if not self.latest:
                        break
                    rid, doc = next(iter(self.latest.items()))
                if self._post(doc):
                    backoff = 0.1
                    with self.lock:
                        if self.latest.get(rid) is doc:
                            del self.latest[rid]
                    self.delivered += 1
                    self._unspool(rid)
                else:
                    if self.stop.wait(backoff):
                        return
                    backoff = min(backoff * 2, 5.0)

    def _unspool(self, rid: str) -> None:
        try:
            os.remove(os.path.join(self.outbox, f"{rid}.json"))
        except FileNotFoundError:
            pass

    def close(self, grace: float) -> int:
        """Waits up to ``grace`` seconds for delivery; keeps the rest in the outbox. Returns how many runs'
        documents are undelivered."""
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            with self.lock:
                if not self.latest:
                    break
            time.sleep(0.02)
        self.stop.set()
        self.wake.set()
        self.thread.join(timeout=self.timeout + 1)
        with self.lock:
            left = dict(self.latest)
        if left:
            os.makedirs(self.outbox, exist_ok=True)
            for rid, doc in left.items():
                tmp = os.path.join(self.outbox, f"{rid}.json.tmp")
                with open(tmp, "w") as f:
                    json.dump(doc, f)
                os.replace(tmp, os.path.join(self.outbox, f"{rid}.json"))
        return len(left)


class MonitorListener(FlowListener):
    """Turns a run's progress into documents for a sink, and prints the monitor's lines at the end."""

    def __init__(self, flow, *, application: str | None = None, owner: str | None = None,
                 tags: dict | None = None, stream=None, quiet: bool = False):
        self.flow = flow
        self.graph = graph(flow)
        self.application = application or f"logetl-{flow.name}"
        self.owner = owner or os.environ.get("LOGETL_OWNER") or _user()
        self.tags = dict(tags or {})
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.seq = 0
        remote = os.environ.get("LOGETL_MONITOR_URL")
        self.ui = (remote or os.environ.get("LOGETL_MONITOR_UI") or DEFAULT_UI).rstrip("/")
        if remote:
            self.sink = RemoteSink(remote, os.environ.get("LOGETL_API_KEY"), os.path.join(home(), "outbox"))
        else:
            self.sink = EmbeddedSink(home())
        self.grace = float(os.environ.get("LOGETL_MONITOR_GRACE", "1.0"))

    def _send(self, run: FlowRun, always: bool = True) -> None:
        # Live updates matter for long runs; a run's first second sends only what the view needs
        # (its start, then its end), which keeps short runs cheap.
        if not always and run.started_at is not None and time.time() - run.started_at < LIVE_AFTER:
            return
        self.seq += 1
        doc = run_document(run, self.flow, application=self.application, owner=self.owner, tags=self.tags,
                           seq=self.seq, flow_graph=self.graph)
        try:
            self.sink.send(doc)
        except Exception as exc:  # the monitor never fails a run
            self._say(f"monitor: could not record the run document ({exc})", logger="logetl.monitor", force=True)

    def step_started(self, run, step):
        self._send(run, always=self.seq == 0)

    def step_finished(self, run, step):
        self._send(run, always=False)

    def flow_finished(self, run):
        self._send(run)
        undelivered = self.sink.close(self.grace)
        self._say("shutdown hook finished.", logger="logetl.stats")
        self._say(f"{self.ui}/runs/{run.run_id}")
        self._say(f"messaging version {MESSAGING_VERSION}:{FORMAT}")
        if undelivered:
            self._say(f"{undelivered} run document(s) undelivered to {self.ui}; kept in "
                      f"{os.path.join(home(), 'outbox')} and sent by the next run", force=True)

    def _say(self, message: str, logger: str = "logetl.monitor", force: bool = False) -> None:
        if self.quiet and not force:
            return
        self.stream.write(log_line(logger, message) + "\n")
        self.stream.flush()


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "unknown"
