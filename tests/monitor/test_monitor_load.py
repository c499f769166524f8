"""Load on the monitor (bounded, loopback only): 20 concurrent runs post documents to one server for
30 s and lose none; then GET /api/runs latency with 100,000 runs stored. Reports the figures."""
from __future__ import annotations

import os
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "bench"))

import monitor_load  # noqa: E402

#: 30 s of load per store, then 100,000 runs stored
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_twenty_concurrent_runs_lose_no_document(tmp_path, backend, request, capsys):
    if backend == "sqlite":
        db = f"sqlite:///{tmp_path}/load.db"
        seconds = 30
    else:
        db = request.getfixturevalue("postgres_url")
        from logetl.monitor.store import Store, metadata

        s = Store(db)
        with s.engine.begin() as conn:
            for table in reversed(metadata.sorted_tables):
                conn.execute(table.delete())
        s.engine.dispose()
        seconds = 10
    proc, port = monitor_load.start_server(db)
    try:
        load = monitor_load.run_load(port, seconds=seconds, runs=20)
        missing = monitor_load.check_stored(port, load.pop("last"))
        assert load["failed"] == 0, load
        assert missing == 0, f"{missing} runs lost their last document"
        assert load["sent"] > 20 and load["runs"] >= 20
        monitor_load.fill(db, 100_000)
        lat = monitor_load.latency(port, rounds=10)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    with capsys.disabled():
        print(f"\n[monitor load, {backend}] {load['sent']:,} documents from 20 runs in {load['seconds']} s: "
              f"{load['docs_per_s']:,} documents/s, POST p95 {load['post_p95_ms']} ms, none lost; "
              f"GET /api/runs with 100,000+ runs stored: p50 {lat['p50_ms']} ms, p95 {lat['p95_ms']} ms "
              f"over {lat['requests']} requests")
