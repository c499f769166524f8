/* The line contract's parse, shared by the Python module (_scan.c) and the JVM's (_jni.c): the character
 * classes, strict UTF-8, the original expression's scanner (parse_line) and the token program's
 * (parse_program_line). No Python here: the JVM library is built from this header without Python's.
 * See _scan.c for what the expression and the token kinds mean. */
#ifndef LOGETL_KERNEL_H
#define LOGETL_KERNEL_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#define LOGETL_SSE2 1
#endif

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

enum { LINE_OK = 0, LINE_UTF8 = 1, LINE_NOMATCH = 2, LINE_TABCR = 3 };
/* a line's status beyond the reasons: kept, dropped (a size of "-"), a header line of the format (counted
 * apart: a directive such as CloudFront's or W3C's "#Fields:", neither a record nor malformed) */
enum { ST_KEPT = 0, ST_DASH = 4, ST_HEADER = 5, ST_OTHER = 6 };
/* ST_OTHER: a line of the format that is not a request (HAProxy's TCP-mode lines and notices): a line the
 * program does not match but one of its alternatives (T_ELSE) does, counted apart as ST_HEADER is. */

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

/* The first `c` in [p, e), or NULL: most fields are short, so the first bytes are looked at inline (16 at a
 * time with SSE2) before memchr is called (whose setup costs more than a short field's bytes). */
static inline const unsigned char *find_byte(const unsigned char *p, const unsigned char *e, unsigned char c) {
#ifdef LOGETL_SSE2
    const __m128i n = _mm_set1_epi8((char)c);
    for (int k = 0; k < 4 && e - p >= 16; k++, p += 16) {
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)p), n));
        if (m) return p + __builtin_ctz(m);
    }
    if (e - p >= 16) return memchr(p, c, e - p);
    for (; p < e; p++)
        if (*p == c) return p;
    return NULL;
#else
    const unsigned char *s = e - p > 16 ? p + 16 : e;
    for (; p < s; p++)
        if (*p == c) return p;
    return p < e ? memchr(p, c, e - p) : NULL;
#endif
}

/* What a line holds that decides its reason before and after the match: bit 0 a byte above 0x7F (then
 * valid_utf8 decides), bit 1 a TAB, bit 2 a CR. One pass instead of three (the ASCII check, a memchr for
 * each of TAB and CR). */
enum { LF_HIGH = 1, LF_TAB = 2, LF_CR = 4 };
static inline int line_flags(const unsigned char *p, const unsigned char *e) {
    int fl = 0;
#ifdef LOGETL_SSE2
    __m128i hi = _mm_setzero_si128(), tab = hi, cr = hi;
    const __m128i t = _mm_set1_epi8('\t'), r = _mm_set1_epi8('\r');
    for (; e - p >= 16; p += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        hi = _mm_or_si128(hi, v);
        tab = _mm_or_si128(tab, _mm_cmpeq_epi8(v, t));
        cr = _mm_or_si128(cr, _mm_cmpeq_epi8(v, r));
    }
    if (_mm_movemask_epi8(hi)) fl |= LF_HIGH;
    if (_mm_movemask_epi8(tab)) fl |= LF_TAB;
    if (_mm_movemask_epi8(cr)) fl |= LF_CR;
#endif
    for (; p < e; p++) {
        if (*p >= 0x80) fl |= LF_HIGH;
        else if (*p == '\t') fl |= LF_TAB;
        else if (*p == '\r') fl |= LF_CR;
    }
    return fl;
}

/* The first occurrence of n > 0 bytes l in [p, e), or NULL (memmem is not in every libc's default set). */
static inline const unsigned char *find_lit(const unsigned char *p, const unsigned char *e,
                                            const unsigned char *l, ptrdiff_t n) {
    while (e - p >= n) {
        const unsigned char *r = find_byte(p, e - n + 1, l[0]);
        if (!r) return NULL;
        if (memcmp(r + 1, l + 1, (size_t)(n - 1)) == 0) return r;
        p = r + 1;
    }
    return NULL;
}

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

/* The end of a field quoted as Apache writes it, starting at q: the first '"' not escaped by a backslash (an
 * even run of backslashes before it), or NULL. */
static inline const unsigned char *quoted_end(const unsigned char *q, const unsigned char *e) {
    const unsigned char *r = q;
    for (;;) {
        r = find_byte(r, e, '"');
        if (!r) return NULL;
        const unsigned char *b = r;
        while (b > q && b[-1] == '\\') b--;
        if (((r - b) & 1) == 0) return r;
        r++;
    }
}

/* The combined layout's tail after the original expression's size (q: the size's end): ' "referer" "user
 * agent"', each quoted as Apache writes it, then the line's end or a space (what follows is ignored, as the
 * expression's '.*' does), neither field holding a TAB or CR. Fills t[0], t[1] and returns 1; else both
 * spans are NULL (the fields are null) and it returns 0. The line stays a record either way. */
