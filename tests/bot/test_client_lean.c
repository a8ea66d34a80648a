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
 *  - warm calls make no allocation of ours;
 *  - TLS to `openssl s_server -www`: the second connection resumes the first one's session,
 *    as both our trace and the server's own status page ("Reused") say.
 */
#include "tgtest.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bot/client/lean_int.h"
#include "bot_server.h"
#include "core/alloc.h"
#include "tgbot/tgbot.h"

#define TOKEN   "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_"
#define ME      "{\"ok\":true,\"result\":{\"id\":7,\"is_bot\":true,\"first_name\":\"Bot\"}}"
#define OK_KEEP "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 62\r\n\r\n" ME

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
        struct step st =
            s->next < s->nscript ? s->script[s->next++] : (struct step){OK_KEEP, false};
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
    uint64_t fresh = tg__lean_fresh_ns;
    tg__lean_fresh_ns = 0; /* probe every reuse, however recent (no waiting out 1 ms) */
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
    tg__lean_fresh_ns = fresh;
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
    tg_ctx_set_retry_policy(ctx,
                            &(tg_retry_policy){.retry_after_send = true, .backoff_base_ms = 1});
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
         "20\r\n{\"ok\":true,\"result\":{\"id\":7,\"is_\r\n1e\r\nbot\":true,\"first_name\":\"Bot\"}"
         "}"
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

/* A large chunked answer: chunk data is received around the parser, straight into the answer
 * buffer, and must come out whole. */
