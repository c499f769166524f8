"""The Spark engine's native parse path: logetl's C kernel on the executors, over Arrow batches.

``DataFrame.mapInArrow`` hands a Python worker the input's rows as Arrow record batches; each line arrives
as one element of a binary column (the raw bytes: ``spark.read.text`` keeps them, the cast to binary in
the JVM keeps them, and Arrow's binary type is never validated), and ``logetl._scan.parse_arrow`` parses
the batch in place, reading the array's offsets and data buffers (no copy, no separators needed). What
goes back is one row per line, in the batch's order: the fields (empty unless the line is kept), a status
byte (0 kept, 1/2/3 the malformed reasons, 4 a size of ``-``), and, for malformed lines only, the raw
line and its file; ``_order`` passes through. So partitions keep their rows and their order, and the
engine counts, filters and traps exactly as on its built-in path.

This module is imported by the executors' Python workers (``parse_batches`` is pickled by reference):
it must import nothing the workers may lack beyond pyarrow and logetl's kernel. ``probe`` is the
session's check that they can.
"""
from __future__ import annotations

STATUS = "_status"
KEPT, DASH = 0, 4


def field_column(i: int) -> str:
    """The internal name of the i-th field written (a format's field may be called ``value``)."""
    return f"__logetl_f{i}"


def parse_batches(spec: tuple, batches):
    """mapInArrow's function: ``spec`` = (program or None for the original expression, output field
    indexes, size field index); the batches' columns are ``value`` (binary), ``_file``, ``_order``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from logetl._scan import parse_arrow

    program, out, size_index = spec
    for batch in batches:
        n = batch.num_rows
        value, file, order = batch.column(0), batch.column(1), batch.column(2)
        large = pa.types.is_large_binary(value.type)   # Spark asks for large types everywhere, or nowhere
        string, binary = (pa.large_string(), pa.large_binary()) if large else (pa.string(), pa.binary())
        if n == 0:
            fields, status, n_bad = [pa.array([], string)] * len(out), b"", 0
        else:
            bufs = value.buffers()
            status, n_bad, pieces = parse_arrow(bufs[1], bufs[2] if bufs[2] is not None else b"", value.offset,
                                                n, large, program, out, size_index)
            fields = [pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(o), pa.py_buffer(d)])
                      for o, d in pieces]
            if large:
                fields = [f.cast(string) for f in fields]
        codes = pa.Array.from_buffers(pa.int8(), n, [None, pa.py_buffer(status)])
        if n_bad:
            # the raw line and its file go back for malformed lines only (the trap and the samples)
            bad = pc.and_(pc.greater(codes, KEPT), pc.less(codes, DASH))
            raw = pc.if_else(bad, value, pa.scalar(None, binary))
            files = pc.if_else(bad, file, pa.scalar(None, file.type))
        else:
            raw, files = pa.nulls(n, binary), pa.nulls(n, file.type)
        yield pa.RecordBatch.from_arrays([*fields, codes, raw, files, order],
                                         names=[*(field_column(i) for i in range(len(out))),
                                                STATUS, "value", "_file", "_order"])


def probe(_):
    """Run by one task of the session's check: can this worker take the native path? Pickled by value
    (``__module__`` is set to ``__main__`` below), so it reaches a worker that cannot import logetl."""
    try:
        import logetl
        from logetl._scan import parse_arrow  # noqa: F401

        import pyarrow  # noqa: F401
    except Exception as exc:   # the notice names it: ModuleNotFoundError, ImportError of the .so, ...
        return ("missing", f"{type(exc).__name__}: {exc}")
    return ("ok", logetl.__version__)


probe.__module__ = "__main__"   # cloudpickle sends functions of __main__ by value, with their code