static int parse_tail(const unsigned char *q, const unsigned char *e, span t[2]) {
    const unsigned char *r1, *r2;
    t[0].s = t[0].e = t[1].s = t[1].e = NULL;
    if (e - q < 6 || q[0] != ' ' || q[1] != '"') return 0;
    if (!(r1 = quoted_end(q + 2, e)) || e - r1 < 4 || r1[1] != ' ' || r1[2] != '"') return 0;
    if (!(r2 = quoted_end(r1 + 3, e)) || (e - r2 > 1 && r2[1] != ' ')) return 0;
    if (memchr(q, '\t', r2 - q) || memchr(q, '\r', r2 - q)) return 0;
    t[0].s = q + 2; t[0].e = r1; t[1].s = r1 + 3; t[1].e = r2;
    return 1;
}

/* The original expression's fields (0-4) and the tail's (5 referer, 6 user agent). */
#define LEGACY_FIELDS 7

#define MAX_FIELDS 64
/* Token kinds (logetl.formats defines what each accepts): T_UNTIL with a literal ends at that literal's first
 * occurrence (else at the first `stop`); T_NTH holds exactly lit_len `stop`s and ends at the next one (a literal
 * starting with a NUL byte: it may start with `stop`s, then holds lit_len - 1 runs of them, a time with
 * space-padded conversions); T_OPT
 * is no field: the line may end there (every later field is then empty); T_MAYBE is an optional field
 * between lit[0] and `stop`, followed by lit[1..] (else empty, nothing consumed); T_QOR a field quoted as
 * Apache writes it ('"', escaped text, '"') or bare up to `stop` or the line's end; T_PREFIX an optional
 * field ending with lit, present when lit occurs before the first ' ' followed by `stop`; T_SKIP (first
 * token only) makes a line that starts with lit a header: counted apart (ST_HEADER), not malformed; T_JOIN
 * is a field that takes no text of its own: the span from the start of field lit[0] to the end of field lit[1]
 * (two earlier fields, lit[0] <= lit[1]: W3C's "date time" as one field, beside each); T_EMPTY a field that is always
 * empty (a column the line's header lacks); T_DASH_EMPTY is no token but a mark of the program: a field
 * whose whole value is "-" is empty (W3C's empty value), after the size's "-" is looked at; T_DECODE is
 * likewise a mark: the fields whose indexes are the bytes of lit are percent-decoded where they are written
 * (pct_decode; CloudFront's URL-encoded values), and a line whose decoded fields are not UTF-8 is malformed
 * (LINE_UTF8, as a line that is not UTF-8 is); T_SHAPE is a mark too: lit holds pairs (field index, shape),
 * shape 'n' a number (an optional '+' or '-', then one digit or more) or 'w' a word (no space), and a line
 * whose field is not of its shape does not match (LINE_NOMATCH: HAProxy's custom log formats); at the end of
 * a T_ELSE alternative, the same for the alternative's fields. */
enum { T_LIT = 0, T_UNTIL = 1, T_ESCAPED = 2, T_REST = 3, T_SPLIT = 4, T_NTH = 5, T_OPT = 6, T_MAYBE = 7,
       T_QOR = 8, T_PREFIX = 9, T_SKIP = 10,
       /* (11-13 are the JSON program's, _json.h) */
       T_JOIN = 14, T_EMPTY = 15, T_DASH_EMPTY = 16, T_ELSE = 17, T_DECODE = 18, T_SHAPE = 19 };
/* T_ELSE ends the record's program and starts an alternative: the tokens after it, up to the next T_ELSE,
 * are a layout of the format's lines that are not records (ST_OTHER), matched only on a line the record's
 * program does not match; their fields are never written. */
/* fuse (set by program_close): how many first bytes of the literal token after a field are known to be
 * there where the field ends (the byte it ends at, or its `until` literal), so the two are one step. */
/* how (likewise): a field whose end is found by the step loop of parse_program_line itself (S_STOP: a field
 * to its first `stop`; S_REST: to its first `stop` or the line's end; S_QUOTED: to its closing '"'; S_QOR:
 * quoted or bare), S_NONE for the other tokens (match_token). Such a step takes with it what follows the
 * field up to the next one: [T_OPT] [literal a] [T_OPT] [literal b] (opt_a, a, opt_b, b: a T_OPT where the
 * line may end, literals of one byte or more), `span` tokens in all; a_fuse bytes of a are where the field
 * ends. So most fields of a layout cost one step without a branch on the kind of each token. */
/* The tokens that are no field of a line's text of their own kind are steps too (W3C's and HAProxy's): S_PREFIX
 * (T_PREFIX: an optional syslog prefix, decided from the masks of its literal's bytes in the first 64 bytes),
 * S_SPLIT (T_SPLIT: the port's end by the stop masks, then back to the separator), S_MAYBE (T_MAYBE: optional
 * fields in braces), S_JOIN and S_EMPTY (T_JOIN, T_EMPTY: no text of their own). fast: the field ends at its
 * stop byte and the literal after it is that one byte, nothing else in the step (most fields of a layout):
 * the step is the field's end and one byte more. */
