/* Parquet column chunks of strings, encoded from the parse kernel's Arrow buffers (int32 offsets from 0 and
 * the values), without the GIL: logetl's own encoder for the one case that is all of a Branch-like step's
 * Parquet output (strings, no nulls), so that the encoding runs beside the parse at the cost of a copy and
 * zstd. Everything else (typed columns, nulls, frames) goes through pyarrow. The file around the chunks
 * (magic, footer) is written by logetl.io.parquet.
 *
 * Why not pyarrow here: its writer spends ~35 ns a value in one thread (Branch over 2M lines: 0.3 s of
 * encoding plus 0.1 s of import on the critical path), which kept Parquet at 2x the TSV run's time.
 *
 * zstd comes from the system's libzstd (libzstd.so.1, which Debian's apt itself depends on), opened at run
 * time, so that building logetl needs no headers: `available()` says whether it was found. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* --- zstd, opened at run time --------------------------------------------------------------------------- */
typedef size_t (*zstd_compress_fn)(void *, size_t, const void *, size_t, int);
typedef size_t (*zstd_bound_fn)(size_t);
typedef unsigned (*zstd_is_error_fn)(size_t);
static zstd_compress_fn zstd_compress;
static zstd_bound_fn zstd_bound;
static zstd_is_error_fn zstd_is_error;
static int zstd_tried;

static int load_zstd(void) {
    if (!zstd_tried) {
        zstd_tried = 1;
        void *h = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
        if (h) {
            zstd_compress = (zstd_compress_fn)dlsym(h, "ZSTD_compress");
            zstd_bound = (zstd_bound_fn)dlsym(h, "ZSTD_compressBound");
            zstd_is_error = (zstd_is_error_fn)dlsym(h, "ZSTD_isError");
            if (!zstd_compress || !zstd_bound || !zstd_is_error) zstd_compress = NULL;
        }
    }
    return zstd_compress != NULL;
}

/* --- a growing byte buffer ---------------------------------------------------------------------------- */
typedef struct { unsigned char *p; size_t len, cap; int oom; } buf;

static int reserve(buf *b, size_t more) {
    if (b->oom) return 0;
    if (b->len + more <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more) cap *= 2;
    unsigned char *p = realloc(b->p, cap);
    if (!p) { b->oom = 1; return 0; }
    b->p = p; b->cap = cap;
    return 1;
}
/* Empty again, and able to grow again after a failed allocation (the scratch buffers live on). */
static void clear(buf *b) { b->len = 0; b->oom = 0; }
static void put(buf *b, const void *src, size_t n) { if (reserve(b, n)) { memcpy(b->p + b->len, src, n); b->len += n; } }
static void put_u32(buf *b, uint32_t v) {
    unsigned char le[4] = {v & 255, (v >> 8) & 255, (v >> 16) & 255, v >> 24};
    put(b, le, 4);
}
static void put_varint(buf *b, uint64_t v) {
    unsigned char tmp[10]; int n = 0;
    do { unsigned char c = v & 127; v >>= 7; tmp[n++] = c | (v ? 128 : 0); } while (v);
    put(b, tmp, n);
}

/* --- Thrift's compact protocol, the little of it a page header needs ------------------------------------ */
enum { T_I32 = 5, T_STRUCT = 12 };
static void field(buf *b, int *last, int id, int type) {
    unsigned char c = (unsigned char)(((id - *last) << 4) | type);   /* ids here rise by 1 to 15 */
    put(b, &c, 1);
    *last = id;
}
static void field_i32(buf *b, int *last, int id, int64_t v) {
    field(b, last, id, T_I32);
    put_varint(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));   /* zigzag */
}
static void stop(buf *b) { unsigned char z = 0; put(b, &z, 1); }

enum { PAGE_DATA = 0, PAGE_DICTIONARY = 2 };
enum { ENC_PLAIN = 0, ENC_RLE = 3, ENC_RLE_DICTIONARY = 8 };

