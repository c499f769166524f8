"""The one SQL dialect of logetl: DuckDB's, checked before anything runs, and translated for Spark.

A query is written in DuckDB's SQL. ``check`` parses it with DuckDB's parser (and, for Spark, with sqlglot,
``read="duckdb"``), binds it in DuckDB against empty tables of the given columns (every column a string, as parsed), and refuses, as one line
(``SqlError``, exit 2), a syntax error (with its line and column), an unknown column (with the table's
columns), a statement that is not a query, and, for the Spark engine, any construct outside the portable
subset (naming it and the engine). ``to_spark`` writes the checked query as Spark SQL, with the fixes the
subset needs beyond what sqlglot does.

The portable subset (``_portable_syntax`` and ``_portable_functions``: sqlglot's node classes) is what
gives the same rows on DuckDB and on Spark; the local engine runs all of DuckDB's SQL, the Spark engine only the subset.
"""
from __future__ import annotations

import contextlib
import functools
import json
import re
import threading
from dataclasses import dataclass, field

from logetl.errors import UsageError
from logetl.expressions import BOOLEAN, FLOAT, INTEGER, STRING, TIMESTAMP

__all__ = ["SqlError", "Checked", "check", "portable", "referenced", "to_spark", "ENGINES"]

ENGINES = ("local", "spark")


class SqlError(UsageError):
    """A query that cannot run: a syntax or binder error, or a construct the engine does not run (exit 2)."""


#: the syntax of the portable subset (sqlglot's node classes): queries, CTEs, joins, grouping, windows,
#: conditions, arithmetic, casts, literals
def _portable_syntax():
    from sqlglot import exp

    return (
    exp.Select, exp.From, exp.Table, exp.TableAlias, exp.Column, exp.Identifier, exp.Star, exp.Alias,
    exp.Literal, exp.Boolean, exp.Null, exp.With, exp.CTE, exp.Join, exp.Where, exp.Group, exp.Having,
    exp.Order, exp.Ordered, exp.Limit, exp.Offset, exp.Distinct, exp.Subquery, exp.Union, exp.Paren,
    exp.And, exp.Or, exp.Not, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Is, exp.In, exp.Between,
    exp.Like, exp.ILike, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.Neg, exp.DPipe,
    exp.Case, exp.If, exp.Cast, exp.TryCast, exp.DataType, exp.Filter, exp.Window, exp.WindowSpec,
    exp.Tuple, exp.Var, exp.Interval,
    )


#: the functions of the portable subset (sqlglot's node classes), with the name a message gives them
def _portable_functions():
    from sqlglot import exp

    return {
    exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max",
    exp.Round: "round", exp.Abs: "abs", exp.Floor: "floor", exp.Ceil: "ceil",
    exp.Lower: "lower", exp.Upper: "upper", exp.Length: "length", exp.Substring: "substring",
    exp.Concat: "concat", exp.Coalesce: "coalesce", exp.Trim: "trim", exp.Replace: "replace",
    exp.RegexpExtract: "regexp_extract", exp.RegexpLike: "regexp_matches", exp.SplitPart: "split_part",
    exp.StartsWith: "starts_with", exp.Left: "left", exp.Right: "right",
    exp.StrToTime: "strptime", exp.TimeToUnix: "epoch", exp.TimeToStr: "strftime", exp.UnixToTime: "to_timestamp",
    exp.TimestampTrunc: "date_trunc", exp.DateTrunc: "date_trunc", exp.Extract: "extract",
    exp.Hour: "hour", exp.Minute: "minute", exp.Day: "day", exp.Month: "month", exp.Year: "year",
    exp.DayOfWeek: "dayofweek",
    exp.Lag: "lag", exp.Lead: "lead", exp.RowNumber: "row_number", exp.Rank: "rank",
    exp.DenseRank: "dense_rank", exp.CountIf: "count_if",
    }

