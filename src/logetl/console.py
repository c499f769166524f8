"""What a person sees on the terminal: a progress bar for long runs and the end-of-run summary."""
from __future__ import annotations

import os
import sys
import time

from logetl import settings
from logetl.listener import SKIPPED, SUCCESSFUL, FlowListener, FlowRun, current_step, progress_of



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


def _amount(n: float, unit: str) -> str:
    return _mb(n) if unit == "bytes" else f"{n:,.0f} {unit}"


def _rate(rate: float, unit: str) -> str:
    return f"{rate / 1e6:,.1f} MB/s" if unit == "bytes" else f"{rate:,.0f} {unit}/s"


def _eta(seconds: float) -> str:
    s = int(seconds + 0.5)
    if s < 60:
        return f"{s} s"
    m, s = divmod(s, 60)
    return f"{m} min {s:02d} s" if m < 60 else f"{m // 60} h {m % 60:02d} min"


def progress_line(p: dict) -> str:
    """The bar's text for ``listener.progress_of``'s dict: step, bar and percent, amounts, rate, ETA.

    ``join  [##########                    ]  33.3%  1,000 of 3,000 records  500 records/s  ETA 4 s``"""
    unit = p["unit"]
    parts = [p["step"] or "run"]
    if p["total"]:
        frac = min(p["done"] / p["total"], 1.0)
        parts.append(f"[{'#' * int(frac * 30):<30}] {frac:6.1%}")
        of = f"{_amount(p['total'], unit)}"
        parts.append(f"{_mb(p['done']) if unit == 'bytes' else format(p['done'], ',.0f')} of {of}")
    else:
        parts.append(f"{_amount(p['done'], unit)} read" if unit == "bytes" else _amount(p["done"], unit))
    if p["rate"]:
        parts.append(_rate(p["rate"], unit))
    if p["eta"] is not None:
        parts.append(f"ETA {_eta(p['eta'])}")
    return "  ".join(parts)


class ConsoleReporter(FlowListener):
    """The summary at the end, and on a terminal, once a run has gone on for ``LOGETL_PROGRESS_AFTER``
    seconds, a one-line bar that names the current step and shows how far it is, its rate and ETA: bytes
    of input for the step that parses, records replayed for a step that reads stored outputs."""

    def __init__(self, stream=None, outputs: dict[str, str] | None = None, quiet: bool = False):
        self.stream = stream or sys.stderr
        self.outputs = outputs or {}
        self.quiet = quiet
        self.progress_on = not quiet and self.stream.isatty()
        self.progress_after = settings.PROGRESS_AFTER.read()
        self.started = time.monotonic()
        self.last_draw = 0.0
        self.drawn = False
        self.last_step = None   # the step the line drawn last names
        self.width = 0          # of the line drawn last: the next one (or the clearing) covers it
        #: the run it reports, once started: how it ended (``FlowRun.publishing``, ``FlowRun.full``) is what
        #: the command line says of a run that failed or was stopped
        self.run: FlowRun | None = None

    def flow_started(self, run):
        self.run = run

    def progress(self, run, done_bytes, total_bytes):
        if self.progress_on:
            self.step_progress(run, current_step(run), done_bytes, total_bytes, "bytes")

    def step_progress(self, run, step, done, total, unit):
        if not self.progress_on:
            return
        now = time.monotonic()
        name = step.name if step is not None else None
        # at most 5 draws a second, but a new step is named at once
        if now - self.started < self.progress_after or (now - self.last_draw < 0.2 and name == self.last_step):
            return
        self.last_draw, self.last_step = now, name
        line = progress_line(progress_of(run, step, done, total, unit))
        self.stream.write("\r" + line.ljust(self.width))
        self.stream.flush()
        self.width = len(line)
        self.drawn = True

    def _clear(self):
        if self.drawn:
            self.stream.write("\r" + " " * self.width + "\r")
            self.drawn, self.width = False, 0

    def notice(self, run, message):
        if self.quiet:
            return
        self._clear()
        self.stream.write(f"logetl: {message}\n")
        self.stream.flush()

    def flow_finished(self, run: FlowRun):
        if self.quiet:
            if run.warning:   # -q silences the summary, not a warning a cron job's owner must see
                self.stream.write(f"logetl: warning: {run.warning}\n")
                self.stream.flush()
            return
        self._clear()
        self.stream.write(summary(run, self.outputs))
        self.stream.flush()


def summary(run: FlowRun, outputs: dict[str, str]) -> str:
    # the counts' rows: (label, value right-aligned in 14, what follows); the labels' column is 19 wide,
    # or as wide as the longest label (an operator's or output's long name), so the numbers stay aligned
    rows: list[tuple[str, str, str] | str] = []
    total = sum(run.malformed.values())   # (the trap's lines, written by a successful run: counted)
    if not run.counted:
        # Spark returns a step's counters with its successful action only: unknown is not 0
        failed = ", ".join(s.name for s in run.steps if s.lines_read is None)
        rows.append(("lines read", f"{'not counted':>14}", f"  (step {failed} failed before its counters came back)"))
        rows.append(("malformed lines", f"{'not counted':>14}", ""))
    else:
        rows.append(("lines read", f"{run.lines_read:>14,}", ""))
        malformed = run.malformed
        detail = ", ".join(f"{k} {v:,}" for k, v in sorted(malformed.items()))
        rows.append(("malformed lines", f"{total:>14,}", f"  ({detail})" if detail else ""))
    for where, reason, text in run.malformed_samples:
        shown = text if len(text) <= 100 else text[:100] + "..."
        rows.append(f"    {where}: {reason}: {shown}")
    if run.warning:
        rows.append(f"  warning: {run.warning}")
    if run.header_lines:   # (a log format with header lines: CloudFront's, W3C's directives)
        rows.append(("header lines", f"{run.header_lines:>14,}", ""))
    if run.non_http_lines:   # (HAProxy's TCP-mode lines and notices)
        rows.append(("non-HTTP lines", f"{run.non_http_lines:>14,}", ""))
    dropped = run.dropped_size_dash
    rows.append(("dropped (size '-')", f"{'not counted' if dropped is None else format(dropped, ','):>14}", ""))
    for op, n in run.left_out().items():
        rows.append((f"left out by {op}", f"{n:>14,}", ""))
    for tap, path in outputs.items():
        n = total if tap == "trap" else run.written.get(tap)
        if run.status == SUCCESSFUL:
            rows.append((f"written {tap}", f"{n or 0:>14,}", f"  -> {path}"))
    for op, spill in run.spilled.items():
        rows.append((f"spilled {op}", f"{spill['bytes'] / 1e6:>11,.1f} MB",
                     f"  ({spill['files']} files, {spill['passes']} merge pass{'es' if spill['passes'] != 1 else ''})"))
    width = max([19] + [len(r[0]) for r in rows if isinstance(r, tuple)])
    lines = [f"logetl {run.program}: {run.status} in {run.elapsed:.2f} s ({run.engine} engine)"]
    lines += [f"  {r[0]:<{width}} {r[1]}{r[2]}" if isinstance(r, tuple) else r for r in rows]
    for s in run.steps:
        took = (s.finished_at - s.started_at) if s.started_at and s.finished_at else 0.0
        note = "  (done by an earlier run)" if s.status == SKIPPED else ""
        lines.append(f"  step {s.name:<14} {s.status:<10} {took:8.2f} s{note}")
    if run.error:
        lines.append(f"  error: {run.error}")
    return "\n".join(lines) + "\n"
