/*
 * keyshare: random prime-order-subgroup points of Curve25519 (see keyshare.h).
 *
 * Field elements are five 51-bit limbs, little-endian, value = sum l[i] * 2^(51 i).
 * Limbs may exceed 51 bits between carries (mul/sq accept limbs below 2^54); fe_bytes()
 * produces the unique canonical encoding.
 */
#include "proxy/wire/keyshare.h"

#include "proxy/wire/crypto.h"

#include <errno.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

__extension__ typedef unsigned __int128 u128;

#define MASK51         ((UINT64_C(1) << 51) - 1)
#define KEYSHARE_TRIES 64 /* each batch of candidates fails with probability ~2^-32 */

typedef struct {
    uint64_t l[5];
} fe;

static void fe_carry(fe *h)
{
    uint64_t c;
    for (int i = 0; i < 4; i++) {
        c = h->l[i] >> 51;
        h->l[i] &= MASK51;
        h->l[i + 1] += c;
    }
    c = h->l[4] >> 51;
    h->l[4] &= MASK51;
    h->l[0] += 19 * c; /* 2^255 = 19 (mod p) */
    c = h->l[0] >> 51;
    h->l[0] &= MASK51;
    h->l[1] += c;
}

static void fe_add(fe *h, const fe *a, const fe *b)
{
    for (int i = 0; i < 5; i++)
        h->l[i] = a->l[i] + b->l[i];
    fe_carry(h);
}

/* a - b computed as a + 4p - b so no limb goes negative (b's limbs stay below 2^53). */
static void fe_sub(fe *h, const fe *a, const fe *b)
{
    static const uint64_t p4[5] = {(MASK51 - 18) * 4, MASK51 * 4, MASK51 * 4, MASK51 * 4,
                                   MASK51 * 4};
    for (int i = 0; i < 5; i++)
        h->l[i] = a->l[i] + p4[i] - b->l[i];
    fe_carry(h);
}

/* Carry the five 128-bit column sums of a product into h (limbs < 2^51 + 2^13). */
static inline __attribute__((always_inline)) void fe_reduce(fe *h, u128 r0, u128 r1, u128 r2,
                                                            u128 r3, u128 r4)
{
    r1 += (uint64_t)(r0 >> 51);
    r2 += (uint64_t)(r1 >> 51);
    r3 += (uint64_t)(r2 >> 51);
    r4 += (uint64_t)(r3 >> 51);
    uint64_t c = (uint64_t)(r4 >> 51);
    h->l[0] = ((uint64_t)r0 & MASK51) + 19 * c;
    h->l[1] = (uint64_t)r1 & MASK51;
    h->l[2] = (uint64_t)r2 & MASK51;
    h->l[3] = (uint64_t)r3 & MASK51;
    h->l[4] = (uint64_t)r4 & MASK51;
    h->l[1] += h->l[0] >> 51;
    h->l[0] &= MASK51;
}

static inline __attribute__((always_inline)) void fe_mul(fe *h, const fe *a, const fe *b)
{
    const uint64_t *x = a->l, *y = b->l;
    uint64_t y19[5];
    for (int i = 1; i < 5; i++)
        y19[i] = 19 * y[i];
    /* product terms past limb 4 wrap around multiplied by 19 (2^255 = 19) */
    u128 r0 = (u128)x[0] * y[0] + (u128)x[1] * y19[4] + (u128)x[2] * y19[3] + (u128)x[3] * y19[2] +
              (u128)x[4] * y19[1];
    u128 r1 = (u128)x[0] * y[1] + (u128)x[1] * y[0] + (u128)x[2] * y19[4] + (u128)x[3] * y19[3] +
              (u128)x[4] * y19[2];
    u128 r2 = (u128)x[0] * y[2] + (u128)x[1] * y[1] + (u128)x[2] * y[0] + (u128)x[3] * y19[4] +
              (u128)x[4] * y19[3];
    u128 r3 = (u128)x[0] * y[3] + (u128)x[1] * y[2] + (u128)x[2] * y[1] + (u128)x[3] * y[0] +
              (u128)x[4] * y19[4];
    u128 r4 = (u128)x[0] * y[4] + (u128)x[1] * y[3] + (u128)x[2] * y[2] + (u128)x[3] * y[1] +
              (u128)x[4] * y[0];
    fe_reduce(h, r0, r1, r2, r3, r4);
}

