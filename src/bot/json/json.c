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
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
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

static void apply_defaults(tg__jlimits *l)
{
    if (!l->max_depth)
        l->max_depth = DEFAULT_DEPTH;
    if (!l->max_bytes)
        l->max_bytes = DEFAULT_BYTES;
    if (l->max_bytes > MAX_BYTES)
        l->max_bytes = MAX_BYTES;
    if (!l->max_tokens) {
        size_t t = l->max_bytes / 2 + 1;
        l->max_tokens = t > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)t;
    }
}

void tg__jdoc_init(tg__jdoc *d, const tg__jlimits *lim)
{
    memset(d, 0, sizeof *d);
    if (lim)
        d->lim = *lim;
    apply_defaults(&d->lim);
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
    /* A typical document has a token per 5-15 bytes; start near that, but do not reserve
     * megabytes up front for a large input that may be one long string. */
    uint64_t hint = p->len / 8 + 16;
    if (hint > 65536)
        hint = 65536;
    if (want < hint)
        want = hint;
    if (want > p->max_tokens)
        want = p->max_tokens;
    tg__jtok *t = NULL;
    if (want <= SIZE_MAX / sizeof(tg__jtok))
        t = tg__realloc(d->toks, (size_t)want * sizeof(tg__jtok));
    if (!t) {
        fail_found(p, p->pos, "document", "memory for tokens", "out of memory");
        p->err->nomem = true;
        return -1;
    }
    d->toks = t;
    d->cap = (uint32_t)want;
    return 0;
}

static int fail_depth(struct jp *p, size_t pos, uint32_t depth, bool obj)
{
    char found[48], exp[48];
    snprintf(found, sizeof found, "depth %u", (unsigned)depth);
    snprintf(exp, sizeof exp, "nesting depth at most %u", (unsigned)p->d->lim.max_depth);
    return fail_found(p, pos, obj ? "object" : "array", exp, found);
}

