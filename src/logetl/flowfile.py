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
user's code it came from (``FlowFileError``, exit 2), never a traceback: a syntax error, a module that
cannot be imported, a name the API does not have (``L.whn``: with the nearest one, ``when``), a method an
expression or a pipe does not have, a Python operator expressions do not have, a misspelt field (with the
nearest field), a wrong type, an exception raised by the file's own code (a ``BaseException`` of its own
too); so is a file that calls ``sys.exit``, a ``flow()`` that returns something else than a flow, and a
flow that does not read the log format ``--format`` gave. An error found when a flow is defined names the
line where the expression at fault was written (``expressions.ExpressionError.origin``), else the innermost
line of the file the error passed through. A signal while the file is loaded (``KeyboardInterrupt``,
``errors.Terminated``) stops the command.
"""
from __future__ import annotations

import importlib.util
import inspect
import os
import pkgutil
import re
import sys
import traceback

from logetl import assembly, expressions, formats
from logetl.diagnostics import nearest
from logetl.errors import LogetlError, UsageError, interrupt_of


class FlowFileError(UsageError):
    """A flow file that cannot be loaded or does not define a flow; the message names file and line."""


def _where(path: str, exc: BaseException) -> str:
    """``FILE:LINE``: where the expression at fault was written when that is in the user's file (an
    error of a type check, raised later), else the deepest frame of the traceback that is in it."""
    real = os.path.realpath(path)
    origin = getattr(exc, "origin", None)
    if origin and os.path.realpath(origin[0]) == real:
        return f"{path}:{origin[1]}"
    line = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if os.path.realpath(frame.f_code.co_filename) == real:
            line = lineno
    return f"{path}:{line}" if line else path


def _one_line(text: str) -> str:
    """A message of several lines as one (an exception of the user's code may hold line breaks)."""
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


def _message(path: str, exc: BaseException) -> str:
    """The one line that says what went wrong while the file loaded or defined its flow."""
    if isinstance(exc, SyntaxError):
        same = not exc.filename or os.path.realpath(exc.filename) == os.path.realpath(path)
        return f"{path if same else exc.filename}:{exc.lineno}: syntax error: {exc.msg}"
    if isinstance(exc, SystemExit):
        return _exits(path, exc)
    where = _where(path, exc)
    if isinstance(exc, assembly.MissingField):
        return f"{where}: {_one_line(exc)} (choose a --format that has it)"
    if isinstance(exc, (assembly.AssemblyError, expressions.ExpressionError, LogetlError)):
        return f"{where}: {_one_line(exc)}"
    if isinstance(exc, ImportError):
        return f"{where}: {_import_error(exc)}"
    if isinstance(exc, AttributeError) and getattr(exc, "obj", None) is not None and exc.name:
        return f"{where}: {_attribute_error(exc)}"
    text = _one_line(exc)
    return f"{where}: {type(exc).__name__}" + (f": {text}" if text else "")


def _import_error(exc: ImportError) -> str:
    """``import logetl.apii``, ``from logetl.api import whn``: named, with the nearest name there is."""
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        if exc.name.split(".")[0] == "logetl":
            import logetl

            modules = [f"logetl.{m.name}" for m in pkgutil.iter_modules(logetl.__path__)]
            return f"no module named {exc.name!r}{nearest(exc.name, modules)}"
        return f"no module named {exc.name!r} (not installed for this Python, nor beside the flow file)"
    wanted = re.match(r"cannot import name '([^']+)'", str(exc))
    module = sys.modules.get(exc.name or "")
    if wanted and module is not None:
        name = wanted.group(1)
        if exc.name == "logetl.api":
            return f"logetl.api has no function {name!r}{nearest(name, module._public_names())}"
        public = [n for n in dir(module) if not n.startswith("_")]
        return f"cannot import {name!r} from {exc.name!r}{nearest(name, public)}"
    return f"{type(exc).__name__}: {_one_line(exc)}"


def _attribute_error(exc: AttributeError) -> str:
    """``logs.fliter(...)``: what has no such attribute, with the nearest one it has."""
    obj, name = exc.obj, exc.name
    near = nearest(name, [n for n in dir(obj) if not n.startswith("_")])
    if isinstance(obj, assembly.Pipe):
        return f"{obj.kind} {obj.label} has no method {name!r}{near}"
    if inspect.ismodule(obj):
        return f"module {obj.__name__!r} has no attribute {name!r}{near}"
    return f"{type(exc).__name__}: {_one_line(exc)}{near}"


def _returned(result) -> str:
    """What a ``flow()`` returned instead of a flow, as a message names it."""
    if result is None:
        return "None"
    if isinstance(result, assembly.Sink):
        return f"a sink (tap {result.tap!r})"
    if isinstance(result, assembly.Pipe):
        return f"a pipe ({result.kind})"
    if isinstance(result, (list, tuple)):
        return f"a {type(result).__name__}"
    return type(result).__name__


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
        except KeyboardInterrupt:
            raise                      # a signal while the file is loaded: the command stops (exit 128 + N)
        except BaseException as exc:   # an Exception, an exit, or a BaseException of the file's own
            _interrupted(exc)
            raise FlowFileError(_message(path, exc)) from None
        define = getattr(module, "flow", None)
        if isinstance(define, assembly.Flow):
            if format_given:
                raise FlowFileError(f"{path}: its flow fixes its own log format: --format cannot change it")
            return define
        if not callable(define):
            raise FlowFileError(f"{path}: defines no flow (a function flow(fmt) that returns logetl.api.Flow)")
        code = getattr(define, "__code__", None)
        defined_at = f"{path}:{code.co_firstlineno}" if code is not None else path
        try:
            params = [p for p in inspect.signature(define).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            params = []
        required = [p.name for p in params if p.default is p.empty]
        if len(required) > 1:
            raise FlowFileError(f"{defined_at}: flow() takes one parameter, the log format, not "
                                f"{len(required)} ({', '.join(required)})")
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
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            _interrupted(exc)
            raise FlowFileError(_message(path, exc)) from None
        if not isinstance(result, assembly.Flow):
            raise FlowFileError(f"{defined_at}: flow() returned {_returned(result)}, not a logetl.api.Flow "
                                '(return L.Flow("NAME", [pipe.write("TAP"), ...]))')
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