#: DuckDB's types -> logetl's field types (``logetl.expressions``); a DATE is written as its ISO text
_TYPES = [(re.compile(r"(TINY|SMALL|BIG|HUGE|U?)INT(EGER)?|UBIGINT|UHUGEINT|USMALLINT|UTINYINT|UINTEGER"), INTEGER),
          (re.compile(r"DOUBLE|FLOAT|REAL|DECIMAL\(.*\)"), FLOAT),
          (re.compile(r"BOOLEAN"), BOOLEAN),
          (re.compile(r"TIMESTAMP( WITH TIME ZONE|_S|_MS|_NS)?"), TIMESTAMP),
          (re.compile(r"VARCHAR|DATE"), STRING)]


@dataclass
class Checked:
    """A query that passed ``check``: its result's columns as (name, logetl type) with DuckDB's type beside
    (``duck_types``), and its sqlglot tree (``tree``, parsed when first asked for)."""

    query: str
    columns: tuple[tuple[str, str], ...]
    duck_types: tuple[str, ...]
    _tree: object = field(default=None, repr=False)

    @property
    def tree(self):
        if self._tree is None:
            self._tree = _parse(self.query)
        return self._tree

    @property
    def ordered(self) -> bool:
        """Whether the query's result has an order (an ``ORDER BY`` on its outermost query)."""
        return self.tree.args.get("order") is not None

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.columns)


def check(query: str, engine: str, tables: dict[str, list[str]]) -> Checked:
    """The query ``query`` checked for ``engine`` (``local`` or ``spark``) over ``tables`` (name -> its
    columns, each a string), before anything runs; ``SqlError`` (one line) when it cannot run."""
    if engine not in ENGINES:
        raise SqlError(f"unknown SQL engine {engine!r} ({', '.join(ENGINES)})")
    if not isinstance(query, str) or not query.strip():
        raise SqlError("the SQL query is empty")
    _only_queries(query, tables)      # DuckDB's parser: the local engine needs no other
    tree = portable(query, engine)
    names, types = _bind(query, tables)
    return Checked(query, _columns(names, types), tuple(types), tree)


def portable(query: str, engine: str):
    """Refuses (``SqlError``, one line naming the construct and the engine) a query outside what ``engine``
    runs: on Spark, the portable subset; the local engine runs all of DuckDB's SQL. Returns sqlglot's tree
    of the query when it was parsed (Spark), else None."""
    if engine != "spark":
        return None
    tree = _parse(query)
    _portable(tree)
    return tree


def referenced(query: str, columns: list[str]) -> list[str] | None:
    """The columns of its one table the query may read (in ``columns``' order), or None when that cannot be told
    from its text (a ``*``, a query DuckDB's parser does not read): a parse then builds only those. The caller
    binds the query again over them and keeps them only when the result is the same."""
    tree = _serialized(query)
    if tree is None or any(n.get("class") == "STAR" for n in _nodes(tree)):
        return None
    names = {n["column_names"][-1].lower() for n in _nodes(tree) if n.get("class") == "COLUMN_REF"}
    kept = [c for c in columns if c.lower() in names]
    return kept or list(columns[:1])    # count(*) alone: one column still carries the rows


def reads_once(query: str, table: str) -> bool:
    """Whether the query reads ``table`` exactly once (one reference, no CTE of that name): DuckDB may then
    read it as a stream."""
    tree = _serialized(query)
    if tree is None:
        return False
    nodes = list(_nodes(tree))
    ctes = {entry.get("key", "").lower() for n in nodes for entry in (n.get("cte_map") or {}).get("map", [])}
    reads = [n for n in nodes if n.get("type") == "BASE_TABLE" and n.get("table_name", "").lower() == table.lower()]
    return table.lower() not in ctes and len(reads) == 1


@functools.lru_cache(maxsize=32)
def _serialized(query: str):
    """DuckDB's parse tree of ``query`` (``json_serialize_sql``), or None when it has none."""
    import duckdb

    with _checking() as con:
        try:
            tree = json.loads(con.execute("SELECT json_serialize_sql(?)", [query]).fetchone()[0])
        except duckdb.Error:
            return None
    return None if tree.get("error") else tree


_checker_lock = threading.Lock()


@contextlib.contextmanager
def _checking():
    """The one DuckDB connection every check of the process uses (one thread, nothing stored: a connection
    costs a twentieth of a second to open), one check at a time."""
    with _checker_lock:
        yield _checker()


