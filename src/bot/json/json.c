/*
 * json: the strict RFC 8259 tokenizer. See json.h for the contract.
 *
 * One pass over the input, no recursion and no allocation except growing the doc's token
 * array (kept across parses, so a warm doc allocates nothing). While a container is open its
 * token's `next` field holds the index of its parent (UINT32_MAX for the root); closing the
 * container restores `next` to its real meaning. So the parser needs no stack of its own and
 * the nesting depth costs no memory.
 *
 * Invariants after a successful parse:
 *  - toks[0] is the root value; ntok >= 1; every token's next is in (i, ntok];
 *  - object children alternate key (STRING) and value, count = number of pairs;
 *  - every string token holds valid UTF-8 and valid escapes (no lone surrogates), so the
 *    accessors in json_get.c never need to re-validate.
 * After a failed parse the tokens that were completed form a consistent (truncated) tree and
 * ntok counts them, so tg__json_path() can name where the error is; nothing else may use it.
 */
#include "bot/json/json.h"

#include <stdio.h>
#include <string.h>

#include "bot/json/json_int.h"
#include "core/alloc.h"

#define DEFAULT_DEPTH 64
#define DEFAULT_BYTES ((size_t)64 << 20)
#define MAX_BYTES     ((size_t)UINT32_MAX - 2) /* offsets are uint32_t */
#define NO_PARENT     UINT32_MAX

/* Byte classes inside strings. 0 = plain byte that needs no attention. */
enum {
    C_PLAIN = 0,
    C_QUOTE,
    C_BSLASH,
    C_CTRL,
    C_UTF8, /* lead byte of a multi-byte sequence (or an invalid byte): validate */
};

/* 0 plain, 1 quote, 2 backslash, 3 control, 4 multi-byte UTF-8 (values of the enum) */
_Static_assert(C_PLAIN == 0 && C_QUOTE == 1 && C_BSLASH == 2 && C_CTRL == 3 && C_UTF8 == 4,
               "str_class values follow the enum");
static const uint8_t str_class[256] = {
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
};

struct jp {
    const unsigned char *s;
    size_t len;
    size_t pos;
    tg__jdoc *d;
    tg__jerr *err;
    uint32_t parent; /* open container, NO_PARENT at top level */
    uint32_t depth;
    uint32_t max_tokens;
};

void tg__jdoc_init(tg__jdoc *d, const tg__jlimits *lim)
{
    memset(d, 0, sizeof *d);
    if (lim)
        d->lim = *lim;
    if (!d->lim.max_depth)
        d->lim.max_depth = DEFAULT_DEPTH;
    if (!d->lim.max_bytes)
        d->lim.max_bytes = DEFAULT_BYTES;
    if (d->lim.max_bytes > MAX_BYTES)
        d->lim.max_bytes = MAX_BYTES;
    if (!d->lim.max_tokens) {
        size_t t = d->lim.max_bytes / 2 + 1;
        d->lim.max_tokens = t > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)t;
    }
}

void tg__jdoc_cleanup(tg__jdoc *d)
{
    if (!d)
        return;
    tg__free(d->toks);
    d->toks = NULL;
    d->ntok = d->cap = 0;
    d->src = NULL;
    d->len = 0;
}