static void test_large_chunked_answer(void **state)
{
    struct rawsrv *s = *state;
    enum { N = 200000 };
    static char ans[N + 256];
    char body[N + 64];
    int k = snprintf(body, 64, "{\"ok\":true,\"result\":\"");
    for (size_t i = 0; i < N; i++)
        body[k + i] = (char)('A' + i % 26);
    size_t blen = (size_t)k + N + (size_t)snprintf(body + k + N, 64, "\"}");
    size_t half = blen / 2;
    int h = snprintf(ans, sizeof ans,
                     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%zx\r\n", half);
    memcpy(ans + h, body, half);
    h += (int)half;
    h += snprintf(ans + h, sizeof ans - (size_t)h, "\r\n%zx;ext\r\n", blen - half);
    memcpy(ans + h, body + half, blen - half);
    h += (int)(blen - half);
    snprintf(ans + h, sizeof ans - (size_t)h, "\r\n0\r\n\r\n");
    struct step st[] = {{ans, false}, {OK_KEEP, false}};
    script(s, st, 2);
    tg_bot *bot = lean_bot(s, (tg_retry_policy){.max_attempts = 1});
    tg_ctx *ctx = tg_ctx_new(bot);
    const char *res;
    size_t n;
    assert_int_equal(tg_call_raw(ctx, "getMe", NULL, 0, &res, &n), TG_OK);
    assert_int_equal(n, N + 2);
    assert_memory_equal(res + 1, body + k, N);
    assert_int_equal(get_me(ctx), TG_OK); /* the connection was left at a clean boundary */
    tg_ctx_stats stats;
    tg_ctx_get_stats(ctx, &stats);
    assert_int_equal(stats.connects, 1);
    tg_ctx_free(ctx);
    tg_bot_free(bot);
}

static size_t give_five(void *user, char *buf, size_t n)
{
    int *calls = user;
    if ((*calls)++ > 0 || n < 5)
        return 0;
    memcpy(buf, "12345", 5);
    return 5;
}

/* An upload source yielding a different length than it announced fails with TG_ERR_IO (the
 * Content-Length sent would be a lie) and the connection is dropped, not reused. */
static void test_upload_length_mismatch(void **state)
{
    struct rawsrv *s = *state;
    script(s, NULL, 0);
    tg_bot *bot = lean_bot(s, (tg_retry_policy){.max_attempts = 1});
    tg_ctx *ctx = tg_ctx_new(bot);
    const char *res;
    size_t n;
    for (int announced = 3; announced <= 10; announced += 7) {
        int calls = 0;
        tg_file_part part = {
            .name = "document", .read = give_five, .read_user = &calls, .size = announced};
        assert_int_equal(
            tg_call_raw_files(ctx, "sendDocument", "{\"chat_id\":1}", 13, &part, 1, &res, &n),
            TG_ERR_IO);
        assert_non_null(strstr(tg_ctx_errmsg(ctx), "announced"));
    }
    assert_int_equal(get_me(ctx), TG_OK); /* a fresh connection */
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
        {"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{\"ok\":",
         "closed the connection mid-answer", 18},
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

/* ---- TLS session resumption against OpenSSL's s_server ---- */

extern char **environ;

struct s_server {
    pid_t pid;
    FILE *out;
    char base[64];
};

static bool s_server_start(struct s_server *ss, const char *cert, const char *key)
{
    int fds[2];
    if (pipe(fds) != 0)
        return false;
    char *argv[] = {"openssl",    "s_server", "-accept",   "127.0.0.1:0", "-www", "-cert",
                    (char *)cert, "-key",     (char *)key, "-naccept",    "2",    NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    int rc = posix_spawnp(&ss->pid, "openssl", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    ss->out = fdopen(fds[0], "r");
    char line[256];
    unsigned port = 0;
    /* bounded: s_server prints "ACCEPT 127.0.0.1:<port>" first */
    for (int i = 0; rc == 0 && ss->out && i < 10 && fgets(line, sizeof line, ss->out); i++)
        if (sscanf(line, "ACCEPT 127.0.0.1:%u", &port) == 1)
            break;
    snprintf(ss->base, sizeof ss->base, "https://127.0.0.1:%u", port);
    return rc == 0 && port != 0;
}

static void s_server_stop(struct s_server *ss)
{
    kill(ss->pid, SIGTERM);
    waitpid(ss->pid, NULL, 0);
    if (ss->out)
        fclose(ss->out);
}

static void test_tls_session_resumed(void **state)
{
    (void)state;
    char dir[] = "/tmp/tgtest-lean-XXXXXX", cert[96], key[96], cmd[512];
    assert_non_null(mkdtemp(dir));
    snprintf(cert, sizeof cert, "%s/cert.pem", dir);
    snprintf(key, sizeof key, "%s/key.pem", dir);
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout %s "
             "-out %s -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 "
             ">/dev/null 2>&1",
             key, cert);
    assert_int_equal(system(cmd), 0);
    struct s_server ss = {0};
    assert_true(s_server_start(&ss, cert, key));
    bot_logcap cap;
    bot_logcap_init(&cap);
    tg_bot *bot = tg_bot_new(TOKEN, &(tg_bot_options){.base_url = ss.base,
                                                      .transport = tg_transport_lean(),
                                                      .ca_file = cert,
                                                      .timeout_ms = 5000,
                                                      .log = bot_logcap_sink,
                                                      .log_user = &cap,
                                                      .log_level = TG_LOG_TRACE});
    assert_non_null(bot);
    tg_ctx *ctx = tg_ctx_new(bot);
    const void *page[2];
    size_t len[2];
    /* -www answers any GET with an HTTP/1.0 status page and closes: two connections */
    for (int i = 0; i < 2; i++) {
        tg_status st = tg_download_to_memory(ctx, "doc.txt", 0, &page[i], &len[i]);
        if (st != TG_OK)
            fail_msg("download %d: %s", i, tg_ctx_errmsg(ctx));
    }
    assert_non_null(strstr(page[0], "New, TLSv1"));
    assert_non_null(strstr(page[1], "Reused, TLSv1")); /* the server resumed the session */
    tg_ctx_stats stats;
    tg_ctx_get_stats(ctx, &stats);
    assert_int_equal(stats.connects, 2);
    tg_ctx_free(ctx);
    tg_bot_free(bot);
    assert_non_null(strstr(cap.text, "(session resumed)"));
    assert_null(strstr(cap.text, "AAHdqTcv"));
    bot_logcap_free(&cap);
    s_server_stop(&ss);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_idle_close_reconnects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_answer_is_not_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(test_framings, setup, teardown),
        cmocka_unit_test_setup_teardown(test_large_chunked_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed_answers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upload_length_mismatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_warm_calls_allocate_nothing, setup, teardown),
        cmocka_unit_test(test_tls_session_resumed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
