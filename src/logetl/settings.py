"""Every setting logetl reads from outside its options, in one table: the ``LOGETL_*`` environment variables,
the ``logetl.*`` keys that ride Spark's ``--conf``, and the defaults the command line shares with the API.

Each entry has its name, its type, its default and its meaning, and is read and checked here only: a module
that needs a setting asks its entry (``settings.MONITOR_GRACE.read()``), never ``os.environ``. A value
logetl cannot use is refused when it is read, in one line naming the variable and the value (``EnvError``,
exit 2). An empty variable is as one that is not set (an unset shell variable expands to nothing).

The reference page of the settings (``docs/reference/settings.md``) is made from this table when the
documentation is built (``docs/hooks/settings_page.py``), so the two cannot differ.
"""
from __future__ import annotations

import os

from logetl.errors import EnvError, UsageError


class Setting:
    """An environment variable: ``read`` gives its value, or ``default`` when it is not set. (Plain classes,
    not dataclasses: the command line imports this table at its start, where each class costs.)"""

    #: the type as the reference page shows it (a subclass's own)
    kind = "text"

    def __init__(self, name: str, kind: str | None = None, default=None, *, meaning: str = "",
                 shown: str = "unset", audience: str = "user", **own):
        self.name = name
        if kind is not None:
            self.kind = kind
        self.default = default
        #: what it does (Markdown; links are relative to the reference page)
        self.meaning = meaning
        #: the default as the reference page shows it (Markdown)
        self.shown = shown
        #: who sets it: "user", or "tests" (a testing aid)
        self.audience = audience
        for key, value in own.items():      # a subclass's own fields (``minimum``, ``choices``)
            if not hasattr(type(self), key):
                raise TypeError(f"{type(self).__name__} has no field {key!r}")
            setattr(self, key, value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def raw(self) -> str | None:
        """The variable's text; None when it is unset or empty."""
        value = os.environ.get(self.name)
        return value if value else None

    def is_set(self) -> bool:
        return self.raw() is not None

    def read(self):
        """The value, checked (``EnvError`` naming the variable and the value), or the default."""
        raw = self.raw()
        return self.default if raw is None else self.parse(raw)

    def parse(self, raw: str):
        return raw


class Number(Setting):
    """A number of seconds, at least ``minimum``."""

    kind = "number"
    minimum = 0.0

    def raw(self) -> str | None:
        value = os.environ.get(self.name)
        return value if value is not None and value.strip() else None

    def parse(self, raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            raise EnvError(f"{self.name}={raw!r} is not a number") from None
        if value != value or value < self.minimum:
            raise EnvError(f"{self.name}={raw!r} must be a number >= {self.minimum:g}")
        return value


class Switch(Setting):
    """``on`` or ``off`` (``1``/``true``/``yes``, ``0``/``false``/``no``); anything else is refused rather than
    read as either."""

    kind = "on or off"

    def raw(self) -> str | None:
        value = os.environ.get(self.name)
        return value if value is not None and value.strip() else None

    def parse(self, raw: str) -> bool:
        value = raw.strip().lower()
        if value in ("on", "1", "true", "yes"):
            return True
        if value in ("off", "0", "false", "no"):
            return False
        raise EnvError(f"{self.name}={raw!r} must be on or off")


class Flag(Setting):
    """On for ``1``, ``true``, ``yes`` or ``on`` (any case), off otherwise. Never refused: it is read while an
    error is being reported, where a second error would hide the first."""

    kind = "flag"

    def __init__(self, name: str, **given):
        super().__init__(name, default=False, **given)

    def parse(self, raw: str) -> bool:
        return raw.lower() in ("1", "true", "yes", "on")


class Choice(Setting):
    """One of ``choices``, in any case (given on as it was written)."""

    kind = "choice"
    choices: tuple[str, ...] = ()

    def parse(self, raw: str) -> str:
        if raw.upper() not in self.choices:
            raise EnvError(f"{self.name}={raw!r} must be one of {', '.join(self.choices)}")
        return raw


class HttpUrl(Setting):
    """An ``http://`` or ``https://`` URL with a host."""

    kind = "URL"

    def parse(self, raw: str) -> str:
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(raw)
            parts.port   # noqa: B018 - raises ValueError for a port that is not a number
            ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        except ValueError:
            ok = False
        if not ok:
            raise EnvError(f"{self.name}={raw!r} is not an http:// or https:// URL with a host")
        return raw


class Listing(Setting):
    """Comma-separated entries (each checked where it is used, by the option it stands for)."""

    kind = "list"

    def __init__(self, name: str, **given):
        super().__init__(name, default=(), **given)

    def parse(self, raw: str) -> list[str]:
        return [entry for entry in raw.split(",") if entry]


class Size(Setting):
    """A number of bytes: ``64M``, ``1G``, ``300KiB``, ``4096`` (K, M, G are powers of 1024), at least
    ``minimum``."""

    kind = "size"
    minimum = 1
    maximum: int | None = None

    def parse(self, raw: str) -> int:
        import re

        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(?:i?[bB])?\s*", raw)
        if not m:
            raise EnvError(f"{self.name}={raw!r} is not a size (examples: 64M, 1G, 4096)")
        value = int(float(m.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[m.group(2).lower()])
        if value < self.minimum or (self.maximum is not None and value > self.maximum):
            most = "" if self.maximum is None else f" and at most {self.maximum >> 20}M"
            raise EnvError(f"{self.name}={raw!r} must be at least {self.minimum} bytes{most}")
        return value


class Path(Setting):
    """A directory, ``~`` expanded, made absolute."""

    kind = "path"

    def read(self) -> str:
        return os.path.abspath(os.path.expanduser(super().read()))


# --- the environment variables ----------------------------------------------------------------------------------

SPARK_MASTER = Setting(
    "LOGETL_SPARK_MASTER", "text", "local[*]", shown="`local[*]`",
    meaning="the Spark master when `--master` is not given ([Spark and clusters](../guides/spark.md#masters))")
SPARK_LOG_LEVEL = Choice(
    "LOGETL_SPARK_LOG_LEVEL", default="ERROR", shown="`ERROR`",
    choices=("ALL", "DEBUG", "ERROR", "FATAL", "INFO", "OFF", "TRACE", "WARN"),
    meaning="the level of Spark's own log on stderr (`ALL`, `DEBUG`, `ERROR`, `FATAL`, `INFO`, `OFF`, `TRACE` "
            "or `WARN`); when set, Spark's log also stays on while logetl stops a session")
CACHE_DIR = Setting(
    "LOGETL_CACHE_DIR", "path", None, shown="`$XDG_CACHE_HOME/logetl`, else `~/.cache/logetl`",
    meaning="where logetl keeps the driver JVM's class-data archive and its jar for the executors' JVMs")
HOME = Path(
    "LOGETL_HOME", default="~/.logetl", shown="`~/.logetl`",
    meaning="the embedded monitor store (`monitor.db`, made 0700/0600) and the outbox of undelivered run "
            "documents")
MONITOR = Switch(
    "LOGETL_MONITOR", default=True, shown="on",
    meaning="`off` (or `0`, `false`, `no`) sends no run documents")
MONITOR_URL = HttpUrl(
    "LOGETL_MONITOR_URL", default=None,
    meaning="send run documents to this monitor server (`http://` or `https://` with a host) instead of the "
            "embedded store")
API_KEY = Setting(
    "LOGETL_API_KEY", "secret", None,
    meaning="the API key (`lgt_…`) a run sends its documents with")
MONITOR_GRACE = Number(
    "LOGETL_MONITOR_GRACE", default=1.0, shown="`1.0`",
    meaning="seconds a run's end waits for a remote monitor (`0`: not at all)")
MONITOR_UI = Setting(
    "LOGETL_MONITOR_UI", "URL", "http://127.0.0.1:8080", shown="`http://127.0.0.1:8080`",
    meaning="the address printed for a run recorded in the embedded store")
MONITOR_DB = Setting(
    "LOGETL_MONITOR_DB", "URL", None, shown="`sqlite:///$LOGETL_HOME/monitor.db`",
    meaning="the store `logetl monitor` serves when `--db` is not given")
OWNER = Setting(
    "LOGETL_OWNER", "text", None, shown="the OS user",
    meaning="the owner a run is recorded under (a server with API keys uses the key's user)")
OPENLINEAGE_URL = Setting(
    "LOGETL_OPENLINEAGE_URL", "URL", None,
    meaning="`logetl monitor --openlineage-url`")
WEBHOOK_ALLOW = Listing(
    "LOGETL_WEBHOOK_ALLOW",
    meaning="`logetl monitor --webhook-allow` and `logetl monitor alerts add --webhook-allow`, comma-separated")
PROGRESS_AFTER = Number(
    "LOGETL_PROGRESS_AFTER", default=2.0, shown="`2`",
    meaning="seconds before a run on a terminal shows its progress bar")
DEBUG = Flag(
    "LOGETL_DEBUG", shown="unset",
    meaning="`1` shows the traceback beside an error's one line")
FAIL_AT = Setting(
    "LOGETL_FAIL_AT", "step name", "",
    meaning="a step name: that step fails with an injected error when it starts (a testing aid; a name that is "
            "no step of the flow is refused)")
MAX_LINE = Size(
    "LOGETL_MAX_LINE", default=64 << 20, shown="`64M`", minimum=16, maximum=3 << 29,
    meaning="the longest line read as a line, in bytes without its `\\n` (`64M`, `1G`, `4096`; at most `1536M`, "
            "which keeps every piece the parse is given under its 2 GiB): a longer one "
            "is malformed, `too_long` (counted, sampled and trapped whole), and read in bounded memory "
            "([Line contract](line-contract.md#lines-too-long))")
SCREENSHOTS = Setting(
    "LOGETL_SCREENSHOTS", "path", None, audience="tests",
    meaning="(tests) where the monitor's browser tests save the screenshots this site shows")

#: every environment variable, in the order the reference page lists them
ENVIRONMENT: tuple[Setting, ...] = (
    SPARK_MASTER, SPARK_LOG_LEVEL, CACHE_DIR, HOME, MONITOR, MONITOR_URL, API_KEY, MONITOR_GRACE, MONITOR_UI,
    MONITOR_DB, OWNER, OPENLINEAGE_URL, WEBHOOK_ALLOW, PROGRESS_AFTER, MAX_LINE, DEBUG, FAIL_AT, SCREENSHOTS)


# --- logetl's keys on Spark's --conf ---------------------------------------------------------------------------

class ConfKey:
    """A ``logetl.*`` key given with ``--conf KEY=VALUE``: one of ``values``, the first the default."""

    def __init__(self, name: str, values: tuple[str, ...], meaning: str):
        self.name, self.values, self.meaning = name, values, meaning

    @property
    def default(self) -> str:
        return self.values[0]


PARSE = ConfKey(
    "logetl.parse", ("auto", "native", "jvm", "python", "builtin"),
    "which parse path Spark takes ([Parsing on Spark]"
    "(../guides/spark.md#parsing-on-spark-logetls-native-kernel-in-the-executors-jvms))")
JVM_CDS = ConfKey(
    "logetl.jvm.cds", ("auto", "off"),
    "start the driver JVM (and executors on the driver's machine) from the class-data archive")
JVM_JIT = ConfKey(
    "logetl.jvm.jit", ("auto", "tiered"),
    "`auto`: a cluster's driver compiles with C1 only; `tiered` keeps the JVM's C2 too")

#: every ``logetl.*`` key, by name
CONF: dict[str, ConfKey] = {key.name: key for key in (PARSE, JVM_CDS, JVM_JIT)}
CONF_PREFIX = "logetl."


def spark_conf(conf: dict) -> dict[str, str]:
    """Takes logetl's keys out of ``conf`` (Spark's ``--conf`` settings; they never reach Spark) and returns
    every one of them with its value, the default where it was not given. An unknown ``logetl.*`` key or a
    value it does not take is a ``UsageError`` naming it."""
    ours = {k: conf.pop(k) for k in list(conf) if k.startswith(CONF_PREFIX)}
    unknown = sorted(set(ours) - set(CONF))
    if unknown:
        raise UsageError(f"unknown setting --conf {unknown[0]}={ours[unknown[0]]} "
                         f"(logetl's are {', '.join(sorted(CONF))})")
    for k, v in ours.items():
        if v not in CONF[k].values:
            raise UsageError(f"--conf {k}={v}: choose from {', '.join(CONF[k].values)}")
    return {name: ours.get(name, key.default) for name, key in CONF.items()}


# --- defaults the command line shares with the API --------------------------------------------------------------

class Default:
    """An option's default that the command line, the API and an engine share."""

    def __init__(self, option: str, default, shown: str, meaning: str):
        self.option, self.default, self.shown, self.meaning = option, default, shown, meaning


MiB = 1 << 20
MEMORY_LIMIT = Default(
    "--memory-limit", 512 * MiB, "`512M`",
    "memory a run of the local engine should stay under: sorts and distinct sets past it spill to the "
    "working directory ([Memory](../guides/memory.md))")

#: every shared default, in the order the reference page lists them
DEFAULTS: tuple[Default, ...] = (MEMORY_LIMIT,)


# --- the reference page ---------------------------------------------------------------------------------------

def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def environment_table() -> str:
    """The environment variables as a Markdown table (the reference page's)."""
    rows = ["| variable | type | default | meaning |", "|---|---|---|---|"]
    rows += [f"| `{s.name}` | {s.kind} | {_cell(s.shown)} | {_cell(s.meaning)} |" for s in ENVIRONMENT]
    return "\n".join(rows) + "\n"


def conf_table() -> str:
    """logetl's ``--conf`` keys as a Markdown table (the reference page's)."""
    rows = ["| key | values | meaning |", "|---|---|---|"]
    for key in CONF.values():
        values = ", ".join([f"`{key.default}` (default)", *(f"`{v}`" for v in key.values[1:])])
        rows.append(f"| `{key.name}` | {values} | {_cell(key.meaning)} |")
    return "\n".join(rows) + "\n"


def defaults_table() -> str:
    """The shared option defaults as a Markdown table (the reference page's)."""
    rows = ["| option | default | meaning |", "|---|---|---|"]
    rows += [f"| `{d.option}` | {d.shown} | {_cell(d.meaning)} |" for d in DEFAULTS]
    return "\n".join(rows) + "\n"


#: the markers of the reference page that the tables replace (``docs/hooks/settings_page.py``)
TABLES = {"<!-- settings: environment -->": environment_table, "<!-- settings: conf -->": conf_table,
          "<!-- settings: defaults -->": defaults_table}


def render_page(markdown: str) -> str:
    """The reference page with each marker replaced by its table."""
    for marker, table in TABLES.items():
        markdown = markdown.replace(marker, table().rstrip("\n"))
    return markdown
