package logetl.spark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;

import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.codegen.UnsafeRowWriter;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * logetl's parse on Spark, in the executors' JVMs: the lines ({@code value}, the raw line as the text
 * source read it; {@code _input} int, the input's index) parsed by the native kernel ({@link Kernel}) a
 * batch at a time, with no Python worker and no Arrow round trip. The rows given back are those of
 * logetl's Python-worker path ({@code logetl/engines/spark_native.py}: {@code parse_batches},
 * {@code join_batches}), in the same schemas (given by the driver, as DDL), so the engine reads either the
 * same way.
 *
 * <p>The rows go in and come out as Spark's own ({@link InternalRow}): each line's bytes are copied once,
 * from the scan's row into the batch, and each parsed row is written once, straight from the batch
 * ({@link UnsafeRowWriter}); with Spark's public {@code Row}s a line was converted five times on its way
 * (a cast to binary, the row, its byte[], the encoder's row, the cast of the fields to strings).
 *
 * <p>Ordering: each partition's rows keep their order (one batch after the other, each in its lines'
 * order). Memory: one batch of lines a task (at most {@code batch} lines, as many as the Python workers'
 * Arrow batches hold, or the lines that fill {@link #BATCH_BYTES} bytes, one line more when a line alone
 * is longer) and what it gives back.
 */
public final class NativeParse {
    static final int BATCH_BYTES = 8 << 20;
    /** The first malformed lines of each partition are flagged (or sent) as samples. */
    static final int SAMPLES = 5;
    static final byte KEPT = 0, DASH = 4;

    private NativeParse() {}

    /** One row per line: the fields written (strings; empty unless the line is kept), {@code _status},
     * the raw line for malformed lines (else null), the sample flag, {@code _input}. */
    public static Dataset<Row> parsed(Dataset<Row> lines, String schema, byte[] program, List<Integer> out,
                                      int sizeIndex, int batch) {
        return made(lines, schema, new Parsed(new Spec(program, out, sizeIndex, batch)));
    }

    /** A few rows per batch, for a step whose sinks take the parse's records as they are: per sink, its
     * TSV lines joined by {@code \n} (tag: the sink's index); the trap's raw lines joined the same way (tag:
     * the number of sinks), when {@code trap}; one row per sample line (tag: one more, with its status and
     * input); the batch's counters (tag -1). {@code sinks}: each sink's fields as indexes into {@code out}. */
    public static Dataset<Row> joined(Dataset<Row> lines, String schema, byte[] program, List<Integer> out,
                                      int sizeIndex, int batch, List<List<Integer>> sinks, boolean trap) {
        int[][] chosen = new int[sinks.size()][];
        for (int i = 0; i < chosen.length; i++) chosen[i] = ints(sinks.get(i));
        return made(lines, schema, new Joined(new Spec(program, out, sizeIndex, batch), chosen, trap));
    }

    /** The rows {@code f} makes of each partition of {@code lines}' rows, as a DataFrame of {@code schema}. */
    static Dataset<Row> made(Dataset<Row> lines, String schema, FlatMapFunction<Iterator<InternalRow>, InternalRow> f) {
        RDD<InternalRow> rows = lines.queryExecution().toRdd().toJavaRDD().mapPartitions(f).rdd();
        return ((SparkSession) lines.sparkSession()).internalCreateDataFrame(rows, StructType.fromDDL(schema), false);
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

    /** What the kernel parses with (see _jni.c), and how many lines a batch holds. */
    static final class Spec implements Serializable {
        final byte[] program;
        final int[] out;
        final int sizeIndex;
        final int batch;

        Spec(byte[] program, List<Integer> out, int sizeIndex, int batch) {
            if (batch < 1) throw new IllegalArgumentException("a batch of " + batch + " lines");
            this.program = program;
            this.out = ints(out);
            this.sizeIndex = sizeIndex;
            this.batch = batch;
        }
    }

    /** A batch of lines and what the kernel made of them. */
    static final class Batch {
        final Spec spec;
        byte[] data = new byte[1 << 20];
        final int[] offsets, inputs, spans;
        final byte[] status;
        int n, bad;

        Batch(Spec spec) {
            this.spec = spec;
            offsets = new int[spec.batch + 1];
            inputs = new int[spec.batch];
            status = new byte[spec.batch];
            spans = new int[spec.batch * spec.out.length * 2];
        }

        /** Reads the next lines of {@code rows} and parses them; false when there were none. */
        boolean fill(Iterator<InternalRow> rows) {
            n = 0;
            int used = 0;
            while (n < spec.batch && used < BATCH_BYTES && rows.hasNext()) {
                InternalRow row = rows.next();
                UTF8String line = row.getUTF8String(0);   // the scan's bytes, not a copy (nor decoded)
                int length = line.numBytes();
                if (used + length > data.length) data = Arrays.copyOf(data, Math.max(data.length * 2, used + length));
                line.writeToMemory(data, org.apache.spark.unsafe.Platform.BYTE_ARRAY_OFFSET + used);
                offsets[n] = used;
                inputs[n] = row.getInt(1);
                used += length;
                n++;
            }
            offsets[n] = used;
            if (n == 0) return false;
            bad = Kernel.parse(spec.program, spec.out, spec.sizeIndex, data, offsets, n, spans, status);
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

    /** One row per line, written from the batch as the caller asks for it (the writer's row is reused:
     * Spark copies a row it keeps). */
    static final class Parsed implements FlatMapFunction<Iterator<InternalRow>, InternalRow> {
        final Spec spec;

        Parsed(Spec spec) {
            this.spec = spec;
        }

        @Override
        public Iterator<InternalRow> call(Iterator<InternalRow> input) {
            Kernel.load();
            int width = spec.out.length;
            Batch b = new Batch(spec);
            UnsafeRowWriter writer = new UnsafeRowWriter(width + 4, 64 * (width + 1));
            return new Iterator<InternalRow>() {
                int i, samples = SAMPLES;

                @Override
                public boolean hasNext() {
                    if (i < b.n) return true;
                    i = 0;
                    return b.fill(input);
                }

                @Override
                public InternalRow next() {
                    if (!hasNext()) throw new NoSuchElementException();
                    byte s = b.status[i];
                    boolean bad = Batch.malformed(s);
                    writer.reset();
                    writer.zeroOutNullBytes();
                    for (int k = 0; k < width; k++) {
                        int at = 2 * (i * width + k);
                        if (s == KEPT) writer.write(k, b.data, b.spans[at], b.spans[at + 1] - b.spans[at]);
                        else writer.write(k, b.data, 0, 0);
                    }
                    writer.write(width, s);
                    if (bad) writer.write(width + 1, b.data, b.offsets[i], b.offsets[i + 1] - b.offsets[i]);
                    else writer.setNullAt(width + 1);
                    boolean sampled = bad && samples > 0;
                    if (sampled) samples--;
                    writer.write(width + 2, sampled);
                    writer.write(width + 3, b.inputs[i]);
                    i++;
                    return writer.getRow();
                }
            };
        }
    }

    static final class Joined implements FlatMapFunction<Iterator<InternalRow>, InternalRow> {
        final Spec spec;
        final int[][] sinks;
        final boolean trap;

        Joined(Spec spec, int[][] sinks, boolean trap) {
            this.spec = spec;
            this.sinks = sinks;
            this.trap = trap;
        }

        @Override
        public Iterator<InternalRow> call(Iterator<InternalRow> input) {
            Kernel.load();
            Batch b = new Batch(spec);
            return new Iterator<InternalRow>() {
                final List<InternalRow> pending = new ArrayList<>();
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
                public InternalRow next() {
                    if (!hasNext()) throw new NoSuchElementException();
                    return pending.get(next++);
                }
            };
        }

        /** Adds the rows of one parsed batch to {@code rows}; returns the samples left in the partition. */
        int emit(Batch b, List<InternalRow> rows, int samples) {
            long[] counts = new long[5];   // reasons 1, 2, 3, dash, kept
            for (int i = 0; i < b.n; i++) counts[b.status[i] == KEPT ? 4 : b.status[i] - 1]++;
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
                    int size = -1;
                    for (int i = 0; i < b.n; i++)
                        if (Batch.malformed(b.status[i])) size += b.offsets[i + 1] - b.offsets[i] + 1;
                    byte[] raw = new byte[size];
                    int at = 0;
                    boolean first = true;
                    for (int i = 0; i < b.n; i++) {
                        if (!Batch.malformed(b.status[i])) continue;
                        if (!first) raw[at++] = '\n';
                        first = false;
                        int len = b.offsets[i + 1] - b.offsets[i];
                        System.arraycopy(b.data, b.offsets[i], raw, at, len);
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
                                                           counts[4]}));
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
                    System.arraycopy(b.data, s, text, at, e - s);
                    at += e - s;
                }
            }
            return text;
        }

        /** A row of {@code spark_native.joined_schema()}: tag, value (binary), status, input, the counters. */
        static InternalRow row(int tag, byte[] value, Byte status, Integer input, long[] counters) {
            Object[] values = new Object[10];
            values[0] = tag;
            values[1] = value;
            values[2] = status;
            values[3] = input;
            for (int c = 0; c < 6; c++) values[4 + c] = counters == null ? null : counters[c];
            return new GenericInternalRow(values);
        }
    }
}
