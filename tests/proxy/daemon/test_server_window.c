/*
 * The flow-controlled transfers of the load generator (pcli_sink_window,
 * pcli_source_window, the fake DC's SNKA and SRCW) straight into the fake DC and through
 * the proxy: payloads verified, the DC never sends past the client's credit (the client
 * fails the transfer if it does) and acknowledges only bytes that were sent.
 */
#include "tgtest.h"

#include "proxy_client.h"
#include "proxy_harness.h"
#include "proxy_load.h"

static void windowed(struct pharness *h, uint16_t port, enum pcli_mode mode, uint64_t window)
{
    static const uint64_t sizes[] = {1, 65536, 3000000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        struct pcli c;
        struct pcli_opts o = pharness_client(h, mode);
        assert_int_equal(pcli_connect(&c, port, &o), 0);
        assert_int_equal(pcli_sink_window(&c, (uint32_t)i, sizes[i], window), 0);
        pcli_close(&c);
        assert_int_equal(pcli_connect(&c, port, &o), 0);
        assert_int_equal(pcli_source_window(&c, (uint32_t)i + 5, sizes[i], window), 0);
        pcli_close(&c);
    }
}

static void test_window_direct_and_proxied(void **state)
{
    (void)state;
    struct pharness h;
    assert_int_equal(pharness_start(&h, &(struct pharness_opts){.ee = true, .dd = true}), 0);
    windowed(&h, h.dc_port, PCLI_DIRECT, 1 << 20);
    windowed(&h, h.port, PCLI_TLS, 1 << 20);
    windowed(&h, h.port, PCLI_DD, (uint64_t)64 * 1024);
    struct fakedc_counters dc = fakedc_counters(h.dc);
    assert_int_equal(dc.sink_ok, 9);
    assert_int_equal(dc.sink_bad, 0);
    pharness_stop(&h);
}

static void test_window_load_many(void **state)
{
    (void)state;
    struct pharness h;
    assert_int_equal(pharness_start(&h, &(struct pharness_opts){.ee = true}), 0);
    struct pcli_opts o = pharness_client(&h, PCLI_TLS);
    struct pload_result r =
        pload_run_window(20, h.port, &o, PLOAD_UP, 2000000, 1 << 20, NULL, NULL);
    assert_int_equal(r.failures, 0);
    r = pload_run_window(20, h.port, &o, PLOAD_DOWN, 2000000, 1 << 20, NULL, NULL);
    assert_int_equal(r.failures, 0);
    assert_int_equal(fakedc_counters(h.dc).sink_ok, 20);
    pharness_stop(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window_direct_and_proxied),
        cmocka_unit_test(test_window_load_many),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
