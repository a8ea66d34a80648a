/*
 * Tests for proxy/keyshare: the ServerHello key share must be what a genuine X25519 public
 * key is, the u-coordinate of a point of Curve25519's prime-order subgroup.
 *
 * Checked independently of keyshare.c's own arithmetic, with OpenSSL's BIGNUM:
 * - on the curve: u^3 + A u^2 + u is a quadratic residue mod p (BN_kronecker);
 * - in the subgroup: an x-only Montgomery ladder computing [l]P lands on the identity
 *   (Z = 0), where l is the subgroup order;
 * - exact value: u([8]R) for the chosen candidate R, by the same ladder with k = 8;
 * - the ladder itself is checked against OpenSSL's X25519 (and shown to reject points
 *   outside the subgroup, so the subgroup check can fail).
 * The curve check's Legendre symbol (keyshare_legendre, the binary algorithm) is checked
 * against Euler's criterion (keyshare_legendre_euler, itself checked against BN_kronecker)
 * on a million pseudo-random values and on edge values, and against squares and non-squares
 * made with BIGNUM.
 */
#include "tgtest.h"

#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>

#include "proxy/wire/crypto.h"
#include "proxy/wire/keyshare.h"

struct bnf {
    BN_CTX *ctx;
    BIGNUM *p, *l, *a24, *A;
};

static void bnf_init(struct bnf *f)
{
    f->ctx = BN_CTX_new();
    f->p = BN_new();
    f->l = NULL;
    f->a24 = NULL;
    f->A = NULL;
    BN_set_bit(f->p, 255);
    BN_sub_word(f->p, 19);
    /* l = 2^252 + 27742317777372353535851937790883648493 */
    assert_true(BN_dec2bn(&f->l, "27742317777372353535851937790883648493") > 0);
    BIGNUM *t = BN_new();
    BN_set_bit(t, 252);
    BN_add(f->l, f->l, t);
    BN_free(t);
    assert_true(BN_dec2bn(&f->a24, "121665") > 0); /* (A - 2) / 4, for AA + a24 E */
    assert_true(BN_dec2bn(&f->A, "486662") > 0);
}

static void bnf_free(struct bnf *f)
{
    BN_free(f->p);
    BN_free(f->l);
    BN_free(f->a24);
    BN_free(f->A);
    BN_CTX_free(f->ctx);
}

/* little-endian 32 bytes <-> BIGNUM */
static BIGNUM *bn_le(const uint8_t b[32])
{
    return BN_lebin2bn(b, 32, NULL);
}

/* Legendre symbol of u^3 + A u^2 + u mod p. */
static int curve_symbol(struct bnf *f, const uint8_t u_le[32])
{
    BIGNUM *u = bn_le(u_le), *t = BN_new();
    BN_mod_add(t, u, f->A, f->p, f->ctx);
    BN_mod_mul(t, t, u, f->p, f->ctx);
    BN_add_word(t, 1);
    BN_mod_mul(t, t, u, f->p, f->ctx);
    int s = BN_kronecker(t, f->p, f->ctx);
    BN_free(u);
    BN_free(t);
    return s;
}

