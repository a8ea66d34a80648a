/* Tests for proxy/aesctr (AES-256-CTR on AES-NI) and for crypto_ctr on both of its paths
 * (AES-NI and the forced EVP one): every result is compared with OpenSSL's
 * EVP_aes_256_ctr computed in one go, the independent implementation. */
#include "tgtest.h"

#include <errno.h>

#include <openssl/evp.h>

#include "core/str.h"
#include "proxy/wire/aesctr.h"
#include "proxy/wire/crypto.h"

/* Deterministic bytes (xorshift), so a failure repeats. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd64(void)
{
    return tgtest_xorshift64(&rng_state);
}
static void rnd_fill(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(rnd64() >> 24);
}

/* in ^ keystream[0, n) of (key, iv) by OpenSSL (in NULL: the keystream). */
static void evp_ctr(const uint8_t key[32], const uint8_t iv[16], const uint8_t *in, uint8_t *out,
                    size_t n)
{
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    assert_non_null(x);
    assert_int_equal(EVP_EncryptInit_ex(x, EVP_aes_256_ctr(), NULL, key, iv), 1);
    if (!in)
        memset(out, 0, n);
    int outl = 0;
    assert_int_equal(EVP_EncryptUpdate(x, out, &outl, in ? in : out, (int)n), 1);
    assert_int_equal(outl, (int)n);
    EVP_CIPHER_CTX_free(x);
}

/* The machine's CPU decides which path streams take; a CPU with AES-NI must get it. */
static bool need_aesni(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    bool cpu = __builtin_cpu_supports("aes") && __builtin_cpu_supports("sse4.1");
    assert_int_equal(aesctr_available(), cpu);
    assert_int_equal(crypto_ctr_aesni(), cpu); /* (not while forced to EVP) */
    if (!cpu)
        print_message("no AES-NI on this CPU: only the EVP path is tested\n");
    return cpu;
#else
    assert_false(aesctr_available());
    return false;
#endif
}

static void hex_in(uint8_t *out, size_t n, const char *hex)
{
    assert_int_equal(tg__hex_decode(out, n, hex, strlen(hex)), n);
}

/* NIST SP 800-38A F.5.5 (CTR-AES256.Encrypt): a known answer, not only agreement. */
static void test_sp800_38a_vector(void **state)
{
    (void)state;
    uint8_t key[32], iv[16], plain[64], want[64], got[64];
    hex_in(key, 32, "603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4");
    hex_in(iv, 16, "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff");
    hex_in(plain, 64, "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
                   "30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710");
    hex_in(want, 64, "601ec313775789a5b7a7f504bbf3d228f443e3ca4d62b59aca84e990cacaf5c5"
                   "2b0930daa23de94ce87017ba2d84988ddfc9c58db67aada613c2dd08457941a6");
    evp_ctr(key, iv, plain, got, 64);
    assert_memory_equal(got, want, 64); /* the vector is right */
    if (!need_aesni())
        return;
    aesctr_xor(key, iv, 0, plain, got, 64);
    assert_memory_equal(got, want, 64);
    /* each block on its own, from its position */
    for (int b = 0; b < 4; b++) {
        memset(got, 0, sizeof got);
        aesctr_xor(key, iv, 16 * (uint64_t)b, plain + 16 * b, got, 16);
        assert_memory_equal(got, want + 16 * b, 16);
    }
}

/* IVs whose counter carries: out of the low 64 bits, over all 128 (wrapping to zero), and
   just below both, so the carry falls inside an eight-block batch, between batches, in the
   single blocks and in the tail. */
