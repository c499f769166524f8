"""The Spark engine's native parse path: logetl's C kernel on the executors, over Arrow batches.

``DataFrame.mapInArrow`` hands a Python worker the input's rows as Arrow record batches; each line arrives
as one element of a binary column (the raw bytes: ``spark.read.text`` keeps them, the cast to binary in
the JVM keeps them, and Arrow's binary type is never validated), and ``logetl._scan.parse_arrow`` parses
the batch in place, reading the array's offsets and data buffers (no copy, no separators needed). What
goes back is one row per line, in the batch's order: the fields (empty unless the line is kept), a status
byte (0 kept, 1/2/3 the malformed reasons, 4 a size of ``-``, 5 a header line of the format), and, for malformed lines only, the raw
line, and the line's input index as it came (``_input``: the parse is one operator over the union of every
input's read, each read giving its index). So partitions keep their rows and their order, and the engine
adds the input-order key after the parse, then counts, filters and traps exactly as on its built-in path.
Besides the lines, only that 32-bit index makes the round trip to Python: sending each line's file name
and order key there and back cost as much as a third of the round trip (2M lines, ``local[*]``: 2.4-3.3 s
against 1.8-2.4 s for a noop write through an identity ``mapInArrow``); the index cost nothing measurable.

This module is imported by the executors' Python workers (``parse_batches`` is pickled by reference):
it must import nothing the workers may lack beyond pyarrow and logetl's kernel. ``probe`` is the
session's check that they can.
"""
from __future__ import annotations

from collections import namedtuple

STATUS = "_status"
#: true on the first SAMPLES malformed lines of each partition: the first malformed lines of the input are
#: among them, so a step can write them aside for its samples in the same pass (a bounded few per task)
SAMPLE = "_sample"
SAMPLES = 5
KEPT, DASH, HEADER, OTHER = 0, 4, 5, 6
#: the index of a line's input file (the engine's column, given with each line and given back)
INPUT = "_input"
#: a segmented parse (``w3c``): the index of the program of a line (a third column of the lines)
SEG = "_seg"
#: a segmented parse's programs, by ``_seg``: each with its fields written and its size field (-1: none);
#: ``plus``: per field written, 1 when its '+' are spaces
Segments = namedtuple("Segments", "programs outs sizes plus")
#: status byte -> 1 for the malformed reasons (1, 2, 3), 0 otherwise (bytes.translate)
_MALFORMED = bytes(1 if 1 <= b <= 3 else 0 for b in range(256))


def field_column(i: int) -> str:
    """The internal name of the i-th field written (a format's field may be called ``value``)."""
    return f"__logetl_f{i}"


