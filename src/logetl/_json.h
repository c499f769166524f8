/* JSON-lines logs for the parse kernel: a strict JSON scanner (RFC 8259, as Python's json.loads with
 * constants refused) that reads the fields of a JSON program from one line, without Python, for the Python
 * module (_scan.c) and the JVM's (_jni.c). Included by _kernel.h; logetl.formats (JsonFormat) defines what a
 * JSON program is and holds the reference implementation this one must equal.
 *
 * A JSON program is a T_JSON token (no field) followed by fields:
 *   T_JKEY     a key path: its literal is the path's keys, each followed by a NUL byte ("request\0uri\0");
 *              the value at that path: a string decoded (escapes, surrogate pairs), a number, true or false as
 *              written, null, an object, an empty array or a missing key as the empty value, an array as its
 *              first element's value;
 *   T_JDERIVE  a field made from earlier fields once the line is read (literal: their indexes, stop: how):
 *              'r' request "METHOD URI PROTO" (src method, uri, protocol; empty without a method or a URI;
 *              " PROTO" left out when there is none), 'p' path and 'q' query of a URI (src uri: up to the
 *              first '?', and after it), 'm' method, 'u' uri, 'v' protocol of a request line (src request:
 *              split at its first and last space; one space: method and uri; none: all empty).
 * A line that is not one JSON object (whitespace around it allowed) does not match (LINE_NOMATCH); a field
 * whose decoded value holds a TAB, CR or LF (a record is tab-separated) makes it LINE_TABCR; a decoded lone
 * surrogate (not UTF-8) makes it LINE_NOMATCH. Decoded values and derived requests are written to the
 * program's scratch buffer (json_state): the caller copies the fields before the next line unless `keep`
 * (the JVM's batch, whose spans must hold until the batch is read). A request made without a protocol field
 * names the method's index as its third source (see jsonformats). The mapped key paths form a tree
 * (json_state.node) whose keys are found by a hash of (parent node, key) (json_state.slot): a key read is
 * compared with at most the one or two wanted keys that share its hash, not with every key at its place;
 * before the hash, with the key read at the same place of that object on an earlier line (j_key). A line
 * without a backslash or a control byte is first marked (j_quotes): its strings then end at the next quote
 * of its bitmap, without a byte-by-byte scan (docs/design/json-scanner.md). */
#ifndef LOGETL_JSON_H
#define LOGETL_JSON_H
#ifdef __SSE2__
#include <emmintrin.h>
#endif

enum { T_JSON = 11, T_JKEY = 12, T_JDERIVE = 13 };
#define JSON_MAX_DEPTH 128       /* deeper nesting is refused as not JSON (Python's recursion is deeper) */
#define JSON_MAX_SEGS 16
#define JSON_SLOTS 4096          /* power of two, more than twice the nodes: a probe seldom goes past one slot */
#define JSON_QWORDS 256          /* lines up to 16 KiB get a bitmap of their quotes (j_quotes) */
#define JSON_MEMO_ROWS 8         /* objects looked into whose keys are remembered by their place (j_key) */
#define JSON_MEMO_KEYS 64        /* ... their first keys so */
#define JSON_MEMO_LEN 32         /* ... keys up to this long */

typedef struct json_state {
    int n_fields;
    unsigned char how[64];                          /* 0 for a key path, else the derivation */
    const unsigned char *seg[64][JSON_MAX_SEGS];    /* a key path's keys */
    uint32_t seglen[64][JSON_MAX_SEGS];
    unsigned char src[64][3]; int nsrc[64];         /* a derived field's sources */
    /* the key paths as a tree: node 0 the line's object; a node's children the keys inside it, each with the
     * fields whose path ends there (leaves) and all the fields at or below it (under) */
    struct { const unsigned char *key; uint32_t len; int child, sibling, parent; uint64_t leaves, under; } node[1 + 64 * JSON_MAX_SEGS];
    int n_nodes;
    uint16_t slot[JSON_SLOTS];                      /* open addressing by j_hash: a node's index, 0 empty */
    unsigned char *buf; size_t cap, used;           /* scratch */
    int fixed;                                      /* buf is the caller's: never grown */
    int keep;                                       /* values stay for the batch: used is not reset per line */
    uint64_t qbits[JSON_QWORDS + 1];                  /* the line's '"' bytes (j_quotes), bit i for byte i */
    /* a server writes the same keys in the same order on every line: the key last read at each place of an
     * object looked into, and the node it is (0: none wanted), so that a key alike is known without its hash */
    int memo_row[1 + 64 * JSON_MAX_SEGS];           /* a node's row, + 1 (0: none) */
    int n_memo;
    struct { unsigned char key[JSON_MEMO_LEN]; uint32_t len; int child; } memo[JSON_MEMO_ROWS][JSON_MEMO_KEYS];
} json_state;

