/* Native parse kernel for the line contract (see contract.py, which holds the reference implementation).
 *
 * The contract's expression
 *     ^([^ ]*) \S+ \S+ \[([\w:/]+\s[+\-]\d{4})\] "(.+?)" (\d{3}) ([^ ]*).*$      (ASCII classes, DOTALL)
 * is deterministic except for the lazy request group: every other group ends at the first byte its class
 * cannot take, and the request ends at the first '" DDD ' that starts at least one byte after it begins
 * (whatever follows is taken by ([^ ]*).*$). On valid UTF-8 a byte scan is therefore exact: the classes only
 * name ASCII bytes, and no continuation byte can be mistaken for one of them.
 *
 * parse_chunk(buf, final=False, columns=True) scans whole lines of buf without holding the GIL and returns
 *     (tsv, views, n_records, n_lines, n_dash, malformed)
 * tsv: the kept records as "ip\ttime\trequest\tresponse\tsize\n", input order;
 * views: 5 Arrow string-view arrays (field-major, 16 bytes a record) over tsv, so columns need no copy
 * (None when columns is false: a step that only writes the records does not need them);
 * malformed: list of (line_index, start, end, reason) with reason 1 = invalid UTF-8, 2 = no match,
 * 3 = TAB or CR inside a field; start/end delimit the raw line (without its '\n') in buf.
 * A trailing piece without '\n' is a line only when final is true; otherwise it must be empty. *
 * parse_format(buf, final, columns, program, out, size_index) does the same for a token program
 * (logetl.formats, where the token semantics are defined): program is a tuple of (kind, literal, stop)
 * with kind 0 literal, 1 field up to the first `stop` byte, 2 field up to the first '"' not escaped by a
 * backslash, 3 field up to the end of the line; out is the tuple of field indexes written (in that order);
 * a record whose field size_index (when >= 0) is exactly "-" is dropped. A line is malformed when it is not
 * valid UTF-8 (1), does not match (2), or any field of the program holds a TAB or CR (3). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

enum { LINE_OK = 0, LINE_UTF8 = 1, LINE_NOMATCH = 2, LINE_TABCR = 3 };

/* Character classes of the expression, ASCII meanings, as a table filled once at import. */
enum { C_SPACE = 1, C_DIGIT = 2, C_TWORD = 4 };   /* \s, \d, [\w:/] */
static unsigned char cls[256];
static void init_classes(void) {
    const char *sp = " \t\n\r\v\f";
    for (const char *c = sp; *c; c++) cls[(unsigned char)*c] |= C_SPACE;
    for (int c = '0'; c <= '9'; c++) cls[c] |= C_DIGIT | C_TWORD;
    for (int c = 'a'; c <= 'z'; c++) cls[c] |= C_TWORD;
    for (int c = 'A'; c <= 'Z'; c++) cls[c] |= C_TWORD;
    cls['_'] |= C_TWORD; cls[':'] |= C_TWORD; cls['/'] |= C_TWORD;
}
static inline int is_space(unsigned char c) { return cls[c] & C_SPACE; }
static inline int is_digit(unsigned char c) { return cls[c] & C_DIGIT; }
static inline int is_tword(unsigned char c) { return cls[c] & C_TWORD; }

