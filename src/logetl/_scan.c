/* Native parse kernel for the line contract (see contract.py, which holds the reference implementation).
 *
 * The contract's expression
 *     ^([^ ]*) \S+ \S+ \[([\w:/]+\s[+\-]\d{4})\] "(.+?)" (\d{3}) ([^ ]*).*$      (ASCII classes, DOTALL)
 * is deterministic except for the lazy request group: every other group ends at the first byte its class
 * cannot take, and the request ends at the first '" DDD ' that starts at least one byte after it begins
 * (whatever follows is taken by ([^ ]*).*$). On valid UTF-8 a byte scan is therefore exact: the classes only
 * name ASCII bytes, and no continuation byte can be mistaken for one of them.
 *
 * parse_chunk(buf, final=False, columns=1, out=(0, 1, 2, 3, 4), size_index=4) scans whole lines of buf without holding the GIL
 * and returns
 *     (tsv, views, n_records, n_lines, n_dash, malformed, valid, n_header, n_other)
 * tsv: the kept records as TSV of the fields out (0 ip, 1 time, 2 request, 3 response, 4 size; all five:
 * "ip\ttime\trequest\tresponse\tsize\n"), input order; a record whose size is "-" is dropped whatever out;
 * views: one Arrow string-view array per field of out (field-major, 16 bytes a record) over tsv, so columns
 * need no copy (None when columns is 0: a step that only writes the records does not need them); with
 * columns = 2, instead a tuple (offsets, data) of Arrow string arrays, one per field of out, and tsv is None
 * (a step whose only consumers of the records are Parquet sinks): data is a tuple of one bytes object per
 * field, its values end to end; offsets holds n_records + 1 int32 offsets per field (field-major, each from
 * 0). Parquet's writer encodes these faster than views, and written in place of the TSV they cost nothing
 * more to make (Arrow's cast from views cost ~0.15 s of CPU for 2M records);
 * malformed: list of (line_index, start, end, reason) with reason 1 = invalid UTF-8, 2 = no match,
 * 3 = TAB or CR inside a field; start/end delimit the raw line (without its '\n') in buf.
 * A trailing piece without '\n' is a line only when final is true; otherwise it must be empty.
 * n_header: the header lines of the format (a program whose first token is T_SKIP), neither records nor
 * malformed; n_other: the lines that are not requests (a program's T_ELSE alternatives), likewise. *
 * size_index: 4 drops a record whose size is "-" (counted in n_dash), -1 keeps it; out may name the fields of
 * the combined layout's tail after the expression (5 referer, 6 user agent: parse_tail in _kernel.h), null
 * where the tail is not well-formed: valid is then an Arrow validity bitmap of the records (1: the tail's
 * fields are there), None when no record has a null.
 * parse_format(buf, final, columns, program, out, size_index) does the same for a token program
 * (logetl.formats, where the token semantics are defined): program is a tuple of (kind, literal, stop)
 * with kind 0 literal, 1 field up to the first `stop` byte, 2 field up to the first '"' not escaped by a
 * backslash, 3 field up to the end of the line (with a `stop` byte: up to it, and the line must end there), 4 field up to the last `stop` byte before the first
 * literal[0] byte (the end of the port after it; an empty literal: before the end of the line), so that
 * %v:%p splits [2001:db8::1]:443 at the ':' before the port; out is the tuple of field indexes written (in
 * that order);
 * a record whose field size_index (when >= 0) is exactly "-" is dropped. A line is malformed when it is not
 * valid UTF-8 (1), does not match (2), or any field of the program holds a TAB or CR (3). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_kernel.h"

typedef struct { Py_ssize_t line, start, end; int reason; } bad_line;

typedef struct {
    const program *prog;                               /* NULL: the original expression */
    int out[MAX_FIELDS]; int n_out;                    /* the fields written, in that order */
    int columns;                                       /* 1: build the Arrow views too; 2: strings */
    char *tsv; Py_ssize_t tsv_len;
    unsigned char *views; Py_ssize_t n_rec, cap_rec;   /* 1: field k's views at k * cap_rec; 2: ends, record-major */
    char *fd[MAX_FIELDS]; Py_ssize_t fl[MAX_FIELDS], fc[MAX_FIELDS];   /* columns 2: each field's values,
                                                       their length and the room for them */
    bad_line *bad; Py_ssize_t n_bad, cap_bad;
    Py_ssize_t n_lines, n_dash, n_header, n_other;
    unsigned char plus[MAX_FIELDS]; int any_plus;      /* written fields whose '+' are written as spaces */
    int size_index;                                    /* the original expression's: 4 drops a size "-", -1 not */
    int tail;                                          /* the original expression's tail fields are written */
    unsigned char *valid; Py_ssize_t n_null;           /* tail: one bit a record, 0 where the tail is null */
    Py_ssize_t tsv_cap;                                /* > 0: tsv is malloc'd and grows (a JSON program's
                                                        * records may be longer than their lines) */
    int oom;
} scan_state;

static void put_view(unsigned char *v, const char *base, const char *s, Py_ssize_t len) {
    int32_t l = (int32_t)len;
    memset(v, 0, 16);
    memcpy(v, &l, 4);
    if (len <= 12) { memcpy(v + 4, s, len); return; }
    int32_t idx = 0, off = (int32_t)(s - base);
    memcpy(v + 4, s, 4); memcpy(v + 8, &idx, 4); memcpy(v + 12, &off, 4);
}

/* Room in a growing TSV for the record whose fields are f; 0 when out of memory. */
static int tsv_room(scan_state *st, const span *f) {
    Py_ssize_t need = st->tsv_len + st->n_out;
    for (int k = 0; k < st->n_out; k++) need += f[st->out[k]].e - f[st->out[k]].s;
    if (need <= st->tsv_cap) return 1;
    Py_ssize_t cap = st->tsv_cap * 2 > need ? st->tsv_cap * 2 : need;
    char *t = realloc(st->tsv, cap);     /* the views hold offsets from the start: they stay right */
    if (!t) { st->oom = 1; return 0; }
    st->tsv = t; st->tsv_cap = cap;
    return 1;
}

