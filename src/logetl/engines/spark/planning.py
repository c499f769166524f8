"""The Spark engine's one-pass planner and its execution (``OnePass``)."""
from __future__ import annotations

from functools import partial
from itertools import count

from logetl import assembly, contract
from logetl.engines.base import StepContext
from logetl.engines.spark.expressions import column
from logetl.engines.spark.expressions import text as text_of
from logetl.engines.spark.native import INPUT, KEPT, SAMPLE, SAMPLES, STATUS, TAG
from logetl.io.fs import hadoop_local_path
from logetl.engines.spark.parse import JVM, _union_all, malformed_status, reason_of, sample_text
from logetl.engines.spark.sinks import MAX_WRITERS, STORE_OPTIONS
from logetl.engines.spark.operators import ORDER, VIEWS, _metrics, _part_key
from logetl.engines.spark.session import SparkRun, _session_conf


_OBSERVATIONS = count()     # observation names are unique within the session: numbered, whatever the run


class OnePass:
    """The Spark engine's one-pass planner: a step of per-record nodes (their traits) after one parse writes
    its sinks, or its stores, its trap and its samples with one action (``_in_one_pass``, ``VIEWS``)."""

    def _in_one_pass(self, ctx: StepContext, step: assembly.Step) -> bool:
        """Whether the step writes its outputs in one pass over its parse (``_execute_one_pass``): on the
        native path, a step of one parse that reads nothing stored, whose records reach either TSV sinks
        (not partitioned) or stores for later steps (not both: one writer per pass) through per-record
        operators only, with two or more things to write (sinks or stores, trap). A store may be a Unique
        of such records (written after the pass, from its input's rows)."""
        nodes = [n for n in step.nodes if not isinstance(n, (assembly.Source, assembly.Parse, assembly.Sink))]
        sinks = [n for n in step.nodes if isinstance(n, assembly.Sink)]
        if not (self.native and not step.reads and sum(isinstance(n, assembly.Parse) for n in step.nodes) == 1
                and bool(sinks) != bool(step.writes)
                and len(sinks) + len(step.writes) + (ctx.state.trap is not None) >= 2):
            return False
        if sinks:
            return (all(s.format == "tsv" and not s.partition_by and not s.header for s in sinks)
                    and all(n.traits.per_record for n in nodes))

        def stored_unique(n) -> bool:   # a Unique this step stores, of per-record rows, read by no node here
            return (type(n) is assembly.Unique and any(n is w for w in step.writes)
                    and n.previous[0].traits.per_record and not isinstance(n.previous[0], assembly.Source)
                    and not any(p is n for m in step.nodes for p in m.previous))

        return (all(n.traits.per_record or stored_unique(n) for n in nodes)
                and self._store_columns(step) is not None)

    #: a one-pass step's stores: the columns of its malformed lines (raw line, status, input index)
    RAW, RAW_STATUS, RAW_INPUT = "__logetl_raw", "__logetl_status", "__logetl_input"

    def _store_columns(self, step: assembly.Step) -> dict | None:
        """The columns of the file a one-pass step writes its stores through: the stored fields of every
        store (a field several stores hold is one column: each row fills its store's own), ``_order``
        (stores other than a Unique keep the input order), the malformed lines' columns; name -> the
        owners' logetl type. None when two stores give one name different types."""
        columns: dict[str, str] = {}
        for node in step.writes:
            owned = dict(node.types) if type(node) is assembly.Unique else {**node.types, ORDER: "order"}
            for name, kind in owned.items():
                if columns.setdefault(name, kind) != kind or name in (TAG, self.RAW, self.RAW_STATUS, self.RAW_INPUT):
                    return None
        return columns

    def _one_pass_views(self, ctx: StepContext, step: assembly.Step):
        """The step's parse, and every node after it as expressions over the parsed rows: (parse, checked,
        observations, nodes, views); ``views[id(node)]``: (the condition a parsed row meets when it reaches
        the node, the node's fields as Columns); the rows reaching each node are counted on the way
        (``checked``'s observation, ``n<i>`` for ``nodes[i]``; a Unique counts its input)."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        parse = next(n for n in step.nodes if isinstance(n, assembly.Parse))
        observations: list = []
        checked, fields = self._parsed(ctx, parse, observations)
        views = {id(parse): (F.col(STATUS) == KEPT, {f: fields[f] for f in parse.fields})}
        nodes = []
        for node in step.nodes:
            if isinstance(node, (assembly.Source, assembly.Parse)):
                continue
            nodes.append(node)
            view = views[id(node.previous[0])]
            # a per-record node composes its view (``VIEWS``); a stored Unique's rows are its input's
            views[id(node)] = VIEWS[type(node)](node, *view) if node.traits.per_record else view
        counted = Observation(f"logetl_{next(_OBSERVATIONS)}")
        checked = checked.observe(counted, *[F.count_if(views[id(n)][0]).alias(f"n{i}") for i, n in enumerate(nodes)])
        observations.append((None, counted))
        return parse, checked, observations, nodes, views

    def _joined_sinks(self, step: assembly.Step) -> tuple | None:
        """For a one-pass step whose sinks take the parse's records as they are (through Pipes, Selects and
        Renames: no filter, nothing computed), each sink's fields as indexes into the parse's: the kernel's
        side (the JVMs' ``NativeParse.joined``, the Python workers' ``spark_native.join_batches``) then writes
        the sinks' TSV lines itself, joined, a few rows per batch. None for any other step."""
        if step.writes:
            return None
        fields: dict[int, dict[str, int]] = {}
        sinks = []
        for node in step.nodes:
            if isinstance(node, assembly.Source):
                continue
            if isinstance(node, assembly.Parse):
                fields[id(node)] = {f: i for i, f in enumerate(node.fields)}
                continue
            if type(node) not in (assembly.Pipe, assembly.Select, assembly.Rename, assembly.Sink):
                return None
            known = fields[id(node.previous[0])]
            if isinstance(node, assembly.Select):
                known = {f: known[f] for f in node.keep}
            elif isinstance(node, assembly.Rename):
                known = {node.mapping.get(f, f): i for f, i in known.items()}
            elif isinstance(node, assembly.Sink):
                sinks.append(tuple(known[f] for f in node.file_fields))
            fields[id(node)] = known
        return tuple(sinks)

    def _joined_rows(self, ctx: StepContext, step: assembly.Step, sinks: tuple):
        """The rows of a step whose sinks the executors write (``_joined_sinks``): (parse, rows,
        observations, nodes) as ``_execute_one_pass`` takes them. Every input is read and parsed as by
        ``_parsed`` (the reads of ``_lines``, in input order); the counters are the sums of each batch's."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        from logetl.engines.spark.native import join_batches, joined_schema

        parse = next(n for n in step.nodes if isinstance(n, assembly.Parse))
        nodes = [n for n in step.nodes if not isinstance(n, (assembly.Source, assembly.Parse))]
        trap = ctx.state.trap is not None
        lines, spec = self._native_input(self._marked(self._lines(ctx)), parse)
        # the kernel calls a line marked too long invalid UTF-8 (``_marked``): counted here, and moved to
        # its own reason (``_execute_one_pass``)
        long = Observation(f"logetl_{next(_OBSERVATIONS)}")
        lines = lines.observe(long, F.count_if(F.col(INPUT) < 0).alias(contract.TOO_LONG))
        if self.path == JVM:
            from logetl.engines.spark import jvm as spark_jvm

            rows = spark_jvm.joined(lines, joined_schema(), spec, sinks, trap)
        else:
            rows = lines.mapInArrow(partial(join_batches, spec, sinks, trap), joined_schema())
        counted = Observation(f"logetl_{next(_OBSERVATIONS)}")
        kept = F.sum("kept")
        rows = rows.observe(counted, F.sum("lines").alias("lines"),
                            *[F.sum(f"reason{code}").alias(r) for code, r in enumerate(contract.REASONS, 1)],
                            F.sum("dash").alias("dash"), kept.alias("kept"), F.sum("header").alias("header"),
                            F.sum("other").alias("other"),
                            *[kept.alias(f"n{i}") for i in range(len(nodes))])   # every record reaches every node
        samples_tag = len(sinks) + 1
        tag, text = F.col(TAG), F.col("value").cast("string")
        value = F.when(tag == samples_tag, self._sample_line(F.col(STATUS), text)).otherwise(text)
        rows = self._unmarked(rows).where(tag >= 0).select(tag, value.alias("value"))
        return parse, rows, [(parse, counted), (contract.TOO_LONG, long), (None, counted)], nodes

    def _execute_one_pass(self, ctx: StepContext, step: assembly.Step, state) -> None:
        """Writes the step's outputs (its sinks, or its stores), its trap and its malformed-line samples with
        one action, nothing persisted. The per-record operators after the parse are composed into
        expressions over the parsed rows (``_one_pass_views``); every parsed row becomes one row per output
        it goes to, tagged with the output, and Spark writes them partitioned by the tag, each task with one
        open file per tag (concurrent writers: no sort, so each tag's rows keep input order); each tag's
        directory then becomes its output. Sinks are written as text (a sink's TSV line, the trap's raw
        line, ``status TAB input TAB raw line`` for the samples, which the parse marks on the first few
        malformed lines of each task); stores as Parquet with the columns of every store
        (``_store_columns``), of which each store is read back with its own (``_read_store``), and the
        malformed lines' raw bytes, status and input; a stored Unique's input rows are written, then
        deduplicated into the store, and the trap's lines written as text, each by a job over that
        tag's rows only. Persisting the parse for three actions cost more than the parse itself:
        2M-line Branch, ``local[*]``, warm session: 3.4-3.5 s in one pass against 5.7-6.1 s. Sinks that take
        the parse's records as they are get their TSV lines made and joined by the executors instead (in
        their JVMs, or their Python workers), a few rows per batch (``_joined_sinks``)."""
        from pyspark.sql import functions as F

        run: SparkRun = ctx.state
        fs, spark = run.fs, self.session()
        # (the executors join the trap's lines too: a line marked too long, ``_marked``, without its mark)
        joined = self._joined_sinks(step)
        if joined is not None:
            parse, rows, observations, nodes = self._joined_rows(ctx, step, joined)
            checked = views = None
            write = lambda writer, where: writer.text(where)
        else:
            parse, checked, observations, nodes, views = self._one_pass_views(ctx, step)
            rows, write = self._tagged_rows(ctx, step, checked, nodes, views)
        outputs = [n for n in nodes if isinstance(n, assembly.Sink)] or list(step.writes)
        trap_tag, samples_tag = len(outputs), len(outputs) + 1
        where = fs.join(run.work.path, "written")
        fs.rmtree(where)

        def written(t: int) -> str | None:
            d = fs.join(where, f"{TAG}={t}")
            return d if fs.isdir(d) else None

        # A file per tag open at once in each task, and no sort (with concurrent writers, Spark plans no
        # sort by the partition column). One more writer than tags: a task that has opened as many writers
        # as the limit sorts the rest of its rows by tag, and that sort does not keep the input order of
        # equal tags. The session's own setting is back once the write ends.
        uniques: dict[int, int] = {}
        with self._progress(ctx, state):
            with _session_conf(spark, {MAX_WRITERS: str(samples_tag + 2)}):
                write(rows.write.partitionBy(TAG), where)
            if step.writes:
                for t, store in enumerate(outputs):
                    uniques.update(self._place_store(run, store, written(t), views, checked))
            else:
                for t, sink in enumerate(outputs):
                    out = run.outputs[sink.tap]
                    out.suffix = ""
                    if written(t):   # else nothing was written: sealing makes the empty output
                        fs.rename(written(t), out.staging)
                        self._name_parts(fs, out.staging)
            if run.trap is not None:
                fs.rmtree(run.work.trap_dir)
                if written(trap_tag) and step.writes:
                    self._read_parts(fs, written(trap_tag)).select(F.col(self.RAW).cast("string").alias("value")) \
                        .write.text(run.work.trap_dir)
                elif written(trap_tag):
                    fs.rename(written(trap_tag), run.work.trap_dir)
        if written(samples_tag) and len(ctx.run.malformed_samples) < SAMPLES:
            found = self._written_samples(fs, written(samples_tag), parquet=bool(step.writes))
            for code, index, value in found[:SAMPLES - len(ctx.run.malformed_samples)]:
                reason = reason_of(code)
                text = sample_text(reason, value)
                why = parse.format.why(value) if reason == contract.NO_MATCH else None
                ctx.run.malformed_samples.append((hadoop_local_path(ctx.taps.inputs[index]), reason,
                                                  f"{why}: {text}" if why else text))
        fs.rmtree(where)

        metrics = _metrics(observations[0][1])
        for key, obs in observations[1:-1]:
            if key == contract.TOO_LONG:     # (the executors' counters hold them as invalid UTF-8)
                n = int(_metrics(obs).get(contract.TOO_LONG) or 0)
                metrics[contract.TOO_LONG] = n
                metrics[contract.INVALID_UTF8] = int(metrics.get(contract.INVALID_UTF8) or 0) - n
        self._account(ctx, parse, metrics, state)
        outs = {id(parse): int(metrics.get("kept") or 0)}
        counts = _metrics(observations[-1][1])
        for i, node in enumerate(nodes):
            n = int(counts.get(f"n{i}") or 0)
            if isinstance(node, assembly.Sink):
                state.count(node.name, "in", n)
                state.count(node.name, "out", n)
                ctx.run.written[node.tap] = ctx.run.written.get(node.tap, 0) + n
            else:
                outs[id(node)] = uniques.get(id(node), n)
                state.count(node.name, "out", outs[id(node)])
                state.count(node.name, "in", sum(outs.get(id(p), 0) for p in node.previous))

    def _tagged_rows(self, ctx: StepContext, step: assembly.Step, checked, nodes: list, views: dict):
        """A one-pass step's rows to write, each tagged with its output (``_execute_one_pass``): every parsed
        row once per output it reaches; and how they are written."""
        from pyspark.sql import functions as F

        status, bad = F.col(STATUS), malformed_status(F.col(STATUS))
        outputs = [n for n in nodes if isinstance(n, assembly.Sink)] or list(step.writes)
        trap_tag, samples_tag = len(outputs), len(outputs) + 1
        # the node whose rows an output takes: a stored Unique's input (deduplicated after the pass)
        source = lambda o: views[id(o.previous[0] if type(o) is assembly.Unique else o)]
        tagged = [F.when(source(o)[0], F.lit(t)) for t, o in enumerate(outputs)]
        if ctx.state.trap is not None:
            tagged.append(F.when(bad, F.lit(trap_tag)))
        tagged.append(F.when(F.col(SAMPLE), F.lit(samples_tag)))
        rows = checked.select("*", F.explode(F.array(*tagged)).alias(TAG)).where(F.col(TAG).isNotNull())
        tag = F.col(TAG)

        def by_tag(values: list):   # (tag, Column) -> the Column of a row's tag (null for other tags)
            case = F.when(tag == values[0][0], values[0][1])
            for t, value in values[1:]:
                case = case.when(tag == t, value)
            return case

        raw = by_tag([(trap_tag, F.col("value")), (samples_tag, F.col("value"))])
        if step.writes:
            def store_column(name: str):   # the value of each store that holds the column
                return by_tag([(t, F.col(ORDER) if name == ORDER else source(o)[1][name])
                               for t, o in enumerate(outputs) if name in self._store_fields(o)]).alias(name)

            rows = rows.select(tag, *[store_column(c) for c in self._store_columns(step)], raw.alias(self.RAW),
                               by_tag([(samples_tag, status)]).alias(self.RAW_STATUS),
                               by_tag([(samples_tag, F.col(INPUT))]).alias(self.RAW_INPUT))
            write = lambda writer, where: writer.options(**STORE_OPTIONS).parquet(where)
        else:
            def line(sink):   # the sink's TSV, as _sink writes it
                cols = source(sink)[1]
                return self._delimited_line("tsv", [text_of(sink.types[f], cols[f]) for f in sink.file_fields])

            text = raw.cast("string")
            sample = self._sample_line(status, text)
            value = by_tag([(t, line(o)) for t, o in enumerate(outputs)] + [(trap_tag, text), (samples_tag, sample)])
            rows = rows.select(tag, value.alias("value"))
            write = lambda writer, where: writer.text(where)

        return rows, write

    @staticmethod
    def _store_fields(node) -> tuple:
        """The columns a store holds: its fields, and ``_order`` unless it is a Unique (no order)."""
        return tuple(node.fields) if type(node) is assembly.Unique else (*node.fields, ORDER)

    def _place_store(self, run: SparkRun, node, written: str | None, views, checked) -> dict:
        """Makes a one-pass step's written rows of ``node`` its store: the part files moved in, or, for a
        Unique, its input's rows deduplicated into it (a job over those rows); no rows: an empty store
        with the store's columns. Returns {id(node): records} for a Unique."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        fs = run.fs
        path = run.work.prepare_store(node.name)
        unique = type(node) is assembly.Unique
        found = {}
        if written and not unique:
            for name in sorted((n for n in fs.listdir(written) if n.startswith("part-")), key=_part_key):
                fs.rename(fs.join(written, name), fs.join(path, name))
        else:
            if written:
                rows = self._read_parts(fs, written).select(*[column(f) for f in node.fields]).distinct()
            else:   # no rows: an empty frame with the columns the store would have had (their types: analysis only)
                cols = views[id(node.previous[0] if unique else node)][1]
                schema = checked.select(*[cols[f].alias(f) for f in node.fields],
                                        *([] if unique else [F.col(ORDER)])).schema
                rows = self.session().createDataFrame([], schema)
            obs = Observation(f"logetl_{next(_OBSERVATIONS)}")
            rows.observe(obs, F.count(F.lit(1)).alias("n")).write.mode("append").options(**STORE_OPTIONS).parquet(path)
            found = {id(node): int(_metrics(obs).get("n") or 0)} if unique else {}
        run.work.mark_complete(node.name)
        return found

    def _read_parts(self, fs, directory: str):
        """The Parquet part files in ``directory``, read one by one and unioned in part order: a directory
        read would order its splits by size. The parts share one schema: read from the first part's
        footer, given to the other reads (each read that infers it runs a job of its own)."""
        spark = self.session()
        files = sorted((n for n in fs.listdir(directory) if n.startswith("part-") and n.endswith(".parquet")),
                       key=_part_key)
        if not files:
            return spark.read.parquet(directory)
        schema = self._written_schema(fs, fs.join(directory, files[0]))
        first = (spark.read if schema is None else spark.read.schema(schema)).parquet(fs.join(directory, files[0]))
        rest = [spark.read.schema(first.schema).parquet(fs.join(directory, n)) for n in files[1:]]
        return _union_all([first, *rest])

    #: where Spark's Parquet writer keeps the written frame's schema, in the file's footer
    SPARK_SCHEMA_KEY = b"org.apache.spark.sql.parquet.row.metadata"

    def _written_schema(self, fs, part: str):
        """The schema Spark wrote a Parquet part file with, from the file's footer (a few KB read in the
        driver), or None when the footer does not hold it. ``spark.read.parquet`` without a schema infers
        it with a job of its own (one task reading the footer): three of them in a 2M-line Join."""
        import json
        import struct

        import pyarrow as pa
        import pyarrow.parquet as pq
        from pyspark.sql.types import StructType

        try:
            tail = fs.read_tail(part, 1 << 16)
            size = struct.unpack("<I", tail[-8:-4])[0] + 8   # the footer, its length and the magic bytes
            if size > len(tail):
                tail = fs.read_tail(part, size)
            # (the footer alone, behind the magic bytes a Parquet file starts with: what the reader checks)
            metadata = pq.read_schema(pa.BufferReader(b"PAR1" + tail[-size:])).metadata or {}
            return StructType.fromJson(json.loads(metadata[self.SPARK_SCHEMA_KEY]))
        except Exception:   # not Spark's, or not Parquet: Spark's own reading says what is wrong with it
            return None

    @staticmethod
    def _written_samples(fs, directory: str, parquet: bool):
        """The first ``SAMPLES`` malformed lines a one-pass step marked, in input order: (status, input
        index, raw bytes), read in the driver from the part files (Parquet through pyarrow: no job)."""
        found: list = []
        for name in sorted((n for n in fs.listdir(directory) if n.startswith("part-")), key=_part_key):
            data = fs.read_bytes(fs.join(directory, name))
            if parquet:
                import io

                import pyarrow.parquet as pq

                table = pq.read_table(io.BytesIO(data), columns=[OnePass.RAW_STATUS, OnePass.RAW_INPUT,
                                                                 OnePass.RAW])
                found += zip(*[table.column(i).to_pylist() for i in range(3)])
            else:
                # one row a line: split on LF only (a raw line may hold a CR, which splitlines would split at)
                rows = data.split(b"\n")[:-1] if data.endswith(b"\n") else data.split(b"\n")
                found += [(int(c), int(i), v) for c, i, v in (row.split(b"\t", 2) for row in rows)]
            if len(found) >= SAMPLES:
                break
        return found[:SAMPLES]
