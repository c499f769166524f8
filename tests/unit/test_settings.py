"""The one settings table (``logetl.settings``): every ``LOGETL_*`` variable and ``logetl.*`` key is declared
there and read only through it, a bad value is one line naming the variable and the value (exit 2), and the
reference page's tables are the table's."""
from __future__ import annotations

import ast
import os
import re
import sys

import pytest

from conftest import CORPUS, logetl

from logetl import settings
from logetl.errors import EnvError, UsageError

SRC = os.path.join(os.path.dirname(os.path.abspath(settings.__file__)))
ROOT = os.path.abspath(os.path.join(SRC, "..", ".."))
CORPUS_LOG = os.path.join(CORPUS, "corpus.log")


def _sources():
    for folder, _, names in os.walk(SRC):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                yield os.path.relpath(path, SRC), open(path, encoding="utf-8").read()


def _environ_reads(text: str) -> list[str]:
    """The names of the environment variables a module reads through ``os.environ`` or ``os.getenv`` with a
    literal name (``os.environ.get("X")``, ``os.environ["X"]``, ``"X" in os.environ``, ``os.getenv("X")``)."""
    names = []
    for node in ast.walk(ast.parse(text)):
        literal = None
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = ast.unparse(node.func)
            if func in ("os.environ.get", "os.getenv", "os.environ.setdefault", "os.environ.pop"):
                literal = node.args[0].value
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ" \
                and isinstance(node.slice, ast.Constant):
            literal = node.slice.value
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant) \
                and any(ast.unparse(c) == "os.environ" for c in node.comparators):
            literal = node.left.value
        if isinstance(literal, str):
            names.append(literal)
    return names


def test_no_module_reads_a_logetl_variable_but_the_table():
    read = {(path, name) for path, text in _sources() if path != "settings.py"
            for name in _environ_reads(text) if name.startswith("LOGETL_")}
    assert read == set()


def test_every_logetl_variable_the_code_names_is_in_the_table():
    declared = {s.name for s in settings.ENVIRONMENT}
    # LOGETL_VERSION is the C kernel's macro, _LOGETL_CHECKPOINT the working directory's marker file
    named = {m for _, text in _sources() for m in re.findall(r"(?<![A-Z_])LOGETL_[A-Z_]+", text)}
    assert named - {"LOGETL_VERSION"} <= declared, named - declared
    assert len(declared) == len(settings.ENVIRONMENT)       # each declared once


def test_every_logetl_conf_key_is_in_the_table_and_the_spark_engine_uses_them():
    assert set(settings.CONF) == {"logetl.parse", "logetl.jvm.cds", "logetl.jvm.jit"}
    folder = os.path.join(SRC, "engines", "spark")
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py"):
            text = open(os.path.join(folder, name), encoding="utf-8").read()
            assert not re.search(r"[\"']logetl\.(parse|jvm)", text), name    # named through the table only


@pytest.mark.parametrize("value", [None, ""])
def test_unset_or_empty_is_the_default(monkeypatch, value):
    for s in settings.ENVIRONMENT:
        if value is None:
            monkeypatch.delenv(s.name, raising=False)
        else:
            monkeypatch.setenv(s.name, value)
    got = {s.name: s.read() for s in settings.ENVIRONMENT}
    assert got == {
        "LOGETL_SPARK_MASTER": "local[*]", "LOGETL_SPARK_LOG_LEVEL": "ERROR", "LOGETL_CACHE_DIR": None,
        "LOGETL_HOME": os.path.expanduser("~/.logetl"), "LOGETL_MONITOR": True, "LOGETL_MONITOR_URL": None,
        "LOGETL_API_KEY": None, "LOGETL_MONITOR_GRACE": 1.0, "LOGETL_MONITOR_UI": "http://127.0.0.1:8080",
        "LOGETL_MONITOR_DB": None, "LOGETL_OWNER": None, "LOGETL_OPENLINEAGE_URL": None,
        "LOGETL_WEBHOOK_ALLOW": (), "LOGETL_PROGRESS_AFTER": 2.0, "LOGETL_DEBUG": False, "LOGETL_FAIL_AT": "",
        "LOGETL_SCREENSHOTS": None, "LOGETL_MAX_LINE": 64 * 1024 * 1024}
    assert not any(s.is_set() for s in settings.ENVIRONMENT)


