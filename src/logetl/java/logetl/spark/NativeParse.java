package logetl.spark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;

import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.StructType;

/**
 * logetl's parse on Spark, in the executors' JVMs: the lines ({@code value} binary, the raw bytes;
 * {@code _input} int, the input's index) parsed by the native kernel ({@link Kernel}) a batch at a time,
 * with no Python worker and no Arrow round trip. The rows given back are those of logetl's Python-worker
 * path ({@code logetl/engines/spark/native.py}: {@code parse_batches}, {@code join_batches}), in the same
 * schemas (given by the driver, as DDL; a field is binary here, and the driver casts it to a string), so
 * the engine reads either the same way.
 *
 * <p>Spark's public API only ({@code Dataset.mapPartitions} of {@code Row}s): the parse stays an operator
 * of the query, planned and run with it. (Rows read and written as Spark's internal ones, through an RDD,
 * made the standalone 2M-line Join 0.6 s faster, 24.05 s against 24.69 s, and Branch no faster; but the
 * query below the parse was then planned, and its exchanges run, apart from the query, outside its
 * execution: not kept.)
 *
 * <p>Ordering: each partition's rows keep their order (one batch after the other, each in its lines'
 * order). Memory: one batch of lines a task (at most {@code batch} lines, as many as the Python workers'
 * Arrow batches hold; a batch ends once its lines fill {@link #BATCH_BYTES} bytes, so a long line is
 * taken whole) and, per line, where its fields are; the joined rows of a batch hold its sinks' lines.
 */
public final class NativeParse {
    static final int BATCH_BYTES = 8 << 20;
    /** The first malformed lines of each partition are flagged (or sent) as samples. */
    static final int SAMPLES = 5;
    static final byte KEPT = 0, DASH = 4, HEADER = 5, OTHER = 6;
    private static final byte[] EMPTY = new byte[0];

    private NativeParse() {}

    /** One row per line: the fields written (binary; empty unless the line is kept), {@code _status},
     * the raw line for malformed lines (else null), the sample flag, {@code _input}. */
    public static Dataset<Row> parsed(Dataset<Row> lines, String schema, byte[] program, List<Integer> out,
                                      int sizeIndex, int batch) {
        return lines.mapPartitions(new Parsed(new Spec(program, out, sizeIndex, batch)),
                                   Encoders.row(StructType.fromDDL(schema)));
    }

    /** A few rows per batch, for a step whose sinks take the parse's records as they are: per sink, its
     * TSV lines joined by {@code \n} (tag: the sink's index); the trap's raw lines joined the same way (tag:
     * the number of sinks), when {@code trap}; one row per sample line (tag: one more, with its status and
     * input); the batch's counters (tag -1). {@code sinks}: each sink's fields as indexes into {@code out}. */
    public static Dataset<Row> joined(Dataset<Row> lines, String schema, byte[] program, List<Integer> out,
                                      int sizeIndex, int batch, List<List<Integer>> sinks, boolean trap) {
        int[][] chosen = new int[sinks.size()][];
        for (int i = 0; i < chosen.length; i++) chosen[i] = ints(sinks.get(i));
        return lines.mapPartitions(new Joined(new Spec(program, out, sizeIndex, batch), chosen, trap),
                                   Encoders.row(StructType.fromDDL(schema)));
    }

    /** {@link #parsed} for a format whose columns change within a log (W3C's {@code #Fields:} lines): the
     * lines have a third column, {@code _seg}, the index of the program (with its fields written and its
     * size field) that parses them; {@code plus}: the fields written whose '+' are spaces. */
    public static Dataset<Row> parsedSegments(Dataset<Row> lines, String schema, List<byte[]> programs,
                                              List<List<Integer>> outs, List<Integer> sizes, List<Boolean> plus,
                                              int batch) {
        return lines.mapPartitions(new Parsed(new Spec(programs, outs, sizes, plus, batch)),
                                   Encoders.row(StructType.fromDDL(schema)));
    }

    /** {@link #joined} for a format whose columns change within a log (see {@link #parsedSegments}). */
    public static Dataset<Row> joinedSegments(Dataset<Row> lines, String schema, List<byte[]> programs,
                                              List<List<Integer>> outs, List<Integer> sizes, List<Boolean> plus,
                                              int batch, List<List<Integer>> sinks, boolean trap) {
        int[][] chosen = new int[sinks.size()][];
        for (int i = 0; i < chosen.length; i++) chosen[i] = ints(sinks.get(i));
        return lines.mapPartitions(new Joined(new Spec(programs, outs, sizes, plus, batch), chosen, trap),
                                   Encoders.row(StructType.fromDDL(schema)));
    }