typedef struct {
    const unsigned char *e, *line;
    json_state *js;
    span *f;
    uint64_t decoded;        /* fields whose value was decoded (only those may hold TAB, CR or LF) */
    const unsigned char *err;
    const uint64_t *qb;      /* the line's quote bitmap when it holds no '\\' and no control byte, else NULL */
    size_t nw;               /* its words */
} jctx;

/* The slot where the key k (len > 0) under the node `parent` is first looked for: its length and three of
 * its bytes (first, middle, last) tell apart the keys that logs write side by side (RequestHost,
 * RequestPath, RequestPort ...). */
static inline uint32_t j_hash(int parent, const unsigned char *k, size_t len) {
    uint32_t h = (uint32_t)parent * 0x9E3779B1u ^ (uint32_t)len * 0x85EBCA77u;
    h ^= ((uint32_t)k[0] | (uint32_t)k[len - 1] << 8 | (uint32_t)k[len >> 1] << 16) * 0xC2B2AE3Du;
    h ^= h >> 15;
    return h & (JSON_SLOTS - 1);
}

static inline uint64_t j_load(const unsigned char *p, size_t n) {
    uint64_t w = 0;
    memcpy(&w, p, n);
    return w;
}

/* Whether the len (> 0) bytes at a and b are alike: keys are short, so a word at each end (overlapping when
 * shorter than two words) and the words between, without a branch a byte (a byte loop mispredicts at its
 * end, whose place changes with every key). Reads no byte outside either key. */
static inline int j_same(const unsigned char *a, const unsigned char *b, size_t len) {
    if (len > 32) {
        for (size_t i = 0; i + 8 < len; i += 8)
            if (j_load(a + i, 8) != j_load(b + i, 8)) return 0;
        return j_load(a + len - 8, 8) == j_load(b + len - 8, 8);
    }
    if (len >= 8) {   /* up to 32 bytes: four words at fixed places that cover them, no loop */
        size_t m1 = len >= 16 ? 8 : len - 8, m2 = len >= 24 ? len - 16 : 0;
        return ((j_load(a, 8) ^ j_load(b, 8)) | (j_load(a + m1, 8) ^ j_load(b + m1, 8))
                | (j_load(a + m2, 8) ^ j_load(b + m2, 8)) | (j_load(a + len - 8, 8) ^ j_load(b + len - 8, 8))) == 0;
    }
    if (len >= 4) return (j_load(a, 4) == j_load(b, 4)) & (j_load(a + len - 4, 4) == j_load(b + len - 4, 4));
    return (a[0] == b[0]) & (a[len >> 1] == b[len >> 1]) & (a[len - 1] == b[len - 1]);
}

/* The child of `node` whose key is k, or 0. */
static inline int j_child(const json_state *js, int node, const unsigned char *k, size_t len) {
    if (!len) return 0;   /* no key wanted is empty */
    for (uint32_t h = j_hash(node, k, len);; h = (h + 1) & (JSON_SLOTS - 1)) {
        int ch = js->slot[h];
        if (!ch) return 0;
        if (js->node[ch].parent == node && js->node[ch].len == len && j_same(js->node[ch].key, k, len)) return ch;
    }
}

/* The row of remembered keys of `node` (a node with children), given it on its first use; -1 when the rows
 * are all taken. */