enum { S_NONE = 0, S_STOP = 1, S_REST = 2, S_QUOTED = 3, S_QOR = 4, S_PREFIX = 5, S_SPLIT = 6, S_MAYBE = 7,
       S_JOIN = 8, S_EMPTY = 9 };
typedef struct {
    int kind; const unsigned char *lit; ptrdiff_t lit_len; unsigned char stop; ptrdiff_t fuse;
    int how, span; unsigned char opt_a, opt_b, fast;
    const unsigned char *a, *b; ptrdiff_t a_len, a_fuse, b_len;
} token;
typedef struct {
    token *tokens; int n_tokens;
    int n_fields;                  /* fields of the program */
    int out[MAX_FIELDS]; int n_out;
    int size_index;
    int clean_literals;            /* no literal holds TAB or CR: a field holds one iff the line does */
    int cr_free_literals;          /* no literal holds CR: a field holds one iff the line does */
    unsigned char tab_free[MAX_FIELDS];   /* the field ends at its first TAB, so holds none */
    int may_be_absent;             /* a field may take no text of the line (T_OPT, T_MAYBE, T_PREFIX): a
                                    * record's TSV may then be longer than its line, by up to one TAB a field */
    struct json_state *json;       /* a JSON program's (_json.h), the caller's; NULL for a token program */
    int n_join;                    /* T_JOIN fields: each repeats text of the line (a TSV's room grows) */
    int n_main;                    /* the record's tokens (before the first T_ELSE; set by program_close) */
    int n_alt, alt_fields;         /* T_ELSE alternatives, and the fields of the one being added */
    int dash_empty;                /* T_DASH_EMPTY: a field of exactly "-" is empty */
    unsigned char decode[MAX_FIELDS]; int any_decode;   /* T_DECODE: the fields percent-decoded */
    const unsigned char *shapes; ptrdiff_t shapes_len;  /* T_SHAPE's pairs (field, shape) of the record */
} program;

#include "_json.h"

/* Adds a token to pg (room for it is the caller's): counts the program's fields and notes a literal that
 * holds a TAB or CR. 0, or -1 for a kind there is none of. */
static inline int program_add(program *pg, int kind, const unsigned char *lit, ptrdiff_t lit_len, unsigned char stop) {
    if (kind >= T_JSON && kind <= T_JDERIVE) {   /* a JSON program: its own tokens, no others */
        if (!pg->json || (kind == T_JSON) != (pg->n_tokens == 0) || json_add(pg->json, kind, lit, lit_len, stop) < 0)
            return -1;
        pg->n_tokens++;
        if (kind != T_JSON) pg->n_fields++;
        return 0;
    }
    if (pg->json) return -1;
    if (kind == T_ELSE) {
        if (pg->n_tokens == 0) return -1;
        if (!pg->n_alt++) pg->n_main = pg->n_tokens;
        pg->tokens[pg->n_tokens++] = (token){kind, lit, lit_len, stop};
        pg->alt_fields = 0;
        return 0;
    }
    if (kind == T_SHAPE) {   /* after the fields it names: the record's, or (a token) its alternative's */
        int n_fields = pg->n_alt ? pg->alt_fields : pg->n_fields;
        if (lit_len % 2) return -1;
        for (ptrdiff_t i = 0; i < lit_len; i += 2)
            if (lit[i] >= n_fields || (lit[i + 1] != 'n' && lit[i + 1] != 'w')) return -1;
        if (pg->n_alt) pg->tokens[pg->n_tokens++] = (token){kind, lit, lit_len, stop};
        else { pg->shapes = lit; pg->shapes_len = lit_len; }
        return 0;
    }
    if (pg->n_alt) {   /* an alternative's token: matched, its fields never written */
        if (kind < T_LIT || kind > T_PREFIX || ((kind == T_MAYBE || kind == T_PREFIX) && lit_len < 1)) return -1;
        if (kind != T_LIT && kind != T_OPT && ++pg->alt_fields > MAX_FIELDS) return -1;
        pg->tokens[pg->n_tokens++] = (token){kind, lit, lit_len, stop};
        return 0;
    }
    if (kind == T_DECODE) {   /* after the fields it names (none joined: the JVM decodes in place) */
        if (pg->n_join) return -1;
        for (ptrdiff_t i = 0; i < lit_len; i++) {
            if (lit[i] >= pg->n_fields || lit[i] >= MAX_FIELDS) return -1;
            pg->decode[lit[i]] = 1; pg->any_decode = 1;
        }
        return 0;
    }
    if (kind < T_LIT || (kind > T_SKIP && kind < T_JOIN) || kind > T_DASH_EMPTY) return -1;
    if (kind == T_DASH_EMPTY) { pg->dash_empty = 1; return 0; }
    if (kind == T_JOIN && (lit_len != 2 || lit[0] > lit[1] || lit[1] >= pg->n_fields)) return -1;
    if (kind == T_JOIN) pg->n_join++;
    if ((kind == T_MAYBE || kind == T_PREFIX) && lit_len < 1) return -1;
    if (kind == T_SKIP && (pg->n_tokens != 0 || lit_len < 1)) return -1;
    pg->tokens[pg->n_tokens++] = (token){kind, lit, lit_len, stop};
    if (kind != T_LIT && kind != T_OPT && kind != T_SKIP) pg->n_fields++;
    if (kind == T_OPT || kind == T_MAYBE || kind == T_PREFIX || kind == T_EMPTY || kind == T_JOIN) pg->may_be_absent = 1;
    if (kind == T_LIT && memchr(lit, '\r', lit_len)) pg->cr_free_literals = 0;
    if (kind != T_LIT && kind != T_OPT && kind != T_SKIP && pg->n_fields <= MAX_FIELDS)
        pg->tab_free[pg->n_fields - 1] = stop == '\t' && ((kind == T_UNTIL && lit_len == 0) || kind == T_REST);
    else if (memchr(lit, '\t', lit_len) || memchr(lit, '\r', lit_len)) pg->clean_literals = 0;
    return 0;
}