/* PageHeader { type, uncompressed_page_size, compressed_page_size, data_page_header | dictionary_page_header } */
static void page_header(buf *b, int type, size_t raw, size_t packed, int64_t n_values, int encoding) {
    int last = 0;
    field_i32(b, &last, 1, type);
    field_i32(b, &last, 2, (int64_t)raw);
    field_i32(b, &last, 3, (int64_t)packed);
    int inner = 0;
    if (type == PAGE_DATA) {
        field(b, &last, 5, T_STRUCT);   /* DataPageHeader */
        field_i32(b, &inner, 1, n_values);
        field_i32(b, &inner, 2, encoding);
        field_i32(b, &inner, 3, ENC_RLE);   /* definition levels */
        field_i32(b, &inner, 4, ENC_RLE);   /* repetition levels (none: the columns are flat) */
    } else {
        field(b, &last, 7, T_STRUCT);   /* DictionaryPageHeader */
        field_i32(b, &inner, 1, n_values);
        field_i32(b, &inner, 2, ENC_PLAIN);
    }
    stop(b);
    stop(b);
}

/* Scratch memory of the calling thread, kept between its calls and freed when it ends: a batch's pages are
 * a few MB, and memory fresh from the system for each (glibc maps blocks this large anew) cost as much in
 * page faults as the copying. */
typedef struct { buf body, packed; } scratch;
static pthread_key_t scratch_key;

static void free_scratch(void *p) {
    scratch *s = p;
    free(s->body.p); free(s->packed.p); free(s);
}

static scratch *thread_scratch(void) {
    scratch *s = pthread_getspecific(scratch_key);
    if (!s && (s = calloc(1, sizeof(scratch))) && pthread_setspecific(scratch_key, s) != 0) { free(s); s = NULL; }
    return s;
}

/* Appends one page (header, then the body compressed) to out; returns 0 when out of memory or zstd failed. */
static int add_page(buf *out, const buf *body, int type, int64_t n_values, int encoding, int level, size_t *raw_total) {
    if (body->len > INT32_MAX / 2) return 0;   /* a page's sizes are 32-bit (the caller keeps pages small) */
    size_t bound = zstd_bound(body->len);
    buf *packed = &thread_scratch()->packed;   /* encode() made sure it exists */
    clear(packed);
    if (!reserve(packed, bound ? bound : 1)) return 0;
    size_t n = zstd_compress(packed->p, bound, body->p, body->len, level);
    if (zstd_is_error(n)) return 0;
    size_t before = out->len;
    page_header(out, type, body->len, n, n_values, encoding);
    *raw_total += (out->len - before) + body->len;
    put(out, packed->p, n);
    return !out->oom;
}

/* Definition levels of n values that are all present (max level 1): one RLE run of 1s, length-prefixed. */
static void all_defined(buf *b, int64_t n) {
    unsigned char run[11];
    int len = 0;
    uint64_t v = (uint64_t)n << 1;
    do { unsigned char c = v & 127; v >>= 7; run[len++] = c | (v ? 128 : 0); } while (v);
    run[len++] = 1;
    put_u32(b, (uint32_t)len);
    put(b, run, len);
}

/* Up to 7 bytes as one word, with loads of fixed size (a memcpy of variable size is a call, and reading
 * its bytes back as a word stalls on store forwarding: that was a third of the dictionary's time). */
static inline uint64_t load_short(const unsigned char *s, size_t n) {
    if (n >= 4) {
        uint32_t a, b; memcpy(&a, s, 4); memcpy(&b, s + n - 4, 4);
        return ((uint64_t)a << 32) | b;
    }
    return n ? ((uint64_t)s[0] << 16) | ((uint64_t)s[n >> 1] << 8) | s[n - 1] : 0;
}

static inline uint32_t hash_bytes(const unsigned char *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n, w;
    if (n < 8) w = load_short(s, n);
    else {
        const unsigned char *end = s + n - 8;
        for (; s < end; s += 8) {
            memcpy(&w, s, 8);
            h = (h ^ w) * 0xBF58476D1CE4E5B9ull; h ^= h >> 31;
        }
        memcpy(&w, end, 8);   /* the last 8 bytes, overlapping what the loop took */
    }
    h = (h ^ w) * 0x94D049BB133111EBull; h ^= h >> 32;
    return (uint32_t)h;
}