static inline int j_row(json_state *js, int node) {
    int row = js->memo_row[node] - 1;
    if (row < 0 && js->n_memo < JSON_MEMO_ROWS) row = (js->memo_row[node] = ++js->n_memo) - 1;
    return row;
}

/* The child of `node` (a node with children, its row `row`) whose key is k (not escaped), or 0; at the
 * object's key number `at`, the key read at that place before is compared first. */
static inline int j_key(json_state *js, int node, int row, int at, const unsigned char *k, size_t len) {
    if (row < 0 || at >= JSON_MEMO_KEYS || len > JSON_MEMO_LEN || !len) return j_child(js, node, k, len);
    if (js->memo[row][at].len == len && j_same(js->memo[row][at].key, k, len)) return js->memo[row][at].child;
    int ch = j_child(js, node, k, len);
    memcpy(js->memo[row][at].key, k, len);
    js->memo[row][at].len = (uint32_t)len;
    js->memo[row][at].child = ch;
    return ch;
}

/* Adds a JSON program's token to js (the program's field count is the caller's); 0 or -1 for a bad one. */
static int json_add(json_state *js, int kind, const unsigned char *lit, ptrdiff_t lit_len, unsigned char stop) {
    if (kind == T_JSON) return 0;
    int k = js->n_fields;
    if (k >= 64) return -1;
    if (kind == T_JKEY) {
        int n = 0;
        const unsigned char *p = lit, *e = lit + lit_len;
        while (p < e) {
            const unsigned char *z = memchr(p, 0, e - p);
            if (!z || n == JSON_MAX_SEGS) return -1;
            if (z == p) return -1;     /* an empty key (jsonformats refuses them) */
            js->seg[k][n] = p; js->seglen[k][n] = (uint32_t)(z - p);
            n++;
            p = z + 1;
        }
        if (!n) return -1;
        if (!js->n_nodes) js->n_nodes = 1;
        int at = 0;
        for (int d = 0; d < n; d++) {
            int ch = js->node[at].child;
            while (ch && !(js->node[ch].len == js->seglen[k][d] && memcmp(js->node[ch].key, js->seg[k][d], js->seglen[k][d]) == 0))
                ch = js->node[ch].sibling;
            if (!ch) {
                ch = js->n_nodes++;
                js->node[ch].key = js->seg[k][d]; js->node[ch].len = js->seglen[k][d];
                js->node[ch].child = 0; js->node[ch].sibling = js->node[at].child; js->node[ch].parent = at;
                js->node[ch].leaves = js->node[ch].under = 0;
                js->node[at].child = ch;
                uint32_t h = j_hash(at, js->seg[k][d], js->seglen[k][d]);
                while (js->slot[h]) h = (h + 1) & (JSON_SLOTS - 1);
                js->slot[h] = (uint16_t)ch;
            }
            js->node[ch].under |= 1ULL << k;
            at = ch;
        }
        js->node[at].leaves |= 1ULL << k;
        js->how[k] = 0;
    } else if (kind == T_JDERIVE) {
        int need = stop == 'r' ? 3 : 1;
        if (lit_len != need || !memchr("rpqmuv", stop, 6)) return -1;
        for (int i = 0; i < need; i++) {
            if (lit[i] >= k) return -1;       /* from earlier fields only */
            js->src[k][i] = lit[i];
        }
        js->nsrc[k] = need; js->how[k] = stop;
    } else {
        return -1;
    }
    js->n_fields = k + 1;
    return 0;
}

/* n more bytes of scratch within what json_line reserved for the line (the buffer never moves while a line
 * is read: its fields point into it); NULL when there is no room. */
static inline unsigned char *json_take(json_state *js, size_t n) {
    return js->used + n <= js->cap ? js->buf + js->used : NULL;
}

/* Room for n more bytes of scratch, the buffer grown when it is not the caller's; NULL without. */
static unsigned char *json_room(json_state *js, size_t n) {
    if (js->used + n <= js->cap) return js->buf + js->used;
    if (js->fixed) return NULL;
    size_t cap = js->cap * 2 > js->used + n ? js->cap * 2 : js->used + n + 4096;
    unsigned char *b = realloc(js->buf, cap);
    if (!b) return NULL;
    js->buf = b; js->cap = cap;
    return b + js->used;
}

