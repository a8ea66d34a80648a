/*
 * aesctr: AES-256-CTR on AES-NI (see aesctr.h).
 *
 * The functions that use the instructions are compiled for them alone (target attribute),
 * so the rest of the program stays baseline x86-64 and a CPU without them never runs one:
 * crypto.c calls aesctr_xor only when aesctr_available().
 */
#include "proxy/wire/aesctr.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>

#define AESCTR_TARGET __attribute__((target("aes,sse4.1")))
/* the same rounds on two blocks per instruction (VAES on 256-bit registers) */
#define AESCTR_WIDE __attribute__((target("aes,sse4.1,avx2,vaes")))

static int have = -1; /* atomic: -1 unknown, else bit 0 AES-NI, bit 1 VAES with AVX2 */
static int wide_off;  /* atomic: aesctr_wide(false) */

static int cpu_features(void)
{
    int h = __atomic_load_n(&have, __ATOMIC_RELAXED);
    if (h >= 0)
        return h;
    unsigned a, b, c, d;
    __builtin_cpu_init();
    h = __builtin_cpu_supports("aes") && __builtin_cpu_supports("sse4.1");
    /* CPUID leaf 7, ECX bit 9: VAES (clang 14's __builtin_cpu_supports has no name for
       it); AVX2 from the builtin, which also checks that the OS saves the registers */
    if (h && __builtin_cpu_supports("avx2") && __get_cpuid_count(7, 0, &a, &b, &c, &d) &&
        (c & (1u << 9)))
        h |= 2;
    __atomic_store_n(&have, h, __ATOMIC_RELAXED); /* idempotent: a race only repeats it */
    return h;
}

bool aesctr_available(void)
{
    return cpu_features() & 1;
}

bool aesctr_wide(bool on)
{
    __atomic_store_n(&wide_off, !on, __ATOMIC_RELAXED);
    return (cpu_features() & 2) && on;
}

static bool use_wide(void)
{
    return (cpu_features() & 2) && !__atomic_load_n(&wide_off, __ATOMIC_RELAXED);
}

/* Zero memory the compiler cannot prove is read again (the asm claims to read it). */
static inline void wipe(void *p, size_t n)
{
    memset(p, 0, n);
    __asm__ volatile("" : : "r"(p) : "memory");
}

/* Key schedule, four words at a time: with k the four words eight back and t the
   transformed previous word (broadcast to all four lanes), word j of the result is
   t ^ k[0] ^ ... ^ k[j] (each w[i] = w[i-8] ^ w[i-1], w[i-1] transformed for the first). */
AESCTR_TARGET static inline __m128i next4(__m128i k, __m128i t)
{
    k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
    k = _mm_xor_si128(k, _mm_slli_si128(k, 8));
    return _mm_xor_si128(k, t);
}

/* Round keys 2i and 2i+1. AESKEYGENASSIST gives, in lane 3, RotWord(SubWord(x[3])) ^ rcon
   (what starts each eight words) and, in lane 2, SubWord(x[3]) (the middle of the eight,
   AES-256's extra step). The rcon must be an immediate, hence a macro. */
#define EXPAND_FIRST(i, rcon)                                                                     \
    rk[2 * (i)] = next4(rk[2 * (i) - 2],                                                          \
                        _mm_shuffle_epi32(_mm_aeskeygenassist_si128(rk[2 * (i) - 1], rcon), 0xff))
#define EXPAND_SECOND(i)                                                                          \
    rk[2 * (i) + 1] = next4(rk[2 * (i) - 1],                                                      \
                            _mm_shuffle_epi32(_mm_aeskeygenassist_si128(rk[2 * (i)], 0), 0xaa))

