"""Flow files: a user's Python file that defines a flow, for ``logetl run FLOW.py`` and
``logetl explain FLOW.py``.

How a file names its flow: it defines ``flow``, a function that returns a ``logetl.api.Flow``. The function
takes the run's log format as its one argument (``--format`` / ``--format-file``; ``combined`` when
neither is given) and passes it to ``read``; a function without parameters fixes its own format, and then
``--format`` is refused. The flow's name (``Flow("name", ...)``) is the application name in the monitor.

While the file is loaded and its flow defined, the file's directory is first on ``sys.path`` (as
``python FLOW.py`` puts it), so that it imports the modules beside it whether it is run as ``logetl run``
or ``python -m logetl run``, from any directory.

Any error while loading the file or defining the flow is one line naming the file and the line of the
user's code it came from (``FlowFileError``, exit 2), whatever it raises (a ``BaseException`` of its own
too); so is a file that calls ``sys.exit``, and a flow that does not read the log format ``--format``
gave. A signal while the file is loaded (``KeyboardInterrupt``, ``errors.Terminated``) stops the command.
"""
from __future__ import annotations

import importlib.util
import inspect
import os
import sys
import traceback

from logetl import assembly, expressions, formats
from logetl.errors import UsageError, interrupt_of


class FlowFileError(UsageError):
    """A flow file that cannot be loaded or does not define a flow; the message names file and line."""


def _where(path: str, exc: BaseException) -> str:
    """``FILE:LINE`` of the deepest frame of the traceback that is in the user's file."""
    real = os.path.realpath(path)
    line = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if os.path.realpath(frame.f_code.co_filename) == real:
            line = lineno
    return f"{path}:{line}" if line else path


def load(path: str, log_format: formats.LogFormat | None = None, format_given: bool = False) -> assembly.Flow:
    """The flow the file at ``path`` defines, reading ``log_format`` (None: ``combined``)."""
    if not os.path.isfile(path):
        raise FlowFileError(f"flow file {path!r} does not exist" if not os.path.exists(path)
                            else f"flow file {path!r} is not a file")
    name = "logetl_flow_" + "".join(c if c.isalnum() else "_" for c in os.path.basename(path))
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise FlowFileError(f"flow file {path!r} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module      # dataclasses and pickling look a module up by name
    # the modules beside the file, as `python FLOW.py` finds them (`logetl run` has the script's bin first)
    here = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, here)
    try:
        try:
            spec.loader.exec_module(module)
        except SyntaxError as exc:
            raise FlowFileError(f"{path}:{exc.lineno}: syntax error: {exc.msg}") from None
        except SystemExit as exc:
            raise FlowFileError(_exits(path, exc)) from None
        except KeyboardInterrupt:
            raise                      # a signal while the file is loaded: the command stops (exit 128 + N)
        except BaseException as exc:   # an Exception, or a BaseException of the file's own
            _interrupted(exc)
            raise FlowFileError(f"{_where(path, exc)}: {type(exc).__name__}: {exc}") from None
        define = getattr(module, "flow", None)
        if isinstance(define, assembly.Flow):
            if format_given:
                raise FlowFileError(f"{path}: its flow fixes its own log format: --format cannot change it")
            return define
        if not callable(define):
            raise FlowFileError(f"{path}: defines no flow (a function flow(fmt) that returns logetl.api.Flow)")
        try:
            params = [p for p in inspect.signature(define).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            params = []
        try:
            if params:
                result = define(log_format)
            elif format_given:
                raise FlowFileError(f"{path}: flow() takes no log format, so --format cannot change it "
                                    "(give it a parameter and pass it to read())")
            else:
                result = define()
        except FlowFileError:
            raise
        except assembly.MissingField as exc:
            raise FlowFileError(f"{_where(path, exc)}: {exc} (choose a --format that has it)") from None
        except (assembly.AssemblyError, expressions.ExpressionError) as exc:
            raise FlowFileError(f"{_where(path, exc)}: {exc}") from None
        except SystemExit as exc:
            raise FlowFileError(_exits(path, exc)) from None
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            _interrupted(exc)
            raise FlowFileError(f"{_where(path, exc)}: {type(exc).__name__}: {exc}") from None
        if not isinstance(result, assembly.Flow):
            raise FlowFileError(f"{path}: flow() returned {type(result).__name__}, not a logetl.api.Flow")
        if format_given:
            # a flow that reads another format than the one given would parse the log with that one silently
            for node in result.nodes:
                if isinstance(node, assembly.Parse) and node.format != log_format:
                    raise FlowFileError(
                        f"{path}: its flow reads the log format {_format_name(node.format)}, not the one --format "
                        f"gave ({_format_name(log_format)}): pass flow()'s format to read()")
        return result
    finally:
        sys.modules.pop(name, None)
        try:
            sys.path.remove(here)       # the first occurrence: the one inserted above
        except ValueError:
            pass


def _interrupted(exc: BaseException) -> None:
    """Raises the signal's interrupt that ``exc`` was raised for (Python wraps one raised while a class
    of the file is made), if any."""
    stop = interrupt_of(exc)
    if stop is not None:
        raise stop from None


def _exits(path: str, exc: SystemExit) -> str:
    """A flow file that calls ``sys.exit``: one line, as any other error in it (an exit status of its own
    would pass for logetl's)."""
    code = "" if exc.code is None else repr(exc.code)
    return f"{_where(path, exc)}: the flow file calls sys.exit({code}) instead of defining its flow"


def _format_name(fmt: formats.LogFormat) -> str:
    """A preset by its name, a format string as written."""
    if fmt.name in formats.PRESETS and formats.compile_format(fmt.name) == fmt:
        return fmt.name
    return repr(fmt.text)