/* Sets token i's step (token.how): its field's kind, then the T_OPT and literal tokens after it. */
static inline void program_step(program *pg, int i) {
    token *t = &pg->tokens[i], *n = pg->tokens + pg->n_tokens, *l = t + 1;
    static const unsigned char how[] = {[T_REST] = S_REST, [T_ESCAPED] = S_QUOTED, [T_QOR] = S_QOR,
        [T_PREFIX] = S_PREFIX, [T_SPLIT] = S_SPLIT, [T_MAYBE] = S_MAYBE, [T_JOIN] = S_JOIN, [T_EMPTY] = S_EMPTY};
    t->how = S_NONE; t->span = 1; t->opt_a = t->opt_b = t->fast = 0; t->a = t->b = NULL;
    t->a_len = t->a_fuse = t->b_len = 0;
    if (t->kind == T_UNTIL && t->lit_len == 0) t->how = S_STOP;
    else if (t->kind >= 0 && t->kind <= T_EMPTY && how[t->kind]) t->how = how[t->kind];
    if (t->how == S_NONE) return;
    if (l < n && l->kind == T_OPT) t->opt_a = 1, l++;
    if (l < n && l->kind == T_LIT && l->lit_len >= 1) {
        t->a = l->lit; t->a_len = l->lit_len; l++;
        /* the byte the field ends at, when it is not the line's end, is a's first */
        if ((t->how == S_STOP || t->how == S_REST || t->how == S_SPLIT) && t->stop && t->a[0] == t->stop)
            t->a_fuse = 1;
        if (t->how == S_QUOTED && t->a[0] == '"') t->a_fuse = 1;
        if (l < n && l->kind == T_OPT) t->opt_b = 1, l++;
        if (t->opt_b && l < n && l->kind == T_LIT && l->lit_len >= 1) t->b = l->lit, t->b_len = l->lit_len, l++;
    }
    t->span = (int)(l - t);
    t->fast = (t->how == S_STOP || t->how == S_QOR || t->how == S_SPLIT) && !t->opt_a && !t->opt_b
              && t->a_len == 1 && t->a[0] == t->stop;
}

/* Once every token is added: 0 when the program's fields and size_index fit, else -1. Fuses each field
 * with the literal after it where the field's end already is that literal's start. */
static inline int program_close(program *pg, int size_index) {
    if (pg->n_fields > MAX_FIELDS || size_index >= pg->n_fields) return -1;
    pg->size_index = size_index;
    if (!pg->n_alt) pg->n_main = pg->n_tokens;
    for (int i = 0; i + 1 < pg->n_tokens; i++) {
        token *t = &pg->tokens[i], *l = &pg->tokens[i + 1];
        t->fuse = 0;
        if (l->kind != T_LIT || l->lit_len < 1) continue;
        if (t->kind == T_UNTIL && t->lit_len > 0) {          /* ends where `lit` starts */
            if (l->lit_len >= t->lit_len && memcmp(l->lit, t->lit, t->lit_len) == 0) t->fuse = t->lit_len;
        } else if ((t->kind == T_UNTIL || t->kind == T_NTH || t->kind == T_SPLIT) && l->lit[0] == t->stop) {
            t->fuse = 1;                                     /* ends at a `stop` byte */
        } else if (t->kind == T_ESCAPED && l->lit[0] == '"') {
            t->fuse = 1;                                     /* ends at a '"' */
        }
    }
    for (int i = 0; i < pg->n_tokens; i++) program_step(pg, i);
    return 0;
}

/* Whether the n bytes at a are those at b (a literal is most often one to three characters: inline). */
static inline int lit_eq(const unsigned char *a, const unsigned char *b, ptrdiff_t n) {
    switch (n) {
    case 0: return 1;
    case 1: return a[0] == b[0];
    case 2: return a[0] == b[0] && a[1] == b[1];
    case 3: return a[0] == b[0] && a[1] == b[1] && a[2] == b[2];
    default: return memcmp(a, b, n) == 0;
    }
}

/* The bytes equal to c among the 64 from p (fewer at the line's end e), as bits from the lowest. lo: the
 * line's start. A last piece shorter than 16 bytes is compared as the 16 bytes ending at the line's end (the
 * bytes before it shifted out), not byte by byte: no byte past e is read. */
