"""Bounded memory: blocking operators spill to disk past the run's budget, with the same bytes
as in memory; what cannot spill fails with one line, never an out-of-memory kill."""
from __future__ import annotations

import os
import random

import polars as pl
import pytest

from conftest import logetl, parts
from logetl.engines.local import spill
from logetl.engines.local.spill import ExternalSort, HashPartitions, MemoryBudget, MemoryLimitExceeded, SpillDir
from logetl.job import run_program


def _frames(n_rows: int, seed: int, batch: int = 997):
    rng = random.Random(seed)
    words = ["", "a", "ab", "b", "ba", "é", "z", None]
    rows = {
        "k1": [rng.choice([None, *range(8)]) for _ in range(n_rows)],
        "k2": [rng.choice(words) for _ in range(n_rows)],
        "seq": list(range(n_rows)),                    # input order, to see stability
    }
    whole = pl.DataFrame(rows, schema={"k1": pl.Int64, "k2": pl.String, "seq": pl.Int64})
    return whole, [whole.slice(i, batch) for i in range(0, n_rows, batch)]


@pytest.mark.parametrize("descending", [[False, False], [True, False], [True, True]])
def test_external_sort_with_many_runs_and_several_merge_passes_is_the_stable_in_memory_sort(
        tmp_path, monkeypatch, descending):
    monkeypatch.setattr(spill, "BLOCK_BYTES", 8192)          # small blocks: a fan-in of 4 or less
    whole, batches = _frames(40_000, seed=len(str(descending)))
    sorter = ExternalSort(["k1", "k2"], descending, MemoryBudget(buffers=64 * 1024),
                          SpillDir(str(tmp_path), "sort"))
    for b in batches:
        sorter.add(b)
    got = pl.concat(list(sorter.result()))
    assert sorter.spill.runs >= 20 and sorter.spill.passes >= 3, (sorter.spill.runs, sorter.spill.passes)
    expected = spill.stable_sort(whole, ["k1", "k2"], descending)
    assert got.equals(expected)
    # null is the smallest value: first ascending, last descending
    assert got.get_column("k1")[0 if not descending[0] else -1] is None


def test_external_sort_without_spilling_is_one_sort(tmp_path):
    whole, batches = _frames(5_000, seed=3)
    sorter = ExternalSort(["k2"], [False], MemoryBudget(), SpillDir(str(tmp_path), "sort"))
    for b in batches:
        sorter.add(b)
    assert pl.concat(list(sorter.result())).equals(spill.stable_sort(whole, ["k2"], [False]))
    assert sorter.spill.runs == 0 and not os.path.exists(tmp_path / "sort")


def test_hash_partitions_give_the_distinct_records_also_when_a_partition_is_split_again(tmp_path, monkeypatch):
    whole, batches = _frames(60_000, seed=5)
    whole = whole.drop("seq").with_columns(pl.col("k1").fill_null(-1) * 1000 + pl.int_range(0, 60_000) % 3000)
    batches = [whole.slice(i, 1000) for i in range(0, whole.height, 1000)]
    distinct = HashPartitions(MemoryBudget(buffers=32 * 1024), SpillDir(str(tmp_path), "unique"))
    for b in batches:
        distinct.add(b)
    got = pl.concat(list(distinct.result()))
    assert distinct.spill.runs > spill.PARTITIONS and distinct.spill.passes == 2   # split again
    assert got.height == whole.unique().height
    assert got.sort(["k1", "k2"], nulls_last=True).equals(whole.unique().sort(["k1", "k2"], nulls_last=True))


def _log(path, n: int, seed: int = 11):
    """A combined-format log with many clients, a quarter of them asking for images."""
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        ip = f"10.{rng.randrange(4)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
        page = f"/images/p{rng.randrange(50)}.png" if rng.random() < 0.25 else f"/page/{rng.randrange(500)}"
        lines.append(f'{ip} - - [17/May/2015:10:{i // 3600 % 60:02d}:{i % 60:02d} +0000] "GET {page} HTTP/1.1" '
                     f'200 {rng.randrange(10_000)} "-" "agent {rng.randrange(9)}"\n')
    path.write_text("".join(lines))
    return str(path)