/* A field copied to o with W3C's '+' for a space (IIS writes the user agent and referer so) written back as
 * spaces: in the copy, 16 bytes at a time, not in a pass of its own over what was copied. */
static void copy_plus(char *o, const char *s, Py_ssize_t len) {
#ifdef LOGETL_SSE2
    const __m128i plus = _mm_set1_epi8('+'), space = _mm_set1_epi8(' ');
    for (; len >= 16; len -= 16, s += 16, o += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)s), m = _mm_cmpeq_epi8(v, plus);
        _mm_storeu_si128((__m128i *)o, _mm_or_si128(_mm_andnot_si128(m, v), _mm_and_si128(m, space)));
    }
#endif
    for (; len > 0; len--, s++) *o++ = *s == '+' ? ' ' : *s;
}

static void scan(const unsigned char *buf, Py_ssize_t n, int final, scan_state *st) {
    const unsigned char *p = buf, *end = buf + n;
    span f[MAX_FIELDS];
    const program *pg = st->prog;
    int n_out = st->n_out;
    int width = st->columns == 2 ? 4 : 16;
    while (p < end) {
        const unsigned char *nl = memchr(p, '\n', end - p);
        const unsigned char *le = nl ? nl : end;
        if (!nl && !final) break;
        int reason = line_status(pg, st->size_index, st->tail, p, le, f);
        if (reason == ST_HEADER) {
            st->n_header++;
        } else if (reason == ST_OTHER) {
            st->n_other++;
        } else if (reason != LINE_OK && reason != ST_DASH) {
            if (st->n_bad == st->cap_bad) {
                Py_ssize_t cap = st->cap_bad ? st->cap_bad * 2 : 64;
                bad_line *nb = realloc(st->bad, cap * sizeof(bad_line));
                if (!nb) { st->oom = 1; return; }
                st->bad = nb; st->cap_bad = cap;
            }
            st->bad[st->n_bad++] = (bad_line){st->n_lines, p - buf, le - buf, reason};
        } else if (reason == ST_DASH) {
            st->n_dash++;
        } else {
            if ((st->columns || st->tail) && st->n_rec == st->cap_rec) {
                Py_ssize_t old = st->cap_rec, cap = old ? old * 2 : 4096;
                if (st->columns) {
                    unsigned char *nv = realloc(st->views, cap * width * n_out);
                    if (!nv) { st->oom = 1; return; }
                    if (st->columns == 1)   /* each field's views to its place at the new stride */
                        for (int k = n_out - 1; k > 0; k--)
                            memmove(nv + k * cap * 16, nv + k * old * 16, old * 16);
                    st->views = nv;
                }
                if (st->tail) {
                    unsigned char *nb = realloc(st->valid, cap / 8);
                    if (!nb) { st->oom = 1; return; }
                    memset(nb + old / 8, 0, (cap - old) / 8);
                    st->valid = nb;
                }
                st->cap_rec = cap;
            }
            if (st->tail) {
                if (f[5].s) st->valid[st->n_rec >> 3] |= (unsigned char)(1u << (st->n_rec & 7));
                else st->n_null++;
            }
            if (st->columns == 2) {     /* each value after its field's previous one; the end offset kept */
                unsigned char *v = st->views + st->n_rec * 4 * n_out;
                for (int k = 0; k < n_out; k++) {
                    int src = st->out[k];
                    Py_ssize_t len = f[src].e - f[src].s;
                    if (st->fl[k] + len > st->fc[k]) {
                        Py_ssize_t cap = st->fc[k] * 2 > st->fl[k] + len ? st->fc[k] * 2 : st->fl[k] + len;
                        char *nd = realloc(st->fd[k], cap);
                        if (!nd) { st->oom = 1; return; }
                        st->fd[k] = nd; st->fc[k] = cap;
                    }
                    if (st->any_plus && st->plus[k]) copy_plus(st->fd[k] + st->fl[k], (const char *)f[src].s, len);
                    else memcpy(st->fd[k] + st->fl[k], f[src].s, len);
                    if (pg && pg->any_decode && pg->decode[src]) {
                        unsigned char *d = (unsigned char *)st->fd[k] + st->fl[k];
                        len = pct_decode(d, d, d + len);
                    }
                    st->fl[k] += len;
                    int32_t end = (int32_t)st->fl[k];
                    memcpy(v + 4 * k, &end, 4);
                }
                st->n_rec++;
            } else {
                if (st->tsv_cap && !tsv_room(st, f)) return;
                char *o = st->tsv + st->tsv_len;
                for (int k = 0; k < n_out; k++) {
                    int src = st->out[k];
                    Py_ssize_t len = f[src].e - f[src].s;
                    if (st->any_plus && st->plus[k]) copy_plus(o, (const char *)f[src].s, len);
                    else memcpy(o, f[src].s, len);
                    if (pg && pg->any_decode && pg->decode[src])
                        len = pct_decode((unsigned char *)o, (unsigned char *)o, (unsigned char *)o + len);
                    if (st->columns) put_view(st->views + (k * st->cap_rec + st->n_rec) * 16, st->tsv, o, len);
                    o += len;
                    *o++ = k < n_out - 1 ? '\t' : '\n';
                }
                st->tsv_len = o - st->tsv;
                st->n_rec++;
            }
        }
        st->n_lines++;
        if (!nl) break;
        p = nl + 1;
    }
}

/* A piece of a chunk parsed with a program of its own (parse_segments): from byte start to the next's. */
typedef struct { Py_ssize_t start; program pg; } segment;

/* The TSV's buffer for a scan of `len` bytes: a bytes object with room for every record (trimmed at the end),
 * None when there is no TSV (columns 2) or when a JSON program's TSV grows in st (malloc'd, made a bytes
 * object at the end); NULL with an exception set. */
