"""CSV outputs (RFC 4180) and header lines: the same bytes on both engines, hand-worked; every part file
starts with the header, so that DuckDB, pandas and Python's csv module read a directory of parts back to
the records the flow wrote (checked against the same flow's Parquet output on the real sample log)."""
from __future__ import annotations

import csv
import glob
import os

import pytest

import logetl.api as L
from conftest import CORPUS, SAMPLE, logetl, read, require
from logetl.job import run_flow

T = "17/May/2015:10:05:03 +0000"

#: a comma, escaped quotes and non-ASCII, spaces at both ends, a query that is empty, a size that is no number
LINES = (b'1.2.3.4 - - [17/May/2015:10:05:03 +0000] "GET /a?x=1,2 HTTP/1.1" 200 123\n'
         b'1.2.3.5 - - [17/May/2015:10:05:04 +0000] "GET /\xc3\xa9t\xc3\xa9 \\"q\\"" 404 12a\n'
         b'1.2.3.6 - - [17/May/2015:10:05:05 +0000] " lead? " 200 4096\n'
         b'1.2.3.7 - - [17/May/2015:10:05:06 +0000] "GET /b?" 304 0\n')


def _sinks():
    logs = L.read("common", fields=("ip", "request", "response", "size"))
    typed = logs.derive(n=L.col("size").to_int(), big=L.col("size").to_int() > 1000,
                        query=L.col("request").split_part("?", 2), name="typed").select(
        "ip", "request", "response", "n", "big", "query", name="fields")
    return [
        typed.write("all", format="csv"),
        typed.write("parts", format="csv", partition_by="response"),
        typed.select("query", name="q").write("query", format="csv"),
        logs.derive(text=L.concat(L.col("ip"), "\n", L.col("response"), "\r"), name="nl").select("text", name="t")
            .write("lines", format="csv"),
        typed.group_by("big", name="g").agg(n=L.count()).sort("big", name="s").write("counts", format="csv"),
        logs.select("ip", "response", name="tsv").write("tsvh", header=True),
        logs.filter(L.col("response") == "999", name="none").write("none", format="csv"),
        logs.select("ip", name="ips").write("nohead", format="csv", header=False),
    ]


HEAD = b"ip,request,response,n,big,query\r\n"
EXPECTED = {
    "all": HEAD + b'1.2.3.4,"GET /a?x=1,2 HTTP/1.1",200,123,false,"x=1,2 HTTP/1.1"\r\n'
                  b'1.2.3.5,"GET /\xc3\xa9t\xc3\xa9 \\""q\\""",404,,,\r\n'
                  b"1.2.3.6, lead? ,200,4096,true, \r\n"
                  b'1.2.3.7,GET /b?,304,0,false,""\r\n',
    # a null and an empty string alone in a record are both "": an empty line would be skipped by readers
    "query": b'query\r\n"x=1,2 HTTP/1.1"\r\n""\r\n \r\n""\r\n',
    "lines": b'text\r\n"1.2.3.4\n200\r"\r\n"1.2.3.5\n404\r"\r\n"1.2.3.6\n200\r"\r\n"1.2.3.7\n304\r"\r\n',
    "counts": b"big,n\r\n,1\r\nfalse,2\r\ntrue,1\r\n",
    "tsvh": b"ip\tresponse\n1.2.3.4\t200\n1.2.3.5\t404\n1.2.3.6\t200\n1.2.3.7\t304\n",
    "none": b"ip,request,response,size\r\n",
    "nohead": b"1.2.3.4\r\n1.2.3.5\r\n1.2.3.6\r\n1.2.3.7\r\n",
}
PARTS = {
    "response=200": b"ip,request,n,big,query\r\n"
                    b'1.2.3.4,"GET /a?x=1,2 HTTP/1.1",123,false,"x=1,2 HTTP/1.1"\r\n'
                    b"1.2.3.6, lead? ,4096,true, \r\n",
    "response=304": b'ip,request,n,big,query\r\n1.2.3.7,GET /b?,0,false,""\r\n',
    "response=404": b'ip,request,n,big,query\r\n1.2.3.5,"GET /\xc3\xa9t\xc3\xa9 \\""q\\""",,,\r\n',
}