    /** The session's check: {@code tasks} tasks, each saying {@code ok TAB version} (the library's), or
     * {@code missing TAB why}. A query (not an RDD job): planning it readies the driver's SQL planner and
     * its tasks the executors' query execution, which the step's first tasks then find ready (standalone,
     * 2M-line Branch: an RDD job ended 0.8 s sooner, but the step's job took that much longer). */
    public static List<String> probe(SparkSession spark, int tasks) {
        return spark.range(0, tasks, 1, tasks).mapPartitions(
            (MapPartitionsFunction<Long, String>) rows -> List.of(check()).iterator(), Encoders.STRING())
            .collectAsList();
    }

    /** Whether this JVM can run the kernel: {@code ok TAB version}, or {@code missing TAB why}. */
    public static String check() {
        try {
            Kernel.load();
            return "ok\t" + Kernel.version();
        } catch (IllegalStateException e) {
            return "missing\t" + e.getMessage();
        } catch (Throwable e) {   // (the kernel's own classes out of step with the library: a stale jar)
            return "missing\t" + e;
        }
    }

    static int[] ints(List<Integer> values) {
        int[] a = new int[values.size()];
        for (int i = 0; i < a.length; i++) a[i] = values.get(i);
        return a;
    }

    /** What the kernel parses with (see _jni.c), and how many lines a batch holds at the most. */
    static final class Spec implements Serializable {
        final byte[] program;
        final int[] out;
        final int sizeIndex;
        final int batch;
        /** segments: the programs by the lines' {@code _seg}, each with its fields written and size field;
         * null for one program */
        final byte[][] programs;
        final int[][] outs;
        final int[] sizes;
        /** the fields written whose '+' are spaces (null: none) */
        final boolean[] plus;

        Spec(byte[] program, List<Integer> out, int sizeIndex, int batch) {
            if (batch < 1) throw new IllegalArgumentException("a batch of " + batch + " lines");
            this.program = program;
            this.out = ints(out);
            this.sizeIndex = sizeIndex;
            this.batch = batch;
            this.programs = null;
            this.outs = null;
            this.sizes = null;
            this.plus = null;
        }

        Spec(List<byte[]> programs, List<List<Integer>> outs, List<Integer> sizes, List<Boolean> plus, int batch) {
            if (batch < 1) throw new IllegalArgumentException("a batch of " + batch + " lines");
            this.programs = programs.toArray(new byte[0][]);
            this.outs = new int[outs.size()][];
            for (int i = 0; i < this.outs.length; i++) this.outs[i] = ints(outs.get(i));
            this.sizes = ints(sizes);
            this.plus = new boolean[plus.size()];
            for (int i = 0; i < this.plus.length; i++) this.plus[i] = plus.get(i);
            this.program = this.programs[0];
            this.out = this.outs[0];
            this.sizeIndex = this.sizes[0];
            this.batch = batch;
        }

        /** A written field's bytes: '+' as spaces where {@code plus} says so. */
        byte[] value(int k, byte[] bytes) {
            if (plus != null && plus[k])
                for (int i = 0; i < bytes.length; i++) if (bytes[i] == '+') bytes[i] = ' ';
            return bytes;
        }
    }

    /** A batch of lines and what the kernel made of them. Its arrays grow with the lines it is given (up to
     * the batch's), so a small partition takes little whatever the batch. */
    static final class Batch {
        final Spec spec;
        byte[] data = new byte[1 << 16];
        int[] offsets, inputs, spans;
        byte[] status;
        int n, bad;
        /** segments: the program of this batch's lines, and a line read that starts the next batch */
        int seg;
        Row held;

        Batch(Spec spec) {
            this.spec = spec;
            room(Math.min(spec.batch, 1024));
        }

        private void room(int lines) {
            offsets = offsets == null ? new int[lines + 1] : Arrays.copyOf(offsets, lines + 1);
            inputs = inputs == null ? new int[lines] : Arrays.copyOf(inputs, lines);
            status = new byte[lines];
            spans = new int[Math.multiplyExact(lines, spec.out.length * 2)];
        }