/* Squaring: 15 products instead of 25, doubled cross terms folded into the factors. */
static inline __attribute__((always_inline)) void fe_sq(fe *h, const fe *a)
{
    const uint64_t *x = a->l;
    uint64_t d0 = 2 * x[0], d1 = 2 * x[1], d2 = 2 * x[2], d3 = 2 * x[3];
    uint64_t x3_19 = 19 * x[3], x4_19 = 19 * x[4];
    u128 r0 = (u128)x[0] * x[0] + (u128)d1 * x4_19 + (u128)d2 * x3_19;
    u128 r1 = (u128)d0 * x[1] + (u128)d2 * x4_19 + (u128)x[3] * x3_19;
    u128 r2 = (u128)d0 * x[2] + (u128)x[1] * x[1] + (u128)d3 * x4_19;
    u128 r3 = (u128)d0 * x[3] + (u128)d1 * x[2] + (u128)x[4] * x4_19;
    u128 r4 = (u128)d0 * x[4] + (u128)d1 * x[3] + (u128)x[2] * x[2];
    fe_reduce(h, r0, r1, r2, r3, r4);
}

/* h = a^(2^n) */
static void fe_sq_n(fe *h, const fe *a, int n)
{
    fe_sq(h, a);
    for (int i = 1; i < n; i++)
        fe_sq(h, h);
}

static void fe_mul_small(fe *h, const fe *a, uint32_t k)
{
    u128 c = 0;
    for (int i = 0; i < 5; i++) {
        c += (u128)a->l[i] * k;
        h->l[i] = (uint64_t)c & MASK51;
        c >>= 51;
    }
    h->l[0] += 19 * (uint64_t)c; /* c < 2^19 */
    fe_carry(h);
}

/*
 * z^(2^250 - 1) into *e250 and z^11 into *z11, the common trunk of inversion and the
 * Legendre symbol: ~250 squarings and 11 multiplications.
 */
static void fe_pow_trunk(const fe *z, fe *e250, fe *z11, fe *z2)
{
    fe t, z9, e5, e10, e20, e50, e100;
    fe_sq(z2, z);         /* z^2 */
    fe_sq_n(&t, z2, 2);   /* z^8 */
    fe_mul(&z9, &t, z);   /* z^9 */
    fe_mul(z11, &z9, z2); /* z^11 */
    fe_sq(&t, z11);       /* z^22 */
    fe_mul(&e5, &t, &z9); /* z^(2^5 - 1) */
    fe_sq_n(&t, &e5, 5);
    fe_mul(&e10, &t, &e5); /* z^(2^10 - 1) */
    fe_sq_n(&t, &e10, 10);
    fe_mul(&e20, &t, &e10); /* z^(2^20 - 1) */
    fe_sq_n(&t, &e20, 20);
    fe_mul(&t, &t, &e20); /* z^(2^40 - 1) */
    fe_sq_n(&t, &t, 10);
    fe_mul(&e50, &t, &e10); /* z^(2^50 - 1) */
    fe_sq_n(&t, &e50, 50);
    fe_mul(&e100, &t, &e50); /* z^(2^100 - 1) */
    fe_sq_n(&t, &e100, 100);
    fe_mul(&t, &t, &e100); /* z^(2^200 - 1) */
    fe_sq_n(&t, &t, 50);
    fe_mul(e250, &t, &e50); /* z^(2^250 - 1) */
}

/* h = z^(p - 2) = z^(2^255 - 21) = z^-1 (0 for z = 0) */
static void fe_invert(fe *h, const fe *z)
{
    fe e250, z11, z2;
    fe_pow_trunk(z, &e250, &z11, &z2);
    fe_sq_n(h, &e250, 5); /* z^(2^255 - 32) */
    fe_mul(h, h, &z11);
}

