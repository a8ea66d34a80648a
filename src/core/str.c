/* str: spans, hex, base64, constant-time compare, integer parsing. See str.h. */
#include "core/str.h"

#include <float.h>
#include <locale.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool tg__span_eq(tg__span a, const char *lit)
{
    size_t n = strlen(lit);
    return a.n == n && memcmp(a.p, lit, n) == 0;
}

bool tg__span_starts_with(tg__span a, const char *prefix)
{
    size_t n = strlen(prefix);
    return a.n >= n && memcmp(a.p, prefix, n) == 0;
}

bool tg__ct_equal(const void *a, const void *b, size_t n)
{
    const volatile unsigned char *x = a;
    const volatile unsigned char *y = b;
    unsigned char acc = 0;
    for (size_t i = 0; i < n; i++)
        acc |= (unsigned char)(x[i] ^ y[i]);
    return acc == 0;
}

bool tg__ct_streq(const char *a, size_t a_len, const char *b, size_t b_len)
{
    const volatile unsigned char *x = (const unsigned char *)a;
    const volatile unsigned char *y = (const unsigned char *)b;
    unsigned char acc = (unsigned char)(a_len != b_len);
    for (size_t i = 0; i < b_len; i++) {
        unsigned char xi = i < a_len ? x[i] : 0;
        acc |= (unsigned char)(xi ^ y[i]);
    }
    return acc == 0;
}

static const char HEX[] = "0123456789abcdef";

void tg__hex_encode(char *out, const void *in, size_t n)
{
    const unsigned char *p = in;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = HEX[p[i] >> 4];
        out[2 * i + 1] = HEX[p[i] & 15];
    }
    out[2 * n] = '\0';
}

size_t tg__hex_decode(void *out, size_t cap, const char *in, size_t n)
{
    if (n % 2 || n / 2 > cap)
        return TG__BAD_LEN;
    unsigned char *o = out;
    for (size_t i = 0; i < n; i += 2) {
        int hi = tg__hexval((unsigned char)in[i]);
        int lo = tg__hexval((unsigned char)in[i + 1]);
        if (hi < 0 || lo < 0)
            return TG__BAD_LEN;
        o[i / 2] = (unsigned char)(hi << 4 | lo);
    }
    return n / 2;
}

static const char B64_STD[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char B64_URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

size_t tg__b64_encode(char *out, size_t cap, const void *in, size_t n, int flags)
{
    const char *alpha = (flags & TG__B64_URL) ? B64_URL : B64_STD;
    bool pad = !(flags & TG__B64_NOPAD);
    size_t full = n / 3, rem = n % 3;
    size_t len = full * 4 + (rem ? (pad ? 4 : rem + 1) : 0);
    if (cap <= len)
        return TG__BAD_LEN;
    const unsigned char *p = in;
    char *o = out;
    for (size_t i = 0; i < full; i++, p += 3) {
        uint32_t v = (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
        *o++ = alpha[v >> 18];
        *o++ = alpha[(v >> 12) & 63];
        *o++ = alpha[(v >> 6) & 63];
        *o++ = alpha[v & 63];
    }
    if (rem) {
        uint32_t v = (uint32_t)p[0] << 16 | (rem == 2 ? (uint32_t)p[1] << 8 : 0);
        *o++ = alpha[v >> 18];
        *o++ = alpha[(v >> 12) & 63];
        if (rem == 2)
            *o++ = alpha[(v >> 6) & 63];
        if (pad) {
            if (rem == 1)
                *o++ = '=';
            *o++ = '=';
        }
    }
    *o = '\0';
    return len;
}

static int b64val(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || c == '-')
        return 62;
    if (c == '/' || c == '_')
        return 63;
    return -1;
}

size_t tg__b64_decode(void *out, size_t cap, const char *in, size_t n)
{
    while (n && in[n - 1] == '=')
        n--;
    if (n % 4 == 1)
        return TG__BAD_LEN;
    size_t len = n / 4 * 3 + (n % 4 ? n % 4 - 1 : 0);
    if (len > cap)
        return TG__BAD_LEN;
    unsigned char *o = out;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64val((unsigned char)in[i]);
        if (v < 0)
            return TG__BAD_LEN;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            *o++ = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    if (acc != 0) /* non-canonical trailing bits */
        return TG__BAD_LEN;
    return len;
}

int tg__parse_u64(const char *s, size_t n, uint64_t *out)
{
    if (n == 0 || n > 20)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int tg__parse_i64(const char *s, size_t n, int64_t *out)
{
    bool neg = n > 0 && s[0] == '-';
    uint64_t v;
    if (tg__parse_u64(s + neg, n - neg, &v) != 0)
        return -1;
    if (neg) {
        if (v > (uint64_t)INT64_MAX + 1)
            return -1;
        *out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    } else {
        if (v > (uint64_t)INT64_MAX)
            return -1;
        *out = (int64_t)v;
    }
    return 0;
}

int tg__url_encode(tg__buf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.' || c == '_' || c == '~';
        int rc;
        if (keep) {
            rc = tg__buf_putc(b, (char)c);
        } else {
            char esc[3] = {'%', "0123456789ABCDEF"[c >> 4], "0123456789ABCDEF"[c & 15]};
            rc = tg__buf_append(b, esc, 3);
        }
        if (rc)
            return rc;
    }
    return 0;
}

size_t tg__strlcpy(char *dst, const char *src, size_t cap)
{
    size_t n = strlen(src);
    if (cap) {
        size_t k = n < cap - 1 ? n : cap - 1;
        memcpy(dst, src, k);
        dst[k] = '\0';
    }
    return n;
}

static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static locale_t c_locale;

static void c_locale_init(void)
{
    c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
}

int tg__fmt_double(double v, char *out, size_t cap)
{
    pthread_once(&c_locale_once, c_locale_init);
    locale_t old = c_locale ? uselocale(c_locale) : (locale_t)0;
    int n = 0;
    /* Normal doubles carry more than 15 digits, so a shorter exact form would also show up
     * in %.15g (trailing zeros dropped). Subnormals carry fewer: search from 1 digit. */
    bool subnormal = v != 0 && v < DBL_MIN && v > -DBL_MIN;
    for (int prec = subnormal ? 1 : 15; prec <= 17; prec++) {
        n = snprintf(out, cap, "%.*g", prec, v);
        if (prec == 17 || strtod(out, NULL) == v)
            break;
    }
    if (old)
        uselocale(old);
    return n;
}
