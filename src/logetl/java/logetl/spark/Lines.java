package logetl.spark;

import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.io.OutputStream;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.io.compress.CompressionCodec;
import org.apache.hadoop.io.compress.CompressionCodecFactory;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.StructType;

/**
 * The input's lines on Spark, read in memory bounded by the line limit ({@code LOGETL_MAX_LINE}) rather
 * than by the longest line: Hadoop's line reader holds each line whole, and its own limit
 * ({@code mapreduce.input.linerecordreader.line.maxlength}) drops a longer line without a trace.
 *
 * <p>A line is the bytes before a {@code \n} (or the end of the file), as Spark's text source with
 * {@code lineSep "\n"} splits them. A line longer than the limit is read on to its end without being kept:
 * its row holds a <em>placeholder</em> instead, {@code marker + "OFFSET SIZE N:" + its file's name (N
 * bytes of UTF-8) + its first head bytes}, where OFFSET is where it starts in its (decompressed) file. The marker is a random token of the
 * driver's run, so no line of a log can be taken for one. The driver counts, samples and traps that row
 * as a line too long; {@link #patch} then puts the line's own bytes, copied from its file a buffer at a
 * time, in the trap in the placeholder's place.
 *
 * <p>Splits: each input's splits are read in its order, one partition each (a line belongs to the split
 * it starts in, as with Hadoop: a split that does not start the file starts after the first {@code \n}
 * at or after its start), consecutive small files packed into one partition, a compressed file read
 * whole by one task. The partitions are in input order, and so are the rows in each.
 */
public final class Lines {
    private static final int BUFFER = 1 << 16;

    private Lines() {}

    /** A file named by its URI (as Hadoop's {@code Path.toUri} spells it: a space or {@code %} escaped). */
    static Path path(String uri) {
        return new Path(java.net.URI.create(uri));
    }

    /** What one partition reads: a range of one input ({@code end} -1: to its end). */
    static final class Piece implements Serializable {
        private static final long serialVersionUID = 1L;
        final int input;
        final String path;
        final long start, end;

        Piece(int input, String path, long start, long end) {
            this.input = input;
            this.path = path;
            this.start = start;
            this.end = end;
        }
    }

    /** A Hadoop configuration that travels to the executors. */
    static final class Conf implements Serializable {
        private static final long serialVersionUID = 1L;
        transient Configuration value;

        Conf(Configuration value) {
            this.value = value;
        }

        private void writeObject(ObjectOutputStream out) throws IOException {
            value.write(new DataOutputStream(out));
        }

        private void readObject(ObjectInputStream in) throws IOException {
            value = new Configuration(false);
            value.readFields(new DataInputStream(in));
        }
    }

    /**
     * The lines of the files {@code paths} (NUL between them; the i-th is input i, of the i-th of
     * {@code sizes} bytes, commas between them: one string each, not a call a file) as rows of
     * {@code value} binary and {@code _input} int, in input order: each file cut into splits of at most
     * {@code split} bytes, runs of files of at most {@code small} bytes packed into partitions of at most
     * {@code split} bytes; a line longer than {@code limit} bytes given as its placeholder (with its first
     * {@code head} bytes).
     */
    public static Dataset<Row> read(SparkSession spark, String paths, String sizes, long split, long small, int limit,
                                    int head, byte[] marker) {
        Configuration conf = spark.sessionState().newHadoopConf();
        CompressionCodecFactory codecs = new CompressionCodecFactory(conf);
        List<List<Piece>> parts = new ArrayList<>();
        String[] names = paths.isEmpty() ? new String[0] : paths.split("\u0000", -1);
        String[] bytes = sizes.isEmpty() ? new String[0] : sizes.split(",", -1);
        long packed = -1;   // the bytes of the last partition when it packs small files, else -1
        for (int i = 0; i < names.length; i++) {
            String path = names[i];
            long size = Long.parseLong(bytes[i]);
            boolean whole = codecs.getCodec(path(path)) != null;
            if (size <= small) {
                if (packed >= 0 && packed + size <= split) {
                    parts.get(parts.size() - 1).add(new Piece(i, path, 0, -1));
                    packed += size;
                } else {
                    parts.add(new ArrayList<>(List.of(new Piece(i, path, 0, -1))));
                    packed = size;
                }
                continue;
            }
            packed = -1;
            if (whole) {
                parts.add(List.of(new Piece(i, path, 0, -1)));
                continue;
            }
            long n = Math.max(1, (size + split - 1) / split), each = (size + n - 1) / n;
            for (long s = 0; s < size; s += each) {
                parts.add(List.of(new Piece(i, path, s, s + each >= size ? -1 : s + each)));
            }
        }
        if (parts.isEmpty()) {
            parts.add(List.of());
        }
        Conf shipped = new Conf(conf);
        JavaRDD<List<Piece>> pieces = JavaSparkContext.fromSparkContext(spark.sparkContext())
            .parallelize(parts, parts.size());
        JavaRDD<Row> rows = pieces.flatMap(list -> new Reader(shipped.value, list, limit, head, marker));
        return spark.createDataFrame(rows, StructType.fromDDL("value binary, _input int"));
    }