static inline const unsigned char *j_ws(const unsigned char *p, const unsigned char *e) {
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

static inline int j_hex(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* A string's end: p is after its opening '"'; the closing '"', or NULL (a control character, a bad escape,
 * no end). *esc: whether it holds a backslash. */
static inline __attribute__((always_inline)) const unsigned char *j_string(const unsigned char *p,
                                                                         const unsigned char *e, int *esc) {
    *esc = 0;
    for (;;) {
#ifdef __SSE2__
        /* sixteen bytes at a time: the first '"', '\\' or control character among them found at once */
        while (e - p >= 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)p);
            __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                                    _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
                                       _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1F)), v));
            unsigned m = (unsigned)_mm_movemask_epi8(hit);
            if (m) { p += __builtin_ctz(m); goto found; }
            p += 16;
        }
#endif
        /* eight bytes at a time while none is '"', '\\' or a control character */
        while (e - p >= 8) {
            uint64_t w; memcpy(&w, p, 8);
            uint64_t q = w ^ (ONES * '"'), b = w ^ (ONES * '\\');
            uint64_t hit = ((q - ONES) & ~q) | ((b - ONES) & ~b) | ((w - ONES * 0x20) & ~w);
            if (hit & HIGHS) break;
            p += 8;
        }
        if (p >= e) return NULL;
#ifdef __SSE2__
    found:;
#endif
        unsigned char c = *p;
        if (c == '"') return p;
        if (c < 0x20) return NULL;
        if (c == '\\') {
            *esc = 1;
            if (e - p < 2) return NULL;
            unsigned char d = p[1];
            if (d == 'u') {
                if (e - p < 6 || j_hex(p[2]) < 0 || j_hex(p[3]) < 0 || j_hex(p[4]) < 0 || j_hex(p[5]) < 0) return NULL;
                p += 6;
            } else if (d == '"' || d == '\\' || d == '/' || d == 'b' || d == 'f' || d == 'n' || d == 'r' || d == 't') {
                p += 2;
            } else {
                return NULL;
            }
            continue;
        }
        p++;
    }
}

/* Stage one of a line (simdjson's idea, for what this scanner needs): when the line holds no '\\' and no
 * control byte (TAB, CR and LF included: compact JSON has none between its values), every string ends at its
 * next '"', which the bitmap of the line's quotes gives at once, and no string needs a check: the bitmap
 * into js->qbits and its word count returned. 0 when the line holds one of those bytes or is longer than the
 * bitmap (j_string then reads each string). *high: whether the line holds a byte above 0x7F (only then is it
 * looked at as UTF-8). */
static size_t j_quotes(json_state *js, const unsigned char *p, const unsigned char *e, int *high) {
    size_t n = (size_t)(e - p), i = 0;
    *high = 1;
    if (n > (size_t)JSON_QWORDS * 64) return 0;
    uint64_t *qb = js->qbits;
    int bad = 0, hi = 0;
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\'), ctl = _mm_set1_epi8(0x1F);
    __m128i acc = _mm_setzero_si128(), any = _mm_setzero_si128();
    unsigned char pad[64];
    for (; i < n; i += 64) {
        const unsigned char *b = p + i;
        if (n - i < 64) {   /* the last bytes, padded with spaces (neither a quote nor a byte looked for) */
            memset(pad, ' ', 64);
            memcpy(pad, b, n - i);
            b = pad;
        }
        uint64_t bits = 0;
        for (int k = 0; k < 4; k++) {
            __m128i v = _mm_loadu_si128((const __m128i *)(b + 16 * k));
            bits |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, quote)) << (16 * k);
            acc = _mm_or_si128(acc, _mm_or_si128(_mm_cmpeq_epi8(v, bs), _mm_cmpeq_epi8(_mm_min_epu8(v, ctl), v)));
            any = _mm_or_si128(any, v);
        }
        qb[i >> 6] = bits;
    }
    bad = _mm_movemask_epi8(acc);
    hi = _mm_movemask_epi8(any);
