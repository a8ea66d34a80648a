/*
 * Webhook server on 127.0.0.1: every rejection path (404, 405, 401, 415, 413 declared and
 * chunked, 400), 200 with the handler running, 503 under backpressure, HTTPS with a
 * self-signed certificate made by the openssl CLI, and start-up errors.
 */
#include "tgtest.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "core/clock.h"
#include "slowloris.h"
#include "tgbot/dispatch.h"
#include "tgbot/updates.h"

#define SECRET "s3cr3t-token_X"
#define UPD(id, chat)                                                                              \
    "{\"update_id\":" #id ",\"message\":{\"message_id\":1,\"chat\":{\"id\":" #chat ","             \
    "\"type\":\"private\"},\"text\":\"hi\"}}"

static atomic_int handled;
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static bool gate_closed;

static tg_status h_msg(tg_hctx *h, void *user)
{
    (void)h;
    (void)user;
    pthread_mutex_lock(&gate_mu);
    while (gate_closed)
        pthread_cond_wait(&gate_cv, &gate_mu);
    pthread_mutex_unlock(&gate_mu);
    atomic_fetch_add(&handled, 1);
    return TG_OK;
}

static void gate_set(bool closed)
{
    pthread_mutex_lock(&gate_mu);
    gate_closed = closed;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
}

struct reply {
    long status;
    char body[512];
    size_t len;
};

static size_t collect(char *p, size_t sz, size_t n, void *user)
{
    struct reply *r = user;
    size_t k = sz * n;
    size_t room = sizeof r->body - 1 - r->len;
    memcpy(r->body + r->len, p, k < room ? k : room);
    r->len += k < room ? k : room;
    r->body[r->len] = '\0';
    return k;
}

struct req {
    const char *scheme;
    uint16_t port;
    const char *path;
    const char *method;
    const char *ctype;
    const char *secret;
    const char *body;
    bool chunked;
    const char *cafile;
};

static struct reply send_req(const struct req *q)
{
    struct reply r = {0};
    char url[256], h1[128], h2[300];
    snprintf(url, sizeof url, "%s://127.0.0.1:%u%s", q->scheme ? q->scheme : "http", q->port,
             q->path ? q->path : "/hook");
    CURL *c = curl_easy_init();
    struct curl_slist *hs = NULL;
    snprintf(h1, sizeof h1, "Content-Type: %s", q->ctype ? q->ctype : "application/json");
    hs = curl_slist_append(hs, h1);
    if (q->secret) {
        snprintf(h2, sizeof h2, "X-Telegram-Bot-Api-Secret-Token: %s", q->secret);
        hs = curl_slist_append(hs, h2);
    }
    if (q->chunked)
        hs = curl_slist_append(hs, "Transfer-Encoding: chunked");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hs);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, q->method ? q->method : "POST");
    if (q->body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, q->body);
        if (!q->chunked)
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(q->body));
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
    if (q->cafile)
        curl_easy_setopt(c, CURLOPT_CAINFO, q->cafile);
    CURLcode cc = curl_easy_perform(c);
    if (cc != CURLE_OK)
        fail_msg("request to %s failed: %s", url, curl_easy_strerror(cc));
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    curl_slist_free_all(hs);
    curl_easy_cleanup(c);
    return r;
}

struct fixture {
    tg_router *r;
    tg_dispatcher *d;
    tg_webhook *w;
};

static struct fixture start(unsigned workers, size_t capacity, const tg_webhook_options *wo)
{
    struct fixture f;
    f.r = tg_router_new();
    tg_router_on_kind(f.r, TG_UPDATE_MESSAGE, h_msg, NULL);
    tg_dispatcher_options o = {.workers = workers, .queue_capacity = capacity};
    f.d = tg_dispatcher_new(NULL, f.r, &o);
    assert_non_null(f.d);
    f.w = tg_webhook_start(f.d, wo);
    if (!f.w)
        fail_msg("webhook: %s", tg_webhook_errmsg());
    atomic_store(&handled, 0);
    return f;
}

static void stop(struct fixture *f)
{
    tg_webhook_stop(f->w);
    tg_dispatcher_free(f->d);
    tg_router_free(f->r);
}

