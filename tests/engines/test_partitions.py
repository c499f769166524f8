"""Partitioned sinks on every engine: Hive-style FIELD=VALUE directories with escaped values, the partition
fields left out of the files, records in input order within a partition, and a rerun over an earlier output
that replaces exactly the partitions it writes."""
from __future__ import annotations

import os

import pytest

import logetl.api as L
from logetl.io.outputs import OutputError, output_listing
from logetl.io.fs import LOCAL
from logetl.job import run_flow


def line(ip, day, request="GET / HTTP/1.1", size="10"):
    return f'{ip} - - [{day}/May/2015:10:00:00 +0000] "{request}" 200 {size} "-" "a"\n'.encode()


def flow(fmt="tsv"):
    logs = L.read()
    dated = logs.derive(day=L.day(L.col("time")), kind=L.col("request").split_part(" ", 2), name="dated")
    return L.Flow("parts", [dated.select("day", "kind", "ip", "size").write(
        "out", format=fmt, partition_by=["day", "kind"])])


def leaf_parts(path, leaf) -> bytes:
    return parts_of(os.path.join(path, leaf))


def parts_of(directory) -> bytes:
    names = sorted(n for n in os.listdir(directory) if n.startswith("part-"))
    assert names and set(os.listdir(directory)) == set(names)
    return b"".join(open(os.path.join(directory, n), "rb").read() for n in names)


def test_partitions_hold_their_records_in_input_order(engine, tmp_path):
    log = tmp_path / "in.log"
    log.write_bytes(line("1.1.1.1", "17") + line("2.2.2.2", "18", "GET /a=b/c%d") + line("3.3.3.3", "17")
                    + line("4.4.4.4", "17", "GET") + line("5.5.5.5", "18", "GET /a=b/c%d", size="7")
                    + b'6.6.6.6 - - [99/May/2015:10:00:00 +0000] "GET /x" 200 1 "-" "a"\n')
    out = tmp_path / "out"
    run_flow(flow(), str(log), {"out": str(out)}, engine=engine, monitor=False)
    dirs = sorted(os.path.relpath(r, out) for r, d, f in os.walk(out) if any(n.startswith("part-") for n in f))
    assert dirs == ["day=2015-05-17/kind=%2F", "day=2015-05-17/kind=__HIVE_DEFAULT_PARTITION__",
                    "day=2015-05-18/kind=%2Fa%3Db%2Fc%25d", "day=__HIVE_DEFAULT_PARTITION__/kind=%2Fx"]
    assert leaf_parts(out, dirs[0]) == b"1.1.1.1\t10\n3.3.3.3\t10\n"
    assert leaf_parts(out, dirs[1]) == b"4.4.4.4\t10\n"
    assert leaf_parts(out, dirs[2]) == b"2.2.2.2\t10\n5.5.5.5\t7\n"
    assert leaf_parts(out, dirs[3]) == b"6.6.6.6\t1\n"
    assert os.path.getsize(out / "_SUCCESS") == 0


def test_spark_sorts_a_partitioned_write_once_by_the_partitions_and_input_order(spark_session, tmp_path):
    """The write's one sort is by the partition fields, then _order: a partition value checked after the
    sort made Spark's writer sort again by the partition fields alone, and the optimizer dropped the sort by
    _order below it (input order then rested on a sort that is not stable)."""
    log = tmp_path / "in.log"
    log.write_bytes(line("1.1.1.1", "17") + line("2.2.2.2", "18"))
    run_flow(flow(), str(log), {"out": str(tmp_path / "out")}, engine="spark", monitor=False)
    executions = spark_session._jsparkSession.sharedState().statusStore().executionsList()
    plans = [executions.apply(i).physicalPlanDescription() for i in range(executions.size())]
    plan = next(p for p in reversed(plans) if "InsertIntoHadoopFsRelationCommand" in p)
    sorts = [l for l in plan.splitlines() if l.startswith("Arguments: [") and " ASC NULLS " in l]
    assert len(sorts) == 1 and [k.split("#")[0] for k in sorts[0][len("Arguments: ["):].split(", ")[:3]] == \
        ["day", "kind", "_order"], plan


