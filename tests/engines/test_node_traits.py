"""Node traits are declared once, on each node class, and every engine's planners read them: every node
class has traits, every operator has an entry in each engine's tables, and a per-record node is fused by the
local engine, written in one pass by the Spark engine and run on new lines alone by ``--incremental``."""
import inspect
from types import SimpleNamespace

import pytest

import logetl.api as L
from logetl import assembly, incremental, traits
from logetl.engines.local import operators as local_ops
from logetl.engines.spark import operators as spark_ops
from logetl.engines.spark.engine import SparkEngine
from logetl.engines.spark.parse import JVM

#: the nodes that are a step's roots and leaves: each engine builds them itself, outside its operator table
ENDS = (assembly.Source, assembly.Parse, assembly.Sink)
NODES = [assembly.Pipe] + [c for _, c in inspect.getmembers(assembly, inspect.isclass)
                           if issubclass(c, assembly.Pipe) and c is not assembly.Pipe]
#: the nodes engines receive (a node the flow folds into its parse never reaches one)
OPERATORS = [c for c in NODES if not c.traits.folds_into_parse and not issubclass(c, ENDS)]
PER_RECORD = [c for c in OPERATORS if c.traits.per_record]


def test_every_node_class_declares_its_traits_on_its_class_line():
    assert len(NODES) == 18
    for cls in NODES:
        assert isinstance(cls.__dict__.get("traits"), traits.Traits), cls
    assert {c.__name__ for c in PER_RECORD} == {"Pipe", "Checkpoint", "Filter", "Select", "Rename", "Derive"}
    assert {c.__name__ for c in NODES if c.traits.blocking} == {"Unique", "GroupBy", "Sort", "Limit", "Top",
                                                                "Visits", "Sql"}
    with pytest.raises(TypeError) as err:
        type("Shout", (assembly.Pipe,), {})
    assert str(err.value) == "node class Shout declares no traits: class Shout(Pipe, traits=...)"


def test_every_operator_has_one_entry_in_each_engine_table():
    assert set(local_ops.OPS) == set(OPERATORS)
    assert set(spark_ops.OPERATORS) == set(OPERATORS)
    # the Spark one-pass planner composes every per-record node, and the sinks they reach, as expressions
    assert set(spark_ops.VIEWS) == set(PER_RECORD) | {assembly.Sink}
    # the local engine runs each node that maps records as a map over a batch, which its parse threads fuse
    for cls in OPERATORS:
        op = local_ops.OPS[cls]
        assert (inspect.isclass(op) and issubclass(op, local_ops.PerRecordOp)) == cls.traits.maps_records, cls


def _flows():
    """One flow per operator: read, the operator, two TSV sinks."""
    records = L.read("combined", fields=("ip", "time", "response", "size"))
    made = {
        assembly.Pipe: records.branch("op"),
        assembly.Checkpoint: records.checkpoint("op"),   # a store of the parse's step, with another
        assembly.Filter: records.filter(L.col("response") == "200", name="op"),
        assembly.Select: records.select("ip", "response", name="op"),
        assembly.Rename: records.rename(ip="client", name="op"),
        assembly.Derive: records.derive(n=L.col("size").to_int(), name="op"),
        assembly.Unique: records.select("ip", name="ips").unique(name="op"),
        assembly.GroupBy: records.group_by("ip", name="op").agg(n=L.count()),
        assembly.HashJoin: records.join(records.select("ip", name="held"), on="ip", name="op"),
        assembly.Sort: records.sort("ip", name="op"),
        assembly.Limit: records.limit(5, name="op"),
        assembly.Top: records.top(5, by=["ip"], name="op"),
        assembly.Visits: records.derive(t=L.timestamp(L.col("time")), name="t").visits("ip", "t", name="op"),
        assembly.Sql: records.sql("SELECT ip, count(*) AS n FROM input GROUP BY ip", name="op"),
    }
    assert set(made) == set(OPERATORS)
    flows = {cls: L.Flow("f", [node.write("a"), node.write("b")]) for cls, node in made.items()}
    flows[assembly.Checkpoint] = L.Flow("f", [made[assembly.Checkpoint].write("a"),
                                              records.checkpoint("other").write("b")])
    return flows


def _parse_step(flow):
    return next(s for s in flow.steps if any(isinstance(n, assembly.Parse) for n in s.nodes))


def test_incremental_runs_every_node_that_needs_only_its_records():
    for cls, flow in _flows().items():
        if cls.traits.needs_all_data:
            with pytest.raises(incremental.IncrementalError) as err:
                incremental.refuse(flow, "local", "in.log")
            assert str(err.value) == (f"--incremental: operator 'op' ({cls.kind}) needs all of the data, "
                                      "not only the new lines")
        else:
            incremental.refuse(flow, "local", "in.log")
        # a caller that merges each run's outputs (the report's state) runs every node on the new lines
        incremental.refuse(flow, "local", "in.log", per_run=True)


def test_the_spark_one_pass_planner_takes_every_per_record_node():
    engine = SparkEngine(master="local[1]")
    engine.path = JVM
    ctx = SimpleNamespace(state=SimpleNamespace(trap=None))
    for cls, flow in _flows().items():
        assert engine._in_one_pass(ctx, _parse_step(flow)) == cls.traits.per_record, cls


def test_a_new_per_record_node_is_one_class_and_one_entry_per_engine_table(monkeypatch):
    class Shout(assembly.Pipe, traits=traits.MAP):
        kind = "shout"

        def __init__(self, name, previous):
            super().__init__(name, previous)
            self._inherit()

    class ShoutOp(local_ops.PerRecordOp):
        def map(self, frame):
            return frame

    monkeypatch.setitem(local_ops.OPS, Shout, ShoutOp)
    monkeypatch.setitem(spark_ops.OPERATORS, Shout, lambda node, inputs: inputs[0])
    monkeypatch.setitem(spark_ops.VIEWS, Shout, lambda node, cond, cols: (cond, cols))
    shout = Shout("op", L.read("combined", fields=("ip", "response")))
    flow = L.Flow("f", [shout.write("a"), shout.write("b")])
    incremental.refuse(flow, "local", "in.log")
    engine = SparkEngine(master="local[1]")
    engine.path = JVM
    assert engine._in_one_pass(SimpleNamespace(state=SimpleNamespace(trap=None)), flow.steps[0])