static inline uint64_t stop_mask(const unsigned char *lo, const unsigned char *p, const unsigned char *e,
                                 unsigned char c) {
    ptrdiff_t n = e - p < 64 ? e - p : 64, i = 0;
    uint64_t m = 0;
#ifdef LOGETL_SSE2
    const __m128i v = _mm_set1_epi8((char)c);
    for (; i + 16 <= n; i += 16)
        m |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(p + i)), v)) << i;
    if (i < n && (p - lo) + n >= 16) {
        unsigned t = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(p + n - 16)), v));
        return m | (uint64_t)(t >> (16 - (n - i))) << i;
    }
#endif
    for (; i < n; i++) m |= (uint64_t)(p[i] == c) << i;
    return m;
}

/* The `stop` bytes of a line 64 at a time: consecutive fields ending at the same byte find their ends by the
 * bits of one mask (no branch on each field's length, no load for each field). The masks of two bytes are
 * kept for the same 64 bytes, so that fields ending at two bytes in turn (HAProxy's timers and counts, each
 * ending at a '/', then a field ending at a space) compute each mask once. lo: the line's start; base: the
 * masks' first byte (NULL: none yet); m[j]: the bits of byte c[j] not yet passed, for the n of them made;
 * last: the one used last (the other is the one replaced). */
typedef struct { const unsigned char *lo, *base; uint64_t m[2]; unsigned char c[2]; int n, last; } stop_scan;

/* The first c in [q, e), or NULL (as find_byte); q never before the last call's q (a port's separator, found
 * back from the byte that ends the port, may be before the masks' first byte: they are then made again). */
static inline const unsigned char *next_stop(stop_scan *s, const unsigned char *q, const unsigned char *e,
                                             unsigned char c) {
    if (!s->base || (size_t)(q - s->base) >= 64) { s->base = q; s->n = 0; }
    int j = s->n > 0 && s->c[0] == c ? 0 : s->n > 1 && s->c[1] == c ? 1 : -1;
    if (j < 0) {
        j = s->n < 2 ? s->n++ : s->last ^ 1;
        s->c[j] = c; s->m[j] = stop_mask(s->lo, s->base, e, c);
    }
    uint64_t m = s->m[j] & (~0ULL << (q - s->base));
    while (!m) {   /* none in these 64 bytes: the next 64, the other byte's mask dropped */
        if (e - s->base <= 64) { s->m[j] = 0; s->last = j; return NULL; }
        s->base += 64; s->n = 1; j = 0; s->c[0] = c;
        m = stop_mask(s->lo, s->base, e, c);
    }
    s->m[j] = m; s->last = j;
    return s->base + __builtin_ctzll(m);
}

/* T_PREFIX decided from the first 64 bytes at q when they can decide it: the literal's occurrences and the
 * limit's (' ' then stop) as masks, AND-ed shifted by their bytes' places. 1: the prefix ends where the
 * literal starts (*a), 0: there is none, -1: the 64 bytes do not say (match_token's search decides). */
static inline int prefix_window(const unsigned char *lo, const unsigned char *q, const unsigned char *e,
                                const token *t, const unsigned char **a) {
    ptrdiff_t n = e - q < 64 ? e - q : 64, l = t->lit_len;
    if (l > 8) return -1;
    uint64_t am = ~0ULL, bm = stop_mask(lo, q, e, ' ') & (stop_mask(lo, q, e, t->stop) >> 1);
    for (ptrdiff_t j = 0; j < l; j++) am &= stop_mask(lo, q, e, t->lit[j]) >> j;
    if (am && (!bm || __builtin_ctzll(am) < __builtin_ctzll(bm))) { *a = q + __builtin_ctzll(am); return 1; }
    if (am || (bm && __builtin_ctzll(bm) + l - 1 <= n) || (!bm && n == e - q)) return 0;
    return -1;
}

/* What match_token gives besides a line's reason: go on with the next token, or the line ends here (T_OPT:
 * the later fields are empty, set). */
enum { M_NEXT = -1, M_END = -2 };

/* One token of the program that is no step of the loop (token.how S_NONE) at *q: the field it makes (at
 * f[*k]), *q past what it takes, *t past it (and the literal fused with it). */