    /** The rows of a partition's pieces, a line at a time. */
    static final class Reader implements Iterator<Row> {
        private final Configuration conf;
        private final Iterator<Piece> pieces;
        private final int limit, head;
        private final byte[] marker;
        private Piece piece;
        private InputStream in;
        private long pos, end;
        private Row next;
        private byte[] line = new byte[256];
        private final byte[] buf = new byte[BUFFER];
        private int at, got;

        Reader(Configuration conf, List<Piece> pieces, int limit, int head, byte[] marker) {
            this.conf = conf;
            this.pieces = pieces.iterator();
            this.limit = limit;
            this.head = head;
            this.marker = marker;
        }

        @Override
        public boolean hasNext() {
            try {
                while (next == null) {
                    if (in == null) {
                        if (!pieces.hasNext()) {
                            return false;
                        }
                        open(pieces.next());
                    }
                    next = line();
                    if (next == null) {
                        in.close();
                        in = null;
                    }
                }
                return true;
            } catch (IOException e) {
                throw new RuntimeException("cannot read " + piece.path + ": " + e.getMessage(), e);
            }
        }

        @Override
        public Row next() {
            if (!hasNext()) {
                throw new NoSuchElementException();
            }
            Row row = next;
            next = null;
            return row;
        }

        private void open(Piece p) throws IOException {
            piece = p;
            Path path = path(p.path);
            FileSystem fs = path.getFileSystem(conf);
            CompressionCodec codec = new CompressionCodecFactory(conf).getCodec(path);
            FSDataInputStream raw = fs.open(path);
            if (codec != null) {
                in = codec.createInputStream(raw);
            } else {
                raw.seek(p.start);
                in = raw;
            }
            pos = codec != null ? 0 : p.start;
            end = p.end < 0 ? Long.MAX_VALUE : p.end;
            at = got = 0;
            if (pos > 0) {   // the line this split starts in belongs to the split before
                while (fill()) {
                    int nl = newline();
                    if (nl >= 0) {
                        pos += nl + 1 - at;
                        at = nl + 1;
                        return;
                    }
                    pos += got - at;
                    at = got;
                }
            }
        }

        /** More bytes in the buffer when it has none left; false at the end of the input. */
        private boolean fill() throws IOException {
            if (at < got) {
                return true;
            }
            at = 0;
            got = Math.max(0, in.read(buf, 0, buf.length));
            return got > 0;
        }

        /** Where the next {@code \n} is in the buffer from {@code at}, or -1. */
        private int newline() {
            for (int i = at; i < got; i++) {
                if (buf[i] == '\n') {
                    return i;
                }
            }
            return -1;
        }

