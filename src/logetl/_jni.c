/* logetl's parse kernel for the JVM (Spark's executors): the same scanners as the Python module (_kernel.h),
 * called through JNI by logetl.spark.Kernel (java/logetl/spark/Kernel.java) a batch of lines at a time.
 * Built on the driver, on demand, into the jar logetl adds to the Spark session (engines/spark_jvm.py).
 *
 * Kernel.parse(program, out, sizeIndex, data, offsets, n, spans, status) -> the number of malformed lines,
 * or -1 for a bad program (the Java side builds it, so only a bug gets there)
 *   program: null for the original expression; else the token program of logetl.formats, encoded as
 *            kind (1 byte), stop (1 byte), literal length (4 bytes, little-endian), literal, per token
 *   out:     the indexes of the fields written, in that order (for the original expression, of its five and
 *            its tail's two: 5 referer, 6 user agent, whose spans are -1, -1 where the tail is null)
 *   sizeIndex: the field whose "-" drops a record (-1: none; for the original expression 4 or -1)
 *   data, offsets: n lines, line i being data[offsets[i], offsets[i + 1]) (no '\n'; a trailing '\r' is cut)
 *   spans:   filled for kept lines: field k of line i is data[spans[2 (i n_out + k)], spans[2 (i n_out + k) + 1])
 *   status:  filled: one byte a line, 0 kept, 1/2/3 malformed (invalid UTF-8, no match, TAB or CR), 4 dropped
 *   A JSON program (_json.h) writes the values it decodes after the lines, in data[offsets[n], length of data)
 *   (the Java side leaves room there: see NativeParse), and its spans may point there; a program with
 *   T_DECODE writes the decoded fields of a kept line over their own text, their spans shortened.
 * Kernel.version() -> the logetl version this library was built from. */
#include <jni.h>
#include <stdlib.h>

#include "_kernel.h"

#ifndef LOGETL_VERSION
#define LOGETL_VERSION "unknown"
#endif

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *vm, void *reserved) {
    (void)vm; (void)reserved;
    init_classes();
    return JNI_VERSION_1_8;
}

JNIEXPORT jstring JNICALL Java_logetl_spark_Kernel_version(JNIEnv *env, jclass cls) {
    (void)cls;
    return (*env)->NewStringUTF(env, LOGETL_VERSION);
}

/* The encoded program into pg (its literals point into code); 0, or -1 when it is malformed. */
static int decode_program(const unsigned char *code, jsize len, const jint *out, jsize n_out, jint size_index,
                          program *pg, token *tokens, int max_tokens, json_state *js) {
    memset(pg, 0, sizeof *pg);
    pg->tokens = tokens;
    if (len > 0 && code[0] == T_JSON) {
        memset(js, 0, sizeof *js);
        pg->json = js;
    }
    pg->clean_literals = 1;
    pg->cr_free_literals = 1;
    jsize at = 0;
    while (at < len) {
        if (pg->n_tokens == max_tokens || len - at < 6) return -1;
        int kind = code[at], stop = code[at + 1];
        uint32_t lit_len = (uint32_t)code[at + 2] | (uint32_t)code[at + 3] << 8 | (uint32_t)code[at + 4] << 16
                           | (uint32_t)code[at + 5] << 24;
        at += 6;
        if (lit_len > (uint32_t)(len - at)) return -1;
        const unsigned char *lit = code + at;
        at += (jsize)lit_len;
        if (program_add(pg, kind, lit, (ptrdiff_t)lit_len, (unsigned char)stop) < 0) return -1;
    }
    if (program_close(pg, size_index) < 0 || n_out < 1 || n_out > pg->n_fields) return -1;
    for (jsize k = 0; k < n_out; k++) {
        if (out[k] < 0 || out[k] >= pg->n_fields) return -1;
        pg->out[k] = out[k];
    }
    pg->n_out = (int)n_out;
    return 0;
}