#else
    for (; i < n; i += 64) {
        uint64_t bits = 0;
        for (size_t j = i; j < n && j < i + 64; j++) {
            unsigned char c = p[j];
            bits |= (uint64_t)(c == '"') << (j - i);
            bad |= (c == '\\') | (c < 0x20);
            hi |= c & 0x80;
        }
        qb[i >> 6] = bits;
    }
#endif
    qb[(n + 63) >> 6] = 0;   /* a word past the end: j_next_quote reads two at once */
    *high = hi != 0;
    return bad ? 0 : (n + 63) >> 6;
}

/* The first '"' at or after p (in a line with a quote bitmap), or NULL. */
static inline const unsigned char *j_next_quote(const jctx *c, const unsigned char *p) {
    size_t i = (size_t)(p - c->line), w = i >> 6;
    if (w >= c->nw) return NULL;
    /* the 64 bits from p on (two words: most strings end within them, found without a loop) */
    unsigned sh = (unsigned)(i & 63);
    uint64_t m = c->qb[w] >> sh | (sh ? c->qb[w + 1] << (64 - sh) : 0);
    if (m) return p + __builtin_ctzll(m);
    size_t j = i + 64;   /* a longer string: the words after those bits */
    for (size_t v = j >> 6; v < c->nw; v++) {
        m = c->qb[v] & (v == j >> 6 ? ~0ULL << (j & 63) : ~0ULL);
        if (m) return c->line + (v << 6) + __builtin_ctzll(m);
    }
    return NULL;
}

/* A string's end as j_string gives it (p after its opening '"'), from the bitmap when the line has one. */
static inline __attribute__((always_inline)) const unsigned char *j_str(const jctx *c, const unsigned char *p,
                                                                      int *esc) {
    if (c->qb) { *esc = 0; return j_next_quote(c, p); }
    return j_string(p, c->e, esc);
}

static inline unsigned j_u4(const unsigned char *p) {
    return (unsigned)(j_hex(p[0]) << 12 | j_hex(p[1]) << 8 | j_hex(p[2]) << 4 | j_hex(p[3]));
}

/* Decodes the (valid) string text [p, q) into o; the bytes written, or -1 for a lone surrogate. */
static ptrdiff_t j_decode(const unsigned char *p, const unsigned char *q, unsigned char *o) {
    unsigned char *o0 = o;
    while (p < q) {
        const unsigned char *b = memchr(p, '\\', q - p);
        if (!b) b = q;
        memcpy(o, p, b - p); o += b - p; p = b;
        if (p >= q) break;
        unsigned char d = p[1];
        if (d != 'u') {
            *o++ = d == 'b' ? '\b' : d == 'f' ? '\f' : d == 'n' ? '\n' : d == 'r' ? '\r' : d == 't' ? '\t' : d;
            p += 2;
            continue;
        }
        unsigned u = j_u4(p + 2);
        p += 6;
        if (u >= 0xD800 && u < 0xDC00) {
            if (q - p >= 6 && p[0] == '\\' && p[1] == 'u') {
                unsigned l = j_u4(p + 2);
                if (l >= 0xDC00 && l < 0xE000) { u = 0x10000 + ((u - 0xD800) << 10) + (l - 0xDC00); p += 6; }
                else return -1;
            } else {
                return -1;
            }
        } else if (u >= 0xDC00 && u < 0xE000) {
            return -1;
        }
        if (u < 0x80) *o++ = (unsigned char)u;
        else if (u < 0x800) { *o++ = (unsigned char)(0xC0 | u >> 6); *o++ = (unsigned char)(0x80 | (u & 0x3F)); }
        else if (u < 0x10000) {
            *o++ = (unsigned char)(0xE0 | u >> 12); *o++ = (unsigned char)(0x80 | ((u >> 6) & 0x3F));
            *o++ = (unsigned char)(0x80 | (u & 0x3F));
        } else {
            *o++ = (unsigned char)(0xF0 | u >> 18); *o++ = (unsigned char)(0x80 | ((u >> 12) & 0x3F));
            *o++ = (unsigned char)(0x80 | ((u >> 6) & 0x3F)); *o++ = (unsigned char)(0x80 | (u & 0x3F));
        }
    }
    return o - o0;
}