static PyObject *tsv_buffer(scan_state *st, const Py_buffer *in, const program *pg, const segment *segs, int n_seg) {
    if (st->columns == 2) {
        /* no TSV: each field's values into a growing buffer of its own, copied into a bytes object of their
         * exact size at the end. (Bytes objects with room for a whole chunk each, trimmed afterwards, left
         * the heap so fragmented that Branch with Parquet held 386 MB instead of 206 MB.) */
        Py_RETURN_NONE;
    }
    if (pg && pg->json) {   /* a bytes object made at the end, of the grown buffer */
        st->tsv_cap = in->len + 64;
        if (!(st->tsv = malloc(st->tsv_cap))) return PyErr_NoMemory();
        Py_RETURN_NONE;
    }
    /* Each record's TSV is no longer than its line plus the '\n' it may lack, plus, when a field may take no
     * text of the line, one TAB a field. */
    Py_ssize_t room = in->len + 1;
    int absent = pg && pg->may_be_absent, joins = pg ? pg->n_join : 0;
    for (int i = 0; i < n_seg; i++) {   /* (a joined field repeats up to its line's length) */
        absent |= segs[i].pg.may_be_absent;
        if (segs[i].pg.n_join > joins) joins = segs[i].pg.n_join;
    }
    room *= 1 + joins;
    if (absent) {
        Py_ssize_t n_nl = 0;
        for (const char *c = in->buf, *e = c + in->len; (c = memchr(c, '\n', e - c)); c++) n_nl++;
        room += (n_nl + 1) * st->n_out;
    }
    PyObject *tsv = PyBytes_FromStringAndSize(NULL, room);
    if (tsv) st->tsv = PyBytes_AS_STRING(tsv);
    return tsv;
}

/* The scan of the whole buffer, or of each segment with its program and fields, one state: the records,
 * counts and malformed lines follow on; a segment but the last ends at a line's start, so is whole lines.
 * Without the GIL. */
static void scan_buffer(scan_state *st, const Py_buffer *in, int final, const segment *segs, int n_seg) {
    Py_BEGIN_ALLOW_THREADS
    if (!n_seg) scan((const unsigned char *)in->buf, in->len, final, st);
    for (int i = 0; i < n_seg && !st->oom; i++) {
        Py_ssize_t a = segs[i].start, b = i + 1 < n_seg ? segs[i + 1].start : in->len, first = st->n_bad;
        st->prog = &segs[i].pg;
        memcpy(st->out, segs[i].pg.out, st->n_out * sizeof(int));
        scan((const unsigned char *)in->buf + a, b - a, i + 1 < n_seg || final, st);
        for (Py_ssize_t j = first; j < st->n_bad; j++) { st->bad[j].start += a; st->bad[j].end += a; }
    }
    Py_END_ALLOW_THREADS
}

/* columns 2: (offsets, values) of each field's Arrow string array; the values trimmed, the end offsets
 * record-major -> field-major, from 0. */
static PyObject *string_columns(const scan_state *st) {
    int n_out = st->n_out;
    PyObject *offs = PyBytes_FromStringAndSize(NULL, (st->n_rec + 1) * 4 * n_out);
    PyObject *fields = offs ? PyTuple_New(n_out) : NULL;
    if (!fields) { Py_XDECREF(offs); return NULL; }
    for (int k = 0; k < n_out; k++) {
        PyObject *d = PyBytes_FromStringAndSize(st->fd[k] ? st->fd[k] : "", st->fl[k]);
        if (!d) { Py_DECREF(offs); Py_DECREF(fields); return NULL; }
        PyTuple_SET_ITEM(fields, k, d);   /* the tuple owns it now */
    }
    int32_t *o = (int32_t *)PyBytes_AS_STRING(offs);
    Py_BEGIN_ALLOW_THREADS     /* the offsets are this call's alone until it returns */
    for (int k = 0; k < n_out; k++) {
        *o++ = 0;
        for (Py_ssize_t i = 0; i < st->n_rec; i++)
            memcpy(o++, st->views + (i * n_out + k) * 4, 4);
    }
    Py_END_ALLOW_THREADS
    return Py_BuildValue("(NN)", offs, fields);
}

/* The columns of the records as the scan's mode asks: None (0), string views over the TSV (1), strings (2). */
static PyObject *scan_columns(const scan_state *st) {
    if (!st->columns) Py_RETURN_NONE;
    if (st->columns == 2) return string_columns(st);
    PyObject *views = PyBytes_FromStringAndSize(NULL, st->n_rec * 16 * st->n_out);
    if (!views) return NULL;
    /* record-major -> field-major, so each field is one contiguous Arrow view buffer (the bytes object is this
     * call's alone until it returns: copied without the GIL, which the other threads need) */
    unsigned char *dst = (unsigned char *)PyBytes_AS_STRING(views);
    Py_BEGIN_ALLOW_THREADS
    for (int k = 0; k < st->n_out; k++)
        memcpy(dst + k * st->n_rec * 16, st->views + k * st->cap_rec * 16, st->n_rec * 16);
    Py_END_ALLOW_THREADS
    return views;
}

/* The malformed lines as a list of (line, start, end, reason). */
static PyObject *bad_lines(const scan_state *st) {
    PyObject *bad = PyList_New(st->n_bad);
    for (Py_ssize_t i = 0; bad && i < st->n_bad; i++) {
        PyObject *t = Py_BuildValue("(nnni)", st->bad[i].line, st->bad[i].start, st->bad[i].end, st->bad[i].reason);
        if (!t) { Py_DECREF(bad); return NULL; }
        PyList_SET_ITEM(bad, i, t);
    }
    return bad;
}

