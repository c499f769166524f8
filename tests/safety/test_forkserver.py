"""The fork server of the crash-point tests (``tests/support/forkserver.py``) starts a command as a fresh
``python tests/support/crashpoint.py`` would: each case runs both ways, in two copies of one directory,
and gives the same exit code (a death by signal included), the same stdout and stderr bytes, the same
number of file-system mutations and the same files."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import forkserver
import pytest

from conftest import CORPUS, SUPPORT, read

#: each case starts a fresh interpreter besides the fork
pytestmark = pytest.mark.slow

LOG = read(os.path.join(CORPUS, "corpus.log"))
BRANCH = ["branch", "-q", "--input", "in.log", "--output1", "o1", "--output2", "o2", "--trap", "trap"]

CASES = {
    "version": (["--version"], {}, None),
    "usage": (["branch", "--nope"], {}, None),
    "failed": (["branch", "-q", "--input", "missing.log", "--output1", "o1", "--output2", "o2"], {}, None),
    "branch": (BRANCH, {}, None),
    "stdin": (["branch", "-q", "--input", "-", "--output1", "o1", "--output2", "o2"], {}, LOG),
    "killed": (BRANCH, {"LOGETL_CRASH_AT": "4"}, None),
    "sigterm": (BRANCH, {"LOGETL_CRASH_AT": "4", "LOGETL_CRASH_SIGNAL": "TERM"}, None),
    "generate": (["generate", "--lines", "50", "--seed", "1", "gen.log"], {}, None),
}


def _files(root) -> dict[str, bytes]:
    """The files under ``root`` and their bytes; a lock file holds its process's id, which is each run's
    own (a fork's as a fresh process's): ``PID``."""
    files = {os.path.relpath(os.path.join(d, n), root): read(os.path.join(d, n))
             for d, _, names in os.walk(root) for n in names}
    return {name: b"PID" if name.endswith(".logetl-lock") and data.isdigit() else data
            for name, data in files.items()}


@pytest.mark.parametrize("case", list(CASES))
def test_a_forked_run_gives_what_a_fresh_process_gives(tmp_path, case):
    args, extra, stdin = CASES[case]
    ended = {}
    for way in ("fresh", "forked"):
        root = tmp_path / way
        root.mkdir()
        (root / "in.log").write_bytes(LOG)
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "LOGETL_MONITOR": "off",
               "LOGETL_CRASH_COUNT": str(tmp_path / f"{way}.count"), **extra}
        if way == "fresh":
            run = subprocess.run([sys.executable, os.path.join(SUPPORT, "crashpoint.py"), *args], cwd=root,
                                 env=env, capture_output=True, timeout=120, input=stdin or b"")
        else:
            run = forkserver.run(args, cwd=root, env=env, timeout=120, input=stdin)
        count = tmp_path / f"{way}.count"
        ended[way] = (run.returncode, run.stdout, run.stderr, count.read_text() if count.exists() else None,
                      _files(root))
    assert ended["forked"] == ended["fresh"]
    code = ended["fresh"][0]
    assert code == {"version": 0, "usage": 2, "failed": 2, "killed": -9, "sigterm": 143}.get(case, 0), ended


def test_the_zygote_refuses_to_fork_while_a_thread_runs():
    """The check before each fork: a second thread (here, in this process) is named, never forked over."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name="a-pool-thread")
    thread.start()
    try:
        env = dict(os.environ)
        problem = forkserver._unfit({"env": env}, env, forkserver._handlers(),
                                    forkserver.signal.pthread_sigmask(forkserver.signal.SIG_BLOCK, []))
    finally:
        stop.set()
        thread.join()
    assert problem.startswith("the fork server runs threads: ["), problem
