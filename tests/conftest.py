"""Shared fixtures. The program suite runs once per engine (``ENGINES``), like Cascading's
PlatformTestCase: the same inputs, the same checked-in expected bytes.

A test that needs a component which is missing here skips with the reason; under CI (CI=true) that skip
is a failure instead (``require``)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
#: the helper modules every area's tests import (independent results, crash points, format cases, ...)
SUPPORT = os.path.join(HERE, "support")
#: the repository's root (examples/, docs/, bench/, src/)
ROOT = os.path.dirname(HERE)
#: the area folders (programs, flows, formats, spark, monitor, ...): a test module may import another area's
#: cases or fixtures by its module name (``from test_formats import FORMAT_IDS``), so names are unique
AREAS = sorted(os.path.join(HERE, d) for d in os.listdir(HERE)
               if os.path.isdir(os.path.join(HERE, d)) and d not in ("data", "support", "__pycache__"))
sys.path[:0] = [HERE, SUPPORT, *AREAS]

CORPUS = os.path.join(HERE, "data", "corpus")
SHARED = os.path.abspath(os.path.join(HERE, "..", "..", "shared"))
SAMPLE = os.path.join(SHARED, "data", "access_sample_5k.log")
BASELINES = os.path.join(SHARED, "bench")
UNDER_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

#: engines the program suite runs on
ENGINES = ["local", "spark"]


@pytest.fixture(autouse=True)
def _monitor_home(tmp_path_factory, monkeypatch):
    """Runs record their documents in a store of the test session's, never in the user's ~/.logetl."""
    monkeypatch.setenv("LOGETL_HOME", str(tmp_path_factory.getbasetemp() / "logetl-home"))
    monkeypatch.delenv("LOGETL_MONITOR_URL", raising=False)
    monkeypatch.delenv("LOGETL_API_KEY", raising=False)


def require(condition: bool, reason: str) -> None:
    """Skip with ``reason`` when ``condition`` is false; under CI a missing component fails the test."""
    if condition:
        return
    if UNDER_CI:
        pytest.fail(f"required under CI: {reason}")
    pytest.skip(reason)


#: a child started as from a terminal, whatever this test run inherited: a CI started in the background
#: ignores SIGINT, under nohup SIGHUP too, and a child would inherit that (Python then sets no handler)
DEFAULT_SIGNALS = ["env", "--default-signal=INT,HUP,TERM"]


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_missing() -> str | None:
    """Why the spark engine cannot run here, or None."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "PySpark is not installed (pip install 'logetl[spark]')"
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        return "Java is not installed (the spark engine needs Java 17)"
    return None


@pytest.fixture(scope="session")
def spark_session():
    """One local[2] Spark session for the whole run (of each worker, under pytest-xdist), made the way the
    engine makes its own."""
    missing = spark_missing()
    require(missing is None, missing or "")
    from logetl.engines.spark.engine import SparkEngine

    engine = SparkEngine(master="local[2]", conf={"spark.sql.shuffle.partitions": "4",
                                                  "spark.ui.enabled": "false"})
    spark = engine.keep_session()
    yield spark
    spark.stop()


@pytest.fixture(params=ENGINES)
def engine(request) -> str:
    if request.param == "spark":
        request.getfixturevalue("spark_session")
    return request.param


def parts(path) -> bytes:
    """An output directory's result: its part files concatenated in name order, after checking that it
    holds nothing but them and an empty _SUCCESS."""
    names = sorted(os.listdir(path))
    assert "_SUCCESS" in names, names
    assert read(os.path.join(path, "_SUCCESS")) == b""
    others = [n for n in names if n != "_SUCCESS" and not n.startswith("part-")]
    assert others == [], others
    return b"".join(read(os.path.join(path, n)) for n in names if n.startswith("part-"))