/* Strict UTF-8 as Python's decoder: no overlongs, no surrogates, nothing above U+10FFFF. */
static int valid_utf8(const unsigned char *p, const unsigned char *e) {
    while (p < e) {
        /* ASCII fast path, 32 then 8 bytes at a time */
        while (e - p >= 32) {
            uint64_t a, b, c, d; memcpy(&a, p, 8); memcpy(&b, p + 8, 8); memcpy(&c, p + 16, 8); memcpy(&d, p + 24, 8);
            if ((a | b | c | d) & HIGHS) break;
            p += 32;
        }
        while (e - p >= 8) {
            uint64_t w; memcpy(&w, p, 8);
            if (w & HIGHS) break;
            p += 8;
        }
        if (p >= e) break;
        unsigned char c = *p;
        if (c < 0x80) { p++; continue; }
        if (c < 0xC2) return 0;
        if (c < 0xE0) {
            if (e - p < 2 || (p[1] & 0xC0) != 0x80) return 0;
            p += 2; continue;
        }
        if (c < 0xF0) {
            if (e - p < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return 0;
            if (c == 0xE0 && p[1] < 0xA0) return 0;           /* overlong */
            if (c == 0xED && p[1] >= 0xA0) return 0;          /* surrogates */
            p += 3; continue;
        }
        if (c < 0xF5) {
            if (e - p < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) return 0;
            if (c == 0xF0 && p[1] < 0x90) return 0;           /* overlong */
            if (c == 0xF4 && p[1] >= 0x90) return 0;          /* above U+10FFFF */
            p += 4; continue;
        }
        return 0;
    }
    return 1;
}

typedef struct { const unsigned char *s, *e; } span;

/* Fills f[0..4] and returns LINE_OK, or the reason the line is malformed. */
static int parse_line(const unsigned char *p, const unsigned char *e, span f[5]) {
    const unsigned char *q, *t;
    if (!valid_utf8(p, e)) return LINE_UTF8;
    q = memchr(p, ' ', e - p);                                    /* ([^ ]*) then ' ' */
    if (!q) return LINE_NOMATCH;
    f[0].s = p; f[0].e = q; q++;
    for (int k = 0; k < 2; k++) {                                 /* \S+ ' ' twice */
        t = q;
        while (q < e && !is_space(*q)) q++;
        if (q == t || q >= e || *q != ' ') return LINE_NOMATCH;
        q++;
    }
    if (q >= e || *q != '[') return LINE_NOMATCH;                    /* \[([\w:/]+\s[+\-]\d{4})\] */
    t = ++q;
    while (q < e && is_tword(*q)) q++;
    if (q == t || q >= e || !is_space(*q)) return LINE_NOMATCH;
    q++;
    if (q >= e || (*q != '+' && *q != '-')) return LINE_NOMATCH;
    q++;
    if (e - q < 4 || !is_digit(q[0]) || !is_digit(q[1]) || !is_digit(q[2]) || !is_digit(q[3])) return LINE_NOMATCH;
    q += 4;
    if (e - q < 3 || q[0] != ']' || q[1] != ' ' || q[2] != '"') return LINE_NOMATCH;
    f[1].s = t; f[1].e = q;
    q += 3;
    f[2].s = q;                                                   /* "(.+?)" (\d{3}) */
    const unsigned char *r = q + 1;
    for (;;) {
        if (r >= e) return LINE_NOMATCH;
        r = memchr(r, '"', e - r);
        if (!r || e - r < 6) return LINE_NOMATCH;
        if (r[1] == ' ' && is_digit(r[2]) && is_digit(r[3]) && is_digit(r[4]) && r[5] == ' ') break;
        r++;
    }
    f[2].e = r;
    f[3].s = r + 2; f[3].e = r + 5;
    f[4].s = r + 6;                                               /* ([^ ]*).*$ */
    q = memchr(f[4].s, ' ', e - f[4].s);
    f[4].e = q ? q : e;
    /* Between the fields stand only ' ', '[', ']' and '"', and ident, user (\S+) and the status (\d{3})
     * cannot hold TAB or CR: so a field holds one exactly when the span from the line's start to the
     * end of the size does. One vectorized scan instead of four. */
    if (memchr(p, '\t', f[4].e - p) || memchr(p, '\r', f[4].e - p))
        return LINE_TABCR;
    return LINE_OK;
}

typedef struct { Py_ssize_t line, start, end; int reason; } bad_line;

#define MAX_FIELDS 64
enum { T_LIT = 0, T_UNTIL = 1, T_ESCAPED = 2, T_REST = 3 };
typedef struct { int kind; const unsigned char *lit; Py_ssize_t lit_len; unsigned char stop; } token;
typedef struct {
    token *tokens; int n_tokens;
    int n_fields;                  /* fields of the program */
    int out[MAX_FIELDS]; int n_out;
    int size_index;
    int clean_literals;            /* no literal holds TAB or CR: a field holds one iff the line does */
} program;

/* The token program on one line: fills f[0..n_fields) and returns LINE_OK or the reason. */
static int parse_program_line(const program *pg, const unsigned char *p, const unsigned char *e, span *f) {
    if (!valid_utf8(p, e)) return LINE_UTF8;
    const unsigned char *q = p;
    int k = 0;
    for (int i = 0; i < pg->n_tokens; i++) {
        const token *t = &pg->tokens[i];
        switch (t->kind) {
        case T_LIT:
            if (e - q < t->lit_len || memcmp(q, t->lit, t->lit_len) != 0) return LINE_NOMATCH;
            q += t->lit_len;
            break;
        case T_UNTIL: {
            const unsigned char *r = memchr(q, t->stop, e - q);
            if (!r) return LINE_NOMATCH;
            f[k].s = q; f[k].e = r; k++; q = r;
            break;
        }
        case T_ESCAPED: {
            const unsigned char *r = q;
            for (;;) {
                r = memchr(r, '"', e - r);
                if (!r) return LINE_NOMATCH;
                const unsigned char *b = r;
                while (b > q && b[-1] == '\\') b--;
                if (((r - b) & 1) == 0) break;     /* an even run of backslashes: the quote is not escaped */
                r++;
            }
            f[k].s = q; f[k].e = r; k++; q = r;
            break;
        }
        default:   /* T_REST */
            f[k].s = q; f[k].e = e; k++; q = e;
        }
    }
    if (q != e) return LINE_NOMATCH;
    if (pg->clean_literals)   /* fields and literals tile the line: one scan of it instead of one per field */
        return (memchr(p, '\t', e - p) || memchr(p, '\r', e - p)) ? LINE_TABCR : LINE_OK;
    for (int i = 0; i < k; i++) {
        Py_ssize_t len = f[i].e - f[i].s;
        if (memchr(f[i].s, '\t', len) || memchr(f[i].s, '\r', len)) return LINE_TABCR;
    }
    return LINE_OK;
}

typedef struct {
    const program *prog;                               /* NULL: the original expression */
    int columns;                                       /* build the Arrow views too */
    char *tsv; Py_ssize_t tsv_len;
    unsigned char *views; Py_ssize_t n_rec, cap_rec;   /* record-major while scanning: 5 views a record */
    bad_line *bad; Py_ssize_t n_bad, cap_bad;
    Py_ssize_t n_lines, n_dash;
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

static void scan(const unsigned char *buf, Py_ssize_t n, int final, scan_state *st) {
    const unsigned char *p = buf, *end = buf + n;
    span f[MAX_FIELDS];
    const program *pg = st->prog;
    int n_out = pg ? pg->n_out : 5;
    Py_ssize_t rec_bytes = 16 * n_out;
    while (p < end) {
        const unsigned char *nl = memchr(p, '\n', end - p);
        const unsigned char *le = nl ? nl : end;
        if (!nl && !final) break;
        const unsigned char *ce = (le > p && le[-1] == '\r') ? le - 1 : le;
        int reason = pg ? parse_program_line(pg, p, ce, f) : parse_line(p, ce, f);
        if (reason != LINE_OK) {
            if (st->n_bad == st->cap_bad) {
                Py_ssize_t cap = st->cap_bad ? st->cap_bad * 2 : 64;
                bad_line *nb = realloc(st->bad, cap * sizeof(bad_line));
                if (!nb) { st->oom = 1; return; }
                st->bad = nb; st->cap_bad = cap;
            }
            st->bad[st->n_bad++] = (bad_line){st->n_lines, p - buf, le - buf, reason};
        } else if (pg ? (pg->size_index >= 0 && f[pg->size_index].e - f[pg->size_index].s == 1
                          && f[pg->size_index].s[0] == '-')
                      : (f[4].e - f[4].s == 1 && f[4].s[0] == '-')) {
            st->n_dash++;
        } else {
            if (st->columns && st->n_rec == st->cap_rec) {
                Py_ssize_t cap = st->cap_rec ? st->cap_rec * 2 : 4096;
                unsigned char *nv = realloc(st->views, cap * rec_bytes);
                if (!nv) { st->oom = 1; return; }
                st->views = nv; st->cap_rec = cap;
            }
            unsigned char *v = st->columns ? st->views + st->n_rec * rec_bytes : NULL;
            char *o = st->tsv + st->tsv_len;
            for (int k = 0; k < n_out; k++) {
                int src = pg ? pg->out[k] : k;
                Py_ssize_t len = f[src].e - f[src].s;
                memcpy(o, f[src].s, len);
                if (v) put_view(v + 16 * k, st->tsv, o, len);
                o += len;
                *o++ = k < n_out - 1 ? '\t' : '\n';
            }
            st->tsv_len = o - st->tsv;
            st->n_rec++;
        }
        st->n_lines++;
        if (!nl) break;
        p = nl + 1;
    }
}

static PyObject *run_scan(Py_buffer *inp, int final, int columns, const program *pg) {
    Py_buffer in = *inp;   /* released below through inp */
    int n_out = pg ? pg->n_out : 5;
    if (in.len > INT32_MAX - 2) {
        PyBuffer_Release(inp);
        PyErr_SetString(PyExc_ValueError, "chunk larger than 2 GiB");
        return NULL;
    }
    /* Each record's TSV is no longer than its line plus the '\n' it may lack. */
    PyObject *tsv = PyBytes_FromStringAndSize(NULL, in.len + 1);
    if (!tsv) { PyBuffer_Release(inp); return NULL; }
    scan_state st = {0};
    st.prog = pg;
    st.columns = columns;
    st.tsv = PyBytes_AS_STRING(tsv);
    Py_BEGIN_ALLOW_THREADS
    scan((const unsigned char *)in.buf, in.len, final, &st);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(inp);
    PyObject *views = NULL, *bad = NULL, *result = NULL;
    if (st.oom) { PyErr_NoMemory(); goto done; }
    if (_PyBytes_Resize(&tsv, st.tsv_len) < 0) { tsv = NULL; goto done; }
    if (!columns) { views = Py_None; Py_INCREF(views); }
    else if (!(views = PyBytes_FromStringAndSize(NULL, st.n_rec * 16 * n_out))) goto done;
    if (columns) {   /* record-major -> field-major, so each field is one contiguous Arrow view buffer */
        unsigned char *dst = (unsigned char *)PyBytes_AS_STRING(views);
        for (int k = 0; k < n_out; k++)
            for (Py_ssize_t i = 0; i < st.n_rec; i++)
                memcpy(dst + (k * st.n_rec + i) * 16, st.views + (i * n_out + k) * 16, 16);
    }
    bad = PyList_New(st.n_bad);
    if (!bad) goto done;
    for (Py_ssize_t i = 0; i < st.n_bad; i++) {
        PyObject *t = Py_BuildValue("(nnni)", st.bad[i].line, st.bad[i].start, st.bad[i].end, st.bad[i].reason);
        if (!t) goto done;
        PyList_SET_ITEM(bad, i, t);
    }
    result = Py_BuildValue("(OOnnnO)", tsv, views, st.n_rec, st.n_lines, st.n_dash, bad);
done:
    Py_XDECREF(tsv); Py_XDECREF(views); Py_XDECREF(bad);
    free(st.views); free(st.bad);
    return result;
}

static PyObject *parse_chunk(PyObject *self, PyObject *args) {
    Py_buffer in;
    int final = 0, columns = 1;
    if (!PyArg_ParseTuple(args, "y*|pp", &in, &final, &columns)) return NULL;
    return run_scan(&in, final, columns, NULL);
}

/* Reads a token program (see parse_format) into pg; 0 on success, -1 with an exception set (pg->tokens
 * freed). The literals point into prog_t, which the caller keeps alive for as long as pg is used. */
static int build_program(PyObject *prog_t, PyObject *out_t, int size_index, program *pg) {
    Py_ssize_t n_tok = PyTuple_GET_SIZE(prog_t), n_out = PyTuple_GET_SIZE(out_t);
    memset(pg, 0, sizeof *pg);
    pg->tokens = calloc(n_tok ? n_tok : 1, sizeof(token));
    if (!pg->tokens) { PyErr_NoMemory(); return -1; }
    pg->n_tokens = (int)n_tok;
    pg->clean_literals = 1;
    for (Py_ssize_t i = 0; i < n_tok; i++) {
        int kind, stop; const char *lit; Py_ssize_t lit_len;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(prog_t, i), "iy#i", &kind, &lit, &lit_len, &stop)) goto bad;
        if (kind < T_LIT || kind > T_REST) { PyErr_SetString(PyExc_ValueError, "bad token kind"); goto bad; }
        pg->tokens[i] = (token){kind, (const unsigned char *)lit, lit_len, (unsigned char)stop};
        if (kind != T_LIT) pg->n_fields++;
        else if (memchr(lit, '\t', lit_len) || memchr(lit, '\r', lit_len)) pg->clean_literals = 0;
    }
    if (pg->n_fields > MAX_FIELDS || n_out < 1 || n_out > pg->n_fields || size_index >= pg->n_fields) {
        PyErr_SetString(PyExc_ValueError, "bad program: too many fields or bad indexes");
        goto bad;
    }
    pg->n_out = (int)n_out;
    pg->size_index = size_index;
    for (Py_ssize_t i = 0; i < n_out; i++) {
        long k = PyLong_AsLong(PyTuple_GET_ITEM(out_t, i));
        if (k < 0 || k >= pg->n_fields) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bad output field index");
            goto bad;
        }
        for (Py_ssize_t j = 0; j < i; j++)
            if (pg->out[j] == k) { PyErr_SetString(PyExc_ValueError, "output field written twice"); goto bad; }
        pg->out[i] = (int)k;
    }
    return 0;