static int match_token(const program *pg, const token **tp, const unsigned char **qp, const unsigned char *e,
                       span *f, int *kp) {
    const token *t = *tp;
    const unsigned char *q = *qp, *r;
    int k = *kp;
    switch (t->kind) {
    case T_LIT:   /* (most literals are one to three characters: compared inline, not by a call) */
        if (e - q < t->lit_len || !lit_eq(q, t->lit, t->lit_len)) return LINE_NOMATCH;
        *qp = q + t->lit_len; *tp = t + 1;
        return M_NEXT;
    case T_UNTIL:
        r = t->lit_len ? find_lit(q, e, t->lit, t->lit_len) : find_byte(q, e, t->stop);
        if (!r) return LINE_NOMATCH;
        break;
    case T_NTH:
        r = q;
        if (t->lit_len && !t->lit[0]) {   /* a NUL first: leading `stop`s, then lit_len - 1 runs of them */
            while (r < e && *r == t->stop) r++;
            for (ptrdiff_t j = 1; j < t->lit_len; j++) {
                if (!(r = find_byte(r, e, t->stop))) return LINE_NOMATCH;
                while (r < e && *r == t->stop) r++;
            }
            if (!(r = find_byte(r, e, t->stop))) return LINE_NOMATCH;
            break;
        }
        for (ptrdiff_t j = 0; j <= t->lit_len; j++) {
            if (j && (r = r + 1) > e) return LINE_NOMATCH;
            if (!(r = find_byte(r, e, t->stop))) return LINE_NOMATCH;
        }
        break;
    case T_OPT:   /* the line may end here: the later fields are then empty */
        *tp = t + 1;
        return q == e ? M_END : M_NEXT;
    case T_SKIP:
        if (e - q >= t->lit_len && memcmp(q, t->lit, t->lit_len) == 0) return ST_HEADER;
        *tp = t + 1;
        return M_NEXT;
    default:   /* the step kinds have their own code in match_program */
        return LINE_NOMATCH;
    }
    f[k].s = q; f[k].e = r; *kp = k + 1; q = r;
    if (t->fuse) {   /* the literal after the field: its first fuse bytes are at r already */
        const token *l = t + 1;
        if (e - r < l->lit_len || !lit_eq(r + t->fuse, l->lit + t->fuse, l->lit_len - t->fuse))
            return LINE_NOMATCH;
        q = r + l->lit_len;
        t = l;
    }
    *qp = q; *tp = t + 1;
    return M_NEXT;
}

/* S_PREFIX: the field before the literal when the line starts with one (T_PREFIX), else empty; where the
 * line goes on. */
static inline const unsigned char *step_prefix(const unsigned char *p, const unsigned char *q, const unsigned char *e,
                                               const token *t, span *fk) {
    const unsigned char *a = NULL;
    int w = prefix_window(p, q, e, t, &a);
    if (w < 0) {   /* not within 64 bytes: the limit (' ' then stop) first, the literal only before it */
        const unsigned char lim[2] = {' ', t->stop};
        const unsigned char *b = find_lit(q, e, lim, 2);
        a = find_lit(q, b ? (e - b > t->lit_len ? b + t->lit_len : e) : e, t->lit, t->lit_len);
        w = a && (!b || a < b);
    }
    if (w) { fk->s = q; fk->e = a; return a + t->lit_len; }
    fk->s = fk->e = q;
    return q;
}

/* S_SPLIT: the separator's last occurrence before the port's end (lit[0], by the stop masks; no literal:
 * the line's end), or NULL (see parse_format). */
static inline const unsigned char *step_split(stop_scan *ss, const unsigned char *q, const unsigned char *e,
                                              const token *t) {
    const unsigned char *r = e;
    if (t->lit_len && !(r = next_stop(ss, q, e, t->lit[0]))) return NULL;
    while (r > q && r[-1] != t->stop) r--;
    return r == q ? NULL : r - 1;
}

/* S_MAYBE: the field between lit[0] and stop, followed by lit[1..], else empty and nothing taken; where the
 * line goes on. */
static inline const unsigned char *step_maybe(const unsigned char *q, const unsigned char *e, const token *t,
                                              span *fk) {
    const unsigned char *r;
    fk->s = fk->e = q;
    if (q < e && *q == t->lit[0] && (r = find_byte(q + 1, e, t->stop))
        && e - (r + 1) >= t->lit_len - 1 && lit_eq(r + 1, t->lit + 1, t->lit_len - 1)) {
        fk->s = q + 1; fk->e = r; q = r + 1 + (t->lit_len - 1);
    }
    return q;
}

/* The program's tokens over [p, e): fills f[0..*kp) and returns LINE_OK, or the reason (ST_HEADER). A step
 * (token.how) finds its field's end, then checks what follows it up to the next field. */
