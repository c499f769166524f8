"""Sink formats on every engine: Parquet and JSON Lines hold exactly the records the contract's TSV holds,
with the flow's types, the field names and order, and the same order of records."""
from __future__ import annotations

import json
import os

import pytest

import logetl.api as L
from conftest import CORPUS, corpus, logetl, require
from logetl.job import run_flow, run_program

CORPUS_LOG = os.path.join(CORPUS, "corpus.log")


def _files(path, suffix):
    names = sorted(os.listdir(path))
    assert "_SUCCESS" in names
    assert [n for n in names if n != "_SUCCESS" and not (n.startswith("part-") and n.endswith(suffix))] == []
    return [os.path.join(path, n) for n in names if n.startswith("part-")]


def read_parquet(path):
    """(column names, rows) of an output's Parquet parts, in name order."""
    import pyarrow.parquet as pq

    names, rows = None, []
    for f in _files(path, ".parquet"):
        table = pq.read_table(f)
        names = names or table.column_names
        assert table.column_names == names
        rows += [tuple(r.values()) for r in table.to_pylist()]
    return names, rows, table.schema


def read_jsonl(path):
    rows, keys = [], None
    for f in _files(path, ".jsonl"):
        with open(f, "rb") as fh:
            for line in fh.read().decode("utf-8").split("\n")[:-1]:   # not splitlines: U+2028 is in a value
                obj = json.loads(line)
                keys = keys or list(obj)
                assert list(obj) == keys            # every object has every field, in field order
                rows.append(tuple(obj.values()))
    return keys, rows


def tsv_rows(data: bytes):
    return [tuple(line.split("\t")) for line in data.decode("utf-8").split("\n")[:-1]]


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_branch_in_each_format_holds_the_tsv_records(engine, tmp_path, fmt):
    import logetl.programs as programs

    flow = programs.get("branch")
    flow.set_output_format(fmt)
    outs = {"output1": str(tmp_path / "a"), "output2": str(tmp_path / "b")}
    run_flow(flow, CORPUS_LOG, outs, engine=engine, monitor=False)
    expected = tsv_rows(corpus("branch.tsv"))
    for out in outs.values():
        if fmt == "parquet":
            names, rows, schema = read_parquet(out)
            assert [str(t) for t in schema.types] == ["string"] * 5
        else:
            names, rows = read_jsonl(out)
        assert names == ["ip", "time", "request", "response", "size"]
        assert rows == expected


def test_join_as_parquet_keeps_the_score_an_integer(engine, tmp_path):
    out = tmp_path / "out"
    run_program("join", CORPUS_LOG, {"output": str(out)}, engine=engine, monitor=False)
    tsv = tsv_rows(b"".join(open(f, "rb").read() for f in _files(out, "")))
    flow_out = tmp_path / "pq"
    from logetl import programs

    flow = programs.get("join")
    flow.set_output_format("parquet")
    run_flow(flow, CORPUS_LOG, {"output": str(flow_out)}, engine=engine, monitor=False)
    names, rows, schema = read_parquet(flow_out)
    assert names == ["ip", "userip", "time", "request", "response", "size", "score"]
    assert str(schema.field("score").type) == "int64"
    assert rows == [r[:-1] + (int(r[-1]),) for r in tsv] and rows


def _typed_flow(fmt):
    logs = L.read()
    typed = logs.derive(n=L.col("size").to_int(), big=L.col("size").to_int() > 1000, name="typed")
    return L.Flow("typed", [typed.select("ip", "request", "n", "big").write("out", format=fmt)])