/* (X:Z) = [k] (u:1) by the x-only Montgomery ladder. Caller frees x and z. */
static void ladder(struct bnf *f, const BIGNUM *k, const uint8_t u_le[32], BIGNUM **xo, BIGNUM **zo)
{
    BIGNUM *u = bn_le(u_le), *x2 = BN_new(), *z2 = BN_new(), *x3 = BN_dup(u), *z3 = BN_new();
    BIGNUM *a = BN_new(), *aa = BN_new(), *b = BN_new(), *bb = BN_new(), *e = BN_new();
    BIGNUM *c = BN_new(), *d = BN_new(), *da = BN_new(), *cb = BN_new();
    BN_one(x2);
    BN_zero(z2);
    BN_one(z3);
    for (int i = BN_num_bits(k) - 1; i >= 0; i--) {
        if (BN_is_bit_set(k, i)) {
            BN_swap(x2, x3);
            BN_swap(z2, z3);
        }
        BN_mod_add(a, x2, z2, f->p, f->ctx);
        BN_mod_sqr(aa, a, f->p, f->ctx);
        BN_mod_sub(b, x2, z2, f->p, f->ctx);
        BN_mod_sqr(bb, b, f->p, f->ctx);
        BN_mod_sub(e, aa, bb, f->p, f->ctx);
        BN_mod_add(c, x3, z3, f->p, f->ctx);
        BN_mod_sub(d, x3, z3, f->p, f->ctx);
        BN_mod_mul(da, d, a, f->p, f->ctx);
        BN_mod_mul(cb, c, b, f->p, f->ctx);
        BN_mod_add(x3, da, cb, f->p, f->ctx);
        BN_mod_sqr(x3, x3, f->p, f->ctx);
        BN_mod_sub(z3, da, cb, f->p, f->ctx);
        BN_mod_sqr(z3, z3, f->p, f->ctx);
        BN_mod_mul(z3, z3, u, f->p, f->ctx);
        BN_mod_mul(x2, aa, bb, f->p, f->ctx);
        BN_mod_mul(z2, f->a24, e, f->p, f->ctx);
        BN_mod_add(z2, z2, aa, f->p, f->ctx);
        BN_mod_mul(z2, z2, e, f->p, f->ctx);
        if (BN_is_bit_set(k, i)) {
            BN_swap(x2, x3);
            BN_swap(z2, z3);
        }
    }
    *xo = x2;
    *zo = z2;
    BN_free(u);
    BN_free(x3);
    BN_free(z3);
    BN_free(a);
    BN_free(aa);
    BN_free(b);
    BN_free(bb);
    BN_free(e);
    BN_free(c);
    BN_free(d);
    BN_free(da);
    BN_free(cb);
}

/* u([k]P) as canonical little-endian bytes; returns 0 if [k]P is the identity. */
static int ladder_u(struct bnf *f, const BIGNUM *k, const uint8_t u_le[32], uint8_t out[32])
{
    BIGNUM *x, *z;
    ladder(f, k, u_le, &x, &z);
    int finite = !BN_is_zero(z);
    if (finite) {
        BN_mod_inverse(z, z, f->p, f->ctx);
        BN_mod_mul(x, x, z, f->p, f->ctx);
        assert_int_equal(BN_bn2lebinpad(x, out, 32), 32);
    }
    BN_free(x);
    BN_free(z);
    return finite;
}

static int in_subgroup(struct bnf *f, const uint8_t u_le[32])
{
    uint8_t ignored[32];
    return !ladder_u(f, f->l, u_le, ignored);
}

/* The BN ladder agrees with OpenSSL's X25519 on the base point (so it is a valid checker). */
static void test_ladder_matches_openssl(void **state)
{
    (void)state;
    struct bnf f;
    bnf_init(&f);
    uint8_t nine[32] = {9};
    for (int i = 0; i < 8; i++) {
        uint8_t scalar[32], want[32], got[32];
        assert_int_equal(RAND_bytes(scalar, 32), 1);
        assert_int_equal(crypto_x25519_public(scalar, want), 0);
        scalar[0] &= 248; /* X25519's clamping, applied here by hand for the BN ladder */
        scalar[31] = (uint8_t)((scalar[31] & 127) | 64);
        BIGNUM *k = bn_le(scalar);
        assert_true(ladder_u(&f, k, nine, got));
        BN_free(k);
        assert_memory_equal(got, want, 32);
        assert_true(in_subgroup(&f, want)); /* genuine public keys are in the subgroup */
    }
    bnf_free(&f);
}

/* Most random curve points are not in the subgroup: the checker does reject them. */
static void test_checker_rejects_full_curve_points(void **state)
{
    (void)state;
    struct bnf f;
    bnf_init(&f);
    int on_curve = 0, outside = 0;
    for (int i = 0; i < 64; i++) {
        uint8_t u[32];
        assert_int_equal(RAND_bytes(u, 32), 1);
        u[31] &= 127;
        if (curve_symbol(&f, u) != 1)
            continue;
        on_curve++;
        outside += !in_subgroup(&f, u);
    }
    assert_true(on_curve > 8); /* about half of 64 (fails with p ~ 1e-10) */
    assert_true(outside > 0);  /* 7 of 8 curve points lie outside */
    bnf_free(&f);
}

/* keyshare_random(): canonical, on the curve, in the subgroup, fresh each time. */
static void test_random_shares_are_subgroup_points(void **state)
{
    (void)state;
    struct bnf f;
    bnf_init(&f);
    uint8_t prev[32] = {0};
    for (int i = 0; i < 64; i++) {
        uint8_t pub[32];
        assert_int_equal(keyshare_random(pub), 0);
        assert_int_equal(pub[31] & 0x80, 0);
        BIGNUM *u = bn_le(pub);
        assert_true(BN_cmp(u, f.p) < 0);
        BN_free(u);
        assert_int_equal(curve_symbol(&f, pub), 1);
        assert_true(in_subgroup(&f, pub));
        assert_memory_not_equal(pub, prev, 32);
        memcpy(prev, pub, 32);
    }
    bnf_free(&f);
}