static int match_program(const program *pg, const unsigned char *p, const unsigned char *e, span *f, int *kp) {
    const unsigned char *q = p, *r;
    int k = 0;
    stop_scan ss = {p, NULL, {0, 0}, {0, 0}, 0, 0};
    for (const token *t = pg->tokens, *end = pg->tokens + pg->n_main; t < end;) {
        switch (t->how) {
        case S_STOP:
            if (!(r = next_stop(&ss, q, e, t->stop))) return LINE_NOMATCH;
            f[k].s = q; f[k].e = r; q = r;
            if (t->fast) goto fast;
            break;
        case S_REST:   /* to the end of the line, or a one-word field to its first `stop` (then q != e) */
            if (!t->stop || !(r = next_stop(&ss, q, e, t->stop))) r = e;
            f[k].s = q; f[k].e = r; q = r;
            break;
        case S_QUOTED:
            if (!(r = quoted_end(q, e))) return LINE_NOMATCH;
            f[k].s = q; f[k].e = r; q = r;
            break;
        case S_QOR:
            if (q < e && *q == '"') {
                if (!(r = quoted_end(q + 1, e))) return LINE_NOMATCH;
                f[k].s = q + 1; f[k].e = r; q = r + 1;
            } else {
                if (!(r = next_stop(&ss, q, e, t->stop))) r = e;
                f[k].s = q; f[k].e = r; q = r;
                if (t->fast && r < e) goto fast;
            }
            break;
        case S_PREFIX:
            q = step_prefix(p, q, e, t, &f[k]);
            break;
        case S_SPLIT:
            if (!(r = step_split(&ss, q, e, t))) return LINE_NOMATCH;
            f[k].s = q; f[k].e = r; q = r;
            if (t->fast) goto fast;
            break;
        case S_MAYBE:
            q = step_maybe(q, e, t, &f[k]);
            break;
        case S_JOIN:   /* no text of its own: two earlier fields and what stands between them */
            f[k].s = f[t->lit[0]].s; f[k].e = f[t->lit[1]].e;
            break;
        case S_EMPTY:
            f[k].s = f[k].e = q;
            break;
        default: {
            int m = match_token(pg, &t, &q, e, f, &k);
            if (m == M_END) goto line_end;
            if (m != M_NEXT) return m;
            continue;
        }
        }
        k++;
        if (t->opt_a && q == e) goto line_end;
        if (t->a_len) {
            if (e - q < t->a_len || !lit_eq(q + t->a_fuse, t->a + t->a_fuse, t->a_len - t->a_fuse)) return LINE_NOMATCH;
            q += t->a_len;
        }
        if (t->opt_b && q == e) goto line_end;
        if (t->b_len) {
            if (e - q < t->b_len || !lit_eq(q, t->b, t->b_len)) return LINE_NOMATCH;
            q += t->b_len;
        }
        t += t->span;
        continue;
    fast:   /* the field ended at its stop byte, the one-byte literal after it */
        k++; q++; t += t->span;
    }
    *kp = k;
    return q == e ? LINE_OK : LINE_NOMATCH;
line_end:   /* the line ends where it may (T_OPT): the later fields are empty */
    for (; k < pg->n_fields; k++) f[k].s = f[k].e = e;
    *kp = k;
    return LINE_OK;
}

/* Whether one of the k fields of a matched line holds a TAB or CR (fl: the line's flags). */
static inline int fields_tab_cr(const program *pg, int fl, const span *f, int k) {
    if (pg->clean_literals)   /* fields and literals tile the line: the line holds a TAB or CR iff a field does */
        return (fl & (LF_TAB | LF_CR)) != 0;
    /* literals hold a TAB (a tab-separated layout): a CR is looked for once in the line when no literal
     * holds one, a TAB in each field that does not end at its first TAB */
    if (pg->cr_free_literals && (fl & LF_CR)) return 1;
    for (int i = 0; i < k; i++) {
        ptrdiff_t len = f[i].e - f[i].s;
        if ((!pg->tab_free[i] && memchr(f[i].s, '\t', len)) || (!pg->cr_free_literals && memchr(f[i].s, '\r', len)))
            return 1;
    }
    return 0;
}

/* The token program on one line: fills f[0..n_fields) and returns LINE_OK or the reason. */
static int parse_program_line(const program *pg, const unsigned char *p, const unsigned char *e, span *f) {
    int fl = line_flags(p, e), k = 0;
    if ((fl & LF_HIGH) && !valid_utf8(p, e)) return LINE_UTF8;
    int reason = match_program(pg, p, e, f, &k);
    if (reason != LINE_OK) return reason;
    return fields_tab_cr(pg, fl, f, k) ? LINE_TABCR : LINE_OK;
}

/* Whether the fields f have the shapes of T_SHAPE's n bytes of pairs sh (field index, 'n' or 'w'). */
static int shapes_ok(const unsigned char *sh, ptrdiff_t n, const span *f) {
    for (ptrdiff_t i = 0; i < n; i += 2) {
        const unsigned char *q = f[sh[i]].s, *e = f[sh[i]].e;
        if (sh[i + 1] == 'w') {
            if (memchr(q, ' ', (size_t)(e - q))) return 0;
            continue;
        }
        if (q < e && (*q == '+' || *q == '-')) q++;
        if (q == e) return 0;
        for (; q < e; q++)
            if ((unsigned char)(*q - '0') > 9) return 0;
    }
    return 1;
}

/* Whether one of pg's alternatives (T_ELSE) matches the line that its record's program does not: each is
 * run as a program of its own (its fields in f, never written; a TAB or CR in them does not matter). */
static int other_line(const program *pg, const unsigned char *p, const unsigned char *e, span *f) {
    const token *end = pg->tokens + pg->n_tokens;
    for (const token *a = pg->tokens + pg->n_main; a < end;) {
        const token *b = a + 1;
        int n_fields = 0;
        for (; b < end && b->kind != T_ELSE; b++)
            if (b->kind != T_LIT && b->kind != T_OPT && b->kind != T_SHAPE) n_fields++;
        const token *sh = b[-1].kind == T_SHAPE ? b - 1 : NULL;   /* (the alternative's last token) */
        program alt = *pg;
        alt.tokens = (token *)(a + 1);
        alt.n_tokens = alt.n_main = (int)((sh ? sh : b) - a - 1);
        alt.n_fields = n_fields;
        alt.clean_literals = 1;
        int r = parse_program_line(&alt, p, e, f);
        if ((r == LINE_OK || r == LINE_TABCR) && (!sh || shapes_ok(sh->lit, sh->lit_len, f))) return 1;
        a = b;
    }
    return 0;
}