def test_a_rerun_replaces_exactly_the_partitions_it_writes(engine, tmp_path):
    first, second = tmp_path / "a.log", tmp_path / "b.log"
    first.write_bytes(line("1.1.1.1", "17") + line("2.2.2.2", "18"))
    second.write_bytes(line("3.3.3.3", "18") + line("4.4.4.4", "19"))
    out = tmp_path / "out"
    run_flow(flow(), str(first), {"out": str(out)}, engine=engine, monitor=False)
    with pytest.raises(OutputError, match="is not empty \\(use --overwrite to replace it\\)"):
        run_flow(flow(), str(second), {"out": str(out)}, engine=engine, monitor=False)
    run_flow(flow(), str(second), {"out": str(out)}, engine=engine, monitor=False, overwrite=True)
    assert leaf_parts(out, "day=2015-05-17/kind=%2F") == b"1.1.1.1\t10\n"
    assert leaf_parts(out, "day=2015-05-18/kind=%2F") == b"3.3.3.3\t10\n"
    assert leaf_parts(out, "day=2015-05-19/kind=%2F") == b"4.4.4.4\t10\n"
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith(".out")) == []   # nothing left beside it
    assert output_listing(str(out), LOCAL) is not None   # still recognised as an output


def test_partitioned_parquet_reads_back_as_a_hive_dataset(engine, tmp_path):
    import pyarrow.dataset as ds

    log = tmp_path / "in.log"
    log.write_bytes(line("1.1.1.1", "17") + line("2.2.2.2", "18") + line("3.3.3.3", "17"))
    out = tmp_path / "out"
    run_flow(flow("parquet"), str(log), {"out": str(out)}, engine=engine, monitor=False)
    table = ds.dataset(str(out), format="parquet", partitioning="hive").to_table()
    rows = sorted(zip(*(table.column(c).to_pylist() for c in ("day", "ip", "size"))))
    assert rows == [("2015-05-17", "1.1.1.1", "10"), ("2015-05-17", "3.3.3.3", "10"), ("2015-05-18", "2.2.2.2", "10")]


def test_partitioning_by_every_field_is_refused():
    with pytest.raises(L.AssemblyError, match="partitioned by every field, its files would hold nothing"):
        L.read().select("ip").write("out", partition_by="ip")


def refused_partition(engine, tmp_path, request: str, capfd) -> str:
    """The error of a run partitioned by request over a line with this request (after a good line), on
    ``engine``; nothing published, and on Spark not a line of its task-failure logs on stderr."""
    from logetl.errors import RunFailed

    log = tmp_path / "a.log"
    log.write_bytes(line("1.1.1.1", "17") + line("2.2.2.2", "17", request=request))
    logs = L.read()
    f = L.Flow("preq", [logs.select("request", "ip").write("out", partition_by="request")])
    capfd.readouterr()
    with pytest.raises(RunFailed) as caught:
        run_flow(f, str(log), {"out": str(tmp_path / "o")}, engine=engine, monitor=False, quiet=True)
    assert not (tmp_path / "o").exists()          # nothing published (the working directory stays, for a rerun)
    err = capfd.readouterr().err
    assert "ERROR" not in err and "Exception" not in err, err
    return str(caught.value)


def test_a_value_too_long_for_a_directory_name_fails_the_run_naming_the_field(engine, tmp_path, capfd):
    # it failed with the file system's "[Errno 36] File name too long" and a path in the staging directory;
    # Spark with hundreds of lines of "Mkdirs failed to create" traces
    said = refused_partition(engine, tmp_path, "GET /" + "a" * 300 + " HTTP/1.1", capfd)
    assert said == ("partition field 'request': the value 'GET /" + "a" * 35 + "'... makes a "
                    "directory name longer than 255 bytes (partition by a shorter field)")


def test_a_value_escaped_past_255_bytes_is_refused_on_every_engine(engine, tmp_path, capfd):
    # 90 '/' are 90 bytes of value, 270 escaped (%2F): Spark's check counts the escaped name, as the local one
    said = refused_partition(engine, tmp_path, "/" * 90, capfd)
    assert said == ("partition field 'request': the value '" + "/" * 40 + "'... makes a "
                    "directory name longer than 255 bytes (partition by a shorter field)")


def test_a_value_with_a_nul_byte_fails_the_run_naming_the_field_on_every_engine(engine, tmp_path, capfd):
    # local said "embedded null byte" (naming nothing), Spark hundreds of lines of traces: neither Hive's nor
    # Spark's escaping covers NUL, and no file system takes it in a name
    said = refused_partition(engine, tmp_path, "GET /nul\x00byte HTTP/1.1", capfd)
    assert said == ("partition field 'request': the value 'GET /nul\\x00byte HTTP/1.1' holds a NUL byte, which "
                    "no directory name can hold (replace it before the sink, or partition by another field)")


