"""No kill, however abrupt, leaves a partial result: each program, on each engine, killed with SIGKILL in
each phase of a run over a long log (its start, reading the log, writing its outputs, publishing them), the
same command run again over what each kill left, and the last run, not killed, gives the uninterrupted
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

#: how often a run's state is looked at while waiting for a phase (the publishing phase is a few renames)
POLL = 0.002


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


def _family(pid: int) -> list[int]:
    """``pid`` and its descendants (a Spark run's driver JVM is its child)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(name))
    family, todo = [], [pid]
    while todo:
        p = todo.pop()
        family.append(p)
        todo.extend(children.get(p, ()))
    return family


def _open_files(pid: int) -> set[str]:
    found = set()
    for p in _family(pid):
        try:
            fds = os.listdir(f"/proc/{p}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                found.add(os.readlink(f"/proc/{p}/fd/{fd}"))
            except OSError:
                pass
    return found


def _staged(tmp_path) -> list[str]:
    """The files under the outputs' staging directories (``.o1.logetl-PID-…``; Spark's ``_temporary`` in them)."""
    found = []
    for name in os.listdir(tmp_path):
        if name.startswith(".o") and ".logetl-" in name and not name.endswith("logetl-work"):
            for root, _dirs, files in os.walk(tmp_path / name):
                found.extend(os.path.join(root, f) for f in files)
    return found


def _phases(engine: str, log, out_dirs, tmp_path):
    """Each phase of a run, as what shows it has begun: the moment a kill lands in it."""
    started = ("its driver JVM started", lambda pid: len(_family(pid)) > 1) if engine == "spark" else \
        ("it started", lambda pid: True)
    return [
        started,
        ("it reads the log", lambda pid: str(log) in _open_files(pid)),
        ("it writes a part", lambda pid: any("part-" in os.path.basename(f) for f in _staged(tmp_path))),
        ("it publishes", lambda pid: any(d.exists() for d in out_dirs)
         or any(os.path.basename(f) == "_SUCCESS" for f in _staged(tmp_path))),
    ]


def _kill_when(cmd, phase: str, condition, delay: float, tmp_path) -> str:
    """Starts ``cmd`` and kills it with SIGKILL ``delay`` seconds after ``condition`` holds (the ``phase``
    has begun): "killed", or "ended" if the run ended by itself first (it must then have succeeded)."""
    with open(tmp_path / "stderr", "wb") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        try:
            while proc.poll() is None and not condition(proc.pid):
                time.sleep(POLL)
            if proc.poll() is None and delay:
                time.sleep(delay)
        finally:
            proc.send_signal(signal.SIGKILL)
            code = proc.wait()
    stderr = (tmp_path / "stderr").read_bytes()
    assert code in (0, -signal.SIGKILL), f"the run to be killed when {phase} failed: {stderr.decode()}"
    return "ended" if code == 0 else "killed"


@pytest.fixture(scope="module")
def long_log(tmp_path_factory):
    """A log long enough for each phase of a run to last a while (300,000 lines), made once for every
    program and engine: the runs only read it."""
    log = tmp_path_factory.mktemp("restart") / "in.log"
    subprocess.run([sys.executable, "-m", "logetl", "generate", "--lines", "300000", "--seed", "3", str(log)],
                   check=True)
    return log


@pytest.mark.slow   # per program, four killed runs and the one that completes, over 300,000 lines
@pytest.mark.parametrize("program", ["branch", "filter", "join"])
def test_sigkill_at_any_moment_leaves_no_partial_result_and_the_rerun_succeeds(engine, tmp_path, program, long_log):
    log = long_log
    args, out_dirs = _outputs(program, tmp_path)
    base = [sys.executable, "-m", "logetl", program, "-q"]
    cmd = base + [a.replace("{log}", str(log)) for a in args]
    # the uninterrupted bytes, by the local engine (a program's bytes are the same on both: its contract)
    subprocess.run(cmd, check=True)
    expected = {d.name: parts(d) for d in out_dirs}
    for d in out_dirs:
        subprocess.run(["rm", "-rf", str(d)], check=True)
    if engine != "local":
        cmd = base + ["--hdfs"] + cmd[len(base):]

    # each kill lands in its phase, a seeded moment of its first second (the last one at once: publishing
    # is a few renames); each next run starts over what the kill left
    rng = random.Random(f"{program}-{engine}")
    phases = _phases(engine, log, out_dirs, tmp_path)
    for i, (phase, condition) in enumerate(phases):
        delay = 0.0 if i == len(phases) - 1 else rng.uniform(0.0, 1.0)
        ended = _kill_when(cmd, phase, condition, delay, tmp_path) == "ended"
        _check_invariant(out_dirs, expected)
        left = [n for n in os.listdir(tmp_path) if n.startswith(".o")]
        if ended or (all(d.exists() for d in out_dirs) and not left):
            # it had finished (and cleaned up) before the kill: the next run starts afresh
            for d in out_dirs:
                subprocess.run(["rm", "-rf", str(d)], check=True)
    # killed before publishing, or after it but before its working directory was gone (the published
    # outputs are then recognised as this flow's and replaced with the same bytes): the same command
    # completes and gives the uninterrupted bytes
    again = subprocess.run(cmd, capture_output=True)
    assert again.returncode == 0, again.stderr
    _check_invariant(out_dirs, expected)
    assert all(d.exists() for d in out_dirs)
    leftovers = [n for n in os.listdir(tmp_path) if n.startswith(".o")]
    assert leftovers == [], leftovers