/* Whether n bytes at a and b are the same (inline: most values are short, and memcmp is a call). */
static inline int same(const unsigned char *a, const unsigned char *b, size_t n) {
    if (n < 8) return load_short(a, n) == load_short(b, n);
    size_t i = 0;
    for (; i + 8 < n; i += 8) {
        uint64_t x, y; memcpy(&x, a + i, 8); memcpy(&y, b + i, 8);
        if (x != y) return 0;
    }
    uint64_t x, y; memcpy(&x, a + n - 8, 8); memcpy(&y, b + n - 8, 8);
    return x == y;
}

/* Parquet's order of strings (bytes, unsigned, then length): whether a < b. Word by word, big-endian, inline. */
static inline int less(const unsigned char *a, size_t la, const unsigned char *b, size_t lb) {
    size_t n = la < lb ? la : lb, i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x, y; memcpy(&x, a + i, 8); memcpy(&y, b + i, 8);
        if (x != y) return __builtin_bswap64(x) < __builtin_bswap64(y);
    }
    for (; i < n; i++)
        if (a[i] != b[i]) return a[i] < b[i];
    return la < lb;
}

/* A value: where it is and how long. */
typedef struct { const unsigned char *p; int32_t len; } value;

/* The column's values, in pieces (one per parsed chunk); rows are walked piece by piece. */
typedef struct { const int32_t *off; const unsigned char *val; Py_ssize_t n; } piece_t;

#define EACH_VALUE(j, v, ...)                                                             \
    for (Py_ssize_t p_ = 0; p_ < (j)->k; p_++) {                                          \
        const piece_t *pc_ = &(j)->pieces[p_];                                              \
        for (Py_ssize_t i_ = 0; i_ < pc_->n; i_++) {                                      \
            value v = {pc_->val + pc_->off[i_], pc_->off[i_ + 1] - pc_->off[i_]};         \
            __VA_ARGS__                                                                   \
        }                                                                                 \
    }

typedef struct {
    const piece_t *pieces; Py_ssize_t k, n;
    int try_dictionary, statistics, level; size_t dictionary_limit;
    /* results */
    buf out; size_t raw_total, dictionary_len; int dictionary_used, failed;
    value min, max;
} job;

/* a slot of the dictionary's hash table: the entry's hash, length, place in the dictionary page and number
 * + 1 (0: empty). The values are compared in the page, which holds them close together, not where the
 * batch has them (spread over megabytes: a log's addresses waited on memory twice a lookup). */
typedef struct { uint32_t hash; int32_t len; uint32_t at, entry; } slot;

/* The table twice as large, the entries placed again by their hashes; 0 when out of memory. */
static int grow(slot **table, size_t *slots) {
    size_t more = *slots * 2, mask = more - 1;
    slot *t = calloc(more, sizeof(slot));
    if (!t) return 0;
    for (size_t i = 0; i < *slots; i++) {
        slot e = (*table)[i];
        if (!e.entry) continue;
        size_t at = e.hash & mask;
        while (t[at].entry) at = (at + 1) & mask;
        t[at] = e;
    }
    free(*table);
    *table = t; *slots = more;
    return 1;
}

/* The dictionary encoding of the column: a dictionary page (the distinct values, plain) and a data page
 * (their numbers, bit-packed); 0 when the distinct values pass the dictionary page limit. */