def files_of(path) -> dict[str, bytes]:
    """Every file under ``path`` (relative path -> bytes); Hadoop's checksum files left out."""
    return {os.path.relpath(os.path.join(d, n), path): open(os.path.join(d, n), "rb").read()
            for d, _, names in os.walk(path) for n in names if not n.endswith(".crc")}


def overwriting(run) -> list[str]:
    """The run's notices about what --overwrite removes (a Spark run also says how it parses)."""
    return [n for n in run.notices if n.startswith("--overwrite")]


def flat_flow():
    return L.Flow("flat", [L.read().select("ip", "size").write("out")])


def test_overwrite_replaces_an_unpartitioned_output_with_the_partitions_only(engine, tmp_path):
    # the earlier part-00000 stayed beside the partitions: readers of the directory got both results
    log = tmp_path / "a.log"
    log.write_bytes(line("1.1.1.1", "17") + line("2.2.2.2", "18"))
    out = tmp_path / "out"
    run_flow(flat_flow(), str(log), {"out": str(out)}, engine=engine, monitor=False)
    with pytest.raises(OutputError) as caught:
        run_flow(flow(), str(log), {"out": str(out)}, engine=engine, monitor=False)
    assert str(caught.value) == (f"out directory {str(out)!r} is not empty and holds 'part-00000', which is not part "
                                 "of a tsv output partitioned by day, kind (use --overwrite to replace it)")
    run = run_flow(flow(), str(log), {"out": str(out)}, engine=engine, monitor=False, overwrite=True)
    # said before it happens (the run's notices: a line of the command's stderr)
    assert overwriting(run) == [f"--overwrite removes from out {str(out)!r} what is not part of a tsv output "
                           "partitioned by day, kind: 'part-00000'"]
    assert files_of(out) == {"_SUCCESS": b"", "day=2015-05-17/kind=%2F/part-00000": b"1.1.1.1\t10\n",
                             "day=2015-05-18/kind=%2F/part-00000": b"2.2.2.2\t10\n"}
    assert sorted(os.listdir(tmp_path)) == ["a.log", "out"]     # nothing left beside it


def test_overwrite_removes_what_is_not_this_sinks_and_keeps_its_other_partitions(engine, tmp_path):
    # partitions by another field (response=...), a day-only layout's parts inside day=..., parts of another
    # format and an unpartitioned output's part stayed, mixed with this sink's partitions
    first, second = tmp_path / "a.log", tmp_path / "b.log"
    first.write_bytes(line("1.1.1.1", "17") + line("2.2.2.2", "18"))
    second.write_bytes(line("3.3.3.3", "18") + line("4.4.4.4", "19"))
    out = tmp_path / "out"
    run_flow(flow(), str(first), {"out": str(out)}, engine=engine, monitor=False)
    stale = {"part-00000": b"old\n", "response=200/part-00000": b"old\n", "day=2015-05-17/part-00000": b"old\n",
             "day=2015-05-17/kind=%2F/part-00000.parquet": b"PAR1",
             "day=2015-05-18/kind=x/part-00000": b"kept\n"}       # (this one is a partition of day, kind)
    for rel, data in stale.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(data)
    with pytest.raises(OutputError) as caught:
        run_flow(flow(), str(second), {"out": str(out)}, engine=engine, monitor=False)
    assert str(caught.value) == (f"out directory {str(out)!r} is not empty and holds 'day=2015-05-17/kind=%2F/"
                                 "part-00000.parquet', which is not part of a tsv output partitioned by day, kind "
                                 "(use --overwrite to replace it)")
    run = run_flow(flow(), str(second), {"out": str(out)}, engine=engine, monitor=False, overwrite=True)
    assert overwriting(run) == [f"--overwrite removes from out {str(out)!r} what is not part of a tsv output "
                           "partitioned by day, kind: 'day=2015-05-17/kind=%2F/part-00000.parquet', "
                           "'day=2015-05-17/part-00000', 'part-00000' and 1 more"]
    assert files_of(out) == {"_SUCCESS": b"", "day=2015-05-17/kind=%2F/part-00000": b"1.1.1.1\t10\n",
                             "day=2015-05-18/kind=%2F/part-00000": b"3.3.3.3\t10\n",
                             "day=2015-05-18/kind=x/part-00000": b"kept\n",
                             "day=2015-05-19/kind=%2F/part-00000": b"4.4.4.4\t10\n"}
    assert sorted(os.listdir(tmp_path)) == ["a.log", "b.log", "out"]


