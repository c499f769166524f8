"""Load on the monitor, on loopback only, bounded in time and count.

    python bench/monitor_load.py [--seconds 30] [--runs 20] [--stored 100000] [--db URL]

Starts a real ``logetl monitor`` server (its own process), then:
1. ``--runs`` concurrent runs post documents as fast as they can for ``--seconds`` (each a new ``seq`` of
   its run, a new run every 40 documents), and every document must be acknowledged and the store must
   end with each run's last document: nothing lost.
2. With ``--stored`` runs in the store, the latency of ``GET /api/runs`` over a mix of the queries the
   all-applications page makes (first and deep pages, status and application filters, date ranges,
   other sort orders): p50 and p95.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(db: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "logetl", "monitor", "--port", str(port), "--db", db],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/api/health")
            if c.getresponse().status == 200:
                return proc, port
        except OSError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise RuntimeError("the monitor server did not start")
        time.sleep(0.1)


def document(run_id: str, seq: int, status: str) -> bytes:
    from logetl import programs
    from logetl.listener import FlowRun, StepRun
    from logetl.monitor.documents import run_document

    flow = programs.get("join")
    now = time.time()
    run = FlowRun(program="join", engine="local", run_id=run_id, status=status, started_at=now - 1,
                  finished_at=now if status != "RUNNING" else None)
    run.steps = [StepRun(s.name, s.index, [n.name for n in s.nodes], status="SUCCESSFUL") for s in flow.steps]
    return json.dumps(run_document(run, flow, application=f"load-{run_id[:4]}", owner="load", tags={}, seq=seq)).encode()


def run_load(port: int, seconds: float, runs: int) -> dict:
    """``runs`` threads post documents for ``seconds``; returns counts, rate, and the last seq per run."""
    stop = time.monotonic() + seconds
    sent = [0] * runs
    failed = [0] * runs
    last: dict[str, int] = {}
    lock = threading.Lock()
    latencies: list[float] = []

    def worker(w: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        n_run, seq = 0, 0
        run_id = f"{w:08X}{n_run:08X}".ljust(32, "0")
        local_lat = []
        while time.monotonic() < stop:
            seq += 1
            status = "RUNNING" if seq % 40 else "SUCCESSFUL"
            body = document(run_id, seq, status)
            t0 = time.perf_counter()
            try:
                conn.request("POST", "/api/documents", body=body, headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                r.read()
                ok = r.status == 202
            except OSError:
                ok = False
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            local_lat.append(time.perf_counter() - t0)
            sent[w] += 1
            if not ok:
                failed[w] += 1
            with lock:
                last[run_id] = seq
            if seq % 40 == 0:
                n_run += 1
                seq = 0
                run_id = f"{w:08X}{n_run:08X}".ljust(32, "0")
        with lock:
            latencies.extend(local_lat)
        conn.close()

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(runs)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.monotonic() - t0
    latencies.sort()
    return {"sent": sum(sent), "failed": sum(failed), "seconds": round(took, 2), "runs": len(last),
            "docs_per_s": round(sum(sent) / took, 1), "post_p95_ms": round(1000 * latencies[int(0.95 * len(latencies))], 1),
            "last": last}


def check_stored(port: int, last: dict[str, int]) -> int:
    """How many runs' last documents are missing from the store (0: nothing lost)."""
    missing = 0
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for run_id, seq in last.items():
        conn.request("GET", f"/api/runs/{run_id}")
        r = conn.getresponse()
        body = json.loads(r.read())
        if r.status != 200 or body["run"]["seq"] != seq:
            missing += 1
    return missing


def fill(db: str, n: int) -> None:
    from logetl.monitor.store import Store

    store = Store(db)
    base = time.time() - n * 60
    apps = [f"app-{i:02d}" for i in range(25)]
    statuses = ["SUCCESSFUL"] * 7 + ["FAILED", "RUNNING", "STOPPED"]
    batch = []
    for i in range(n):
        started = base + i * 60
        batch.append({"run_id": f"F{i:031X}", "owner": "load", "application": apps[i % 25], "program": "join",
                      "engine": "local", "status": statuses[i % 10], "started_at": started,
                      "finished_at": started + (i % 97), "duration": float(i % 97), "records_read": i * 10,
                      "records_written": i, "seq": 1, "tags": "{}", "document": "{}", "updated_at": started})
        if len(batch) == 5000:
            store.ingest_many(batch)
            batch = []
    if batch:
        store.ingest_many(batch)
    store.engine.dispose()


QUERIES = [
    "/api/runs", "/api/runs?page=2", "/api/runs?page=1000&per_page=50", "/api/runs?page=1990&per_page=50",
    "/api/runs?status=FAILED", "/api/runs?status=FAILED&status=RUNNING&page=20",
    "/api/runs?application=app-07", "/api/runs?application=app-07&page=50",
    "/api/runs?sort=duration&order=desc", "/api/runs?sort=application&order=asc&page=300",
    "/api/runs?sort=records_written&order=asc", "/api/runs?since={since}&until={until}",
    "/api/runs?status=SUCCESSFUL&since={since}", "/api/runs?per_page=200",
]


def latency(port: int, rounds: int = 20) -> dict:
    now = time.time()
    since, until = int(now - 30 * 86400), int(now - 20 * 86400)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    times = []
    for _ in range(rounds):
        for q in QUERIES:
            t0 = time.perf_counter()
            conn.request("GET", q.format(since=since, until=until))
            r = conn.getresponse()
            r.read()
            assert r.status == 200, q
            times.append(time.perf_counter() - t0)
    times.sort()
    return {"requests": len(times), "p50_ms": round(1000 * statistics.median(times), 1),
            "p95_ms": round(1000 * times[int(0.95 * len(times))], 1), "max_ms": round(1000 * times[-1], 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--stored", type=int, default=100_000)
    ap.add_argument("--db", default=None)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="logetl-load-")
    db = args.db or f"sqlite:///{tmp}/load.db"
    proc, port = start_server(db)
    try:
        load = run_load(port, args.seconds, args.runs)
        load["missing"] = check_stored(port, load.pop("last"))
        print(f"posting: {load}")
        fill(db, args.stored)
        print(f"GET /api/runs with {args.stored + load['runs']:,} runs stored: {latency(port)}")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