/* Canonical little-endian encoding (value reduced below p). */
static void fe_bytes(uint8_t out[32], const fe *a)
{
    fe h = *a;
    fe_carry(&h);
    fe_carry(&h); /* now every limb < 2^51 and value < 2^255 + small: at most one p to drop */
    uint64_t q = (h.l[0] + 19) >> 51;
    for (int i = 1; i < 5; i++)
        q = (h.l[i] + q) >> 51;
    /* q = 1 iff value >= p; then value - p = value + 19 - 2^255 */
    h.l[0] += 19 * q;
    for (int i = 0; i < 4; i++) {
        h.l[i + 1] += h.l[i] >> 51;
        h.l[i] &= MASK51;
    }
    h.l[4] &= MASK51;
    uint64_t w[4] = {
        h.l[0] | h.l[1] << 51,
        h.l[1] >> 13 | h.l[2] << 38,
        h.l[2] >> 26 | h.l[3] << 25,
        h.l[3] >> 39 | h.l[4] << 12,
    };
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 8; j++)
            out[8 * i + j] = (uint8_t)(w[i] >> (8 * j));
}

static void fe_from_bytes(fe *h, const uint8_t in[32])
{
    uint64_t w[4] = {0};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 8; j++)
            w[i] |= (uint64_t)in[8 * i + j] << (8 * j);
    w[3] &= ~(UINT64_C(1) << 63); /* the top bit is not part of a u-coordinate */
    h->l[0] = w[0] & MASK51;
    h->l[1] = (w[0] >> 51 | w[1] << 13) & MASK51;
    h->l[2] = (w[1] >> 38 | w[2] << 26) & MASK51;
    h->l[3] = (w[2] >> 25 | w[3] << 39) & MASK51;
    h->l[4] = w[3] >> 12;
}

/*
 * The Legendre symbol (x / p) of a 256-bit x (four 64-bit words, little-endian; x need not
 * be reduced) by the binary Jacobi algorithm: with b odd, (a / b) keeps its value when a
 * becomes a - b, changes sign per factor of two taken out of a when b = 3, 5 (mod 8), and,
 * a and b both odd, changes sign on a swap (quadratic reciprocity) when both are 3 (mod 4).
 * a = x, b = p, until a = 0; then b = gcd(x, p), which is 1 unless p divides x.
 *
 * Most steps run on 64-bit stand-ins for the 256-bit values (Pornin's optimised binary
 * GCD): a~ is the top 31 bits of a at the position of the longer value's top bit, then
 * a's low 33 bits (JAC_LOW); b~ likewise. The low bits decide parity and carry the sign
 * rules exactly (33 - h of them are exact after h halvings, and a round stops at
 * JAC_HALVINGS = 30, so the 3 bits the (2 / b) rule needs are always exact). The top bits
 * decide which value is larger; a~ is within 2^33 of a / 2^(n - 64) and stays so (a
 * subtraction adds two such errors, the halving that always follows one halves it), so
 * |a~ - b~| >= 2^34 decides a < b exactly and a closer pair ends the round early. Every
 * decision is therefore the one the full-width algorithm makes, the values never go
 * negative, and the plain rules above hold throughout. A round collects the steps as a 2x2
 * matrix of signed coefficients (each at most 2^h <= 2^30, two packed to a word) and
 * applies it to the full values once.
 * A pair too close to decide at a round's start takes one full-width step. Once both
 * values fit in one word, the rest runs on them exactly. Branch-free steps; it branches on
 * x only per round, which is fine: the candidates are public random values (keyshare.h).
 */
#define JAC_LOW      33                             /* low bits of a stand-in; 31 top bits */
#define JAC_HALVINGS (JAC_LOW - 3)                  /* a round's halvings */
#define JAC_CLOSE    (UINT64_C(1) << (JAC_LOW + 1)) /* two stand-ins' errors together */

/* The sign is kept in bit 1 of t (other bits are don't-care): a swap of a and b, both odd,
   flips it when both are 3 (mod 4), i.e. t ^= a & b; taking k factors of two out of a flips
   it when k is odd and b = 3, 5 (mod 8), i.e. bits 1 and 2 of b differ. */
static inline uint64_t two_flips(unsigned k, uint64_t b)
{
    return (b ^ b >> 1) & (uint64_t)k << 1;
}

static inline unsigned ctz64(uint64_t x)
{
    return (unsigned)__builtin_ctzll(x);
}

/* the bit length of the longer of a and b */
static unsigned bitlen_max(const uint64_t a[4], const uint64_t b[4])
{
    for (int i = 3; i >= 0; i--)
        if (a[i] | b[i])
            return 64 * (unsigned)i + 64 - (unsigned)__builtin_clzll(a[i] | b[i]);
    return 0;
}

/* a's stand-in: bits [s, s + 64 - JAC_LOW) of a (a < 2^(s + 64 - JAC_LOW)), then its low
   JAC_LOW bits */
