"""One error tree: every error logetl raises to a person derives from ``LogetlError`` with its exit code on the
class, the ones that were ``ValueError``s still are, and what the command line says of a failed or stopped
run comes from the run's ``FlowRun``, not from attributes stamped on the exception."""
from __future__ import annotations

import importlib
import inspect
import os
import subprocess
import sys

import pytest

from conftest import CORPUS, parts, corpus

import logetl
from logetl.errors import EXIT_FAILED, EXIT_USAGE, LogetlError, RunFailed, UsageError
from logetl.job import run_program
from logetl.listener import FAILED, STOPPED, FlowListener

CORPUS_LOG = os.path.join(CORPUS, "corpus.log")

#: exception classes of logetl that are not errors said to a person, and why
INTERNAL = {
    "logetl.contract.Malformed": "a line's verdict, counted and trapped, never raised out of a run",
    "logetl.engines.spark.jvm.Unavailable": "why the kernel cannot run in the JVMs: caught, said as a notice",
    "logetl.cli._Shown": "a LogetlError as Click shows it (Click's own exception)",
    "logetl.formats.Header": "a header line's verdict inside the parse, counted apart, never raised out of a run",
    "logetl.formats.NotRequest": "the verdict inside the parse on a line that is not a request, counted apart, "
                                 "never raised out of a run",
    "logetl.errors.Terminated": "a KeyboardInterrupt by design: everything that handles Ctrl-C handles it",
    "logetl.jsonformats.NotJson": "why a line is not a JSON object, for its malformed-line sample: never raised out "
                                  "of a run",
}


def _modules() -> list[str]:
    """Every module of the package, namespace packages' (``logetl.io``) too."""
    root = os.path.dirname(logetl.__file__)
    names = []
    for folder, _, files in os.walk(root):
        for f in files:
            if f.endswith(".py") and f != "__main__.py":
                rel = os.path.relpath(os.path.join(folder, f), root)[:-3].replace(os.sep, ".")
                names.append("logetl" + ("" if rel == "__init__" else "." + rel.removesuffix(".__init__")))
    return sorted(names)


def _exception_classes() -> dict[str, type]:
    found = {}
    for name in _modules():
        mod = importlib.import_module(name)
        for name, cls in vars(mod).items():
            if inspect.isclass(cls) and issubclass(cls, BaseException) and cls.__module__ == mod.__name__:
                found[f"{mod.__name__}.{name}"] = cls
    return found


def test_every_error_class_of_logetl_derives_from_logetl_error():
    classes = _exception_classes()
    assert set(INTERNAL) <= set(classes)
    outside = sorted(name for name, cls in classes.items() if not issubclass(cls, LogetlError) and name not in INTERNAL)
    assert outside == []


EXIT_CODES = {
    "logetl.errors.UsageError": 2, "logetl.errors.EnvError": 2, "logetl.errors.RunFailed": 1,
    "logetl.assembly.base.AssemblyError": 2, "logetl.assembly.base.MissingField": 2,
    "logetl.expressions.base.ExpressionError": 2, "logetl.expressions.base.UnknownName": 2,
    "logetl.formats.FormatError": 2, "logetl.flowfile.FlowFileError": 2, "logetl.job.JobError": 2,
    "logetl.incremental.IncrementalError": 2, "logetl.workdir.WorkDirError": 2, "logetl.workdir.OutputsHeld": 1,
    "logetl.io.inputs.InputError": 2, "logetl.io.inputs.InputReadError": 1, "logetl.io.outputs.OutputError": 2,
    "logetl.engines.base.EngineUnavailable": 2, "logetl.engines.base.UnsupportedOperator": 2,
    "logetl.engines.base.InjectedFailure": 1, "logetl.engines.base.TooManyMalformed": 1,
    "logetl.engines.local.spill.MemoryLimitExceeded": 1, "logetl.monitor.alerts.RuleError": 2,
    "logetl.monitor.documents.DocumentError": 2, "logetl.monitor.outbound.WebhookRefused": 2,
    "logetl.monitor.app.ApiError": 1, "logetl.sql.dialect.SqlError": 2, "logetl.sqlstep.SqlError": 2,
    "logetl.report.build.ReportError": 2, "logetl.report.geoip.GeoipError": 2,
}


def test_each_error_class_has_its_exit_code():
    classes = _exception_classes()
    errors = {name for name, cls in classes.items() if issubclass(cls, LogetlError) and name != "logetl.errors.LogetlError"}
    assert errors == set(EXIT_CODES)
    assert {name: classes[name].exit_code for name in EXIT_CODES} == EXIT_CODES
    for name, code in EXIT_CODES.items():   # the code follows the branch: usage 2, a failed run 1
        assert issubclass(classes[name], UsageError) == (code == EXIT_USAGE) or name.endswith("ApiError"), name
        assert issubclass(classes[name], RunFailed) == (code == EXIT_FAILED and not name.endswith("ApiError")), name