static PyObject *run_scan(Py_buffer *inp, int final, int columns, const program *pg, const int *out, int n_out,
                          int size_index, const segment *segs, int n_seg, const unsigned char *plus) {
    if (columns < 0 || columns > 2 || inp->len > INT32_MAX - 2) {
        PyBuffer_Release(inp);
        PyErr_SetString(PyExc_ValueError, columns < 0 || columns > 2 ? "columns must be 0, 1 or 2"
                                                                     : "chunk larger than 2 GiB");
        return NULL;
    }
    scan_state st = {0};
    st.prog = pg;
    memcpy(st.out, out, n_out * sizeof(int));
    st.n_out = n_out;
    st.columns = columns;
    st.size_index = size_index;
    for (int k = 0; k < n_out && !pg && !n_seg; k++)
        if (out[k] >= 5) st.tail = 1;
    for (int k = 0; k < n_out && plus; k++)
        if ((st.plus[k] = plus[k])) st.any_plus = 1;
    PyObject *views = NULL, *bad = NULL, *valid = NULL, *result = NULL;
    PyObject *tsv = tsv_buffer(&st, inp, pg, segs, n_seg);
    if (tsv) scan_buffer(&st, inp, final, segs, n_seg);
    PyBuffer_Release(inp);
    if (!tsv) goto done;
    if (st.oom) { PyErr_NoMemory(); goto done; }
    if (st.tsv_cap) {
        Py_DECREF(tsv);
        if (!(tsv = PyBytes_FromStringAndSize(st.tsv, st.tsv_len))) goto done;
    } else if (columns != 2 && _PyBytes_Resize(&tsv, st.tsv_len) < 0) { tsv = NULL; goto done; }
    if (!(views = scan_columns(&st)) || !(bad = bad_lines(&st))) goto done;
    if (st.tail && st.n_null) {   /* an Arrow validity bitmap of the records (None: no null) */
        if (!(valid = PyBytes_FromStringAndSize((const char *)st.valid, (st.n_rec + 7) / 8))) goto done;
    } else {
        valid = Py_None; Py_INCREF(valid);
    }
    result = Py_BuildValue("(OOnnnOOnn)", tsv, views, st.n_rec, st.n_lines, st.n_dash, bad, valid, st.n_header,
                           st.n_other);
done:
    Py_XDECREF(tsv); Py_XDECREF(views); Py_XDECREF(bad); Py_XDECREF(valid);
    for (int k = 0; k < n_out; k++) free(st.fd[k]);
    free(st.views); free(st.bad); free(st.valid);
    if (st.tsv_cap) free(st.tsv);
    return result;
}

/* Reads a tuple of distinct field indexes below n_fields into out; returns their number, or -1 (error set). */
static int read_out(PyObject *out_t, int n_fields, int *out) {
    Py_ssize_t n_out = PyTuple_GET_SIZE(out_t);
    if (n_out < 1 || n_out > n_fields) {
        PyErr_SetString(PyExc_ValueError, "bad output fields: none, or more than the format has");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n_out; i++) {
        long k = PyLong_AsLong(PyTuple_GET_ITEM(out_t, i));
        if (k < 0 || k >= n_fields) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bad output field index");
            return -1;
        }
        for (Py_ssize_t j = 0; j < i; j++)
            if (out[j] == k) { PyErr_SetString(PyExc_ValueError, "output field written twice"); return -1; }
        out[i] = (int)k;
    }
    return (int)n_out;
}

static PyObject *parse_chunk(PyObject *self, PyObject *args) {
    Py_buffer in;
    int final = 0, columns = 1, out[MAX_FIELDS] = {0, 1, 2, 3, 4}, n_out = 5, size_index = 4;
    PyObject *out_t = NULL;
    if (!PyArg_ParseTuple(args, "y*|piO!i", &in, &final, &columns, &PyTuple_Type, &out_t, &size_index)) return NULL;
    if (out_t && (n_out = read_out(out_t, LEGACY_FIELDS, out)) < 0) { PyBuffer_Release(&in); return NULL; }
    if (size_index != 4 && size_index != -1) {
        PyBuffer_Release(&in);
        PyErr_SetString(PyExc_ValueError, "size_index of the original expression is 4 or -1");
        return NULL;
    }
    return run_scan(&in, final, columns, NULL, out, n_out, size_index, NULL, 0, NULL);
}

/* What build_program allocated. */
static void free_program(program *pg) {
    free(pg->tokens);
    pg->tokens = NULL;
    if (pg->json) free(pg->json->buf);
    free(pg->json);
    pg->json = NULL;
}

/* Reads a token program (see parse_format) into pg; 0 on success, -1 with an exception set (pg->tokens
 * freed). The literals point into prog_t, which the caller keeps alive for as long as pg is used. */
static int build_program(PyObject *prog_t, PyObject *out_t, int size_index, program *pg) {
    Py_ssize_t n_tok = PyTuple_GET_SIZE(prog_t);
    memset(pg, 0, sizeof *pg);
    pg->tokens = calloc(n_tok ? n_tok : 1, sizeof(token));
    if (!pg->tokens) { PyErr_NoMemory(); return -1; }
    pg->clean_literals = 1;
    pg->cr_free_literals = 1;
    if (n_tok && PyTuple_Check(PyTuple_GET_ITEM(prog_t, 0)) && PyTuple_GET_SIZE(PyTuple_GET_ITEM(prog_t, 0)) == 3) {
        PyObject *k0 = PyTuple_GET_ITEM(PyTuple_GET_ITEM(prog_t, 0), 0);
        if (PyLong_Check(k0) && PyLong_AsLong(k0) == T_JSON && !(pg->json = calloc(1, sizeof(json_state)))) {
            free(pg->tokens);
            PyErr_NoMemory();
            return -1;
        }
    }
    for (Py_ssize_t i = 0; i < n_tok; i++) {
        int kind, stop; const char *lit; Py_ssize_t lit_len;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(prog_t, i), "iy#i", &kind, &lit, &lit_len, &stop)) goto bad;
        if (program_add(pg, kind, (const unsigned char *)lit, lit_len, (unsigned char)stop) < 0) {
            PyErr_SetString(PyExc_ValueError, "bad token kind");
            goto bad;
        }
    }
    if (program_close(pg, size_index) < 0) {
        PyErr_SetString(PyExc_ValueError, "bad program: too many fields or bad indexes");
        goto bad;
    }
    if ((pg->n_out = read_out(out_t, pg->n_fields, pg->out)) < 0) goto bad;
    return 0;