/* FIPS-197 AES-256 key expansion: 60 words, as 15 round keys. */
AESCTR_TARGET static void expand_key(const uint8_t key[32], __m128i rk[15])
{
    rk[0] = _mm_loadu_si128((const __m128i *)(const void *)key);
    rk[1] = _mm_loadu_si128((const __m128i *)(const void *)(key + 16));
    EXPAND_FIRST(1, 0x01);
    EXPAND_SECOND(1);
    EXPAND_FIRST(2, 0x02);
    EXPAND_SECOND(2);
    EXPAND_FIRST(3, 0x04);
    EXPAND_SECOND(3);
    EXPAND_FIRST(4, 0x08);
    EXPAND_SECOND(4);
    EXPAND_FIRST(5, 0x10);
    EXPAND_SECOND(5);
    EXPAND_FIRST(6, 0x20);
    EXPAND_SECOND(6);
    EXPAND_FIRST(7, 0x40); /* rk[14]: the schedule ends after its 60th word */
}

static inline uint64_t load_be64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}

/* The counter block (hi ‖ lo, big-endian). */
AESCTR_TARGET static inline __m128i counter_block(uint64_t hi, uint64_t lo)
{
    const __m128i reverse = _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    return _mm_shuffle_epi8(_mm_set_epi64x((long long)hi, (long long)lo), reverse);
}

/* Counter block number lo + j of the stream, with the carry into hi. */
#define COUNTER(j) counter_block(hi + (lo + (j) < lo), lo + (j))

AESCTR_TARGET static inline __m128i encrypt1(const __m128i rk[15], __m128i b)
{
    b = _mm_xor_si128(b, rk[0]);
    for (int r = 1; r < 14; r++)
        b = _mm_aesenc_si128(b, rk[r]);
    return _mm_aesenclast_si128(b, rk[14]);
}

/* out = in ^ ks for n < 16 bytes (in NULL: the keystream itself). */
static inline void xor_tail(uint8_t *out, const uint8_t *in, const uint8_t *ks, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (uint8_t)((in ? in[i] : 0) ^ ks[i]);
}

#define EACH8(op) op(0) op(1) op(2) op(3) op(4) op(5) op(6) op(7)
#define B_INIT(j)  __m128i b##j = _mm_xor_si128(COUNTER(j), rk[0]);
#define B_ENC(j)   b##j = _mm_aesenc_si128(b##j, k);
#define B_LAST(j)  b##j = _mm_aesenclast_si128(b##j, k);
#define B_XOR(j)   b##j = _mm_xor_si128(b##j, _mm_loadu_si128((const __m128i *)(const void *)(in + done + 16 * (j))));
#define B_STORE(j) _mm_storeu_si128((__m128i *)(void *)(out + done + 16 * (j)), b##j);

#define W_INIT(m)                                                                                 \
    __m256i b##m = _mm256_xor_si256(                                                              \
        _mm256_shuffle_epi8(_mm256_add_epi64(base, _mm256_set_epi64x(0, 2 * (m) + 1, 0, 2 * (m))),  \
                            reverse),                                                             \
        k);
#define W_ENC(m)   b##m = _mm256_aesenc_epi128(b##m, k);
#define W_LAST(m)  b##m = _mm256_aesenclast_epi128(b##m, k);
#define W_XOR(m)   b##m = _mm256_xor_si256(b##m, _mm256_loadu_si256((const __m256i *)(const void *)(in + done + 32 * (m))));
#define W_STORE(m) _mm256_storeu_si256((__m256i *)(void *)(out + done + 32 * (m)), b##m);

/* Sixteen blocks at a time while their counters' low halves do not wrap (the counters are
   built by 64-bit adds on the byte-reversed block); returns the bytes done and advances
   the counter. The rest, and a batch that would wrap, go to the 128-bit loops. */