def parse_batches(spec: tuple, batches):
    """mapInArrow's function: ``spec`` = (program or None for the original expression, output field
    indexes, size field index); the batches' columns are ``value`` (binary) and ``_input`` (the line's
    input's index), which goes back as it came."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from logetl._scan import parse_arrow

    program, out, size_index = spec
    plus = ()
    if isinstance(program, Segments):   # each run of lines of one program, parsed with it
        plus = tuple(k for k, p in enumerate(program.plus) if p)
        runs = _segment_runs(program, batches)
    else:
        runs = ((b, program, out, size_index) for b in batches)
    samples_left = SAMPLES
    for batch, program, out, size_index in runs:
        n = batch.num_rows
        value = batch.column(0)
        large = pa.types.is_large_binary(value.type)   # Spark asks for large types everywhere, or nowhere
        string, binary = (pa.large_string(), pa.large_binary()) if large else (pa.string(), pa.binary())
        if n == 0:
            fields, status, n_bad = [pa.array([], string)] * len(out), b"", 0
        else:
            bufs = value.buffers()
            status, n_bad, pieces, valid = parse_arrow(bufs[1], bufs[2] if bufs[2] is not None else b"",
                                                       value.offset, n, large, program, out, size_index)
            # valid: the null tail fields of the original expression (``out`` past its five), else None
            nulls = None if valid is None else pa.py_buffer(valid)
            fields = [pa.Array.from_buffers(pa.string(), n, [nulls if program is None and i >= 5 else None,
                                                            pa.py_buffer(o), pa.py_buffer(d)])
                      for i, (o, d) in zip(out, pieces)]
            if large:
                fields = [f.cast(string) for f in fields]
            for k in plus:
                fields[k] = pc.replace_substring(fields[k], "+", " ")
        codes = pa.Array.from_buffers(pa.int8(), n, [None, pa.py_buffer(status)])
        sample = bytearray(n)
        if n_bad:
            # the raw line goes back for malformed lines only (the trap and the samples)
            bad = pc.and_(pc.greater(codes, KEPT), pc.less(codes, DASH))
            raw = pc.if_else(bad, value, pa.scalar(None, binary))
            if samples_left:   # once a task has its samples, its later batches skip the search
                flags, at = bytes(status).translate(_MALFORMED), -1
                while samples_left and (at := flags.find(1, at + 1)) >= 0:
                    sample[at], samples_left = 1, samples_left - 1
        else:
            raw = pa.nulls(n, binary)
        sampled = pa.Array.from_buffers(pa.uint8(), n, [None, pa.py_buffer(sample)]).cast(pa.bool_())
        yield pa.RecordBatch.from_arrays([*fields, codes, raw, sampled, batch.column(1)],
                                         names=[*(field_column(i) for i in range(len(out))), STATUS, "value", SAMPLE,
                                                INPUT])


def _segment_runs(segments: Segments, batches):
    """The batches of a segmented parse cut into runs of lines of one program (their ``_seg``, the third
    column): (run, program, out, size field) each."""
    import pyarrow.compute as pc

    for batch in batches:
        seg = batch.column(2)
        n = batch.num_rows
        if n == 0:
            yield batch, segments.programs[0], segments.outs[0], segments.sizes[0]
            continue
        cuts = [0]
        if n > 1:
            cuts += [i + 1 for i in pc.indices_nonzero(pc.not_equal(seg.slice(1), seg.slice(0, n - 1))).to_pylist()]
        cuts.append(n)
        for a, b in zip(cuts, cuts[1:]):
            s = seg[a].as_py()
            yield batch.slice(a, b - a), segments.programs[s], segments.outs[s], segments.sizes[s]


def probe(_):
    """Can this worker take the native path? Run by each task of the session's check on a cluster
    (``probe_batches``) and by ``probe_in`` on a local master. Pickled by value (``__module__`` is set to
    ``__main__`` below), so it reaches a worker that cannot import logetl."""
    try:
        import logetl
        from logetl._scan import parse_arrow  # noqa: F401

        import pyarrow  # noqa: F401
    except Exception as exc:   # the notice names it: ModuleNotFoundError, ImportError of the .so, ...
        return ("missing", f"{type(exc).__name__}: {exc}")
    return ("ok", logetl.__version__)


#: ``probe_batches``'s rows
PROBE_SCHEMA = "status string, why string"


def probe_batches(batches):
    """mapInArrow's function of the session's check on a cluster: ``probe``'s answer, one row per task.
    A mapInArrow job, as the parse is: Spark keeps one pool of Python workers per kind of job, and the
    check's workers, left with pyarrow and the kernel imported, are those the step's first tasks reuse."""
    import pyarrow as pa

    for _ in batches:
        pass
    status, why = probe(0)
    yield pa.RecordBatch.from_arrays([pa.array([status]), pa.array([why])], names=["status", "why"])


# cloudpickle sends functions of __main__ by value, with their code
probe.__module__ = probe_batches.__module__ = "__main__"


def probe_in(python: str) -> tuple[str, str]:
    """``probe`` run by a fresh process of ``python``: the check for a local master, whose executors' Python
    workers are that interpreter on this machine, with this environment. It costs ~0.15 s where a Spark
    job costs 1.2-1.6 s (most of it starting the first Python worker, on the critical path of the run)."""
    import inspect
    import json
    import subprocess

    code = f"{inspect.getsource(probe)}\nimport json\nprint(json.dumps(probe(0)))\n"
    try:
        done = subprocess.run([python, "-c", code], capture_output=True, timeout=120)
    except OSError as exc:   # as Spark says it of a worker it cannot start, in one line
        return ("missing", f"cannot run {python!r}: {exc.strerror or exc}")
    except subprocess.SubprocessError as exc:
        return ("missing", f"{python!r} did not answer: {exc}")
    try:
        return tuple(json.loads(done.stdout.decode().strip().splitlines()[-1]))
    except (ValueError, IndexError):
        said = (done.stderr.decode(errors="replace").strip().splitlines() or [f"exit status {done.returncode}"])
        return ("missing", f"{python} failed: {said[-1]}")


#: ``join_batches``'s rows: the output a row is written to (-1: the batch's counters, written nowhere)
TAG = "__logetl_output"
#: the counters of a batch, on its counters row: lines, the malformed reasons 1/2/3, size ``-``, kept, header
COUNTERS = ("lines", "reason1", "reason2", "reason3", "dash", "kept", "header", "other")


def joined_schema() -> str:
    return ", ".join([f"{TAG} int", "value binary", f"{STATUS} tinyint", f"{INPUT} int",
                      *(f"{c} long" for c in COUNTERS)])


def _trapped(raw, inputs):
    """The trap's lines of a batch: the malformed lines' raw bytes (``raw`` is null for the others), each
    line the driver marked too long (its input negated, ``ParsePaths._marked``) without the byte put before
    it."""
    import pyarrow.compute as pc

    present = pc.is_valid(raw)
    raw, inputs = raw.filter(present), inputs.filter(present)
    if len(inputs) == 0 or pc.min(inputs).as_py() >= 0:
        return raw
    return pc.if_else(pc.less(inputs, 0), pc.binary_slice(raw, 1, 2 ** 31 - 1), raw)


def join_batches(spec: tuple, sinks: tuple, trap: bool, batches):
    """mapInArrow's function for a step whose sinks take the parse's records as they are (fields chosen,
    reordered, renamed; no filter, nothing computed): ``parse_batches``, then per batch one row per sink
    holding its TSV lines joined by ``\\n`` (the text writer ends the row with the last one's), one row of
    the trap's raw lines joined the same way, one row per sample line (``_status`` and ``_input`` set), and
    one row of the batch's counters (tag -1). ``sinks``: each sink's fields, as indexes into the parse's fields (spec's
    out). Tags: sink i is i, the trap len(sinks), the samples len(sinks) + 1.

    The executors' JVM then handles a few rows per batch instead of one per line and output: 2M-line
    Branch's action takes about a third less time than with the fields sent back and every sink's line
    made in the JVM (docs/guides/spark.md, "Sinks joined by the workers")."""
    import pyarrow as pa
    import pyarrow.compute as pc

    trap_tag, samples_tag = len(sinks), len(sinks) + 1

    def lines(arrays) -> bytes:   # the records' TSV lines, joined by \n (no \n after the last)
        # (as binary: a field's bytes are the line's, and joining them checks no encoding)
        # (a null -- a tail field of a line without one -- is the empty field, as every TSV writes it)
        arrays = [a.cast(pa.binary()).fill_null(b"") for a in arrays]
        line = arrays[0] if len(arrays) == 1 else pc.binary_join_element_wise(*arrays, b"\t")
        return pc.binary_join(pa.ListArray.from_arrays(pa.array([0, len(line)], pa.int32()), line), b"\n")[0].as_py()

    for batch in parse_batches(spec, batches):
        n_fields = batch.num_columns - 4   # then the status, the raw line, the sample flag, the input
        status = batch.column(n_fields)
        counts = pc.value_counts(status).to_pylist()
        by_code = {c["values"]: c["counts"] for c in counts}
        tags, values, codes, inputs = [], [], [], []
        kept = by_code.get(KEPT, 0)
        if kept:
            mask = pc.equal(status, KEPT)
            fields = [pc.filter(batch.column(i), mask) for i in range(n_fields)]
            made: dict[tuple, bytes] = {}
            for t, chosen in enumerate(sinks):
                if chosen not in made:
                    made[chosen] = lines([fields[i] for i in chosen])
                tags.append(t), values.append(made[chosen]), codes.append(None), inputs.append(None)
        bad = sum(by_code.get(c, 0) for c in (1, 2, 3))
        if bad:
            raw = batch.column(n_fields + 1)
            if trap:
                tags.append(trap_tag), values.append(lines([_trapped(raw, batch.column(n_fields + 3))]))
                codes.append(None)
                inputs.append(None)
            sampled = pc.filter(pa.record_batch([raw, status, batch.column(n_fields + 3)], names=["v", "s", "i"]),
                                batch.column(n_fields + 2))
            for v, s, i in zip(*(c.to_pylist() for c in sampled.columns)):
                tags.append(samples_tag), values.append(v), codes.append(s), inputs.append(i)
        n = len(tags)
        binary = batch.column(n_fields + 1).type   # the raw lines': large when Spark asks for large types
        columns = [pa.array(tags + [-1], pa.int32()), pa.array(values + [None], binary),
                   pa.array(codes + [None], pa.int8()), pa.array(inputs + [None], pa.int32())]
        row = [batch.num_rows, by_code.get(1, 0), by_code.get(2, 0), by_code.get(3, 0), by_code.get(DASH, 0), kept,
               by_code.get(HEADER, 0), by_code.get(OTHER, 0)]
        columns += [pa.array([None] * n + [c], pa.int64()) for c in row]
        yield pa.RecordBatch.from_arrays(columns, names=[TAG, "value", STATUS, INPUT, *COUNTERS])