@functools.cache
def _checker():
    import duckdb

    return duckdb.connect(config={"threads": 1})


def _nodes(tree):
    """Every object of a serialized tree, depth first."""
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            yield node
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)


def to_spark(query: str, tables: dict[str, str] | None = None) -> str:
    """``query`` (DuckDB's SQL, in the portable subset) as Spark SQL: sqlglot's translation, with explicit
    null ordering (DuckDB sorts nulls last, Spark first); ``tables`` renames the tables it reads (name ->
    the name Spark knows it by; a CTE of the same name is left alone)."""
    from sqlglot import exp

    tree = _parse(query)
    if tables:
        ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
        for table in tree.find_all(exp.Table):
            name = table.name
            if name in tables and name.lower() not in ctes and not table.args.get("db"):
                alias = table.alias or name
                table.set("this", exp.to_identifier(tables[name]))
                table.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
    return tree.sql(dialect="spark")


# --- the checks -------------------------------------------------------------------------------------------------

def _only_queries(query: str, tables) -> None:
    """DuckDB's parser, the dialect's own: a syntax error with its line and column; one statement, a query,
    reading no table function."""
    import duckdb

    with _checking() as con:
        try:
            statements = con.extract_statements(query)
        except duckdb.ParserException as exc:
            text = str(exc)
            what = text.splitlines()[0].removeprefix("Parser Error: ").removeprefix("syntax error ")
            raise SqlError(f"SQL syntax error{_caret(query, text)}: {what}") from None
        if len(statements) != 1:
            raise SqlError(f"give one query, not {len(statements)} statements")
        kind = str(statements[0].type).rsplit(".", 1)[-1]
        if kind != "SELECT":
            raise SqlError(f"only queries run (SELECT ..., WITH ...), not {kind}")
    tree = _serialized(query) or {}
    function = _table_function(tree)
    if function:
        raise SqlError(f"the table function {function}(): a query reads only the table{'s' if len(tables) > 1 else ''} "
                       f"{', '.join(tables)}")


def _table_function(node) -> str | None:
    """The name of the first table function in DuckDB's tree of a query, or None."""
    if isinstance(node, dict):
        if node.get("type") == "TABLE_FUNCTION":
            return (node.get("function") or {}).get("function_name", "?")
        values = node.values()
    elif isinstance(node, list):
        values = node
    else:
        return None
    for value in values:
        found = _table_function(value)
        if found:
            return found
    return None


def _caret(query: str, text: str) -> str:
    """`` at line L, column C`` from DuckDB's message (its ``LINE L: ...`` and the caret under it)."""
    m = re.search(r"^(LINE (\d+): )(.*)\n( *)\^", text, re.M)
    if not m:
        return ""
    number = int(m.group(2))
    lines = query.splitlines() or [""]
    shown, offset = m.group(3), len(m.group(4)) - len(m.group(1))
    if shown.startswith("...") and number <= len(lines):
        start = lines[number - 1].find(shown[3:].removesuffix("..."))
        offset = offset - 3 + start if start >= 0 else -1
    return f" at line {number}, column {offset + 1}" if offset >= 0 else f" at line {number}"


def _parse(query: str):
    import sqlglot

    try:
        trees = sqlglot.parse(query, read="duckdb")
    except sqlglot.errors.ParseError as exc:
        first = exc.errors[0] if exc.errors else {}
        where = f" at line {first.get('line')}, column {first.get('col')}" if first.get("line") else ""
        what = (first.get("description") or str(exc)).splitlines()[0]
        near = first.get("highlight")
        raise SqlError(f"SQL syntax error{where}: {what}" + (f" (near {near!r})" if near else "")) from None
    except sqlglot.errors.TokenError as exc:
        raise SqlError(f"SQL syntax error: {str(exc).splitlines()[0]}") from None
    trees = [t for t in trees if t is not None]
    if len(trees) != 1:
        raise SqlError(f"give one query, not {len(trees)} statements")
    return trees[0]


