/*
 * toml: strict TOML 1.0 subset parser (see toml.h for the contract).
 *
 * Two passes over the input: check_text() validates UTF-8 and rejects control characters
 * and bare CRs once, so the grammar functions below only deal with structure. The grammar
 * is plain recursive descent with one cursor (struct parser); recursion happens only for
 * nested arrays and inline tables and is bounded by TOML_MAX_DEPTH.
 *
 * Table rules (TOML 1.0 section "Table"): every table records how it was created. A header
 * may pass through any table except an inline one, and may define exactly once a table that
 * so far exists only as the parent of another header (IMPLICIT). A dotted key may only
 * descend into tables that dotted keys of the same section (or inline table) created: each
 * section and inline table gets a fresh context id, stored as the owner of the tables its
 * dotted keys create. That one check closes inline tables and finished sections for good.
 *
 * Strings are decoded into arena memory sized by the raw span: escapes never expand.
 */
#include "proxy/config/toml.h"

#include "core/str.h"
#include "proxy/wire/secret.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NUMBER_MAX 128 /* characters in one number token */

struct keypart {
    const char *s; /* arena, NUL-terminated */
    size_t n;
    struct toml_pos pos;
};

struct parser {
    const char *p;
    const char *end;
    struct toml_pos pos;
    const char *name;
    char *err;
    size_t errlen;
    tg__arena *arena;
    struct toml_table *cur; /* table receiving key/value lines */
    uint32_t context;       /* id of the current section or inline table */
    uint32_t next_context;
    int depth;
    bool nomem;
};

static int parse_value(struct parser *ps, struct toml_value **out);
static int parse_keyval(struct parser *ps, struct toml_table *t);
static int parse_basic_string(struct parser *ps, const char **out, size_t *len);
static int parse_literal_string(struct parser *ps, const char **out, size_t *len);

/* ---- errors ---- */

__attribute__((format(printf, 3, 4))) static int fail_at(struct parser *ps, struct toml_pos at,
                                                         const char *fmt, ...)
{
    if (!ps->err || ps->errlen == 0)
        return -1;
    int n =
        snprintf(ps->err, ps->errlen, "%s:%u:%u: ", ps->name, (unsigned)at.line, (unsigned)at.col);
    if (n < 0 || (size_t)n >= ps->errlen)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ps->err + n, ps->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    secret_redact(ps->err + n); /* a key may be a secret pasted in the wrong place */
    return -1;
}

static int fail_nomem(struct parser *ps)
{
    ps->nomem = true;
    return fail_at(ps, ps->pos, "out of memory, or the tree is larger than %u bytes",
                   (unsigned)TOML_MAX_ARENA);
}

/* What is at the cursor, for messages. Letters and digits are not quoted: a stray bare
 * word may be an unquoted secret. */
static const char *describe(const struct parser *ps, char *buf, size_t cap)
{
    if (ps->p >= ps->end)
        return "end of file";
    unsigned char c = (unsigned char)*ps->p;
    if (c == '\n' || c == '\r')
        return "end of line";
    if (isalpha(c))
        return "letter";
    if (isdigit(c))
        return "digit";
    if (c >= 0x80)
        return "non-ASCII character";
    snprintf(buf, cap, "'%c'", c);
    return buf;
}

/* A key path for messages: parts joined by '.', control bytes shown as '?', bounded. */
static const char *render_key(const struct keypart *parts, size_t n, char *buf, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < cap; i++) {
        if (i > 0)
            buf[o++] = '.';
        for (size_t j = 0; j < parts[i].n && o + 1 < cap; j++) {
            unsigned char c = (unsigned char)parts[i].s[j];
            buf[o++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
        }
    }
    buf[o < cap ? o : cap - 1] = '\0';
    return buf;
}

/* ---- cursor ---- */

static int peek_at(const struct parser *ps, size_t k)
{
    return (size_t)(ps->end - ps->p) > k ? (unsigned char)ps->p[k] : -1;
}

static int peek(const struct parser *ps)
{
    return peek_at(ps, 0);
}

static void advance(struct parser *ps)
{
    unsigned char c = (unsigned char)*ps->p++;
    if (c == '\n') {
        ps->pos.line++;
        ps->pos.col = 1;
    } else if ((c & 0xC0) != 0x80 && c != '\r') {
        ps->pos.col++;
    }
}

static void advance_n(struct parser *ps, size_t n)
{
    while (n-- > 0)
        advance(ps);
}

static bool at_newline(const struct parser *ps)
{
    int c = peek(ps);
    return c == '\n' || (c == '\r' && peek_at(ps, 1) == '\n');
}

static void skip_ws(struct parser *ps)
{
    while (peek(ps) == ' ' || peek(ps) == '\t')
        advance(ps);
}

static void skip_comment(struct parser *ps)
{
    while (ps->p < ps->end && !at_newline(ps))
        advance(ps);
}