static int encode_dictionary(job *j) {
    size_t slots = 1024;
    slot *table = calloc(slots, sizeof(slot));
    uint32_t *index = malloc((j->n ? j->n : 1) * sizeof(uint32_t));
    buf *body = &thread_scratch()->body;   /* the dictionary page, built as the entries come */
    clear(body);
    if (!table || !index) { free(table); free(index); j->failed = 1; return 0; }
    uint32_t distinct = 0;
    int over = 0;
    Py_ssize_t row = 0;
    EACH_VALUE(j, v, {
        uint32_t h = hash_bytes(v.p, (size_t)v.len);
        size_t mask = slots - 1, at = h & mask;
        for (;;) {
            slot *e = &table[at];
            if (!e->entry) {
                if (body->len + 4 + (size_t)v.len > j->dictionary_limit) { over = 1; goto end; }
                put_u32(body, (uint32_t)v.len);
                e->at = (uint32_t)body->len;
                put(body, v.p, (size_t)v.len);
                if (body->oom) { over = 1; j->failed = 1; goto end; }
                e->len = v.len; e->hash = h; e->entry = ++distinct;
                index[row] = distinct - 1;
                if ((size_t)distinct * 2 > slots && !grow(&table, &slots)) { over = 1; j->failed = 1; goto end; }
                break;
            }
            if (e->hash == h && e->len == v.len && same(body->p + e->at, v.p, (size_t)v.len)) {
                index[row] = e->entry - 1;
                break;
            }
            at = (at + 1) & mask;
        }
        row++;
    })
end:
    free(table);
    if (over) { free(index); return 0; }
    int ok = !body->oom && add_page(&j->out, body, PAGE_DICTIONARY, distinct, ENC_PLAIN, j->level, &j->raw_total);
    j->dictionary_len = j->out.len;
    /* the data page: definition levels, the numbers' bit width, then bit-packed runs of 8 (LSB first) */
    clear(body);
    int width = 1;
    while (width < 32 && ((uint64_t)1 << width) < distinct) width++;
    all_defined(body, j->n);
    unsigned char w = (unsigned char)width;
    put(body, &w, 1);
    if (j->n) {
        size_t groups = ((size_t)j->n + 7) / 8;
        put_varint(body, ((uint64_t)groups << 1) | 1);
        if (reserve(body, groups * width)) {
            unsigned char *o = body->p + body->len;
            uint64_t acc = 0; int bits = 0;
            for (size_t i = 0; i < groups * 8; i++) {
                acc |= (uint64_t)(i < (size_t)j->n ? index[i] : 0) << bits;
                bits += width;
                while (bits >= 8) { *o++ = (unsigned char)acc; acc >>= 8; bits -= 8; }
            }
            body->len = o - body->p;
        }
    }
    free(index);
    ok = ok && !body->oom && add_page(&j->out, body, PAGE_DATA, j->n, ENC_RLE_DICTIONARY, j->level, &j->raw_total);
    if (!ok) j->failed = 1;
    return 1;
}

/* Plain pages of at most PAGE_BYTES of values each (a value larger than that has a page of its own), as
 * pyarrow splits them: a page's sizes are 32-bit, and readers hold a page at a time. */
#define PAGE_BYTES (1 << 20)

static void encode_plain(job *j) {
    buf *body = &thread_scratch()->body;
    Py_ssize_t piece = 0, row = 0, left = j->n;    /* where the next page starts */
    do {
        Py_ssize_t count = 0, q = piece, r = row;
        size_t bytes = 0;
        while (count < left) {
            while (r >= j->pieces[q].n) { q++; r = 0; }   /* empty pieces, and the end of one */
            size_t len = 4 + (size_t)(j->pieces[q].off[r + 1] - j->pieces[q].off[r]);
            if (count && bytes + len > PAGE_BYTES) break;
            bytes += len; count++; r++;
        }
        clear(body);
        all_defined(body, count);
        if (reserve(body, bytes)) {
            unsigned char *o = body->p + body->len;
            for (Py_ssize_t c = 0; c < count; c++, row++) {
                while (row >= j->pieces[piece].n) { piece++; row = 0; }
                const piece_t *pc = &j->pieces[piece];
                int32_t len = pc->off[row + 1] - pc->off[row];
                memcpy(o, &len, 4);     /* little-endian, as Parquet's lengths */
                memcpy(o + 4, pc->val + pc->off[row], (size_t)len);
                o += 4 + len;
            }
            body->len = o - body->p;
        }
        if (body->oom || !add_page(&j->out, body, PAGE_DATA, count, ENC_PLAIN, j->level, &j->raw_total)) {
            j->failed = 1;
            return;
        }
        left -= count;
    } while (left > 0);
}

