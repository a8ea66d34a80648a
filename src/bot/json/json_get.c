/*
 * json_get: value accessors over a parsed tg__jdoc (strings, integers, doubles, booleans,
 * object lookup) and the error helpers (tg__json_fail, tg__json_path, tg__json_errmsg).
 *
 * The tokenizer has validated every byte, so nothing here re-checks syntax: a string token's
 * escapes are well formed and its surrogate escapes come in pairs, a number token matches
 * the RFC 8259 grammar. Type and range are what these functions check.
 *
 * Doubles: integer literals of up to 15 digits and decimals with at most 15 significant
 * digits and a small exponent are converted exactly with one IEEE operation (both operands
 * are exact, so the result is correctly rounded); everything else goes through strtod_l()
 * with the "C" locale on a bounded copy, so the result never depends on setlocale().
 *
 * Thread-safety: reentrant; the "C" locale object is created once (pthread_once).
 */
#include "bot/json/json.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bot/json/json_int.h"
#include "core/alloc.h"

static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static locale_t c_locale;

static void c_locale_init(void)
{
    c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
}

size_t tg__json_unescape1(const char *raw, char *out, size_t *used)
{
    switch (raw[1]) {
    case 'b':
        *out = '\b';
        break;
    case 'f':
        *out = '\f';
        break;
    case 'n':
        *out = '\n';
        break;
    case 'r':
        *out = '\r';
        break;
    case 't':
        *out = '\t';
        break;
    case 'u': {
        uint32_t cp = 0;
        for (int k = 2; k < 6; k++)
            cp = cp << 4 | (uint32_t)tg__hexval((unsigned char)raw[k]);
        *used = 6;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t lo = 0;
            for (int k = 8; k < 12; k++)
                lo = lo << 4 | (uint32_t)tg__hexval((unsigned char)raw[k]);
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            *used = 12;
        }
        return tg__utf8_put(cp, out);
    }
    default:
        *out = raw[1];
        break; /* '"', '\\', '/' */
    }
    *used = 2;
    return 1;
}

/* Decode raw[0..n) (validated string content) into out; returns the decoded length, which
 * is never more than n. */
static size_t unescape(const char *raw, size_t n, char *out)
{
    size_t i = 0, o = 0;
    while (i < n) {
        const char *bs = memchr(raw + i, '\\', n - i);
        size_t run = bs ? (size_t)(bs - (raw + i)) : n - i;
        memcpy(out + o, raw + i, run);
        o += run;
        i += run;
        if (!bs)
            break;
        size_t used;
        o += tg__json_unescape1(raw + i, out + o, &used);
        i += used;
    }
    return o;
}

bool tg__json_str_eq(const tg__jdoc *d, uint32_t tok, const char *s, size_t n)
{
    const tg__jtok *t = &d->toks[tok];
    if (t->type != TG__J_STRING)
        return false;
    const char *raw = d->src + t->start;
    if (!(t->flags & TG__JF_ESCAPED))
        return t->len == n && memcmp(raw, s, n) == 0;
    size_t i = 0, o = 0;
    while (i < t->len) {
        if (raw[i] != '\\') {
            if (o >= n || raw[i] != s[o])
                return false;
            i++;
            o++;
            continue;
        }
        char tmp[4];
        size_t used, k = tg__json_unescape1(raw + i, tmp, &used);
        if (k > n - o || memcmp(tmp, s + o, k) != 0)
            return false;
        i += used;
        o += k;
    }
    return o == n;
}

char *tg__json_str_dup(const tg__jdoc *d, uint32_t tok, tg__arena *a, size_t *len)
{
    const tg__jtok *t = &d->toks[tok];
    if (t->type != TG__J_STRING)
        return NULL;
    char *out = tg__arena_alloc_align(a, (size_t)t->len + 1, 1);
    if (!out)
        return NULL;
    size_t n;
    if (t->flags & TG__JF_ESCAPED) {
        n = unescape(d->src + t->start, t->len, out);
    } else {
        memcpy(out, d->src + t->start, t->len);
        n = t->len;
    }
    out[n] = '\0';
    if (len)
        *len = n;
    return out;
}

