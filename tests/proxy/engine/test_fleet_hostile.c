/*
 * test_fleet_hostile: the proxy's [fleet] Redis link against a hostile Redis (issue 21 item
 * 4). One fleet worker on a loop driven here; the server (tests/support/redis_hostile.h)
 * answers its first command with "*1170000000\r\n" and elements behind it, an array of 65536
 * bulk strings, "$4000000000\r\n" and its bytes, 64 nested arrays, a status line that never
 * ends, or replies nobody asked for (hiredis 0.14 asserts on those). Each must end in the
 * warning naming the bound (core/rbound.h; the proxy's answers are all small, so its bounds
 * are tight), the connection dropped while the server was still sending, peak memory within
 * a bound far below what the server offered, and a reconnect (a second connection). Every
 * wait is a bounded run of the loop.
 */
#include "tgtest.h"

#include <string.h>

#include "logcap.h"
#include "proxy/config/config.h"
#include "proxy/engine/fleet.h"
#include "proxy/engine/loop.h"
#include "proxy/engine/stats.h"
#include "redis_hostile.h"

#define PEAK_MAX ((uint64_t)64 << 20)

struct scenario {
    enum rhostile_mode mode;
    uint64_t cap;
    const char *expect;
    bool cut;
};

static const struct scenario scenarios[] = {
    {RH_HUGE_ARRAY, 16 << 20, "reply refused: an array of 1170000000 elements (limit 16)", true},
    {RH_BIG_REPLY, 256 << 20, "reply refused: an array of 65536 elements (limit 16)", true},
    {RH_HUGE_BULK, 256 << 20, "reply refused: a bulk string of 4000000000 bytes (limit 65536)",
     true},
    {RH_DEEP, 0, "reply refused: arrays nested 3 deep (limit 2)", false},
    {RH_LONG_LINE, 256 << 20, "reply refused: a line of more than", true},
    {RH_UNSOLICITED, 64 << 20, "reply refused: a reply no command is waiting for", true},
};

static struct rhostile H;

static int stop(void **state)
{
    (void)state;
    rhostile_stop(&H);
    return 0;
}

static void test_fleet_link(void **state)
{
    (void)state;
    logcap_start();
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        const struct scenario *s = &scenarios[i];
        assert_int_equal(rhostile_start(&H, s->mode, s->cap), 0);
        logcap_clear();
        (void)tgtest_rss_reset();
        uint64_t rss0 = (uint64_t)tgtest_rss_kb() * 1024;
        struct config cfg;
        config_init(&cfg);
        cfg.fleet.enabled = true;
        snprintf(cfg.fleet.host, sizeof cfg.fleet.host, "127.0.0.1");
        cfg.fleet.port = H.port;
        struct loop l;
        assert_int_equal(loop_init(&l), 0);
        struct stats st;
        memset(&st, 0, sizeof st);
        struct fleet *f = fleet_new(&cfg);
        assert_non_null(f);
        struct fleet_worker *fw = fleet_worker_new(f, &l, &st);
        assert_non_null(fw);
        /* refused, then a reconnect: at most ~10 s of loop turns */
        for (int k = 0; k < 1000 && !(logcap_has(s->expect) && atomic_load(&H.conns) >= 2); k++)
            loop_run_once(&l, 10);
        if (!logcap_has(s->expect))
            fail_msg("scenario %zu: log \"%s\", expected \"%s\"", i, logcap_text(), s->expect);
        assert_true(logcap_has("fleet: redis 127.0.0.1:"));
        assert_true(atomic_load(&H.conns) >= 2);
        if (s->cut) {
            assert_true(atomic_load(&H.cuts) >= 1);
            assert_true(atomic_load(&H.sent) < s->cap);
        }
        uint64_t peak = tgtest_rss_peak();
        if (peak > rss0 + PEAK_MAX)
            fail_msg("scenario %zu: peak memory %llu MiB above the %llu MiB before", i,
                     (unsigned long long)((peak - rss0) >> 20), (unsigned long long)(rss0 >> 20));
        fleet_worker_free(fw);
        fleet_free(f);
        loop_cleanup(&l);
        config_cleanup(&cfg);
        rhostile_stop(&H);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_fleet_link, stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