        /** Reads the next lines of {@code rows} and parses them; false when there were none. */
        boolean fill(Iterator<Row> rows) {
            n = 0;
            int used = 0;
            while (n < spec.batch && used < BATCH_BYTES && (held != null || rows.hasNext())) {
                if (n == inputs.length) room((int) Math.min(spec.batch, 2L * n));
                Row row = held != null ? held : rows.next();
                held = null;
                if (spec.programs != null) {   // a batch holds lines of one program
                    int s = row.getInt(2);
                    if (n == 0) seg = s;
                    else if (s != seg) { held = row; break; }
                }
                byte[] line = (byte[]) row.get(0);
                if (used + line.length > data.length)
                    data = Arrays.copyOf(data, Math.max(data.length * 2, used + line.length));
                System.arraycopy(line, 0, data, used, line.length);
                offsets[n] = used;
                inputs[n] = row.getInt(1);
                used += line.length;
                n++;
            }
            offsets[n] = used;
            if (n == 0) return false;
            // a JSON program (first token kind 11) writes the values it decodes after the lines: at most
            // twice the lines' bytes and a little per line (see _json.h)
            long room = 3L * used + 16L * n + 64;
            if (spec.program != null && spec.program.length > 0 && spec.program[0] == 11 && data.length < room)
                data = Arrays.copyOf(data, Math.toIntExact(room));
            bad = spec.programs == null
                ? Kernel.parse(spec.program, spec.out, spec.sizeIndex, data, offsets, n, spans, status)
                : Kernel.parse(spec.programs[seg], spec.outs[seg], spec.sizes[seg], data, offsets, n, spans, status);
            if (bad < 0) throw new IllegalStateException("logetl's kernel refused its arguments");
            return true;
        }

        byte[] line(int i) {
            return Arrays.copyOfRange(data, offsets[i], offsets[i + 1]);
        }

        static boolean malformed(byte s) {
            return s >= 1 && s <= 3;
        }
    }

    /** One row per line, made from the batch as the caller asks for it. */
    static final class Parsed implements MapPartitionsFunction<Row, Row> {
        final Spec spec;

        Parsed(Spec spec) {
            this.spec = spec;
        }

        @Override
        public Iterator<Row> call(Iterator<Row> input) {
            Kernel.load();
            int width = spec.out.length;
            Batch b = new Batch(spec);
            return new Iterator<Row>() {
                int i, samples = SAMPLES;

                @Override
                public boolean hasNext() {
                    if (i < b.n) return true;
                    i = 0;
                    return b.fill(input);
                }

                @Override
                public Row next() {
                    if (!hasNext()) throw new NoSuchElementException();
                    Object[] values = new Object[width + 4];
                    byte s = b.status[i];
                    for (int k = 0; k < width; k++) {
                        int at = 2 * (i * width + k);
                        // a span of -1: a null (a tail field of a line without a well-formed tail)
                        values[k] = s != KEPT ? EMPTY
                                : b.spans[at] < 0 ? null
                                : spec.value(k, Arrays.copyOfRange(b.data, b.spans[at], b.spans[at + 1]));
                    }
                    boolean bad = Batch.malformed(s);
                    boolean sampled = bad && samples > 0;
                    if (sampled) samples--;
                    values[width] = s;
                    values[width + 1] = bad ? b.line(i) : null;
                    values[width + 2] = sampled;
                    values[width + 3] = b.inputs[i];
                    i++;
                    return RowFactory.create(values);
                }
            };
        }
    }

    /** A few rows per batch (see {@link NativeParse#joined}). */
    static final class Joined implements MapPartitionsFunction<Row, Row> {
        final Spec spec;
        final int[][] sinks;
        final boolean trap;

        Joined(Spec spec, int[][] sinks, boolean trap) {
            this.spec = spec;
            this.sinks = sinks;
            this.trap = trap;
        }

        @Override
        public Iterator<Row> call(Iterator<Row> input) {
            Kernel.load();
            Batch b = new Batch(spec);
            return new Iterator<Row>() {
                final List<Row> pending = new ArrayList<>();
                int next, samples = SAMPLES;

                @Override
                public boolean hasNext() {
                    while (next == pending.size()) {
                        pending.clear();
                        next = 0;
                        if (!b.fill(input)) return false;
                        samples = emit(b, pending, samples);
                    }
                    return true;
                }

                @Override
                public Row next() {
                    if (!hasNext()) throw new NoSuchElementException();
                    return pending.get(next++);
                }
            };
        }