/* The end of the digits from p on: sixteen bytes at a time (a loop a digit mispredicts at its end, whose
 * place changes with every number). */
static inline const unsigned char *j_digits(const unsigned char *p, const unsigned char *e) {
#ifdef __SSE2__
    const __m128i zero = _mm_set1_epi8('0'), nine = _mm_set1_epi8('9');
    while (e - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        __m128i d = _mm_and_si128(_mm_cmpeq_epi8(_mm_max_epu8(v, zero), v), _mm_cmpeq_epi8(_mm_min_epu8(v, nine), v));
        unsigned m = ~(unsigned)_mm_movemask_epi8(d) & 0xFFFF;
        if (m) return p + __builtin_ctz(m);
        p += 16;
    }
#endif
    while (p < e && is_digit(*p)) p++;
    return p;
}

/* A number's end (p at its first character), or NULL: -?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)? */
static const unsigned char *j_number(const unsigned char *p, const unsigned char *e) {
    if (p < e && *p == '-') p++;
    if (p >= e || !is_digit(*p)) return NULL;
    if (*p == '0') p++;
    else p = j_digits(p, e);
    if (p < e && *p == '.') {
        p++;
        if (p >= e || !is_digit(*p)) return NULL;
        p = j_digits(p, e);
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        if (p >= e || !is_digit(*p)) return NULL;
        p = j_digits(p, e);
    }
    return p;
}

static inline void j_set_all(jctx *c, uint64_t m, const unsigned char *s, const unsigned char *e, int decoded) {
    c->decoded = (c->decoded & ~m) | (decoded ? m : 0);
    for (; m; m &= m - 1) {
        int k = __builtin_ctzll(m);
        c->f[k].s = s; c->f[k].e = e;
    }
}

static const unsigned char *j_object(jctx *c, const unsigned char *p, int node, int depth);

/* The value at p (after whitespace); `leaves` take its value, the keys below `node` (-1: none) are looked for
 * inside it (an object). Returns the end of the value, or NULL (c->err set). */
static const unsigned char *j_value(jctx *c, const unsigned char *p, uint64_t leaves, int node, int depth) {
    const unsigned char *e = c->e;
    if (p >= e) { c->err = p; return NULL; }
    switch (*p) {
    case '"': {
        int esc;
        const unsigned char *q = j_str(c, p + 1, &esc);
        if (!q) { c->err = p; return NULL; }
        if (leaves) {
            if (!esc) j_set_all(c, leaves, p + 1, q, 0);
            else {
                unsigned char *o = json_take(c->js, (size_t)(q - p));
                if (!o) { c->err = p; return NULL; }
                ptrdiff_t n = j_decode(p + 1, q, o);
                if (n < 0) { c->err = p; return NULL; }
                c->js->used += (size_t)n;
                j_set_all(c, leaves, o, o + n, 1);
            }
        }
        return q + 1;
    }
    case '{':
        if (depth >= JSON_MAX_DEPTH) { c->err = p; return NULL; }
        if (leaves) j_set_all(c, leaves, c->line, c->line, 0);
        return j_object(c, p, node, depth);
    case '[': {
        if (depth >= JSON_MAX_DEPTH) { c->err = p; return NULL; }
        if (leaves) j_set_all(c, leaves, c->line, c->line, 0);
        p = j_ws(p + 1, e);
        if (p < e && *p == ']') return p + 1;
        for (int first = 1;; first = 0) {
            /* the first element gives the leaves their value; an array has no keys to look inside */
            if (!(p = j_value(c, p, first ? leaves : 0, -1, depth + 1))) return NULL;
            p = j_ws(p, e);
            if (p < e && *p == ',') { p = j_ws(p + 1, e); continue; }
            if (p < e && *p == ']') return p + 1;
            c->err = p; return NULL;
        }
    }
    case 't': case 'f': case 'n': {
        const char *w = *p == 't' ? "true" : *p == 'f' ? "false" : "null";
        size_t n = strlen(w);
        if ((size_t)(e - p) < n || memcmp(p, w, n) != 0) { c->err = p; return NULL; }
        if (leaves) {
            if (*p == 'n') j_set_all(c, leaves, c->line, c->line, 0);
            else j_set_all(c, leaves, p, p + n, 0);
        }
        return p + n;
    }
    default: {
        const unsigned char *q = j_number(p, e);
        if (!q) { c->err = p; return NULL; }
        if (leaves) j_set_all(c, leaves, p, q, 0);
        return q;
    }
    }
}

