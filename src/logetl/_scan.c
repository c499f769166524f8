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
 * A trailing piece without '\n' is a line only when final is true; otherwise it must be empty. */
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

typedef struct {
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
    span f[5];
    while (p < end) {
        const unsigned char *nl = memchr(p, '\n', end - p);
        const unsigned char *le = nl ? nl : end;
        if (!nl && !final) break;
        const unsigned char *ce = (le > p && le[-1] == '\r') ? le - 1 : le;
        int reason = parse_line(p, ce, f);
        if (reason != LINE_OK) {
            if (st->n_bad == st->cap_bad) {
                Py_ssize_t cap = st->cap_bad ? st->cap_bad * 2 : 64;
                bad_line *nb = realloc(st->bad, cap * sizeof(bad_line));
                if (!nb) { st->oom = 1; return; }
                st->bad = nb; st->cap_bad = cap;
            }
            st->bad[st->n_bad++] = (bad_line){st->n_lines, p - buf, le - buf, reason};
        } else if (f[4].e - f[4].s == 1 && f[4].s[0] == '-') {
            st->n_dash++;
        } else {
            if (st->columns && st->n_rec == st->cap_rec) {
                Py_ssize_t cap = st->cap_rec ? st->cap_rec * 2 : 4096;
                unsigned char *nv = realloc(st->views, cap * 80);
                if (!nv) { st->oom = 1; return; }
                st->views = nv; st->cap_rec = cap;
            }
            unsigned char *v = st->columns ? st->views + st->n_rec * 80 : NULL;
            char *o = st->tsv + st->tsv_len;
            for (int k = 0; k < 5; k++) {
                Py_ssize_t len = f[k].e - f[k].s;
                memcpy(o, f[k].s, len);
                if (v) put_view(v + 16 * k, st->tsv, o, len);
                o += len;
                *o++ = k < 4 ? '\t' : '\n';
            }
            st->tsv_len = o - st->tsv;
            st->n_rec++;
        }
        st->n_lines++;
        if (!nl) break;
        p = nl + 1;
    }
}

static PyObject *parse_chunk(PyObject *self, PyObject *args) {
    Py_buffer in;
    int final = 0, columns = 1;
    if (!PyArg_ParseTuple(args, "y*|pp", &in, &final, &columns)) return NULL;
    if (in.len > INT32_MAX - 2) {
        PyBuffer_Release(&in);
        PyErr_SetString(PyExc_ValueError, "chunk larger than 2 GiB");
        return NULL;
    }
    /* Each record's TSV is no longer than its line plus the '\n' it may lack. */
    PyObject *tsv = PyBytes_FromStringAndSize(NULL, in.len + 1);
    if (!tsv) { PyBuffer_Release(&in); return NULL; }
    scan_state st = {0};
    st.columns = columns;
    st.tsv = PyBytes_AS_STRING(tsv);
    Py_BEGIN_ALLOW_THREADS
    scan((const unsigned char *)in.buf, in.len, final, &st);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&in);
    PyObject *views = NULL, *bad = NULL, *result = NULL;
    if (st.oom) { PyErr_NoMemory(); goto done; }
    if (_PyBytes_Resize(&tsv, st.tsv_len) < 0) { tsv = NULL; goto done; }
    if (!columns) { views = Py_None; Py_INCREF(views); }
    else if (!(views = PyBytes_FromStringAndSize(NULL, st.n_rec * 80))) goto done;
    if (columns) {   /* record-major -> field-major, so each field is one contiguous Arrow view buffer */
        unsigned char *dst = (unsigned char *)PyBytes_AS_STRING(views);
        for (int k = 0; k < 5; k++)
            for (Py_ssize_t i = 0; i < st.n_rec; i++)
                memcpy(dst + (k * st.n_rec + i) * 16, st.views + i * 80 + k * 16, 16);
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

static PyMethodDef methods[] = {
    {"parse_chunk", parse_chunk, METH_VARARGS,
     "parse_chunk(buf, final=False, columns=True) -> (tsv, views, n_records, n_lines, n_dash, malformed)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scan", "Native parse kernel for the logetl line contract.", -1, methods};

PyMODINIT_FUNC PyInit__scan(void) {
    init_classes();
    return PyModule_Create(&module);
}