const char *tg__json_type_name(tg__jtype t)
{
    static const char *const names[] = {"nothing", "object", "array", "string",
                                        "number",  "true",   "false", "null"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

void tg__json_describe(const char *s, size_t len, size_t pos, char *out, size_t cap)
{
    if (pos >= len) {
        snprintf(out, cap, "end of input");
        return;
    }
    unsigned char c = (unsigned char)s[pos];
    if (c > 0x20 && c < 0x7F)
        snprintf(out, cap, "'%c'", c);
    else
        snprintf(out, cap, "byte 0x%02x", c);
}

/* Fill the error: "what: expected X, found <byte at pos>". Always returns -1. */
static int fail_at(struct jp *p, size_t pos, const char *what, const char *expected)
{
    char found[32];
    tg__json_describe((const char *)p->s, p->len, pos, found, sizeof found);
    p->err->offset = pos;
    p->err->tok = UINT32_MAX;
    snprintf(p->err->msg, sizeof p->err->msg, "%s: expected %s, found %s", what, expected, found);
    return -1;
}

/* Same with a free-form "found" text. */
static int fail_found(struct jp *p, size_t pos, const char *what, const char *expected,
                      const char *found)
{
    p->err->offset = pos;
    p->err->tok = UINT32_MAX;
    snprintf(p->err->msg, sizeof p->err->msg, "%s: expected %s, found %s", what, expected, found);
    return -1;
}

static int grow(struct jp *p)
{
    tg__jdoc *d = p->d;
    if (d->cap >= p->max_tokens) {
        char found[48];
        snprintf(found, sizeof found, "more (limit %u)", (unsigned)p->max_tokens);
        return fail_found(p, p->pos, "document", "fewer tokens", found);
    }
    uint64_t want = d->cap ? (uint64_t)d->cap * 2 : 64;
    uint64_t hint = p->len / 8 + 16; /* a typical document has a token per 5-15 bytes */
    if (want < hint)
        want = hint;
    if (want > p->max_tokens)
        want = p->max_tokens;
    if (want > SIZE_MAX / sizeof(tg__jtok))
        return fail_found(p, p->pos, "document", "memory for tokens", "out of memory");
    tg__jtok *t = tg__realloc(d->toks, (size_t)want * sizeof(tg__jtok));
    if (!t)
        return fail_found(p, p->pos, "document", "memory for tokens", "out of memory");
    d->toks = t;
    d->cap = (uint32_t)want;
    return 0;
}

/* Append a token; returns its index or UINT32_MAX (error filled). */
static inline uint32_t new_tok(struct jp *p, uint8_t type, size_t start)
{
    tg__jdoc *d = p->d;
    if (d->ntok == d->cap && grow(p) != 0)
        return UINT32_MAX;
    uint32_t i = d->ntok++;
    tg__jtok *t = &d->toks[i];
    t->start = (uint32_t)start;
    t->len = 0;
    t->next = i + 1;
    t->count = 0;
    t->type = type;
    t->flags = 0;
    return i;
}

static inline int skip_ws(struct jp *p)
{
    const unsigned char *s = p->s;
    size_t i = p->pos, n = p->len;
    while (i < n) {
        unsigned char c = s[i];
        if (c > ' ')
            break;
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t')
            break;
        i++;
    }
    p->pos = i;
    return i < n ? s[i] : -1;
}

/* Validate the escape at s[i] == '\\'. Returns the bytes it spans, or 0 (error filled). */
static size_t scan_escape(struct jp *p, size_t i)
{
    const unsigned char *s = p->s;
    if (i + 1 >= p->len)
    {
        fail_at(p, i + 1, "string", "an escape character");
        return 0;
    }
    switch (s[i + 1]) {
    case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
        return 2;
    case 'u':
        break;
    default:
        fail_at(p, i + 1, "string", "an escape (one of \"\\/bfnrtu)");
        return 0;
    }
    uint32_t cp = 0;
    for (size_t k = 0; k < 4; k++) {
        int h = i + 2 + k < p->len ? tg__json_hexval(s[i + 2 + k]) : -1;
        if (h < 0) {
            fail_at(p, i + 2 + k, "string", "4 hex digits after \\u");
            return 0;
        }
        cp = cp << 4 | (uint32_t)h;
    }
    if (cp >= 0xDC00 && cp <= 0xDFFF) {
        fail_found(p, i, "string", "a high surrogate before \\u low surrogate",
                   "a lone low surrogate");
        return 0;
    }
    if (cp < 0xD800 || cp > 0xDBFF)
        return 6;
    /* High surrogate: a \uDC00-\uDFFF must follow immediately. */
    uint32_t lo = 0;
    size_t j = i + 6;
    if (j + 6 > p->len || s[j] != '\\' || s[j + 1] != 'u') {
        fail_found(p, i, "string", "a low surrogate escape after \\u high surrogate",
                   "a lone high surrogate");
        return 0;
    }
    for (size_t k = 0; k < 4; k++) {
        int h = tg__json_hexval(s[j + 2 + k]);
        if (h < 0) {
            fail_at(p, j + 2 + k, "string", "4 hex digits after \\u");
            return 0;
        }
        lo = lo << 4 | (uint32_t)h;
    }
    if (lo < 0xDC00 || lo > 0xDFFF) {
        fail_found(p, i, "string", "a low surrogate escape after \\u high surrogate",
                   "a lone high surrogate");
        return 0;
    }
    return 12;
}

size_t tg__json_utf8_valid1(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        need = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0)
            lo = 0xA0; /* overlong */
        else if (c == 0xED)
            hi = 0x9F; /* UTF-16 surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0)
            lo = 0x90; /* overlong */
        else if (c == 0xF4)
            hi = 0x8F; /* > U+10FFFF */
    } else {
        return 0; /* continuation byte, C0/C1 overlong lead, or F5-FF */
    }
    if (n < need || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k < need; k++)
        if ((s[k] & 0xC0) != 0x80)
            return 0;
    return need;
}

/* Bit tricks over 8 bytes at once: does any byte need attention inside a string? */
static inline int word_special(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t q = x ^ (ones * '"');
    uint64_t b = x ^ (ones * '\\');
    uint64_t t = ((q - ones) & ~q) | ((b - ones) & ~b) | ((x - ones * 0x20) & ~x) | x;
    return (t & highs) != 0;
}

