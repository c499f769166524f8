"""Runs and the monitor: documents recorded by real runs (embedded store, or a real server on loopback),
the console lines, a monitor that is down or slow, and the `logetl monitor` command."""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time

import pytest
import uvicorn

from conftest import CORPUS, free_port, logetl
from logetl.job import run_program
from logetl.monitor.app import create_app
from logetl.monitor.store import Store

CORPUS_LOG = os.path.join(CORPUS, "corpus.log")
LINE = r"\d\d/\d\d/\d\d \d\d:\d\d:\d\d INFO "


class Server:
    """A real uvicorn server on 127.0.0.1 in a thread, over a store."""

    def __init__(self, store: Store, **kw):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(create_app(store, **kw), host="127.0.0.1", port=self.port, log_level="error")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(timeout=10)


def test_embedded_run_records_its_documents_and_prints_the_lines(tmp_path):
    home = tmp_path / "home"
    p = logetl("join", CORPUS_LOG, str(tmp_path / "out"), "--tag", "team=web", "--app-name", "nightly",
               env={"LOGETL_HOME": str(home)})
    assert p.returncode == 0, p.stderr
    lines = p.stderr.decode().splitlines()
    m = re.fullmatch(LINE + r"logetl\.monitor: http://127\.0\.0\.1:8080/runs/([0-9A-F]{32})", lines[-2])
    assert m, lines[-3:]
    assert re.fullmatch(LINE + r"logetl\.stats: shutdown hook finished\.", lines[-3])
    assert re.fullmatch(LINE + r"logetl\.monitor: messaging version 1\.0-eap-57:JSON", lines[-1])
    run_id = m.group(1)
    run = Store(f"sqlite:///{home}/monitor.db").get_run(run_id)
    assert run["status"] == "SUCCESSFUL" and run["application"] == "nightly" and run["tags"] == {"team": "web"}
    assert run["program"] == "join" and run["engine"] == "local" and run["records_written"] == 18
    assert [(s["name"], s["status"]) for s in run["steps"]] == [("parse", "SUCCESSFUL"), ("join", "SUCCESSFUL")]
    assert run["steps"][1]["counters"]["sink"] == {"in": 18, "out": 18}
    assert run["seq"] >= 2       # at least its start and its end


def test_a_failed_run_is_recorded_with_its_error(tmp_path):
    home = tmp_path / "home"
    p = logetl("join", CORPUS_LOG, str(tmp_path / "out"), env={"LOGETL_HOME": str(home), "LOGETL_FAIL_AT": "join"})
    assert p.returncode == 1
    run_id = re.search(r"/runs/([0-9A-F]{32})", p.stderr.decode()).group(1)
    run = Store(f"sqlite:///{home}/monitor.db").get_run(run_id)
    assert run["status"] == "FAILED" and "injected failure at step 'join'" in run["error"]
    assert [(s["name"], s["status"]) for s in run["steps"]] == [("parse", "SUCCESSFUL"), ("join", "FAILED")]


def test_restarted_run_shows_the_skipped_step(tmp_path):
    home = tmp_path / "home"
    env = {"LOGETL_HOME": str(home)}
    logetl("join", CORPUS_LOG, str(tmp_path / "out"), env={**env, "LOGETL_FAIL_AT": "join"})
    p = logetl("join", CORPUS_LOG, str(tmp_path / "out"), env=env)
    run_id = re.search(r"/runs/([0-9A-F]{32})", p.stderr.decode()).group(1)
    run = Store(f"sqlite:///{home}/monitor.db").get_run(run_id)
    assert [(s["name"], s["status"]) for s in run["steps"]] == [("parse", "SKIPPED"), ("join", "SUCCESSFUL")]
    assert run["restarted_after"] == "checkpoint" and run["steps"][0]["lines_read"] == 47


def test_remote_monitor_receives_documents_with_the_keys_owner(tmp_path, store):
    key = store.create_key("alice")
    with Server(store) as srv:
        p = logetl("filter", "--input", CORPUS_LOG, "--output", str(tmp_path / "out"),
                   env={"LOGETL_MONITOR_URL": srv.url, "LOGETL_API_KEY": key, "LOGETL_HOME": str(tmp_path / "h")})
        assert p.returncode == 0, p.stderr
        err = p.stderr.decode()
        run_id = re.search(re.escape(srv.url) + r"/runs/([0-9A-F]{32})$", err, re.M).group(1)
        assert "undelivered" not in err
    run = store.get_run(run_id)
    assert run["owner"] == "alice" and run["status"] == "SUCCESSFUL" and run["records_written"] == 10