bad:
    free_program(pg);
    return -1;
}

static PyObject *parse_format(PyObject *self, PyObject *args) {
    Py_buffer in;
    int final = 0, columns = 1, size_index = -1;
    PyObject *prog_t, *out_t;
    if (!PyArg_ParseTuple(args, "y*piO!O!i", &in, &final, &columns, &PyTuple_Type, &prog_t, &PyTuple_Type,
                          &out_t, &size_index)) return NULL;
    program pg;
    if (build_program(prog_t, out_t, size_index, &pg) < 0) { PyBuffer_Release(&in); return NULL; }
    /* the token tuple (and so the literals) stays alive: prog_t is borrowed from args for the call */
    PyObject *result = run_scan(&in, final, columns, &pg, pg.out, pg.n_out, -1, NULL, 0, NULL);
    free_program(&pg);
    return result;
}

/* parse_segments(buf, final, columns, segments, plus, drop_dash): parse_format over pieces of buf, each
 * with a program of its own: segments is a tuple of (start byte, program, out, size field), the first at 0,
 * each at a line's start, every out as long (the same fields written, each program giving them from its
 * own: W3C's columns change with each "#Fields:" line); plus: per field written, 1 when its '+' are
 * written as spaces; drop_dash 1 drops a record whose size field (each program's own, -1: none) is "-".
 * Returns what parse_format does. */
static PyObject *parse_segments(PyObject *self, PyObject *args) {
    Py_buffer in;
    int final = 0, columns = 1, size_index = -1;
    PyObject *segs_t, *plus_t;
    if (!PyArg_ParseTuple(args, "y*piO!O!i", &in, &final, &columns, &PyTuple_Type, &segs_t, &PyTuple_Type,
                          &plus_t, &size_index)) return NULL;
    Py_ssize_t n_seg = PyTuple_GET_SIZE(segs_t);
    segment *segs = n_seg > 0 && n_seg < INT32_MAX ? calloc(n_seg, sizeof(segment)) : NULL;
    unsigned char plus[MAX_FIELDS] = {0};
    PyObject *result = NULL;
    int built = 0, n_out = -1;
    if (!segs) { if (n_seg > 0) PyErr_NoMemory(); else PyErr_SetString(PyExc_ValueError, "no segment"); goto done; }
    for (; built < n_seg; built++) {
        PyObject *prog_t, *out_t;
        Py_ssize_t start, prev = built ? segs[built - 1].start : -1;
        int size_field = -1;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(segs_t, built), "nO!O!i", &start, &PyTuple_Type, &prog_t,
                              &PyTuple_Type, &out_t, &size_field)) goto done;
        if ((built == 0 && start != 0) || start <= prev || start > in.len
            || (built && ((const char *)in.buf)[start - 1] != '\n')) {
            PyErr_SetString(PyExc_ValueError, "segments must start at 0, then at increasing line starts");
            goto done;
        }
        if (build_program(prog_t, out_t, size_index >= 0 ? size_field : -1, &segs[built].pg) < 0) goto done;
        segs[built].start = start;
        if (n_out >= 0 && segs[built].pg.n_out != n_out) {
            free_program(&segs[built].pg);
            PyErr_SetString(PyExc_ValueError, "every segment writes as many fields");
            goto done;
        }
        n_out = segs[built].pg.n_out;
    }
    if (PyTuple_GET_SIZE(plus_t) != n_out) { PyErr_SetString(PyExc_ValueError, "plus: one flag a field"); goto done; }
    for (int k = 0; k < n_out; k++) {
        long v = PyLong_AsLong(PyTuple_GET_ITEM(plus_t, k));
        if (v == -1 && PyErr_Occurred()) goto done;
        plus[k] = v != 0;
    }
    result = run_scan(&in, final, columns, NULL, segs[0].pg.out, n_out, -1, segs, (int)n_seg, plus);
    in.buf = NULL;   /* released by run_scan */
done:
    for (int i = 0; i < built; i++) free_program(&segs[i].pg);
    free(segs);
    if (in.buf) PyBuffer_Release(&in);
    return result;
}

/* parse_arrow(offsets, data, offset, length, wide, program, out, size_index)
 * The lines of an Arrow binary array (what Spark's mapInArrow hands a Python worker: no separators, each
 * line its own element, one trailing '\r' still to cut), without copying them: offsets and data are the
 * array's buffers, offset/length its slice, wide = 1 for 64-bit offsets (large_binary). program is None
 * for the original expression (out, when given, the indexes of its fields kept, as parse_chunk's; size_index 4
 * or -1, as parse_chunk's), else a token program as for parse_format. Returns (status, n_malformed, fields,
 * valid):
 * status: one byte a line, 0 kept, 1/2/3 malformed (as parse_chunk's reasons), 4 dropped for a size "-";
 * fields: per field written, (offsets, data) of an Arrow utf8 array with one element a line: the field
 * of a kept line, "" for the others (the caller keeps only status 0); valid: when out names a tail field
 * of the original expression, an Arrow validity bitmap of the lines (0: a kept line whose tail is null),
 * else None. */
/* One batch of parse_arrow: its lines (offsets[offset .. offset + length] into data), the parse, and where
 * each line's status and each field's values go. */
typedef struct {
    const void *offsets; int wide; Py_ssize_t offset, length; int64_t first, last;
    const unsigned char *data;
    const program *pg; int size_index, tail, n_out; const int *outs;
    unsigned char *status, *valid;
    int32_t *offs[MAX_FIELDS]; char *out[MAX_FIELDS]; int32_t pos[MAX_FIELDS];
    Py_ssize_t n_bad;
} arrow_batch;

/* Each line of the batch parsed: its status, its fields (a kept line's) after the previous ones. 0, or -1
 * when the offsets do not increase. Without the GIL. */