@pytest.mark.parametrize("program", ["filter", "join"])
def test_programs_give_the_same_bytes_when_every_blocking_operator_spills(tmp_path, monkeypatch, program):
    from logetl.engines.local import engine as local
    from logetl.engines.local import scan as local_scan
    from logetl.engines.local import outputs as local_outputs

    log = _log(tmp_path / "in.log", 40_000)
    # small batches all the way (chunks, parse batches, stored parts): many spills per operator
    monkeypatch.setattr(local.LocalEngine, "chunk_bytes", 64 * 1024)
    monkeypatch.setattr(local_scan, "BATCH_ROWS", 1_000)
    monkeypatch.setattr(local_outputs, "STORE_ROWS", 1_000)
    plain = run_program(program, log, {"output": str(tmp_path / "plain")})
    # Join's hashjoin holds its left side (the distinct image clients) in memory by contract: it must fit
    tiny = run_program(program, log, {"output": str(tmp_path / "spilled")},
                       engine_options={"spill_buffers": 48 * 1024 if program == "filter" else 640 * 1024})
    assert parts(tmp_path / "spilled") == parts(tmp_path / "plain") != b""
    assert plain.spilled == {}
    spilled_ops = {"filter": {"unique_ip", "sort_ip"}, "join": {"unique_ip", "sort_score"}}[program]
    assert set(tiny.spilled) == spilled_ops
    for op in spilled_ops:
        assert tiny.spilled[op]["bytes"] > 0 and tiny.spilled[op]["files"] > 3, tiny.spilled
    # nothing of the spill is left behind
    assert sorted(os.listdir(tmp_path)) == ["in.log", "plain", "spilled"]


def test_a_hashjoin_left_side_past_the_budget_fails_with_one_line(tmp_path):
    log = _log(tmp_path / "in.log", 20_000)
    with pytest.raises(MemoryLimitExceeded) as caught:
        run_program("join", log, {"output": str(tmp_path / "out")},
                    engine_options={"memory_limit": 400 << 20, "spill_buffers": 16 * 1024})
    assert str(caught.value) == (
        "operator 'join' (hashjoin) holds its held side in memory, and it outgrew the memory limit (400 MiB, of "
        "which blocking operators may hold 0 MiB): raise --memory-limit, or hold the smaller side")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args,message", [
    (["--memory-limit", "lots"], "Error: --memory-limit 'lots' is not a size (examples: 512M, 2G)"),
    (["--memory-limit", "100M"], "Error: --memory-limit '100M' is too small: at least 384M"),
    (["--memory-limit", "383M"], "Error: --memory-limit '383M' is too small: at least 384M"),
    (["--memory-limit", "1G", "--hdfs"],
     "Error: --memory-limit is a setting of the local engine: on Spark use --conf spark.executor.memory=SIZE"),
])
def test_memory_limit_errors_are_one_line(tmp_path, args, message):
    log = _log(tmp_path / "in.log", 10)
    p = logetl("filter", *args, "--input", log, "--output", str(tmp_path / "o"))
    assert p.returncode == 2
    assert p.stderr.decode().strip() == message


def test_memory_limit_on_the_command_line_runs(tmp_path):
    log = _log(tmp_path / "in.log", 2_000)
    p = logetl("join", "--memory-limit", "1.5G", log, str(tmp_path / "o"))
    assert p.returncode == 0, p.stderr


def test_sink_text_of_a_frame_longer_than_a_slice_is_the_text_of_every_row_in_order():
    from logetl.engines.local.batch import Batch

    n = 150_001                                # three slices of 65,536 rows and a short one
    frame = pl.DataFrame({"ip": [f"10.0.{i % 256}.{i % 7}" for i in range(n)],
                          "request": [f"GET /p/{i} HTTP/1.1" if i % 5 else "-" for i in range(n)],
                          "score": [i % 100 for i in range(n)]})
    pieces = list(Batch(("ip", "request", "score"), frame).text("tsv"))
    assert [p.count(b"\n") for p in pieces] == [65_536, 65_536, 18_929]
    expected = "".join(f"10.0.{i % 256}.{i % 7}\t{f'GET /p/{i} HTTP/1.1' if i % 5 else '-'}\t{i % 100}\n"
                       for i in range(n)).encode()
    assert b"".join(pieces) == expected


