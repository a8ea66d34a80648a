/*
 * The bot's logger holds back repeated warnings (src/bot/client/logrep.c), and long polling
 * logs once per state change and stops without waiting out its backoff:
 *  - calls to a closed port that retry: the same line up to its numbers is shown the 1st
 *    and 10th time, then once more at tg_bot_free with the count held back; another line
 *    keeps its own count; info lines all pass; a line back after 10 quiet minutes (virtual
 *    clock) ends its run and starts a new one;
 *  - polling a closed port for 30 failed calls: one warning, the rest at debug level, and no
 *    per-attempt retry lines of the client;
 *  - a stop during a one-hour backoff: tg_run_polling returns, and no second getUpdates was
 *    tried (the backoff never ran out);
 *  - failures then success (a scripted server): one warning, one "working again" line;
 *  - the async poller (tg_async_poll_start) the same: 30 failed polls of a closed port give
 *    one warning, and three 502s then a success one warning and one "working again".
 * Lines are counted through the bot's log sink; waits are for states (a condition variable
 * signalled by the sink), bounded; nothing sleeps to synchronise.
 */
#include "tgtest.h"

#include <pthread.h>
#include <time.h>

#include "bot/client/async_int.h"
#include "bot/client/client_int.h"
#include "bot_server.h"
#include "ports.h"
#include "tgbot/async.h"
#include "tgbot/client.h"
#include "tgbot/dispatch.h"
#include "tgbot/updates.h"

#define TOKEN   "123456:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
#define MAXLINE 512

struct cap {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n;
    int level[MAXLINE];
    char *text[MAXLINE];
};

static struct cap cap;

static void cap_reset(void)
{
    pthread_mutex_lock(&cap.mu);
    for (int i = 0; i < cap.n; i++)
        free(cap.text[i]);
    cap.n = 0;
    pthread_mutex_unlock(&cap.mu);
}

static void sink(void *user, int level, const char *line)
{
    (void)user;
    pthread_mutex_lock(&cap.mu);
    if (cap.n < MAXLINE) {
        cap.level[cap.n] = level;
        cap.text[cap.n++] = strdup(line);
    }
    pthread_cond_broadcast(&cap.cv);
    pthread_mutex_unlock(&cap.mu);
}

/* Lines at level (0 = any) holding needle. */
static int count(int level, const char *needle)
{
    int k = 0;
    pthread_mutex_lock(&cap.mu);
    for (int i = 0; i < cap.n; i++)
        if ((!level || cap.level[i] == level) && strstr(cap.text[i], needle))
            k++;
    pthread_mutex_unlock(&cap.mu);
    return k;
}

/* Wait (bounded: 60 s) until count(level, needle) >= n. */
static bool wait_count(int level, const char *needle, int n)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 60;
    pthread_mutex_lock(&cap.mu);
    for (;;) {
        int k = 0;
        for (int i = 0; i < cap.n; i++)
            if ((!level || cap.level[i] == level) && strstr(cap.text[i], needle))
                k++;
        if (k >= n || pthread_cond_timedwait(&cap.cv, &cap.mu, &until) != 0) {
            pthread_mutex_unlock(&cap.mu);
            return k >= n;
        }
    }
}

static void dump(void)
{
    pthread_mutex_lock(&cap.mu);
    for (int i = 0; i < cap.n; i++)
        print_message("  [%d] %s\n", cap.level[i], cap.text[i]);
    pthread_mutex_unlock(&cap.mu);
}

static char closed_url[64];

static tg_bot *closed_bot(int log_level, const tg_retry_policy *retry)
{
    int port = tgtest_listen_port(); /* nothing listens there: connections are refused */
    assert_true(port > 0);
    snprintf(closed_url, sizeof closed_url, "http://127.0.0.1:%d", port);
    tg_bot *bot =
        tg_bot_new(TOKEN, &(tg_bot_options){.base_url = closed_url,
                                            .log = sink,
                                            .log_level = log_level,
                                            .retry = retry ? *retry : (tg_retry_policy){0}});
    assert_non_null(bot);
    return bot;
}

static uint64_t vnow;

static uint64_t virtual_now(void *user)
{
    (void)user;
    return vnow;
}

