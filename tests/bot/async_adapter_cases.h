/*
 * async_adapter_cases.h: the cases every loop adapter of the async client must pass
 * (tests/bot/test_async_uv.c, test_async_event.c). A test file defines the driver for its
 * library — make a handle on its loop, run one iteration, free — and runs these cases:
 *   - against the fake Bot API server: 300 calls over a bounded pool, typed getMe, a 429
 *     retried on the loop's timer, a per-attempt timeout on the loop's timer, each callback
 *     exactly once with the right status;
 *   - against the in-process tgbot-emulator: typed getMe and sendMessage, the message seen
 *     in the user's chat;
 *   - freeing the handle with calls in flight: each completes once, cancelled.
 */
#ifndef TGKIT_TEST_ASYNC_ADAPTER_CASES_H
#define TGKIT_TEST_ASYNC_ADAPTER_CASES_H

#include "tgtest.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bot_server.h"
#include "tgbot/testing.h"
#include "tgbot/tgbot.h"

#define AD_TOKEN "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_"
#define AD_N     300

typedef struct loop_driver {
    const char *name;
    tg_async *(*make)(tg_bot *bot, const tg_async_options *o); /* loop + adapter + handle */
    void (*run_once)(void);                                    /* one iteration (may block) */
    void (*run_nowait)(void);                                  /* one, never blocking */
    void (*destroy)(void); /* free the handle (adapter), then the loop */
} loop_driver;

static const loop_driver *drv;
static int ad_calls[AD_N + 8];
static tg_status ad_st[AD_N + 8];
static int ad_done;
static char ad_name[32];

static void ad_on_done(tg_async *a, const tg_async_result *r, void *user)
{
    (void)a;
    int i = (int)(intptr_t)user;
    ad_calls[i]++;
    ad_st[i] = r->status;
    if (r->status != TG_OK && r->status != TG_ERR_CANCELLED && r->status != TG_ERR_TIMEOUT)
        fprintf(stderr, "%s call %d: %s\n", drv->name, i, tg_ctx_errmsg(r->ctx));
    ad_done++;
}

static void ad_on_me(tg_async *a, const tg_async_result *r, tg_user *me, void *user)
{
    ad_on_done(a, r, user);
    if (me)
        snprintf(ad_name, sizeof ad_name, "%s", me->first_name);
}

static void ad_on_sent(tg_async *a, const tg_async_result *r, tg_message *m, void *user)
{
    ad_on_done(a, r, user);
    assert_true(r->status != TG_OK || m != NULL);
}

static void ad_reset(void)
{
    memset(ad_calls, 0, sizeof ad_calls);
    memset(ad_st, 0, sizeof ad_st);
    ad_done = 0;
    ad_name[0] = '\0';
}

static void ad_run_until(tg_async *a, int want)
{
    for (int i = 0; i < 200000 && (ad_done < want || tg_async_pending(a) > 0); i++)
        drv->run_once();
    assert_int_equal(ad_done, want);
    assert_int_equal(tg_async_pending(a), 0);
}

static void test_adapter_fake_server(void **state)
{
    (void)state;
    ad_reset();
    bot_server *srv = bot_server_start(AD_TOKEN);
    assert_non_null(srv);
    bot_server_set_reply(srv, "getMe", 200,
                         "{\"ok\":true,\"result\":{\"id\":7,\"is_bot\":true,\"first_name\":\"B\"}}");
    bot_server_set_reply(srv, "sendMessage", 200,
                         "{\"ok\":true,\"result\":{\"message_id\":1,\"date\":1,"
                         "\"chat\":{\"id\":5,\"type\":\"private\"}}}");
    tg_bot *bot = tg_bot_new(AD_TOKEN, &(tg_bot_options){.base_url = bot_server_url(srv),
                                                          .log_level = TG_LOG_ERROR,
                                                          .retry = {.backoff_base_ms = 1}});
    assert_non_null(bot);
    tg_async *a = drv->make(bot, &(tg_async_options){.max_connections = 4});
    assert_non_null(a);
    for (int i = 0; i < AD_N; i++) {
        char j[64];
        snprintf(j, sizeof j, "{\"chat_id\":%d,\"text\":\"%s %d\"}", i, drv->name, i);
        assert_true(tg_async_call_raw(a, "sendMessage", j, strlen(j), ad_on_done,
                                      (void *)(intptr_t)i) != 0);
    }
    assert_true(tg_async_get_me(a, ad_on_me, (void *)(intptr_t)AD_N) != 0);
    ad_run_until(a, AD_N + 1);
    for (int i = 0; i <= AD_N; i++) {
        assert_int_equal(ad_calls[i], 1);
        assert_int_equal(ad_st[i], TG_OK);
    }
    assert_string_equal(ad_name, "B");
    tg_async_stats st;
    tg_async_get_stats(a, &st);
    assert_true(st.peak_connections <= 4);
    /* a 429 retried after its backoff (the loop's timer), then a timeout (the loop's timer) */
    bot_server_push_raw(srv, "getMe", 429, NULL,
                        "{\"ok\":false,\"error_code\":429,\"description\":\"Too Many\"}");
    assert_true(tg_async_call_raw(a, "getMe", NULL, 0, ad_on_done, (void *)(intptr_t)(AD_N + 1)));
    ad_run_until(a, AD_N + 2);
    assert_int_equal(ad_st[AD_N + 1], TG_OK);
    bot_server_push(srv, "getMe", &(bot_action){.kind = BOT_ACT_SLOW, .delay_ms = 20000,
                                                .body = "{\"ok\":true,\"result\":{}}"});
    tg_async_set_timeout(a, 200);
    assert_true(tg_async_call_raw(a, "getMe", NULL, 0, ad_on_done, (void *)(intptr_t)(AD_N + 2)));
    ad_run_until(a, AD_N + 3);
    assert_int_equal(ad_st[AD_N + 2], TG_ERR_TIMEOUT);
    assert_int_equal(ad_calls[AD_N + 1], 1);
    assert_int_equal(ad_calls[AD_N + 2], 1);
    /* the slow one is recorded once it is answered (at stop): 1 + the 429 + its retry */
    assert_int_equal(bot_server_count(srv, "getMe"), 3);
    drv->destroy();
    tg_bot_free(bot);
    bot_server_stop(srv);
}