@pytest.mark.timing
def test_a_monitor_that_is_down_never_fails_or_slows_the_run_and_gets_the_documents_later(tmp_path, store):
    port = free_port()           # nothing listens here yet
    env = {"LOGETL_MONITOR_URL": f"http://127.0.0.1:{port}", "LOGETL_HOME": str(tmp_path / "h")}
    start = time.monotonic()
    p = logetl("filter", "--input", CORPUS_LOG, "--output", str(tmp_path / "a"), env=env)
    took = time.monotonic() - start
    assert p.returncode == 0, p.stderr
    assert took < 6, f"a run took {took:.1f} s with the monitor down"
    err = p.stderr.decode()
    first = re.search(r"/runs/([0-9A-F]{32})$", err, re.M).group(1)
    assert "1 run document(s) undelivered" in err and "outbox" in err
    assert os.listdir(tmp_path / "h" / "outbox") == [f"{first}.json"]
    # the monitor comes up; the next run delivers its own documents and the kept ones
    srv = Server(store)
    srv.port, srv.url = port, f"http://127.0.0.1:{port}"
    srv.server.config.port = port
    with srv:
        p = logetl("filter", "--input", CORPUS_LOG, "--output", str(tmp_path / "b"), env=env)
        assert p.returncode == 0 and "undelivered" not in p.stderr.decode()
    assert store.get_run(first)["status"] == "SUCCESSFUL"
    assert os.listdir(tmp_path / "h" / "outbox") == []
    assert store.list_runs()[1] == 2


@pytest.mark.timing
def test_a_slow_monitor_does_not_slow_the_run(tmp_path):
    """A server that accepts connections and never answers: the run still ends at once."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(50)
    port = listener.getsockname()[1]
    try:
        env = {"LOGETL_MONITOR_URL": f"http://127.0.0.1:{port}", "LOGETL_HOME": str(tmp_path / "h")}
        start = time.monotonic()
        p = logetl("filter", "--input", CORPUS_LOG, "--output", str(tmp_path / "a"), env=env)
        took = time.monotonic() - start
        assert p.returncode == 0
        assert took < 10, f"{took:.1f} s"
        assert "undelivered" in p.stderr.decode()
    finally:
        listener.close()


def test_monitor_off_sends_nothing(tmp_path):
    home = tmp_path / "home"
    p = logetl("filter", "--input", CORPUS_LOG, "--output", str(tmp_path / "o"),
               env={"LOGETL_HOME": str(home), "LOGETL_MONITOR": "off"})
    assert p.returncode == 0 and b"logetl.monitor" not in p.stderr
    assert not (home / "monitor.db").exists()


def test_spark_runs_are_recorded_too(tmp_path, spark_session, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("LOGETL_HOME", str(home))
    result = run_program("join", CORPUS_LOG, {"output": str(tmp_path / "out")}, engine="spark")
    run = Store(f"sqlite:///{home}/monitor.db").get_run(result.run_id)
    assert run["engine"] == "spark" and run["status"] == "SUCCESSFUL"
    assert run["steps"][1]["counters"]["sink"] == {"in": 18, "out": 18}


# --- the command ----------------------------------------------------------------------------------------------

def test_keys_create_prints_the_key_once_and_stores_its_hash(tmp_path):
    db = f"sqlite:///{tmp_path}/m.db"
    p = logetl("monitor", "keys", "create", "--user", "alice", "--db", db)
    assert p.returncode == 0
    key = p.stdout.decode().strip()
    assert key.startswith("lgt_") and "shown only now" in p.stderr.decode()
    store = Store(db)
    assert store.user_of_key(key) == "alice"
    listed = logetl("monitor", "keys", "list", "--db", db).stdout.decode()
    assert key not in listed and "alice" in listed and key.split("_")[1] in listed
    assert logetl("monitor", "keys", "revoke", "lgt_" + key.split("_")[1], "--db", db).returncode == 0
    assert store.user_of_key(key) is None


def test_a_key_user_longer_than_a_runs_owner_may_be_is_refused(tmp_path):
    db = f"sqlite:///{tmp_path}/m.db"
    p = logetl("monitor", "keys", "create", "--user", "u" * 201, "--db", db)
    assert (p.returncode, p.stdout, p.stderr.decode()) == (
        2, b"", "Error: --user may have at most 200 characters, not 201\n")
    assert Store(db).list_keys() == []
    p = logetl("monitor", "keys", "create", "--user", "u" * 200, "--db", db)
    assert p.returncode == 0 and Store(db).user_of_key(p.stdout.decode().strip()) == "u" * 200


@pytest.mark.parametrize("args", [["--db", ""], ["--db", " ", "keys", "list"], ["keys", "list", "--db", ""],
                                  ["alerts", "list", "--db", ""], ["prune", "--older-than", "1d", "--db", ""]])
def test_an_empty_db_is_refused_not_taken_for_the_default_store(tmp_path, args):
    home = tmp_path / "home"
    p = logetl("monitor", *args, env={"LOGETL_HOME": str(home)})
    assert (p.returncode, p.stdout, p.stderr.decode()) == (
        2, b"", "Error: --db must not be empty: give a database URL (sqlite:///path.db or postgresql://...)\n")
    assert not home.exists()


@pytest.mark.parametrize("host", ["256.1.1.1", "", "exa mple.com", "-bad.example", "1.2.3", "[::1]"])
def test_a_host_that_is_no_address_nor_name_is_named_as_such(tmp_path, host):
    p = logetl("monitor", "--host", host, "--port", str(free_port()), "--db", f"sqlite:///{tmp_path}/m.db")
    assert (p.returncode, p.stderr.decode()) == (2, f"Error: --host must be an IP address or a host name, not {host!r}\n")
    assert not (tmp_path / "m.db").exists()          # refused before the store is opened


def test_an_ipv6_host_is_bracketed_in_the_url(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "logetl", "monitor", "--host", "::1", "--port", "0", "--db",
                             f"sqlite:///{tmp_path}/m.db"], stderr=subprocess.PIPE)
    try:
        line = proc.stderr.readline().decode()
        m = re.fullmatch(r"logetl monitor on http://\[::1\]:(\d+) \(database sqlite:///.+/m\.db\)\n", line)
        assert m and m.group(1) != "0", line          # the port bound, not the 0 asked for
        import urllib.request

        with urllib.request.urlopen(f"http://[::1]:{m.group(1)}/api/health", timeout=10) as r:
            assert json.load(r)["status"] == "ok"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_serving_every_run_off_loopback_without_keys_is_refused(tmp_path):
    p = logetl("monitor", "--host", "0.0.0.0", "--port", str(free_port()), "--db", f"sqlite:///{tmp_path}/m.db")
    assert p.returncode == 2
    assert b"refusing to serve every run to anyone on 0.0.0.0" in p.stderr


@pytest.mark.timing
def test_the_monitor_command_serves(tmp_path):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "logetl", "monitor", "--port", str(port), "--db",
                             f"sqlite:///{tmp_path}/m.db"], stderr=subprocess.PIPE)
    try:
        import urllib.request

        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/runs", timeout=1) as r:
                    assert json.load(r) == {"runs": [], "total": 0, "page": 1, "per_page": 50, "pages": 1}
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# --- a new store opened by several processes at once ---------------------------------------------------------

OPEN_AT_ONCE = """
import os, sys, time
from logetl.monitor.store import Store
open(f"{sys.argv[2]}.ready.{os.getpid()}", "w").close()
while not os.path.exists(sys.argv[2]):
    time.sleep(0.001)