static void test_repeats_held_back(void **state)
{
    (void)state;
    cap_reset();
    /* Three attempts, no real waits: two "retrying" warnings per call. */
    tg_bot *bot = closed_bot(
        TG_LOG_INFO,
        &(tg_retry_policy){.max_attempts = 3, .backoff_base_ms = 1, .backoff_max_ms = 1});
    vnow = 1000000;
    tg__logrep_set_clock(bot->rep, virtual_now, NULL);
    tg_ctx *ctx = tg_ctx_new(bot);
    for (int i = 0; i < 45; i++) { /* 90 retry lines, numbers differing */
        assert_int_equal(tg_get_me(ctx, NULL), TG_ERR_TRANSPORT);
        tg_ctx_reset(ctx);
    }
    if (count(TG_LOG_WARN, "retrying in") != 2) {
        dump();
        fail_msg("expected the 1st and the 10th retry line, got %d",
                 count(TG_LOG_WARN, "retrying in"));
    }
    assert_int_equal(count(TG_LOG_WARN, "[repeated 10 times in 0 s;"), 1);

    /* Another line keeps its own count; info lines always pass. */
    for (int i = 0; i < 12; i++) {
        tg_bot_log(bot, TG_LOG_WARN, "chat %d refused the message", i);
        tg_bot_log(bot, TG_LOG_INFO, "job %d ran", i);
    }
    assert_int_equal(count(TG_LOG_WARN, "refused the message"), 2);
    assert_int_equal(count(TG_LOG_WARN, "chat 9 refused the message [repeated 10 times"), 1);
    assert_int_equal(count(TG_LOG_INFO, " ran"), 12);

    /* Ten quiet minutes later the line starts a new run: the held count, then the line. */
    vnow += 11 * 60 * 1000;
    tg_bot_log(bot, TG_LOG_WARN, "chat %d refused the message", 99);
    assert_int_equal(count(TG_LOG_WARN, "chat 11 refused the message [repeated 2 more times, "
                                        "the last 660 s ago]"),
                     1);
    assert_int_equal(count(TG_LOG_WARN, "chat 99 refused the message"), 1);
    assert_null(strstr(cap.text[cap.n - 1], "repeated"));

    /* At free: what each run held back (80 retry lines since the 10th). */
    int before = cap.n;
    tg_ctx_free(ctx);
    tg_bot_free(bot);
    assert_int_equal(cap.n, before + 1);
    assert_non_null(strstr(cap.text[cap.n - 1], "[repeated 80 more times, the last 660 s ago]"));
    assert_non_null(strstr(cap.text[cap.n - 1], "retrying in"));
    cap_reset();
}

struct poll_run {
    tg_bot *bot;
    tg_router *r;
    tg_dispatcher *d;
    pthread_t th;
    tg_polling_options po;
    tg_status st;
};

static void *poll_main(void *arg)
{
    struct poll_run *p = arg;
    p->st = tg_run_polling(p->d, &p->po);
    return NULL;
}

static void poll_start(struct poll_run *p, tg_bot *bot, tg_polling_options po)
{
    p->bot = bot;
    p->r = tg_router_new();
    p->d = tg_dispatcher_new(bot, p->r, &(tg_dispatcher_options){.no_get_me = true});
    assert_non_null(p->d);
    p->po = po;
    assert_int_equal(pthread_create(&p->th, NULL, poll_main, p), 0);
}

static tg_status poll_stop(struct poll_run *p)
{
    tg_dispatcher_stop(p->d);
    assert_int_equal(pthread_join(p->th, NULL), 0);
    tg_dispatcher_free(p->d);
    tg_router_free(p->r);
    tg_bot_free(p->bot);
    return p->st;
}

static void test_polling_logs_state_changes(void **state)
{
    (void)state;
    cap_reset();
    struct poll_run p;
    poll_start(&p, closed_bot(TG_LOG_DEBUG, NULL),
               (tg_polling_options){.timeout_s = 1, .backoff_min_ms = 1, .backoff_max_ms = 2});
    if (!wait_count(TG_LOG_DEBUG, "(failure 30 in a row)", 1)) {
        dump();
        fail_msg("the poller did not fail 30 times in a row");
    }
    assert_int_equal(poll_stop(&p), TG_OK);
    if (count(TG_LOG_WARN, "getUpdates failed") != 1) {
        dump();
        fail_msg("%d warnings for one failing state", count(TG_LOG_WARN, "getUpdates failed"));
    }
    assert_int_equal(count(TG_LOG_WARN, "logged again when the error changes or polling works"), 1);
    assert_true(count(TG_LOG_DEBUG, "in a row); retrying in") >= 29);
    assert_int_equal(count(TG_LOG_WARN, "(attempt"), 0); /* no client-level retries */
    cap_reset();
}

static void test_stop_during_backoff(void **state)
{
    (void)state;
    cap_reset();
    struct poll_run p;
    /* An hour's backoff: if the stop waited for it, this test would not end. */
    poll_start(
        &p, closed_bot(TG_LOG_DEBUG, NULL),
        (tg_polling_options){.timeout_s = 1, .backoff_min_ms = 3600000, .backoff_max_ms = 3600000});
    assert_true(wait_count(TG_LOG_WARN, "retrying in 3600000 ms", 1));
    assert_int_equal(poll_stop(&p), TG_OK);
    /* The backoff never ran out: no second call was made. */
    assert_int_equal(count(0, "getUpdates failed"), 1);
    assert_int_equal(count(0, "in a row"), 0);
    cap_reset();
}