@pytest.mark.parametrize("name,also", [
    ("logetl.assembly.base.AssemblyError", ValueError), ("logetl.assembly.base.MissingField", ValueError),
    ("logetl.expressions.base.ExpressionError", ValueError), ("logetl.expressions.base.UnknownName", AttributeError),
    ("logetl.io.inputs.InputReadError", ValueError), ("logetl.engines.base.InjectedFailure", RuntimeError),
    ("logetl.monitor.documents.DocumentError", ValueError), ("logetl.monitor.outbound.WebhookRefused", ValueError),
])
def test_an_error_that_was_a_builtin_error_still_is(name, also):
    """Callers that catch ``ValueError`` (or ``hasattr``'s ``AttributeError``) keep working."""
    cls = _exception_classes()[name]
    assert issubclass(cls, also) and issubclass(cls, LogetlError)
    error = cls("a message é") if name != "logetl.assembly.base.MissingField" else cls("a message é", "ip")
    assert (str(error), error.message) == ("a message é", "a message é")


def test_hasattr_still_reads_an_unknown_name_as_missing():
    import logetl.api as L

    assert not hasattr(L, "fliter") and getattr(L.col("a"), "uper", 7) == 7


class _Kept(FlowListener):
    def flow_started(self, run):
        self.run = run


def test_a_failed_run_is_recorded_on_its_flow_run_and_its_exception_is_left_as_it_came(tmp_path, monkeypatch):
    from logetl.engines.base import InjectedFailure

    monkeypatch.setenv("LOGETL_FAIL_AT", "join")
    kept = _Kept()
    with pytest.raises(InjectedFailure) as caught:
        run_program("join", CORPUS_LOG, {"output": str(tmp_path / "out")}, listener=kept, monitor=False, quiet=True)
    assert [k for k in vars(caught.value) if k.startswith("logetl")] == []
    assert str(caught.value) == "injected failure at step 'join' (LOGETL_FAIL_AT)"
    run = kept.run
    assert (run.status, run.error, run.publishing, run.full, run.written) == (
        FAILED, "injected failure at step 'join' (LOGETL_FAIL_AT)", False, None, {})
    assert [(s.name, s.status) for s in run.steps] == [("parse", "SUCCESSFUL"), ("join", "FAILED")]


def test_a_run_stopped_while_publishing_says_so_on_its_flow_run(tmp_path, monkeypatch):
    from logetl.engines.local import LocalEngine

    def commit(self, ctx):
        raise KeyboardInterrupt

    monkeypatch.setattr(LocalEngine, "commit", commit)
    kept = _Kept()
    with pytest.raises(KeyboardInterrupt) as caught:
        run_program("filter", CORPUS_LOG, {"output": str(tmp_path / "out")}, listener=kept, monitor=False, quiet=True)
    assert [k for k in vars(caught.value) if k.startswith("logetl")] == []
    assert (kept.run.status, kept.run.error, kept.run.publishing) == (STOPPED, "interrupted", True)


STOP_AT = """
import sys
from logetl.engines.local import LocalEngine
from logetl import cli

def stop(self, *args):
    raise KeyboardInterrupt
setattr(LocalEngine, sys.argv[1], stop)
cli.main(sys.argv[2:], prog_name="logetl")
"""


@pytest.mark.parametrize("where,line", [
    ("commit", "logetl: interrupted while publishing the outputs; run the same command again to finish"),
    ("execute_step", "logetl: interrupted; no output was committed"),
])
def test_the_command_line_says_what_a_stopped_run_left_from_its_flow_run(tmp_path, where, line):
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-c", STOP_AT, where, "filter", "-q", "--input", CORPUS_LOG, "--output",
                        str(out)], capture_output=True, env={**os.environ, "LOGETL_MONITOR": "off"}, timeout=300)
    # (the corpus's malformed lines are warned of once they are read, -q or not)
    said = [s for s in p.stderr.decode().splitlines() if not s.startswith("logetl: warning: 40.4% of the lines")]
    assert (p.returncode, said) == (130, [line])
    if where == "commit":       # the same command again finishes
        again = subprocess.run([sys.executable, "-m", "logetl", "filter", "-q", "--input", CORPUS_LOG, "--output",
                                str(out)], capture_output=True, env={**os.environ, "LOGETL_MONITOR": "off"})
        assert again.returncode == 0 and parts(out) == corpus("filter.tsv")
