/*
 * test_client_flood: flood control and the retry decision.
 *
 * Unit part (includes the internal header): GCRA reservations at synthetic times, the table
 * sweep, and the retry policy table (what is retried, how long it waits, the bounds).
 *
 * Integration part: the fake server enforces Telegram's limits scaled up 10x (300 msg/s
 * global, 10 msg/s per chat, 200 msg/min per group) to keep the run short; the client uses
 * the same scaled limits less a 10% margin. 4 threads send 1,000 messages to 100 chats (20 of them
 * groups): all succeed with zero 429s. The control case shows the server does refuse a burst when
 * flood control is off, so the main assertion can fail.
 */
#include "tgtest.h"

#include <pthread.h>

#include "bot/client/client_int.h"
#include "bot_server.h"

#define TOKEN "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_"
#define SCALE 10.0
/* The client runs at 90% of the server's limits: the server judges arrival times, which
 * scheduling on a loaded 2-vCPU machine (sanitizers, ctest -j) can bunch up. */
#define MARGIN 0.9

static void test_gcra_spacing(void **state)
{
    (void)state;
    struct tg__flood f;
    assert_int_equal(tg__flood_init(&f, &(tg_flood_options){.enabled = true}), 0);
    assert_int_equal(f.global_us, 33334);
    assert_int_equal(f.chat_us, 1000000);
    assert_int_equal(f.group_us, 3000000);
    int64_t t = 1000000000;
    /* first message goes at once; the second to the same chat one second later */
    assert_int_equal(tg__flood_reserve(&f, 42, false, t), t);
    assert_int_equal(tg__flood_reserve(&f, 42, false, t), t + 1000000);
    /* another chat waits only for the global interval */
    assert_int_equal(tg__flood_reserve(&f, 43, false, t), t + 1000000 + 33334);
    /* a group: 3 s between its messages */
    int64_t g0 = tg__flood_reserve(&f, -100, true, t + 5000000);
    assert_int_equal(g0, t + 5000000);
    assert_int_equal(tg__flood_reserve(&f, -100, true, t + 5000000), g0 + 3000000);
    /* 40 chats at the same instant: evenly spaced by the global interval */
    int64_t prev = -1, now = t + 20000000;
    for (int64_t c = 1000; c < 1040; c++) {
        int64_t at = tg__flood_reserve(&f, c, false, now);
        if (prev >= 0)
            assert_int_equal(at - prev, 33334);
        prev = at;
    }
    /* many chats over time: the table sweeps expired buckets instead of growing forever */
    for (int64_t c = 0; c < 5000; c++)
        tg__flood_reserve(&f, 10000 + c, false, now + 10000000 + c * 2000000);
    assert_true(f.cap <= 256);
    tg__flood_cleanup(&f);

    /* fail-fast and max_wait */
    assert_int_equal(tg__flood_init(&f, &(tg_flood_options){.enabled = true, .fail_fast = true}),
                     0);
    assert_int_equal(tg__flood_reserve(&f, 1, false, t), t);
    assert_int_equal(tg__flood_reserve(&f, 1, false, t), -1);
    assert_int_equal(tg__flood_reserve(&f, 1, false, t + 1000000), t + 1000000);
    tg__flood_cleanup(&f);
    assert_int_equal(tg__flood_init(&f, &(tg_flood_options){.max_wait_ms = 1500}), 0);
    assert_int_equal(tg__flood_reserve(&f, 1, false, t), t);
    assert_int_equal(tg__flood_reserve(&f, 1, false, t), t + 1000000);
    assert_int_equal(tg__flood_reserve(&f, 1, false, t), -1); /* 2 s away > 1.5 s */
    tg__flood_cleanup(&f);
    assert_int_equal(tg__flood_init(&f, &(tg_flood_options){.global_per_sec = -3}), -1);

    assert_true(tg__flood_applies("sendMessage"));
    assert_true(tg__flood_applies("copyMessages"));
    assert_true(tg__flood_applies("forwardMessage"));
    assert_false(tg__flood_applies("sendChatAction"));
    assert_false(tg__flood_applies("getMe"));
}

