/* The line contract's parse, shared by the Python module (_scan.c) and the JVM's (_jni.c): the character
 * classes, strict UTF-8, the original expression's scanner (parse_line) and the token program's
 * (parse_program_line). No Python here: the JVM library is built from this header without Python's.
 * See _scan.c for what the expression and the token kinds mean. */
#ifndef LOGETL_KERNEL_H
#define LOGETL_KERNEL_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

enum { LINE_OK = 0, LINE_UTF8 = 1, LINE_NOMATCH = 2, LINE_TABCR = 3 };
/* a line's status beyond the reasons: kept, dropped (a size of "-"), a header line of the format (counted
 * apart: a directive such as CloudFront's or W3C's "#Fields:", neither a record nor malformed) */
enum { ST_KEPT = 0, ST_DASH = 4, ST_HEADER = 5 };

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

/* The first `c` in [p, e), or NULL: most fields are short, so the first bytes are looked at inline before
 * memchr is called (whose setup costs more than a short field's bytes). */
static inline const unsigned char *find_byte(const unsigned char *p, const unsigned char *e, unsigned char c) {
    const unsigned char *s = e - p > 16 ? p + 16 : e;
    for (; p < s; p++)
        if (*p == c) return p;
    return p < e ? memchr(p, c, e - p) : NULL;
}

