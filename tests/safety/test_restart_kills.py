"""No kill, however abrupt, leaves a partial result: each program, on each engine, killed with SIGKILL at
seeded random moments of a run over a long log, and the same command run again gives the uninterrupted
bytes. (The kills at every file-system mutation are test_crash_points.py's; the checkpoint's restart is
test_restart.py's.)"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from conftest import parts


def _outputs(program, tmp_path):
    if program == "branch":
        return ["--input", "{log}", "--output1", str(tmp_path / "o1"), "--output2", str(tmp_path / "o2")], \
               [tmp_path / "o1", tmp_path / "o2"]
    if program == "filter":
        return ["--input", "{log}", "--output", str(tmp_path / "o1")], [tmp_path / "o1"]
    return ["{log}", str(tmp_path / "o1")], [tmp_path / "o1"]


def _check_invariant(out_dirs, expected: dict):
    """An output path holds nothing, or the whole result with its _SUCCESS: never a part without it."""
    for d in out_dirs:
        if not d.exists():
            continue
        assert parts(d) == expected[d.name]


@pytest.fixture(scope="module")
def long_log(tmp_path_factory):
    """A log long enough for a kill to land inside a run (300,000 lines), made once for every program and
    engine: the runs only read it."""
    log = tmp_path_factory.mktemp("restart") / "in.log"
    subprocess.run([sys.executable, "-m", "logetl", "generate", "--lines", "300000", "--seed", "3", str(log)],
                   check=True)
    return log


@pytest.mark.slow   # six killed runs and their reruns per program (three on Spark), each over 300,000 lines
@pytest.mark.parametrize("program", ["branch", "filter", "join"])
def test_sigkill_at_any_moment_leaves_no_partial_result_and_the_rerun_succeeds(engine, tmp_path, program, long_log):
    log = long_log
    args, out_dirs = _outputs(program, tmp_path)
    base = [sys.executable, "-m", "logetl", program, "-q"]
    if engine != "local":
        base.append("--hdfs")
    cmd = base + [a.replace("{log}", str(log)) for a in args]
    # the uninterrupted run: expected bytes and duration
    start = time.monotonic()
    subprocess.run(cmd, check=True)
    duration = time.monotonic() - start
    expected = {d.name: parts(d) for d in out_dirs}
    for d in out_dirs:
        subprocess.run(["rm", "-rf", str(d)], check=True)

    rng = random.Random(f"{program}-{engine}")
    for _attempt in range(6 if engine == "local" else 3):
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.0, duration * 1.05))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        _check_invariant(out_dirs, expected)
        left = [n for n in os.listdir(tmp_path) if n.startswith(".o")]
        if all(d.exists() for d in out_dirs) and not left:
            # killed after it had finished and cleaned up: start the next round afresh
            for d in out_dirs:
                subprocess.run(["rm", "-rf", str(d)], check=True)
            continue
        # killed before publishing, or after it but before its working directory was gone (the published
        # outputs are then recognised as this flow's and replaced with the same bytes)
        # the rerun of the same command completes and gives the uninterrupted bytes
        again = subprocess.run(cmd, capture_output=True)
        assert again.returncode == 0, again.stderr
        _check_invariant(out_dirs, expected)
        assert all(d.exists() for d in out_dirs)
        for d in out_dirs:
            subprocess.run(["rm", "-rf", str(d)], check=True)
    leftovers = [n for n in os.listdir(tmp_path) if n.startswith(".o")]
    assert leftovers == [], leftovers