static uint64_t stand_in(const uint64_t a[4], unsigned s)
{
    unsigned i = s / 64, o = s % 64;
    uint64_t v = a[i] >> o;
    if (o && i < 3)
        v |= a[i + 1] << (64 - o);
    return v << JAC_LOW | (a[0] & ((UINT64_C(1) << JAC_LOW) - 1));
}

/* (a, b) = ((fa a + ga b) / 2^h, (fb a + gb b) / 2^h), both known to be non-negative
   integers below 2^256; |coefficients| <= 2^h, 0 < h < 64. */
static void jac_apply(uint64_t a[4], uint64_t b[4], int64_t fa, int64_t ga, int64_t fb, int64_t gb,
                      unsigned h)
{
    __extension__ typedef __int128 i128;
    uint64_t wa[5], wb[5];
    i128 ca = 0, cb = 0;
    for (int i = 0; i < 4; i++) {
        i128 x = (i128)a[i], y = (i128)b[i];
        ca += (i128)fa * x + (i128)ga * y;
        cb += (i128)fb * x + (i128)gb * y;
        wa[i] = (uint64_t)ca;
        wb[i] = (uint64_t)cb;
        ca >>= 64; /* arithmetic: the partial sums may be negative */
        cb >>= 64;
    }
    wa[4] = (uint64_t)ca;
    wb[4] = (uint64_t)cb;
    for (int i = 0; i < 4; i++) {
        a[i] = wa[i] >> h | wa[i + 1] << (64 - h);
        b[i] = wb[i] >> h | wb[i + 1] << (64 - h);
    }
}

/* One full-width step, a odd: swap if a < b, then a -= b. Returns the sign flip (bit 1). */
static uint64_t jac_wide_step(uint64_t a[4], uint64_t b[4])
{
    uint64_t t = 0;
    int lt = 0;
    for (int i = 3; i >= 0; i--)
        if (a[i] != b[i]) {
            lt = a[i] < b[i];
            break;
        }
    if (lt) {
        for (int i = 0; i < 4; i++) {
            uint64_t x = a[i];
            a[i] = b[i];
            b[i] = x;
        }
        t = a[0] & b[0];
    }
    unsigned borrow = 0;
    for (int i = 0; i < 4; i++) {
        uint64_t d = a[i] - b[i] - borrow;
        borrow = (a[i] < b[i]) | ((a[i] == b[i]) & borrow);
        a[i] = d;
    }
    return t;
}

/* A row of the round's matrix, (f, g) packed as f + g 2^32 in one int64: the steps only
   add, subtract, negate and double rows, which the packed form does exactly while
   |f|, |g| < 2^31 (they stay at most 2^h <= 2^30). */
static void row_unpack(int64_t r, int64_t *f, int64_t *g)
{
    *f = (int32_t)(uint32_t)(uint64_t)r;
    *g = (r - *f) / ((int64_t)1 << 32);
}

