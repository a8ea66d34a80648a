/*
 * test_redis_hostile: libtgbot's hiredis contexts against a hostile Redis (issue 21 item 4):
 * the fleet's connection (tg__rconn, which the ingress, the workers and flood control use)
 * and conversation storage (tg_storage_redis). The server (tests/support/redis_hostile.h)
 * answers the first command with "*1170000000\r\n" and elements behind it, a reply of 16 KiB
 * strings that never ends, "$4000000000\r\n" and its bytes, 64 nested arrays, or a status
 * line that never ends. Each must end in the error naming the bound (core/rbound.h), with the
 * connection dropped while the server was still sending (it did not have to take all of it),
 * peak memory within a bound far below what the server offered, and the next command
 * reconnecting (a second connection, refused the same way).
 */
#include "tgtest.h"

#include <string.h>

#include "bot/fleet/rconn.h"
#include "logcap.h"
#include "redis_hostile.h"
#include "tgbot/tgbot.h"

/* The bounds let a reply hold 64 MiB (+ a 16 MiB bulk); ThreadSanitizer's shadow memory
 * counts in RSS too (several bytes per byte touched). Without the bounds, the server's
 * 256 MiB offers are all held. */
#if defined(__SANITIZE_THREAD__)
#define TSAN_FACTOR 4
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TSAN_FACTOR 4
#endif
#endif
#ifndef TSAN_FACTOR
#define TSAN_FACTOR 1
#endif
#define PEAK_MAX ((uint64_t)160 * TSAN_FACTOR << 20)

struct scenario {
    enum rhostile_mode mode;
    uint64_t cap;       /* what the server offers at most */
    const char *expect; /* in the error */
    bool cut;           /* the client must go while the server is still sending */
};

static const struct scenario scenarios[] = {
    {RH_HUGE_ARRAY, 16 << 20, "reply refused: an array of 1170000000 elements (limit 65536)", true},
    {RH_BIG_REPLY, 256 << 20, "reply refused: a reply of more than", true},
    {RH_HUGE_BULK, 256 << 20, "reply refused: a bulk string of 4000000000 bytes (limit 16777216)",
     true},
    {RH_DEEP, 0, "reply refused: arrays nested 7 deep (limit 6)", false},
    {RH_LONG_LINE, 256 << 20, "reply refused: a line of more than", true},
};

static struct rhostile H;

static int stop(void **state)
{
    (void)state;
    rhostile_stop(&H);
    return 0;
}

static void start(const struct scenario *s)
{
    assert_int_equal(rhostile_start(&H, s->mode, s->cap), 0);
    (void)tgtest_rss_reset();
}

/* After the first refusal: the server was cut off (when it had more to send), and memory
 * stayed bounded. */
static void check_bounded(const struct scenario *s, uint64_t rss0)
{
    if (s->cut) {
        assert_int_equal(rhostile_wait_cuts(&H, 1), 0);
        assert_true(atomic_load(&H.sent) < s->cap);
    }
    uint64_t peak = tgtest_rss_peak();
    if (peak > rss0 + PEAK_MAX)
        fail_msg("peak memory %llu MiB above the %llu MiB before (bound %llu MiB)",
                 (unsigned long long)((peak - rss0) >> 20), (unsigned long long)(rss0 >> 20),
                 (unsigned long long)(PEAK_MAX >> 20));
}

static void test_fleet_connection(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        const struct scenario *s = &scenarios[i];
        start(s);
        uint64_t rss0 = (uint64_t)tgtest_rss_kb() * 1024;
        struct tg__rcfg cfg = {.host = (char *)"127.0.0.1", .port = H.port, .timeout_ms = 10000};
        tg__rconn *c = tg__rconn_new(&cfg);
        assert_non_null(c);
        const char *argv[] = {"PING"};
        assert_null(tg__rconn_cmd(c, NULL, 1, argv, NULL));
        if (!strstr(tg__rconn_err(c), s->expect))
            fail_msg("scenario %zu: error \"%s\", expected \"%s\"", i, tg__rconn_err(c), s->expect);
        assert_non_null(strstr(tg__rconn_err(c), "redis 127.0.0.1:"));
        check_bounded(s, rss0);
        /* the next command reconnects, and is refused the same way */
        assert_null(tg__rconn_cmd(c, NULL, 1, argv, NULL));
        assert_non_null(strstr(tg__rconn_err(c), s->expect));
        assert_int_equal(atomic_load(&H.conns), 2);
        tg__rconn_free(c);
        rhostile_stop(&H);
    }
}

static void test_conversation_storage(void **state)
{
    (void)state;
    logcap_start();
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        const struct scenario *s = &scenarios[i];
        start(s);
        uint64_t rss0 = (uint64_t)tgtest_rss_kb() * 1024;
        tg_storage *st = tg_storage_redis_new(
            &(tg_redis_options){.host = "127.0.0.1", .port = H.port, .timeout_ms = 10000});
        if (!st)
            fail_msg("storage: %s", tg_storage_errmsg());
        char buf[64];
        size_t len = 1;
        bool found = true;
        logcap_clear();
        assert_int_equal(tg_storage_get(st, "k", buf, sizeof buf, &len, &found), TG_ERR_TOO_BIG);
        assert_false(found);
        assert_int_equal(len, 0);
        if (!logcap_has(s->expect))
            fail_msg("scenario %zu: log \"%s\", expected \"%s\"", i, logcap_text(), s->expect);
        assert_true(logcap_has("conversation storage: redis 127.0.0.1:"));
        assert_non_null(strstr(tg_storage_errmsg(), s->expect)); /* the caller's view */
        check_bounded(s, rss0);
        assert_int_equal(tg_storage_set(st, "k", "v", 1, 0), TG_ERR_TOO_BIG);
        assert_int_equal(atomic_load(&H.conns), 2);
        tg_storage_free(st);
        rhostile_stop(&H);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_fleet_connection, stop),
        cmocka_unit_test_teardown(test_conversation_storage, stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