static void skip_newline(struct parser *ps)
{
    if (peek(ps) == '\r')
        advance(ps);
    advance(ps);
}

/* Whitespace, comments and newlines: the filler allowed between array elements. */
static void skip_filler(struct parser *ps)
{
    for (;;) {
        skip_ws(ps);
        if (peek(ps) == '#')
            skip_comment(ps);
        else if (at_newline(ps))
            skip_newline(ps);
        else
            return;
    }
}

static int expect_eol(struct parser *ps, const char *after)
{
    char d[8];
    skip_ws(ps);
    if (peek(ps) == '#')
        skip_comment(ps);
    if (ps->p >= ps->end)
        return 0;
    if (at_newline(ps)) {
        skip_newline(ps);
        return 0;
    }
    return fail_at(ps, ps->pos, "unexpected %s after %s, expected a newline or a comment",
                   describe(ps, d, sizeof d), after);
}

/* ---- pass 1: encoding ---- */

/* Length of the valid UTF-8 sequence at s (lead byte >= 0x80), or 0. */
static size_t utf8_seq(const unsigned char *s, const unsigned char *e)
{
    unsigned c = s[0];
    size_t n;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        n = 3;
    else if (c >= 0xF0 && c <= 0xF4)
        n = 4;
    else
        return 0;
    if (c == 0xE0)
        lo = 0xA0; /* overlong */
    else if (c == 0xED)
        hi = 0x9F; /* surrogates */
    else if (c == 0xF0)
        lo = 0x90; /* overlong */
    else if (c == 0xF4)
        hi = 0x8F; /* above U+10FFFF */
    if ((size_t)(e - s) < n || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return n;
}

static int check_text(struct parser *ps)
{
    const unsigned char *s = (const unsigned char *)ps->p;
    const unsigned char *e = (const unsigned char *)ps->end;
    struct toml_pos at = ps->pos;
    while (s < e) {
        unsigned c = *s;
        size_t n = 1;
        if (c == '\n') {
            at.line++;
            at.col = 1;
            s++;
            continue;
        }
        if (c == '\r' && !(s + 1 < e && s[1] == '\n'))
            return fail_at(ps, at, "carriage return without a line feed, expected CRLF or LF");
        if (c >= 0x80) {
            n = utf8_seq(s, e);
            if (n == 0)
                return fail_at(ps, at, "invalid UTF-8, expected UTF-8 text");
        } else if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f) {
            return fail_at(ps, at, "control character U+%04X, expected printable text", c);
        }
        s += n;
        if (c != '\r')
            at.col++;
    }
    return 0;
}

/* ---- tables ---- */

const struct toml_kv *toml_table_find(const struct toml_table *t, const char *key, size_t key_len)
{
    if (!t)
        return NULL;
    for (const struct toml_kv *kv = t->first; kv; kv = kv->next)
        if (kv->key_len == key_len && memcmp(kv->key, key, key_len) == 0)
            return kv;
    return NULL;
}

static struct toml_kv *find_mut(struct toml_table *t, const struct keypart *kp)
{
    return (struct toml_kv *)toml_table_find(t, kp->s, kp->n);
}

static struct toml_kv *table_add(struct parser *ps, struct toml_table *t, const struct keypart *kp,
                                 struct toml_value *v)
{
    if (t->n >= TOML_MAX_KEYS) {
        fail_at(ps, kp->pos, "too many keys in one table, expected at most %d", TOML_MAX_KEYS);
        return NULL;
    }
    struct toml_kv *kv = tg__arena_zalloc(ps->arena, sizeof *kv);
    if (!kv) {
        fail_nomem(ps);
        return NULL;
    }
    kv->key = kp->s;
    kv->key_len = kp->n;
    kv->pos = kp->pos;
    kv->value = v;
    if (t->last)
        t->last->next = kv;
    else
        t->first = kv;
    t->last = kv;
    t->n++;
    return kv;
}

/* Turn v into a fresh empty table owned by the current context. */
static int make_table(struct parser *ps, struct toml_value *v, enum toml_origin origin)
{
    struct toml_table *t = tg__arena_zalloc(ps->arena, sizeof *t);
    if (!t)
        return fail_nomem(ps);
    t->origin = origin;
    t->owner = ps->context;
    v->type = TOML_TABLE;
    v->u.table = t;
    return 0;
}

static struct toml_value *new_table(struct parser *ps, enum toml_origin origin, struct toml_pos pos)
{
    struct toml_value *v = tg__arena_zalloc(ps->arena, sizeof *v);
    if (!v) {
        fail_nomem(ps);
        return NULL;
    }
    v->pos = pos;
    return make_table(ps, v, origin) == 0 ? v : NULL;
}