def flow_outputs(flow, engine: str, log: str, where, **options) -> dict[str, bytes]:
    """Output tap -> bytes of ``flow`` run on ``engine`` (with the engine's ``options``) over ``log``, its
    outputs under ``where``."""
    from logetl.engines import get_engine
    from logetl.job import bind
    from logetl.listener import FlowListener

    runner = get_engine(engine)(**options)
    outs = {s.tap: str(where / s.tap) for s in flow.sinks}
    try:
        taps = bind(flow, log, outs, engine=engine, fs=runner.filesystem())
        runner.run(flow, taps, FlowListener())
    finally:
        runner.shutdown()
    return {tap: parts(path) for tap, path in outs.items()}


def read_preset(tmp_path, engine: str, preset: str, fields, lines: list[bytes], log_name: str, **options):
    """``lines`` (a log named ``log_name``) read with ``preset``'s ``fields`` and written by a flow on
    ``engine``: the output's bytes, the trap's bytes and the run."""
    import logetl.api as L
    from logetl.job import run_flow

    path = tmp_path / log_name
    path.write_bytes(b"\n".join(lines) + b"\n")
    out, trap = tmp_path / f"out-{engine}", tmp_path / f"trap-{engine}"
    flow = L.Flow(preset, [L.read(preset, fields=fields).write("output")])
    run = run_flow(flow, str(path), {"output": str(out)}, engine=engine, trap=str(trap), **options)
    return parts(out), parts(trap), run


@pytest.fixture
def sample() -> str:
    require(os.path.isfile(SAMPLE), f"the real sample log is not at {SAMPLE} (../shared is absent)")
    return SAMPLE


def read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def corpus(name: str) -> bytes:
    return read(os.path.join(CORPUS, name))