static void fill_carry_iv(uint8_t iv[16], int kind)
{
    rnd_fill(iv, 16);
    switch (kind % 6) {
    case 0: /* all ones: 2^128 - 1, the next block is counter 0 */
        memset(iv, 0xff, 16);
        break;
    case 1: /* low half all ones: the first increment carries into the high half */
        memset(iv + 8, 0xff, 8);
        break;
    case 2: /* a few blocks below the 64-bit boundary (within the first batches) */
        memset(iv + 8, 0xff, 8);
        iv[15] = (uint8_t)(0xff - (rnd64() % 64));
        break;
    case 3: /* a few blocks below the 128-bit wrap */
        memset(iv, 0xff, 16);
        iv[15] = (uint8_t)(0xff - (rnd64() % 20));
        break;
    case 4: /* the low byte only wraps (a carry into byte 14) */
        iv[15] = 0xfe;
        break;
    default: /* random */
        break;
    }
}

/* aesctr_xor against EVP: random keys, carrying IVs, every length 0..300 and long ones
   (more than eight blocks, odd tails) at every block offset, in place, out of place and as
   bare keystream. */
static void check_matches_evp(void)
{
    /* up to three batches of sixteen blocks, one of eight, three single blocks and a tail */
    enum { MAX = 16 * 16 * 3 + 16 * 8 + 16 * 3 + 15 + 48 };
    static uint8_t in[MAX + 16], ref[MAX + 16], got[MAX + 16], buf[MAX + 16];
    uint8_t key[32], iv[16];
    for (int round = 0; round < 600; round++) {
        rnd_fill(key, 32);
        fill_carry_iv(iv, round);
        size_t len = round < 301 ? (size_t)round : 301 + rnd64() % (MAX - 16 - 301);
        size_t pos = rnd64() % 48; /* within the first three blocks */
        rnd_fill(in, pos + len);
        evp_ctr(key, iv, in, ref, pos + len);
        /* out of place */
        memset(got, 0xa5, sizeof got);
        aesctr_xor(key, iv, pos, in + pos, got, len);
        assert_memory_equal(got, ref + pos, len);
        assert_int_equal(got[len], 0xa5); /* nothing written past n */
        /* in place */
        memcpy(buf, in + pos, len);
        aesctr_xor(key, iv, pos, buf, buf, len);
        assert_memory_equal(buf, ref + pos, len);
        /* keystream alone */
        for (size_t i = 0; i < pos + len; i++)
            ref[i] ^= in[i];
        aesctr_xor(key, iv, pos, NULL, got, len);
        assert_memory_equal(got, ref + pos, len);
    }
}

static void test_aesctr_matches_evp(void **state)
{
    (void)state;
    if (need_aesni())
        check_matches_evp();
}

/* The same with the 128-bit code alone (where the CPU has VAES, the default runs the long
   parts sixteen blocks at a time; CPUs without it take this code for everything). */
static void test_aesctr_narrow(void **state)
{
    (void)state;
    if (!need_aesni())
        return;
    assert_false(aesctr_wide(false));
    check_matches_evp();
    aesctr_wide(true);
}

/* A position far into the stream (the block index carries into the IV's high half). */
static void test_aesctr_far_position(void **state)
{
    (void)state;
    if (!need_aesni())
        return;
    uint8_t key[32], iv[16], start[16], ref[200], got[200];
    rnd_fill(key, 32);
    for (int kind = 0; kind < 12; kind++) {
        fill_carry_iv(iv, kind);
        /* positions are 64-bit byte counts: block indexes below 2^60 */
        uint64_t blocks = (kind < 6 ? (UINT64_MAX >> (kind * 8)) : rnd64()) >> 4;
        uint64_t pos = blocks * 16 + (uint64_t)kind;
        memcpy(start, iv, 16);
        crypto_ctr_iv_add(start, blocks); /* the counter block at pos, computed apart */
        evp_ctr(key, start, NULL, ref, sizeof ref);
        aesctr_xor(key, iv, pos, NULL, got, sizeof got - (size_t)kind);
        assert_memory_equal(got, ref + kind, sizeof got - (size_t)kind);
    }
}

/* One stream through crypto_ctr, cut into applies: every first cut 0..300 then the rest,
   and random cuts (zero-length ones too); each must equal the stream computed in one go. */