/* Slowloris with the defaults: 8 addresses trickle headers on 128 connections each (1024,
   past libmicrohttpd's own default of 1020 in all), a 129th from each is closed at accept,
   and Telegram's POST from 127.0.0.1 is answered while all 1024 are held. */
static void test_slowloris_defaults(void **state)
{
    (void)state;
    tgtest_nofile_at_least(8192); /* the default limit is half of it: 4096 connections */
    /* one server thread: with libmicrohttpd's thread pool an accept sometimes waits for
       seconds, until the next connection arrives, which would fail this test for no
       reason of ours */
    tg_webhook_options wo = {
        .host = "127.0.0.1", .port = -1, .path = "/hook", .secret_token = SECRET, .threads = 1};
    struct fixture f = start(2, 16, &wo);
    uint16_t port = tg_webhook_port(f.w);
    static struct slow s;
    memset(&s, 0, sizeof s);
    for (int i = 2; i <= 9; i++) {
        char ip[16];
        snprintf(ip, sizeof ip, "127.0.0.%d", i);
        slow_open(&s, ip, port, 128);
        if (!slow_refused(ip, port))
            fail_msg("a 129th connection from %s was kept", ip);
    }
    struct reply r = send_req(&(struct req){.port = port, .secret = SECRET, .body = UPD(1, 1)});
    assert_int_equal(r.status, 200);
    assert_int_equal(slow_round(&s, 0), 0); /* the 1024 were still held */
    slow_close(&s);
    stop(&f);
}

struct post_arg {
    uint16_t port;
    long status;
};

static void *post_main(void *arg)
{
    struct post_arg *a = arg;
    a->status =
        send_req(&(struct req){.port = a->port, .secret = SECRET, .body = UPD(2, 1)}).status;
    return NULL;
}

/* Every slot taken by connections that keep trickling: each is cut once its request is
   overdue (request_timeout_ms), however steadily it sends, and a POST made meanwhile
   (waiting in the listen queue) is answered once they are gone. */
static void test_slowloris_deadline(void **state)
{
    (void)state;
    tg_webhook_options wo = {.host = "127.0.0.1",
                             .port = -1,
                             .path = "/hook",
                             .secret_token = SECRET,
                             .threads = 1, /* see test_slowloris_defaults */
                             .request_timeout_ms = 300,
                             .max_server_connections = 8,
                             .max_connections_per_ip = 4};
    struct fixture f = start(2, 16, &wo);
    uint16_t port = tg_webhook_port(f.w);
    struct slow s = {0};
    slow_open(&s, "127.0.0.2", port, 4);
    assert_true(slow_refused("127.0.0.2", port));
    slow_open(&s, "127.0.0.3", port, 4);
    assert_true(slow_refused("127.0.0.3", port)); /* 8 held: the server is full */
    struct post_arg a = {.port = port};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, post_main, &a), 0);
    slow_until_cut(&s, 50, 200);
    pthread_join(th, NULL);
    assert_int_equal(a.status, 200);
    tg_webhook_stats st;
    tg_webhook_get_stats(f.w, &st);
    /* the 8, and the POST's own connection if it sat idle past the deadline before curl
       closed it (a keep-alive connection waiting for its next request is cut too) */
    assert_true(st.timed_out == 8 || st.timed_out == 9);
    assert_int_equal((int)st.accepted, 1);
    slow_close(&s);
    stop(&f);
}