static int legendre_p(const uint64_t x[4])
{
    uint64_t a[4] = {x[0], x[1], x[2], x[3]};
    uint64_t b[4] = {~UINT64_C(0) - 18, ~UINT64_C(0), ~UINT64_C(0), ~UINT64_C(0) >> 1};
    uint64_t t = 0; /* bit 1: the sign */
    for (;;) {
        unsigned n = bitlen_max(a, b);
        if (n <= 64)
            break;
        if ((a[0] | a[1] | a[2] | a[3]) == 0)
            return 0; /* p divides x: b = gcd(x, p) > 1 */
        uint64_t as = stand_in(a, n - (64 - JAC_LOW));
        uint64_t bs = stand_in(b, n - (64 - JAC_LOW));
        /* as 2^h = fa a + ga b and bs 2^h = fb a + gb b, rows packed (row_unpack) */
        int64_t ra = 1, rb = (int64_t)1 << 32;
        /* a even: halve it first (k = 0 for a odd, unconditionally: the parity is random) */
        unsigned k = ctz64(as | UINT64_C(1) << JAC_HALVINGS), h = k;
        as >>= k;
        rb *= (int64_t)1 << k;
        t ^= two_flips(k, bs);
        /* a odd: subtract the smaller (swapped in as b), halve the even difference */
        while (h < JAC_HALVINGS) {
            uint64_t d = as - bs;
            if (d + JAC_CLOSE < 2 * JAC_CLOSE)
                break; /* too close to tell which is larger from the stand-ins */
            uint64_t m = -(uint64_t)(as < bs);
            t ^= m & as & bs; /* a swap of two 3 (mod 4) */
            bs ^= (as ^ bs) & m;
            as = (d ^ m) - m;
            int64_t dr = ra - rb;
            rb ^= (ra ^ rb) & (int64_t)m;
            ra = (dr ^ (int64_t)m) - (int64_t)m;
            k = ctz64(d); /* = ctz(-d); d != 0 */
            if (k > JAC_HALVINGS - h)
                k = JAC_HALVINGS - h; /* the exact low bits end there */
            as >>= k;
            rb *= (int64_t)1 << k; /* b's row takes the factor: a / 2^k over a common 2^h */
            h += k;
            t ^= two_flips(k, bs);
        }
        if (h == 0) { /* the first pair was too close: one step on the full values */
            t ^= jac_wide_step(a, b);
            continue;
        }
        int64_t fa, ga, fb, gb;
        row_unpack(ra, &fa, &ga);
        row_unpack(rb, &fb, &gb);
        jac_apply(a, b, fa, ga, fb, gb, h);
    }
    /* both below 2^64: exactly, on the words */
    uint64_t as = a[0], bs = b[0];
    if (as == 0)
        return bs == 1 ? 1 : 0;
    unsigned k = ctz64(as);
    as >>= k;
    t ^= two_flips(k, bs);
    while (as != bs) {
        uint64_t d = as - bs, m = -(uint64_t)(as < bs);
        t ^= m & as & bs;
        bs ^= (as ^ bs) & m;
        as = (d ^ m) - m;
        k = ctz64(d);
        as >>= k;
        t ^= two_flips(k, bs);
    }
    if (bs != 1)
        return 0; /* gcd(x, p) = b > 1 */
    return (t & 2) ? -1 : 1;
}

/* fe -> four words (value below 2^256, not necessarily below p) */
static void fe_words(uint64_t w[4], const fe *a)
{
    fe h = *a;
    fe_carry(&h);
    fe_carry(&h); /* every limb below 2^51 now */
    w[0] = h.l[0] | h.l[1] << 51;
    w[1] = h.l[1] >> 13 | h.l[2] << 38;
    w[2] = h.l[2] >> 26 | h.l[3] << 25;
    w[3] = h.l[3] >> 39 | h.l[4] << 12;
}

/* 1 if z is a non-zero square mod p. */
static int fe_is_square(const fe *z)
{
    uint64_t w[4];
    fe_words(w, z);
    return legendre_p(w) == 1;
}

static void words_from_bytes(uint64_t w[4], const uint8_t in[32])
{
    for (int i = 0; i < 4; i++) {
        w[i] = 0;
        for (int j = 0; j < 8; j++)
            w[i] |= (uint64_t)in[8 * i + j] << (8 * j);
    }
}

int keyshare_legendre(const uint8_t z[32])
{
    uint64_t w[4];
    words_from_bytes(w, z);
    return legendre_p(w);
}

/* Euler's criterion: z^((p - 1) / 2) = z^(2^254 - 10) is 1, p - 1 or 0. */
int keyshare_legendre_euler(const uint8_t z[32])
{
    static const uint8_t one[32] = {1}, zero[32];
    fe x, e250, z11, z2, t;
    fe_from_bytes(&x, z); /* the low 255 bits; bit 255 is 2^255 = 19 (mod p) */
    if (z[31] & 0x80)
        fe_add(&x, &x, &(fe){{19, 0, 0, 0, 0}});
    fe_pow_trunk(&x, &e250, &z11, &z2);
    fe_sq_n(&t, &e250, 4); /* z^(2^254 - 16) */
    fe_mul(&t, &t, &z2);   /* z^(2^254 - 14) */
    fe_sq(&z2, &z2);       /* z^4 */
    fe_mul(&t, &t, &z2);   /* z^(2^254 - 10) */
    uint8_t b[32];
    fe_bytes(b, &t);
    return memcmp(b, one, 32) == 0 ? 1 : memcmp(b, zero, 32) == 0 ? 0 : -1;
}

static int fe_is_zero(const fe *z)
{
    static const uint8_t zero[32];
    uint8_t b[32];
    fe_bytes(b, z);
    return memcmp(b, zero, 32) == 0;
}