/* Index of the first byte at or after i that is not RFC 8259 whitespace. */
static inline size_t skip_ws(const unsigned char *s, size_t i, size_t n)
{
    while (i < n && s[i] <= ' ' && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t'))
        i++;
    return i;
}

/* Four hex digits at s[i..i+4) into *cp. Returns SIZE_MAX, or the index of the bad digit. */
static inline size_t hex4(const unsigned char *s, size_t i, size_t n, uint32_t *cp)
{
    *cp = 0;
    for (size_t k = i; k < i + 4; k++) {
        int h = k < n ? tg__hexval(s[k]) : -1;
        if (h < 0)
            return k;
        *cp = *cp << 4 | (uint32_t)h;
    }
    return SIZE_MAX;
}

/* Validate the escape at s[i] == '\\'. Returns the bytes it spans, or 0 (error filled). */
static size_t scan_escape(struct jp *p, size_t i)
{
    const unsigned char *s = p->s;
    size_t n = p->len, bad;
    uint32_t hi, lo = 0;
    switch (i + 1 < n ? s[i + 1] : -1) {
    case '"':
    case '\\':
    case '/':
    case 'b':
    case 'f':
    case 'n':
    case 'r':
    case 't':
        return 2;
    case 'u':
        break;
    default:
        fail_at(p, i + 1, "string", "an escape (one of \"\\/bfnrtu)");
        return 0;
    }
    if ((bad = hex4(s, i + 2, n, &hi)) != SIZE_MAX) {
        fail_at(p, bad, "string", "4 hex digits after \\u");
        return 0;
    }
    if (hi >= 0xDC00 && hi <= 0xDFFF) {
        fail_found(p, i, "string", "a high surrogate before \\u low surrogate",
                   "a lone low surrogate");
        return 0;
    }
    if (hi < 0xD800 || hi > 0xDBFF)
        return 6;
    /* High surrogate: a \uDC00-\uDFFF must follow immediately. */
    size_t j = i + 6;
    if (j + 2 <= n && s[j] == '\\' && s[j + 1] == 'u' &&
        (bad = hex4(s, j + 2, n, &lo)) != SIZE_MAX) {
        fail_at(p, bad, "string", "4 hex digits after \\u");
        return 0;
    }
    if (j + 6 > n || s[j] != '\\' || s[j + 1] != 'u' || lo < 0xDC00 || lo > 0xDFFF) {
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

/*
 * Bit tricks over 8 bytes at once: a mask with the high bit set in each byte that is '"',
 * '\\', below 0x20 or above 0x7F. Borrows can only flag bytes above a truly special one, so
 * the lowest set bit always marks the first special byte.
 */
static inline uint64_t word_special(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t q = x ^ (ones * '"');
    uint64_t b = x ^ (ones * '\\');
    uint64_t t = ((q - ones) & ~q) | ((b - ones) & ~b) | ((x - ones * 0x20) & ~x) | x;
    return t & highs;
}

/* Index of the first byte from i that needs attention inside a string (or n). */
static inline size_t skip_plain(const unsigned char *s, size_t i, size_t n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (i + 8 <= n) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        uint64_t m = word_special(w);
        if (m)
            return i + ((size_t)__builtin_ctzll(m) >> 3);
        i += 8;
    }
#endif
    while (i < n && str_class[s[i]] == C_PLAIN)
        i++;
    return i;
}

/* String content from i (after the opening quote). Returns the index of the closing quote,
 * or SIZE_MAX (error filled). *flags gets TG__JF_ESCAPED when there are escapes, and
 * TG__JF_NUL when one of them is \u0000. */
static inline size_t scan_string(struct jp *p, size_t i, uint8_t *flags)
{
    const unsigned char *s = p->s;
    size_t n = p->len;
    for (;;) {
        i = skip_plain(s, i, n);
        if (i >= n) {
            fail_at(p, i, "string", "closing '\"'");
            return SIZE_MAX;
        }
        size_t k;
        switch (str_class[s[i]]) {
        case C_QUOTE:
            return i;
        case C_BSLASH:
            k = scan_escape(p, i);
            *flags |= TG__JF_ESCAPED;
            if (k == 6 && memcmp(s + i + 2, "0000", 4) == 0)
                *flags |= TG__JF_NUL;
            break;
        case C_CTRL:
            fail_at(p, i, "string", "'\\u00XX' escape for a control character");
            return SIZE_MAX;
        default:
            k = tg__json_utf8_valid1(s + i, n - i);
            if (!k)
                fail_at(p, i, "string", "valid UTF-8");
            break;
        }
        if (!k)
            return SIZE_MAX;
        i += k;
    }
}

static inline size_t scan_digits(const unsigned char *s, size_t i, size_t n)
{
    while (i < n && (unsigned)(s[i] - '0') < 10)
        i++;
    return i;
}

/* Number starting at i ('-' or a digit). Returns the index after it, or SIZE_MAX (error
 * filled). *flags gets TG__JF_NEG and TG__JF_FRAC. */
static inline size_t scan_number(struct jp *p, size_t i, uint8_t *flags)
{
    const unsigned char *s = p->s;
    size_t n = p->len;
    const char *bad = NULL;
    if (s[i] == '-') {
        *flags |= TG__JF_NEG;
        i++;
    }
    if (i >= n || (unsigned)(s[i] - '0') >= 10) {
        bad = "a digit";
    } else if (s[i] == '0') {
        if (++i < n && (unsigned)(s[i] - '0') < 10) {
            fail_found(p, i, "number", "no leading zeros", "a digit after '0'");
            return SIZE_MAX;
        }
    } else {
        i = scan_digits(s, i, n);
    }
    if (!bad && i < n && s[i] == '.') {
        *flags |= TG__JF_FRAC;
        if (++i >= n || (unsigned)(s[i] - '0') >= 10)
            bad = "a digit after '.'";
        i = scan_digits(s, i, n);
    }
    if (!bad && i < n && (s[i] | 0x20) == 'e') {
        *flags |= TG__JF_FRAC;
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i >= n || (unsigned)(s[i] - '0') >= 10)
            bad = "a digit in the exponent";
        i = scan_digits(s, i, n);
    }
    if (bad) {
        fail_at(p, i, "number", bad);
        return SIZE_MAX;
    }
    return i;
}

/* Literal word at i. Returns the index after it, or SIZE_MAX (error filled). */
static inline size_t scan_literal(struct jp *p, size_t i, const char *word, size_t wlen)
{
    if (i + wlen <= p->len && memcmp(p->s + i, word, wlen) == 0)
        return i + wlen;
    size_t k = 1;
    while (i + k < p->len && k < wlen && p->s[i + k] == (unsigned char)word[k])
        k++;
    char exp[16];
    snprintf(exp, sizeof exp, "'%s'", word);
    fail_at(p, i + k, "literal", exp);
    return SIZE_MAX;
}

/* Scalar value at i, written into *t. Returns the index after it, or SIZE_MAX. */
static inline size_t scan_scalar(struct jp *p, size_t i, tg__jtok *t)
{
    size_t e;
    int c = i < p->len ? p->s[i] : -1;
    switch (c) {
    case '"':
        t->type = TG__J_STRING;
        t->start = (uint32_t)(i + 1);
        e = scan_string(p, i + 1, &t->flags);
        t->len = (uint32_t)(e - i - 1);
        return e == SIZE_MAX ? e : e + 1;
    case 't':
        t->type = TG__J_TRUE;
        e = scan_literal(p, i, "true", 4);
        break;
    case 'f':
        t->type = TG__J_FALSE;
        e = scan_literal(p, i, "false", 5);
        break;
    case 'n':
        t->type = TG__J_NULL;
        e = scan_literal(p, i, "null", 4);
        break;
    case '-':
    case '0':
    case '1':
    case '2':
    case '3':
    case '4':
    case '5':
    case '6':
    case '7':
    case '8':
    case '9':
        t->type = TG__J_NUMBER;
        e = scan_number(p, i, &t->flags);
        break;
    default:
        fail_at(p, i, "value", "a JSON value");
        return SIZE_MAX;
    }
    t->len = (uint32_t)(e - i);
    return e;
}

/* Member name at i (a string), the ':' and whitespace. Fills start/len/flags of the key
 * token *k and returns the index of the value, or SIZE_MAX (error filled). */
static inline size_t scan_member_name(struct jp *p, size_t i, tg__jtok *k)
{
    const unsigned char *s = p->s;
    size_t n = p->len;
    if (i >= n || s[i] != '"') {
        fail_at(p, i, "object", "a '\"' starting a member name");
        return SIZE_MAX;
    }
    size_t e = scan_string(p, i + 1, &k->flags);
    if (e == SIZE_MAX)
        return e;
    k->start = (uint32_t)(i + 1);
    k->len = (uint32_t)(e - i - 1);
    i = skip_ws(s, e + 1, n);
    if (i >= n || s[i] != ':') {
        fail_at(p, i, "object", "':' after the member name");
        return SIZE_MAX;
    }
    return skip_ws(s, i + 1, n);
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
 * The driver. Each turn of the loop reads one value (preceded by its key inside an object);
 * after a value, closing brackets pop containers until a ',' starts the next turn or the
 * root is complete. All state lives in locals (the token array is the only memory written),
 * and is copied back to p/d only before growing the array or reporting an error.
 */
static int parse_doc(struct jp *p)
{
    const unsigned char *s = p->s;
    const size_t n = p->len;
    tg__jdoc *d = p->d;
    tg__jtok *toks = d->toks;
    uint32_t ntok = 0, cap = d->cap, parent = NO_PARENT, depth = 0;
    uint8_t ptype = TG__J_NONE; /* type of the open container */
    size_t i = skip_ws(s, 0, n);

#define SYNC() (p->pos = i, p->parent = parent, d->ntok = ntok)
#define RESERVE()                                                                                  \
    do {                                                                                           \
        if (ntok == cap) {                                                                         \
            SYNC();                                                                                \
            if (grow(p) != 0)                                                                      \
                return -1;                                                                         \
            toks = d->toks;                                                                        \
            cap = d->cap;                                                                          \
        }                                                                                          \
    } while (0)
#define FAIL(call)                                                                                 \
    do {                                                                                           \
        SYNC();                                                                                    \
        call;                                                                                      \
        return -1;                                                                                 \
    } while (0)

    for (;;) {
        if (ptype == TG__J_OBJECT) {
            RESERVE();
            toks[ntok] = (tg__jtok){.next = ntok + 1, .type = TG__J_STRING};
            if ((i = scan_member_name(p, i, &toks[ntok])) == SIZE_MAX)
                FAIL((void)0);
            ntok++;
            toks[parent].count++;
        } else if (ptype == TG__J_ARRAY) {
            toks[parent].count++;
        }
        RESERVE();
        tg__jtok *t = &toks[ntok];
        *t = (tg__jtok){.start = (uint32_t)i, .next = ntok + 1};
        if (i < n && (s[i] == '{' || s[i] == '[')) {
            bool obj = s[i] == '{';
            if (depth >= d->lim.max_depth)
                FAIL(fail_depth(p, i, depth + 1, obj));
            t->type = obj ? TG__J_OBJECT : TG__J_ARRAY;
            t->next = parent; /* parent link while open */
            parent = ntok++;
            ptype = t->type;
            depth++;
            i = skip_ws(s, i + 1, n);
            if (i >= n || s[i] != (obj ? '}' : ']'))
                continue;
        } else {
            size_t e = scan_scalar(p, i, t);
            if (e == SIZE_MAX)
                FAIL((void)0);
            ntok++;
            i = skip_ws(s, e, n);
        }
        /* After a value: close containers until ',' or the end of the root. */
        for (;;) {
            if (parent == NO_PARENT) {
                d->ntok = ntok;
                if (i < n)
                    FAIL(fail_at(p, i, "document", "end of input after the value"));
                return 0;
            }
            if (i < n && s[i] == ',') {
                i = skip_ws(s, i + 1, n);
                break;
            }
            if (i >= n || s[i] != (ptype == TG__J_OBJECT ? '}' : ']'))
                FAIL(fail_at(p, i, tg__json_type_name((tg__jtype)ptype),
                             ptype == TG__J_OBJECT ? "',' or '}'" : "',' or ']'"));
            tg__jtok *c = &toks[parent];
            c->len = (uint32_t)(i + 1 - c->start);
            parent = c->next;
            c->next = ntok;
            ptype = parent == NO_PARENT ? TG__J_NONE : toks[parent].type;
            depth--;
            i = skip_ws(s, i + 1, n);
        }
    }
#undef SYNC
#undef RESERVE
#undef FAIL
}

int tg__json_parse(tg__jdoc *d, const char *src, size_t len, tg__jerr *err)
{
    tg__jerr scratch; /* written by the parser before any read */
    if (!d->lim.max_depth || !d->lim.max_bytes || !d->lim.max_tokens)
        apply_defaults(&d->lim); /* a zeroed doc that skipped tg__jdoc_init */
    struct jp p = {
        .s = (const unsigned char *)src,
        .len = len,
        .d = d,
        // cppcheck-suppress uninitvar ; only ever written through p.err, never read first
        .err = err ? err : &scratch,
        .parent = NO_PARENT,
        .max_tokens = d->lim.max_tokens,
    };
    d->src = src;
    d->len = len;
    d->ntok = 0;
    p.err->nomem = false;
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
