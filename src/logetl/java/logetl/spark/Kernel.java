package logetl.spark;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/**
 * logetl's parse kernel (the C of {@code _kernel.h}) in this JVM, through JNI ({@code _jni.c}). The library
 * travels inside the jar that holds this class: the first use in a JVM copies it to a temporary file, loads
 * it and removes the file (a loaded library needs no file), so an executor needs nothing but the jar.
 */
public final class Kernel {
    static final String LIBRARY = "liblogetl_jvm.so";
    private static IllegalStateException failure;
    private static boolean loaded;

    private Kernel() {}

    /** Loads the library once per JVM; throws (every time) an IllegalStateException whose message says
     * what made the first load fail. */
    public static synchronized void load() {
        if (loaded) return;
        if (failure != null) throw new IllegalStateException(failure.getMessage(), failure);
        try (InputStream in = Kernel.class.getResourceAsStream("/logetl/spark/" + LIBRARY)) {
            if (in == null) throw new IllegalStateException("logetl's jar holds no " + LIBRARY);
            Path file = Files.createTempFile("logetl-jvm-", ".so");
            try {
                Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
                System.load(file.toAbsolutePath().toString());
            } catch (UnsatisfiedLinkError e) {
                // the loader's message names the temporary copy (gone by now): what matters is the rest
                String why = String.valueOf(e.getMessage()).replace(file.toAbsolutePath() + ": ", "");
                throw new IllegalStateException("logetl's kernel library does not load: " + why, e);
            } finally {
                Files.deleteIfExists(file);
            }
            loaded = true;
        } catch (IOException e) {
            failure = new IllegalStateException("cannot copy logetl's kernel library out of its jar: " + e, e);
            throw (IllegalStateException) failure;
        } catch (IllegalStateException e) {
            failure = e;
            throw e;
        }
    }

    /** The logetl version the library was built from. */
    public static native String version();

    /** See _jni.c: parses {@code n} lines of {@code data} into {@code spans} and {@code status}; returns the
     * number of malformed lines, or -1 for arguments the kernel refuses. */
    static native int parse(byte[] program, int[] out, int sizeIndex, byte[] data, int[] offsets, int n,
                            int[] spans, byte[] status);
}