/* p->pos is at the opening quote. Adds a STRING token. */
static int parse_string(struct jp *p)
{
    const unsigned char *s = p->s;
    size_t n = p->len, i = p->pos + 1, start = i;
    uint8_t flags = 0;
    for (;;) {
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (word_special(w))
                break;
            i += 8;
        }
        while (i < n && str_class[s[i]] == C_PLAIN)
            i++;
        if (i >= n)
            return fail_at(p, i, "string", "closing '\"'");
        switch (str_class[s[i]]) {
        case C_PLAIN:
            i++;
            break;
        case C_QUOTE:
            goto done;
        case C_BSLASH: {
            size_t k = scan_escape(p, i);
            if (!k)
                return -1;
            i += k;
            flags = TG__JF_ESCAPED;
            break;
        }
        case C_CTRL:
            return fail_at(p, i, "string", "'\\u00XX' escape for a control character");
        default: {
            size_t k = tg__json_utf8_valid1(s + i, n - i);
            if (!k)
                return fail_at(p, i, "string", "valid UTF-8");
            i += k;
            break;
        }
        }
    }
done:;
    uint32_t t = new_tok(p, TG__J_STRING, start);
    if (t == UINT32_MAX)
        return -1;
    p->d->toks[t].len = (uint32_t)(i - start);
    p->d->toks[t].flags = flags;
    p->pos = i + 1;
    return 0;
}

static inline size_t scan_digits(const unsigned char *s, size_t i, size_t n)
{
    while (i < n && (unsigned)(s[i] - '0') < 10)
        i++;
    return i;
}

/* p->pos is at '-' or a digit. Adds a NUMBER token. */
static int parse_number(struct jp *p)
{
    const unsigned char *s = p->s;
    size_t n = p->len, start = p->pos, i = start;
    uint8_t flags = 0;
    if (s[i] == '-') {
        flags |= TG__JF_NEG;
        i++;
    }
    if (i >= n || (unsigned)(s[i] - '0') >= 10)
        return fail_at(p, i, "number", "a digit");
    if (s[i] == '0') {
        i++;
        if (i < n && (unsigned)(s[i] - '0') < 10)
            return fail_found(p, i, "number", "no leading zeros", "a digit after '0'");
    } else {
        i = scan_digits(s, i, n);
    }
    if (i < n && s[i] == '.') {
        flags |= TG__JF_FRAC;
        i++;
        if (i >= n || (unsigned)(s[i] - '0') >= 10)
            return fail_at(p, i, "number", "a digit after '.'");
        i = scan_digits(s, i, n);
    }
    if (i < n && (s[i] | 0x20) == 'e') {
        flags |= TG__JF_FRAC;
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i >= n || (unsigned)(s[i] - '0') >= 10)
            return fail_at(p, i, "number", "a digit in the exponent");
        i = scan_digits(s, i, n);
    }
    uint32_t t = new_tok(p, TG__J_NUMBER, start);
    if (t == UINT32_MAX)
        return -1;
    p->d->toks[t].len = (uint32_t)(i - start);
    p->d->toks[t].flags = flags;
    p->pos = i;
    return 0;
}

static int parse_literal(struct jp *p, const char *word, size_t wlen, uint8_t type)
{
    size_t i = p->pos;
    for (size_t k = 1; k < wlen; k++) {
        if (i + k >= p->len || p->s[i + k] != (unsigned char)word[k]) {
            char exp[16];
            snprintf(exp, sizeof exp, "'%s'", word);
            return fail_at(p, i + k, "literal", exp);
        }
    }
    uint32_t t = new_tok(p, type, i);
    if (t == UINT32_MAX)
        return -1;
    p->d->toks[t].len = (uint32_t)wlen;
    p->pos = i + wlen;
    return 0;
}

static int open_container(struct jp *p, uint8_t type)
{
    if (p->depth >= p->d->lim.max_depth) {
        char found[48];
        snprintf(found, sizeof found, "depth %u", (unsigned)p->depth + 1);
        char exp[48];
        snprintf(exp, sizeof exp, "nesting depth at most %u", (unsigned)p->d->lim.max_depth);
        return fail_found(p, p->pos, tg__json_type_name((tg__jtype)type), exp, found);
    }
    uint32_t t = new_tok(p, type, p->pos);
    if (t == UINT32_MAX)
        return -1;
    p->d->toks[t].next = p->parent; /* parent link while open */
    p->parent = t;
    p->depth++;
    p->pos++;
    return 0;
}

static void close_container(struct jp *p)
{
    tg__jtok *t = &p->d->toks[p->parent];
    t->len = (uint32_t)(p->pos + 1 - t->start);
    p->parent = t->next;
    t->next = p->d->ntok;
    p->depth--;
    p->pos++;
}