JNIEXPORT jint JNICALL Java_logetl_spark_Kernel_parse(JNIEnv *env, jclass cls, jbyteArray program_a,
                                                       jintArray out_a, jint size_index, jbyteArray data_a,
                                                       jintArray offsets_a, jint n, jintArray spans_a,
                                                       jbyteArray status_a) {
    (void)cls;
    jsize n_out = (*env)->GetArrayLength(env, out_a);
    if (n_out < 1 || n_out > MAX_FIELDS || n < 0 || (*env)->GetArrayLength(env, offsets_a) < n + 1
        || (*env)->GetArrayLength(env, status_a) < n
        || (*env)->GetArrayLength(env, spans_a) / 2 / n_out < n) return -1;
    jint out[MAX_FIELDS];
    (*env)->GetIntArrayRegion(env, out_a, 0, n_out, out);
    jsize prog_len = program_a ? (*env)->GetArrayLength(env, program_a) : 0;
    unsigned char *code = NULL;
    program pg, *pgp = NULL;
    token tokens[4 * MAX_FIELDS + 2];
    static __thread json_state js;   /* ~12 KB: not on the JVM thread's stack */
    int tail = 0;
    if (program_a) {   /* a copy: the critical sections below must not call back into the JVM */
        if (!(code = malloc(prog_len ? prog_len : 1))) return -1;
        (*env)->GetByteArrayRegion(env, program_a, 0, prog_len, (jbyte *)code);
        if (decode_program(code, prog_len, out, n_out, size_index, &pg, tokens, 4 * MAX_FIELDS + 2, &js) < 0) {
            free(code);
            return -1;
        }
        pgp = &pg;
    } else {
        if (size_index != 4 && size_index != -1) return -1;
        for (jsize k = 0; k < n_out; k++) {
            if (out[k] < 0 || out[k] >= LEGACY_FIELDS) return -1;
            if (out[k] >= 5) tail = 1;
        }
    }
    jsize data_len = (*env)->GetArrayLength(env, data_a);
    jint n_bad = 0, bad_offsets = 0;
    jint *offsets = (*env)->GetPrimitiveArrayCritical(env, offsets_a, NULL);
    jint *spans = offsets ? (*env)->GetPrimitiveArrayCritical(env, spans_a, NULL) : NULL;
    jbyte *status = spans ? (*env)->GetPrimitiveArrayCritical(env, status_a, NULL) : NULL;
    const unsigned char *data = status ? (*env)->GetPrimitiveArrayCritical(env, data_a, NULL) : NULL;
    if (data && pgp && pgp->json) {   /* the room after the lines: the values decoded, kept for the batch */
        jint used = n > 0 ? offsets[n] : 0;
        if (used < 0 || used > data_len) bad_offsets = 1;
        js.buf = (unsigned char *)data + used; js.cap = (size_t)(data_len - used); js.used = 0;
        js.fixed = 1; js.keep = 1;
    }
    if (data && !bad_offsets) {
        span f[MAX_FIELDS];
        for (jint i = 0; i < n; i++) {
            jint s = offsets[i], e = offsets[i + 1];
            if (s < 0 || e < s || e > data_len) { bad_offsets = 1; break; }
            int reason = line_status(pgp, size_index, tail, data + s, data + e, f);
            status[i] = (jbyte)reason;
            if (reason >= LINE_UTF8 && reason <= LINE_TABCR) n_bad++;
            else if (reason == ST_KEPT) {
                if (pgp && pgp->any_decode)   /* in place, each field once: the text only shrinks */
                    for (int k = 0; k < pgp->n_fields; k++)
                        if (pgp->decode[k]) {
                            unsigned char *d = (unsigned char *)f[k].s;
                            f[k].e = d + pct_decode(d, d, f[k].e);
                        }
                jint *sp = spans + 2 * (size_t)i * n_out;
                for (jsize k = 0; k < n_out; k++) {
                    int null = !f[out[k]].s;   /* a tail field of a line without a well-formed tail */
                    sp[2 * k] = null ? -1 : (jint)(f[out[k]].s - data);
                    sp[2 * k + 1] = null ? -1 : (jint)(f[out[k]].e - data);
                }
            }
        }
    }
    /* a JSON program wrote its values into data, a program decoding fields (T_DECODE) its kept lines' decoded
     * fields over their text: kept (a JVM may have given a copy) */
    if (data) (*env)->ReleasePrimitiveArrayCritical(env, data_a, (void *)data,
                                                     pgp && (pgp->json || pgp->any_decode) ? 0 : JNI_ABORT);
    if (status) (*env)->ReleasePrimitiveArrayCritical(env, status_a, status, 0);
    if (spans) (*env)->ReleasePrimitiveArrayCritical(env, spans_a, spans, 0);
    if (offsets) (*env)->ReleasePrimitiveArrayCritical(env, offsets_a, offsets, JNI_ABORT);
    free(code);
    if (!data || bad_offsets) return -1;
    return n_bad;
}