static void test_adapter_emulator(void **state)
{
    (void)state;
    ad_reset();
    tg_test *t = tg_test_start();
    assert_non_null(t);
    tg_bot *bot =
        tg_bot_new(tg_test_token(t), &(tg_bot_options){.base_url = tg_test_url(t),
                                                        .log_level = TG_LOG_ERROR});
    assert_non_null(bot);
    tg_async *a = drv->make(bot, NULL);
    assert_non_null(a);
    assert_true(tg_test_send(t, 0, 0, "/start") > 0); /* a bot cannot write first */
    assert_true(tg_async_get_me(a, ad_on_me, (void *)(intptr_t)0) != 0);
    char text[64];
    snprintf(text, sizeof text, "hello from %s", drv->name);
    tg_send_message_params p = {.chat_id = tg_chat_id_int(tg_test_user_id(t)), .text = text};
    assert_true(tg_async_send_message(a, &p, ad_on_sent, (void *)(intptr_t)1) != 0);
    ad_run_until(a, 2);
    assert_int_equal(ad_st[0], TG_OK);
    assert_int_equal(ad_st[1], TG_OK);
    assert_true(ad_name[0] != '\0');
    char *m = tg_test_wait_message(t, 0, 0, text, 5000);
    assert_non_null(m);
    free(m);
    drv->destroy();
    tg_bot_free(bot);
    tg_test_free(t);
}

/* A server that takes connections and requests and never answers: calls stay in flight. */
struct mute_server {
    int lfd;
    int fds[16];
    int nfds;
    int requests; /* whole request heads read */
    char url[64];
};

static void mute_start(struct mute_server *m)
{
    memset(m, 0, sizeof *m);
    m->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(m->lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(m->lfd, 16), 0);
    socklen_t sl = sizeof sa;
    getsockname(m->lfd, (struct sockaddr *)&sa, &sl);
    snprintf(m->url, sizeof m->url, "http://127.0.0.1:%u", ntohs(sa.sin_port));
}

/* Accept what is waiting and count request heads read so far (non-blocking). */
static void mute_poll(struct mute_server *m)
{
    int fd;
    while (m->nfds < 16 && (fd = accept4(m->lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0)
        m->fds[m->nfds++] = fd;
    char buf[4096];
    for (int i = 0; i < m->nfds; i++) {
        ssize_t n = recv(m->fds[i], buf, sizeof buf, 0);
        if (n > 0 && memmem(buf, (size_t)n, "\r\n\r\n", 4))
            m->requests++; /* getMe "{}": head and body come in one piece */
    }
}

static void mute_stop(struct mute_server *m)
{
    for (int i = 0; i < m->nfds; i++)
        close(m->fds[i]);
    close(m->lfd);
}

static void test_adapter_free_in_flight(void **state)
{
    (void)state;
    ad_reset();
    struct mute_server m;
    mute_start(&m);
    tg_bot *bot =
        tg_bot_new(AD_TOKEN, &(tg_bot_options){.base_url = m.url, .log_level = TG_LOG_ERROR});
    assert_non_null(bot);
    tg_async *a = drv->make(bot, &(tg_async_options){.max_connections = 4});
    assert_non_null(a);
    for (int i = 0; i < 10; i++)
        assert_true(tg_async_call_raw(a, "getMe", NULL, 0, ad_on_done, (void *)(intptr_t)i));
    /* until four requests are on the wire (the other six wait in the queue) */
    for (int i = 0; i < 1000000 && m.requests < 4; i++) {
        drv->run_nowait();
        mute_poll(&m);
    }
    assert_int_equal(m.requests, 4);
    assert_int_equal(ad_done, 0);
    drv->destroy(); /* completes the ten now */
    assert_int_equal(ad_done, 10);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(ad_calls[i], 1);
        assert_int_equal(ad_st[i], TG_ERR_CANCELLED);
    }
    tg_bot_free(bot);
    mute_stop(&m);
}

/* extra: a case of the adapter's own (NULL = none). */
static int ad_run_cases(const loop_driver *d, const char *extra_name, CMUnitTestFunction extra)
{
    drv = d;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adapter_fake_server),
        cmocka_unit_test(test_adapter_emulator),
        cmocka_unit_test(test_adapter_free_in_flight),
        {extra_name, extra, NULL, NULL, NULL},
    };
    return tgtest_result(_cmocka_run_group_tests(d->name, tests, extra ? 4 : 3, NULL, NULL));
}

#endif