def headed(directory, suffix: str = ".csv", header: bytes | None = None) -> bytes:
    """A directory's parts as one text: each part must start with the header line (the first part's, or
    ``header``), which is kept once; the rest of each part follows in name order. Nothing but parts and an
    empty ``_SUCCESS`` is there."""
    names = sorted(os.listdir(directory))
    assert [n for n in names if n != "_SUCCESS" and not (n.startswith("part-") and n.endswith(suffix))] == []
    parts = [read(os.path.join(directory, n)) for n in names if n.startswith("part-")]
    assert parts
    first = header if header is not None else parts[0][:parts[0].index(b"\n") + 1]
    assert all(p.startswith(first) for p in parts), parts
    return first + b"".join(p[len(first):] for p in parts)


def test_csv_and_header_lines_are_the_same_bytes_on_both_engines(engine, tmp_path):
    log = tmp_path / "in.log"
    log.write_bytes(LINES)
    sinks = _sinks()
    outs = {s.tap: str(tmp_path / s.tap) for s in sinks}
    run_flow(L.Flow("csv", sinks), str(log), outs, engine=engine, monitor=False, quiet=True)
    for tap, expected in EXPECTED.items():
        suffix = "" if tap == "tsvh" else ".csv"
        assert headed(outs[tap], suffix, header=b"" if tap == "nohead" else None) == expected, tap
    assert sorted(os.listdir(outs["parts"])) == ["_SUCCESS", *PARTS]
    for partition, expected in PARTS.items():
        assert headed(os.path.join(outs["parts"], partition)) == expected, partition
    # an output without records: one part, the header alone
    assert sorted(os.listdir(outs["none"])) == ["_SUCCESS", "part-00000.csv"]
    # the aggregate's parts (several on Spark), each with its header, read back as one table
    import duckdb

    rows = duckdb.sql(f"SELECT * FROM read_csv('{outs['counts']}/part-*.csv', header = true) ORDER BY n, big NULLS FIRST").fetchall()
    assert rows == [(None, 1), (True, 1), (False, 2)]
    assert [r for f in sorted(glob.glob(f"{outs['all']}/part-*.csv"))
            for r in csv.reader(open(f, newline="", encoding="utf-8"))][1:] == [
        ["1.2.3.4", "GET /a?x=1,2 HTTP/1.1", "200", "123", "false", "x=1,2 HTTP/1.1"],
        ["1.2.3.5", 'GET /été \\"q\\"', "404", "", "", ""],
        ["1.2.3.6", " lead? ", "200", "4096", "true", " "],
        ["1.2.3.7", "GET /b?", "304", "0", "false", ""]]


def test_branch_with_header_lines_on_both_engines(engine, tmp_path):
    """Branch's two outputs (a step Spark writes in one pass without a header) with a header line: the
    field names, then the contract's bytes."""
    from logetl.job import run_program

    outs = {"output1": str(tmp_path / "a"), "output2": str(tmp_path / "b")}
    run_program("branch", LOG, outs, engine=engine, monitor=False, quiet=True, header=True)
    for out in outs.values():
        assert headed(out, "") == b"ip\ttime\trequest\tresponse\tsize\n" + read(os.path.join(CORPUS, "branch.tsv"))


def test_sink_options_are_checked_and_shown():
    logs = L.read(fields=("ip", "time", "request", "response", "size"))
    assert logs.write("o", format="csv").describe() == "tap o (csv): ip\ttime\trequest\tresponse\tsize"
    assert logs.write("o", format="csv", header=False).describe() == \
        "tap o (csv, no header): ip\ttime\trequest\tresponse\tsize"
    assert logs.write("o", header=True).describe() == "tap o (tsv, header): ip\ttime\trequest\tresponse\tsize"
    assert logs.write("o").describe() == "tap o: ip\ttime\trequest\tresponse\tsize"
    with pytest.raises(L.AssemblyError, match=r"^sink o: a parquet output has no header line \(tsv and csv have "
                                              r"one\)$"):
        logs.write("o", format="parquet", header=True)
    with pytest.raises(L.AssemblyError, match="^sink o: header is True or False, not 'yes'$"):
        logs.write("o", format="csv", header="yes")
    assert not logs.write("o", format="jsonl", header=False).header
    flow = L.Flow("f", [logs.write("a", format="parquet"), logs.write("b")])
    flow.set_header(True)
    assert [s.header for s in flow.sinks] == [False, True]
    flow.set_output_format("csv")
    flow.set_header(False)
    assert [s.header for s in flow.sinks] == [False, False]
    with pytest.raises(L.AssemblyError, match="^a header line is for TSV and CSV outputs: flow 'p' writes parquet, "
                                              "jsonl$"):
        L.Flow("p", [logs.write("a", format="parquet"), logs.write("b", format="jsonl")]).set_header(True)


