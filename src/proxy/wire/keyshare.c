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

/* (2 / n) = -1 iff n = 3, 5 (mod 8): the sign change for an odd count of halvings. */
#define TWO_FLIPS(n) ((((n)&7) == 3) | (((n)&7) == 5))

static unsigned ctz128(u128 x)
{
    uint64_t lo = (uint64_t)x;
    return lo ? (unsigned)__builtin_ctzll(lo) : 64 + (unsigned)__builtin_ctzll((uint64_t)(x >> 64));
}

/* The binary Jacobi loop on two-word values, n odd: (a / n) * t. */
static int jacobi128(u128 a, u128 n, int t)
{
    while (a) {
        unsigned v = ctz128(a);
        a >>= v;
        if ((v & 1) && TWO_FLIPS((uint64_t)n))
            t = -t;
        if (a < n) {
            u128 x = a;
            a = n;
            n = x;
            if ((a & 3) == 3 && (n & 3) == 3)
                t = -t;
        }
        a -= n;
    }
    return n == 1 ? t : 0;
}

/* 256-bit values as two 128-bit halves. */
typedef struct {
    u128 lo, hi;
} u256;

/*
 * 1 if z is a non-zero square mod p. The Jacobi symbol (z / p) by the binary algorithm:
 * strip factors of two ((2 / n) = -1 iff n = 3, 5 mod 8), subtract the smaller odd value
 * from the larger (swapping first, by quadratic reciprocity: a sign change iff both are
 * 3 mod 4), until a = 0; then n = gcd(z, p), which is 1 unless z = 0. On four words while
 * either value needs them, then on two. About a quarter of the instructions of
 * Euler's criterion z^((p-1)/2) (~255 squarings); it branches on z, which is fine here:
 * the candidates are public random values (keyshare.h).
 */
static int fe_is_square(const fe *z)
{
    uint8_t b[32];
    fe_bytes(b, z); /* canonical: below p */
    uint64_t w[4] = {0};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 8; j++)
            w[i] |= (uint64_t)b[8 * i + j] << (8 * j);
    u256 a = {(u128)w[1] << 64 | w[0], (u128)w[3] << 64 | w[2]};
    u256 n = {~(u128)0 - 18, ~(u128)0 >> 1}; /* p = 2^255 - 19 */
    int t = 1;
    while (a.hi | n.hi) {
        if ((a.lo | a.hi) == 0)
            return 0; /* z = 0 (or a common factor, impossible for p prime) */
        unsigned v;
        if (a.lo == 0) { /* 128 factors of two: an even count */
            a.lo = a.hi;
            a.hi = 0;
        }
        if ((v = ctz128(a.lo)) != 0) {
            a.lo = a.lo >> v | a.hi << (128 - v);
            a.hi >>= v;
            if ((v & 1) && TWO_FLIPS((uint64_t)n.lo))
                t = -t;
        }
        /* both odd: a - n if a >= n, else swap (reciprocity) and take n - a */
        if (a.hi < n.hi || (a.hi == n.hi && a.lo < n.lo)) {
            u256 x = a;
            a = n;
            n = x;
            if ((a.lo & 3) == 3 && (n.lo & 3) == 3)
                t = -t;
        }
        a.hi -= n.hi + (a.lo < n.lo);
        a.lo -= n.lo;
    }
    return jacobi128(a.lo, n.lo, t) == 1;
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