@pytest.mark.parametrize("setting,raw,value", [
    (settings.SPARK_MASTER, "spark://h:7077", "spark://h:7077"),
    (settings.SPARK_LOG_LEVEL, "warn", "warn"),            # Spark takes a level in any case
    (settings.SPARK_LOG_LEVEL, "INFO", "INFO"),
    (settings.HOME, "rel/dir", os.path.abspath("rel/dir")),
    (settings.HOME, "~/x", os.path.expanduser("~/x")),
    (settings.MONITOR, "OFF", False), (settings.MONITOR, " no ", False), (settings.MONITOR, "1", True),
    (settings.MONITOR, "  ", True),
    (settings.MONITOR_URL, "https://mon.example:8443/x", "https://mon.example:8443/x"),
    (settings.MONITOR_GRACE, "0", 0.0), (settings.MONITOR_GRACE, " 2.5 ", 2.5), (settings.MONITOR_GRACE, " ", 1.0),
    (settings.PROGRESS_AFTER, "1e1", 10.0),
    (settings.WEBHOOK_ALLOW, "a.example,,10.0.0.0/8", ["a.example", "10.0.0.0/8"]),
    (settings.DEBUG, "TRUE", True), (settings.DEBUG, "yes", True), (settings.DEBUG, "0", False),
    (settings.DEBUG, "whatever", False),          # read while an error is shown: never refused
    (settings.FAIL_AT, "join", "join"), (settings.OWNER, "ops-é", "ops-é"),
])
def test_a_value_is_read_as_its_type(monkeypatch, setting, raw, value):
    monkeypatch.setenv(setting.name, raw)
    assert setting.read() == value


@pytest.mark.parametrize("setting,raw,line", [
    (settings.MONITOR, "maybe", "LOGETL_MONITOR='maybe' must be on or off"),
    (settings.MONITOR_GRACE, "soon", "LOGETL_MONITOR_GRACE='soon' is not a number"),
    (settings.MONITOR_GRACE, "-0.5", "LOGETL_MONITOR_GRACE='-0.5' must be a number >= 0"),
    (settings.MONITOR_GRACE, "nan", "LOGETL_MONITOR_GRACE='nan' must be a number >= 0"),
    (settings.PROGRESS_AFTER, "abc", "LOGETL_PROGRESS_AFTER='abc' is not a number"),
    (settings.MONITOR_URL, "ftp://h/", "LOGETL_MONITOR_URL='ftp://h/' is not an http:// or https:// URL with a host"),
    (settings.MONITOR_URL, "http://h:port", "LOGETL_MONITOR_URL='http://h:port' is not an http:// or https:// URL "
                                           "with a host"),
    (settings.SPARK_LOG_LEVEL, "loud", "LOGETL_SPARK_LOG_LEVEL='loud' must be one of ALL, DEBUG, ERROR, FATAL, "
                                       "INFO, OFF, TRACE, WARN"),
])
def test_a_bad_value_is_one_usage_error_naming_the_variable_and_the_value(monkeypatch, setting, raw, line):
    monkeypatch.setenv(setting.name, raw)
    with pytest.raises(EnvError) as caught:
        setting.read()
    assert str(caught.value) == line and caught.value.exit_code == 2


@pytest.mark.parametrize("var,value,line", [
    ("LOGETL_MONITOR", "maybe", "Error: LOGETL_MONITOR='maybe' must be on or off"),
    ("LOGETL_MONITOR_URL", "localhost:8080", "Error: LOGETL_MONITOR_URL='localhost:8080' is not an http:// or "
                                             "https:// URL with a host"),
    ("LOGETL_MONITOR_GRACE", "later", "Error: LOGETL_MONITOR_GRACE='later' is not a number"),
    ("LOGETL_FAIL_AT", "joni", "Error: LOGETL_FAIL_AT='joni' names no step of flow filter (its steps: parse)"),
    # before the JVM starts: a bad level was a Java error once Spark ran
    ("LOGETL_SPARK_LOG_LEVEL", "loud", "Error: LOGETL_SPARK_LOG_LEVEL='loud' must be one of ALL, DEBUG, ERROR, "
                                       "FATAL, INFO, OFF, TRACE, WARN"),
])
def test_the_command_line_says_a_bad_value_in_one_line_and_exits_2(tmp_path, var, value, line):
    spark = ["--hdfs"] if var.startswith("LOGETL_SPARK_") else []
    p = logetl("filter", *spark, "--input", CORPUS_LOG, "--output", str(tmp_path / "o"), env={var: value})
    assert (p.returncode, p.stderr.decode().splitlines()) == (2, [line])
    assert not (tmp_path / "o").exists()


