"""Sending run documents while a run goes, and the lines a run prints about them when it ends.

- Embedded (default): documents go straight into the SQLite store under ``LOGETL_HOME`` (``~/.logetl``),
  with the standard library's ``sqlite3`` (cheap enough for a 0.3 s run); ``logetl monitor`` serves it.
  The store is a 0600 file. A store that cannot be used (``LOGETL_HOME`` a file, unwritable, a broken
  database) never stops or fails a run: the run is not recorded and says so in one line.
- Remote (``LOGETL_MONITOR_URL``, ``LOGETL_API_KEY``): documents are POSTed by a background thread with
  retries and back-off. Only the newest document of a run matters (they are idempotent), so a backlog
  collapses to one document per run. The run's end waits for delivery at most ``LOGETL_MONITOR_GRACE``
  seconds (1.0), whatever the server does: the sending thread is a daemon and is abandoned, mid-request
  if need be, when the grace is over. What is still undelivered then is kept in ``LOGETL_HOME/outbox``
  (or, if that cannot be written, a new temporary directory, which the line names) and sent by the next
  run, and the run says so in one line. Documents the server refuses for their key (401/403) or its
  address (404/405) are kept the same way and not retried in this run; documents it rejects as
  malformed (400, 413, 415, 422) cannot be delivered by retrying and are dropped, with a line.
  A kept document remembers the fingerprint of the key it was sent with (``key_fingerprint``; never the
  key), and a run sends only the kept documents of its own key: the server makes a document's run belong
  to the key's user, so another key would give the run to someone else. The others stay, counted in a
  line.
- ``LOGETL_MONITOR=off`` sends nothing.
"""
from __future__ import annotations

import getpass
import hashlib
import json
import os
import sys
import tempfile
import threading
import time

from logetl import settings
from logetl.io.fs import LOCAL
from logetl.listener import FlowListener, FlowRun, current_step, progress_of
from logetl.monitor.documents import (FORMAT, MESSAGING_VERSION, graph, lineage_changes, lineage_of, row_of,
                                     run_document)

DEFAULT_UI = settings.MONITOR_UI.default
LIVE_AFTER = 1.0   # seconds: step updates of a run are sent once it has been running this long
PROGRESS_EVERY = 2.0   # seconds: while a run goes, its progress is sent at most this often
REFUSED = (401, 403, 404, 405)   # the server will not take documents from us: keep them, stop for this run
RETRY = (408, 429)               # and 5xx: try again after a back-off


#: the outbox file's field naming the key its document was sent with (removed before it is sent again)
OUTBOX_KEY = "outbox_key"


def key_fingerprint(key: str | None) -> str:
    """Which key a kept document was meant for, without the key: a SHA-256 of it under a label of its own
    (so it is not the hash a monitor's store keeps of the key), 16 hex digits; "none" without a key."""
    if not key:
        return "none"
    return hashlib.sha256(b"logetl outbox key\0" + key.encode()).hexdigest()[:16]


def home() -> str:
    """``LOGETL_HOME``, absolute (``logetl.settings``)."""
    return settings.HOME.read()


def log_line(logger: str, message: str) -> str:
    return f"{time.strftime('%y/%m/%d %H:%M:%S')} INFO {logger}: {message}"