static void test_retry_table(void **state)
{
    (void)state;
    tg_retry_policy def, opt;
    tg__retry_resolve(&(tg_retry_policy){0}, &def);
    tg__retry_resolve(
        &(tg_retry_policy){
            .retry_5xx = true, .retry_after_send = true, .max_attempts = 3, .max_total_ms = 5000},
        &opt);
    assert_int_equal(def.max_attempts, 5);
    const struct {
        const tg_retry_policy *p;
        enum tg__outcome out;
        uint32_t attempt;
        uint64_t elapsed;
        int32_t retry_after;
        int64_t lo, hi; /* -1, -1: give up */
    } cases[] = {
        {&def, TG__OUT_429, 1, 0, 3, 3000, 3050},
        {&def, TG__OUT_429, 1, 0, 61, -1, -1},     /* beyond max_retry_after_s */
        {&def, TG__OUT_429, 5, 0, 1, -1, -1},      /* attempts used up */
        {&def, TG__OUT_429, 1, 119000, 3, -1, -1}, /* total time would pass 120 s */
        {&def, TG__OUT_429, 1, 0, 0, 125, 250},    /* no retry_after: backoff */
        {&def, TG__OUT_CONNECT, 1, 0, 0, 125, 250},
        {&def, TG__OUT_CONNECT, 3, 0, 0, 500, 1000},
        {&def, TG__OUT_CONNECT, 4, 0, 0, 1000, 2000},
        {&def, TG__OUT_LOST, 1, 0, 0, -1, -1}, /* opt-in only */
        {&def, TG__OUT_5XX, 1, 0, 0, -1, -1},  /* opt-in only */
        {&def, TG__OUT_FATAL, 1, 0, 0, -1, -1},
        {&opt, TG__OUT_LOST, 1, 0, 0, 125, 250},
        {&opt, TG__OUT_5XX, 2, 0, 0, 250, 500},
        {&opt, TG__OUT_5XX, 3, 0, 0, -1, -1},
        {&opt, TG__OUT_429, 1, 0, 6, -1, -1}, /* 6 s wait > 5 s total */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (uint32_t rnd = 0; rnd < 2000; rnd += 97) {
            int64_t w = tg__retry_wait_ms(cases[i].p, cases[i].out, cases[i].attempt,
                                          cases[i].elapsed, cases[i].retry_after, rnd);
            if (w < cases[i].lo || w > cases[i].hi)
                fail_msg("case %zu: wait %lld not in [%lld, %lld]", i, (long long)w,
                         (long long)cases[i].lo, (long long)cases[i].hi);
        }
    }
    /* the cap holds however many attempts */
    tg_retry_policy many;
    tg__retry_resolve(&(tg_retry_policy){.max_attempts = 100, .max_total_ms = 100000000}, &many);
    assert_true(tg__retry_wait_ms(&many, TG__OUT_CONNECT, 60, 0, 0, 12345) <= 10000);
}

static const char *OK_MSG = "{\"ok\":true,\"result\":{\"message_id\":1,\"date\":1,"
                            "\"chat\":{\"id\":1,\"type\":\"private\"}}}";

struct sender {
    tg_bot *bot;
    int index, nthreads, total;
    int ok, flood429, other;
};

static int64_t chat_of(int i)
{
    int c = i % 100;
    return c < 20 ? -1000 - c : 1000 + c; /* 20 groups, 80 private chats */
}

static void *send_loop(void *p)
{
    struct sender *s = p;
    tg_ctx *ctx = tg_ctx_new(s->bot);
    char body[96];
    for (int i = s->index; i < s->total; i += s->nthreads) {
        int n = snprintf(body, sizeof body, "{\"chat_id\":%lld,\"text\":\"m%d\"}",
                         (long long)chat_of(i), i);
        tg_status st = tg_call_raw(ctx, "sendMessage", body, (size_t)n, NULL, NULL);
        if (st == TG_OK)
            s->ok++;
        else if (st == TG_ERR_API && tg_ctx_error(ctx)->error_code == 429)
            s->flood429++;
        else
            s->other++;
        tg_ctx_reset(ctx);
    }
    tg_ctx_free(ctx);
    return NULL;
}

