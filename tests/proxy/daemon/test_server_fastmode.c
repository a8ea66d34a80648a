/*
 * Integration tests of fast-mode (brief 3.3) through the in-process engine: data flows both
 * ways with it on and off, and the fake DC sees the difference in the header it receives:
 * with fast mode the DC is handed the very keys the client decrypts its replies with (so the
 * proxy need not re-encrypt), without it the DC leg has keys of its own.
 */
#include "tgtest.h"

#include "proxy_client.h"
#include "proxy_harness.h"

/* Echo, upload and download through one connection per mode; returns nothing, asserts. */
static void transfer_and_check_keys(bool fast, enum pcli_mode mode)
{
    struct pharness h;
    assert_int_equal(
        pharness_start(&h, &(struct pharness_opts){.ee = true, .dd = true, .no_fast_mode = !fast}),
        0);
    static const uint64_t sizes[] = {1, 16385, 300000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        struct pcli c;
        struct pcli_opts o = pharness_client(&h, mode);
        assert_int_equal(pcli_connect(&c, h.port, &o), 0);
        assert_int_equal(pcli_echo(&c, (uint32_t)i + 3, sizes[i], 0), 0);
        uint8_t dc_keys[48];
        fakedc_last_reply_keyiv(h.dc, dc_keys);
        if (fast)
            assert_memory_equal(dc_keys, c.reply_keyiv, sizeof dc_keys);
        else
            assert_memory_not_equal(dc_keys, c.reply_keyiv, sizeof dc_keys);
        pcli_close(&c);

        assert_int_equal(pcli_connect(&c, h.port, &o), 0);
        assert_int_equal(pcli_sink(&c, (uint32_t)i + 11, sizes[i], 0), 0);
        pcli_close(&c);
        assert_int_equal(pcli_connect(&c, h.port, &o), 0);
        assert_int_equal(pcli_source(&c, (uint32_t)i + 17, sizes[i]), 0);
        pcli_close(&c);
    }
    struct fakedc_counters dc = fakedc_counters(h.dc);
    assert_int_equal(dc.headers_ok, 3 * (sizeof sizes / sizeof sizes[0]));
    assert_int_equal(dc.sink_ok, sizeof sizes / sizeof sizes[0]);
    assert_int_equal(dc.sink_bad, 0);
    pharness_stop(&h);
}

static void test_fast_mode_tls(void **state)
{
    (void)state;
    transfer_and_check_keys(true, PCLI_TLS);
}

static void test_fast_mode_dd(void **state)
{
    (void)state;
    transfer_and_check_keys(true, PCLI_DD);
}

static void test_no_fast_mode_tls(void **state)
{
    (void)state;
    transfer_and_check_keys(false, PCLI_TLS);
}

static void test_no_fast_mode_dd(void **state)
{
    (void)state;
    transfer_and_check_keys(false, PCLI_DD);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fast_mode_tls),
        cmocka_unit_test(test_fast_mode_dd),
        cmocka_unit_test(test_no_fast_mode_tls),
        cmocka_unit_test(test_no_fast_mode_dd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
