"""Reading logetl's TSV without loss in Polars, pandas, DuckDB and Spark (docs/guides/reading-tsv.md).

logetl writes fields joined by TAB, ``\\n`` after each record, no header and no quoting or escaping at all,
so a reader must be told to do nothing but split: its defaults strip quotes, turn ``NA`` into a missing
value, infer ``007`` as the number 7, or skip a blank line. The reads below are the guide's snippets, run on
the outputs of Branch, Filter and a flow with integers, booleans and nulls over the conformance corpus plus
lines that trip readers; each result must equal the records as Python splits the bytes. The naive reads are
tested too, so that the guide's warnings are facts of the installed versions, not folklore."""
from __future__ import annotations

import csv
import os

import pytest

import logetl.api as L
from conftest import CORPUS, read
from logetl.job import run_flow, run_program

BRANCH = ["ip", "time", "request", "response", "size"]
FLOW = BRANCH + ["n", "big"]
T = "17/May/2015:10:05:03 +0000"


def _line(ip: bytes, request: bytes, size: bytes = b"5") -> bytes:
    return ip + b" - - [" + T.encode() + b'] "' + request + b'" 200 ' + size + b' "-" "agent"'


#: lines beyond the corpus, each holding a value that some reader's defaults change
EXTRA = [
    _line(b"10.9.0.1", b'"quoted"'),                      # quotes around the whole field
    _line(b"10.9.0.2", b'""'),                            # a field of two quote characters
    _line(b"10.9.0.3", b"NA", b"NA"),                     # NA: pandas' and Polars' null markers
    _line(b"10.9.0.4", b"null", b"null"),
    _line(b"10.9.0.5", b"NaN", b"NaN"),
    _line(b"007", b"GET /#frag HTTP/1.1", b"007"),        # leading zeros: a string, not 7
    _line(b"#10.9.0.6", b"# not a comment", b"1e3"),      # a record starting with '#'
    _line(b"10.9.0.7", b"GET / ", b"+5"),                 # a trailing space
    _line(b"10.9.0.8", b" GET /", b"true"),               # a leading space
    _line(b"10.9.0.9", b"GET /a\\ HTTP/1.1", b"99999999999999999999"),   # a backslash before the TAB
    _line(b"10.9.0.10", b"GET /a\\tb\\\"c 'x' HTTP/1.1", b"-5"),         # backslash escapes, single quotes
    _line(b"10.9.0.11", b'"GET /open', b"1001"),          # a quote that is never closed
    _line(b"10.9.0.12", b"N/A", b"#"),
    _line(b"\x00lead", b"\x00GET /nul-first HTTP/1.1", b"\x00"),         # fields starting with NUL
    _line(b"10.9.0.13", b"\x00", b"12\x00"),              # a field that is one NUL
]


def _records(path: str) -> list[list[str]]:
    """The records as written: the file's text cut at each ``\\n``, each cut at each TAB."""
    text = read(path).decode("utf-8")
    if not text:
        return []
    assert text.endswith("\n")
    return [line.split("\t") for line in text[:-1].split("\n")]


def _flow():
    logs = L.read(fields=BRANCH)
    out = logs.derive(n=L.col("size").to_int(), big=L.col("size").to_int() > 1000)
    return L.Flow("tsv_readers", [out.write("out")])


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict[str, tuple[str, list[str]]]:
    """name -> (part file, field names) of logetl's outputs over the corpus and the extra lines."""
    base = tmp_path_factory.mktemp("tsv")
    log = base / "input.log"
    log.write_bytes(read(os.path.join(CORPUS, "corpus.log")) + b"\n" + b"\n".join(EXTRA) + b"\n")
    junk = base / "junk.log"
    junk.write_bytes(b"not an access log\n")
    bom = base / "bom.log"   # a log saved by an editor that writes a byte order mark
    bom.write_bytes(b"\xef\xbb\xbf" + _line(b"10.0.0.1", b"GET / HTTP/1.1") + b"\n")

    def branch(name, source):
        run_program("branch", str(source), {"output1": str(base / name), "output2": str(base / f"{name}-2")},
                    monitor=False, quiet=True)
        return str(base / name / "part-00000"), BRANCH

    result = {name: branch(name, source) for name, source in
              [("branch", log), ("empty", junk), ("bom", bom)]}
    run_program("filter", str(log), {"output": str(base / "filter")}, monitor=False, quiet=True)
    result["filter"] = str(base / "filter" / "part-00000"), ["ip"]
    run_flow(_flow(), str(log), {"out": str(base / "flow")}, monitor=False, quiet=True)
    result["flow"] = str(base / "flow" / "part-00000"), FLOW
    return result


