/* Tests that proxy/crypto activates no OpenSSL provider where it does not need one (issue 30:
 * the default provider costs ~1.6 MB resident at start). The process initialises libcrypto
 * as tgproxy's main() does, then loads OpenSSL's "null" provider into the default library
 * context: once a provider is loaded explicitly, OpenSSL activates no fallback, so any
 * fetch or RAND_bytes fails from then on. Everything the AES-NI path does (CSPRNG, public
 * keystream, streams, SHA-256, HMAC) must still work and leave the default provider
 * inactive; the EVP path must fail with -EIO, and only when it is first used.
 * (OSSL_PROVIDER_available(NULL, "default") in an untouched context is no probe: it
 * activates the fallback provider itself.) The tests run in this order and share the
 * process's state: the EVP test comes last. */
#include "tgtest.h"

#include <errno.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/provider.h>

#include "core/str.h"
#include "proxy/wire/aesctr.h"
#include "proxy/wire/crypto.h"

static OSSL_PROVIDER *null_prov;

static int group_setup(void **state)
{
    (void)state;
    if (OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CRYPTO_STRINGS | OPENSSL_INIT_NO_LOAD_CONFIG,
                            NULL) != 1)
        return -1;
    null_prov = OSSL_PROVIDER_load(NULL, "null");
    return null_prov ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    return OSSL_PROVIDER_unload(null_prov) == 1 ? 0 : -1;
}

static void hex_to(const char *hex, uint8_t *out, size_t n)
{
    assert_int_equal(tg__hex_decode(out, n, hex, strlen(hex)), n);
}

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

/* The null provider makes OpenSSL's own CSPRNG and fetches fail: check that it does, so the
   tests below really run without a provider. */
static void test_no_provider_really(void **state)
{
    (void)state;
    assert_null(EVP_CIPHER_fetch(NULL, "AES-256-CTR", NULL));
    assert_false(OSSL_PROVIDER_available(NULL, "default"));
}

/* crypto_init and the CSPRNG (the per-thread block, large requests, ranges) need none. */
static void test_random_without_provider(void **state)
{
    (void)state;
    static uint8_t a[1 << 16], b[1 << 16];
    uint8_t s1[16], s2[16];
    /* without AES-NI every stream needs EVP: crypto_init fetches, and fails here */
    assert_int_equal(crypto_init(), aesctr_available() ? 0 : -EIO);
    assert_int_equal(crypto_random(s1, sizeof s1), 0); /* from the block */
    assert_int_equal(crypto_random(s2, sizeof s2), 0);
    assert_memory_not_equal(s1, s2, sizeof s1);
    assert_int_equal(crypto_random(a, sizeof a), 0); /* straight from the kernel */
    assert_int_equal(crypto_random(b, sizeof b), 0);
    assert_memory_not_equal(a, b, 64);
    assert_false(all_zero(a + sizeof a - 64, 64));
    uint32_t r = crypto_random_range(10, 20);
    assert_true(r >= 10 && r < 20);
    assert_false(OSSL_PROVIDER_available(NULL, "default"));
}

/* SHA-256 and HMAC-SHA256 (FIPS 180-2's "abc", RFC 4231 case 2) need none either. */
static void test_hash_without_provider(void **state)
{
    (void)state;
    uint8_t got[32], want[32];
    struct crypto_part abc = {"abc", 3};
    assert_int_equal(crypto_sha256(&abc, 1, got), 0);
    hex_to("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", want, 32);
#ifndef OPENSSL_NO_DEPRECATED_3_0
    assert_memory_equal(got, want, 32);
    struct crypto_part msg = {"what do ya want for nothing?", 28};
    assert_int_equal(crypto_hmac_sha256("Jefe", 4, &msg, 1, got), 0);
    hex_to("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843", want, 32);
    assert_memory_equal(got, want, 32);
#endif
    assert_false(OSSL_PROVIDER_available(NULL, "default"));
}

/* On AES-NI, streams and the public keystream need none: NIST SP 800-38A F.5.5
   (CTR-AES256.Encrypt), its first two blocks, applied in two uneven pieces. Without AES-NI
   they are the EVP path, which needs the provider: -EIO here. */
static void test_streams_without_provider(void **state)
{
    (void)state;
    uint8_t key[32], iv[16], buf[32], want[32];
    static uint8_t pub[4096];
    hex_to("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4", key, 32);
    hex_to("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff", iv, 16);
    hex_to("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51", buf, 32);
    hex_to("601ec313775789a5b7a7f504bbf3d228f443e3ca4d62b59aca84e990cacaf5c5", want, 32);
    struct crypto_ctr c = {0};
    assert_int_equal(crypto_ctr_aesni(), aesctr_available());
    if (!aesctr_available()) { /* the CPU's answer, whatever crypto_ctr_aesni() says */
        assert_int_equal(crypto_ctr_init(&c, key, iv), -EIO);
        assert_int_equal(crypto_random_public(pub, sizeof pub), -EIO);
        return;
    }
    assert_int_equal(crypto_ctr_init(&c, key, iv), 0);
    assert_int_equal(crypto_ctr_apply(&c, buf, 5), 0);
    assert_int_equal(crypto_ctr_apply(&c, buf + 5, sizeof buf - 5), 0);
    assert_memory_equal(buf, want, 32);
    crypto_ctr_park(&c);
    crypto_ctr_cleanup(&c);
    assert_int_equal(crypto_random_public(pub, sizeof pub), 0);
    assert_false(all_zero(pub + sizeof pub - 64, 64));
    assert_false(OSSL_PROVIDER_available(NULL, "default"));
}

/* The EVP path fetches on its first use, not before: forced here, its streams and public
   keystream fail (-EIO: no provider to fetch from), while the CSPRNG and, back on the
   CPU's choice, AES-NI streams go on working. */
static void test_evp_path_fetches_on_use(void **state)
{
    (void)state;
    uint8_t key[32] = {1}, iv[16] = {2}, buf[16] = {0}, pub[64], r[16];
    struct crypto_ctr c = {0};
    bool aesni = aesctr_available();
    assert_false(crypto_ctr_force_evp(true));
    assert_int_equal(crypto_ctr_init(&c, key, iv), -EIO);
    assert_int_equal(crypto_random_public(pub, sizeof pub), -EIO);
    assert_int_equal(crypto_random(r, sizeof r), 0);
    assert_int_equal(crypto_ctr_force_evp(false), aesni);
    if (aesni) {
        assert_int_equal(crypto_ctr_init(&c, key, iv), 0);
        assert_int_equal(crypto_ctr_apply(&c, buf, sizeof buf), 0);
        assert_false(all_zero(buf, sizeof buf));
        assert_int_equal(crypto_random_public(pub, sizeof pub), 0);
    }
    crypto_ctr_cleanup(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_provider_really),
        cmocka_unit_test(test_random_without_provider),
        cmocka_unit_test(test_hash_without_provider),
        cmocka_unit_test(test_streams_without_provider),
        cmocka_unit_test(test_evp_path_fetches_on_use),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