static void encode(job *j) {
    if (!thread_scratch()) { j->failed = 1; return; }
    if (j->statistics && j->n) {
        int first = 1;
        EACH_VALUE(j, v, {
            if (first) { j->min = j->max = v; first = 0; }
            else if (less(v.p, v.len, j->min.p, j->min.len)) j->min = v;
            else if (less(j->max.p, j->max.len, v.p, v.len)) j->max = v;
        })
    }
    if (j->try_dictionary && encode_dictionary(j)) {
        j->dictionary_used = 1;
        return;
    }
    if (!j->failed) encode_plain(j);
}

/* Checks that offsets (int32, n + 1 of them) start at 0, never fall, and end within the values. */
static int check_offsets(const Py_buffer *o, const Py_buffer *v, Py_ssize_t n) {
    if (n < 0 || n > o->len / 4 - 1) { PyErr_SetString(PyExc_ValueError, "offsets too short"); return 0; }
    if (!o->readonly || !v->readonly) {   /* checked here, read without the GIL: nobody may change them */
        PyErr_SetString(PyExc_ValueError, "offsets and values must be read-only buffers (bytes)");
        return 0;
    }
    const int32_t *off = o->buf;
    if (off[0] != 0 || off[n] > v->len) { PyErr_SetString(PyExc_ValueError, "offsets out of the values"); return 0; }
    for (Py_ssize_t i = 0; i < n; i++)
        if (off[i + 1] < off[i]) { PyErr_SetString(PyExc_ValueError, "offsets fall"); return 0; }
    return 1;
}

/* column_chunk(pieces, ...): pieces is a sequence of (offsets, values, n), one per parsed chunk of the batch. */
/* The pieces of a column, taken from Python: (offsets, values, n) tuples, their buffers held until release. */
typedef struct { PyObject *seq; Py_buffer *bufs; piece_t *parts; Py_ssize_t k, got, n; } held;

static int take(held *h, PyObject *pieces) {
    if (!(h->seq = PySequence_Fast(pieces, "pieces must be a sequence"))) return 0;
    h->k = PySequence_Fast_GET_SIZE(h->seq);
    h->bufs = calloc(h->k ? 2 * h->k : 1, sizeof(Py_buffer));
    h->parts = calloc(h->k ? h->k : 1, sizeof(piece_t));
    if (!h->bufs || !h->parts) { PyErr_NoMemory(); return 0; }
    for (Py_ssize_t g = 0; g < h->k; g++) {
        PyObject *t = PySequence_Fast_GET_ITEM(h->seq, g);
        if (!PyTuple_Check(t)) { PyErr_SetString(PyExc_TypeError, "a piece is a tuple (offsets, values, n)"); return 0; }
        if (!PyArg_ParseTuple(t, "y*y*n", &h->bufs[2 * g], &h->bufs[2 * g + 1], &h->parts[g].n)) return 0;
        h->got = g + 1;     /* its buffers are held: released with the others */
        if (!check_offsets(&h->bufs[2 * g], &h->bufs[2 * g + 1], h->parts[g].n)) return 0;
        h->parts[g].off = h->bufs[2 * g].buf;
        h->parts[g].val = h->bufs[2 * g + 1].buf;
        h->n += h->parts[g].n;
    }
    if (h->n > INT32_MAX) { PyErr_SetString(PyExc_ValueError, "a column chunk of over 2^31 values"); return 0; }
    return 1;
}

static void release(held *h) {
    for (Py_ssize_t p = 0; p < h->got; p++) { PyBuffer_Release(&h->bufs[2 * p]); PyBuffer_Release(&h->bufs[2 * p + 1]); }
    free(h->bufs); free(h->parts);
    Py_XDECREF(h->seq);
}