static const char *origin_reason(enum toml_origin o)
{
    switch (o) {
    case TOML_ORIGIN_INLINE:
        return "an inline table, which cannot be extended";
    case TOML_ORIGIN_HEADER:
        return "a table defined by a [header]";
    case TOML_ORIGIN_IMPLICIT:
        return "a table created by a [header]";
    case TOML_ORIGIN_DOTTED:
        return "a table created by dotted keys of another section";
    default:
        return "the root table";
    }
}

/* ---- keys ---- */

static bool is_bare(int c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

static int parse_key_part(struct parser *ps, struct keypart *kp)
{
    char d[8];
    int c = peek(ps);
    kp->pos = ps->pos;
    if (c == '"' || c == '\'') {
        if (peek_at(ps, 1) == c && peek_at(ps, 2) == c)
            return fail_at(ps, ps->pos, "multi-line string used as a key, expected a key");
        return c == '"' ? parse_basic_string(ps, &kp->s, &kp->n)
                        : parse_literal_string(ps, &kp->s, &kp->n);
    }
    if (!is_bare(c))
        return fail_at(ps, ps->pos,
                       "unexpected %s, expected a key (letters, digits, '_', '-',"
                       " or a quoted string)",
                       describe(ps, d, sizeof d));
    const char *start = ps->p;
    while (is_bare(peek(ps)))
        advance(ps);
    kp->n = (size_t)(ps->p - start);
    kp->s = tg__arena_strndup(ps->arena, start, kp->n);
    return kp->s ? 0 : fail_nomem(ps);
}

/* key ( '.' key )*, with whitespace allowed around the dots; skips trailing blanks. */
static int parse_key(struct parser *ps, struct keypart *parts, size_t *nparts)
{
    size_t n = 0;
    for (;;) {
        if (n == TOML_MAX_KEY_PARTS)
            return fail_at(ps, ps->pos, "key has too many dotted parts, expected at most %d",
                           TOML_MAX_KEY_PARTS);
        if (parse_key_part(ps, &parts[n++]) != 0)
            return -1;
        skip_ws(ps);
        if (peek(ps) != '.')
            break;
        advance(ps);
        skip_ws(ps);
    }
    *nparts = n;
    return 0;
}

/* ---- strings ---- */

static int decode_unicode(struct parser *ps, struct toml_pos at, int digits, char *out, size_t *o)
{
    uint32_t cp = 0;
    for (int i = 0; i < digits; i++) {
        int h = tg__hexval((unsigned char)peek(ps));
        if (h < 0)
            return fail_at(ps, at, "bad unicode escape, expected %d hex digits", digits);
        cp = cp << 4 | (uint32_t)h;
        advance(ps);
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return fail_at(ps, at,
                       "unicode escape is not a scalar value, expected U+0000..U+D7FF"
                       " or U+E000..U+10FFFF");
    *o += tg__utf8_put(cp, out + *o);
    return 0;
}

static int simple_escape(int c)
{
    switch (c) {
    case 'b':
        return '\b';
    case 't':
        return '\t';
    case 'n':
        return '\n';
    case 'f':
        return '\f';
    case 'r':
        return '\r';
    case '"':
        return '"';
    case '\\':
        return '\\';
    default:
        return -1;
    }
}

/* Cursor on a backslash inside a basic string; appends the decoded bytes to out. */
static int decode_escape(struct parser *ps, char *out, size_t *o)
{
    struct toml_pos at = ps->pos;
    advance(ps);
    int c = peek(ps);
    int simple = simple_escape(c);
    if (simple >= 0) {
        out[(*o)++] = (char)simple;
        advance(ps);
        return 0;
    }
    if (c == 'u' || c == 'U') {
        advance(ps);
        return decode_unicode(ps, at, c == 'u' ? 4 : 8, out, o);
    }
    return fail_at(ps, at,
                   "invalid escape sequence, expected one of \\b \\t \\n \\f \\r \\\" "
                   "\\\\ \\uXXXX \\UXXXXXXXX");
}

static int parse_basic_string(struct parser *ps, const char **out, size_t *len)
{
    *out = "";
    *len = 0;
    struct toml_pos start = ps->pos;
    advance(ps);
    const char *q = ps->p;
    while (q < ps->end && *q != '"' && *q != '\n' && *q != '\r') {
        if (*q == '\\' && q + 1 < ps->end && q[1] != '\n' && q[1] != '\r')
            q++;
        q++;
    }
    if (q >= ps->end || *q != '"')
        return fail_at(ps, start, "unterminated string, expected a closing '\"' on the same line");
    char *buf = tg__arena_alloc_align(ps->arena, (size_t)(q - ps->p) + 1, 1);
    if (!buf)
        return fail_nomem(ps);
    size_t o = 0;
    while (ps->p < q) {
        if (*ps->p == '\\') {
            if (decode_escape(ps, buf, &o) != 0)
                return -1;
        } else {
            buf[o++] = *ps->p;
            advance(ps);
        }
    }
    advance(ps); /* closing quote */
    buf[o] = '\0';
    *out = buf;
    *len = o;
    return 0;
}

static int parse_literal_string(struct parser *ps, const char **out, size_t *len)
{
    *out = "";
    *len = 0;
    struct toml_pos start = ps->pos;
    advance(ps);
    const char *q = ps->p;
    while (q < ps->end && *q != '\'' && *q != '\n' && *q != '\r')
        q++;
    if (q >= ps->end || *q != '\'')
        return fail_at(ps, start, "unterminated string, expected a closing \"'\" on the same line");
    size_t n = (size_t)(q - ps->p);
    char *buf = tg__arena_strndup(ps->arena, ps->p, n);
    if (!buf)
        return fail_nomem(ps);
    advance_n(ps, n + 1);
    *out = buf;
    *len = n;
    return 0;
}

/* End of a multi-line string's content (before the closing triple quote), or NULL.
 * Up to two quotes may directly precede the closing three and belong to the content. */
static const char *ml_content_end(const struct parser *ps, char quote, bool escapes, bool *too_many)
{
    const char *q = ps->p;
    *too_many = false;
    while (q < ps->end) {
        if (escapes && *q == '\\') {
            if (ps->end - q < 2)
                break;
            q += 2;
            continue;
        }
        if (*q != quote) {
            q++;
            continue;
        }
        size_t run = 0;
        while (q + run < ps->end && q[run] == quote)
            run++;
        if (run >= 3) {
            *too_many = run > 5;
            return q + run - 3;
        }
        q += run;
    }
    return NULL;
}

/* Line-ending backslash: skip blanks to the newline, then every blank and newline. */
static int skip_line_continuation(struct parser *ps, struct toml_pos at)
{
    advance(ps);
    skip_ws(ps);
    if (!at_newline(ps))
        return fail_at(ps, at,
                       "invalid escape sequence, expected a newline after a "
                       "line-ending backslash");
    while (at_newline(ps) || peek(ps) == ' ' || peek(ps) == '\t') {
        if (at_newline(ps))
            skip_newline(ps);
        else
            advance(ps);
    }
    return 0;
}

static int ml_decode(struct parser *ps, const char *cend, bool escapes, char *buf, size_t *o)
{
    while (ps->p < cend) {
        char c = *ps->p;
        if (escapes && c == '\\') {
            int n = peek_at(ps, 1);
            int rc = (n == ' ' || n == '\t' || n == '\n' || n == '\r')
                         ? skip_line_continuation(ps, ps->pos)
                         : decode_escape(ps, buf, o);
            if (rc != 0)
                return -1;
        } else if (c == '\r') {
            advance(ps); /* CRLF -> LF */
        } else {
            buf[(*o)++] = c;
            advance(ps);
        }
    }
    return 0;
}

static int parse_ml_string(struct parser *ps, const char **out, size_t *len)
{
    *out = "";
    *len = 0;
    struct toml_pos start = ps->pos;
    char quote = *ps->p;
    bool escapes = quote == '"';
    advance_n(ps, 3);
    if (at_newline(ps))
        skip_newline(ps); /* a newline right after the opening quotes is trimmed */
    bool too_many;
    const char *cend = ml_content_end(ps, quote, escapes, &too_many);
    if (!cend)
        return fail_at(ps, start, "unterminated multi-line string, expected %c%c%c", quote, quote,
                       quote);
    if (too_many)
        return fail_at(ps, start,
                       "more than five quotes close a multi-line string, "
                       "expected at most two quotes before the closing three");
    char *buf = tg__arena_alloc_align(ps->arena, (size_t)(cend - ps->p) + 1, 1);
    if (!buf)
        return fail_nomem(ps);
    size_t o = 0;
    if (ml_decode(ps, cend, escapes, buf, &o) != 0)
        return -1;
    advance_n(ps, 3);
    buf[o] = '\0';
    *out = buf;
    *len = o;
    return 0;
}

static int parse_string_value(struct parser *ps, struct toml_value *v)
{
    int q = peek(ps);
    v->type = TOML_STRING;
    if (peek_at(ps, 1) == q && peek_at(ps, 2) == q)
        return parse_ml_string(ps, &v->u.str.ptr, &v->u.str.len);
    if (q == '"')
        return parse_basic_string(ps, &v->u.str.ptr, &v->u.str.len);
    return parse_literal_string(ps, &v->u.str.ptr, &v->u.str.len);
}

/* ---- numbers and booleans ---- */

/* Digits with single '_' between digits; appends the digits to buf. Returns the digit
 * count, or -1 when an underscore is misplaced. */
static int scan_digits(const char *s, size_t n, size_t *j, char *buf, size_t *b, int (*digit)(int))
{
    int count = 0;
    while (*j < n) {
        int c = (unsigned char)s[*j];
        if (digit(c)) {
            buf[(*b)++] = (char)c;
            count++;
            (*j)++;
        } else if (c == '_') {
            if (count == 0 || *j + 1 >= n || !digit((unsigned char)s[*j + 1]))
                return -1;
            (*j)++;
        } else {
            break;
        }
    }
    return count;
}

static int is_dec(int c)
{
    return c >= '0' && c <= '9';
}

static int is_hex(int c)
{
    return c >= 0 && tg__hexval((unsigned char)c) >= 0;
}

static int is_oct(int c)
{
    return c >= '0' && c <= '7';
}

static int is_bin(int c)
{
    return c == '0' || c == '1';
}

static int parse_radix(struct parser *ps, struct toml_pos at, const char *s, size_t n,
                       struct toml_value *v)
{
    int base = s[1] == 'x' ? 16 : s[1] == 'o' ? 8 : 2;
    int (*digit)(int) = base == 16 ? is_hex : base == 8 ? is_oct : is_bin;
    char buf[NUMBER_MAX + 1];
    size_t j = 2, b = 0;
    int count = scan_digits(s, n, &j, buf, &b, digit);
    if (count < 0)
        return fail_at(ps, at, "misplaced '_' in integer, expected '_' between two digits");
    if (count == 0 || j != n)
        return fail_at(ps, at, "invalid base-%d integer, expected only base-%d digits", base, base);
    uint64_t acc = 0;
    for (size_t i = 0; i < b; i++) {
        uint64_t d = (uint64_t)tg__hexval((unsigned char)buf[i]);
        if (acc > ((uint64_t)INT64_MAX - d) / (uint64_t)base)
            return fail_at(ps, at, "integer out of range, expected at most 2^63-1");
        acc = acc * (uint64_t)base + d;
    }
    v->type = TOML_INTEGER;
    v->u.integer = (int64_t)acc;
    return 0;
}

static int decimal_to_int(struct parser *ps, struct toml_pos at, const char *buf, size_t b,
                          struct toml_value *v)
{
    bool neg = buf[0] == '-';
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    uint64_t acc = 0;
    for (size_t i = neg ? 1 : 0; i < b; i++) {
        uint64_t d = (uint64_t)(buf[i] - '0');
        if (acc > (limit - d) / 10)
            return fail_at(ps, at, "integer out of range, expected a 64-bit signed integer");
        acc = acc * 10 + d;
    }
    v->type = TOML_INTEGER;
    if (neg)
        v->u.integer = acc == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)acc;
    else
        v->u.integer = (int64_t)acc;
    return 0;
}

/* 1979-05-27... or 07:32:00...: TOML dates and times, which configs never need. */
static bool looks_like_datetime(const char *s, size_t n)
{
    bool d4 = n >= 5 && isdigit((unsigned char)s[0]) && isdigit((unsigned char)s[1]) &&
              isdigit((unsigned char)s[2]) && isdigit((unsigned char)s[3]) && s[4] == '-';
    bool t2 = n >= 3 && isdigit((unsigned char)s[0]) && isdigit((unsigned char)s[1]) && s[2] == ':';
    return d4 || t2;
}

static int bad_number(struct parser *ps, struct toml_pos at)
{
    return fail_at(ps, at,
                   "invalid value, expected a number, a boolean, a quoted string, an "
                   "array or an inline table");
}

/* Fraction and exponent of a decimal float; sets *is_float when either is present. */
static int parse_float_tail(struct parser *ps, struct toml_pos at, const char *s, size_t n,
                            size_t *j, char *buf, size_t *b, bool *is_float)
{
    if (*j < n && s[*j] == '.') {
        *is_float = true;
        buf[(*b)++] = '.';
        (*j)++;
        if (scan_digits(s, n, j, buf, b, is_dec) <= 0)
            return fail_at(ps, at, "invalid float, expected digits after '.'");
    }
    if (*j < n && (s[*j] == 'e' || s[*j] == 'E')) {
        *is_float = true;
        buf[(*b)++] = 'e';
        if (++(*j) < n && (s[*j] == '+' || s[*j] == '-'))
            buf[(*b)++] = s[(*j)++];
        if (scan_digits(s, n, j, buf, b, is_dec) <= 0)
            return fail_at(ps, at, "invalid float, expected digits in the exponent");
    }
    return 0;
}

static int parse_decimal(struct parser *ps, struct toml_pos at, const char *s, size_t n,
                         struct toml_value *v)
{
    char buf[NUMBER_MAX + 4];
    size_t j = 0, b = 0;
    if (s[0] == '+' || s[0] == '-') {
        if (s[0] == '-')
            buf[b++] = '-';
        j = 1;
    }
    size_t first = j;
    int count = scan_digits(s, n, &j, buf, &b, is_dec);
    if (count < 0)
        return fail_at(ps, at, "misplaced '_' in number, expected '_' between two digits");
    if (count == 0)
        return bad_number(ps, at);
    if (count > 1 && s[first] == '0')
        return fail_at(ps, at, "leading zero in number, expected no leading zeros");
    bool is_float = false;
    if (parse_float_tail(ps, at, s, n, &j, buf, &b, &is_float) != 0)
        return -1;
    if (j != n)
        return bad_number(ps, at);
    if (!is_float)
        return decimal_to_int(ps, at, buf, b, v);
    buf[b] = '\0';
    errno = 0;
    v->type = TOML_FLOAT;
    v->u.fp = strtod(buf, NULL);
    if (errno == ERANGE && isinf(v->u.fp))
        return fail_at(ps, at, "float out of range, expected a finite double");
    return 0;
}

static bool token_is(const char *s, size_t n, const char *lit)
{
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

static int parse_scalar(struct parser *ps, const char *s, size_t n, struct toml_pos at,
                        struct toml_value *v)
{
    if (token_is(s, n, "true") || token_is(s, n, "false")) {
        v->type = TOML_BOOL;
        v->u.boolean = s[0] == 't';
        return 0;
    }
    if (looks_like_datetime(s, n))
        return fail_at(ps, at,
                       "dates and times are not supported, expected a string, "
                       "number or boolean");
    if (n > NUMBER_MAX)
        return fail_at(ps, at, "value too long for a number, expected at most %d characters",
                       NUMBER_MAX);
    size_t i = (s[0] == '+' || s[0] == '-') ? 1 : 0;
    if (token_is(s + i, n - i, "inf") || token_is(s + i, n - i, "nan")) {
        v->type = TOML_FLOAT;
        v->u.fp = s[i] == 'i' ? INFINITY : NAN;
        if (s[0] == '-')
            v->u.fp = -v->u.fp;
        return 0;
    }
    if (n - i >= 2 && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'o' || s[i + 1] == 'b')) {
        if (i == 1)
            return fail_at(ps, at, "sign on a hex, octal or binary integer, expected none");
        return parse_radix(ps, at, s, n, v);
    }
    return parse_decimal(ps, at, s, n, v);
}

static bool is_token_char(int c)
{
    return is_bare(c) || c == '+' || c == '.' || c == ':';
}

/* ---- arrays and inline tables ---- */

static int parse_array(struct parser *ps, struct toml_value *v)
{
    char d[8];
    struct toml_pos open = ps->pos;
    struct toml_value *tail = NULL;
    v->type = TOML_ARRAY;
    advance(ps);
    for (;;) {
        skip_filler(ps);
        if (peek(ps) == ']')
            break;
        if (ps->p >= ps->end)
            return fail_at(ps, open, "unterminated array, expected ']'");
        struct toml_value *item;
        if (parse_value(ps, &item) != 0)
            return -1;
        if (tail)
            tail->next = item;
        else
            v->u.array.first = item;
        tail = item;
        v->u.array.n++;
        skip_filler(ps);
        if (peek(ps) == ',') {
            advance(ps);
            continue;
        }
        if (ps->p >= ps->end)
            return fail_at(ps, open, "unterminated array, expected ']'");
        if (peek(ps) != ']')
            return fail_at(ps, ps->pos, "unexpected %s in array, expected ',' or ']'",
                           describe(ps, d, sizeof d));
    }
    advance(ps);
    return 0;
}

static int parse_inline_table(struct parser *ps, struct toml_value *v)
{
    char d[8];
    if (make_table(ps, v, TOML_ORIGIN_INLINE) != 0)
        return -1;
    uint32_t saved = ps->context;
    ps->context = ++ps->next_context;
    advance(ps);
    skip_ws(ps);
    int rc = 0;
    while (rc == 0 && peek(ps) != '}') {
        if (ps->p >= ps->end || at_newline(ps)) {
            rc = fail_at(ps, ps->pos,
                         "unexpected %s in inline table, expected a key or '}' "
                         "on the same line",
                         describe(ps, d, sizeof d));
            break;
        }
        rc = parse_keyval(ps, v->u.table);
        skip_ws(ps);
        if (rc == 0 && peek(ps) == ',') {
            advance(ps);
            skip_ws(ps);
            if (peek(ps) == '}')
                rc = fail_at(ps, ps->pos, "trailing comma in inline table, expected a key");
        } else if (rc == 0 && peek(ps) != '}') {
            rc = fail_at(ps, ps->pos,
                         "unexpected %s in inline table, expected ',' or '}' on "
                         "the same line",
                         describe(ps, d, sizeof d));
        }
    }
    if (rc == 0)
        advance(ps);
    ps->context = saved;
    return rc;
}

static int parse_compound(struct parser *ps, struct toml_value *v)
{
    if (ps->depth >= TOML_MAX_DEPTH)
        return fail_at(ps, ps->pos,
                       "arrays or inline tables nested too deep, expected at "
                       "most %d levels",
                       TOML_MAX_DEPTH);
    ps->depth++;
    int rc = peek(ps) == '[' ? parse_array(ps, v) : parse_inline_table(ps, v);
    ps->depth--;
    return rc;
}

static int parse_value(struct parser *ps, struct toml_value **out)
{
    char d[8];
    struct toml_value *v = tg__arena_zalloc(ps->arena, sizeof *v);
    if (!v)
        return fail_nomem(ps);
    v->pos = ps->pos;
    *out = v;
    int c = peek(ps);
    if (c == '"' || c == '\'')
        return parse_string_value(ps, v);
    if (c == '[' || c == '{')
        return parse_compound(ps, v);
    if (c == '+' || is_bare(c)) {
        const char *start = ps->p;
        while (is_token_char(peek(ps)))
            advance(ps);
        return parse_scalar(ps, start, (size_t)(ps->p - start), v->pos, v);
    }
    return fail_at(ps, ps->pos,
                   "unexpected %s, expected a value (string, number, boolean, "
                   "array or inline table)",
                   describe(ps, d, sizeof d));
}

/* ---- key/value lines and headers ---- */

static struct toml_table *descend_dotted(struct parser *ps, struct toml_table *t,
                                         const struct keypart *parts, size_t i)
{
    char k[128];
    struct toml_kv *kv = find_mut(t, &parts[i]);
    if (!kv) {
        struct toml_value *tv = new_table(ps, TOML_ORIGIN_DOTTED, parts[i].pos);
        if (!tv || !table_add(ps, t, &parts[i], tv))
            return NULL;
        return tv->u.table;
    }
    const struct toml_value *v = kv->value;
    if (v->type != TOML_TABLE) {
        fail_at(ps, parts[i].pos,
                "key '%s' already holds a %s (defined at %u:%u), expected "
                "a table for this dotted key",
                render_key(parts, i + 1, k, sizeof k), toml_type_name(v->type),
                (unsigned)kv->pos.line, (unsigned)kv->pos.col);
        return NULL;
    }
    struct toml_table *tb = v->u.table;
    if (tb->origin == TOML_ORIGIN_DOTTED && tb->owner == ps->context)
        return tb;
    fail_at(ps, parts[i].pos, "'%s' is %s (defined at %u:%u), expected a new key",
            render_key(parts, i + 1, k, sizeof k), origin_reason(tb->origin),
            (unsigned)kv->pos.line, (unsigned)kv->pos.col);
    return NULL;
}

static int parse_keyval(struct parser *ps, struct toml_table *t)
{
    char d[8], k[128];
    struct keypart parts[TOML_MAX_KEY_PARTS] = {0};
    size_t n = 0;
    if (parse_key(ps, parts, &n) != 0)
        return -1;
    if (peek(ps) != '=')
        return fail_at(ps, ps->pos, "unexpected %s after key '%s', expected '='",
                       describe(ps, d, sizeof d), render_key(parts, n, k, sizeof k));
    advance(ps);
    skip_ws(ps);
    for (size_t i = 0; i + 1 < n; i++) {
        t = descend_dotted(ps, t, parts, i);
        if (!t)
            return -1;
    }
    const struct toml_kv *dup = find_mut(t, &parts[n - 1]);
    if (dup)
        return fail_at(ps, parts[n - 1].pos,
                       "duplicate key '%s' (first defined at %u:%u), "
                       "expected each key once",
                       render_key(parts, n, k, sizeof k), (unsigned)dup->pos.line,
                       (unsigned)dup->pos.col);
    struct toml_value *v = NULL;
    if (parse_value(ps, &v) != 0)
        return -1;
    return table_add(ps, t, &parts[n - 1], v) ? 0 : -1;
}

static struct toml_table *descend_header(struct parser *ps, struct toml_table *t,
                                         const struct keypart *parts, size_t i)
{
    char k[128];
    struct toml_kv *kv = find_mut(t, &parts[i]);
    if (!kv) {
        struct toml_value *tv = new_table(ps, TOML_ORIGIN_IMPLICIT, parts[i].pos);
        if (!tv || !table_add(ps, t, &parts[i], tv))
            return NULL;
        return tv->u.table;
    }
    const struct toml_value *v = kv->value;
    if (v->type == TOML_TABLE && v->u.table->origin != TOML_ORIGIN_INLINE)
        return v->u.table;
    fail_at(ps, parts[i].pos, "'%s' is %s%s (defined at %u:%u), expected a table",
            render_key(parts, i + 1, k, sizeof k), v->type == TOML_TABLE ? "" : "a ",
            v->type == TOML_TABLE ? origin_reason(TOML_ORIGIN_INLINE) : toml_type_name(v->type),
            (unsigned)kv->pos.line, (unsigned)kv->pos.col);
    return NULL;
}

/* Define the header's last table in parent t. */
static struct toml_table *define_header(struct parser *ps, struct toml_table *t,
                                        const struct keypart *parts, size_t n)
{
    char k[128];
    struct toml_kv *kv = find_mut(t, &parts[n - 1]);
    if (!kv) {
        struct toml_value *tv = new_table(ps, TOML_ORIGIN_HEADER, parts[n - 1].pos);
        if (!tv || !table_add(ps, t, &parts[n - 1], tv))
            return NULL;
        return tv->u.table;
    }
    struct toml_table *tb = kv->value->type == TOML_TABLE ? kv->value->u.table : NULL;
    if (tb && tb->origin == TOML_ORIGIN_IMPLICIT) {
        tb->origin = TOML_ORIGIN_HEADER;
        kv->pos = parts[n - 1].pos;
        return tb;
    }
    if (!tb)
        fail_at(ps, parts[n - 1].pos,
                "'%s' already holds a %s (defined at %u:%u), expected "
                "a new table",
                render_key(parts, n, k, sizeof k), toml_type_name(kv->value->type),
                (unsigned)kv->pos.line, (unsigned)kv->pos.col);
    else
        fail_at(ps, parts[n - 1].pos,
                "table [%s] defined twice: it is already %s (at %u:%u), "
                "expected each table once",
                render_key(parts, n, k, sizeof k), origin_reason(tb->origin),
                (unsigned)kv->pos.line, (unsigned)kv->pos.col);
    return NULL;
}

static int parse_header(struct parser *ps, struct toml_table *root)
{
    char d[8];
    struct keypart parts[TOML_MAX_KEY_PARTS] = {0};
    size_t n = 0;
    advance(ps);
    if (peek(ps) == '[')
        return fail_at(ps, ps->pos,
                       "arrays of tables ([[...]]) are not supported, expected "
                       "a table name");
    skip_ws(ps);
    if (parse_key(ps, parts, &n) != 0)
        return -1;
    if (peek(ps) != ']')
        return fail_at(ps, ps->pos, "unexpected %s in table header, expected ']'",
                       describe(ps, d, sizeof d));
    advance(ps);
    if (expect_eol(ps, "table header") != 0)
        return -1;
    struct toml_table *t = root;
    for (size_t i = 0; i + 1 < n; i++) {
        t = descend_header(ps, t, parts, i);
        if (!t)
            return -1;
    }
    t = define_header(ps, t, parts, n);
    if (!t)
        return -1;
    ps->cur = t;
    ps->context = ++ps->next_context;
    return 0;
}

static int parse_body(struct parser *ps, struct toml_table *root)
{
    while (ps->p < ps->end) {
        skip_ws(ps);
        int c = peek(ps);
        int rc = 0;
        if (c < 0)
            break;
        if (c == '#')
            skip_comment(ps);
        else if (at_newline(ps))
            skip_newline(ps);
        else if (c == '[')
            rc = parse_header(ps, root);
        else if ((rc = parse_keyval(ps, ps->cur)) == 0)
            rc = expect_eol(ps, "value");
        if (rc != 0)
            return -1;
    }
    return 0;
}

enum toml_status toml_parse(struct toml_doc *doc, const char *name, const char *text, size_t len,
                            char *err, size_t errlen)
{
    memset(doc, 0, sizeof *doc);
    tg__arena_init(&doc->arena, 0, TOML_MAX_ARENA);
    if (err && errlen > 0)
        err[0] = '\0';
    struct parser ps = {
        .p = text,
        .end = text + len,
        .pos = {1, 1},
        .name = name ? name : "<toml>",
        .err = err,
        .errlen = errlen,
        .arena = &doc->arena,
    };
    doc->name = tg__arena_strdup(&doc->arena, ps.name);
    if (!doc->name) {
        fail_nomem(&ps);
        return TOML_NOMEM;
    }
    ps.name = doc->name;
    if (len > TOML_MAX_INPUT) {
        fail_at(&ps, ps.pos, "document is %zu bytes, expected at most %u", len,
                (unsigned)TOML_MAX_INPUT);
        return TOML_BAD;
    }
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
        ps.p += 3; /* byte order mark */
    struct toml_value *rootv = new_table(&ps, TOML_ORIGIN_ROOT, ps.pos);
    if (!rootv)
        return TOML_NOMEM;
    ps.cur = rootv->u.table;
    if (check_text(&ps) != 0 || parse_body(&ps, rootv->u.table) != 0)
        return ps.nomem ? TOML_NOMEM : TOML_BAD;
    doc->root = rootv->u.table;
    return TOML_OK;
}

void toml_doc_cleanup(struct toml_doc *doc)
{
    if (!doc)
        return;
    tg__arena_cleanup(&doc->arena);
    doc->root = NULL;
    doc->name = NULL;
}

const char *toml_type_name(enum toml_type type)
{
    switch (type) {
    case TOML_STRING:
        return "string";
    case TOML_INTEGER:
        return "integer";
    case TOML_FLOAT:
        return "float";
    case TOML_BOOL:
        return "boolean";
    case TOML_ARRAY:
        return "array";
    case TOML_TABLE:
        return "table";
    }
    return "value";
}