def _portable(tree) -> None:
    from sqlglot import exp

    syntax, functions = _portable_syntax(), _portable_functions()
    for node in tree.walk():
        if isinstance(node, syntax) or type(node) in functions:
            continue
        if isinstance(node, exp.Anonymous):
            what = f"the function {node.name}()"
        elif isinstance(node, exp.Func):
            what = f"the function {node.sql_name().lower()}()"
        else:
            what = _construct(node)
        raise SqlError(f"{what} is outside the SQL subset that runs on spark: {_snippet(node)}")
    for node in tree.find_all(exp.Join):
        kind = " ".join(filter(None, (node.args.get("method"), node.side, node.kind))).upper()
        if kind not in ("", "INNER", "LEFT", "LEFT OUTER", "RIGHT", "FULL", "CROSS", "OUTER", "LEFT INNER"):
            raise SqlError(f"{kind} JOIN is outside the SQL subset that runs on spark: {_snippet(node)}")


def _construct(node) -> str:
    from sqlglot import exp

    if isinstance(node, exp.Bracket):
        return "a subscript ([...])"
    words = re.sub(r"(?<!^)(?=[A-Z])", " ", type(node).__name__).lower()
    return f"a {words} ({node.key})" if words != node.key else f"a {words}"


def _snippet(node) -> str:
    text = node.sql(dialect="duckdb")
    return text if len(text) <= 60 else text[:57] + "..."


def _bind(query: str, tables) -> tuple[list[str], list[str]]:
    """The result's column names and DuckDB types, from binding the query against empty tables."""
    import duckdb

    with _checking() as con:
        con.execute("BEGIN")        # the empty tables are rolled back: the connection keeps nothing
        try:
            for name, columns in tables.items():
                cols = ", ".join(f'"{c}" VARCHAR' for c in columns)
                con.execute(f'CREATE TABLE "{name}" ({cols})')
            try:
                relation = con.sql(query)
                names, types = list(relation.columns), [str(t) for t in relation.types]
            except duckdb.Error as exc:
                raise SqlError(_binder_message(exc, query, tables)) from None
        finally:
            con.execute("ROLLBACK")
    return names, types


def _binder_message(exc, query: str, tables) -> str:
    text = str(exc)
    first = text.splitlines()[0]
    column = re.search(r'Referenced column "([^"]+)" not found', first)
    if column:
        name = column.group(1)
        where = _position(query, name)
        listed = "; ".join(f"{t} has {', '.join(cols)}" for t, cols in tables.items())
        return f"unknown column {name!r}{where}: {listed}"
    table = re.search(r"Table with name (\S+) does not exist", first)
    if table:
        return f"unknown table {table.group(1)!r}: a query reads {', '.join(tables)}"
    first = re.sub(r"^(\w+) Error: ", r"SQL \1 error: ", first)
    line = re.search(r"^LINE (\d+): ", text, re.M)
    return first + (f" (line {line.group(1)})" if line else "")


def _position(query: str, name: str) -> str:
    """`` at line L, column C`` of the column ``name`` in ``query`` (sqlglot's tokens know where they are)."""
    from sqlglot import exp

    try:
        tree = _parse(query)
    except SqlError:
        return ""
    for column in tree.find_all(exp.Column):
        if column.name.lower() == name.lower():
            meta = column.this.meta if isinstance(column.this, exp.Identifier) else {}
            if meta.get("line"):
                return f" at line {meta['line']}, column {meta['col'] - len(column.name) + 1}"
    return ""


def _columns(names: list[str], types: list[str]) -> tuple[tuple[str, str], ...]:
    seen: dict[str, str] = {}
    out = []
    for name, duck in zip(names, types):
        kind = next((k for pattern, k in _TYPES if pattern.fullmatch(duck)), None)
        if kind is None:
            raise SqlError(f"the result column {name!r} is {duck}: a result holds strings, integers, floats, "
                           "booleans and timestamps (cast it, e.g. CAST(... AS VARCHAR))")
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", name):
            raise SqlError(f"name the result column {name!r}: ... AS name (letters, digits, _ and -)")
        other = seen.setdefault(name.lower(), name)
        if other != name or (name, kind) in out or any(n.lower() == name.lower() for n, _ in out):
            raise SqlError(f"the result has two columns named {name!r}: name them apart (... AS name)")
        out.append((name, kind))
    return tuple(out)