static void check_splits(void)
{
    enum { LEN = 301 + 200 };
    static uint8_t plain[LEN], ref[LEN], got[LEN];
    uint8_t key[32], iv[16];
    for (int first = 0; first <= 300; first++) {
        rnd_fill(key, 32);
        fill_carry_iv(iv, first);
        rnd_fill(plain, LEN);
        evp_ctr(key, iv, plain, ref, LEN);
        struct crypto_ctr c = {0};
        assert_int_equal(crypto_ctr_init(&c, key, iv), 0);
        bool inplace = first % 2;
        if (inplace)
            memcpy(got, plain, LEN);
        size_t at = 0;
        size_t cut = (size_t)first;
        while (at < LEN) {
            size_t n = cut < LEN - at ? cut : LEN - at;
            if (inplace)
                assert_int_equal(crypto_ctr_apply(&c, got + at, n), 0);
            else
                assert_int_equal(crypto_ctr_apply2(&c, plain + at, got + at, n), 0);
            at += n;
            assert_int_equal(c.pos, at);
            cut = rnd64() % 300; /* may be 0 */
            if (rnd64() % 8 == 0)
                crypto_ctr_park(&c); /* resumes at the same position */
        }
        assert_memory_equal(got, ref, LEN);
        crypto_ctr_cleanup(&c);
        assert_false(c.ready);
    }
}

static void test_ctr_splits(void **state)
{
    (void)state;
    need_aesni();
    check_splits();
}

/* The same through OpenSSL's EVP (the path of CPUs without AES-NI), and both paths
   agree on long buffers. */
static void test_ctr_splits_evp(void **state)
{
    (void)state;
    assert_false(crypto_ctr_force_evp(true));
    assert_false(crypto_ctr_aesni());
    check_splits();
    bool aesni = crypto_ctr_force_evp(false);
    assert_int_equal(aesni, need_aesni());
}

/* A stream keeps no key schedule on the AES-NI path (init, apply, park, cleanup), keeps
   one on the EVP path, and a stream begun on one path goes on correctly on the other. */
static void test_ctr_paths(void **state)
{
    (void)state;
    bool aesni = need_aesni();
    uint8_t key[32], iv[16], plain[700], ref[700], got[700];
    rnd_fill(key, 32);
    fill_carry_iv(iv, 1);
    rnd_fill(plain, sizeof plain);
    evp_ctr(key, iv, plain, ref, sizeof ref);
    struct crypto_ctr c = {0};
    assert_int_equal(crypto_ctr_init(&c, key, iv), 0);
    assert_int_equal(crypto_ctr_apply2(&c, plain, got, 100), 0);
    assert_int_equal(crypto_ctr_keyed(&c), !aesni);
    if (aesni)
        assert_int_equal(c.serial, 0);
    crypto_ctr_force_evp(true);
    assert_int_equal(crypto_ctr_apply2(&c, plain + 100, got + 100, 333), 0);
    assert_true(crypto_ctr_keyed(&c));
    assert_int_not_equal(c.serial, 0);
    crypto_ctr_force_evp(false);
    assert_int_equal(crypto_ctr_apply2(&c, plain + 433, got + 433, sizeof plain - 433), 0);
    assert_memory_equal(got, ref, sizeof ref);
    crypto_ctr_cleanup(&c);
    assert_false(crypto_ctr_keyed(&c));
    static const struct crypto_ctr zero;
    assert_memory_equal(&c, &zero, sizeof c); /* key and IV wiped */
    assert_int_equal(crypto_ctr_apply(&c, got, 1), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sp800_38a_vector),   cmocka_unit_test(test_aesctr_matches_evp),
        cmocka_unit_test(test_aesctr_narrow),
        cmocka_unit_test(test_aesctr_far_position), cmocka_unit_test(test_ctr_splits),
        cmocka_unit_test(test_ctr_splits_evp),      cmocka_unit_test(test_ctr_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
