"""The Spark engine's outputs: sinks in every format, partitioned or not, and stores (``Sinks``)."""
from __future__ import annotations

import re
from functools import reduce

from logetl import expressions as E
from logetl.engines.spark.expressions import column
from logetl.engines.spark.expressions import text as text_of
from logetl.io.outputs import DELIMITED, PART, header_line, partition_name
from logetl.engines.spark.operators import ORDER, _bad_partition, _metrics, _part_key
from logetl.engines.spark.errors import PARTITION_REFUSED
from logetl.engines.spark.session import SparkRun, _session_conf


MAX_WRITERS = "spark.sql.maxConcurrentOutputFileWriters"


#: how stores (a step's output that later steps read, checkpoints included) are written: without Parquet's
#: dictionary encoding, which a store (written once, read once) pays for on every high-cardinality string
#: column (request, time: 2M-line Join, local[*]: the parse-and-store job 7.9 s of executor CPU against
#: 11.3 s, and the step that reads it 1.2 s against 2.2 s); bigger files on the working directory's disk
STORE_OPTIONS = {"parquet.enable.dictionary": "false"}


#: the types a JSON Lines sink writes as JSON numbers from their text (``spark_expressions.SINK_TEXT``): the
#: text is made a string first, then the quotes around it are taken off (``SparkEngine._json_line``)
JSON_NUMBERS = {E.FLOAT}