def _reason(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


class EmbeddedSink:
    """Upserts documents into the local store's ``runs`` table (the newest ``seq`` of an owner's run wins)."""

    def __init__(self, directory: str):
        self.directory = directory
        self.path = os.path.join(directory, "monitor.db")
        self.conn = None

    def _connect(self):
        if self.conn is None:
            import sqlite3

            from logetl.monitor.layout import SCHEMA_VERSION, private_file

            os.makedirs(self.directory, mode=0o700, exist_ok=True)
            private_file(self.path)
            # used from the thread that drives the run and, while it waits in a Spark action, from the
            # thread that reports the step's progress (never both at once: listener.FlowListener)
            conn = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                    from logetl.monitor.store import Store   # first run here, or an older layout: make it

                    Store(f"sqlite:///{self.path}").engine.dispose()
            except BaseException:
                conn.close()
                raise
            self.conn = conn
        return self.conn

    def send(self, doc: dict) -> None:
        row = row_of(doc)
        cols = list(row)
        sql = (f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)}) "
               f"ON CONFLICT(owner, run_id) DO UPDATE SET "
               + ", ".join(f"{c}=excluded.{c}" for c in cols if c not in ("run_id", "owner"))
               + " WHERE runs.seq < excluded.seq")
        conn = self._connect()
        with conn:
            stored = conn.execute(sql, [row[c] for c in cols]).rowcount
            if stored and lineage_changes(doc):       # its lineage rows follow it
                conn.execute("DELETE FROM run_lineage WHERE owner = ? AND run_id = ?", (row["owner"], row["run_id"]))
                conn.executemany("INSERT INTO run_lineage (owner, run_id, role, value) VALUES (?, ?, ?, ?)",
                                 [(row["owner"], x["run_id"], x["role"], x["value"]) for x in lineage_of(doc)])

    def close(self, grace: float) -> int:
        if self.conn is not None:
            self.conn.close()
        return 0


class RemoteSink:
    """POSTs documents to a monitor server from a background (daemon) thread."""

    def __init__(self, url: str, key: str | None, outbox: str, timeout: float = 5.0):
        self.url = url.rstrip("/") + "/api/documents"
        self.key = key
        self.outbox = outbox
        self.timeout = timeout
        self.latest: dict[str, dict] = {}     # run id -> newest undelivered document
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.stop = threading.Event()
        self.idle = threading.Event()         # set when nothing is left to send, or sending is given up
        self.delivered = 0
        self.closed = False
        self.refused: tuple[int, str] | None = None    # (status, the server's message): kept, not retried
        self.rejected: tuple[int, str] | None = None   # malformed for the server: dropped
        self.kept_in: str | None = None       # where undelivered documents were written at close
        self.keep_error: str | None = None    # why they are not in the outbox, if they are not
        self.fingerprint = key_fingerprint(key)
        self.foreign = 0                      # kept documents of another key (or of none), left in the outbox
        self.thread = threading.Thread(target=self._loop, name="logetl-monitor", daemon=True)
        self.idle.set()
        for doc in self._spooled():
            self._put(doc)
        self.thread.start()

    def _spooled(self):
        docs = []
        try:
            names = sorted(os.listdir(self.outbox)) if os.path.isdir(self.outbox) else []
        except OSError:
            return docs
        for name in names:
            if name.endswith(".json"):
                try:
                    with open(os.path.join(self.outbox, name)) as f:
                        doc = json.load(f)
                    doc["run"]["run_id"], doc["seq"]   # noqa: B018 - the shape _put needs
                    # a document kept by an earlier version has no fingerprint: whose it is is unknown, so it
                    # is left like another key's
                    if doc.pop(OUTBOX_KEY, None) != self.fingerprint:
                        self.foreign += 1
                        continue
                    docs.append(doc)
                except (OSError, ValueError, KeyError, TypeError, AttributeError):
                    pass
        return docs

    def _put(self, doc: dict) -> None:
        rid = doc["run"]["run_id"]
        with self.lock:
            old = self.latest.get(rid)
            if old is None or old["seq"] < doc["seq"]:
                self.latest[rid] = doc
            if self.refused is None:          # once refused, nothing more is sent in this run
                self.idle.clear()
        self.wake.set()

    def send(self, doc: dict) -> None:
        self._put(doc)

    def _post(self, doc: dict) -> str:
        """One POST: "ok", "retry", "refused" (kept, stop sending) or "rejected" (dropped)."""
        import urllib.error
        import urllib.request   # only a remote monitor needs HTTP (and its import is not free)

        req = urllib.request.Request(self.url, data=json.dumps(doc).encode(), method="POST",
                                     headers={"Content-Type": "application/json",
                                              **({"Authorization": f"Bearer {self.key}"} if self.key else {})})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return "ok" if 200 <= r.status < 300 else "retry"
        except urllib.error.HTTPError as exc:
            code = exc.code
            if code in RETRY or code >= 500 or code < 400:
                return "retry"
            try:
                message = json.loads(exc.read(65536))["error"]["message"]
            except Exception:
                message = exc.reason or "refused"
            if code in REFUSED:
                self.refused = (code, str(message))
                return "refused"
            self.rejected = (code, str(message))
            return "rejected"
        except (OSError, ValueError):
            return "retry"

    def _loop(self) -> None:
        backoff = 0.1
        while not self.stop.is_set():
            self.wake.wait(timeout=1.0)
            self.wake.clear()
            while not self.stop.is_set():
                with self.lock:
                    if not self.latest:
                        self.idle.set()
                        break
                    rid, doc = next(iter(self.latest.items()))
                outcome = self._post(doc)
                if outcome == "refused":     # every other document would get the same answer
                    self.idle.set()
                    return
                if outcome in ("ok", "rejected"):
                    backoff = 0.1
                    with self.lock:
                        if self.latest.get(rid) is doc:
                            del self.latest[rid]
                        closed = self.closed
                    if outcome == "ok":
                        self.delivered += 1
                    if not closed:           # after close, the outbox file is the close's to keep
                        self._unspool(rid)
                elif self.stop.wait(backoff):
                    return
                else:
                    backoff = min(backoff * 2, 5.0)

    def _unspool(self, rid: str) -> None:
        try:
            os.remove(os.path.join(self.outbox, f"{rid}.json"))
        except OSError:
            pass

    def close(self, grace: float) -> int:
        """Waits at most ``grace`` seconds in all (for delivery, then for the thread, which is abandoned if
        it is still inside a request); keeps what is undelivered in the outbox. Returns how many runs'
        documents are undelivered."""
        deadline = time.monotonic() + grace
        self.idle.wait(timeout=max(0.0, deadline - time.monotonic()))
        self.stop.set()
        self.wake.set()
        self.thread.join(timeout=max(0.0, deadline - time.monotonic()))
        with self.lock:
            self.closed = True
            left = dict(self.latest)
        if left:
            self.kept_in = self._keep(left)
        return len(left)

    def _keep(self, docs: dict[str, dict]) -> str | None:
        """Writes documents to the outbox, else to a new temporary directory; returns where (None: nowhere)."""
        for directory in (self.outbox, None):
            try:
                if directory is None:
                    directory = tempfile.mkdtemp(prefix="logetl-outbox-")
                else:
                    os.makedirs(directory, mode=0o700, exist_ok=True)
                for rid, doc in docs.items():
                    # (whole or not at all, its temporary removed if a stop comes before the rename)
                    LOCAL.write_text_atomic(os.path.join(directory, f"{rid}.json"),
                                            json.dumps({**doc, OUTBOX_KEY: self.fingerprint}))
                return directory
            except OSError as exc:
                if self.keep_error is None:
                    self.keep_error = f"cannot write {self.outbox}: {_reason(exc)}"
        return None