def test_spark_conf_takes_logetls_keys_out_with_their_defaults():
    conf = {"spark.executor.memory": "2g", "logetl.parse": "jvm"}
    assert settings.spark_conf(conf) == {"logetl.parse": "jvm", "logetl.jvm.cds": "auto", "logetl.jvm.jit": "auto"}
    assert conf == {"spark.executor.memory": "2g"}


@pytest.mark.parametrize("conf,line", [
    ({"logetl.parse": "fast"}, "--conf logetl.parse=fast: choose from auto, native, jvm, python, builtin"),
    ({"logetl.jvm.jit": "c2"}, "--conf logetl.jvm.jit=c2: choose from auto, tiered"),
    ({"logetl.parser": "jvm"}, "unknown setting --conf logetl.parser=jvm "
                               "(logetl's are logetl.jvm.cds, logetl.jvm.jit, logetl.parse)"),
])
def test_a_bad_conf_key_or_value_is_a_usage_error_naming_it(conf, line):
    with pytest.raises(UsageError) as caught:
        settings.spark_conf(dict(conf))
    assert str(caught.value) == line and caught.value.exit_code == 2


def test_the_memory_limit_default_is_the_tables():
    from logetl.engines.local.spill import DEFAULT_LIMIT, parse_size

    assert DEFAULT_LIMIT == settings.MEMORY_LIMIT.default == parse_size("512M")
    p = logetl("filter", "--help")
    assert "(default 512M)" in " ".join(p.stdout.decode().split())


# --- the reference page --------------------------------------------------------------------------------------

PAGE = os.path.join(ROOT, "docs", "reference", "settings.md")


def _built_page(text: str | None = None) -> str:
    """The page as the documentation build makes it (the hook ``mkdocs.yml`` names, given the page's
    ``text``, by default the page's own)."""
    sys.path.insert(0, os.path.join(ROOT, "docs", "hooks"))
    try:
        import settings_page
    finally:
        sys.path.pop(0)

    class File:
        src_uri = "reference/settings.md"

    class Page:
        file = File()

    if text is None:
        text = open(PAGE, encoding="utf-8").read()
    return settings_page.on_page_markdown(text, Page(), None, None)


def test_the_documentation_build_makes_the_reference_page_from_the_table():
    mkdocs = open(os.path.join(ROOT, "mkdocs.yml"), encoding="utf-8").read()
    assert re.search(r"^hooks:\n  - docs/hooks/settings_page\.py$", mkdocs, re.M)
    page = _built_page()
    for table in (settings.environment_table(), settings.conf_table(), settings.defaults_table()):
        assert table in page
    assert "<!-- settings:" not in page
    # each setting on its own row, in the table's order, with its type, default and meaning
    rows = [line for line in page.splitlines() if line.startswith("| `LOGETL_")]
    assert [r.split("`")[1] for r in rows] == [s.name for s in settings.ENVIRONMENT]
    assert rows[4] == ("| `LOGETL_MONITOR` | on or off | on | `off` (or `0`, `false`, `no`) sends no run "
                       "documents |")
    keys = [line.split("`")[1] for line in page.splitlines() if line.startswith("| `logetl.")]
    assert keys == list(settings.CONF)


def test_a_page_that_lost_a_marker_fails_the_build():
    text = open(PAGE, encoding="utf-8").read().replace("<!-- settings: conf -->", "")
    with pytest.raises(ValueError, match=r"^reference/settings.md has lost its marker\(s\) <!-- settings: conf -->$"):
        _built_page(text)