def test_overwrite_by_another_format_leaves_that_format_only(tmp_path):
    first, second = tmp_path / "a.log", tmp_path / "b.log"
    first.write_bytes(line("1.1.1.1", "17") + line("2.2.2.2", "18"))
    second.write_bytes(line("3.3.3.3", "18"))
    out = tmp_path / "out"
    run = run_flow(flow(), str(first), {"out": str(out)}, monitor=False, overwrite=True)
    assert overwriting(run) == []    # nothing there: nothing to say
    run = run_flow(flow(), str(first), {"out": str(out)}, monitor=False, overwrite=True)
    assert overwriting(run) == []    # only this sink's partitions: replaced or kept, as always
    run = run_flow(flow("jsonl"), str(second), {"out": str(out)}, monitor=False, overwrite=True)
    assert overwriting(run) == [f"--overwrite removes from out {str(out)!r} what is not part of a jsonl output "
                           "partitioned by day, kind: 'day=2015-05-17', 'day=2015-05-18'"]
    assert files_of(out) == {"_SUCCESS": b"",
                             "day=2015-05-18/kind=%2F/part-00000.jsonl": b'{"ip":"3.3.3.3","size":"10"}\n'}


def test_a_users_file_in_a_partitioned_output_is_refused_even_with_overwrite(tmp_path):
    log = tmp_path / "a.log"
    log.write_bytes(line("1.1.1.1", "17"))
    out = tmp_path / "out"
    run_flow(flat_flow(), str(log), {"out": str(out)}, monitor=False)
    (out / "notes.txt").write_bytes(b"mine")
    with pytest.raises(OutputError) as caught:
        run_flow(flow(), str(log), {"out": str(out)}, monitor=False, overwrite=True)
    assert str(caught.value) == (f"out directory {str(out)!r} is not empty and holds 'notes.txt', which is not part "
                                 "of a logetl output: choose another directory (--overwrite replaces only earlier "
                                 "outputs)")
    assert files_of(out) == {"_SUCCESS": b"", "part-00000": b"1.1.1.1\t10\n", "notes.txt": b"mine"}


def test_overwrite_over_an_incremental_partitioned_output_drops_its_state(tmp_path):
    # the incremental state named parts that the rerun replaced: the next --incremental run failed on them
    first, second = tmp_path / "a.log", tmp_path / "b.log"
    first.write_bytes(line("1.1.1.1", "17") + line("2.2.2.2", "18"))
    second.write_bytes(line("3.3.3.3", "18"))
    out = tmp_path / "out"
    run_flow(flow(), str(first), {"out": str(out)}, monitor=False, incremental=True)
    assert sorted(files_of(out)) == ["_INCREMENTAL", "_SUCCESS", "day=2015-05-17/kind=%2F/part-000001-00000",
                                     "day=2015-05-18/kind=%2F/part-000001-00000"]
    run_flow(flow(), str(second), {"out": str(out)}, monitor=False, overwrite=True)
    assert files_of(out) == {"_SUCCESS": b"", "day=2015-05-17/kind=%2F/part-000001-00000": b"1.1.1.1\t10\n",
                             "day=2015-05-18/kind=%2F/part-00000": b"3.3.3.3\t10\n"}
    from logetl.incremental import IncrementalError

    with pytest.raises(IncrementalError) as caught:
        run_flow(flow(), str(second), {"out": str(out)}, monitor=False, incremental=True)
    assert str(caught.value) == (f"out directory {str(out)!r} is not empty and holds no _INCREMENTAL: it was not "
                                 "written by an incremental run (--overwrite starts it afresh)")


def test_a_partition_field_named_value_is_written_on_every_engine(engine, tmp_path):
    # Spark's text writer took the TSV line as a column "value": [AMBIGUOUS_REFERENCE] with the partition field
    log = tmp_path / "a.log"
    log.write_bytes(line("1.1.1.1", "17") + line("2.2.2.2", "18"))
    logs = L.read()
    f = L.Flow("v", [logs.derive(value=L.day(L.col("time"))).select("ip", "value").write("out", partition_by="value")])
    out = tmp_path / "out"
    run_flow(f, str(log), {"out": str(out)}, engine=engine, monitor=False)
    assert files_of(out) == {"_SUCCESS": b"", "value=2015-05-17/part-00000": b"1.1.1.1\n",
                             "value=2015-05-18/part-00000": b"2.2.2.2\n"}