bad:
    free(pg->tokens);
    pg->tokens = NULL;
    return -1;
}

static PyObject *parse_format(PyObject *self, PyObject *args) {
    Py_buffer in;
    int final = 0, columns = 1, size_index = -1;
    PyObject *prog_t, *out_t;
    if (!PyArg_ParseTuple(args, "y*ppO!O!i", &in, &final, &columns, &PyTuple_Type, &prog_t, &PyTuple_Type,
                          &out_t, &size_index)) return NULL;
    program pg;
    if (build_program(prog_t, out_t, size_index, &pg) < 0) { PyBuffer_Release(&in); return NULL; }
    /* the token tuple (and so the literals) stays alive: prog_t is borrowed from args for the call */
    PyObject *result = run_scan(&in, final, columns, &pg);
    free(pg.tokens);
    return result;
}

/* parse_arrow(offsets, data, offset, length, wide, program, out, size_index)
 * The lines of an Arrow binary array (what Spark's mapInArrow hands a Python worker: no separators, each
 * line its own element, one trailing '\r' still to cut), without copying them: offsets and data are the
 * array's buffers, offset/length its slice, wide = 1 for 64-bit offsets (large_binary). program is None
 * for the original expression (out and size_index are then ignored), else a token program as for
 * parse_format. Returns (status, n_malformed, fields):
 * status: one byte a line, 0 kept, 1/2/3 malformed (as parse_chunk's reasons), 4 dropped for a size "-";
 * fields: per field written, (offsets, data) of an Arrow utf8 array with one element a line: the field
 * of a kept line, "" for the others (the caller keeps only status 0). */