        /** The next line of the piece as a row, or null at its end: at most {@code limit} + 1 of its bytes
         * are held, so that a longer line is known as one, and only its head is given. */
        private Row line() throws IOException {
            if (pos > end || !fill()) {
                return null;
            }
            long start = pos, size = 0;
            int kept = 0;
            while (fill()) {
                int nl = newline(), stop = nl >= 0 ? nl : got, n = stop - at;
                int keep = (int) Math.max(0, Math.min(n, limit + 1L - size));
                if (keep > 0) {
                    if (kept + keep > line.length) {
                        line = Arrays.copyOf(line, (int) Math.min(limit + 1L, Math.max(kept + keep, 2L * line.length)));
                    }
                    System.arraycopy(buf, at, line, kept, keep);
                    kept += keep;
                }
                size += n;
                pos += n;
                at = stop;
                if (nl >= 0) {
                    at++;
                    pos++;
                    break;
                }
            }
            if (size <= limit) {
                return RowFactory.create(Arrays.copyOf(line, kept), piece.input);
            }
            byte[] name = piece.path.getBytes(StandardCharsets.UTF_8);
            byte[] said = (start + " " + size + " " + name.length + ":").getBytes(StandardCharsets.US_ASCII);
            int h = Math.min(head, kept);
            byte[] value = new byte[marker.length + said.length + name.length + h];
            System.arraycopy(marker, 0, value, 0, marker.length);
            System.arraycopy(said, 0, value, marker.length, said.length);
            System.arraycopy(name, 0, value, marker.length + said.length, name.length);
            System.arraycopy(line, 0, value, marker.length + said.length + name.length, h);
            if (line.length > BUFFER) {
                line = new byte[256];   // a long line's bytes are not held for the rest of the task
            }
            return RowFactory.create(value, piece.input);
        }
    }

    /**
     * Puts the lines too long in the trap's part files in {@code dir} (in place of their placeholders, each
     * line that starts with {@code marker}), copied from their files a buffer at a time. A part without a placeholder is left as it is. Returns how many lines it put.
     */
    public static long patch(SparkSession spark, String dir, byte[] marker) throws IOException {
        Configuration conf = spark.sessionState().newHadoopConf();
        Path where = new Path(dir);
        FileSystem fs = where.getFileSystem(conf);
        long put = 0;
        for (FileStatus st : fs.listStatus(where)) {
            if (!st.getPath().getName().startsWith("part-")) {
                continue;
            }
            Path part = st.getPath(), tmp = new Path(where, "." + part.getName() + ".patching");
            long here = 0;
            try (InputStream in = new BufferedInputStream(fs.open(part), BUFFER);
                 OutputStream out = new java.io.BufferedOutputStream(fs.create(tmp, true), BUFFER)) {
                here = copyPatched(conf, in, out, marker);
            }
            if (here > 0) {
                fs.delete(part, false);
                fs.rename(tmp, part);
                put += here;
            } else {
                fs.delete(tmp, false);
            }
        }
        return put;
    }

    private static long copyPatched(Configuration conf, InputStream in, OutputStream out, byte[] marker) throws IOException {
        long put = 0;
        byte[] start = new byte[marker.length];
        while (true) {
            in.mark(marker.length);
            int n = in.readNBytes(start, 0, marker.length);
            if (n == 0) {
                return put;
            }
            if (n == marker.length && Arrays.equals(start, marker)) {
                StringBuilder said = new StringBuilder();
                int b;
                while ((b = in.read()) >= 0 && b != ':') {
                    said.append((char) b);
                }
                String[] f = said.toString().split(" ");
                String path = new String(in.readNBytes(Integer.parseInt(f[2])), StandardCharsets.UTF_8);
                while ((b = in.read()) >= 0 && b != '\n') {
                    // the head the placeholder holds: the line's own bytes are copied instead
                }
                copyRange(conf, path, Long.parseLong(f[0]), Long.parseLong(f[1]), out);
                out.write('\n');
                put++;
                continue;
            }
            in.reset();
            int b;
            while ((b = in.read()) >= 0) {
                out.write(b);
                if (b == '\n') {
                    break;
                }
            }
            if (b < 0) {
                return put;
            }
        }
    }

    /** Writes {@code size} bytes of {@code path} (decompressed) from {@code offset} to {@code out}. */
    private static void copyRange(Configuration conf, String path, long offset, long size, OutputStream out)
            throws IOException {
        Path p = path(path);
        FileSystem fs = p.getFileSystem(conf);
        CompressionCodec codec = new CompressionCodecFactory(conf).getCodec(p);
        FSDataInputStream raw = fs.open(p);
        try (InputStream in = codec != null ? codec.createInputStream(raw) : raw) {
            if (codec == null) {
                raw.seek(offset);
            } else {
                in.skipNBytes(offset);
            }
            byte[] buf = new byte[BUFFER];
            long left = size;
            while (left > 0) {
                int n = in.read(buf, 0, (int) Math.min(buf.length, left));
                if (n < 0) {
                    throw new IOException(path + " ended before its line of " + size + " bytes at " + offset);
                }
                out.write(buf, 0, n);
                left -= n;
            }
        }
    }
}
