/*
 * json_write: the JSON writer (tg__jw). See json.h for the contract.
 *
 * Commas: bit (depth-1) of w->nonempty says the innermost open container already has a
 * member. Keys and array elements after the first get a comma; a value that directly follows
 * a key (the buffer ends with ':') never does. Top-level values (depth 0) get no comma.
 *
 * Strings: '"', '\\' and bytes below 0x20 are escaped (\n, \t... or \u00XX); everything else
 * is copied as is, runs of plain bytes with one memcpy. Invalid UTF-8 sets err = -EINVAL
 * rather than producing a document the server (or our own tokenizer) would reject.
 *
 * Numbers: integers through a small itoa; doubles as the shortest of %.15g, %.16g, %.17g
 * that reads back bit-exact, printed under the "C" locale so the decimal point is always
 * '.' (tg__fmt_double, core/str.h).
 *
 * Errors are sticky: the first failure is kept in w->err and every later call is a no-op.
 * Thread-safety: none; one writer per thread.
 */
#include "bot/json/json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bot/json/json_int.h"

#define MAX_DEPTH 64 /* bits in w->nonempty */

/* 0: copy; 1: escape with a short form; 2: \u00XX; 3: UTF-8 lead/continuation: validate */
static const uint8_t esc_class[256] = {
    2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 2, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
};

void tg__jw_init(tg__jw *w, tg__buf *buf)
{
    w->buf = buf;
    w->err = 0;
    w->depth = 0;
    w->nonempty = 0;
}

/* Room for n more bytes and the NUL; 0, or sets w->err. Inline when the buffer has room. */
static inline int reserve(tg__jw *w, size_t n)
{
    tg__buf *b = w->buf;
    if (n < b->cap - b->len && b->len + n <= b->max)
        return 0;
    int rc = tg__buf_reserve(b, n);
    if (rc)
        w->err = rc;
    return rc;
}

static inline void put(tg__jw *w, const void *p, size_t n)
{
    tg__buf *b = w->buf;
    /* fast path: room for the bytes and the NUL, within the cap (no call into core) */
    if (n < b->cap - b->len && b->len + n <= b->max) {
        memcpy(b->data + b->len, p, n);
        b->len += n;
        b->data[b->len] = '\0';
        return;
    }
    int rc = tg__buf_append(b, p, n);
    if (rc)
        w->err = rc;
}

/* Separator before a value (not a key). */
static inline void before_value(tg__jw *w)
{
    if (w->depth == 0)
        return;
    uint64_t bit = (uint64_t)1 << (w->depth - 1);
    tg__buf *b = w->buf;
    if (b->len && b->data[b->len - 1] == ':')
        return; /* value of an object member */
    if (w->nonempty & bit)
        put(w, ",", 1);
    w->nonempty |= bit;
}

static void begin(tg__jw *w, char open)
{
    if (w->err)
        return;
    if (w->depth >= MAX_DEPTH) {
        w->err = -EINVAL;
        return;
    }
    before_value(w);
    put(w, &open, 1);
    w->depth++;
    w->nonempty &= ~((uint64_t)1 << (w->depth - 1));
}

static void end(tg__jw *w, char close)
{
    if (w->err)
        return;
    if (w->depth == 0) {
        w->err = -EINVAL;
        return;
    }
    w->depth--;
    put(w, &close, 1);
}

void tg__jw_obj_begin(tg__jw *w)
{
    begin(w, '{');
}

void tg__jw_obj_end(tg__jw *w)
{
    end(w, '}');
}

void tg__jw_arr_begin(tg__jw *w)
{
    begin(w, '[');
}

void tg__jw_arr_end(tg__jw *w)
{
    end(w, ']');
}

void tg__jw_key(tg__jw *w, const char *key, size_t n)
{
    if (w->err)
        return;
    if (w->depth == 0) {
        w->err = -EINVAL;
        return;
    }
    uint64_t bit = (uint64_t)1 << (w->depth - 1);
    if (reserve(w, n + 4))
        return;
    char *o = w->buf->data + w->buf->len;
    if (w->nonempty & bit)
        *o++ = ',';
    w->nonempty |= bit;
    *o++ = '"';
    memcpy(o, key, n);
    o += n;
    *o++ = '"';
    *o++ = ':';
    w->buf->len = (size_t)(o - w->buf->data);
    w->buf->data[w->buf->len] = '\0';
}

static void put_string(tg__jw *w, const char *str, size_t n);

void tg__jw_key_escaped(tg__jw *w, const char *key, size_t n)
{
    if (w->err)
        return;
    if (w->depth == 0) {
        w->err = -EINVAL;
        return;
    }
    uint64_t bit = (uint64_t)1 << (w->depth - 1);
    if (w->nonempty & bit)
        put(w, ",", 1);
    w->nonempty |= bit;
    put_string(w, key, n);
    put(w, ":", 1);
}