class Sinks:
    """The Spark engine's outputs: a sink's part files in each format (``SINK_FORMATS``), partitioned or
    not, and the stores later steps read."""

    @staticmethod
    def _store(run: SparkRun, node, df) -> None:
        # appended into the place the working directory prepared: a bound --checkpoint-dir keeps its
        # marker and is never deleted (Spark's "overwrite" mode would remove the directory itself)
        path = run.work.prepare_store(node.name)
        df.write.mode("append").options(**STORE_OPTIONS).parquet(path)
        run.work.mark_complete(node.name)

    #: how each sink format is written: (the DataFrameWriter method, its options, the part files' suffix)
    SINK_FORMATS = {
        "tsv": ("text", {}, ""),
        # (the text writer: Spark's CSV writer turns an LF in a value into CRLF and leaves a record of one
        # null field out; see _delimited_line)
        "csv": ("text", {"lineSep": "\r\n"}, ".csv"),
        "parquet": ("parquet", {"compression": "zstd"}, ".parquet"),
        # a null is written as null, not left out: every object has every field, in field order
        # (written as text: the JSON of each record, from Spark's JSON writer's own generator, with its
        # escapes made the local engine's; see _json_line)
        "jsonl": ("text", {}, ".jsonl"),
    }

    #: the settings of a Parquet sink's write: a timestamp as Parquet's timestamp in microseconds, adjusted
    #: to UTC, as the local engine writes it (Spark's default is the legacy INT96)
    PARQUET_SETTINGS = {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}

    @staticmethod
    def _json_line(fields, types):
        r"""A record as the JSON Lines writer's object (``to_json`` is Spark's JSON writer's generator: the
        same text), with a null written as null, not left out (every object has every field, in field
        order), and the escapes of control characters in lower-case hex (``\u001b``) as the local engine,
        Python's json and most tools write them: Jackson writes ``\u001B``. The only upper-case hex Jackson
        writes is the last digit of ``\u000B``-``\u001F``. An escape's backslash follows an even run of
        backslashes (none, or escaped backslashes ``\\``), so a user's text ``\u001B``, written
        ``\\u001B``, stays as it is. A float or a timestamp is written as its text (``SINK_TEXT``); a
        field of a type in ``JSON_NUMBERS`` is written as a string of its text, whose quotes are then taken
        off (its value follows its key, ``{"f":`` or ``,"f":``, which no string's text holds unescaped)."""
        from pyspark.sql import functions as F

        values = [text_of(types[f], column(f)).alias(f) for f in fields]     # a float, a timestamp: its text
        line = F.to_json(F.struct(*values), {"ignoreNullFields": "false"})
        for digit in "ABCDEF":
            line = F.regexp_replace(line, r"(?<!\\)((?:\\\\)*\\u00[01])" + digit, "$1" + digit.lower())
        numbers = [f for f in fields if types[f] in JSON_NUMBERS]
        if numbers:
            line = F.regexp_replace(line, r'([{,]"(?:' + "|".join(re.escape(f) for f in numbers)
                                    + r')":)"(-?[0-9]+\.[0-9]+)"', "$1$2")
        return line

    @staticmethod
    def _delimited_line(format: str, values: list):
        """A record as the local engine writes it in ``format`` (``outputs.DELIMITED``): each value cast to
        a string (longs in decimal, booleans true/false), null as the empty field (concat_ws would leave
        a null out, separator and all). TSV as it is; CSV quoted as RFC 4180 (``assembly.Sink``): a value
        holding ``,``, ``"``, CR or LF, and the empty string, in ``"`` with ``"`` doubled; a record of one
        null field is ``""``."""
        from pyspark.sql import functions as F

        texts = [v.cast("string") for v in values]
        if format == "tsv":
            return F.concat_ws("\t", *[F.coalesce(t, F.lit("")) for t in texts])
        null = F.lit('""' if len(texts) == 1 else "")

        def field(t):
            quoted = (t == "") | t.contains(",") | t.contains('"') | t.contains("\r") | t.contains("\n")
            return (F.when(t.isNull(), null)
                    .when(quoted, F.concat(F.lit('"'), F.replace(t, F.lit('"'), F.lit('""')), F.lit('"')))
                    .otherwise(t))
        return F.concat_ws(",", *[field(t) for t in texts])

    @staticmethod
    def _head_parts(fs, directory: str, suffix: str, header: bytes, one_at_least: bool) -> None:
        """Starts every part file in ``directory`` with ``header`` (after ``_name_parts``), as the local
        engine writes them; ``one_at_least``: a directory without a part (no records) gets one holding the
        header alone."""
        parts = [n for n in fs.listdir(directory) if n.startswith("part-")]
        if not parts and one_at_least:
            parts = [f"{PART}{suffix}"]
            fs.touch(fs.join(directory, parts[0]))
        for name in parts:
            fs.prepend(fs.join(directory, name), header)

    @staticmethod
    def _nullable(spark, selected, columns):
        """The columns, each one Spark knows is never null (a count, a coalesce with a literal, an
        is_null) marked nullable, so that its Parquet column is ``optional`` as the local engine writes
        every column, not ``required``: Catalyst's KnownNullable, which changes nothing but the
        nullability and stays in the plan (no pass of its own, no cast)."""
        from pyspark.sql.classic.column import Column

        jvm = spark._jvm
        utils = jvm.org.apache.spark.sql.classic.ExpressionUtils
        known = jvm.org.apache.spark.sql.catalyst.expressions.KnownNullable
        return [c if f.nullable else Column(utils.column(known(utils.expression(c._jc)))).alias(f.name)
                for c, f in zip(columns, selected.schema.fields)]

    def _sink(self, ctx, node, df, state) -> None:
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        run: SparkRun = ctx.state
        out = run.outputs[node.tap]
        obs = Observation(f"sink_{node.name}")
        method, options, suffix = self.SINK_FORMATS[node.format]
        out.suffix = suffix
        by = list(node.partition_by)
        if node.format in DELIMITED:
            # a float or a timestamp as spark_expressions.text writes it
            line = self._delimited_line(node.format, [text_of(node.types[f], column(f)) for f in node.file_fields])
            # (the text writer takes one column of any name: not "value", which a partition field may be)
            columns = [line.alias("__logetl_line")]
        elif node.format == "jsonl":
            columns = [self._json_line(node.file_fields, node.types).alias("__logetl_line")]
        else:
            columns = [column(f) for f in node.file_fields]
            if not all(f.nullable for f in df.select(*columns).schema.fields):
                columns = self._nullable(df.sparkSession, df.select(*columns), columns)
        if by:
            # a value no directory name can hold fails the job at once, on any file system (else: Mkdirs
            # failed, or a name the local engine does not write); the failure then names it (below). Checked
            # before the sort: the writer must see the very columns that were sorted, or it sorts again by
            # the partition fields alone and the optimizer drops the sort below (input order then rests on
            # a sort that is not stable)
            refused = F.raise_error(F.lit(PARTITION_REFUSED))
            checked = df.withColumns({f: F.when(_bad_partition(f), refused).otherwise(column(f)) for f in by})
            # each task writes its rows of a partition in input order: sorted by the partition fields, then
            # _order (Spark's writer then needs no sort of its own); the files of a partition, by task,
            # concatenate in input order
            ordered = checked.sortWithinPartitions(*by, *([ORDER] if ORDER in df.columns else []))
            selected = ordered.select(*columns, *[column(f) for f in by])
        else:
            selected = df.select(*columns)
        writer = selected.observe(obs, F.count(F.lit(1)).alias("n")).write.options(**options)
        if by:
            writer = writer.partitionBy(*by)
        try:
            with _session_conf(df.sparkSession, self.PARQUET_SETTINGS if node.format == "parquet" else {}):
                getattr(writer, method)(out.staging)
        except Exception as exc:
            if by and PARTITION_REFUSED in str(exc):
                self._refuse_partition(df, by)
            raise
        for leaf in self._leaves(run.fs, out.staging) if by else [out.staging]:
            self._name_parts(run.fs, leaf, suffix)
            if node.header:
                self._head_parts(run.fs, leaf, suffix, header_line(node.format, node.file_fields), not by)
        n = int(_metrics(obs).get("n") or 0)
        state.count(node.name, "in", n)
        state.count(node.name, "out", n)
        ctx.run.written[node.tap] = ctx.run.written.get(node.tap, 0) + n

    @staticmethod
    def _refuse_partition(df, by: list[str]) -> None:
        """Raises the local engine's error (``partition_name``) for the first row, in input order, whose
        partition value no directory name can hold (a job over the sink's rows, run once the write failed)."""
        rows = df.where(reduce(lambda a, b: a | b, [_bad_partition(f) for f in by]))
        if ORDER in df.columns:
            rows = rows.orderBy(ORDER)
        for row in rows.select(*[column(f) for f in by]).limit(1).collect():
            for field, value in zip(by, row):
                partition_name(field, value)

    @classmethod
    def _leaves(cls, fs, directory: str) -> list[str]:
        """The partition directories (``FIELD=VALUE``, nested) under ``directory`` that hold part files."""
        found = []
        for name in fs.listdir(directory):
            where = fs.join(directory, name)
            if "=" in name and fs.isdir(where):
                inner = cls._leaves(fs, where)
                found += inner or [where]
        return found

    @staticmethod
    def _name_parts(fs, directory: str, suffix: str = "") -> None:
        """Spark's part-<task>-<uuid>-c<file>.txt become part-00000, part-00001, ... in task order (the
        partition order: input order, or key order after a sort), numbered wide enough that name order
        stays that order past 100,000 parts; empty tasks write no file. Checksum files of the local file
        system go."""
        names = fs.listdir(directory)
        parts = sorted((n for n in names if n.startswith("part-")), key=_part_key)
        width = max(5, len(str(len(parts) - 1)))
        for i, name in enumerate(parts):
            fs.rename(fs.join(directory, name), fs.join(directory, f"part-{i:0{width}d}{suffix}"))
        for name in names:
            if name.endswith(".crc"):
                fs.remove(fs.join(directory, name))