/* A scalar value at p->pos (whitespace already skipped; c is the byte there or -1). */
static int parse_scalar(struct jp *p, int c)
{
    switch (c) {
    case '"':
        return parse_string(p);
    case 't':
        return parse_literal(p, "true", 4, TG__J_TRUE);
    case 'f':
        return parse_literal(p, "false", 5, TG__J_FALSE);
    case 'n':
        return parse_literal(p, "null", 4, TG__J_NULL);
    case '-': case '0': case '1': case '2': case '3': case '4':
    case '5': case '6': case '7': case '8': case '9':
        return parse_number(p);
    default:
        return fail_at(p, p->pos, "value", "a JSON value");
    }
}

/* In an object, before a key: key string, ':' and whitespace up to the value. */
static int parse_key(struct jp *p, int c)
{
    if (c != '"')
        return fail_at(p, p->pos, "object", "a '\"' starting a member name");
    if (parse_string(p) != 0)
        return -1;
    p->d->toks[p->parent].count++;
    if (skip_ws(p) != ':')
        return fail_at(p, p->pos, "object", "':' after the member name");
    p->pos++;
    return 0;
}

/* Make a failed parse's partial tree consistent: close every open container. */
static void repair(struct jp *p)
{
    uint32_t innermost = p->parent;
    while (p->parent != NO_PARENT) {
        tg__jtok *t = &p->d->toks[p->parent];
        t->len = (uint32_t)((p->pos < p->len ? p->pos : p->len) - t->start);
        p->parent = t->next;
        t->next = p->d->ntok;
    }
    p->err->tok = innermost;
}

/*
 * After a complete value: close as many containers as the input closes, then either stop at
 * the top level or consume ',' (and the next key in an object). *c is the current byte.
 */
static int after_value(struct jp *p, int *c)
{
    while (p->parent != NO_PARENT) {
        uint8_t type = p->d->toks[p->parent].type;
        if (*c == ',') {
            p->pos++;
            *c = skip_ws(p);
            if (type == TG__J_OBJECT) {
                if (parse_key(p, *c) != 0)
                    return -1;
                *c = skip_ws(p);
            }
            return 0;
        }
        if (*c != (type == TG__J_OBJECT ? '}' : ']'))
            return fail_at(p, p->pos, tg__json_type_name((tg__jtype)type),
                           type == TG__J_OBJECT ? "',' or '}'" : "',' or ']'");
        close_container(p);
        *c = skip_ws(p);
    }
    return 0;
}

/*
 * The driver: alternates "value expected" and "after a value" until the root closes.
 * After a value inside a container: ',' continues, the matching bracket closes.
 */
static int parse_doc(struct jp *p)
{
    int c = skip_ws(p);
    for (;;) {
        /* c is the first byte of a value (or whatever is there instead). */
        if (p->parent != NO_PARENT && p->d->toks[p->parent].type == TG__J_ARRAY)
            p->d->toks[p->parent].count++;
        if (c == '{' || c == '[') {
            bool obj = c == '{';
            if (open_container(p, obj ? TG__J_OBJECT : TG__J_ARRAY) != 0)
                return -1;
            c = skip_ws(p);
            if (c != (obj ? '}' : ']')) {
                if (obj && parse_key(p, c) != 0)
                    return -1;
                c = obj ? skip_ws(p) : c;
                continue;
            }
            close_container(p);
        } else if (parse_scalar(p, c) != 0) {
            return -1;
        }
        c = skip_ws(p);
        if (after_value(p, &c) != 0)
            return -1;
        if (p->parent == NO_PARENT)
            break;
    }
    if (c != -1)
        return fail_at(p, p->pos, "document", "end of input after the value");
    return 0;
}

int tg__json_parse(tg__jdoc *d, const char *src, size_t len, tg__jerr *err)
{
    tg__jerr scratch;
    struct jp p = {
        .s = (const unsigned char *)src,
        .len = len,
        .d = d,
        .err = err ? err : &scratch,
        .parent = NO_PARENT,
        .max_tokens = d->lim.max_tokens ? d->lim.max_tokens : UINT32_MAX - 1,
    };
    d->src = src;
    d->len = len;
    d->ntok = 0;
    if (len > d->lim.max_bytes || len > MAX_BYTES) {
        char found[48];
        snprintf(found, sizeof found, "%zu bytes", len);
        char exp[48];
        snprintf(exp, sizeof exp, "at most %zu bytes", d->lim.max_bytes);
        return fail_found(&p, 0, "document", exp, found);
    }
    if (!src && len)
        return fail_found(&p, 0, "document", "input bytes", "a NULL pointer");
    if (parse_doc(&p) != 0) {
        repair(&p);
        return -1;
    }
    return 0;
}