/* The exact value: u([8]R) for the first candidate R on the curve; twist points, u = 0 and
   small-order points are skipped. */
static void test_candidates(void **state)
{
    (void)state;
    struct bnf f;
    bnf_init(&f);
    uint8_t cand[4][32] = {{0}}, pub[32], want[32];
    /* cand[0] = 0: f(0) = 0 (2-torsion point); cand[1]: a twist point; cand[2]: on curve */
    int twist = 0, curve = 0;
    for (int i = 0; i < 200 && (!twist || !curve); i++) {
        uint8_t u[32];
        assert_int_equal(RAND_bytes(u, 32), 1);
        u[31] &= 127;
        int s = curve_symbol(&f, u);
        if (s == -1 && !twist) {
            memcpy(cand[1], u, 32);
            twist = 1;
        } else if (s == 1 && !curve) {
            memcpy(cand[2], u, 32);
            curve = 1;
        }
    }
    assert_true(twist && curve);
    memcpy(cand[3], cand[2], 32);
    cand[3][31] |= 0x80; /* the top bit is ignored, as for X25519 inputs */
    assert_int_equal(keyshare_from_candidates((const uint8_t(*)[32])cand, 4, pub), 2);
    BIGNUM *eight = BN_new();
    BN_set_word(eight, 8);
    assert_true(ladder_u(&f, eight, cand[2], want));
    assert_memory_equal(pub, want, 32);
    uint8_t pub2[32];
    assert_int_equal(keyshare_from_candidates((const uint8_t(*)[32])cand + 3, 1, pub2), 0);
    assert_memory_equal(pub2, want, 32);
    /* none usable */
    assert_int_equal(keyshare_from_candidates((const uint8_t(*)[32])cand, 2, pub), -1);
    BN_free(eight);
    bnf_free(&f);
}

/* The batch (one shared inversion) gives, in order, exactly u([8]R) of every candidate on
   the curve, computed here by an independent BIGNUM ladder, and stops at KEYSHARE_BATCH. */
static void test_batch_matches_ladder(void **state)
{
    (void)state;
    struct bnf f;
    bnf_init(&f);
    /* About half of random u are on the curve; with 10 * 16 - 1 candidates (u = 0 skipped),
       fewer than 16 of them on the curve has probability ~6e-28 (binomial tail). */
    enum { N = 10 * KEYSHARE_BATCH };
    uint8_t cand[N][32], out[KEYSHARE_BATCH][32], want[32];
    assert_int_equal(RAND_bytes((uint8_t *)cand, sizeof cand), 1);
    memset(cand[0], 0, 32); /* u = 0: a 2-torsion point, skipped */
    int k = keyshare_batch_from_candidates((const uint8_t(*)[32])cand, N, out);
    assert_int_equal(k, KEYSHARE_BATCH);
    BIGNUM *eight = BN_new();
    BN_set_word(eight, 8);
    int j = 0;
    for (int i = 0; i < N && j < k; i++) {
        uint8_t u[32];
        memcpy(u, cand[i], 32);
        u[31] &= 127;
        if (i == 0 || curve_symbol(&f, u) != 1)
            continue;
        assert_true(ladder_u(&f, eight, u, want));
        assert_memory_equal(out[j], want, 32);
        j++;
    }
    assert_int_equal(j, k);
    assert_int_equal(keyshare_batch_from_candidates((const uint8_t(*)[32])cand, 1, out), 0);
    BN_free(eight);
    bnf_free(&f);
}

/* Non-canonical inputs: a candidate u in [p, 2^255) is the field element u - p, so it must
   give exactly the share of u - p (exercises the reductions at the top of the range). */
static void test_noncanonical_candidates(void **state)
{
    (void)state;
    struct bnf f;
    bnf_init(&f);
    int compared = 0;
    for (unsigned k = 0; k < 19; k++) {
        uint8_t small[1][32] = {{0}}, big[1][32], a[32], b[32];
        small[0][0] = (uint8_t)k;
        BIGNUM *v = BN_dup(f.p);
        BN_add_word(v, k);
        assert_int_equal(BN_bn2lebinpad(v, big[0], 32), 32);
        BN_free(v);
        int ra = keyshare_from_candidates((const uint8_t(*)[32])small, 1, a);
        int rb = keyshare_from_candidates((const uint8_t(*)[32])big, 1, b);
        assert_int_equal(ra, rb);
        if (ra == 0) {
            assert_memory_equal(a, b, 32);
            assert_true(in_subgroup(&f, a));
            compared++;
        }
    }
    assert_true(compared > 0); /* some of 0..18 lie on the curve */
    bnf_free(&f);
}