static int arrow_lines(arrow_batch *b) {
    int bad_offsets = 0;
    Py_BEGIN_ALLOW_THREADS
    span f[MAX_FIELDS];
    for (Py_ssize_t i = 0; i < b->length; i++) {
        int64_t s, e;
        if (b->wide) { const int64_t *o = b->offsets; s = o[b->offset + i]; e = o[b->offset + i + 1]; }
        else { const int32_t *o = b->offsets; s = o[b->offset + i]; e = o[b->offset + i + 1]; }
        if (s < b->first || e < s || e > b->last) { bad_offsets = 1; break; }
        int reason = line_status(b->pg, b->size_index, b->tail, b->data + s, b->data + e, f);
        b->status[i] = (unsigned char)reason;
        if (reason >= LINE_UTF8 && reason <= LINE_TABCR) b->n_bad++;
        if (b->valid && !(reason == ST_KEPT && !f[5].s)) b->valid[i >> 3] |= (unsigned char)(1u << (i & 7));
        for (int k = 0; k < b->n_out; k++) {
            if (reason == ST_KEPT) {
                int src = b->outs[k];
                Py_ssize_t len = f[src].e - f[src].s;
                memcpy(b->out[k] + b->pos[k], f[src].s, len);
                if (b->pg && b->pg->any_decode && b->pg->decode[src]) {
                    unsigned char *d = (unsigned char *)b->out[k] + b->pos[k];
                    len = pct_decode(d, d, d + len);
                }
                b->pos[k] += (int32_t)len;
            }
            b->offs[k][i + 1] = b->pos[k];
        }
    }
    Py_END_ALLOW_THREADS
    return bad_offsets ? -1 : 0;
}

/* parse_arrow's parse: a token program read into pg (b->pg), or the original expression (b->pg NULL) with
 * the fields of out_o (None: its five) in legacy_out and its tail parsed when one of them is the tail's.
 * 0, or -1 with an exception set (pg then holds nothing to free). */
static int arrow_program(PyObject *prog_o, PyObject *out_o, program *pg, int *legacy_out, arrow_batch *b) {
    b->pg = NULL; b->n_out = 5; b->outs = legacy_out; b->tail = 0;
    if (prog_o != Py_None) {
        if (!PyTuple_Check(prog_o) || !PyTuple_Check(out_o)) {
            PyErr_SetString(PyExc_TypeError, "program and out must be tuples");
            return -1;
        }
        if (build_program(prog_o, out_o, b->size_index, pg) < 0) return -1;
        b->pg = pg; b->n_out = pg->n_out; b->outs = pg->out;
        return 0;
    }
    if (out_o != Py_None) {   /* the original expression's fields kept, as parse_chunk's out */
        if (!PyTuple_Check(out_o)) {
            PyErr_SetString(PyExc_TypeError, "out must be a tuple");
            return -1;
        }
        if ((b->n_out = read_out(out_o, LEGACY_FIELDS, legacy_out)) < 0) return -1;
    }
    if (b->size_index != 4 && b->size_index != -1) {
        PyErr_SetString(PyExc_ValueError, "size_index of the original expression is 4 or -1");
        return -1;
    }
    for (int k = 0; k < b->n_out; k++)
        if (b->outs[k] >= 5) b->tail = 1;
    return 0;
}

/* The batch's slice checked against its buffers (first and last set); 0, or -1 with an exception set. */
static int arrow_slice(arrow_batch *b, const Py_buffer *ob, const Py_buffer *db) {
    Py_ssize_t width = b->wide ? 8 : 4;
    if (b->offset < 0 || b->length < 0 || (b->offset + b->length + 1) * width > ob->len) {
        PyErr_SetString(PyExc_ValueError, "offsets buffer shorter than the slice");
        return -1;
    }
    if (b->wide) { const int64_t *o = ob->buf; b->first = o[b->offset]; b->last = o[b->offset + b->length]; }
    else { const int32_t *o = ob->buf; b->first = o[b->offset]; b->last = o[b->offset + b->length]; }
    if (b->first < 0 || b->last < b->first || b->last > db->len) {
        PyErr_SetString(PyExc_ValueError, "offsets outside the data buffer");
        return -1;
    }
    if (b->last - b->first > INT32_MAX) {   /* a field array's offsets are 32-bit, as Spark's strings */
        PyErr_SetString(PyExc_ValueError, "batch larger than 2 GiB");
        return -1;
    }
    return 0;
}