AESCTR_WIDE static size_t xor_wide(const __m128i rk[15], uint64_t *hi, uint64_t *lo,
                                   const uint8_t *in, uint8_t *out, size_t n)
{
    const __m256i reverse = _mm256_broadcastsi128_si256(
        _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    size_t done = 0;
    for (; n - done >= 256 && *lo <= UINT64_MAX - 15; done += 256) {
        const __m256i base =
            _mm256_broadcastsi128_si256(_mm_set_epi64x((long long)*hi, (long long)*lo));
        __m256i k = _mm256_broadcastsi128_si256(rk[0]);
        EACH8(W_INIT)
        for (int r = 1; r < 14; r++) {
            k = _mm256_broadcastsi128_si256(rk[r]);
            EACH8(W_ENC)
        }
        k = _mm256_broadcastsi128_si256(rk[14]);
        EACH8(W_LAST)
        if (in) {
            EACH8(W_XOR)
        }
        EACH8(W_STORE)
        uint64_t was = *lo;
        *lo += 16;
        *hi += *lo < was;
    }
    return done; /* the compiler clears the upper register halves (vzeroupper) on return */
}

AESCTR_TARGET void aesctr_xor(const uint8_t key[32], const uint8_t iv[16], uint64_t pos,
                              const uint8_t *in, uint8_t *out, size_t n)
{
    __m128i rk[15];
    uint8_t part[16];
    size_t done = 0;
    expand_key(key, rk);
    uint64_t hi = load_be64(iv), lo = load_be64(iv + 8), blocks = pos / 16;
    lo += blocks;
    hi += lo < blocks;
    size_t off = (size_t)(pos % 16);
    if (off && n) { /* the rest of a block begun by an earlier call */
        _mm_storeu_si128((__m128i *)(void *)part, encrypt1(rk, counter_block(hi, lo)));
        done = 16 - off < n ? 16 - off : n;
        xor_tail(out, in, part + off, done);
        lo++;
        hi += lo == 0;
    }
    if (n - done >= 256 && use_wide())
        done += xor_wide(rk, &hi, &lo, in ? in + done : NULL, out + done, n - done);
    /* eight blocks at a time: independent AESENC chains keep the AES unit busy */
    for (; n - done >= 128; done += 128) {
        EACH8(B_INIT)
        for (int r = 1; r < 14; r++) {
            __m128i k = rk[r];
            EACH8(B_ENC)
        }
        {
            __m128i k = rk[14];
            EACH8(B_LAST)
        }
        if (in) {
            EACH8(B_XOR)
        }
        EACH8(B_STORE)
        uint64_t was = lo;
        lo += 8;
        hi += lo < was;
    }
    for (; n - done >= 16; done += 16) {
        __m128i b = encrypt1(rk, counter_block(hi, lo));
        if (in)
            b = _mm_xor_si128(b, _mm_loadu_si128((const __m128i *)(const void *)(in + done)));
        _mm_storeu_si128((__m128i *)(void *)(out + done), b);
        lo++;
        hi += lo == 0;
    }
    if (n > done) {
        _mm_storeu_si128((__m128i *)(void *)part, encrypt1(rk, counter_block(hi, lo)));
        xor_tail(out + done, in ? in + done : NULL, part, n - done);
    }
    wipe(rk, sizeof rk);
    wipe(part, sizeof part);
    /* the round keys and keystream blocks were in vector registers too */
    __asm__ volatile("pxor %%xmm0, %%xmm0\n\tpxor %%xmm1, %%xmm1\n\tpxor %%xmm2, %%xmm2\n\t"
                     "pxor %%xmm3, %%xmm3\n\tpxor %%xmm4, %%xmm4\n\tpxor %%xmm5, %%xmm5\n\t"
                     "pxor %%xmm6, %%xmm6\n\tpxor %%xmm7, %%xmm7\n\tpxor %%xmm8, %%xmm8\n\t"
                     "pxor %%xmm9, %%xmm9\n\tpxor %%xmm10, %%xmm10\n\tpxor %%xmm11, %%xmm11\n\t"
                     "pxor %%xmm12, %%xmm12\n\tpxor %%xmm13, %%xmm13\n\tpxor %%xmm14, %%xmm14\n\t"
                     "pxor %%xmm15, %%xmm15" ::
                         : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
                           "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
}

#else /* no AES-NI build: crypto.c keeps to EVP */

bool aesctr_available(void)
{
    return false;
}

bool aesctr_wide(bool on)
{
    (void)on;
    return false;
}

void aesctr_xor(const uint8_t key[32], const uint8_t iv[16], uint64_t pos, const uint8_t *in,
                uint8_t *out, size_t n)
{
    (void)key, (void)iv, (void)pos, (void)in, (void)out, (void)n;
    abort(); /* callers check aesctr_available() first */
}

#endif
