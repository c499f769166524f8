"""A group-by of many distinct keys within a small memory budget: it spills to disk, holds what reducing its
buffer takes (not only the buffer's bytes) of the budget, and gives exactly what an independent computation
in plain Python gives."""
from __future__ import annotations

import random
from collections import defaultdict

import polars as pl

import logetl.api as L
from conftest import parts
from logetl.engines.local import spill
from logetl.engines.local.spill import HashPartitions, MemoryBudget, SpillDir
from logetl.job import run_flow


def _log(out, n: int, seed: int = 3) -> list[tuple[str, str, str]]:
    """A combined log of ``n`` lines, nearly one path a line (non-ASCII ones too), some sizes ``-``; returns
    each line's (ip, path, size) as written."""
    rng = random.Random(seed)
    rows, lines = [], []
    for i in range(n):
        ip = f"10.0.{rng.randrange(8)}.{rng.randrange(1, 40)}"
        path = f"/p/{rng.randrange(n)}" if i % 7 else f"/é/{rng.randrange(50)}"
        size = "-" if i % 11 == 0 else str(rng.randrange(100_000))
        rows.append((ip, path, size))
        lines.append(f'{ip} - - [17/May/2015:10:{i // 60 % 60:02d}:{i % 60:02d} +0000] "GET {path} HTTP/1.1" '
                     f'200 {size} "-" "agent"\n')
    out.write_text("".join(lines), encoding="utf-8")
    return rows


def test_a_group_by_of_many_keys_spills_under_a_small_budget_and_gives_the_exact_sums(tmp_path):
    rows = _log(tmp_path / "in.log", 40_000)
    per_path = (L.read().derive(bytes=L.coalesce(L.col("size").to_int(), L.lit(0)), target=L.path(L.col("request")))
                .group_by("target", name="per_path").agg(hits=L.count(), bytes=L.sum(L.col("bytes")),
                                        clients=L.count_distinct(L.col("ip"))))
    flow = L.Flow("per_path", [per_path.write("out")])
    run = run_flow(flow, str(tmp_path / "in.log"), {"out": str(tmp_path / "out")}, monitor=False,
                   engine_options={"memory_limit": 384 << 20, "spill_buffers": 256 * 1024})
    assert run.spilled["per_path"]["bytes"] > 0 and run.spilled["per_path"]["files"] >= spill.PARTITIONS

    hits, sums, clients = defaultdict(int), defaultdict(int), defaultdict(set)
    for ip, path, size in rows:
        hits[path] += 1
        sums[path] += 0 if size == "-" else int(size)
        clients[path].add(ip)
    expected = sorted(f"{p}\t{hits[p]}\t{sums[p]}\t{len(clients[p])}\n".encode() for p in hits)
    got = sorted(line + b"\n" for line in parts(tmp_path / "out").split(b"\n")[:-1])
    assert len(expected) > 20_000
    assert got == expected


def test_a_buffer_holds_what_reducing_it_takes_and_spills_before_that_passes_its_share(tmp_path):
    buffers = 4 << 20
    budget = MemoryBudget(buffers=buffers)
    groups = HashPartitions(budget, SpillDir(str(tmp_path), "g"))
    batch = 0
    while groups.files is None:
        frame = pl.DataFrame({"k": [f"key-{batch}-{i:030d}" for i in range(2_000)]})
        groups.add(frame)
        batch += 1
        # in memory, what it holds of the budget is its bytes times what reducing them takes, and what
        # reducing its biggest batch took, within the budget
        if groups.files is None:
            batch_bytes = spill.frame_bytes(frame)
            assert groups.working == batch_bytes * spill.REDUCE_FACTOR
            assert budget.held[id(groups)] == (groups.size + batch_bytes) * spill.REDUCE_FACTOR <= buffers
    assert budget.peak <= buffers + 2 * 2_000 * 100 * spill.REDUCE_FACTOR      # at most one batch over
    got = pl.concat(list(groups.result())).get_column("k").sort().to_list()
    assert got == sorted(f"key-{b}-{i:030d}" for b in range(batch) for i in range(2_000))
