/* mpframe: middle-proxy frames (mpframe.h). */
#include "proxy/wire/mpframe.h"

#include <pthread.h>
#include <string.h>

/*
 * CRC-32/ISO-HDLC (zlib's crc32, polynomial 0xedb88320 reflected).
 *
 * Portable: eight bytes a step ("slicing by 8"): t[0] is the byte-wise table; t[k][b] is
 * the CRC of byte b followed by k zero bytes, so eight table lookups fold eight input bytes
 * at once. 8 KiB of tables, filled once (pthread_once).
 *
 * x86-64 with PCLMULQDQ (checked at run time): carry-less multiplication folds the data
 * 64 bytes a step in four 128-bit lanes, then the lanes into one, 16 bytes a step, and a
 * Barrett reduction gives the 32-bit remainder (Intel's "Fast CRC Computation for Generic
 * Polynomials Using PCLMULQDQ", the bit-reflected form). The fold constants are x^k mod P
 * for the distances folded (bit-reflected, shifted by one): 512+32 and 512-32 bits for the
 * four-lane step, 128+32 and 128-32 for the one-lane step, 64 for the last fold; P and
 * floor(x^64 / P) for the reduction. About ten times the table's speed; the tables do what
 * is left (under 64 bytes, and the tail under 16).
 */
static uint32_t crc_t[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static bool crc_use_clmul;

static void crc_fill(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
        crc_t[0][i] = c;
    }
    for (int k = 1; k < 8; k++)
        for (uint32_t i = 0; i < 256; i++)
            crc_t[k][i] = (crc_t[k - 1][i] >> 8) ^ crc_t[0][crc_t[k - 1][i] & 0xff];
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    crc_use_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#endif
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The table loop on the inverted state. */
static uint32_t crc_tables(uint32_t crc, const uint8_t *s, size_t n)
{
    for (; n >= 8; s += 8, n -= 8) {
        uint32_t a = rd32(s) ^ crc, b = rd32(s + 4);
        crc = crc_t[7][a & 0xff] ^ crc_t[6][(a >> 8) & 0xff] ^ crc_t[5][(a >> 16) & 0xff] ^
              crc_t[4][a >> 24] ^ crc_t[3][b & 0xff] ^ crc_t[2][(b >> 8) & 0xff] ^
              crc_t[1][(b >> 16) & 0xff] ^ crc_t[0][b >> 24];
    }
    for (; n; s++, n--)
        crc = crc_t[0][(crc ^ *s) & 0xff] ^ (crc >> 8);
    return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

/* One 128-bit lane folded forward by the distance k encodes, with the next data d. */
__attribute__((target("pclmul,sse4.1"))) static inline __m128i fold(__m128i x, __m128i k, __m128i d)
{
    __m128i lo = _mm_clmulepi64_si128(x, k, 0x00), hi = _mm_clmulepi64_si128(x, k, 0x11);
    return _mm_xor_si128(_mm_xor_si128(lo, hi), d);
}

/* The inverted state over s[0..n), n >= 64 and a multiple of 16. */
__attribute__((target("pclmul,sse4.1"))) static uint32_t crc_clmul(uint32_t crc, const uint8_t *s,
                                                                   size_t n)
{
    const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596, 0x154442bd4);
    const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009e, 0x1751997d0);
    const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124);
    const __m128i poly = _mm_set_epi64x(0x1f7011641, 0x1db710641); /* u, P */
    const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
    __m128i x1 = _mm_loadu_si128((const __m128i *)(const void *)s);
    __m128i x2 = _mm_loadu_si128((const __m128i *)(const void *)(s + 16));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(const void *)(s + 32));
    __m128i x4 = _mm_loadu_si128((const __m128i *)(const void *)(s + 48));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)crc));
    s += 64, n -= 64;
    for (; n >= 64; s += 64, n -= 64) {
        x1 = fold(x1, k1k2, _mm_loadu_si128((const __m128i *)(const void *)s));
        x2 = fold(x2, k1k2, _mm_loadu_si128((const __m128i *)(const void *)(s + 16)));
        x3 = fold(x3, k1k2, _mm_loadu_si128((const __m128i *)(const void *)(s + 32)));
        x4 = fold(x4, k1k2, _mm_loadu_si128((const __m128i *)(const void *)(s + 48)));
    }
    x1 = fold(x1, k3k4, x2);
    x1 = fold(x1, k3k4, x3);
    x1 = fold(x1, k3k4, x4);
    for (; n >= 16; s += 16, n -= 16)
        x1 = fold(x1, k3k4, _mm_loadu_si128((const __m128i *)(const void *)s));
    /* 128 -> 64 bits, then 64 -> 32 */
    x2 = _mm_srli_si128(x1, 8);
    x1 = _mm_xor_si128(_mm_clmulepi64_si128(x1, k3k4, 0x10), x2);
    x2 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), k5, 0x00);
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 4), x2);
    /* Barrett reduction */
    x2 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), poly, 0x10);
    x2 = _mm_clmulepi64_si128(_mm_and_si128(x2, mask32), poly, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}