LOG = os.path.join(CORPUS, "corpus.log")


def test_the_command_line_writes_csv_and_headers(tmp_path):
    expected = read(os.path.join(CORPUS, "filter.tsv")).split(b"\n")[:-1]
    p = logetl("filter", "--input", LOG, "--output", str(tmp_path / "c"), "--output-format", "csv", "-q")
    assert p.returncode == 0, p.stderr
    assert read(str(tmp_path / "c" / "part-00000.csv")) == b"ip\r\n" + b"".join(
        (b'""' if not ip else ip) + b"\r\n" for ip in expected)       # an empty ip alone is "", not a blank line
    p = logetl("filter", "--input", LOG, "--output", str(tmp_path / "n"), "--output-format", "csv", "--no-header",
               "-q")
    assert p.returncode == 0, p.stderr
    assert read(str(tmp_path / "n" / "part-00000.csv")) == b"".join((b'""' if not ip else ip) + b"\r\n"
                                                                    for ip in expected)
    p = logetl("filter", "--input", LOG, "--output", str(tmp_path / "t"), "--header", "-q")
    assert p.returncode == 0, p.stderr
    assert read(str(tmp_path / "t" / "part-00000")) == b"ip\n" + read(os.path.join(CORPUS, "filter.tsv"))
    p = logetl("filter", "--input", LOG, "--output", str(tmp_path / "x"), "--header", "--output-format", "parquet")
    assert (p.returncode, p.stderr.decode()) == (
        2, "Error: --header: a header line is for TSV and CSV outputs: flow 'filter' writes parquet\n")
    assert not os.path.exists(tmp_path / "x")
    p = logetl("filter", "--input", LOG, "--output", str(tmp_path / "y"), "--output-format", "xlsx")
    assert p.returncode == 2 and "'xlsx' is not one of 'tsv', 'csv', 'parquet', 'jsonl'" in p.stderr.decode()