long tg__json_str_copy(const tg__jdoc *d, uint32_t tok, char *out, size_t cap)
{
    const tg__jtok *t = &d->toks[tok];
    if (t->type != TG__J_STRING || cap == 0)
        return -1;
    const char *raw = d->src + t->start;
    if (!(t->flags & TG__JF_ESCAPED)) {
        if (t->len >= cap)
            return -1;
        memcpy(out, raw, t->len);
        out[t->len] = '\0';
        return (long)t->len;
    }
    size_t i = 0, o = 0;
    while (i < t->len) {
        char tmp[4];
        size_t used = 1, k = 1;
        if (raw[i] == '\\')
            k = tg__json_unescape1(raw + i, tmp, &used);
        else
            tmp[0] = raw[i];
        if (k >= cap - o) /* keep room for the NUL */
            return -1;
        memcpy(out + o, tmp, k);
        o += k;
        i += used;
    }
    out[o] = '\0';
    return (long)o;
}

/* Copy of a token's raw text for a message, shortened with "..." past 40 bytes. */
static void raw_excerpt(const tg__jdoc *d, uint32_t tok, char *out, size_t cap)
{
    size_t n;
    const char *r = tg__json_raw(d, tok, &n);
    if (n > 40)
        snprintf(out, cap, "%.37s...", r);
    else
        snprintf(out, cap, "%.*s", (int)n, r);
}

int tg__json_fail(const tg__jdoc *d, uint32_t tok, tg__jerr *err, const char *expected)
{
    if (!err)
        return -1;
    const tg__jtok *t = &d->toks[tok];
    err->offset = t->type == TG__J_STRING ? (size_t)t->start - 1 : t->start;
    err->tok = tok;
    if (t->type == TG__J_NUMBER) {
        char ex[48];
        raw_excerpt(d, tok, ex, sizeof ex);
        snprintf(err->msg, sizeof err->msg, "value: expected %s, found number %s", expected, ex);
    } else {
        snprintf(err->msg, sizeof err->msg, "value: expected %s, found %s", expected,
                 tg__json_type_name((tg__jtype)t->type));
    }
    return -1;
}

static int range_fail(const tg__jdoc *d, uint32_t tok, tg__jerr *err, const char *what,
                      const char *range)
{
    if (!err)
        return -1;
    char ex[48];
    raw_excerpt(d, tok, ex, sizeof ex);
    err->offset = d->toks[tok].start;
    err->tok = tok;
    snprintf(err->msg, sizeof err->msg, "%s: %s is out of range for %s", what, ex, range);
    return -1;
}

int tg__json_get_i64(const tg__jdoc *d, uint32_t tok, int64_t *out, tg__jerr *err)
{
    const tg__jtok *t = &d->toks[tok];
    if (t->type != TG__J_NUMBER || (t->flags & TG__JF_FRAC))
        return tg__json_fail(d, tok, err, "integer");
    const char *s = d->src + t->start;
    bool neg = t->flags & TG__JF_NEG;
    size_t i = neg, ndig = t->len - i;
    /* Up to 19 digits fit in uint64_t without overflow (10^19 - 1 < 2^64). */
    if (ndig > 19)
        return range_fail(d, tok, err, "integer", "int64");
    uint64_t u = 0;
    for (; i < t->len; i++)
        u = u * 10 + (uint64_t)(s[i] - '0');
    /* |INT64_MIN| = INT64_MAX + 1 */
    if (u > (uint64_t)INT64_MAX + neg)
        return range_fail(d, tok, err, "integer", "int64");
    *out = neg ? (int64_t)(0 - u) : (int64_t)u;
    return 0;
}

int tg__json_get_i32(const tg__jdoc *d, uint32_t tok, int32_t *out, tg__jerr *err)
{
    int64_t v;
    const tg__jtok *t = &d->toks[tok];
    if (t->type != TG__J_NUMBER || (t->flags & TG__JF_FRAC))
        return tg__json_fail(d, tok, err, "integer");
    if (tg__json_get_i64(d, tok, &v, NULL) != 0 || v < INT32_MIN || v > INT32_MAX)
        return range_fail(d, tok, err, "integer", "int32");
    *out = (int32_t)v;
    return 0;
}

