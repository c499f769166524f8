"""SQL steps (``pipe.sql``): what a query over a pipe's records emits, found when the flow is defined.

A SQL step reads the records of the pipe before it as the table ``input`` (one column per field, typed as
``INPUT_TYPES`` says) and emits the rows of its query. Users write DuckDB's SQL: the local engine runs it
in DuckDB, the Spark engine runs it as Spark SQL, translated by sqlglot (``to_spark``).

The step's fields and types are known at once: DuckDB binds the query over an empty table of the input's
schema (nothing is read) and names the type of each column, which ``OUTPUT_TYPES`` maps back to a logetl
type; a column of a type logetl does not carry (a list, a date, an interval) is refused, and so is a
mistake in the query (a syntax error, an unknown column, with the input's columns named), in one line.
"""
from __future__ import annotations

import re

from logetl.diagnostics import nearest
from logetl.errors import UsageError
from logetl.expressions import BOOLEAN, FIELD_NAME, FIELD_NAME_RULE, FLOAT, INTEGER, STRING, TIMESTAMP

#: the name the query reads its input by
INPUT = "input"

#: logetl type -> the DuckDB type of the input's column (a timestamp is a UTC instant)
INPUT_TYPES = {STRING: "VARCHAR", INTEGER: "BIGINT", FLOAT: "DOUBLE", BOOLEAN: "BOOLEAN",
               TIMESTAMP: "TIMESTAMP WITH TIME ZONE"}

#: DuckDB result type -> logetl type. Every integer is a 64-bit one (DuckDB sums BIGINTs as HUGEINT, Spark as
#: BIGINT: a sum beyond 64 bits fails the run), a DECIMAL (a literal such as 0.5 is one) a float; a
#: TIMESTAMP without a zone (``strptime`` without ``%z``) is taken as UTC, the session zone of both engines.
OUTPUT_TYPES = {
    "VARCHAR": STRING, "BOOLEAN": BOOLEAN,
    "TINYINT": INTEGER, "SMALLINT": INTEGER, "INTEGER": INTEGER, "BIGINT": INTEGER, "HUGEINT": INTEGER,
    "UTINYINT": INTEGER, "USMALLINT": INTEGER, "UINTEGER": INTEGER,
    "FLOAT": FLOAT, "DOUBLE": FLOAT,
    "TIMESTAMP WITH TIME ZONE": TIMESTAMP, "TIMESTAMP": TIMESTAMP, "TIMESTAMP_S": TIMESTAMP,
    "TIMESTAMP_MS": TIMESTAMP, "TIMESTAMP_NS": TIMESTAMP,
}


class SqlError(UsageError, ValueError):
    """A query that cannot be a SQL step (exit 2); the message is one line (the node names the step before it)."""


def output_type(duckdb_type: str) -> str | None:
    """The logetl type of a DuckDB result type, or None when logetl does not carry it."""
    return FLOAT if duckdb_type.startswith("DECIMAL(") else OUTPUT_TYPES.get(duckdb_type)


def one_line(query: str) -> str:
    """The query with every run of white space as one space (how ``explain`` and the monitor show it)."""
    return " ".join(query.split())


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# --- the dialect: the two calls a shared SQL dialect module takes over ----------------------------------------
# ``_check`` and ``_to_spark`` are the only places this step meets the dialect; ``logetl.sql.dialect``'s
# ``check(query, engine, tables)`` and ``to_spark(query)`` have the same signatures and take their place.

