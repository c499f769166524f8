"""The one root of user-facing errors, with the exit code on the class (as Click's ``ClickException``).

Anything raised as a ``LogetlError`` reaches the person as one line (``Error: <message>``) and the
process exits with the class's ``exit_code``; anything else is a bug and shows its traceback only with
``LOGETL_DEBUG=1`` (otherwise one line that says so). Exit codes:

- 0 success;
- 1 a run that failed (``RunFailed``; the summary above says which step and why);
- 2 a usage error (``UsageError``): a bad or missing option, a missing or unreadable input, an output
  that cannot be used, an unavailable engine, a bad environment variable;
- 130 interrupted (Ctrl-C / SIGINT): nothing was published.
"""
from __future__ import annotations

import errno
import os

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class LogetlError(Exception):
    """A user-facing error: one line, ``exit_code``."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(LogetlError):
    """The user asked for something that cannot be done; nothing ran."""

    exit_code = EXIT_USAGE


class RunFailed(LogetlError):
    """A run started and failed; nothing was published."""

    exit_code = EXIT_FAILED


class EnvError(UsageError):
    """An environment variable with a value logetl cannot use; the message names the variable."""


def reason(exc: BaseException) -> str:
    """Why an I/O operation failed, for a message: an OSError's own text without its errno and path, or
    the exception's message (a truncated gzip stream raises EOFError, zlib.error or OSError, and only
    OSError has ``strerror``)."""
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def out_of_space_reason(exc: BaseException) -> str:
    """The reason of a write that failed for want of space: the OS's text (a quota's too), or the text of
    ENOSPC when the error came from a writer that keeps only a message (Polars)."""
    return getattr(exc, "strerror", None) or os.strerror(errno.ENOSPC)


def env_float(name: str, default: float, minimum: float = 0.0) -> float:
    """A number from the environment; a bad value is an ``EnvError`` naming the variable."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise EnvError(f"{name}={raw!r} is not a number") from None
    if value != value or value < minimum:
        raise EnvError(f"{name}={raw!r} must be a number >= {minimum:g}")
    return value


def debug() -> bool:
    return os.environ.get("LOGETL_DEBUG", "").lower() in ("1", "true", "yes", "on")