Store(sys.argv[1]).engine.dispose()
"""


def open_at_once(url: str, go: str, n: int = 4) -> list[tuple[int, str]]:
    """``n`` processes that open the store ``url`` together (once the file ``go`` exists): exit codes and
    the last line of each one's stderr."""
    procs = [subprocess.Popen([sys.executable, "-c", OPEN_AT_ONCE, url, go], stderr=subprocess.PIPE)
             for _ in range(n)]
    deadline = time.monotonic() + 60
    while len([n for n in os.listdir(os.path.dirname(go)) if n.startswith(os.path.basename(go) + ".ready.")]) < n:
        assert time.monotonic() < deadline, "the processes did not all start"
        time.sleep(0.01)
    open(go, "w").close()      # all of them imported and waiting: go
    return [(p.wait(timeout=60), (p.stderr.read().decode().strip().splitlines() or [""])[-1]) for p in procs]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_new_store_opened_by_several_processes_at_once_is_set_up_once(request, tmp_path, backend):
    """Runs started together on a fresh machine all found no table, and all but one failed ("table runs
    already exists"): their runs went unrecorded. Three rounds of four processes, each on a new store."""
    for round_ in range(3):
        if backend == "sqlite":
            url = f"sqlite:///{tmp_path}/{round_}/monitor.db"
            os.mkdir(tmp_path / str(round_))
        else:
            from sqlalchemy import create_engine, text

            server = request.getfixturevalue("postgres_url")
            admin = create_engine(server.replace("postgresql://", "postgresql+psycopg://"),
                                  isolation_level="AUTOCOMMIT")
            with admin.connect() as conn:
                conn.execute(text(f"DROP DATABASE IF EXISTS at_once_{round_}"))
                conn.execute(text(f"CREATE DATABASE at_once_{round_}"))
            admin.dispose()
            url = server.rsplit("/", 1)[0] + f"/at_once_{round_}"
        assert open_at_once(url, str(tmp_path / f"go{round_}")) == [(0, "")] * 4
        store = Store(url)
        assert store.list_runs() == ([], 0)
        store.engine.dispose()
