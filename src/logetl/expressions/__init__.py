"""Portable expressions: what a filter keeps, what ``derive`` computes, what an aggregate reads.

Each class only *describes* a value computed from one record's fields; every engine compiles it through
its own table (``logetl.engines.local.expressions.COMPILE``, ``logetl.engines.spark.expressions.COMPILE``),
one entry per class, so adding an expression is one class here plus one entry per engine. An engine that
lacks an entry refuses the flow before running, naming the expression.

Types are checked when the flow is defined: ``string``, ``integer`` (64-bit), ``float`` (64-bit, always
finite, see ``FLOAT_LIMIT``), ``boolean`` and ``timestamp`` (an instant in UTC, to the second:
``timestamp`` of a log time, ``trunc``, ``epoch``, ``day_of_week``, ``hour_of_day``; see the section on
times). Parsed fields are strings; ``to_int``, ``to_float`` and ``to_string`` (or ``cast``) convert.
Integers and floats mix in ``+ - *``, comparisons and conditionals (the integer becomes the nearest
float); ``/`` is always a float. A float is written as the shortest decimal that reads back as the same
float, without an exponent (``render_float``). Null (a missing value) follows SQL: a comparison or function of null is null, a filter
keeps only records whose predicate is true, ``and``/``or`` are three-valued, a sink writes null as the
empty field. Every expression's semantics is written in its docstring and is the same on every engine;
``tests/flows/test_expressions.py`` runs each one on both engines and compares the bytes.

Strings (the section at the end): regex capture (``extract``), matching ignoring ASCII case, the parts of
a request line or URL (``Method``, ``Path``, ``QueryString``, ``QueryParam``, ``UrlHost``), percent-decoding
(``UrlDecode``) and the aggregates ``first``/``last`` in a given order (``tests/vocabulary/test_vocabulary_strings.py``).

One module per family: ``base`` (types, errors, ``Expr``, fields and literals), ``logic`` (comparisons,
and/or/not, nulls, ``coalesce``, ``when``), ``numbers``, ``strings``, ``urls``, ``times`` and ``aggregates``;
every name is imported from ``logetl.expressions``.
"""
from __future__ import annotations

from logetl.expressions.base import (  # noqa: F401
    BOOLEAN, Col, Compiler, Expr, ExpressionError, FIELD_NAME, FIELD_NAME_RULE, FLOAT, INTEGER, INT_DIGITS,
    INT_PATTERN, Lit, NUMBERS, STRING, UnknownName, _literal, _need, _values, _wrap, field_name)
from logetl.expressions.logic import And, Case, Coalesce, Compare, IsIn, IsNull, Not, Or, When, when  # noqa: F401
from logetl.expressions.numbers import (  # noqa: F401
    Arithmetic, CASTS, FLOAT_INTEGRAL, FLOAT_LIMIT, FLOAT_MIN_NORMAL, FLOAT_PATTERN, ROUND_DIGITS, Round, ToFloat,
    ToInt, ToString, _number, cast, float_literal, render_float)
from logetl.expressions.strings import (  # noqa: F401
    Concat, Contains, Crc32, EndsWith, Hash64, Extract, Lower, Matches, SplitPart, StartsWith, Substring, Upper,
    _ESCAPABLE, _META, _StringMap, _StringTest, _class_char, _class_text, _flag, _fold_class, _group_shape,
    fold_ascii_case, portable_regex, regex_escape)
from logetl.expressions.urls import (  # noqa: F401
    DECODED_ESCAPE, Method, Path, QueryParam, QueryString, REQUEST_LINE, SCHEME, URL_EMPTY_PATH, URL_HOST,
    URL_PATH, URL_QUERY, UTF8_HEX, UrlDecode, UrlHost)
from logetl.expressions.times import (  # noqa: F401
    Day, DayOfWeek, EPOCH_VALID, Epoch, FromEpoch, Hour, HourOfDay, ISO_OFFSET_VALID, ISO_TIME_VALID, LOCAL_WIDTH, LOG_TIME_PATTERN, LOG_TIME_VALID,
    MAX_EPOCH, MIN_EPOCH, MONTHS, MS_TIME_VALID, TIMESTAMP, TIME_UNITS, Timestamp, Trunc, TruncLocal, _LogTime, _TimePart, _log_time_valid,
    _unit)
from logetl.expressions.aggregates import (  # noqa: F401
    Aggregate, Avg, Count, CountDistinct, First, Last, Max, Median, Min, Percentile, Sum, _Extreme, _Ordered,
    _exact_sum, _order_keys)

#: the public names (the API reference documents each)
__all__ = [
    'Aggregate', 'And', 'Arithmetic', 'Avg', 'BOOLEAN', 'CASTS', 'Case', 'Coalesce', 'Col', 'Compare', 'Compiler',
    'Concat', 'Contains', 'Count', 'CountDistinct', 'Crc32', 'DECODED_ESCAPE', 'Hash64', 'Day', 'DayOfWeek', 'EndsWith',
    'EPOCH_VALID', 'Epoch', 'Expr', 'ExpressionError', 'Extract', 'FIELD_NAME', 'FIELD_NAME_RULE', 'FLOAT', 'FLOAT_INTEGRAL',
    'FLOAT_LIMIT', 'FLOAT_MIN_NORMAL', 'FLOAT_PATTERN', 'First', 'FromEpoch', 'Hour', 'HourOfDay', 'INTEGER',
    'INT_DIGITS', 'INT_PATTERN', 'IsIn', 'IsNull', 'ISO_OFFSET_VALID', 'ISO_TIME_VALID', 'LOCAL_WIDTH', 'LOG_TIME_PATTERN', 'LOG_TIME_VALID', 'MS_TIME_VALID', 'Last',
    'Lit', 'Lower', 'MAX_EPOCH', 'MIN_EPOCH', 'MONTHS', 'Matches', 'Max', 'Median', 'Method', 'Min', 'NUMBERS',
    'Not', 'Or', 'Path', 'Percentile', 'QueryParam', 'QueryString', 'REQUEST_LINE', 'ROUND_DIGITS', 'Round',
    'SCHEME', 'STRING', 'SplitPart', 'StartsWith', 'Substring', 'Sum', 'TIMESTAMP', 'TIME_UNITS', 'Timestamp',
    'ToFloat', 'ToInt', 'ToString', 'Trunc', 'TruncLocal', 'URL_EMPTY_PATH', 'URL_HOST', 'URL_PATH', 'URL_QUERY',
    'UTF8_HEX', 'UnknownName', 'Upper', 'UrlDecode', 'UrlHost', 'When', 'cast', 'field_name', 'float_literal',
    'fold_ascii_case', 'portable_regex', 'regex_escape', 'render_float', 'when']