static PyObject *parse_arrow(PyObject *self, PyObject *args) {
    Py_buffer ob, db;
    arrow_batch b = {0};
    PyObject *prog_o, *out_o = Py_None;
    b.size_index = -1;
    if (!PyArg_ParseTuple(args, "y*y*nnpO|Oi", &ob, &db, &b.offset, &b.length, &b.wide, &prog_o, &out_o,
                          &b.size_index))
        return NULL;
    program pg;
    int legacy_out[MAX_FIELDS] = {0, 1, 2, 3, 4};
    PyObject *status = NULL, *fields = NULL, *valid = NULL, *result = NULL;
    PyObject *bufs[2 * MAX_FIELDS] = {0};
    if (arrow_program(prog_o, out_o, &pg, legacy_out, &b) < 0) goto release;
    if (arrow_slice(&b, &ob, &db) < 0) goto done;
    b.offsets = ob.buf; b.data = db.buf;
    if (!(status = PyBytes_FromStringAndSize(NULL, b.length))) goto done;
    if (b.tail) {
        if (!(valid = PyBytes_FromStringAndSize(NULL, (b.length + 7) / 8))) goto done;
        memset(PyBytes_AS_STRING(valid), 0, (b.length + 7) / 8);
        b.valid = (unsigned char *)PyBytes_AS_STRING(valid);
    }
    /* each field's data is at most the batch's bytes (every field is a piece of its line) */
    for (int k = 0; k < b.n_out; k++) {
        if (!(bufs[2 * k] = PyBytes_FromStringAndSize(NULL, (b.length + 1) * 4))) goto done;
        if (!(bufs[2 * k + 1] = PyBytes_FromStringAndSize(NULL, b.last - b.first))) goto done;
        b.offs[k] = (int32_t *)PyBytes_AS_STRING(bufs[2 * k]);
        b.out[k] = PyBytes_AS_STRING(bufs[2 * k + 1]);
        b.offs[k][0] = 0;
    }
    b.status = (unsigned char *)PyBytes_AS_STRING(status);
    if (arrow_lines(&b) < 0) { PyErr_SetString(PyExc_ValueError, "offsets not increasing"); goto done; }
    for (int k = 0; k < b.n_out; k++)
        if (_PyBytes_Resize(&bufs[2 * k + 1], b.pos[k]) < 0) { bufs[2 * k + 1] = NULL; goto done; }
    if (!(fields = PyTuple_New(b.n_out))) goto done;
    for (int k = 0; k < b.n_out; k++) {
        PyObject *pair = PyTuple_Pack(2, bufs[2 * k], bufs[2 * k + 1]);
        if (!pair) goto done;
        PyTuple_SET_ITEM(fields, k, pair);
    }
    if (!valid) { valid = Py_None; Py_INCREF(valid); }
    result = Py_BuildValue("(OnOO)", status, b.n_bad, fields, valid);
done:
    if (b.pg) free_program(&pg);
    Py_XDECREF(status); Py_XDECREF(fields); Py_XDECREF(valid);
    for (int k = 0; k < 2 * MAX_FIELDS; k++) Py_XDECREF(bufs[k]);
release:
    PyBuffer_Release(&ob); PyBuffer_Release(&db);
    return result;
}

/* --- Arrow C data interface: a chunk's columns for Polars (or any Arrow consumer) without pyarrow ---------
 *
 * export_columns(tsv, views, n_records, names, valid=None, nullable=(), n_null=0) -> (schema capsule, array
 * capsule), the PyCapsules of the
 * Arrow PyCapsule interface ("arrow_schema", "arrow_array"): a struct array of n_records rows whose child k is
 * the string-view array of field k (views[k * n_records * 16 ...]) over the one data buffer tsv, the children
 * whose indexes nullable holds with the validity bitmap valid (n_null nulls; see parse_chunk). Nothing is
 * copied: the arrays hold references to tsv and views until the consumer releases the last of them (the
 * parent and each child array count as one reference each, since a consumer may move children out). */

struct ArrowSchema {
    const char *format, *name, *metadata;
    int64_t flags, n_children;
    struct ArrowSchema **children, *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};
struct ArrowArray {
    int64_t length, null_count, offset, n_buffers, n_children;
    const void **buffers;
    struct ArrowArray **children, *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};
#define ARROW_FLAG_NULLABLE 2

typedef struct {                        /* one block: the schema tree and its copied names */
    struct ArrowSchema *children;
    struct ArrowSchema **pointers;
    char **names;
    int64_t n, refs;                    /* the parent and each child: a consumer may move children out */
} schema_block;

static void drop_schema_ref(schema_block *b) {
    if (--b->refs > 0) return;
    for (int64_t i = 0; i < b->n; i++) free(b->names[i]);
    free(b->children); free(b->pointers); free(b->names); free(b);
}

static void release_child_schema(struct ArrowSchema *s) {
    s->release = NULL;
    drop_schema_ref(s->private_data);
}

static void release_schema(struct ArrowSchema *s) {
    schema_block *b = s->private_data;
    for (int64_t i = 0; i < b->n; i++)
        if (b->children[i].release) b->children[i].release(&b->children[i]);
    s->release = NULL;
    drop_schema_ref(b);
}

typedef struct {                        /* one block: the array tree, its buffers, the Python objects */
    PyObject *tsv, *views, *valid;     /* valid: the validity bitmap of the nullable children, or None */
    struct ArrowArray *children;
    struct ArrowArray **pointers;
    const void **buffers;               /* 4 per child (validity, views, data, data sizes), then the parent's */
    int64_t size;                       /* the data buffer's length, for the variadic sizes buffer */
    int64_t n, refs;
} array_block;

static void drop_array_ref(array_block *b) {
    if (--b->refs > 0) return;
    /* the consumer may release from any thread: the references to the buffers' owners need the GIL */
    if (Py_IsInitialized()) {
        PyGILState_STATE g = PyGILState_Ensure();
        Py_DECREF(b->tsv); Py_DECREF(b->views); Py_DECREF(b->valid);
        PyGILState_Release(g);
    }
    free(b->children); free(b->pointers); free(b->buffers); free(b);
}

static void release_child_array(struct ArrowArray *a) {
    array_block *b = a->private_data;
    a->release = NULL;
    drop_array_ref(b);
}

static void release_array(struct ArrowArray *a) {
    array_block *b = a->private_data;
    for (int64_t i = 0; i < b->n; i++)
        if (b->children[i].release) b->children[i].release(&b->children[i]);
    a->release = NULL;
    drop_array_ref(b);
}

static void schema_capsule_free(PyObject *c) {
    struct ArrowSchema *s = PyCapsule_GetPointer(c, "arrow_schema");
    if (s && s->release) s->release(s);
    free(s);
}

static void array_capsule_free(PyObject *c) {
    struct ArrowArray *a = PyCapsule_GetPointer(c, "arrow_array");
    if (a && a->release) a->release(a);
    free(a);
}