def _check(query: str, engine: str | None, tables: dict[str, list[str]]) -> None:
    """Refuses, in one line (``SqlError``), a query sqlglot cannot read as DuckDB's SQL, more than one
    statement, a statement that is not a query, and a table other than ``tables`` (and the query's own
    CTEs). ``engine`` (``local``, ``spark`` or None for either) names the engine in a refusal."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError

    try:
        statements = [s for s in sqlglot.parse(query, read="duckdb") if s is not None]
    except ParseError as exc:
        first = exc.errors[0] if exc.errors else {}
        where = f" at line {first['line']}, column {first['col']}" if first.get("line") else ""
        near = f" near {first['highlight']!r}" if first.get("highlight") else ""
        what = (first.get("description") or str(exc).splitlines()[0]).rstrip(".")
        raise SqlError(f"syntax error{where}{near}: {what}") from None
    if len(statements) != 1:
        raise SqlError(f"a SQL step is one query, not {len(statements)} statements")
    query_ = statements[0]
    if not isinstance(query_, exp.Query):
        raise SqlError(f"a SQL step is a query (SELECT ... FROM {INPUT}), not {query_.key.upper()}")
    ctes = {c.alias_or_name for c in query_.find_all(exp.CTE)}
    for table in query_.find_all(exp.Table):
        name = table.name
        if name and name not in tables and name not in ctes:
            on = f" on the {engine} engine" if engine else ""
            raise SqlError(f"no table {name!r}{on}: the query reads {', '.join(tables)}{nearest(name, list(tables))}")


def _to_spark(query: str) -> str:
    """The query in Spark SQL: the dialect's translation (sqlglot, with DuckDB's null ordering made explicit)."""
    from logetl.sql.dialect import to_spark

    return to_spark(query)


def ordered(query: str) -> bool:
    """Whether the query's outermost clause is an ``ORDER BY`` (its rows then come in that order)."""
    import sqlglot

    return sqlglot.parse_one(query, read="duckdb").args.get("order") is not None


# --- the step's output: bound by DuckDB over an empty input ------------------------------------------------------

_UNKNOWN_COLUMN = re.compile(r'Referenced column "?([^"]+?)"? not found')
_ERROR_KIND = re.compile(r"^[A-Za-z ]*Error: ")


def _binder_message(message: str, fields, table: str = INPUT) -> str:
    """DuckDB's error as one line: its first line without the error class; an unknown column with the
    input's columns (DuckDB adds its candidates and the query text on more lines)."""
    first = _ERROR_KIND.sub("", message.strip().splitlines()[0] if message.strip() else message).rstrip("!")
    unknown = _UNKNOWN_COLUMN.search(first)
    if unknown:
        name = unknown.group(1)
        return f"unknown column {name!r}: {table} has {', '.join(fields)}{nearest(name, list(fields))}"
    return first


def output_of(query: str, fields, types: dict[str, str],
              table: str = INPUT) -> tuple[tuple[str, ...], dict[str, str]]:
    """The fields and types the query emits over an input (the table ``table``) with ``fields`` of ``types``;
    ``SqlError`` for a query that cannot run or emits what logetl does not carry."""
    import duckdb

    if not isinstance(query, str) or not query.strip():
        raise SqlError(f"the query is SQL text (SELECT ... FROM {table}), not {query!r}")
    for f in fields:
        if types[f] not in INPUT_TYPES:
            raise SqlError(f"field {f!r} is {types[f]}: a query reads records (read(...) first)")
    _check(query, None, {table: list(fields)})
    con = duckdb.connect()
    try:
        columns = ", ".join(f"{_quoted(f)} {INPUT_TYPES[types[f]]}" for f in fields)
        con.execute(f"CREATE TABLE {_quoted(table)} ({columns})")
        try:
            relation = con.sql(query)
        except duckdb.Error as exc:
            raise SqlError(_binder_message(str(exc), fields, table)) from None
        if relation is None:
            raise SqlError(f"a SQL step is a query (SELECT ... FROM {table})")
        names, kinds = list(relation.columns), [str(t) for t in relation.types]
    finally:
        con.close()
    out: dict[str, str] = {}
    for name, kind in zip(names, kinds):
        if FIELD_NAME.fullmatch(name) is None:
            raise SqlError(f"column {name!r} needs a field name ({FIELD_NAME_RULE}): ... AS name")
        if name in out:
            raise SqlError(f"column {name!r} is named twice (name each: ... AS other_name)")
        logetl_type = output_type(kind)
        if logetl_type is None:
            raise SqlError(f"column {name!r} is {kind}, a type logetl does not carry (string, integer, float, "
                           f"boolean, timestamp): cast it in the query (CAST(... AS VARCHAR))")
        out[name] = logetl_type
    return tuple(out), out