/* The first occurrence of n > 0 bytes l in [p, e), or NULL (memmem is not in every libc's default set). */
static inline const unsigned char *find_lit(const unsigned char *p, const unsigned char *e,
                                            const unsigned char *l, ptrdiff_t n) {
    while (e - p >= n) {
        const unsigned char *r = memchr(p, l[0], (size_t)(e - p - n + 1));
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
        r = memchr(r, '"', e - r);
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
 * occurrence (else at the first `stop`); T_NTH holds exactly lit_len `stop`s and ends at the next one; T_OPT
 * is no field: the line may end there (every later field is then empty); T_MAYBE is an optional field
 * between lit[0] and `stop`, followed by lit[1..] (else empty, nothing consumed); T_QOR a field quoted as
 * Apache writes it ('"', escaped text, '"') or bare up to `stop` or the line's end; T_PREFIX an optional
 * field ending with lit, present when lit occurs before the first ' ' followed by `stop`; T_SKIP (first
 * token only) makes a line that starts with lit a header: counted apart (ST_HEADER), not malformed; T_JOIN
 * is a field that takes no text of its own: the span from the start of field lit[0] to the end of field lit[1]
 * (two earlier fields, lit[0] <= lit[1]: W3C's "date time" as one field, beside each); T_EMPTY a field that is always
 * empty (a column the line's header lacks); T_DASH_EMPTY is no token but a mark of the program: a field
 * whose whole value is "-" is empty (W3C's empty value), after the size's "-" is looked at. */
enum { T_LIT = 0, T_UNTIL = 1, T_ESCAPED = 2, T_REST = 3, T_SPLIT = 4, T_NTH = 5, T_OPT = 6, T_MAYBE = 7,
       T_QOR = 8, T_PREFIX = 9, T_SKIP = 10, T_JOIN = 11, T_EMPTY = 12, T_DASH_EMPTY = 13 };
typedef struct { int kind; const unsigned char *lit; ptrdiff_t lit_len; unsigned char stop; } token;
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
    int n_join;                    /* T_JOIN fields: each repeats text of the line (a TSV's room grows) */
    int dash_empty;                /* T_DASH_EMPTY: a field of exactly "-" is empty */
} program;

/* Adds a token to pg (room for it is the caller's): counts the program's fields and notes a literal that
 * holds a TAB or CR. 0, or -1 for a kind there is none of. */
static inline int program_add(program *pg, int kind, const unsigned char *lit, ptrdiff_t lit_len, unsigned char stop) {
    if (kind < T_LIT || kind > T_DASH_EMPTY) return -1;
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

/* Once every token is added: 0 when the program's fields and size_index fit, else -1. */
static inline int program_close(program *pg, int size_index) {
    if (pg->n_fields > MAX_FIELDS || size_index >= pg->n_fields) return -1;
    pg->size_index = size_index;
    return 0;
}

/* The token program on one line: fills f[0..n_fields) and returns LINE_OK or the reason. */
static int parse_program_line(const program *pg, const unsigned char *p, const unsigned char *e, span *f) {
    if (!valid_utf8(p, e)) return LINE_UTF8;
    const unsigned char *q = p;
    int k = 0;
    for (int i = 0; i < pg->n_tokens; i++) {
        const token *t = &pg->tokens[i];
        switch (t->kind) {
        case T_LIT:   /* (most literals are one character: compared inline, not by a call) */
            if (e - q < t->lit_len || (t->lit_len == 1 ? *q != t->lit[0] : memcmp(q, t->lit, t->lit_len) != 0))
                return LINE_NOMATCH;
            q += t->lit_len;
            break;
        case T_UNTIL: {
            const unsigned char *r = t->lit_len ? find_lit(q, e, t->lit, t->lit_len) : find_byte(q, e, t->stop);
            if (!r) return LINE_NOMATCH;
            f[k].s = q; f[k].e = r; k++; q = r;
            break;
        }
        case T_ESCAPED: {
            const unsigned char *r = quoted_end(q, e);
            if (!r) return LINE_NOMATCH;
            f[k].s = q; f[k].e = r; k++; q = r;
            break;
        }
        case T_SPLIT: {   /* the separator's last occurrence before the port's end (see parse_format) */
            const unsigned char *end = e;
            if (t->lit_len && !(end = memchr(q, t->lit[0], e - q))) return LINE_NOMATCH;
            const unsigned char *r = end;
            while (r > q && r[-1] != t->stop) r--;
            if (r == q) return LINE_NOMATCH;      /* no separator in [q, end) */
            r--;
            f[k].s = q; f[k].e = r; k++; q = r;
            break;
        }
        case T_NTH: {
            const unsigned char *r = q;
            for (ptrdiff_t j = 0; j <= t->lit_len; j++) {
                if (j && (r = r + 1) > e) return LINE_NOMATCH;
                if (!(r = memchr(r, t->stop, e - r))) return LINE_NOMATCH;
            }
            f[k].s = q; f[k].e = r; k++; q = r;
            break;
        }
        case T_OPT:
            if (q == e) {   /* the line ends here: the later fields are empty */
                for (; k < pg->n_fields; k++) f[k].s = f[k].e = e;
                i = pg->n_tokens;
            }
            break;
        case T_MAYBE: {
            const unsigned char *r;
            f[k].s = f[k].e = q;
            if (q < e && *q == t->lit[0] && (r = memchr(q + 1, t->stop, e - q - 1))
                && e - (r + 1) >= t->lit_len - 1 && memcmp(r + 1, t->lit + 1, t->lit_len - 1) == 0) {
                f[k].s = q + 1; f[k].e = r; q = r + 1 + (t->lit_len - 1);
            }
            k++;
            break;
        }
        case T_QOR: {
            if (q < e && *q == '"') {
                const unsigned char *r = quoted_end(q + 1, e);
                if (!r) return LINE_NOMATCH;
                f[k].s = q + 1; f[k].e = r; q = r + 1;
            } else {
                const unsigned char *r = memchr(q, t->stop, e - q);
                if (!r) r = e;
                f[k].s = q; f[k].e = r; q = r;
            }
            k++;
            break;
        }
        case T_PREFIX: {
            const unsigned char lim[2] = {' ', t->stop};
            const unsigned char *a = find_lit(q, e, t->lit, t->lit_len), *b = find_lit(q, e, lim, 2);
            if (a && (!b || a < b)) { f[k].s = q; f[k].e = a; q = a + t->lit_len; }
            else f[k].s = f[k].e = q;
            k++;
            break;
        }
        case T_SKIP:
            if (e - q >= t->lit_len && memcmp(q, t->lit, t->lit_len) == 0) return ST_HEADER;
            break;
        case T_JOIN:
            f[k].s = f[t->lit[0]].s; f[k].e = f[t->lit[1]].e; k++;
            break;
        case T_EMPTY:
            f[k].s = f[k].e = q; k++;
            break;
        default: {  /* T_REST: to the end of the line, or a one-word field to its first `stop` (then q != e) */
            const unsigned char *r = t->stop ? memchr(q, t->stop, e - q) : NULL;
            if (!r) r = e;
            f[k].s = q; f[k].e = r; k++; q = r;
        }
        }
    }
    if (q != e) return LINE_NOMATCH;
    if (pg->clean_literals)   /* fields and literals tile the line: one scan of it instead of one per field */
        return (memchr(p, '\t', e - p) || memchr(p, '\r', e - p)) ? LINE_TABCR : LINE_OK;
    /* literals hold a TAB (a tab-separated layout): a CR is looked for once in the line when no literal
     * holds one, a TAB in each field that does not end at its first TAB */
    if (pg->cr_free_literals && memchr(p, '\r', e - p)) return LINE_TABCR;
    for (int i = 0; i < k; i++) {
        ptrdiff_t len = f[i].e - f[i].s;
        if ((!pg->tab_free[i] && memchr(f[i].s, '\t', len)) || (!pg->cr_free_literals && memchr(f[i].s, '\r', len)))
            return LINE_TABCR;
    }
    return LINE_OK;
}


/* A line's status as the Spark paths give it (one raw line, its '\n' already gone; one trailing '\r'
 * cut here, as the contract says): 0 kept, 1/2/3 malformed (the LINE_ reasons), 4 dropped for a size of
 * "-" (only when the parse drops them: size_index >= 0); f holds the fields of a kept (or dropped) line.
 * pg NULL: the original expression, with size_index 4 or -1, and its tail (f[5], f[6]) parsed when tail. */
static inline int line_status(const program *pg, int size_index, int tail, const unsigned char *p,
                              const unsigned char *le, span *f) {
    const unsigned char *ce = (le > p && le[-1] == '\r') ? le - 1 : le;
    int reason = pg ? parse_program_line(pg, p, ce, f) : parse_line(p, ce, f);
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