        /** Adds the rows of one parsed batch to {@code rows}; returns the samples left in the partition. */
        int emit(Batch b, List<Row> rows, int samples) {
            long[] counts = new long[7];   // reasons 1, 2, 3, dash, kept, header, other
            for (int i = 0; i < b.n; i++)
                counts[b.status[i] == KEPT ? 4 : b.status[i] == HEADER ? 5 : b.status[i] == OTHER ? 6 : b.status[i] - 1]++;
            int width = spec.out.length;
            if (counts[4] > 0) {
                byte[][] made = new byte[sinks.length][];
                for (int t = 0; t < sinks.length; t++) {
                    for (int u = 0; u < t && made[t] == null; u++)
                        if (Arrays.equals(sinks[u], sinks[t])) made[t] = made[u];
                    if (made[t] == null) made[t] = tsv(b, sinks[t], width);
                    rows.add(row(t, made[t], null, null, null));
                }
            }
            long bad = counts[0] + counts[1] + counts[2];
            if (bad > 0) {
                if (trap) {
                    // a line the driver marked too long (a negative input) has one byte put before it: the
                    // trap gets the line's own bytes
                    int size = -1;
                    for (int i = 0; i < b.n; i++)
                        if (Batch.malformed(b.status[i]))
                            size += b.offsets[i + 1] - b.offsets[i] + 1 - (b.inputs[i] < 0 ? 1 : 0);
                    byte[] raw = new byte[size];
                    int at = 0;
                    boolean first = true;
                    for (int i = 0; i < b.n; i++) {
                        if (!Batch.malformed(b.status[i])) continue;
                        if (!first) raw[at++] = '\n';
                        first = false;
                        int from = b.offsets[i] + (b.inputs[i] < 0 ? 1 : 0), len = b.offsets[i + 1] - from;
                        System.arraycopy(b.data, from, raw, at, len);
                        at += len;
                    }
                    rows.add(row(sinks.length, raw, null, null, null));
                }
                for (int i = 0; i < b.n && samples > 0; i++) {
                    if (!Batch.malformed(b.status[i])) continue;
                    samples--;
                    rows.add(row(sinks.length + 1, b.line(i), b.status[i], b.inputs[i], null));
                }
            }
            rows.add(row(-1, null, null, null, new long[] {b.n, counts[0], counts[1], counts[2], counts[3],
                                                           counts[4], counts[5], counts[6]}));
            return samples;
        }

        /** The kept lines' TSV of the fields {@code chosen} (indexes into the spans of a line), joined by
         * {@code \n}, without one after the last. */
        static byte[] tsv(Batch b, int[] chosen, int width) {
            long size = -1;
            for (int i = 0; i < b.n; i++) {
                if (b.status[i] != KEPT) continue;
                size += chosen.length;   // the TABs between the fields and the line's \n
                for (int k : chosen) size += b.spans[2 * (i * width + k) + 1] - b.spans[2 * (i * width + k)];
            }
            byte[] text = new byte[(int) size];
            int at = 0;
            boolean first = true;
            for (int i = 0; i < b.n; i++) {
                if (b.status[i] != KEPT) continue;
                if (!first) text[at++] = '\n';
                first = false;
                for (int j = 0; j < chosen.length; j++) {
                    if (j > 0) text[at++] = '\t';
                    int s = b.spans[2 * (i * width + chosen[j])], e = b.spans[2 * (i * width + chosen[j]) + 1];
                    if (e > s) System.arraycopy(b.data, s, text, at, e - s);   // a null (-1, -1) is empty
                    if (b.spec.plus != null && b.spec.plus[chosen[j]])
                        for (int c = at; c < at + e - s; c++) if (text[c] == '+') text[c] = ' ';
                    at += e - s;
                }
            }
            return text;
        }

        /** A row of {@code spark_native.joined_schema()}: tag, value (binary), status, input, the counters. */
        static Row row(int tag, byte[] value, Byte status, Integer input, long[] counters) {
            Object[] values = new Object[12];
            values[0] = tag;
            values[1] = value;
            values[2] = status;
            values[3] = input;
            for (int c = 0; c < 8; c++) values[4 + c] = counters == null ? null : counters[c];
            return RowFactory.create(values);
        }
    }
}