def test_nulls_integers_and_booleans_in_each_format(engine, tmp_path):
    lines = (b'1.2.3.4 - - [17/May/2015:10:05:03 +0000] "GET /a \\"q\\" NA" 200 123 "-" "x"\n'
             b'1.2.3.5 - - [17/May/2015:10:05:03 +0000] "GET /\xc3\xa9" 200 12a "-" "x"\n'
             b'1.2.3.6 - - [17/May/2015:10:05:03 +0000] "null" 200 4096 "-" "x"\n')
    log = tmp_path / "in.log"
    log.write_bytes(lines)
    expected = [("1.2.3.4", 'GET /a \\"q\\" NA', 123, False), ("1.2.3.5", "GET /é", None, None),
                ("1.2.3.6", "null", 4096, True)]
    run_flow(_typed_flow("parquet"), str(log), {"out": str(tmp_path / "pq")}, engine=engine, monitor=False)
    names, rows, schema = read_parquet(tmp_path / "pq")
    assert rows == expected and [str(t) for t in schema.types] == ["string", "string", "int64", "bool"]
    run_flow(_typed_flow("jsonl"), str(log), {"out": str(tmp_path / "js")}, engine=engine, monitor=False)
    assert read_jsonl(tmp_path / "js") == (["ip", "request", "n", "big"], expected)
    run_flow(_typed_flow("tsv"), str(log), {"out": str(tmp_path / "tsv")}, engine=engine, monitor=False)
    tsv = b"".join(open(f, "rb").read() for f in _files(tmp_path / "tsv", ""))
    assert tsv == ('1.2.3.4\tGET /a \\"q\\" NA\t123\tfalse\n1.2.3.5\tGET /é\t\t\n'
                   '1.2.3.6\tnull\t4096\ttrue\n').encode()


def test_an_empty_parquet_output_has_the_schema(engine, tmp_path):
    log = tmp_path / "in.log"
    log.write_bytes(b"not a log line\n")
    run_flow(_typed_flow("parquet"), str(log), {"out": str(tmp_path / "pq")}, engine=engine, monitor=False)
    names, rows, schema = read_parquet(tmp_path / "pq")
    assert rows == [] and names == ["ip", "request", "n", "big"]


def test_output_format_option_and_a_bad_value(tmp_path):
    p = logetl("filter", "--input", CORPUS_LOG, "--output", str(tmp_path / "o"), "--output-format", "jsonl", "-q")
    assert p.returncode == 0, p.stderr
    assert read_jsonl(tmp_path / "o")[1] == [(line,) for line in corpus("filter.tsv").decode().split("\n")[:-1]]
    p = logetl("filter", "--input", CORPUS_LOG, "--output", str(tmp_path / "x"), "--output-format", "xml")
    assert p.returncode == 2 and "'xml' is not one of 'tsv', 'csv', 'parquet', 'jsonl'" in p.stderr.decode()
    with pytest.raises(L.AssemblyError, match="^sink format 'xml' is not one of tsv, csv, parquet, jsonl$"):
        L.read().write("out", format="xml")


def test_the_local_engines_parquet_reads_alike_in_polars_duckdb_and_spark(spark_session, tmp_path):
    """Written from the kernel's Arrow strings (Branch, by logetl's own encoder) and from Polars frames
    (typed, with nulls, by pyarrow), with only Parquet's own types recorded, some columns plain and without
    statistics: every reader gets the records and types the flow wrote."""
    import duckdb
    import polars as pl

    import logetl.programs as programs

    flow = programs.get("branch")
    flow.set_output_format("parquet")
    run_flow(flow, CORPUS_LOG, {"output1": str(tmp_path / "a"), "output2": str(tmp_path / "b")}, monitor=False)
    log = tmp_path / "in.log"
    log.write_bytes(b'1.2.3.4 - - [17/May/2015:10:05:03 +0000] "GET /a" 200 123 "-" "x"\n'
                    b'1.2.3.5 - - [17/May/2015:10:05:04 +0000] "GET /b" 200 12a "-" "x"\n'
                    b'1.2.3.6 - - [17/May/2015:10:05:05 +0000] "GET /c" 200 4096 "-" "x"\n')
    run_flow(_typed_flow("parquet"), str(log), {"out": str(tmp_path / "t")}, monitor=False)
    cases = [(tmp_path / "a", tsv_rows(corpus("branch.tsv")), ["string"] * 5, ["VARCHAR"] * 5),
             (tmp_path / "t", [("1.2.3.4", "GET /a", 123, False), ("1.2.3.5", "GET /b", None, None),
                               ("1.2.3.6", "GET /c", 4096, True)],
              ["string", "string", "bigint", "boolean"], ["VARCHAR", "VARCHAR", "BIGINT", "BOOLEAN"])]
    for out, expected, spark_types, duckdb_types in cases:
        path = str(out / "part-00000.parquet")
        frame = pl.read_parquet(path)
        assert list(frame.iter_rows()) == expected
        assert [str(t) for t in frame.dtypes] == [{"string": "String", "bigint": "Int64", "boolean": "Boolean"}[t]
                                                  for t in spark_types]
        rel = duckdb.sql(f"select * from read_parquet('{path}')")
        assert rel.fetchall() == expected and [str(t) for t in rel.types] == duckdb_types
        df = spark_session.read.parquet(path)
        assert [tuple(r) for r in df.collect()] == expected
        assert [f.dataType.simpleString() for f in df.schema.fields] == spark_types
    # logetl's own encoder (Branch's output above): its dictionary, plain and statistics choices, in Spark
    from test_parquet_encoder import encoder, write_cases

    require(encoder.available(), "logetl._parquet was not built (no C compiler) or libzstd.so.1 is missing")
    rows = write_cases(tmp_path / "cases.parquet")
    df = spark_session.read.parquet(str(tmp_path / "cases.parquet"))
    assert [tuple(r) for r in df.collect()] == rows
    assert df.where("rising >= 't003000'").count() == 3_007