static PyObject *column_chunk(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *pieces;
    Py_ssize_t limit;
    int try_dictionary, statistics, level;
    if (!PyArg_ParseTuple(args, "Oppin", &pieces, &try_dictionary, &statistics, &level, &limit)) return NULL;
    if (!load_zstd()) { PyErr_SetString(PyExc_RuntimeError, "libzstd.so.1 not found"); return NULL; }
    held h = {0};
    PyObject *result = NULL;
    job j = {0};
    if (!take(&h, pieces)) goto done;
    j.pieces = h.parts; j.k = h.k; j.n = h.n; j.try_dictionary = try_dictionary; j.statistics = statistics;
    j.level = level; j.dictionary_limit = (size_t)limit;
    Py_BEGIN_ALLOW_THREADS
    encode(&j);
    Py_END_ALLOW_THREADS
    if (j.failed || j.out.oom) {
        /* (a bare MemoryError says nothing: the line that reports it would end in an empty message) */
        PyErr_SetString(PyExc_MemoryError, "logetl's Parquet encoder ran out of memory, or met a page over 1 GiB");
        goto done;
    }
    PyObject *lo = Py_None, *hi = Py_None;
    Py_INCREF(lo); Py_INCREF(hi);
    if (statistics && j.n) {
        Py_DECREF(lo); Py_DECREF(hi);
        lo = PyBytes_FromStringAndSize((const char *)j.min.p, j.min.len);
        hi = PyBytes_FromStringAndSize((const char *)j.max.p, j.max.len);
    }
    PyObject *chunk = PyBytes_FromStringAndSize((const char *)j.out.p, j.out.len);
    if (chunk && lo && hi)
        result = Py_BuildValue("(OnnOOO)", chunk, (Py_ssize_t)(j.dictionary_used ? j.dictionary_len : 0),
                               (Py_ssize_t)j.raw_total, j.dictionary_used ? Py_True : Py_False, lo, hi);
    Py_XDECREF(chunk); Py_XDECREF(lo); Py_XDECREF(hi);
done:
    free(j.out.p);
    release(&h);
    return result;
}

/* rising(pieces, sample): of the column's first `sample` values, how many are >= the one before. */
static PyObject *rising(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *pieces;
    Py_ssize_t sample;
    if (!PyArg_ParseTuple(args, "On", &pieces, &sample)) return NULL;
    held h = {0};
    PyObject *result = NULL;
    if (take(&h, pieces)) {
        job j = {0};
        j.pieces = h.parts; j.k = h.k;
        Py_ssize_t seen = 0, count = 0;
        value last = {NULL, 0};
        EACH_VALUE(&j, v, {
            if (seen >= sample) goto counted;
            if (seen++) count += !less(v.p, (size_t)v.len, last.p, (size_t)last.len);
            last = v;
        })
    counted:
        result = PyLong_FromSsize_t(count);
    }
    release(&h);
    return result;
}

static PyObject *available(PyObject *self, PyObject *noargs) {
    (void)self; (void)noargs;
    return PyBool_FromLong(load_zstd());
}

static PyMethodDef methods[] = {
    {"column_chunk", column_chunk, METH_VARARGS,
     "column_chunk([(offsets, values, n), ...], try_dictionary, statistics, zstd_level, dictionary_limit) -> "
     "(chunk, dictionary_page_bytes, uncompressed_bytes, dictionary_used, min, max)"},
    {"rising", rising, METH_VARARGS, "rising([(offsets, values, n), ...], sample) -> how many of the first sample values are >= the one before"},
    {"available", available, METH_NOARGS, "available() -> whether libzstd.so.1 could be opened"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_parquet",
                                    "Parquet column chunks of strings from Arrow buffers (logetl's local engine).",
                                    -1, methods};

PyMODINIT_FUNC PyInit__parquet(void) {
    static int keyed;
    if (!keyed && pthread_key_create(&scratch_key, free_scratch) != 0) return PyErr_NoMemory();
    keyed = 1;
    return PyModule_Create(&module);
}