/* x-only doubling on (X:Z) for y^2 = x^3 + A x^2 + x, A = 486662, (A + 2) / 4 = 121666. */
static void x_double(fe *x, fe *z)
{
    fe s, d, ss, dd, e, t;
    fe_add(&s, x, z);
    fe_sub(&d, x, z);
    fe_sq(&ss, &s);
    fe_sq(&dd, &d);
    fe_sub(&e, &ss, &dd); /* 4 X Z */
    fe_mul(x, &ss, &dd);  /* (X^2 - Z^2)^2 */
    fe_mul_small(&t, &e, 121666);
    fe_add(&t, &t, &dd);
    fe_mul(z, &e, &t); /* 4 X Z (X^2 + A X Z + Z^2) */
}

/* (X:Z) of [8]R for the point R with u-coordinate cand, if R is on the curve and [8]R is
   not the identity. 0 on success, -1 otherwise. */
static int point_x8(const uint8_t cand[32], fe *x, fe *z)
{
    fe u, f, t;
    fe_from_bytes(&u, cand);
    fe_add(&t, &u, &(fe){{486662, 0, 0, 0, 0}});
    fe_mul(&t, &t, &u);                     /* u^2 + A u */
    fe_add(&t, &t, &(fe){{1, 0, 0, 0, 0}}); /* u^2 + A u + 1 */
    fe_mul(&f, &t, &u);                     /* u^3 + A u^2 + u */
    if (!fe_is_square(&f))
        return -1; /* on the twist (or a 2-torsion point) */
    *x = u;
    *z = (fe){{1, 0, 0, 0, 0}};
    for (int i = 0; i < 3; i++)
        x_double(x, z);
    return fe_is_zero(z) ? -1 : 0; /* R had small order */
}

/* u([8]R) for the point R with u-coordinate cand (see point_x8). 0 or -1. */
static int share_from(const uint8_t cand[32], uint8_t pub[32])
{
    fe x, z, zi;
    if (point_x8(cand, &x, &z) != 0)
        return -1;
    fe_invert(&zi, &z);
    fe_mul(&x, &x, &zi);
    fe_bytes(pub, &x);
    return 0;
}

int keyshare_from_candidates(const uint8_t (*cand)[32], int n, uint8_t pub[32])
{
    for (int i = 0; i < n; i++)
        if (share_from(cand[i], pub) == 0)
            return i;
    return -1;
}

int keyshare_batch_from_candidates(const uint8_t (*cand)[32], int n, uint8_t (*out)[32])
{
    fe x[KEYSHARE_BATCH], z[KEYSHARE_BATCH], acc[KEYSHARE_BATCH], inv, t;
    int k = 0;
    for (int i = 0; i < n && k < KEYSHARE_BATCH; i++)
        if (point_x8(cand[i], &x[k], &z[k]) == 0)
            k++;
    if (k == 0)
        return 0;
    /* Montgomery's trick: acc[i] = z[0] ... z[i]; one inversion of acc[k-1], then each
       1/z[i] = acc[i-1] / acc[i], walking back */
    acc[0] = z[0];
    for (int i = 1; i < k; i++)
        fe_mul(&acc[i], &acc[i - 1], &z[i]);
    fe_invert(&inv, &acc[k - 1]);
    for (int i = k - 1; i > 0; i--) {
        fe_mul(&t, &inv, &acc[i - 1]); /* 1 / z[i] */
        fe_mul(&inv, &inv, &z[i]);     /* 1 / (z[0] ... z[i-1]) */
        fe_mul(&t, &t, &x[i]);
        fe_bytes(out[i], &t);
    }
    fe_mul(&t, &inv, &x[0]);
    fe_bytes(out[0], &t);
    return k;
}

/* This thread's shares made ahead, used last first. Public values, never reused. */
static __thread uint8_t pool[KEYSHARE_BATCH][32];
static __thread int pooled;

/* Fill the pool from 2 x KEYSHARE_BATCH random candidates (about half lie on the curve). */
static int refill(void)
{
    uint8_t cand[2 * KEYSHARE_BATCH][32];
    int rc = -EIO;
    for (int i = 0; i < KEYSHARE_TRIES && rc != 0; i++) {
        if (crypto_random_public(cand, sizeof cand) != 0)
            break;
        pooled =
            keyshare_batch_from_candidates((const uint8_t(*)[32])cand, 2 * KEYSHARE_BATCH, pool);
        rc = pooled > 0 ? 0 : -EIO;
    }
    crypto_wipe(cand, sizeof cand);
    return rc;
}