def test_jsonl_escapes_control_characters_alike(engine, tmp_path):
    r"""A control character without a short escape is \u00xx in lower-case hex on both engines (Spark's
    Jackson writes upper case), in plain, partitioned and aggregate outputs; a user's text \u001B (JSON
    \\u001B) and a backslash before a control character stay as they are."""
    log = tmp_path / "in.log"
    log.write_bytes(b'1.1.1.1 - - [17/May/2015:10:05:03 +0000] "GET /a\x01\x0b\x1b\x1f\x1a\x1a \\u001B \\\x1b"'
                    b' 200 0\n')
    r = L.read("common", fields=("ip", "request", "response"))
    g = r.group_by("request", name="g").agg(n=L.count())
    flow = L.Flow("esc", [r.write("js", format="jsonl"), r.write("pj", format="jsonl", partition_by="response"),
                          g.write("ag", format="jsonl")])
    outs = {t: str(tmp_path / t) for t in ("js", "pj", "ag")}
    run_flow(flow, str(log), outs, engine=engine, monitor=False)
    req = r'"GET /a\u0001\u000b\u001b\u001f\u001a\u001a \\u001B \\\u001b"'
    assert b"".join(open(f, "rb").read() for f in _files(outs["js"], ".jsonl")) == \
        f'{{"ip":"1.1.1.1","request":{req},"response":"200"}}\n'.encode()
    leaf = os.path.join(outs["pj"], "response=200")
    assert b"".join(open(os.path.join(leaf, f), "rb").read() for f in sorted(os.listdir(leaf))) == f'{{"ip":"1.1.1.1","request":{req}}}\n'.encode()
    assert b"".join(open(f, "rb").read() for f in _files(outs["ag"], ".jsonl")) == \
        f'{{"request":{req},"n":1}}\n'.encode()


def test_parquet_columns_are_all_optional(engine, tmp_path):
    """Every Parquet column is nullable (``optional``) on both engines, also one Spark knows is never null
    (a count, a count_distinct, a coalesce with a literal, an is_null): the same schema from each."""
    import pyarrow.parquet as pq

    log = tmp_path / "in.log"
    log.write_bytes(b'1.1.1.1 - - [17/May/2015:10:05:03 +0000] "GET /a" 200 12\n'
                    b'1.1.1.2 - - [17/May/2015:10:05:04 +0000] "GET /b" 200 0\n')
    r = L.read("common", fields=("ip", "request", "response", "size"))
    g = r.group_by("response", name="g").agg(n=L.count(), c=L.count("ip"), d=L.count_distinct("ip"),
                                             s=L.sum(L.col("size").to_int()))
    d = g.derive(z=L.coalesce(L.col("s"), 0), e=L.col("s").is_null(), name="d")
    flow = L.Flow("nn", [d.write("pq", format="parquet")])
    run_flow(flow, str(log), {"pq": str(tmp_path / "pq")}, engine=engine, monitor=False)
    names, rows, schema = read_parquet(tmp_path / "pq")
    assert rows == [("200", 2, 2, 2, 12, 12, False)]
    assert names == ["response", "n", "c", "d", "s", "z", "e"]
    assert [f.nullable for f in schema] == [True] * 7
    for f in _files(tmp_path / "pq", ".parquet"):       # optional in the file: a definition level
        columns = pq.ParquetFile(f).schema
        assert [columns.column(i).max_definition_level for i in range(len(columns))] == [1] * 7