def logetl(*args: str, env: dict | None = None, cwd: str | None = None,
           input: bytes | None = None) -> subprocess.CompletedProcess:
    """Runs the real command line (``python -m logetl``) and captures bytes (``input``: its stdin)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "logetl", *args], capture_output=True, env=full_env, cwd=cwd,
                          timeout=600, input=input)


def logetl_on_a_terminal(*args: str, env: dict | None = None) -> tuple[int, str]:
    """Runs the real command line under a pseudo-terminal (its stderr is a TTY, as a person's is): the exit
    code and everything it wrote there."""
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # child: the real command line, its stderr on the terminal
        os.environ.update(env or {})
        os.execv(sys.executable, [sys.executable, "-m", "logetl", *args])
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), out.decode("utf-8", "replace")


# --- a real PostgreSQL server for the monitor's store tests --------------------------------------------------

def _pg_bindir() -> str | None:
    import glob

    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return os.path.dirname(found[-1]) if found else None


@pytest.fixture(scope="session")
def postgres_url():
    """Starts a PostgreSQL server on 127.0.0.1 (Debian's postgresql package) for the session."""
    bindir = _pg_bindir()
    require(bindir is not None, "PostgreSQL is not installed (Debian package postgresql)")
    import pathlib
    import tempfile

    # its own directory under /tmp: the postgres user cannot reach into pytest's private tree
    base = pathlib.Path(tempfile.mkdtemp(prefix="logetl-pg-"))
    data, sock = base / "data", base / "sock"
    sock.mkdir()
    as_user: list[str] = []
    if os.geteuid() == 0:   # initdb refuses to run as root: the package's postgres user runs the server
        as_user = ["runuser", "-u", "postgres", "--"]
        subprocess.run(["chown", "-R", "postgres", str(base)], check=True)
        os.chmod(base, 0o755)
    port = free_port()
    subprocess.run(as_user + [f"{bindir}/initdb", "-D", str(data), "-A", "trust", "-U", "postgres",
                              "--no-sync"], check=True, capture_output=True)
    subprocess.run(as_user + [f"{bindir}/pg_ctl", "-D", str(data), "-l", str(base / "server.log"), "-w",
                              "-o", f"-p {port} -h 127.0.0.1 -k {sock} -c fsync=off -c max_connections=200",
                              "start"], check=True, capture_output=True)
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(as_user + [f"{bindir}/pg_ctl", "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


# --- Chromium for the monitor's pages ---------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium driven by Playwright, started once for the whole run (of each worker): each test
    opens its own context (its own cookies and storage) in it."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require(False, "Playwright for Python is not installed")
    require(os.path.exists(CHROMIUM), f"Chromium is not installed ({CHROMIUM}; Debian package chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield b
        b.close()


@pytest.fixture
def keyed(store):
    """A monitor app over ``store`` with two users' keys: (client, alice's key, bob's key)."""
    from starlette.testclient import TestClient

    from logetl.monitor.app import create_app

    alice, bob = store.create_key("alice"), store.create_key("bob")
    with TestClient(create_app(store), base_url="http://127.0.0.1:8080") as c:
        yield c, alice, bob


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    """An empty monitor store on SQLite (a file) or on the real PostgreSQL server."""
    from logetl.monitor.store import Store, metadata

    if request.param == "sqlite":
        s = Store(f"sqlite:///{tmp_path}/monitor.db")
    else:
        s = Store(request.getfixturevalue("postgres_url"))
        with s.engine.begin() as conn:
            for table in reversed(metadata.sorted_tables):
                conn.execute(table.delete())
    yield s
    s.engine.dispose()


# --- markers: what a test needs, so that ``make check`` can leave out the slow components -------------------

#: tests that need Spark (a JVM, PySpark) whatever their parameters: the Spark engine's own area
SPARK_AREA = os.path.join(HERE, "spark") + os.sep
#: fixtures that start a component, and the marker each implies
NEEDS = {"spark_session": "spark", "postgres_url": "postgres", "browser": "browser", "page": "browser"}
#: parameter values that select a component (the ``engine`` and ``store`` fixtures' params, ``backend`` ...)
PARAMS = {"spark": "spark", "postgresql": "postgres"}


def _needs(item) -> set[str]:
    """The markers ``item`` gets from what it uses: its folder, its fixtures and its parameters."""
    found = {NEEDS[f] for f in getattr(item, "fixturenames", ()) if f in NEEDS}
    if str(item.path).startswith(SPARK_AREA):
        found.add("spark")
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        for value in callspec.params.values():
            if isinstance(value, str) and value in PARAMS:
                found.add(PARAMS[value])
            elif isinstance(value, tuple):   # a (engine, parse) pair and the like
                found.update(PARAMS[v] for v in value if isinstance(v, str) and v in PARAMS)
    return found


def pytest_collection_modifyitems(config, items):
    """Marks each test with the components it needs (``spark``, ``postgres``, ``browser``), from its folder,
    fixtures and parameters; a test that starts one some other way carries the marker itself."""
    for item in items:
        have = {m.name for m in item.iter_markers()}
        for name in sorted(_needs(item) - have):
            item.add_marker(name)
    _longest_first(items)


#: what a test on Spark costs against one that is not, roughly: a few Spark jobs, or a JVM's start
SPARK_WEIGHT = 10


def _longest_first(items) -> None:
    """Orders the modules the longest first, so that both workers share the end of the run: those with the
    most ``slow`` tests, then the others by their tests, one on Spark counting for ``SPARK_WEIGHT``.
    ``--dist loadfile`` hands whole modules to the workers in this order (``make test`` passes
    ``--no-loadscope-reorder``: by itself xdist orders them by their number of tests alone, which leaves a
    module of a few tests of minutes each, a standalone cluster, for the end, one worker running it while
    the other has nothing left). A module's own tests keep their order."""
    slow: dict[str, int] = {}
    cost: dict[str, int] = {}
    first: dict[str, int] = {}
    for i, item in enumerate(items):
        module = str(item.path)
        first.setdefault(module, i)
        cost[module] = cost.get(module, 0) + (SPARK_WEIGHT if item.get_closest_marker("spark") else 1)
        slow[module] = slow.get(module, 0) + (item.get_closest_marker("slow") is not None)
    items.sort(key=lambda item: (-slow[str(item.path)], -cost[str(item.path)], first[str(item.path)]))