/* The object at p ('{'): a key among node's children (-1: none looked for) gives its fields their values,
 * or looks for deeper keys in its value; a key met again replaces what the earlier one gave (as a JSON
 * object's last key wins). */
static const unsigned char *j_object(jctx *c, const unsigned char *p, int node, int depth) {
    const unsigned char *e = c->e;
    json_state *js = c->js;
    p = j_ws(p + 1, e);
    if (p < e && *p == '}') return p + 1;
    for (int at = 0;; at++) {
        if (p >= e || *p != '"') { c->err = p; return NULL; }
        int hit = -1, esc = 0, wanted = node >= 0 && js->node[node].child, row = wanted ? j_row(js, node) : -1;
        const unsigned char *q;
        size_t mlen = row >= 0 && at < JSON_MEMO_KEYS ? js->memo[row][at].len : 0;
        if (mlen && (size_t)(e - p) > mlen + 1 && p[mlen + 1] == '"' && j_same(js->memo[row][at].key, p + 1, mlen)) {
            /* the key this place held before, then a quote: a remembered key holds no quote, backslash or
             * control byte (it was read unescaped), so the string ends there and is that key */
            q = p + 1 + mlen;
            if (js->memo[row][at].child) hit = js->memo[row][at].child;
        } else if (!(q = j_str(c, p + 1, &esc))) {
            c->err = p; return NULL;
        } else if (wanted) {
            const unsigned char *k = p + 1;
            size_t klen = (size_t)(q - k), mark = js->used;
            if (esc) {     /* an escaped key is compared decoded; its scratch is given back at once */
                unsigned char *o = json_take(js, klen);
                if (!o) { c->err = p; return NULL; }
                ptrdiff_t n = j_decode(k, q, o);
                k = o; klen = n < 0 ? (size_t)-1 : (size_t)n;
            }
            int ch = klen == (size_t)-1 ? 0 : esc ? j_child(js, node, k, klen) : j_key(js, node, row, at, k, klen);
            if (ch) hit = ch;
            js->used = mark;
        }
        /* compact JSON (no whitespace between its tokens) goes straight on; j_ws is called only on a space */
        p = q + 1;
        if (p < e && *p != ':') p = j_ws(p, e);
        if (p >= e || *p != ':') { c->err = p; return NULL; }
        p++;
        if (p < e && *p <= ' ') p = j_ws(p, e);
        uint64_t leaves = hit >= 0 ? js->node[hit].leaves : 0, deeper = hit >= 0 ? js->node[hit].under & ~leaves : 0;
        if (deeper) j_set_all(c, deeper, c->line, c->line, 0);   /* missing unless this value has them */
        if (p < e && *p == '"' && c->qb) {   /* a string in a line with a quote bitmap: read here, not called */
            const unsigned char *r = j_next_quote(c, p + 1);
            if (!r) { c->err = p; return NULL; }
            if (leaves) j_set_all(c, leaves, p + 1, r, 0);
            p = r + 1;
        } else if (p < e && (is_digit(*p) || *p == '-')) {   /* a number: likewise */
            const unsigned char *r = j_number(p, e);
            if (!r) { c->err = p; return NULL; }
            if (leaves) j_set_all(c, leaves, p, r, 0);
            p = r;
        } else if (!(p = j_value(c, p, leaves, deeper ? hit : -1, depth + 1))) {
            return NULL;
        }
        if (p < e && *p <= ' ') p = j_ws(p, e);
        if (p < e && *p == ',') {
            p++;
            if (p < e && *p <= ' ') p = j_ws(p, e);
            continue;
        }
        if (p < e && *p == '}') return p + 1;
        c->err = p; return NULL;
    }
}