#endif

uint32_t mpframe_crc32_portable(uint32_t crc, const void *p, size_t n)
{
    pthread_once(&crc_once, crc_fill);
    return ~crc_tables(~crc, p, n);
}

uint32_t mpframe_crc32(uint32_t crc, const void *p, size_t n)
{
    pthread_once(&crc_once, crc_fill);
    const uint8_t *s = p;
    crc = ~crc;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (crc_use_clmul && n >= 64) {
        size_t whole = n & ~(size_t)15;
        crc = crc_clmul(crc, s, whole);
        s += whole, n -= whole;
    }
#endif
    return ~crc_tables(crc, s, n);
}

static void wr32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16),
    p[3] = (uint8_t)(v >> 24);
}

int mpframe_parse(const uint8_t *b, size_t n, size_t max_len, struct mpframe *out, const char **why)
{
    static const char *none = "";
    const char *dummy;
    if (why == NULL)
        why = &dummy;
    *why = none;
    memset(out, 0, sizeof *out);
    if (max_len == 0 || max_len > MPFRAME_MAX)
        max_len = MPFRAME_MAX;
    size_t at = 0;
    while (n - at >= 4 && rd32(b + at) == MPFRAME_PAD_WORD)
        at += 4;
    out->consumed = at;
    if (n - at < 4)
        return MPFRAME_MORE;
    uint32_t len = rd32(b + at);
    if (len % 4 != 0) {
        *why = "frame length not a multiple of 4";
        return MPFRAME_BAD;
    }
    if (len < MPFRAME_OVERHEAD) {
        *why = "frame length under 12";
        return MPFRAME_BAD;
    }
    if (len > max_len) {
        *why = "frame length over the limit";
        return MPFRAME_BAD;
    }
    if (n - at < len)
        return MPFRAME_MORE;
    uint32_t crc = mpframe_crc32(0, b + at, len - 4);
    if (crc != rd32(b + at + len - 4)) {
        *why = "frame CRC32 mismatch";
        return MPFRAME_BAD;
    }
    out->seq = (int32_t)rd32(b + at + 4);
    out->off = at + 8;
    out->len = len - MPFRAME_OVERHEAD;
    out->consumed = at + len;
    return MPFRAME_OK;
}

size_t mpframe_size(size_t n, bool pad16)
{
    size_t s = n + MPFRAME_OVERHEAD;
    return pad16 ? (s + 15) & ~(size_t)15 : s;
}

size_t mpframe_build(uint8_t *out, size_t cap, int32_t seq, const void *payload, size_t n,
                     bool pad16)
{
    if (n % 4 != 0 || n > MPFRAME_MAX - MPFRAME_OVERHEAD)
        return 0;
    size_t total = mpframe_size(n, pad16);
    if (cap < total)
        return 0;
    if (payload != out + 8)
        memmove(out + 8, payload, n);
    wr32(out, (uint32_t)(n + MPFRAME_OVERHEAD));
    wr32(out + 4, (uint32_t)seq);
    wr32(out + 8 + n, mpframe_crc32(0, out, n + 8));
    for (size_t at = n + MPFRAME_OVERHEAD; at < total; at += 4)
        wr32(out + at, MPFRAME_PAD_WORD);
    return total;
}