class MonitorListener(FlowListener):
    """Turns a run's progress into documents for a sink, and prints the monitor's lines at the end.

    Nothing the monitor does fails or stops a run: a sink that fails is given up for the run, and one line
    at its end says the run is not recorded and why. A bad ``LOGETL_MONITOR_GRACE`` is a usage error,
    raised here, before any work."""

    def __init__(self, flow, *, application: str | None = None, owner: str | None = None,
                 tags: dict | None = None, stream=None, quiet: bool = False, inputs: list[str] | None = None,
                 outputs: dict[str, str] | None = None):
        self.grace = settings.MONITOR_GRACE.read()
        self.inputs, self.outputs = inputs, outputs
        self.flow = flow
        self.graph = graph(flow)
        self.application = application or f"logetl-{flow.name}"
        self.owner = owner or settings.OWNER.read() or _user()
        self.tags = dict(tags or {})
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.seq = 0
        self.where: dict | None = None       # where the current step is (listener.progress_of)
        self.progress_sent = 0.0             # time.monotonic() of the last document sent for progress
        self.failure: str | None = None      # why the sink was given up
        remote = settings.MONITOR_URL.read()
        self.ui = (remote or settings.MONITOR_UI.read()).rstrip("/")
        self.remote = bool(remote)
        if remote:
            self.sink = RemoteSink(remote, settings.API_KEY.read(), os.path.join(home(), "outbox"))
        else:
            self.sink = EmbeddedSink(home())

    def _send(self, run: FlowRun, always: bool = True) -> None:
        # Live updates matter for long runs; a run's first second sends only what the view needs
        # (its start, then its end), which keeps short runs cheap.
        if self.failure is not None:
            return
        if not always and run.started_at is not None and time.time() - run.started_at < LIVE_AFTER:
            return
        self.seq += 1
        doc = run_document(run, self.flow, application=self.application, owner=self.owner, tags=self.tags,
                           seq=self.seq, flow_graph=self.graph, inputs=self.inputs, outputs=self.outputs,
                           progress=self.where)
        try:
            self.sink.send(doc)
        except Exception as exc:  # the monitor never fails a run: give the sink up, say so at the end
            where = getattr(self.sink, "path", self.ui)
            self.failure = f"cannot use {where} ({_reason(exc)})"

    def step_started(self, run, step):
        self.where = progress_of(run, step, 0, None, "records")
        self._send(run, always=self.seq == 0)

    def progress(self, run, done_bytes, total_bytes):
        self.step_progress(run, current_step(run), done_bytes, total_bytes, "bytes")

    def step_progress(self, run, step, done, total, unit):
        # a document per PROGRESS_EVERY seconds at most, and none in a run's first LIVE_AFTER seconds
        self.where = progress_of(run, step, done, total, unit)
        now = time.monotonic()
        if now - self.progress_sent >= PROGRESS_EVERY:
            before = self.seq
            self._send(run, always=False)
            if self.seq != before:
                self.progress_sent = now

    def step_finished(self, run, step):
        self._send(run, always=False)

    def flow_finished(self, run):
        self._send(run)
        try:
            undelivered = self.sink.close(self.grace)
        except Exception as exc:
            undelivered = 0
            self.failure = self.failure or f"cannot use {getattr(self.sink, 'path', self.ui)} ({_reason(exc)})"
        sink = self.sink
        refused = getattr(sink, "refused", None) if undelivered else None
        self._say("shutdown hook finished.", logger="logetl.stats")
        if self.failure is None and refused is None:
            self._say(f"{self.ui}/runs/{run.run_id}")
        self._say(f"messaging version {MESSAGING_VERSION}:{FORMAT}")
        if self.failure is not None:
            self._say(f"this run is not recorded in the monitor: {self.failure}", force=True)
            return
        rejected = getattr(sink, "rejected", None)
        if rejected is not None:
            self._say(f"a run document was rejected by {self.ui} ({rejected[0]}: {rejected[1]}); "
                      "it cannot be delivered and is not kept", force=True)
        if undelivered:
            self._say_undelivered(sink, undelivered, refused)
        if getattr(sink, "foreign", 0):
            self._say(f"{sink.foreign} run document(s) in {sink.outbox} were kept for a different LOGETL_API_KEY "
                      "(or for none) and are left for a run with that key", force=True)

    def _say_undelivered(self, sink, undelivered: int, refused: tuple[int, str] | None) -> None:
        kept = (f"kept in {sink.kept_in} and sent by the next run with the same LOGETL_API_KEY"
                if sink.kept_in == sink.outbox else
                f"kept in {sink.kept_in} ({sink.keep_error}): move them to {sink.outbox} to have them sent"
                if sink.kept_in else f"not kept ({sink.keep_error})")
        if refused is not None:
            code, message = refused
            hint = ""
            if code in (401, 403):
                hint = ("; LOGETL_API_KEY is not set" if not sink.key else
                        "; LOGETL_API_KEY is wrong or revoked")
            elif code in (404, 405):
                hint = "; is LOGETL_MONITOR_URL a logetl monitor?"
            self._say(f"{undelivered} run document(s) refused by {self.ui} ({code}: {message}{hint}); {kept}",
                      force=True)
        else:
            self._say(f"{undelivered} run document(s) undelivered to {self.ui}; {kept}", force=True)

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