/* The curve check (a binary Jacobi symbol in keyshare.c) agrees with BN_kronecker on every
   candidate: random ones, and u near 0 and near p, where f(u) is small or close to p (short
   and long runs of the algorithm, many factors of two). A candidate is used exactly when
   f(u) is a non-zero square and [8]R is not the identity. */
static void expect_curve_check(struct bnf *f, const uint8_t u[32], BIGNUM *eight)
{
    uint8_t pub[32], want[32];
    int used = keyshare_from_candidates((const uint8_t(*)[32])u, 1, pub) == 0;
    int wanted = curve_symbol(f, u) == 1 && ladder_u(f, eight, u, want);
    assert_int_equal(used, wanted);
    if (used)
        assert_memory_equal(pub, want, 32);
}

static void test_curve_check_matches_kronecker(void **state)
{
    (void)state;
    struct bnf f;
    bnf_init(&f);
    BIGNUM *eight = BN_new();
    BN_set_word(eight, 8);
    for (int i = 0; i < 1500; i++) {
        uint8_t u[32];
        assert_int_equal(RAND_bytes(u, 32), 1);
        u[31] &= 127;
        expect_curve_check(&f, u, eight);
    }
    for (unsigned k = 0; k < 300; k++) {
        uint8_t u[32] = {0};
        u[0] = (uint8_t)k, u[1] = (uint8_t)(k >> 8); /* u = k */
        expect_curve_check(&f, u, eight);
        BIGNUM *v = BN_dup(f.p); /* u = p - 1 - k */
        BN_sub_word(v, 1 + k);
        assert_int_equal(BN_bn2lebinpad(v, u, 32), 32);
        BN_free(v);
        expect_curve_check(&f, u, eight);
        memset(u, 0, sizeof u); /* u = 2^(k mod 255): powers of two */
        u[(k % 255) / 8] = (uint8_t)(1u << (k % 8));
        expect_curve_check(&f, u, eight);
    }
    BN_free(eight);
    bnf_free(&f);
}

/* ---- the Legendre symbol (z / p) the curve check runs, against Euler's criterion ---- */

/* z as 32 little-endian bytes from a BIGNUM (0 <= v < 2^256) */
static void le_from_bn(const BIGNUM *v, uint8_t z[32])
{
    assert_int_equal(BN_bn2lebinpad(v, z, 32), 32);
}

/* 32 pseudo-random bytes (all 256 bits) from the test's fixed-seed generator */
static void random_z(uint64_t *rng, uint8_t z[32])
{
    for (int j = 0; j < 4; j++) {
        uint64_t w = tgtest_xorshift64(rng);
        memcpy(z + 8 * j, &w, 8);
    }
}

static void expect_legendre(const uint8_t z[32])
{
    int got = keyshare_legendre(z), want = keyshare_legendre_euler(z);
    if (got != want) {
        char hex[65];
        for (int i = 0; i < 32; i++)
            snprintf(hex + 2 * i, 3, "%02x", z[31 - i]);
        fail_msg("(z / p) for z = 0x%s: binary %d, Euler %d", hex, got, want);
    }
}

/* The reference itself: Euler's criterion agrees with OpenSSL's BN_kronecker (z taken mod
   p first, as a 256-bit z is). */
static void test_euler_reference_matches_kronecker(void **state)
{
    (void)state;
    struct bnf f;
    bnf_init(&f);
    uint64_t rng = 0x243f6a8885a308d3u;
    BIGNUM *v = BN_new();
    for (int i = 0; i < 2000; i++) {
        uint8_t z[32];
        random_z(&rng, z);
        if (i < 20)
            memset(z + 1, 0, 31); /* small values too */
        assert_non_null(BN_lebin2bn(z, 32, v));
        assert_int_equal(keyshare_legendre_euler(z), BN_kronecker(v, f.p, f.ctx));
    }
    BN_free(v);
    bnf_free(&f);
}