/* A Bot API whose getUpdates answers three 502s, then works (no updates). */
static bot_server *flaky_api(void)
{
    bot_server *srv = bot_server_start(TOKEN);
    assert_non_null(srv);
    bot_server_set_reply(srv, "getUpdates", 200, "{\"ok\":true,\"result\":[]}");
    for (int i = 0; i < 3; i++)
        bot_server_push_raw(srv, "getUpdates", 502, "text/html", "<html>Bad Gateway</html>");
    return srv;
}

static void test_recovery_logged_once(void **state)
{
    (void)state;
    cap_reset();
    bot_server *srv = flaky_api();
    tg_bot *bot = tg_bot_new(
        TOKEN, &(tg_bot_options){.base_url = bot_server_url(srv), .log = sink, .log_level = 0});
    assert_non_null(bot);
    struct poll_run p;
    poll_start(&p, bot,
               (tg_polling_options){.timeout_s = 1, .backoff_min_ms = 1, .backoff_max_ms = 2});
    if (!wait_count(TG_LOG_INFO, "getUpdates: working again after 3 failed calls", 1)) {
        dump();
        fail_msg("no recovery line");
    }
    assert_int_equal(poll_stop(&p), TG_OK);
    assert_int_equal(count(TG_LOG_WARN, "getUpdates failed"), 1);
    assert_int_equal(count(TG_LOG_WARN, "502"), 1);
    assert_int_equal(count(0, "working again"), 1);
    bot_server_stop(srv);
    cap_reset();
}

/* ---- the async poller (tg_async_poll_start): the same state changes ---- */

static void on_async_update(tg_async *a, const tg_update *u, void *user)
{
    (void)a;
    (void)u;
    (*(int *)user)++;
}

/* Poll with bot on an async handle (retry waits of 1..2 ms) until the log holds needle at
   level (bounded: 20,000 turns of at most 100 ms, or a full capture), then stop and free
   the bot. true when the line came; *got = the updates handed over. */
static bool async_poll_until(tg_bot *bot, int level, const char *needle, int *got)
{
    tg_async *a = tg_async_new(bot, NULL);
    assert_non_null(a);
    *got = 0;
    tg_async_poller *p =
        tg_async_poll_start(a, &(tg_async_poll_options){.timeout_s = 1}, on_async_update, got);
    assert_non_null(p);
    tg__async_poll_backoff(p, 1, 2);
    for (int i = 0; i < 20000 && count(level, needle) == 0 && cap.n < MAXLINE; i++)
        tg_async_run_once(a, 100);
    tg_async_poll_stop(p);
    tg_async_free(a);
    tg_bot_free(bot);
    return count(level, needle) > 0;
}

static void test_async_poll_logs_state_changes(void **state)
{
    (void)state;
    cap_reset();
    tg_bot *bot = closed_bot(TG_LOG_DEBUG, &(tg_retry_policy){.max_attempts = 1});
    int got;
    if (!async_poll_until(bot, TG_LOG_DEBUG, "(failure 30 in a row)", &got)) {
        dump();
        fail_msg("the async poller did not fail 30 times in a row");
    }
    if (count(TG_LOG_WARN, "async polling:") != 1) {
        dump();
        fail_msg("%d warnings for one failing state", count(TG_LOG_WARN, "async polling:"));
    }
    assert_int_equal(count(TG_LOG_WARN, "logged again when the error changes or polling works"), 1);
    assert_true(count(TG_LOG_DEBUG, "in a row); polling again in") >= 29);
    assert_int_equal(got, 0);
    cap_reset();
}

static void test_async_poll_recovery_logged_once(void **state)
{
    (void)state;
    cap_reset();
    bot_server *srv = flaky_api();
    tg_bot *bot = tg_bot_new(TOKEN, &(tg_bot_options){.base_url = bot_server_url(srv),
                                                      .log = sink,
                                                      .log_level = 0,
                                                      .retry = {.max_attempts = 1}});
    assert_non_null(bot);
    int got;
    if (!async_poll_until(bot, TG_LOG_INFO, "async polling: working again after 3 failed calls",
                          &got)) {
        dump();
        fail_msg("no recovery line");
    }
    assert_int_equal(count(TG_LOG_WARN, "async polling:"), 1);
    assert_int_equal(count(TG_LOG_WARN, "502"), 1);
    assert_int_equal(count(0, "working again"), 1);
    bot_server_stop(srv);
    cap_reset();
}

int main(void)
{
    pthread_mutex_init(&cap.mu, NULL);
    pthread_cond_init(&cap.cv, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_repeats_held_back),
        cmocka_unit_test(test_polling_logs_state_changes),
        cmocka_unit_test(test_stop_during_backoff),
        cmocka_unit_test(test_recovery_logged_once),
        cmocka_unit_test(test_async_poll_logs_state_changes),
        cmocka_unit_test(test_async_poll_recovery_logged_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