enum { ST_KEPT = 0, ST_DASH = 4 };

static PyObject *parse_arrow(PyObject *self, PyObject *args) {
    Py_buffer ob, db;
    Py_ssize_t offset, length;
    int wide, size_index = -1;
    PyObject *prog_o, *out_o = Py_None;
    if (!PyArg_ParseTuple(args, "y*y*nnpO|Oi", &ob, &db, &offset, &length, &wide, &prog_o, &out_o, &size_index))
        return NULL;
    program pg, *pgp = NULL;
    PyObject *status = NULL, *fields = NULL, *result = NULL;
    PyObject *bufs[2 * MAX_FIELDS] = {0};
    Py_ssize_t width = wide ? 8 : 4, n_bad = 0;
    int n_out = 5;
    if (prog_o != Py_None) {
        if (!PyTuple_Check(prog_o) || !PyTuple_Check(out_o)) {
            PyErr_SetString(PyExc_TypeError, "program and out must be tuples");
            goto release;
        }
        if (build_program(prog_o, out_o, size_index, &pg) < 0) goto release;
        pgp = &pg;
        n_out = pg.n_out;
    }
    if (offset < 0 || length < 0 || (offset + length + 1) * width > ob.len) {
        PyErr_SetString(PyExc_ValueError, "offsets buffer shorter than the slice");
        goto done;
    }
    const unsigned char *data = db.buf;
    int64_t first, last;
    if (wide) { const int64_t *o = ob.buf; first = o[offset]; last = o[offset + length]; }
    else { const int32_t *o = ob.buf; first = o[offset]; last = o[offset + length]; }
    if (first < 0 || last < first || last > db.len) {
        PyErr_SetString(PyExc_ValueError, "offsets outside the data buffer");
        goto done;
    }
    if (last - first > INT32_MAX) {   /* a field array's offsets are 32-bit, as Spark's strings */
        PyErr_SetString(PyExc_ValueError, "batch larger than 2 GiB");
        goto done;
    }
    if (!(status = PyBytes_FromStringAndSize(NULL, length))) goto done;
    /* each field's data is at most the batch's bytes (every field is a piece of its line) */
    for (int k = 0; k < n_out; k++) {
        if (!(bufs[2 * k] = PyBytes_FromStringAndSize(NULL, (length + 1) * 4))) goto done;
        if (!(bufs[2 * k + 1] = PyBytes_FromStringAndSize(NULL, last - first))) goto done;
    }
    {
        unsigned char *st = (unsigned char *)PyBytes_AS_STRING(status);
        int32_t *offs[MAX_FIELDS]; char *out[MAX_FIELDS]; int32_t pos[MAX_FIELDS];
        for (int k = 0; k < n_out; k++) {
            offs[k] = (int32_t *)PyBytes_AS_STRING(bufs[2 * k]);
            out[k] = PyBytes_AS_STRING(bufs[2 * k + 1]);
            pos[k] = 0;
            offs[k][0] = 0;
        }
        int bad_offsets = 0;
        Py_BEGIN_ALLOW_THREADS
        span f[MAX_FIELDS];
        for (Py_ssize_t i = 0; i < length; i++) {
            int64_t s, e;
            if (wide) { const int64_t *o = ob.buf; s = o[offset + i]; e = o[offset + i + 1]; }
            else { const int32_t *o = ob.buf; s = o[offset + i]; e = o[offset + i + 1]; }
            if (s < first || e < s || e > last) { bad_offsets = 1; break; }
            const unsigned char *p = data + s, *le = data + e;
            const unsigned char *ce = (le > p && le[-1] == '\r') ? le - 1 : le;
            int reason = pgp ? parse_program_line(pgp, p, ce, f) : parse_line(p, ce, f);
            if (reason == LINE_OK) {
                int si = pgp ? pgp->size_index : 4;
                if (si >= 0 && f[si].e - f[si].s == 1 && f[si].s[0] == '-') reason = ST_DASH;
            }
            st[i] = (unsigned char)reason;
            if (reason >= LINE_UTF8 && reason <= LINE_TABCR) n_bad++;
            for (int k = 0; k < n_out; k++) {
                if (reason == ST_KEPT) {
                    int src = pgp ? pgp->out[k] : k;
                    Py_ssize_t len = f[src].e - f[src].s;
                    memcpy(out[k] + pos[k], f[src].s, len);
                    pos[k] += (int32_t)len;
                }
                offs[k][i + 1] = pos[k];
            }
        }
        Py_END_ALLOW_THREADS
        if (bad_offsets) { PyErr_SetString(PyExc_ValueError, "offsets not increasing"); goto done; }
        for (int k = 0; k < n_out; k++)
            if (_PyBytes_Resize(&bufs[2 * k + 1], pos[k]) < 0) { bufs[2 * k + 1] = NULL; goto done; }
    }
    if (!(fields = PyTuple_New(n_out))) goto done;
    for (int k = 0; k < n_out; k++) {
        PyObject *pair = PyTuple_Pack(2, bufs[2 * k], bufs[2 * k + 1]);
        if (!pair) goto done;
        PyTuple_SET_ITEM(fields, k, pair);
    }
    result = Py_BuildValue("(OnO)", status, n_bad, fields);
done:
    if (pgp) free(pg.tokens);
    Py_XDECREF(status); Py_XDECREF(fields);
    for (int k = 0; k < 2 * MAX_FIELDS; k++) Py_XDECREF(bufs[k]);
release:
    PyBuffer_Release(&ob); PyBuffer_Release(&db);
    return result;
}

static PyMethodDef methods[] = {
    {"parse_chunk", parse_chunk, METH_VARARGS,
     "parse_chunk(buf, final=False, columns=True) -> (tsv, views, n_records, n_lines, n_dash, malformed)"},
    {"parse_format", parse_format, METH_VARARGS,
     "parse_format(buf, final, columns, program, out, size_index) -> same as parse_chunk"},
    {"parse_arrow", parse_arrow, METH_VARARGS,
     "parse_arrow(offsets, data, offset, length, wide, program, out=None, size_index=-1) -> (status, n_malformed, fields)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scan", "Native parse kernel for the logetl line contract.", -1, methods};

PyMODINIT_FUNC PyInit__scan(void) {
    init_classes();
    return PyModule_Create(&module);
}
