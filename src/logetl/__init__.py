"""logetl: batch ETL for web-server access logs."""
__version__ = "0.1.0"

import sys as _sys

_program = (getattr(_sys, "argv", None) or [""])[0]
if _program == "-m" or _program.rsplit("/", 1)[-1] == "logetl":
    # the logetl program itself (``python -m logetl``, whose module search runs this with argv[0] "-m", or
    # the ``logetl`` script), not a program that uses the library: from this first line that logetl runs
    # (its imports take a good part of a second on a busy machine), a signal ends the command with one
    # line and its exit code, never a traceback or nothing at all
    from logetl import errors as _errors

    _errors.command_signals(_errors.said_when_stopped(_sys.argv[1:]), program=True)

from logetl.sql.table import read_log  # noqa: E402  (the parsed log as an Arrow stream, a Polars or DuckDB table)

__all__ = ["read_log", "__version__"]