static void test_rejections(void **state)
{
    (void)state;
    tg_webhook_options wo = {.host = "127.0.0.1",
                             .port = -1,
                             .path = "/hook",
                             .secret_token = SECRET,
                             .max_body_bytes = 300};
    struct fixture f = start(2, 16, &wo);
    uint16_t port = tg_webhook_port(f.w);
    assert_true(port > 0);
    char big[400];
    memset(big, ' ', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    memcpy(big, UPD(1, 1), strlen(UPD(1, 1)));
    static const struct {
        struct req q;
        long status;
        const char *body; /* substring of the answer */
    } cases[] = {
        {{.path = "/other", .secret = SECRET, .body = UPD(1, 1)}, 404, "not found"},
        {{.method = "GET", .secret = SECRET}, 405, "POST"},
        {{.method = "PUT", .secret = SECRET, .body = UPD(1, 1)}, 405, "POST"},
        {{.body = UPD(1, 1)}, 401, "secret"},
        {{.secret = "s3cr3t-token_Y", .body = UPD(1, 1)}, 401, "secret"},
        {{.secret = "s3cr3t-token_X-longer", .body = UPD(1, 1)}, 401, "secret"},
        {{.secret = SECRET, .ctype = "text/plain", .body = UPD(1, 1)}, 415, "application/json"},
        {{.secret = SECRET, .ctype = "application/jsonp", .body = UPD(1, 1)}, 415, "Content"},
        {{.secret = SECRET, .body = "{\"update_id\":1,"}, 400, "update:"},
        {{.secret = SECRET, .body = "[1,2]"}, 400, "expected object"},
        {{.secret = SECRET, .body = "{\"message\":{}}"}, 400, "update_id: missing"},
        {{.secret = SECRET, .body = ""}, 400, "update"},
        {{.secret = SECRET, .body = "{\"update_id\":1}\xff"}, 400, "update"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct req q = cases[i].q;
        q.port = port;
        struct reply r = send_req(&q);
        if (r.status != cases[i].status || !strstr(r.body, cases[i].body))
            fail_msg("case %zu: got %ld \"%s\", want %ld with \"%s\"", i, r.status, r.body,
                     cases[i].status, cases[i].body);
        assert_null(strstr(r.body, SECRET));
    }
    struct reply r = send_req(&(struct req){.port = port, .secret = SECRET, .body = big});
    assert_int_equal(r.status, 413);
    r = send_req(&(struct req){.port = port, .secret = SECRET, .body = big, .chunked = true});
    assert_int_equal(r.status, 413);
    r = send_req(&(struct req){.port = port,
                               .secret = SECRET,
                               .ctype = "application/json; charset=utf-8",
                               .body = UPD(2, 1)});
    assert_int_equal(r.status, 200);
    assert_int_equal(tg_dispatcher_wait_idle(f.d, 10000), TG_OK);
    assert_int_equal(atomic_load(&handled), 1);
    tg_webhook_stats st;
    tg_webhook_get_stats(f.w, &st);
    assert_int_equal((int)st.accepted, 1);
    assert_int_equal((int)st.rejected, (int)(sizeof cases / sizeof cases[0]) + 2);
    stop(&f);
}

static void test_backpressure_503(void **state)
{
    (void)state;
    tg_webhook_options wo = {.host = "127.0.0.1", .port = -1, .path = "/hook"};
    gate_set(true);
    struct fixture f = start(1, 1, &wo);
    struct req q = {.port = tg_webhook_port(f.w), .body = UPD(1, 1)};
    assert_int_equal(send_req(&q).status, 200); /* runs, blocks on the gate */
    tg_dispatcher_stats ds = {0};
    for (int i = 0; i < 10000 && ds.received < 1; i++) {
        tg_dispatcher_get_stats(f.d, &ds);
        tg__sleep_ms(1);
    }
    /* The worker may not have taken update 1 yet; fill until the queue refuses. */
    long last = 200;
    int sent = 1;
    for (int i = 0; i < 4 && last == 200; i++, sent++) {
        char body[256];
        snprintf(body, sizeof body, UPD(% d, % d), i + 2, i + 2);
        q.body = body;
        last = send_req(&q).status;
    }
    assert_int_equal(last, 503);
    gate_set(false);
    assert_int_equal(tg_dispatcher_wait_idle(f.d, 10000), TG_OK);
    assert_int_equal(atomic_load(&handled), sent - 1);
    tg_webhook_stats st;
    tg_webhook_get_stats(f.w, &st);
    assert_int_equal((int)st.busy, 1);
    stop(&f);
}

static bool make_cert(const char *dir, char *cert, char *key, size_t cap)
{
    snprintf(cert, cap, "%s/cert.pem", dir);
    snprintf(key, cap, "%s/key.pem", dir);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey rsa:2048 -nodes -keyout %s -out %s -days 2 "
             "-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1",
             key, cert);
    return system(cmd) == 0;
}

static void test_https_self_signed(void **state)
{
    (void)state;
    char dir[] = "/tmp/tgtest-wh-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char cert[256], key[256];
    if (!make_cert(dir, cert, key, sizeof cert)) {
        rmdir(dir);
        fail_msg("openssl req could not make a certificate (openssl is in PKGS_BUILD)");
    }
    tg_webhook_options wo = {.host = "127.0.0.1",
                             .port = -1,
                             .path = "/hook",
                             .secret_token = SECRET,
                             .cert_file = cert,
                             .key_file = key};
    struct fixture f = start(2, 16, &wo);
    struct req q = {.scheme = "https",
                    .port = tg_webhook_port(f.w),
                    .secret = SECRET,
                    .body = UPD(1, 5),
                    .cafile = cert};
    assert_int_equal(send_req(&q).status, 200);
    q.secret = "nope";
    assert_int_equal(send_req(&q).status, 401);
    assert_int_equal(tg_dispatcher_wait_idle(f.d, 10000), TG_OK);
    assert_int_equal(atomic_load(&handled), 1);
    stop(&f);
    unlink(cert);
    unlink(key);
    rmdir(dir);
}

static void test_start_errors(void **state)
{
    (void)state;
    tg_router *r = tg_router_new();
    tg_dispatcher *d = tg_dispatcher_new(NULL, r, NULL);
    static const struct {
        tg_webhook_options o;
        const char *msg;
    } cases[] = {
        {{.port = -1, .secret_token = "bad secret!"}, "secret_token"},
        {{.port = -1, .path = "nohash"}, "must start with '/'"},
        {{.port = -1, .cert_file = "/nonexistent.pem"}, "both cert_file and key_file"},
        {{.port = -1, .cert_file = "/nonexistent.pem", .key_file = "/k"}, "cannot open"},
        {{.port = -1, .host = "localhost"}, "not an IPv4 or IPv6"},
        {{.port = 70000, .host = "127.0.0.1"}, "out of range"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_null(tg_webhook_start(d, &cases[i].o));
        if (!strstr(tg_webhook_errmsg(), cases[i].msg))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, tg_webhook_errmsg(), cases[i].msg);
    }
    tg_webhook_options wo = {.host = "127.0.0.1", .port = -1};
    tg_webhook *w = tg_webhook_start(d, &wo);
    assert_non_null(w);
    wo.port = tg_webhook_port(w);
    assert_null(tg_webhook_start(d, &wo)); /* port in use */
    assert_non_null(strstr(tg_webhook_errmsg(), "cannot listen"));
    tg_webhook_stop(w);
    tg_webhook_stop(NULL);
    tg_dispatcher_free(d);
    tg_router_free(r);
}

static tg_status h_respond(tg_hctx *h, void *user)
{
    (void)user;
    assert_int_equal(tg_hctx_respond(h, "sendMessage", "[1]"), TG_ERR_INVALID);
    return tg_hctx_respond(h, "sendMessage", " { \"chat_id\":1,\"text\":\"pong\"} ");
}

static void test_answer_in_response(void **state)
{
    (void)state;
    tg_router *r = tg_router_new();
    tg_router_on_kind(r, TG_UPDATE_MESSAGE, h_respond, NULL);
    tg_dispatcher *d = tg_dispatcher_new(NULL, r, &(tg_dispatcher_options){.workers = 1});
    tg_webhook_options wo = {
        .host = "127.0.0.1", .port = -1, .path = "/hook", .reply_wait_ms = 20000};
    tg_webhook *w = tg_webhook_start(d, &wo);
    assert_non_null(w);
    struct reply rep = send_req(&(struct req){.port = tg_webhook_port(w), .body = UPD(1, 1)});
    assert_int_equal(rep.status, 200);
    assert_string_equal(rep.body, "{\"method\":\"sendMessage\",\"chat_id\":1,\"text\":\"pong\"}");
    tg_webhook_stop(w);
    /* Outside a waiting webhook request there is no response to answer in. */
    assert_int_equal(tg_dispatcher_run_one(d, UPD(2, 1), strlen(UPD(2, 1))), TG_ERR_INVALID);
    tg_dispatcher_free(d);
    tg_router_free(r);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_ALL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rejections),         cmocka_unit_test(test_backpressure_503),
        cmocka_unit_test(test_https_self_signed),  cmocka_unit_test(test_start_errors),
        cmocka_unit_test(test_answer_in_response), cmocka_unit_test(test_slowloris_defaults),
        cmocka_unit_test(test_slowloris_deadline),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