int keyshare_random(uint8_t pub[32])
{
    if (pooled == 0 && refill() != 0)
        return -EIO;
    pooled--;
    memcpy(pub, pool[pooled], 32);
    crypto_wipe(pool[pooled], 32);
    return 0;
}

/* ---- the other groups a site may choose ---- */

static const struct {
    uint16_t group;
    int nid;    /* a NIST curve's (prime order: every point but infinity is a public key) */
    size_t len; /* the share: 04 || x || y, or X448's 56 bytes */
} other_groups[] = {
    {0x0017, NID_X9_62_prime256v1, 65},
    {0x0018, NID_secp384r1, 97},
    {0x0019, NID_secp521r1, 133},
    {0x001e, NID_undef, 56},
};
#define NGROUPS (sizeof other_groups / sizeof other_groups[0])

static EC_GROUP *curves[NGROUPS]; /* made once, read-only after */
static pthread_once_t curves_once = PTHREAD_ONCE_INIT;

static void curves_make(void)
{
    for (size_t i = 0; i < NGROUPS; i++)
        if (other_groups[i].nid != NID_undef)
            curves[i] = EC_GROUP_new_by_curve_name(other_groups[i].nid);
}

size_t keyshare_group_len(uint16_t group)
{
    for (size_t i = 0; i < NGROUPS; i++)
        if (other_groups[i].group == group)
            return other_groups[i].len;
    return 0;
}

/* A uniformly random point of curve g: a random x in the field and a random sign of y, kept
   when x^3 + ax + b is a square (about half the time; bounded tries). These curves have
   prime order, so the point is distributed exactly as a fresh key pair's public key, at the
   cost of one square root instead of a scalar multiplication (P-384's keygen is ~0.6 ms). */
static int nist_point(const EC_GROUP *g, uint8_t *out, size_t len)
{
    size_t flen = (len - 1) / 2;
    BN_CTX *ctx = BN_CTX_new();
    BIGNUM *x = BN_new(), *p = BN_new();
    EC_POINT *pt = EC_POINT_new(g);
    int rc = -EIO;
    if (ctx && x && p && pt && EC_GROUP_get_curve(g, p, NULL, NULL, ctx) == 1) {
        int bits = BN_num_bits(p);
        ERR_set_mark();
        for (int tries = 0; tries < 128 && rc != 0; tries++) {
            uint8_t r[67];
            if (crypto_random(r, flen + 1) != 0)
                break;
            if (bits % 8)
                r[0] &= (uint8_t)((1u << (bits % 8)) - 1); /* P-521: 521 bits in 66 bytes */
            if (!BN_bin2bn(r, (int)flen, x) || BN_cmp(x, p) >= 0)
                continue;
            if (EC_POINT_set_compressed_coordinates(g, pt, x, r[flen] & 1, ctx) == 1 &&
                EC_POINT_point2oct(g, pt, POINT_CONVERSION_UNCOMPRESSED, out, len, ctx) == len)
                rc = 0;
        }
        ERR_pop_to_mark(); /* the candidates off the curve left errors: not ours to keep */
    }
    EC_POINT_free(pt);
    BN_free(p);
    BN_free(x);
    BN_CTX_free(ctx);
    return rc;
}

int keyshare_group_random(uint16_t group, uint8_t *out, size_t len)
{
    size_t i = 0;
    while (i < NGROUPS && other_groups[i].group != group)
        i++;
    if (i == NGROUPS || other_groups[i].len != len)
        return -ENOTSUP;
    if (other_groups[i].nid != NID_undef) {
        pthread_once(&curves_once, curves_make);
        return curves[i] ? nist_point(curves[i], out, len) : -EIO;
    }
    /* X448: a fresh key pair's public key (OpenSSL's keygen) */
    EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "X448");
    size_t n = 0;
    int ok =
        k &&
        EVP_PKEY_get_octet_string_param(k, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, out, len, &n) == 1 &&
        n == len;
    EVP_PKEY_free(k); /* the private half is never used: freed (and cleansed) at once */
    return ok ? 0 : -EIO;
}