/* Squares r^2 and non-squares 2 r^2 (2 is not a square mod p, p = 5 mod 8), computed with
   BIGNUM, and their 256-bit aliases z + p where those are below 2^256: the symbol is known
   without Euler. */
static void test_legendre_known_squares(void **state)
{
    (void)state;
    struct bnf f;
    bnf_init(&f);
    BIGNUM *r = BN_new(), *sq = BN_new(), *two = BN_new(), *top = BN_new();
    BN_set_word(two, 2);
    BN_set_bit(top, 256);
    uint64_t rng = 0x13198a2e03707344u;
    for (int i = 0; i < 3000; i++) {
        uint8_t z[32];
        random_z(&rng, z);
        if (i < 64)
            memset(z + 1 + i % 31, 0, 31 - i % 31); /* small r: small squares */
        assert_non_null(BN_lebin2bn(z, 32, r));
        if (BN_is_zero(r))
            BN_one(r);
        BN_mod_sqr(sq, r, f.p, f.ctx);
        if (BN_is_zero(sq))
            continue;
        for (int k = 0; k < 2; k++) {
            if (k == 1)
                BN_mod_mul(sq, sq, two, f.p, f.ctx);
            le_from_bn(sq, z);
            assert_int_equal(keyshare_legendre(z), k == 0 ? 1 : -1);
            BN_add(sq, sq, f.p); /* the same residue class, at or above p */
            if (BN_cmp(sq, top) < 0) {
                le_from_bn(sq, z);
                assert_int_equal(keyshare_legendre(z), k == 0 ? 1 : -1);
            }
            BN_sub(sq, sq, f.p);
        }
    }
    BN_free(r);
    BN_free(sq);
    BN_free(two);
    BN_free(top);
    bnf_free(&f);
}

/* Edge values: 0, p and 2p (symbol 0), 1, 2, p - 1, p + 1, every z below 2048, z near p,
   2^255 and 2^256, powers of two and their neighbours, long runs of zero and one bits, and
   values whose top 33 bits equal p's (the stand-ins cannot tell them apart from p). */
static void test_legendre_edge_values(void **state)
{
    (void)state;
    struct bnf f;
    bnf_init(&f);
    BIGNUM *v = BN_new(), *base = BN_new();
    uint8_t z[32];
    memset(z, 0, 32);
    assert_int_equal(keyshare_legendre(z), 0);
    le_from_bn(f.p, z);
    assert_int_equal(keyshare_legendre(z), 0);
    BN_lshift1(v, f.p);
    le_from_bn(v, z);
    assert_int_equal(keyshare_legendre(z), 0);
    memset(z, 0, 32);
    z[0] = 1;
    assert_int_equal(keyshare_legendre(z), 1);
    z[0] = 2;
    assert_int_equal(keyshare_legendre(z), -1);
    BN_sub(v, f.p, BN_value_one()); /* -1 is a square: p = 1 mod 4 */
    le_from_bn(v, z);
    assert_int_equal(keyshare_legendre(z), 1);
    for (unsigned k = 0; k < 2048; k++) {
        memset(z, 0, 32);
        z[0] = (uint8_t)k, z[1] = (uint8_t)(k >> 8);
        expect_legendre(z);
    }
    /* around p, 2^255, 2p and 2^256 - 1: base -k and base + k */
    for (int b = 0; b < 4; b++) {
        if (b == 0)
            BN_copy(base, f.p);
        else if (b == 1) {
            BN_zero(base);
            BN_set_bit(base, 255);
        } else if (b == 2)
            BN_lshift1(base, f.p);
        else {
            BN_zero(base);
            BN_set_bit(base, 256);
        }
        for (unsigned k = 1; k < 600; k++) {
            BN_copy(v, base);
            BN_sub_word(v, k);
            le_from_bn(v, z);
            expect_legendre(z);
            BN_copy(v, base);
            BN_add_word(v, k);
            if (BN_num_bits(v) <= 256) {
                le_from_bn(v, z);
                expect_legendre(z);
            }
        }
    }
    /* 2^i, 2^i +- 1, 2^i - 2^j, p - 2^i, p +- 2^i + 2^j (runs of zeros or ones) */
    for (int i = 0; i < 256; i++)
        for (int j = 0; j <= i; j += 1 + (i > 64) * 7) {
            for (int form = 0; form < 6; form++) {
                BN_zero(v);
                BN_set_bit(v, i);
                if (form == 1)
                    BN_add_word(v, 1);
                else if (form == 2)
                    BN_sub_word(v, 1);
                else if (form == 3) {
                    BN_zero(base);
                    BN_set_bit(base, j);
                    BN_sub(v, v, base);
                } else if (form >= 4) {
                    BN_zero(base);
                    BN_set_bit(base, j);
                    if (form == 4)
                        BN_sub(v, f.p, v);
                    else
                        BN_add(v, f.p, v);
                    BN_add(v, v, base);
                }
                if (BN_is_negative(v) || BN_num_bits(v) > 256)
                    continue;
                le_from_bn(v, z);
                expect_legendre(z);
            }
        }
    /* 64-bit words of zeros and of ones in random values */
    uint64_t rng = 0xa4093822299f31d0u;
    for (int i = 0; i < 4096; i++) {
        uint64_t w[4];
        for (int j = 0; j < 4; j++) {
            w[j] = tgtest_xorshift64(&rng);
            if ((i >> j) & 1)
                w[j] = (i >> (j + 4)) & 1 ? ~UINT64_C(0) : 0;
        }
        memcpy(z, w, 32);
        expect_legendre(z);
    }
    BN_free(v);
    BN_free(base);
    bnf_free(&f);
}