def test_the_outputs_hold_the_values_that_readers_trip_on(outputs):
    """The reader tests below are only as good as their data: these records must be in it."""
    branch = _records(outputs["branch"][0])
    for record in (["10.9.0.1", T, '"quoted"', "200", "5"], ["10.9.0.2", T, '""', "200", "5"],
                   ["10.9.0.3", T, "NA", "200", "NA"], ["007", T, "GET /#frag HTTP/1.1", "200", "007"],
                   ["#10.9.0.6", T, "# not a comment", "200", "1e3"], ["10.9.0.7", T, "GET / ", "200", "+5"],
                   ["10.9.0.11", T, '"GET /open', "200", "1001"], ["", T, "GET /images/e.png HTTP/1.1", "200", "5"],
                   ["10.0.0.1", T, "GET / HTTP/1.1", "200", ""], ["10.9.0.13", T, "\x00", "200", "12\x00"],
                   ["10.0.0.8", T, "GET /images/x", "404", 'HTTP/1.1"']):
        assert record in branch
    flow = _records(outputs["flow"][0])
    assert ["10.9.0.3", T, "NA", "200", "NA", "", ""] in flow              # to_int of NA: null
    assert ["007", T, "GET /#frag HTTP/1.1", "200", "007", "7", "false"] in flow
    assert ["10.9.0.11", T, '"GET /open', "200", "1001", "1001", "true"] in flow
    assert _records(outputs["filter"][0])[0] == [""]                        # an empty ip: a blank line
    assert _records(outputs["empty"][0]) == []
    assert _records(outputs["bom"][0]) == [["\ufeff10.0.0.1", T, "GET / HTTP/1.1", "200", "5"]]


# --- the guide's reads, one function per reader -------------------------------------------------------------

def polars_strings(path: str, names: list[str]) -> list[list]:
    import polars as pl

    df = pl.read_csv(path, separator="\t", has_header=False, quote_char=None,
                     schema={name: pl.String for name in names}, empty_string_is_null=False)
    return [list(row) for row in df.rows()]


def polars_typed(path: str) -> list[list]:
    import polars as pl

    schema = {name: pl.String for name in BRANCH} | {"n": pl.Int64, "big": pl.Boolean}
    df = pl.read_csv(path, separator="\t", has_header=False, quote_char=None, schema=schema,
                     empty_string_is_null=False)
    return [list(row) for row in df.rows()]


def pandas_strings(path: str, names: list[str]) -> list[list]:
    import pandas as pd

    df = pd.read_csv(path, sep="\t", header=None, names=names, quoting=csv.QUOTE_NONE, dtype=str,
                     na_filter=False, skip_blank_lines=False, encoding="utf-8")
    return df.values.tolist()


def pandas_typed(path: str) -> list[list]:
    import pandas as pd

    df = pd.read_csv(path, sep="\t", header=None, names=FLOW, quoting=csv.QUOTE_NONE,
                     dtype={name: str for name in BRANCH} | {"n": "Int64", "big": "boolean"},
                     keep_default_na=False, na_values={"n": [""], "big": [""]},
                     true_values=["true"], false_values=["false"], skip_blank_lines=False, encoding="utf-8")
    return [[None if v is pd.NA else v for v in row] for row in df.astype(object).values.tolist()]


def duckdb_strings(path: str, names: list[str]) -> list[list]:
    import duckdb

    columns = {name: "VARCHAR" for name in names}
    return [list(row) for row in duckdb.sql(
        "SELECT * FROM read_csv($path, delim = '\t', quote = '', escape = '', header = false, "
        "auto_detect = false, columns = $columns, force_not_null = $names)",
        params={"path": path, "columns": columns, "names": names}).fetchall()]


def duckdb_typed(path: str) -> list[list]:
    import duckdb

    columns = {name: "VARCHAR" for name in BRANCH} | {"n": "BIGINT", "big": "BOOLEAN"}
    return [list(row) for row in duckdb.sql(
        "SELECT * FROM read_csv($path, delim = '\t', quote = '', escape = '', header = false, "
        "auto_detect = false, columns = $columns, force_not_null = $strings)",
        params={"path": path, "columns": columns, "strings": BRANCH}).fetchall()]


def spark_strings(spark, path: str, names: list[str]) -> list[list]:
    from pyspark.sql import functions as F

    fields = F.split(F.col("value"), "\t", -1)
    df = spark.read.text(path).select(*[fields[i].alias(name) for i, name in enumerate(names)])
    return [list(row) for row in df.collect()]