/* Percent-decoding of a field (T_DECODE), as logetl's url_decode decodes: '%' and two hex digits whose byte
 * is not a control character (20-7E, 80-FF) stand for that byte; any other '%' stays as written ("%4",
 * "%ZZ", and "%09", "%0A", "%0D", "%7F": a field never holds a TAB, CR or LF); '+' is itself. pct_byte:
 * the byte at q, its escape's step in *n (3, else 1). */
static inline int hex_digit(unsigned char c) {
    return c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1;
}
static inline unsigned char pct_byte(const unsigned char *q, const unsigned char *e, int *n) {
    *n = 1;
    if (*q != '%' || e - q < 3) return *q;
    int h = hex_digit(q[1]), l = hex_digit(q[2]);
    if (h < 0 || l < 0) return '%';
    unsigned char b = (unsigned char)(h << 4 | l);
    if (b < 0x20 || b == 0x7F) return '%';
    *n = 3;
    return b;
}

/* [s, e) decoded into d (which may be s: the text only shrinks); the decoded length. */
static ptrdiff_t pct_decode(unsigned char *d, const unsigned char *s, const unsigned char *e) {
    const unsigned char *p = memchr(s, '%', (size_t)(e - s));
    if (!p) { if (d != s) memmove(d, s, (size_t)(e - s)); return e - s; }
    if (d != s) memmove(d, s, (size_t)(p - s));
    unsigned char *o = d + (p - s);
    for (int n; p < e; p += n) *o++ = pct_byte(p, e, &n);
    return o - d;
}

/* Whether [s, e) (UTF-8 text) decoded is UTF-8, strictly as valid_utf8 says, byte by byte as decoded. */
static int pct_decoded_utf8(const unsigned char *s, const unsigned char *e) {
    const unsigned char *p = memchr(s, '%', (size_t)(e - s));
    int need = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    for (int n; p && p < e; p += n) {
        unsigned char c = pct_byte(p, e, &n);
        if (need) {
            if (c < lo || c > hi) return 0;
            lo = 0x80; hi = 0xBF; need--;
        } else if (c >= 0x80) {
            if (c < 0xC2 || c > 0xF4) return 0;
            need = c < 0xE0 ? 1 : c < 0xF0 ? 2 : 3;
            if (c == 0xE0) lo = 0xA0;
            else if (c == 0xED) hi = 0x9F;
            else if (c == 0xF0) lo = 0x90;
            else if (c == 0xF4) hi = 0x8F;
        }
    }
    return need == 0;
}

/* A line's status as the Spark paths give it (one raw line, its '\n' already gone; one trailing '\r'
 * cut here, as the contract says): 0 kept, 1/2/3 malformed (the LINE_ reasons), 4 dropped for a size of
 * "-" (only when the parse drops them: size_index >= 0), 5 a header line, 6 a line that is not a request
 * (ST_OTHER); f holds the fields of a kept (or dropped) line.
 * pg NULL: the original expression, with size_index 4 or -1, and its tail (f[5], f[6]) parsed when tail. */
static inline int line_status(const program *pg, int size_index, int tail, const unsigned char *p,
                              const unsigned char *le, span *f) {
    const unsigned char *ce = (le > p && le[-1] == '\r') ? le - 1 : le;
    int reason = !pg ? parse_line(p, ce, f) : pg->json ? json_line(pg->json, p, ce, f, NULL)
                                                        : parse_program_line(pg, p, ce, f);
    /* (a matched line's shapes before its TAB or CR, as the match itself comes first) */
    if ((reason == LINE_OK || reason == LINE_TABCR) && pg && pg->shapes_len && !shapes_ok(pg->shapes, pg->shapes_len, f))
        reason = LINE_NOMATCH;
    if (reason == LINE_NOMATCH && pg && pg->n_alt && other_line(pg, p, ce, f)) reason = ST_OTHER;
    if (reason == LINE_OK && pg && pg->any_decode)
        for (int k = 0; k < pg->n_fields; k++)
            if (pg->decode[k] && !pct_decoded_utf8(f[k].s, f[k].e)) { reason = LINE_UTF8; break; }
    if (reason == LINE_OK) {
        int si = pg ? pg->size_index : size_index;
        if (si >= 0 && f[si].e - f[si].s == 1 && f[si].s[0] == '-') reason = ST_DASH;
        else if (!pg && tail) parse_tail(f[4].e, ce, f + 5);
        else if (pg && pg->dash_empty)
            for (int k = 0; k < pg->n_fields; k++)
                if (f[k].e - f[k].s == 1 && f[k].s[0] == '-') f[k].e = f[k].s;
    }
    return reason;
}

#endif