/* Sanitized builds run a tenth of the random values: Euler's criterion costs ~80 s a million
   under ASan+UBSan, and fuzz/proxy_keyshare runs the same comparison there. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LEGENDRE_RANDOM 100000
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define LEGENDRE_RANDOM 100000
#endif
#endif
#ifndef LEGENDRE_RANDOM
#define LEGENDRE_RANDOM 1000000
#endif

/* A million pseudo-random 256-bit values (every other one below 2^255, as the curve check
   sees them), against Euler's criterion. */
static void test_legendre_matches_euler(void **state)
{
    (void)state;
    uint64_t rng = 0x082efa98ec4e6c89u;
    int squares = 0;
    for (int i = 0; i < LEGENDRE_RANDOM; i++) {
        uint8_t z[32];
        random_z(&rng, z);
        if (i & 1)
            z[31] &= 0x7f;
        int got = keyshare_legendre(z);
        if (got != keyshare_legendre_euler(z))
            expect_legendre(z); /* fails with the value */
        squares += got == 1;
    }
    /* half are squares: within 1 % (more than 6 standard deviations at 100,000) */
    assert_in_range(squares, LEGENDRE_RANDOM / 2 - LEGENDRE_RANDOM / 100,
                    LEGENDRE_RANDOM / 2 + LEGENDRE_RANDOM / 100);
}

/* OpenSSL accepts the share as a peer key and derives a shared secret from it. */
static void test_openssl_accepts_share(void **state)
{
    (void)state;
    uint8_t pub[32], secret[32];
    size_t n = sizeof secret;
    assert_int_equal(keyshare_random(pub), 0);
    EVP_PKEY *peer = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, NULL, pub, 32);
    EVP_PKEY *mine = NULL;
    EVP_PKEY_CTX *kc = EVP_PKEY_CTX_new_id(EVP_PKEY_X25519, NULL);
    assert_non_null(peer);
    assert_int_equal(EVP_PKEY_keygen_init(kc), 1);
    assert_int_equal(EVP_PKEY_keygen(kc, &mine), 1);
    EVP_PKEY_CTX *dc = EVP_PKEY_CTX_new(mine, NULL);
    assert_int_equal(EVP_PKEY_derive_init(dc), 1);
    assert_int_equal(EVP_PKEY_derive_set_peer(dc, peer), 1);
    assert_int_equal(EVP_PKEY_derive(dc, secret, &n), 1);
    assert_int_equal(n, 32);
    EVP_PKEY_CTX_free(dc);
    EVP_PKEY_CTX_free(kc);
    EVP_PKEY_free(mine);
    EVP_PKEY_free(peer);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ladder_matches_openssl),
        cmocka_unit_test(test_checker_rejects_full_curve_points),
        cmocka_unit_test(test_random_shares_are_subgroup_points),
        cmocka_unit_test(test_candidates),
        cmocka_unit_test(test_batch_matches_ladder),
        cmocka_unit_test(test_noncanonical_candidates),
        cmocka_unit_test(test_curve_check_matches_kronecker),
        cmocka_unit_test(test_openssl_accepts_share),
        cmocka_unit_test(test_euler_reference_matches_kronecker),
        cmocka_unit_test(test_legendre_known_squares),
        cmocka_unit_test(test_legendre_edge_values),
        cmocka_unit_test(test_legendre_matches_euler),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