def spark_typed(spark, path: str) -> list[list]:
    from pyspark.sql import functions as F

    fields = F.split(F.col("value"), "\t", -1)
    df = spark.read.text(path).select(
        *[fields[i].alias(name) for i, name in enumerate(BRANCH)],
        F.nullif(fields[5], F.lit("")).cast("bigint").alias("n"),
        F.nullif(fields[6], F.lit("")).cast("boolean").alias("big"))
    return [list(row) for row in df.collect()]


def _reader(request, name: str, kind: str):
    """The reader ``name``'s function of ``kind`` (strings or typed), bound to the Spark session for Spark."""
    function = globals()[f"{name}_{kind}"]
    if name != "spark":
        return function
    spark = request.getfixturevalue("spark_session")
    return lambda *args: function(spark, *args)


READERS = ["polars", "pandas", "duckdb", "spark"]


@pytest.mark.parametrize("output", ["branch", "filter", "flow", "empty"])
@pytest.mark.parametrize("name", READERS)
def test_the_documented_read_keeps_every_value_as_written(request, outputs, name, output):
    path, names = outputs[output]
    assert _reader(request, name, "strings")(path, names) == _records(path)


def _typed(record: list[str]) -> list:
    """A flow record with ``n`` as an integer and ``big`` as a boolean, empty fields of those null."""
    n, big = record[5], record[6]
    return record[:5] + [int(n) if n else None, {"true": True, "false": False, "": None}[big]]


@pytest.mark.parametrize("name", READERS)
def test_the_documented_typed_read_gives_integers_booleans_and_nulls(request, outputs, name):
    path, _ = outputs["flow"]
    expected = [_typed(record) for record in _records(path)]
    assert [None, None] in [row[5:] for row in expected] and [7, False] in [row[5:] for row in expected]
    assert _reader(request, name, "typed")(path) == expected


# --- typed reads of a field that is not always a number -------------------------------------------------------

#: sizes Branch keeps as written, and what each reader's typed read makes of them (None: the read fails).
#: logetl's own ``to_int()`` takes an optional ``-`` and 1 to 18 digits: it gives 0, -5, 7 and 0 here and null
#: for every other value, so typing in the flow and reading the integer it writes is the exact way.
SIZES = ["0", "-5", "007", "-0", "+5", "1e3", "1.0", "1_000", "99999999999999999999", "--"]
AS_INTEGER = {
    "polars": [0, -5, 7, 0, 5, None, None, None, None, None],
    "pandas": [0, -5, 7, 0, 5, 1000, 1, None, None, None],
    "duckdb": [0, -5, 7, 0, 5, 1000, 1, 1000, None, None],
    "spark": [0, -5, 7, 0, 5, None, None, None, None, None],
}


@pytest.fixture(scope="module")
def sizes(tmp_path_factory) -> list[str]:
    """One Branch output per value of SIZES, each a single record."""
    base = tmp_path_factory.mktemp("sizes")
    paths = []
    for i, size in enumerate(SIZES):
        (base / f"{i}.log").write_bytes(_line(b"10.0.0.1", b"GET / HTTP/1.1", size.encode()) + b"\n")
        run_program("branch", str(base / f"{i}.log"), {"output1": str(base / f"{i}"), "output2": str(base / f"{i}-2")},
                    monitor=False, quiet=True)
        paths.append(str(base / f"{i}" / "part-00000"))
        assert _records(paths[-1]) == [["10.0.0.1", T, "GET / HTTP/1.1", "200", size]]
    return paths


def _size_as_integer(request, name: str, path: str):
    """The ``size`` of a one-record Branch output read as a 64-bit integer by the guide's typed read."""
    if name == "polars":
        import polars as pl

        schema = {field: pl.String for field in BRANCH} | {"size": pl.Int64}
        return pl.read_csv(path, separator="\t", has_header=False, quote_char=None, schema=schema,
                           empty_string_is_null=False).rows()[0][4]
    if name == "pandas":
        import pandas as pd

        return pd.read_csv(path, sep="\t", header=None, names=BRANCH, quoting=csv.QUOTE_NONE,
                           dtype={field: str for field in BRANCH} | {"size": "Int64"}, keep_default_na=False,
                           na_values={"size": [""]}, skip_blank_lines=False)["size"].tolist()[0]
    if name == "duckdb":
        import duckdb

        return duckdb.sql(
            "SELECT size FROM read_csv($path, delim = '\t', quote = '', escape = '', header = false, "
            "auto_detect = false, columns = $columns, force_not_null = $strings)",
            params={"path": path, "columns": {field: "VARCHAR" for field in BRANCH} | {"size": "BIGINT"},
                    "strings": BRANCH[:4]}).fetchall()[0][0]
    from pyspark.sql import functions as F

    fields = F.split(F.col("value"), "\t", -1)
    return request.getfixturevalue("spark_session").read.text(path).select(
        F.nullif(fields[4], F.lit("")).cast("bigint")).collect()[0][0]


