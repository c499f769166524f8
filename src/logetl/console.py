"""What a person sees on the terminal: a progress bar for long runs and the end-of-run summary."""
from __future__ import annotations

import os
import sys
import time

from logetl.errors import env_float
from logetl.listener import SKIPPED, SUCCESSFUL, FlowListener, FlowRun

PROGRESS_AFTER = 2.0   # seconds (LOGETL_PROGRESS_AFTER): short runs stay quiet


def silence_broken_pipe() -> None:
    """stderr's reader has gone: further writes go to /dev/null instead of raising (Python's advice for
    SIGPIPE), so what is committed stays committed and the exit status tells the truth."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stderr.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


class ConsoleReporter(FlowListener):
    def __init__(self, stream=None, outputs: dict[str, str] | None = None, quiet: bool = False):
        self.stream = stream or sys.stderr
        self.outputs = outputs or {}
        self.quiet = quiet
        self.progress_on = not quiet and self.stream.isatty()
        self.progress_after = env_float("LOGETL_PROGRESS_AFTER", PROGRESS_AFTER)
        self.started = time.monotonic()
        self.last_draw = 0.0
        self.drawn = False

    def progress(self, run, done_bytes, total_bytes):
        if not self.progress_on:
            return
        now = time.monotonic()
        if now - self.started < self.progress_after or now - self.last_draw < 0.2:
            return
        self.last_draw = now
        if total_bytes <= 0:   # standard input: the size is not known
            self.stream.write(f"\r{_mb(done_bytes)} read")
            self.stream.flush()
            self.drawn = True
            return
        frac = min(done_bytes / total_bytes, 1.0)
        bar = "#" * int(frac * 30)
        self.stream.write(f"\r[{bar:<30}] {frac:6.1%}  {_mb(done_bytes)} of {_mb(total_bytes)}")
        self.stream.flush()
        self.drawn = True

    def notice(self, run, message):
        if self.quiet:
            return
        if self.drawn:
            self.stream.write("\r" + " " * 72 + "\r")
        self.stream.write(f"logetl: {message}\n")
        self.stream.flush()

    def flow_finished(self, run: FlowRun):
        if self.quiet:
            if run.warning:   # -q silences the summary, not a warning a cron job's owner must see
                self.stream.write(f"logetl: warning: {run.warning}\n")
                self.stream.flush()
            return
        if self.drawn:
            self.stream.write("\r" + " " * 72 + "\r")
        self.stream.write(summary(run, self.outputs))
        self.stream.flush()


def summary(run: FlowRun, outputs: dict[str, str]) -> str:
    lines = [f"logetl {run.program}: {run.status} in {run.elapsed:.2f} s ({run.engine} engine)"]
    lines.append(f"  lines read          {run.lines_read:>14,}")
    malformed = run.malformed
    total = sum(malformed.values())
    detail = ", ".join(f"{k} {v:,}" for k, v in sorted(malformed.items()))
    lines.append(f"  malformed lines     {total:>14,}" + (f"  ({detail})" if detail else ""))
    for where, reason, text in run.malformed_samples:
        shown = text if len(text) <= 100 else text[:100] + "..."
        lines.append(f"    {where}: {reason}: {shown}")
    if run.warning:
        lines.append(f"  warning: {run.warning}")
    lines.append(f"  dropped (size '-')  {run.dropped_size_dash:>14,}")
    for op, n in run.left_out().items():
        label = f"left out by {op}"
        lines.append(f"  {label:<19} {n:>14,}")
    for tap, path in outputs.items():
        n = total if tap == "trap" else run.written.get(tap)
        if run.status == SUCCESSFUL:
            lines.append(f"  written {tap:<11} {n or 0:>14,}  -> {path}")
    for op, spill in run.spilled.items():
        lines.append(f"  spilled {op:<11} {spill['bytes'] / 1e6:>11,.1f} MB  ({spill['files']} files, "
                     f"{spill['passes']} merge pass{'es' if spill['passes'] != 1 else ''})")
    for s in run.steps:
        took = (s.finished_at - s.started_at) if s.started_at and s.finished_at else 0.0
        note = "  (done by an earlier run)" if s.status == SKIPPED else ""
        lines.append(f"  step {s.name:<14} {s.status:<10} {took:8.2f} s{note}")
    if run.error:
        lines.append(f"  error: {run.error}")
    return "\n".join(lines) + "\n"