/* Escape of byte c (class 1 or 2) into out; returns its length. */
static size_t escape_byte(unsigned char c, char *out)
{
    static const char hex[] = "0123456789abcdef";
    char s = 0;
    switch (c) {
    case '"':
        s = '"';
        break;
    case '\\':
        s = '\\';
        break;
    case '\b':
        s = 'b';
        break;
    case '\f':
        s = 'f';
        break;
    case '\n':
        s = 'n';
        break;
    case '\r':
        s = 'r';
        break;
    case '\t':
        s = 't';
        break;
    default:
        break;
    }
    out[0] = '\\';
    if (s) {
        out[1] = s;
        return 2;
    }
    out[1] = 'u';
    out[2] = '0';
    out[3] = '0';
    out[4] = hex[c >> 4];
    out[5] = hex[c & 15];
    return 6;
}

#define ONES  UINT64_C(0x0101010101010101)
#define HIGHS UINT64_C(0x8080808080808080)

/* Nonzero iff one of the 8 bytes of v needs attention: below 0x20, '"', '\\' or >= 0x80. */
static inline uint64_t word_special(uint64_t v)
{
    uint64_t ctl = (v - 0x20 * ONES) & ~v; /* high bit of a byte < 0x20 */
    uint64_t q = v ^ ('"' * ONES), bs = v ^ ('\\' * ONES);
    q = (q - ONES) & ~q;    /* high bit of a byte == '"' */
    bs = (bs - ONES) & ~bs; /* high bit of a byte == '\\' */
    return (ctl | q | bs | v) & HIGHS;
}

/* Index of the first byte at or after i that is not plain (copied as is), or n. Eight bytes
   at a time while none is special, then byte by byte. */
static inline size_t plain_run(const unsigned char *s, size_t i, size_t n)
{
    while (n - i >= 8) {
        uint64_t v;
        memcpy(&v, s + i, 8);
        if (word_special(v))
            break;
        i += 8;
    }
    while (i < n && esc_class[s[i]] == 0)
        i++;
    return i;
}

static void put_string(tg__jw *w, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    if (plain_run(s, 0, n) == n) { /* the common case: one reserve, one copy */
        if (reserve(w, n + 2))
            return;
        char *o = w->buf->data + w->buf->len;
        o[0] = '"';
        memcpy(o + 1, s, n);
        o[n + 1] = '"';
        w->buf->len += n + 2;
        w->buf->data[w->buf->len] = '\0';
        return;
    }
    put(w, "\"", 1);
    while (i < n && !w->err) {
        size_t run = plain_run(s, i, n);
        if (run > i)
            put(w, s + i, run - i);
        i = run;
        if (i >= n)
            break;
        if (esc_class[s[i]] == 3) {
            size_t k = tg__json_utf8_valid1(s + i, n - i);
            if (!k) {
                w->err = -EINVAL;
                return;
            }
            put(w, s + i, k);
            i += k;
        } else {
            char e[6];
            put(w, e, escape_byte(s[i], e));
            i++;
        }
    }
    put(w, "\"", 1);
}

void tg__jw_strn(tg__jw *w, const char *s, size_t n)
{
    if (w->err)
        return;
    before_value(w);
    put_string(w, s, n);
}

void tg__jw_str(tg__jw *w, const char *s)
{
    if (!s)
        tg__jw_null(w);
    else
        tg__jw_strn(w, s, strlen(s));
}

/* Decimal digits of v into the end of buf[24], two at a time; returns the first index used. */
static size_t itoa64(int64_t v, char buf[24])
{
    static const char pairs[201] = "00010203040506070809101112131415161718192021222324"
                                   "25262728293031323334353637383940414243444546474849"
                                   "50515253545556575859606162636465666768697071727374"
                                   "75767778798081828384858687888990919293949596979899";
    size_t i = 24;
    /* Work on the magnitude as unsigned so INT64_MIN is fine. */
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    while (u >= 100) {
        unsigned d = (unsigned)(u % 100) * 2;
        u /= 100;
        buf[--i] = pairs[d + 1];
        buf[--i] = pairs[d];
    }
    if (u >= 10) {
        buf[--i] = pairs[u * 2 + 1];
        buf[--i] = pairs[u * 2];
    } else {
        buf[--i] = (char)('0' + u);
    }
    if (v < 0)
        buf[--i] = '-';
    return i;
}

void tg__jw_i64(tg__jw *w, int64_t v)
{
    if (w->err)
        return;
    char buf[24];
    size_t i = itoa64(v, buf);
    before_value(w);
    put(w, buf + i, 24 - i);
}

void tg__jw_double(tg__jw *w, double v)
{
    if (w->err)
        return;
    if (!isfinite(v)) {
        w->err = -EINVAL;
        return;
    }
    char buf[40];
    int n = tg__fmt_double(v, buf, sizeof buf);
    if (n <= 0 || (size_t)n >= sizeof buf) {
        w->err = -EINVAL;
        return;
    }
    before_value(w);
    put(w, buf, (size_t)n);
}

void tg__jw_bool(tg__jw *w, bool v)
{
    if (w->err)
        return;
    before_value(w);
    if (v)
        put(w, "true", 4);
    else
        put(w, "false", 5);
}

void tg__jw_null(tg__jw *w)
{
    if (w->err)
        return;
    before_value(w);
    put(w, "null", 4);
}

void tg__jw_raw(tg__jw *w, const char *json, size_t n)
{
    if (w->err)
        return;
    before_value(w);
    put(w, json, n);
}
