/*
 * str: small string and byte helpers both products need.
 *
 * - spans (pointer + length, not NUL-terminated) for zero-copy views into input;
 * - hex and base64 (standard and URL alphabets, padding optional on decode) for proxy
 *   secrets, links and multipart boundaries;
 * - constant-time comparison for secrets and MACs;
 * - strict integer parsing (no whitespace, no sign surprises, overflow detected);
 * - URL percent-encoding for query strings and tg:// links.
 *
 * Return convention: lengths as size_t, or (size_t)-1 / -1 on malformed input or lack of
 * room. Thread-safety: all functions are reentrant; none allocate except through a tg__buf.
 */
#ifndef TGKIT_CORE_STR_H
#define TGKIT_CORE_STR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

typedef struct tg__span {
    const char *p;
    size_t n;
} tg__span;

#define TG__SPAN_LIT(s) ((tg__span){(s), sizeof(s) - 1})
#define TG__BAD_LEN     ((size_t)-1)

static inline tg__span tg__span_of(const char *s, size_t n)
{
    return (tg__span){s, n};
}
bool tg__span_eq(tg__span a, const char *lit);
bool tg__span_starts_with(tg__span a, const char *prefix);

/* Constant-time equality of two n-byte blocks (time depends on n only). */
bool tg__ct_equal(const void *a, const void *b, size_t n);
/* Constant-time equality of two strings of possibly different lengths (time depends on the
 * length of b, the secret one, only). */
bool tg__ct_streq(const char *a, size_t a_len, const char *b, size_t b_len);

/* Value of a hex digit (either case), or -1. */
static inline int tg__hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Encode code point cp (a Unicode scalar value) as UTF-8 into out (room for 4 bytes).
 * Returns the number of bytes written. */
static inline size_t tg__utf8_put(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Lowercase hex of in[0..n) into out (2n+1 bytes with NUL). */
void tg__hex_encode(char *out, const void *in, size_t n);
/* Decode 2k hex digits (either case) into out (cap bytes). Returns k or TG__BAD_LEN. */
size_t tg__hex_decode(void *out, size_t cap, const char *in, size_t n);

enum { TG__B64_STD = 0, TG__B64_URL = 1, TG__B64_NOPAD = 2 };
/* Encode into out (cap bytes, NUL added). Returns the length or TG__BAD_LEN if cap is short. */
size_t tg__b64_encode(char *out, size_t cap, const void *in, size_t n, int flags);
/* Decode either alphabet, padding optional; rejects anything else. Returns the byte count or
 * TG__BAD_LEN. */
size_t tg__b64_decode(void *out, size_t cap, const char *in, size_t n);

/* Strict decimal integer parse of the whole span: optional '-', digits, no leading '+',
 * no whitespace. Returns 0 or -1 (malformed or out of range). */
int tg__parse_i64(const char *s, size_t n, int64_t *out);
int tg__parse_u64(const char *s, size_t n, uint64_t *out);

/* Append s percent-encoded (RFC 3986 unreserved characters kept) to b. 0 or -errno. */
int tg__url_encode(tg__buf *b, const char *s, size_t n);

/* The shortest of %.15g, %.16g, %.17g (subnormals: from %.1g) that strtod reads back to
 * v exactly, in the C locale whatever the process's: 0.007 for 0.007, not
 * 0.0070000000000000001. Returns snprintf's result (>= cap: truncated). NaN and infinities
 * print as snprintf does ("nan", "inf"); callers with other spellings handle them first. */
int tg__fmt_double(double v, char *out, size_t cap);

/* Bounded copy that always NUL-terminates (when cap > 0). Returns strlen(src). */
size_t tg__strlcpy(char *dst, const char *src, size_t cap);

#endif