@pytest.mark.parametrize("name", READERS)
def test_what_a_typed_read_makes_of_sizes_that_are_not_plain_numbers(request, sizes, name):
    got = []
    for path in sizes:
        try:
            got.append(_size_as_integer(request, name, path))
        except Exception:   # each reader has its own error class; that it fails is what the guide says
            got.append(None)
    assert dict(zip(SIZES, got)) == dict(zip(SIZES, AS_INTEGER[name]))


# --- what the readers' defaults do to the same bytes ----------------------------------------------------------

@pytest.fixture(scope="module")
def naive(tmp_path_factory) -> str:
    """Branch's output of three records: a quoted request, a request NA, a size 007."""
    base = tmp_path_factory.mktemp("naive")
    (base / "in.log").write_bytes(b"\n".join([_line(b"10.0.0.1", b'"quoted"', b"007"), _line(b"10.0.0.2", b"NA", b"6"),
                                             _line(b"10.0.0.3", b"GET / HTTP/1.1", b"7")]) + b"\n")
    run_program("branch", str(base / "in.log"), {"output1": str(base / "a"), "output2": str(base / "b")},
                monitor=False, quiet=True)
    path = str(base / "a" / "part-00000")
    assert _records(path) == [["10.0.0.1", T, '"quoted"', "200", "007"], ["10.0.0.2", T, "NA", "200", "6"],
                              ["10.0.0.3", T, "GET / HTTP/1.1", "200", "7"]]
    return path


def test_polars_defaults_strip_quotes_and_read_007_as_7(naive):
    import polars as pl

    assert pl.read_csv(naive, separator="\t", has_header=False).rows() == [
        ("10.0.0.1", T, "quoted", 200, 7), ("10.0.0.2", T, "NA", 200, 6), ("10.0.0.3", T, "GET / HTTP/1.1", 200, 7)]


def test_pandas_defaults_strip_quotes_read_na_as_missing_and_007_as_7(naive):
    import math

    import pandas as pd

    rows = pd.read_csv(naive, sep="\t", header=None).values.tolist()
    assert math.isnan(rows[1][2])
    rows[1][2] = "(NaN)"
    assert rows == [["10.0.0.1", T, "quoted", 200, 7], ["10.0.0.2", T, "(NaN)", 200, 6],
                    ["10.0.0.3", T, "GET / HTTP/1.1", 200, 7]]


def test_duckdb_defaults_take_the_first_record_for_a_header(naive):
    import duckdb

    relation = duckdb.sql("SELECT * FROM read_csv($path)", params={"path": naive})
    assert relation.columns == ["10.0.0.1", T, "quoted", "200", "007"]
    assert relation.fetchall() == [("10.0.0.2", T, "NA", 200, 6), ("10.0.0.3", T, "GET / HTTP/1.1", 200, 7)]


def test_spark_csv_reader_strips_quotes_and_cannot_turn_quoting_off(spark_session, naive, outputs):
    rows = [list(r) for r in spark_session.read.csv(naive, sep="\t").collect()]
    assert rows[0][2] == "quoted"
    # quote='' means quote character U+0000 to the CSV reader: a field that is a NUL comes back null,
    # and an empty field is null whatever nullValue says
    path, _ = outputs["branch"]
    read = {r[0]: list(r) for r in spark_session.read.csv(path, sep="\t", quote="", escape="").collect()}
    assert read["10.9.0.13"][2] is None
    assert read[None][0:3] == [None, T, "GET /images/e.png HTTP/1.1"]


@pytest.mark.parametrize("name", READERS)
def test_every_reader_drops_a_byte_order_mark_that_starts_the_file(request, outputs, name):
    """No option keeps it: the guide says so. logetl writes one only when the first record's first field
    starts with U+FEFF (an input whose first line starts with a byte order mark)."""
    path, names = outputs["bom"]
    assert _reader(request, name, "strings")(path, names) == [["10.0.0.1", T, "GET / HTTP/1.1", "200", "5"]]