def test_an_incremental_csv_output_gives_each_new_part_its_header(tmp_path):
    lines = LINES.split(b"\n")
    (tmp_path / "in.log").write_bytes(b"\n".join(lines[:2]) + b"\n")
    (tmp_path / "ips.py").write_text("import logetl.api as L\n\ndef flow(fmt):\n"
                                     "    return L.Flow('ips', [L.read(fmt, fields=['ip']).write('o')])\n")
    args = ["run", "ips.py", "--incremental", "--input", "in.log", "--output", "o=o", "--output-format", "csv",
            "-q", "--format", "common"]
    assert logetl(*args, cwd=str(tmp_path)).returncode == 0
    (tmp_path / "in.log").write_bytes(b"\n".join(lines[:4]) + b"\n")
    p = logetl(*args, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    parts = sorted(n for n in os.listdir(tmp_path / "o") if n.startswith("part-"))
    assert [read(str(tmp_path / "o" / n)) for n in parts] == [b"ip\r\n1.2.3.4\r\n1.2.3.5\r\n",
                                                              b"ip\r\n1.2.3.6\r\n1.2.3.7\r\n"]


def test_overwrite_replaces_a_tsv_output_by_a_csv_one_and_its_partitions(tmp_path):
    """A partitioned CSV output over a partitioned TSV one of the same fields: the TSV parts are not of
    its shape (another format), so --overwrite removes them, saying so, and the directory holds CSV only."""
    log = tmp_path / "in.log"
    log.write_bytes(LINES)
    out = str(tmp_path / "o")

    def flow(fmt):
        return L.Flow("p", [L.read("common", fields=("ip", "response")).write("o", format=fmt,
                                                                             partition_by="response")])
    run_flow(flow("tsv"), str(log), {"o": out}, monitor=False, quiet=True)
    assert read(os.path.join(out, "response=200", "part-00000")) == b"1.2.3.4\n1.2.3.6\n"
    from logetl.errors import UsageError

    with pytest.raises(UsageError, match="holds 'response=200', which is not part of a csv output partitioned by "
                                         r"response \(use --overwrite to replace it\)$"):
        run_flow(flow("csv"), str(log), {"o": out}, monitor=False, quiet=True)
    run_flow(flow("csv"), str(log), {"o": out}, monitor=False, quiet=True, overwrite=True)
    assert sorted(os.listdir(os.path.join(out, "response=200"))) == ["part-00000.csv"]
    assert read(os.path.join(out, "response=200", "part-00000.csv")) == b"ip\r\n1.2.3.4\r\n1.2.3.6\r\n"


# --- the readers ---------------------------------------------------------------------------------------------

#: lines that trip readers (test_tsv_readers' and more): quotes, commas, NA, spaces at both ends, '#', NUL
TRICKY = [f'10.9.0.{i} - - [{T}] "{r}" 200 {s} "-" "a, \\"b\\""'.encode() for i, (r, s) in enumerate([
    ('\\"quoted\\"', "5"), ('\\"\\"', "5"), ("NA", "NA"), ("null", "null"), ("GET /a,b?x=1,2", "007"),
    ("# not a comment", "1e3"), ("GET / ", "+5"), (" GET /?", "12"), ("GET /a\\\\ HTTP/1.1", "-5"),
    ('\\"GET /open', "1001"), ("N/A", "#"), ("caf\u00e9 \u2028 \U0001f600", "0"), ("GET /\x00", "1")])]
FIELDS = ["ip", "time", "request", "response", "size", "referer", "user_agent", "n", "big", "query", "pair"]


def _reader_flow(fmt):
    logs = L.read("combined", fields=("ip", "time", "request", "response", "size"))
    out = logs.derive(referer=L.lit("-"), user_agent=L.concat(L.col("ip"), ", ", L.col("response")),
                      n=L.col("size").to_int(), big=L.col("size").to_int() > 1000,
                      query=L.col("request").split_part("?", 2),
                      pair=L.concat(L.col("response"), "\r\n", L.col("size")))
    return L.Flow("readers", [out.write("out", format=fmt)])


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """(the CSV output's directory, the records as the same flow's Parquet output holds them) over the real
    sample log, the corpus and the lines that trip readers."""
    require(os.path.isfile(SAMPLE), f"the real sample log is not at {SAMPLE} (../shared is absent)")
    import pyarrow.parquet as pq

    base = tmp_path_factory.mktemp("readers")
    log = base / "in.log"
    log.write_bytes(read(SAMPLE) + read(LOG) + b"\n" + b"\n".join(TRICKY) + b"\n")   # (the corpus ends mid-line)
    run_flow(_reader_flow("csv"), str(log), {"out": str(base / "csv")}, monitor=False, quiet=True)
    run_flow(_reader_flow("parquet"), str(log), {"out": str(base / "pq")}, monitor=False, quiet=True)
    table = pq.read_table(str(base / "pq" / "part-00000.parquet"))
    assert table.column_names == FIELDS
    records = [list(r.values()) for r in table.to_pylist()]
    assert len(records) > 4000
    return str(base / "csv"), records, str(log)


def _text(value):
    """A value as CSV holds it (and as readers of text give it): booleans true/false, null as empty."""
    return "" if value is None else {True: "true", False: "false"}.get(value, value) \
        if isinstance(value, bool) else str(value)


def test_the_outputs_hold_what_readers_trip_on(written):
    _, records, _ = written
    by_ip = {r[0]: r for r in records}
    assert by_ip["10.9.0.0"][2] == '\\"quoted\\"' and by_ip["10.9.0.4"][9] == "x=1,2"
    assert by_ip["10.9.0.7"][9] == "" and by_ip["10.9.0.6"][2] == "GET / " and by_ip["10.9.0.2"][7] is None
    assert by_ip["10.9.0.12"][2] == "GET /\x00" and by_ip["10.9.0.11"][2] == "caf\u00e9 \u2028 \U0001f600"


def test_pythons_csv_module_reads_the_records(written):
    path, records, _ = written
    rows = []
    for f in sorted(glob.glob(f"{path}/part-*.csv")):
        with open(f, newline="", encoding="utf-8") as fh:
            file_rows = list(csv.reader(fh))
        assert file_rows[0] == FIELDS
        rows += file_rows[1:]
    assert rows == [[_text(v) for v in r] for r in records]


def test_pandas_reads_the_records(written):
    import pandas as pd

    path, records, _ = written
    frame = pd.concat([pd.read_csv(f, dtype=str, keep_default_na=False, encoding="utf-8")
                       for f in sorted(glob.glob(f"{path}/part-*.csv"))])
    assert list(frame.columns) == FIELDS
    assert frame.values.tolist() == [[_text(v) for v in r] for r in records]


#: RFC 4180, said to DuckDB rather than sniffed (a sample without a doubled quote is taken for no escape)
DIALECT = "header = true, delim = ',', quote = '\"', escape = '\"', new_line = '\\r\\n'"


def test_duckdb_reads_the_records_with_nulls_apart_from_empty_strings(written):
    """With ``allow_quoted_nulls = false``, ``""`` is the empty string and the empty field null; typed
    columns come back as the flow's types."""
    import duckdb

    path, records, _ = written
    strings = duckdb.sql(f"SELECT * FROM read_csv('{path}/part-*.csv', {DIALECT}, all_varchar = true, "
                         "allow_quoted_nulls = false)").fetchall()
    assert [list(r) for r in strings] == [[None if v is None else _text(v) for v in r] for r in records]
    types = {f: "VARCHAR" for f in FIELDS} | {"n": "BIGINT", "big": "BOOLEAN"}
    typed = duckdb.sql(f"SELECT * FROM read_csv('{path}/part-*.csv', {DIALECT}, columns = {types}, "
                       "allow_quoted_nulls = false)").fetchall()
    assert [list(r) for r in typed] == records


def test_the_sample_as_csv_is_the_same_bytes_on_spark(spark_session, written, tmp_path):
    """The real sample log, the corpus and the lines that trip readers, as CSV from Spark: the local
    engine's bytes (Spark's parts, each with the header, in name order)."""
    path, _, log = written
    run_flow(_reader_flow("csv"), log, {"out": str(tmp_path / "spark")}, engine="spark", monitor=False, quiet=True)
    assert headed(str(tmp_path / "spark")) == headed(path)


def test_a_partition_file_opened_again_gets_no_second_header(tmp_path, monkeypatch):
    """The local engine keeps a bounded number of partition files open; one it opens again to append to
    has its header already."""
    from logetl.engines.local import scan as local_scan
    from logetl.engines.local import outputs as local_outputs

    monkeypatch.setattr(local_outputs.SinkOp, "MAX_OPEN_PARTITIONS", 1)
    monkeypatch.setattr(local_scan, "BATCH_ROWS", 1)       # a batch for each file's chunk
    logs = tmp_path / "logs"
    logs.mkdir()
    lines = LINES.split(b"\n")
    for i, chosen in enumerate([(0, 1), (2, 3), (0, 2)]):          # 200, 404 / 200, 304 / 200, 200
        (logs / f"{i}.log").write_bytes(b"".join(lines[j] + b"\n" for j in chosen))
    flow = L.Flow("p", [L.read("common", fields=("ip", "response")).write("o", format="csv", partition_by="response")])
    run_flow(flow, str(logs), {"o": str(tmp_path / "o")}, monitor=False, quiet=True)
    assert read(str(tmp_path / "o" / "response=200" / "part-00000.csv")) == \
        b"ip\r\n1.2.3.4\r\n1.2.3.6\r\n1.2.3.4\r\n1.2.3.6\r\n"
    assert read(str(tmp_path / "o" / "response=404" / "part-00000.csv")) == b"ip\r\n1.2.3.5\r\n"