/* A derived field (see the top of this file) into f[k]. 0, or -1 when the scratch has no room. */
static int json_derive(json_state *js, int k, span *f, const unsigned char *line) {
    span a = f[js->src[k][0]];
    const unsigned char *s;
    f[k].s = f[k].e = line;
    switch (js->how[k]) {
    case 'r': {
        span u = f[js->src[k][1]], v = f[js->src[k][2]];
        if (js->src[k][2] == js->src[k][0]) v.s = v.e = line;   /* no protocol field (see jsonformats) */
        if (a.e == a.s || u.e == u.s) return 0;
        size_t n = (size_t)(a.e - a.s) + 1 + (size_t)(u.e - u.s) + (v.e > v.s ? 1 + (size_t)(v.e - v.s) : 0);
        unsigned char *o = json_take(js, n);
        if (!o) return -1;
        memcpy(o, a.s, a.e - a.s); o += a.e - a.s; *o++ = ' ';
        memcpy(o, u.s, u.e - u.s); o += u.e - u.s;
        if (v.e > v.s) { *o++ = ' '; memcpy(o, v.s, v.e - v.s); }
        f[k].s = js->buf + js->used; f[k].e = f[k].s + n;
        js->used += n;
        return 0;
    }
    case 'p': case 'q':
        s = a.e > a.s ? memchr(a.s, '?', a.e - a.s) : NULL;
        if (js->how[k] == 'p') { f[k].s = a.s; f[k].e = s ? s : a.e; }
        else if (s) { f[k].s = s + 1; f[k].e = a.e; }
        return 0;
    default: {   /* m u v: the request line's words at its first and last space */
        const unsigned char *sp1 = a.e > a.s ? memchr(a.s, ' ', a.e - a.s) : NULL, *sp2;
        if (!sp1) return 0;
        for (sp2 = a.e - 1; *sp2 != ' '; sp2--) {}
        if (js->how[k] == 'm') { f[k].s = a.s; f[k].e = sp1; }
        else if (js->how[k] == 'u') { f[k].s = sp1 + 1; f[k].e = sp2 > sp1 ? sp2 : a.e; }
        else if (sp2 > sp1) { f[k].s = sp2 + 1; f[k].e = a.e; }
        return 0;
    }
    }
}

/* One line (valid UTF-8, its CR cut) read by the JSON program js into f: LINE_OK, LINE_NOMATCH or LINE_TABCR.
 * *err (when not NULL) receives the byte offset where a line stops being JSON. */
static int json_line(json_state *js, const unsigned char *p, const unsigned char *e, span *f, ptrdiff_t *err) {
    int high;
    size_t nw = j_quotes(js, p, e, &high);
    if (high && !valid_utf8(p, e)) return LINE_UTF8;
    if (!js->keep) js->used = 0;
    /* room for every value decoded from the line and a request line made from three of them */
    if (!json_room(js, 2 * (size_t)(e - p) + 16)) { if (err) *err = 0; return LINE_NOMATCH; }
    jctx c = {e, p, js, f, 0, NULL, nw ? js->qbits : NULL, nw};
    for (int k = 0; k < js->n_fields; k++) f[k].s = f[k].e = p;
    const unsigned char *q = j_ws(p, e);
    if (q >= e || *q != '{') { if (err) *err = q - p; return LINE_NOMATCH; }
    q = j_object(&c, q, js->n_nodes ? 0 : -1, 0);
    if (q) q = j_ws(q, e);
    if (!q || q != e) { if (err) *err = (q ? q : c.err) - p; return LINE_NOMATCH; }
    for (int k = 0; k < js->n_fields; k++)
        if (js->how[k] && json_derive(js, k, f, p) < 0) { if (err) *err = 0; return LINE_NOMATCH; }
    for (uint64_t m = c.decoded; m; m &= m - 1) {
        int k = __builtin_ctzll(m);
        const unsigned char *s = f[k].s;
        ptrdiff_t n = f[k].e - s;
        if (memchr(s, '\t', n) || memchr(s, '\r', n) || memchr(s, '\n', n)) return LINE_TABCR;
    }
    return LINE_OK;
}

#endif