static void test_server_refuses_unthrottled_burst(void **state)
{
    (void)state;
    bot_server *srv = bot_server_start(TOKEN);
    bot_server_set_reply(srv, "sendMessage", 200, OK_MSG);
    bot_server_enforce_flood(srv, 30 * SCALE, 1 * SCALE, 20 * SCALE);
    tg_bot *bot = bot_test_new(
        TOKEN, &(tg_bot_options){.base_url = bot_server_url(srv), .retry = {.max_attempts = 1}});
    tg_ctx *ctx = tg_ctx_new(bot);
    const char *p = "{\"chat_id\":7,\"text\":\"x\"}";
    int refused = 0;
    for (int i = 0; i < 20; i++)
        if (tg_call_raw(ctx, "sendMessage", p, strlen(p), NULL, NULL) == TG_ERR_API &&
            tg_ctx_error(ctx)->error_code == 429)
            refused++;
    assert_true(refused > 0);
    assert_int_equal((size_t)refused, bot_server_flood_429s(srv));
    tg_ctx_free(ctx);
    tg_bot_free(bot);
    bot_server_stop(srv);
}

static void test_burst_stays_under_limits(void **state)
{
    (void)state;
    bot_server *srv = bot_server_start(TOKEN);
    bot_server_set_reply(srv, "sendMessage", 200, OK_MSG);
    bot_server_enforce_flood(srv, 30 * SCALE, 1 * SCALE, 20 * SCALE);
    tg_bot *bot =
        bot_test_new(TOKEN, &(tg_bot_options){.base_url = bot_server_url(srv),
                                            .retry = {.max_attempts = 1}, /* a 429 would show */
                                            .flood = {.enabled = true,
                                                      .global_per_sec = 30 * SCALE * MARGIN,
                                                      .chat_per_sec = 1 * SCALE * MARGIN,
                                                      .group_per_min = 20 * SCALE * MARGIN}});
    enum { THREADS = 4, TOTAL = 1000 };
    struct sender s[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        s[i] = (struct sender){.bot = bot, .index = i, .nthreads = THREADS, .total = TOTAL};
        pthread_create(&t[i], NULL, send_loop, &s[i]);
    }
    int ok = 0, flood = 0, other = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        ok += s[i].ok, flood += s[i].flood429, other += s[i].other;
    }
    assert_int_equal(flood, 0);
    assert_int_equal(other, 0);
    assert_int_equal(ok, TOTAL);
    assert_int_equal(bot_server_flood_429s(srv), 0);
    assert_int_equal(bot_server_count(srv, "sendMessage"), TOTAL);
    tg_bot_free(bot);
    bot_server_stop(srv);
}

static void test_fail_fast(void **state)
{
    (void)state;
    bot_server *srv = bot_server_start(TOKEN);
    bot_server_set_reply(srv, "sendMessage", 200, OK_MSG);
    tg_bot *bot =
        bot_test_new(TOKEN, &(tg_bot_options){.base_url = bot_server_url(srv),
                                            .flood = {.enabled = true, .fail_fast = true}});
    tg_ctx *ctx = tg_ctx_new(bot);
    const char *p = "{\"chat_id\":\"@channel\",\"text\":\"x\"}";
    assert_int_equal(tg_call_raw(ctx, "sendMessage", p, strlen(p), NULL, NULL), TG_OK);
    assert_int_equal(tg_call_raw(ctx, "sendMessage", p, strlen(p), NULL, NULL), TG_ERR_FLOOD);
    assert_non_null(strstr(tg_ctx_errmsg(ctx), "flood control"));
    /* other methods are not throttled */
    bot_server_set_reply(srv, "getMe", 200, "{\"ok\":true,\"result\":{}}");
    assert_int_equal(tg_call_raw(ctx, "getMe", NULL, 0, NULL, NULL), TG_OK);
    assert_int_equal(bot_server_count(srv, "sendMessage"), 1);
    tg_ctx_free(ctx);
    tg_bot_free(bot);
    bot_server_stop(srv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gcra_spacing),
        cmocka_unit_test(test_retry_table),
        cmocka_unit_test(test_server_refuses_unthrottled_burst),
        cmocka_unit_test(test_burst_stays_under_limits),
        cmocka_unit_test(test_fail_fast),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