static const double pow10_exact[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                       1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                       1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* Accumulate significant digits of s[*i..) into *m; false once there are more than 15. */
static bool take_digits(const char *s, size_t n, size_t *i, uint64_t *m, int *sig, int *count)
{
    for (; *i < n && (unsigned)(s[*i] - '0') < 10; (*i)++, (*count)++) {
        if (*m == 0 && s[*i] == '0')
            continue;
        if (++*sig > 15)
            return false;
        *m = *m * 10 + (uint64_t)(s[*i] - '0');
    }
    return true;
}

/* Exact conversion when the mantissa has <= 15 significant digits and the decimal exponent
 * is within +-22 (both m and 10^e are exact doubles, so one multiply or divide rounds
 * correctly). Returns 0 on success, -1 when the slow path is needed. */
static int fast_double(const char *s, size_t n, double *out)
{
    size_t i = 0;
    bool neg = s[0] == '-';
    uint64_t m = 0;
    int sig = 0, ndig = 0, nfrac = 0, e = 0;
    i += neg;
    if (!take_digits(s, n, &i, &m, &sig, &ndig))
        return -1;
    if (i < n && s[i] == '.') {
        i++;
        if (!take_digits(s, n, &i, &m, &sig, &nfrac))
            return -1;
    }
    if (i < n) { /* exponent */
        bool eneg = s[++i] == '-';
        i += (s[i] == '-' || s[i] == '+');
        for (; i < n; i++)
            if ((e = e * 10 + (s[i] - '0')) > 1000)
                return -1;
        e = eneg ? -e : e;
    }
    double v = (double)m;
    int exp10 = e - nfrac;
    if (m != 0 && (exp10 < -22 || exp10 > 22))
        return -1;
    if (m != 0)
        v = exp10 < 0 ? v / pow10_exact[-exp10] : v * pow10_exact[exp10];
    *out = neg ? -v : v;
    return 0;
}

int tg__json_get_double(const tg__jdoc *d, uint32_t tok, double *out, tg__jerr *err)
{
    const tg__jtok *t = &d->toks[tok];
    if (t->type != TG__J_NUMBER)
        return tg__json_fail(d, tok, err, "number");
    const char *s = d->src + t->start;
    if (fast_double(s, t->len, out) == 0)
        return 0;
    char small[128];
    char *copy = small;
    if (t->len >= sizeof small && !(copy = tg__malloc((size_t)t->len + 1))) {
        if (err) {
            err->offset = t->start;
            err->tok = tok;
            snprintf(err->msg, sizeof err->msg, "number: expected memory, found out of memory");
            err->nomem = true;
        }
        return -1;
    }
    memcpy(copy, s, t->len);
    copy[t->len] = '\0';
    pthread_once(&c_locale_once, c_locale_init);
    errno = 0;
    double v = c_locale ? strtod_l(copy, NULL, c_locale) : strtod(copy, NULL);
    int overflow = errno == ERANGE && isinf(v);
    if (copy != small)
        tg__free(copy);
    if (overflow)
        return range_fail(d, tok, err, "number", "double");
    *out = v;
    return 0;
}

int tg__json_get_bool(const tg__jdoc *d, uint32_t tok, bool *out, tg__jerr *err)
{
    uint8_t type = d->toks[tok].type;
    if (type != TG__J_TRUE && type != TG__J_FALSE)
        return tg__json_fail(d, tok, err, "boolean");
    *out = type == TG__J_TRUE;
    return 0;
}

uint32_t tg__json_obj_get(const tg__jdoc *d, uint32_t obj, const char *key)
{
    const tg__jtok *o = &d->toks[obj];
    if (o->type != TG__J_OBJECT)
        return UINT32_MAX;
    size_t n = strlen(key);
    uint32_t k = obj + 1;
    for (uint32_t i = 0; i < o->count && k + 1 < d->ntok; i++) {
        uint32_t v = k + 1;
        if (tg__json_str_eq(d, k, key, n))
            return v;
        k = d->toks[v].next;
    }
    return UINT32_MAX;
}
