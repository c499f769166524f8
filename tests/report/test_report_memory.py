"""``logetl report``'s panels past the memory budget: the records written to DuckDB's database file and the
panels' groupings run by DuckDB at its least memory give the same report, byte for byte, as a run that holds
everything in memory (the local engine; Spark's reports are compared in ``test_report_cases``)."""
from __future__ import annotations

from logetl import formats
from logetl.engines.local import sql as local_sql
from logetl.report import panels
from logetl.report.build import build

FILES = ("report.json", "index.html")


def made(sample: str, out, **engine_options) -> dict[str, bytes]:
    build(sample, str(out), formats.resolve(None), overwrite=True,
          run_options={"monitor": False, "quiet": True, "engine_options": engine_options or None})
    return {name: (out / name).read_bytes() for name in FILES}


def test_a_one_byte_budget_gives_the_same_report_bytes(tmp_path, sample, monkeypatch):
    seen = []
    insert = local_sql.SqlOp._to_disk

    def to_disk(op):        # the panels' records go into DuckDB's database file
        seen.append(op.node.name)
        return insert(op)

    monkeypatch.setattr(local_sql.SqlOp, "_to_disk", to_disk)
    held = made(sample, tmp_path / "held")
    assert seen == []
    spilled = made(sample, tmp_path / "spilled", spill_buffers=1)
    assert seen == ["panels"]
    assert spilled == held


def test_every_panel_is_one_grouping_set_of_the_query():
    """The query names every panel a combined log has, each grouped per key and visitor, then per key."""
    names = ["general", "visitors", "requests", "not_found", "visit_time", "status_codes", "agents", "hosts",
             "referring_sites"]
    query = panels.panels_query(names)
    assert query.count("UNION ALL") == len(names) - 1
    assert [f"'{n}' AS panel" in query for n in names] == [True] * len(names)
    assert query.count("GROUP BY label") == len(names)
    assert "count(DISTINCT" not in query