def test_a_checkpoint_of_many_record_batches_read_back_batch_by_batch_gives_the_in_memory_bytes(
        tmp_path, monkeypatch):
    import pyarrow as pa

    from logetl.engines.local import engine as local
    from logetl.engines.local import scan as local_scan
    from logetl.engines.local import outputs as local_outputs

    log = _log(tmp_path / "in.log", 30_000)
    plain = run_program("join", log, {"output": str(tmp_path / "plain")})
    # small chunks, parse batches of 1,000 records, stored parts of 5,000: every stored part holds several
    # record batches, and the checkpoint reader hands them on one at a time
    monkeypatch.setattr(local.LocalEngine, "chunk_bytes", 64 * 1024)
    monkeypatch.setattr(local_scan, "BATCH_ROWS", 1_000)
    monkeypatch.setattr(local_outputs, "STORE_ROWS", 5_000)
    read = []
    batches = local_scan.StoreReader.batches

    def counting(self):
        for frame in batches(self):
            if os.path.samefile(self.directory, kept):     # the checkpoint (not the distinct clients)
                read.append(frame.height)
            yield frame

    monkeypatch.setattr(local_scan.StoreReader, "batches", counting)
    kept = tmp_path / "ckpt"
    small = run_program("join", log, {"output": str(tmp_path / "small")}, checkpoint_dir=str(kept))
    assert parts(tmp_path / "small") == parts(tmp_path / "plain") != b""
    assert plain.spilled == {} and small.spilled == {}
    part_files = sorted(p for p in os.listdir(kept) if p.endswith(".arrow"))
    in_files = []
    for name in part_files:
        with pa.OSFile(str(kept / name), "rb") as f:
            reader = pa.ipc.open_file(f)
            in_files += [reader.get_batch(i).num_rows for i in range(reader.num_record_batches)]
    assert len(in_files) > 2 * len(part_files) >= 2
    assert read == in_files                    # one frame per record batch, in order


def _string_buffer_bytes(frame) -> int:
    """Bytes of every buffer a frame's string views point into (what keeping the frame keeps alive)."""
    table = frame.to_arrow(compat_level=pl.CompatLevel.newest())
    return sum(b.size for col in table.columns for chunk in col.chunks for b in chunk.buffers()[2:] if b)


def test_distinct_records_kept_in_memory_hold_only_their_own_strings(tmp_path):
    # a batch of 20,000 different 40-byte strings of which the distinct set keeps 3: before, the kept
    # views held the whole batch's 800 KB of text (and every later batch's)
    batch = pl.DataFrame({"ip": [f"client-{i % 3:033d}" if i % 2 else f"other-{i:034d}" for i in range(20_000)]})
    assert _string_buffer_bytes(batch) >= 20_000 * 40
    distinct = HashPartitions(MemoryBudget(), SpillDir(str(tmp_path), "unique"))
    for _ in range(12):                                   # past 8 parts: the compaction path too
        distinct.add(batch.filter(pl.col("ip").str.starts_with("client-")))
        assert all(_string_buffer_bytes(p) <= 3 * 40 for p in distinct.parts)
    assert sorted(pl.concat(list(distinct.result())).get_column("ip")) == [f"client-{k:033d}" for k in range(3)]


def test_a_merge_of_many_runs_of_few_keys_counts_only_the_blocks_it_takes_from(tmp_path, monkeypatch):
    """Join's sort: 40 distinct scores over many runs. Each merge round takes the rows up to the smallest
    last key of the runs' blocks, and with few keys that is mostly one block of one run: a block none or all
    of whose rows are taken is told by its first and last key, not by counting it (counting every run's
    block each round made the merge's work grow with the number of runs: Join's time a line grew with its
    input). The result is the stable sort."""
    monkeypatch.setattr(spill, "BLOCK_BYTES", 8192)
    rng = random.Random(5)
    whole = pl.DataFrame({"score": [rng.randrange(60, 100) for _ in range(40_000)], "seq": list(range(40_000))})
    sorter = ExternalSort(["score"], [True], MemoryBudget(buffers=256 * 1024), SpillDir(str(tmp_path), "sort"))
    for i in range(0, whole.height, 997):
        sorter.add(whole.slice(i, 997))
    counted = []
    before = spill._before
    monkeypatch.setattr(spill, "_before", lambda *a, **k: counted.append(1) or before(*a, **k))
    got = pl.concat(list(sorter.result()))
    assert got.equals(spill.stable_sort(whole, ["score"], [True]))
    runs, blocks = sorter.spill.runs, sum(1 for _ in range(0, whole.height, 8192 // 16))
    assert runs >= 8, runs
    # a few counts a block of the runs (202 here); counting every run's block each round was about the
    # rounds times the runs (692 here)
    assert len(counted) <= 3 * blocks, (len(counted), blocks, runs)