static PyObject *export_columns(PyObject *self, PyObject *args) {
    PyObject *tsv, *views, *names, *valid = Py_None, *nullable = NULL;
    Py_ssize_t n, n_null = 0;
    if (!PyArg_ParseTuple(args, "O!O!nO!|OO!n", &PyBytes_Type, &tsv, &PyBytes_Type, &views, &n, &PyTuple_Type, &names,
                          &valid, &PyTuple_Type, &nullable, &n_null))
        return NULL;
    Py_ssize_t k = PyTuple_GET_SIZE(names);
    if (n < 0 || k < 1 || PyBytes_GET_SIZE(views) != n * 16 * k) {
        PyErr_SetString(PyExc_ValueError, "views do not hold n_records views of each field");
        return NULL;
    }
    if (valid != Py_None && (!PyBytes_Check(valid) || PyBytes_GET_SIZE(valid) < (n + 7) / 8 || n_null < 0
                             || n_null > n)) {
        PyErr_SetString(PyExc_ValueError, "valid is not a bitmap of n_records bits");
        return NULL;
    }
    struct ArrowSchema *schema = calloc(1, sizeof *schema);
    struct ArrowArray *array = calloc(1, sizeof *array);
    schema_block *sb = calloc(1, sizeof *sb);
    array_block *ab = calloc(1, sizeof *ab);
    if (!schema || !array || !sb || !ab) goto nomem;
    sb->children = calloc(k, sizeof *sb->children);
    sb->pointers = calloc(k, sizeof *sb->pointers);
    sb->names = calloc(k, sizeof *sb->names);
    ab->children = calloc(k, sizeof *ab->children);
    ab->pointers = calloc(k, sizeof *ab->pointers);
    ab->buffers = calloc(4 * k + 1, sizeof *ab->buffers);
    if (!sb->children || !sb->pointers || !sb->names || !ab->children || !ab->pointers || !ab->buffers) goto nomem;
    sb->n = ab->n = k;
    ab->size = PyBytes_GET_SIZE(tsv);
    const char *data = PyBytes_AS_STRING(tsv), *v = PyBytes_AS_STRING(views);
    for (Py_ssize_t i = 0; i < k; i++) {
        Py_ssize_t len;
        const char *name = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(names, i), &len);
        if (!name) goto fail;
        if (!(sb->names[i] = malloc(len + 1))) goto nomem;
        memcpy(sb->names[i], name, len + 1);
        sb->children[i] = (struct ArrowSchema){.format = "vu", .name = sb->names[i], .flags = ARROW_FLAG_NULLABLE,
                                              .release = release_child_schema, .private_data = sb};
        sb->pointers[i] = &sb->children[i];
        const void **bufs = ab->buffers + 4 * i;
        bufs[0] = NULL; bufs[1] = v + i * n * 16; bufs[2] = data; bufs[3] = &ab->size;
        int64_t nulls = 0;
        for (Py_ssize_t j = 0; valid != Py_None && nullable && j < PyTuple_GET_SIZE(nullable); j++)
            if (PyLong_AsSsize_t(PyTuple_GET_ITEM(nullable, j)) == i) {
                bufs[0] = PyBytes_AS_STRING(valid);
                nulls = n_null;
            }
        if (PyErr_Occurred()) goto fail;
        ab->children[i] = (struct ArrowArray){.length = n, .null_count = nulls, .n_buffers = 4, .buffers = bufs,
                                             .release = release_child_array, .private_data = ab};
        ab->pointers[i] = &ab->children[i];
    }
    *schema = (struct ArrowSchema){.format = "+s", .name = "", .n_children = k, .children = sb->pointers,
                                   .release = release_schema, .private_data = sb};
    ab->buffers[4 * k] = NULL;
    *array = (struct ArrowArray){.length = n, .n_buffers = 1, .buffers = ab->buffers + 4 * k, .n_children = k,
                                 .children = ab->pointers, .release = release_array, .private_data = ab};
    Py_INCREF(tsv); Py_INCREF(views); Py_INCREF(valid);
    ab->tsv = tsv; ab->views = views; ab->valid = valid;
    ab->refs = sb->refs = 1 + k;
    PyObject *sc = PyCapsule_New(schema, "arrow_schema", schema_capsule_free);
    if (!sc) { schema->release(schema); free(schema); array->release(array); free(array); return NULL; }
    PyObject *ac = PyCapsule_New(array, "arrow_array", array_capsule_free);
    if (!ac) { Py_DECREF(sc); array->release(array); free(array); return NULL; }
    PyObject *result = PyTuple_Pack(2, sc, ac);
    Py_DECREF(sc); Py_DECREF(ac);
    return result;
nomem:
    PyErr_NoMemory();
fail:
    if (sb) { if (sb->names) for (Py_ssize_t i = 0; i < k; i++) free(sb->names[i]);
              free(sb->children); free(sb->pointers); free(sb->names); }
    if (ab) { free(ab->children); free(ab->pointers); free(ab->buffers); }
    free(sb); free(ab); free(schema); free(array);
    return NULL;
}

static PyMethodDef methods[] = {
    {"parse_chunk", parse_chunk, METH_VARARGS,
     "parse_chunk(buf, final=False, columns=1, out=(0, 1, 2, 3, 4), size_index=4) -> (tsv, views, n_records, n_lines, n_dash, malformed, valid, n_header, n_other)"},
    {"parse_format", parse_format, METH_VARARGS,
     "parse_format(buf, final, columns, program, out, size_index) -> same as parse_chunk"},
    {"parse_segments", parse_segments, METH_VARARGS,
     "parse_segments(buf, final, columns, segments, plus, size_index) -> same as parse_chunk"},
    {"export_columns", export_columns, METH_VARARGS,
     "export_columns(tsv, views, n_records, names, valid=None, nullable=(), n_null=0) -> (arrow_schema capsule, arrow_array capsule)"},
    {"parse_arrow", parse_arrow, METH_VARARGS,
     "parse_arrow(offsets, data, offset, length, wide, program, out=None, size_index=-1) -> (status, n_malformed, fields, valid)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scan", "Native parse kernel for the logetl line contract.", -1, methods};

PyMODINIT_FUNC PyInit__scan(void) {
    init_classes();
    PyObject *m = PyModule_Create(&module);
    /* the columns modes this build knows (0, 1, 2): logetl asks a build from before mode 2 for views */
    if (m && PyModule_AddIntConstant(m, "COLUMN_MODES", 3) < 0) { Py_DECREF(m); return NULL; }
    return m;
}
