/*
 * test_client: tg_bot / tg_ctx / tg_call_raw against the loopback fake Bot API server.
 * Covers the token rules, request shape, API errors, retries (429, 5xx, lost connections),
 * connection refused, timeouts, malformed/truncated JSON, HTML error pages, shutdown
 * interrupting a wait, keep-alive, and the token never reaching a log line or an error.
 */
#include "tgtest.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <unistd.h>

#include "bot_server.h"
#include "core/alloc.h"
#include "tgbot/tgbot.h"

#define TOKEN "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_"
#define GETME "{\"ok\":true,\"result\":{\"id\":7,\"is_bot\":true,\"first_name\":\"Bot\"}}"
#define FAST_RETRY                                                                                 \
    {                                                                                              \
        .backoff_base_ms = 1, .backoff_max_ms = 2                                                  \
    }

static tg_bot *bot_for(bot_server *srv, tg_bot_options o)
{
    o.base_url = bot_server_url(srv);
    tg_bot *bot = bot_test_new(TOKEN, &o);
    assert_non_null(bot);
    return bot;
}

static int setup(void **state)
{
    bot_fx *f = bot_fx_new(TOKEN, &(tg_bot_options){.retry = FAST_RETRY, .timeout_ms = 5000});
    bot_server_set_reply(f->srv, "getMe", 200, GETME);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    bot_fx_free(*state);
    return 0;
}

static int refusing_socket(char *url, size_t cap);

static tg_status call(tg_ctx *ctx, const char *method, const char *params, const char **res)
{
    size_t n;
    const char *dummy;
    return tg_call_raw(ctx, method, params, params ? strlen(params) : 0, res ? res : &dummy, &n);
}

static void test_token_shapes(void **state)
{
    (void)state;
    static const struct {
        const char *token;
        bool ok;
    } cases[] = {
        {TOKEN, true},
        {"1:abcdefghijklmnopqrstuvwxyzABCDEFGHI", true},
        {"1:abcdefghijklmnopqrstuvwxyzABCDEFGH", false}, /* 34 characters */
        {":AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_", false},
        {"12a:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_", false},
        {"123456789AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_", false},
        {"123:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_ ", false},
        {"123:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/x", false},
        {"0:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_xx", false},
        {"", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_bot *bot = bot_test_new(cases[i].token, NULL);
        assert_int_equal(bot != NULL, cases[i].ok);
        if (!bot) {
            const char *why = tg_bot_new_errmsg();
            assert_true(strncmp(why, "token: ", 7) == 0);
            assert_null(strstr(why, "AAHdqTcv"));
        } else {
            assert_string_equal(tg_bot_new_errmsg(), "");
        }
        tg_bot_free(bot);
    }
    assert_null(bot_test_new(NULL, NULL));
    tg_bot *bot = bot_test_new(TOKEN, NULL);
    assert_int_equal(tg_bot_id(bot), 123456789);
    tg_bot_free(bot);
    assert_null(bot_test_new(TOKEN, &(tg_bot_options){.base_url = "ftp://x"}));
    assert_null(
        bot_test_new(TOKEN, &(tg_bot_options){.flood = {.enabled = true, .chat_per_sec = -1}}));
}

static void test_get_me(void **state)
{
    bot_fx *f = *state;
    const char *res;
    size_t n;
    assert_int_equal(tg_call_raw(f->ctx, "getMe", NULL, 0, &res, &n), TG_OK);
    assert_string_equal(res, "{\"id\":7,\"is_bot\":true,\"first_name\":\"Bot\"}");
    assert_int_equal(n, strlen(res));
    assert_string_equal(tg_ctx_errmsg(f->ctx), "");
    assert_int_equal(tg_ctx_status(f->ctx), TG_OK);
    const bot_request *r = bot_server_last(f->srv);
    assert_string_equal(r->method, "getMe");
    assert_string_equal(r->path, "/bot<TOKEN>/getMe");
    assert_string_equal(r->http_method, "POST");
    assert_string_equal(r->content_type, "application/json");
    assert_string_equal(r->body, "{}");
    assert_string_equal(r->user_agent, "tgbot/0.1.0");
    assert_false(r->test_env);
}

static void test_params_body(void **state)
{
    bot_fx *f = *state;
    bot_server_set_reply(f->srv, "sendMessage", 200, "{\"ok\":true,\"result\":{\"message_id\":5}}");
    const char *p = "{\"chat_id\":42,\"text\":\"h\\u00e9\"}";
    const char *res;
    assert_int_equal(call(f->ctx, "sendMessage", p, &res), TG_OK);
    assert_string_equal(res, "{\"message_id\":5}");
    assert_string_equal(bot_server_last(f->srv)->body, p);
    /* results live in the arena until reset; a second call does not clobber the first */
    const char *res2;
    assert_int_equal(call(f->ctx, "getMe", NULL, &res2), TG_OK);
    assert_string_equal(res, "{\"message_id\":5}");
    tg_ctx_reset(f->ctx);
}

static void test_test_env(void **state)
{
    bot_fx *f = *state;
    tg_bot *bot = bot_for(f->srv, (tg_bot_options){.test_env = true, .user_agent = "ua/1"});
    tg_ctx *ctx = tg_ctx_new(bot);
    assert_int_equal(call(ctx, "getMe", NULL, NULL), TG_OK);
    const bot_request *r = bot_server_last(f->srv);
    assert_true(r->test_env);
    assert_string_equal(r->path, "/bot<TOKEN>/test/getMe");
    assert_string_equal(r->user_agent, "ua/1");
    tg_ctx_free(ctx);
    tg_bot_free(bot);
}

static void test_api_error(void **state)
{
    bot_fx *f = *state;
    bot_server_push_error(f->srv, "sendMessage", 400, "Bad Request: chat not found");
    assert_int_equal(call(f->ctx, "sendMessage", "{\"chat_id\":1,\"text\":\"x\"}", NULL),
                     TG_ERR_API);
    const tg_error_info *e = tg_ctx_error(f->ctx);
    assert_int_equal(e->status, TG_ERR_API);
    assert_int_equal(e->error_code, 400);
    assert_int_equal(e->http_status, 400);
    assert_string_equal(e->description, "Bad Request: chat not found");
    assert_string_equal(e->method, "sendMessage");
    assert_int_equal(e->attempts, 1);
    assert_string_equal(tg_ctx_errmsg(f->ctx),
                        "sendMessage: Bot API error 400: Bad Request: chat not found");
    /* migrate_to_chat_id is kept */
    bot_server_push_raw(f->srv, "sendMessage", 400, NULL,
                        "{\"ok\":false,\"error_code\":400,\"description\":\"Bad Request: group "
                        "chat was upgraded to a supergroup chat\",\"parameters\":"
                        "{\"migrate_to_chat_id\":-1001234567890}}");
    assert_int_equal(call(f->ctx, "sendMessage", "{\"chat_id\":-5,\"text\":\"x\"}", NULL),
                     TG_ERR_API);
    assert_int_equal(tg_ctx_error(f->ctx)->migrate_to_chat_id, -1001234567890LL);
    assert_non_null(strstr(tg_ctx_errmsg(f->ctx), "migrated to chat -1001234567890"));
    /* unknown method: the server's 404 */
    assert_int_equal(call(f->ctx, "noSuchMethod", NULL, NULL), TG_ERR_API);
    assert_int_equal(tg_ctx_error(f->ctx)->error_code, 404);
}

static void test_invalid_arguments(void **state)
{
    bot_fx *f = *state;
    size_t before = bot_server_nrequests(f->srv);
    assert_int_equal(call(f->ctx, "send Message", NULL, NULL), TG_ERR_INVALID);
    assert_non_null(strstr(tg_ctx_errmsg(f->ctx), "method"));
    assert_int_equal(call(f->ctx, "", NULL, NULL), TG_ERR_INVALID);
    assert_int_equal(call(f->ctx, "getMe", "[1,2]", NULL), TG_ERR_INVALID);
    assert_string_equal(tg_ctx_errmsg(f->ctx),
                        "getMe: params: expected a JSON object, found array");
    assert_int_equal(call(f->ctx, "getMe", "{\"a\":", NULL), TG_ERR_INVALID);
    assert_int_equal(tg_call_raw(NULL, "getMe", NULL, 0, NULL, NULL), TG_ERR_INVALID);
    /* a known method's required parameters, from the generated tables (issue 17: a
     * sendMessage without text used to be sent) */
    assert_int_equal(call(f->ctx, "sendMessage", "{\"chat_id\":1}", NULL), TG_ERR_INVALID);
    assert_string_equal(tg_ctx_errmsg(f->ctx),
                        "sendMessage: params: required parameter text is missing");
    assert_int_equal(call(f->ctx, "sendMessage", "{\"chat_id\":1,\"text\":null}", NULL),
                     TG_ERR_INVALID);
    assert_int_equal(call(f->ctx, "sendMessage", NULL, NULL), TG_ERR_INVALID);
    assert_string_equal(tg_ctx_errmsg(f->ctx),
                        "sendMessage: params: required parameter chat_id is missing");
    const char *res;
    size_t n;
    tg_file_part doc = {.name = "document", .data = "x", .len = 1};
    assert_int_equal(
        tg_call_raw_files(f->ctx, "sendDocument", "{\"chat_id\":1}", 13, NULL, 0, &res, &n),
        TG_ERR_INVALID);
    assert_non_null(strstr(tg_ctx_errmsg(f->ctx), "required parameter document is missing"));
    assert_int_equal(bot_server_nrequests(f->srv), before);
    /* the file part counts as the parameter; an unknown method goes unchecked */
    bot_server_set_reply(f->srv, "sendDocument", 200, "{\"ok\":true,\"result\":true}");
    assert_int_equal(
        tg_call_raw_files(f->ctx, "sendDocument", "{\"chat_id\":1}", 13, &doc, 1, &res, &n), TG_OK);
    bot_server_set_reply(f->srv, "futureMethod", 200, "{\"ok\":true,\"result\":1}");
    assert_int_equal(call(f->ctx, "futureMethod", NULL, NULL), TG_OK);
}

static void test_429_honoured_and_bounded(void **state)
{
    bot_fx *f = *state;
    tg_ctx_stats st0, st1;
    tg_ctx_get_stats(f->ctx, &st0);
    bot_server_push_429(f->srv, "getMe", 1);
    assert_int_equal(call(f->ctx, "getMe", NULL, NULL), TG_OK);
    assert_int_equal(tg_ctx_error(f->ctx)->attempts, 0); /* cleared by the success */
    assert_int_equal(bot_server_count(f->srv, "getMe"), 2);
    tg_ctx_get_stats(f->ctx, &st1);
    assert_int_equal(st1.retries - st0.retries, 1);
    assert_int_equal(st1.requests - st0.requests, 2);

    /* retry_after beyond max_retry_after_s: fails at once, parameters kept */
    bot_server_push_429(f->srv, "getMe", 100);
    assert_int_equal(call(f->ctx, "getMe", NULL, NULL), TG_ERR_API);
    assert_int_equal(tg_ctx_error(f->ctx)->retry_after, 100);
    assert_int_equal(tg_ctx_error(f->ctx)->error_code, 429);
    assert_int_equal(tg_ctx_error(f->ctx)->attempts, 1);
    assert_string_equal(tg_ctx_errmsg(f->ctx),
                        "getMe: Bot API error 429: Too Many Requests: retry after 100");
    bot_server_push_raw(f->srv, "getMe", 429, NULL,
                        "{\"ok\":false,\"error_code\":429,\"description\":\"Slow down\","
                        "\"parameters\":{\"retry_after\":100}}");
    assert_int_equal(call(f->ctx, "getMe", NULL, NULL), TG_ERR_API);
    assert_string_equal(tg_ctx_errmsg(f->ctx),
                        "getMe: Bot API error 429: Slow down (retry after 100 s)");

    /* attempts bounded: two 429s with max_attempts 2 */
    tg_ctx_set_retry_policy(f->ctx, &(tg_retry_policy){.max_attempts = 2});
    bot_server_push_429(f->srv, "getMe", 1);
    bot_server_push_429(f->srv, "getMe", 1);
    size_t before = bot_server_count(f->srv, "getMe");
    assert_int_equal(call(f->ctx, "getMe", NULL, NULL), TG_ERR_API);
    assert_int_equal(tg_ctx_error(f->ctx)->attempts, 2);
    assert_int_equal(bot_server_count(f->srv, "getMe"), before + 2);

    /* opted out: no retry */
    tg_ctx_set_retry_policy(f->ctx, &(tg_retry_policy){.no_retry_429 = true});
    bot_server_push_429(f->srv, "getMe", 1);
    assert_int_equal(call(f->ctx, "getMe", NULL, NULL), TG_ERR_API);
    assert_int_equal(tg_ctx_error(f->ctx)->attempts, 1);
    tg_ctx_set_retry_policy(f->ctx, NULL);
}

static void test_5xx(void **state)
{
    bot_fx *f = *state;
    /* default: 5xx is not retried (the request may have been acted on) */
    bot_server_push_error(f->srv, "getMe", 500, "Internal Server Error");
    assert_int_equal(call(f->ctx, "getMe", NULL, NULL), TG_ERR_API);
    assert_int_equal(tg_ctx_error(f->ctx)->error_code, 500);
    assert_int_equal(tg_ctx_error(f->ctx)->attempts, 1);
    /* opted in: 5xx then success */
    tg_ctx_set_retry_policy(f->ctx, &(tg_retry_policy){.retry_5xx = true, .backoff_base_ms = 1});
    bot_server_push_error(f->srv, "getMe", 502, "Bad Gateway");
    bot_server_push_raw(f->srv, "getMe", 503, "text/html", "<html>busy</html>");
    size_t before = bot_server_count(f->srv, "getMe");
    assert_int_equal(call(f->ctx, "getMe", NULL, NULL), TG_OK);
    assert_int_equal(bot_server_count(f->srv, "getMe"), before + 3);
    tg_ctx_set_retry_policy(f->ctx, NULL);
}

static void test_html_502_and_bad_json(void **state)
{
    bot_fx *f = *state;
    bot_server_push_raw(f->srv, "getMe", 502, "text/html",
                        "<html><head><title>502 Bad Gateway</title></head></html>");
    assert_int_equal(call(f->ctx, "getMe", NULL, NULL), TG_ERR_HTTP);
    assert_int_equal(tg_ctx_error(f->ctx)->http_status, 502);
    char want[256];
    snprintf(want, sizeof want,
             "getMe: HTTP 502 without a Bot API answer (56 bytes) from %s/bot<token>/getMe",
             bot_server_url(f->srv));
    assert_string_equal(tg_ctx_errmsg(f->ctx), want);

    bot_server_push_raw(f->srv, "getMe", 200, NULL, "{\"ok\":true,\"result\":{\"id\":7");
    assert_int_equal(call(f->ctx, "getMe", NULL, NULL), TG_ERR_DECODE);
    assert_non_null(strstr(tg_ctx_errmsg(f->ctx), "getMe: the answer is not valid JSON: "));

    bot_server_push_raw(f->srv, "getMe", 200, NULL, "{\"ok\":tru}");
    assert_int_equal(call(f->ctx, "getMe", NULL, NULL), TG_ERR_DECODE);

    bot_server_push_raw(f->srv, "getMe", 200, NULL, "{\"ok\":true}");
    assert_int_equal(call(f->ctx, "getMe", NULL, NULL), TG_ERR_DECODE);
    assert_string_equal(tg_ctx_error(f->ctx)->json_path, "result");

    bot_server_push_raw(f->srv, "getMe", 200, NULL, "[true]");
    assert_int_equal(call(f->ctx, "getMe", NULL, NULL), TG_ERR_DECODE);

    bot_server_push_raw(f->srv, "getMe", 200, NULL, "");
    assert_int_equal(call(f->ctx, "getMe", NULL, NULL), TG_ERR_DECODE);
    /* the ctx still works afterwards */
    assert_int_equal(call(f->ctx, "getMe", NULL, NULL), TG_OK);
}

static void test_close_mid_response(void **state)
{
    bot_fx *f = *state;
    bot_action close_mid = {.kind = BOT_ACT_CLOSE_MID, .body = GETME};
    bot_server_push(f->srv, "getMe", &close_mid);
    assert_int_equal(call(f->ctx, "getMe", NULL, NULL), TG_ERR_TRANSPORT);
    assert_true(tg_ctx_error(f->ctx)->transport_code != 0);
    assert_int_equal(tg_ctx_error(f->ctx)->attempts, 1); /* sent: not retried by default */
    assert_non_null(strstr(tg_ctx_errmsg(f->ctx), "connection lost"));
    /* opted in: retried and succeeds */
    tg_ctx_set_retry_policy(f->ctx,
                            &(tg_retry_policy){.retry_after_send = true, .backoff_base_ms = 1});
    bot_server_push(f->srv, "getMe", &close_mid);
    assert_int_equal(call(f->ctx, "getMe", NULL, NULL), TG_OK);
    tg_ctx_set_retry_policy(f->ctx, NULL);
}

static void test_timeout(void **state)
{
    bot_fx *f = *state;
    tg_bot *bot = bot_for(f->srv, (tg_bot_options){.timeout_ms = 200});
    tg_ctx *ctx = tg_ctx_new(bot);
    bot_server_push(f->srv, "getMe",
                    &(bot_action){.kind = BOT_ACT_SLOW, .delay_ms = 3000, .body = GETME});
    assert_int_equal(call(ctx, "getMe", NULL, NULL), TG_ERR_TIMEOUT);
    assert_int_equal(tg_ctx_error(ctx)->transport_code, 28); /* CURLE_OPERATION_TIMEDOUT */
    assert_int_equal(tg_ctx_error(ctx)->attempts, 1);
    assert_non_null(strstr(tg_ctx_errmsg(ctx), "timed out waiting for the answer"));
    /* a ctx may wait longer than its bot (long polling): the slow answer now arrives */
    tg_ctx_set_timeout(ctx, 20000);
    bot_server_push(f->srv, "getMe",
                    &(bot_action){.kind = BOT_ACT_SLOW, .delay_ms = 400, .body = GETME});
    assert_int_equal(call(ctx, "getMe", NULL, NULL), TG_OK);
    tg_ctx_set_timeout(ctx, 0);
    bot_server_push(f->srv, "getMe",
                    &(bot_action){.kind = BOT_ACT_SLOW, .delay_ms = 3000, .body = GETME});
    assert_int_equal(call(ctx, "getMe", NULL, NULL), TG_ERR_TIMEOUT);
    tg_ctx_free(ctx);
    tg_bot_free(bot);
}

/* A call on another thread: method (NULL = getMe) on ctx, its status in st. */
struct waiter {
    tg_ctx *ctx;
    tg_status st;
    const char *method;
};

static void *wait_call(void *p)
{
    struct waiter *w = p;
    w->st = call(w->ctx, w->method ? w->method : "getMe", NULL, NULL);
    return NULL;
}

/* One ctx used by two threads at once: the second call is refused before it touches the
 * transport, with a message naming the mistake (issue 17: it used to crash in curl). */
static void test_ctx_two_threads(void **state)
{
    bot_fx *f = *state;
    bot_server_push(f->srv, "slowMethod",
                    &(bot_action){.kind = BOT_ACT_SLOW, .delay_ms = 30000, .body = GETME});
    size_t conns = bot_server_connections(f->srv);
    struct waiter a = {.ctx = f->ctx, .method = "slowMethod"};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_call, &a), 0);
    /* The first call holds the ctx from before it connects until it returns. */
    for (int i = 0; i < 2000 && bot_server_connections(f->srv) == conns; i++)
        usleep(5000);
    assert_true(bot_server_connections(f->srv) > conns);
    assert_int_equal(call(f->ctx, "getMe", NULL, NULL), TG_ERR_INVALID);
    assert_int_equal(tg_ctx_status(f->ctx), TG_ERR_INVALID);
    assert_non_null(strstr(tg_ctx_errmsg(f->ctx), "two threads at once"));
    tg_ctx_reset(f->ctx); /* refused too: must not free the arena under the other thread */
    tg_ctx_cancel(f->ctx);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(a.st, TG_ERR_CANCELLED);
    assert_int_equal(bot_server_count(f->srv, "getMe"), 0); /* never sent */
    /* back to one thread: the ctx works again */
    tg_ctx_reset(f->ctx);
    assert_int_equal(call(f->ctx, "getMe", NULL, NULL), TG_OK);
    assert_string_equal(tg_ctx_errmsg(f->ctx), "");
}

/* A wrong base URL (here a path prefix the server does not serve) answers 401/404 like a
 * wrong token: the message names the URL tried, with the token left out. */
static void test_wrong_base_url_named(void **state)
{
    bot_fx *f = *state;
    char base[256];
    snprintf(base, sizeof base, "%s/not-the-api", bot_server_url(f->srv));
    tg_bot *bot = tg_bot_new(TOKEN, &(tg_bot_options){.base_url = base});
    tg_ctx *ctx = tg_ctx_new(bot);
    assert_int_equal(call(ctx, "getMe", NULL, NULL), TG_ERR_API);
    char want[512];
    snprintf(want, sizeof want, "URL tried: %s/bot<token>/getMe; check base_url and the token",
             base);
    assert_non_null(strstr(tg_ctx_errmsg(ctx), want));
    assert_null(strstr(tg_ctx_errmsg(ctx), TOKEN));
    assert_null(strstr(tg_ctx_errmsg(ctx), "AAHdq"));
    tg_ctx_free(ctx);
    tg_bot_free(bot);
}

static void test_connection_refused(void **state)
{
    (void)state;
    /* A bound socket that does not listen: connecting to it is refused. */
    char url[64];
    int fd = refusing_socket(url, sizeof url);
    tg_bot *bot =
        bot_test_new(TOKEN, &(tg_bot_options){.base_url = url,
                                              .retry = {.max_attempts = 3, .backoff_base_ms = 1}});
    tg_ctx *ctx = tg_ctx_new(bot);
    assert_int_equal(call(ctx, "getMe", NULL, NULL), TG_ERR_TRANSPORT);
    const tg_error_info *e = tg_ctx_error(ctx);
    assert_int_equal(e->transport_code, 7); /* CURLE_COULDNT_CONNECT */
    assert_int_equal(e->attempts, 3);       /* not sent: retried up to max_attempts */
    assert_int_equal(e->http_status, 0);
    assert_non_null(strstr(tg_ctx_errmsg(ctx), "getMe: cannot connect: "));
    tg_ctx_free(ctx);
    tg_bot_free(bot);
    close(fd);
}

static void test_connect_timeout(void **state)
{
    (void)state;
    /* A listener whose accept queue is full drops new SYNs: connecting hangs until the
     * connect timeout, and since nothing was sent, the policy retries it. */
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(lfd, 0), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
    int filler = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(connect(filler, (struct sockaddr *)&sa, sizeof sa), 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u", (unsigned)ntohs(sa.sin_port));
    tg_bot *bot =
        bot_test_new(TOKEN, &(tg_bot_options){.base_url = url,
                                              .connect_timeout_ms = 150,
                                              .retry = {.max_attempts = 2, .backoff_base_ms = 1}});
    tg_ctx *ctx = tg_ctx_new(bot);
    assert_int_equal(call(ctx, "getMe", NULL, NULL), TG_ERR_TIMEOUT);
    assert_int_equal(tg_ctx_error(ctx)->transport_code, 28);
    assert_int_equal(tg_ctx_error(ctx)->attempts, 2);
    assert_non_null(strstr(tg_ctx_errmsg(ctx), "getMe: timed out connecting: "));
    tg_ctx_free(ctx);
    tg_bot_free(bot);
    close(filler);
    close(lfd);
}

static void test_shutdown_interrupts_wait(void **state)
{
    bot_fx *f = *state;
    tg_bot *bot = bot_for(f->srv, (tg_bot_options){0});
    struct waiter w = {.ctx = tg_ctx_new(bot)};
    size_t before = bot_server_count(f->srv, "getMe");
    bot_server_push_429(f->srv, "getMe", 30);
    pthread_t t;
    pthread_create(&t, NULL, wait_call, &w);
    /* wait (bounded) until the 429 was served, then the call sleeps 30 s: cut it short */
    for (int i = 0; i < 5000 && bot_server_count(f->srv, "getMe") == before; i++)
        usleep(1000);
    assert_int_equal(bot_server_count(f->srv, "getMe"), before + 1);
    tg_bot_shutdown(bot);
    pthread_join(t, NULL);
    assert_int_equal(w.st, TG_ERR_CANCELLED);
    assert_true(tg_bot_is_shut_down(bot));
    assert_int_equal(call(w.ctx, "getMe", NULL, NULL), TG_ERR_CANCELLED);
    assert_int_equal(bot_server_count(f->srv, "getMe"), before + 1);
    tg_ctx_free(w.ctx);
    tg_bot_free(bot);
}

static void test_cancel_ctx(void **state)
{
    bot_fx *f = *state;
    tg_ctx_cancel(f->ctx);
    assert_int_equal(call(f->ctx, "getMe", NULL, NULL), TG_ERR_CANCELLED);
    tg_ctx_reset(f->ctx);
    assert_int_equal(call(f->ctx, "getMe", NULL, NULL), TG_OK);
}

/* tg_ctx_cancel from another thread stops a transfer that is waiting for a slow answer. */
static void test_cancel_in_flight(void **state)
{
    bot_fx *f = *state;
    tg_bot *bot = bot_for(f->srv, (tg_bot_options){.timeout_ms = 20000});
    struct waiter w = {.ctx = tg_ctx_new(bot)};
    size_t before = bot_server_connections(f->srv);
    bot_server_push(f->srv, "getMe",
                    &(bot_action){.kind = BOT_ACT_SLOW, .delay_ms = 10000, .body = GETME});
    pthread_t t;
    pthread_create(&t, NULL, wait_call, &w);
    /* bounded wait until the call's connection is accepted (the server records a request
     * only once it answered), then cancel while the answer is awaited */
    for (int i = 0; i < 5000 && bot_server_connections(f->srv) == before; i++)
        usleep(1000);
    tg_ctx_cancel(w.ctx);
    pthread_join(t, NULL);
    assert_int_equal(w.st, TG_ERR_CANCELLED);
    assert_int_equal(tg_ctx_error(w.ctx)->attempts, 1); /* one request, not retried */
    tg_ctx_free(w.ctx);
    tg_bot_free(bot);
}

/* A large answer arrives whole (the lean transport receives most of it straight into the
 * answer buffer); one over max_response_bytes fails with TG_ERR_TOO_BIG and the ctx goes on
 * working. */
static void test_large_answer_and_cap(void **state)
{
    bot_fx *f = *state;
    size_t n = 300000;
    char *big = malloc(n + 64);
    assert_non_null(big);
    int k = snprintf(big, 64, "{\"ok\":true,\"result\":\"");
    for (size_t i = 0; i < n; i++)
        big[k + i] = (char)('a' + i % 26);
    snprintf(big + k + n, 64, "\"}");
    bot_server_push_raw(f->srv, "getMe", 200, "application/json", big);
    const char *res;
    size_t len;
    assert_int_equal(tg_call_raw(f->ctx, "getMe", NULL, 0, &res, &len), TG_OK);
    assert_int_equal(len, n + 2);
    assert_memory_equal(res + 1, big + k, n);
    tg_bot *bot = bot_for(f->srv, (tg_bot_options){.max_response_bytes = 100000});
    tg_ctx *ctx = tg_ctx_new(bot);
    bot_server_push_raw(f->srv, "getMe", 200, "application/json", big);
    assert_int_equal(call(ctx, "getMe", NULL, NULL), TG_ERR_TOO_BIG);
    assert_non_null(strstr(tg_ctx_errmsg(ctx), "max_response_bytes"));
    assert_int_equal(call(ctx, "getMe", NULL, NULL), TG_OK);
    tg_ctx_free(ctx);
    tg_bot_free(bot);
    free(big);
}

static void test_keep_alive(void **state)
{
    bot_fx *f = *state;
    size_t conns = bot_server_connections(f->srv);
    tg_ctx *ctx = tg_ctx_new(f->bot);
    for (int i = 0; i < 20; i++)
        assert_int_equal(call(ctx, "getMe", NULL, NULL), TG_OK);
    tg_ctx_stats st;
    tg_ctx_get_stats(ctx, &st);
    assert_int_equal(st.calls, 20);
    assert_int_equal(st.requests, 20);
    assert_true(st.connects <= 1);
    assert_true(bot_server_connections(f->srv) - conns <= 1);
    tg_ctx_free(ctx);
}

static void test_shared_connection_cache(void **state)
{
    bot_fx *f = *state;
    size_t conns = bot_server_connections(f->srv);
    tg_ctx *a = tg_ctx_new(f->bot), *b = tg_ctx_new(f->bot);
    /* b finds the connection a left idle in the bot's shared cache */
    for (int i = 0; i < 5; i++) {
        assert_int_equal(call(a, "getMe", NULL, NULL), TG_OK);
        assert_int_equal(call(b, "getMe", NULL, NULL), TG_OK);
    }
    assert_int_equal(bot_server_connections(f->srv) - conns, 1);
    tg_ctx_free(a);
    tg_ctx_free(b);
}

struct worker {
    tg_bot *bot;
    int ok;
};

static void *hammer(void *p)
{
    struct worker *w = p;
    tg_ctx *ctx = tg_ctx_new(w->bot);
    for (int i = 0; i < 100; i++) {
        const char *res = NULL;
        if (call(ctx, "getMe", NULL, &res) == TG_OK && strstr(res, "\"id\":7"))
            w->ok++;
        tg_ctx_reset(ctx);
    }
    tg_ctx_free(ctx);
    return NULL;
}

/* 8 threads, one ctx each, sharing the bot's connection cache at the same time. */
static void test_threads_share_bot(void **state)
{
    bot_fx *f = *state;
    enum { N = 8 };
    struct worker w[N];
    pthread_t t[N];
    size_t conns = bot_server_connections(f->srv), reqs = bot_server_count(f->srv, "getMe");
    for (int i = 0; i < N; i++) {
        w[i] = (struct worker){.bot = f->bot};
        pthread_create(&t[i], NULL, hammer, &w[i]);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].ok, 100);
    }
    assert_int_equal(bot_server_count(f->srv, "getMe") - reqs, N * 100);
    /* connections are reused across threads: at most one per concurrent transfer */
    assert_true(bot_server_connections(f->srv) - conns <= N);
}

static int refusing_socket(char *url, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    snprintf(url, cap, "http://127.0.0.1:%u", (unsigned)ntohs(sa.sin_port));
    return fd;
}

static void test_proxy_is_used(void **state)
{
    bot_fx *f = *state;
    char proxy[64];
    int fd = refusing_socket(proxy, sizeof proxy);
    if (bot_test_lean()) { /* no proxies on the lean transport: refused up front */
        assert_null(bot_test_new(
            TOKEN, &(tg_bot_options){.base_url = bot_server_url(f->srv), .proxy = proxy}));
        assert_non_null(strstr(tg_bot_new_errmsg(), "does not support proxies"));
        close(fd);
        return;
    }
    /* the server is up, but every request must go through the (refusing) proxy */
    tg_bot *bot =
        bot_for(f->srv, (tg_bot_options){.proxy = proxy, .retry = {.no_retry_connect = true}});
    tg_ctx *ctx = tg_ctx_new(bot);
    size_t before = bot_server_nrequests(f->srv);
    assert_int_equal(call(ctx, "getMe", NULL, NULL), TG_ERR_TRANSPORT);
    assert_int_equal(tg_ctx_error(ctx)->transport_code, 7); /* CURLE_COULDNT_CONNECT */
    assert_int_equal(tg_ctx_error(ctx)->attempts, 1);
    assert_int_equal(bot_server_nrequests(f->srv), before);
    tg_ctx_free(ctx);
    tg_bot_free(bot);
    close(fd);
}

/* Fail the Nth allocation of ours for N = 1, 2, ...: every step ends in a clean status and
 * frees what it made (ASan's leak check runs over this binary). */
static void test_allocation_failures(void **state)
{
    bot_fx *f = *state;
    int clean_runs = 0, failures = 0;
    for (uint64_t n = 1; n <= 60 && clean_runs < 3; n++) {
        tg__alloc_fail_at(n);
        tg_bot *bot = bot_test_new(TOKEN, &(tg_bot_options){.base_url = bot_server_url(f->srv)});
        tg_ctx *ctx = bot ? tg_ctx_new(bot) : NULL;
        const char *res = NULL;
        tg_status st = ctx ? call(ctx, "getMe", "{\"a\":1}", &res) : TG_ERR_NOMEM;
        bool injected = tg__alloc_failed();
        tg__alloc_fail_at(0);
        if (st == TG_OK)
            assert_string_equal(res, "{\"id\":7,\"is_bot\":true,\"first_name\":\"Bot\"}");
        else
            assert_true(injected && st == TG_ERR_NOMEM);
        clean_runs = injected ? 0 : clean_runs + 1;
        failures += injected;
        tg_ctx_free(ctx);
        tg_bot_free(bot);
    }
    assert_int_equal(clean_runs, 3); /* past the last allocation: nothing left to fail */
    assert_true(failures > 5);
}

/* A user transport: no network at all, answers from memory, fails on demand. */
struct fake_tp {
    int conns, freed, performs, fail_first;
    char last_url[256], last_body[256];
};

static void *fake_conn_new(void *user, const tg_bot *bot)
{
    struct fake_tp *t = user;
    (void)bot;
    t->conns++;
    return t;
}

static void fake_conn_free(void *conn)
{
    ((struct fake_tp *)conn)->freed++;
}

static void fake_perform(void *conn, const tg_http_request *req, tg_http_result *res,
                         bool (*cancelled)(void *), void *cancel_user)
{
    struct fake_tp *t = conn;
    static const char answer[] = "{\"ok\":true,\"result\":{\"via\":\"fake\"}}";
    (void)cancelled, (void)cancel_user;
    t->performs++;
    snprintf(t->last_url, sizeof t->last_url, "%s", req->url);
    snprintf(t->last_body, sizeof t->last_body, "%.*s", (int)req->body_len, req->body);
    if (t->fail_first-- > 0) {
        res->status = TG_ERR_TRANSPORT;
        res->sent = false;
        res->code = 99;
        snprintf(res->msg, sizeof res->msg, "fake refusal");
        return;
    }
    res->status = TG_OK;
    res->http_status = 200;
    res->sent = true;
    req->write(req->write_user, answer, sizeof answer - 1);
}

static void test_custom_transport(void **state)
{
    (void)state;
    struct fake_tp t = {.fail_first = 1};
    tg_transport tp = {fake_conn_new, fake_perform, fake_conn_free, &t};
    tg_bot *bot = bot_test_new(TOKEN, &(tg_bot_options){.base_url = "http://example.invalid",
                                                        .transport = &tp,
                                                        .retry = {.backoff_base_ms = 1}});
    tg_ctx *ctx = tg_ctx_new(bot);
    const char *res;
    assert_int_equal(call(ctx, "getMe", "{\"x\":1}", &res), TG_OK);
    assert_string_equal(res, "{\"via\":\"fake\"}");
    assert_int_equal(t.performs, 2); /* the refusal before sending was retried */
    assert_string_equal(t.last_url, "http://example.invalid/bot" TOKEN "/getMe");
    assert_string_equal(t.last_body, "{\"x\":1}");
    assert_int_equal(t.conns, 1);
    t.fail_first = 100;
    assert_int_equal(call(ctx, "getMe", NULL, NULL), TG_ERR_TRANSPORT);
    assert_int_equal(tg_ctx_error(ctx)->transport_code, 99);
    assert_int_equal(tg_ctx_error(ctx)->attempts, 5);
    assert_string_equal(tg_ctx_errmsg(ctx),
                        "getMe: cannot connect: fake refusal (transport code 99)");
    tg_ctx_free(ctx);
    assert_int_equal(t.freed, 1);
    tg_bot_free(bot);
    tg_transport broken = {NULL, fake_perform, fake_conn_free, &t};
    assert_null(bot_test_new(TOKEN, &(tg_bot_options){.transport = &broken}));
    assert_non_null(strstr(tg_bot_new_errmsg(), "transport"));
}

/* The lean transport is chosen per bot, refuses a proxy with a reason, and checks its base
 * URL up front; the libcurl one stays the default. */
static void test_lean_options(void **state)
{
    bot_fx *f = *state;
    const tg_transport *lean = tg_transport_lean();
    assert_non_null(lean);
    assert_ptr_equal(lean, tg_transport_lean());
    assert_null(tg_bot_new(
        TOKEN, &(tg_bot_options){.transport = lean, .proxy = "socks5h://127.0.0.1:1080"}));
    assert_string_equal(tg_bot_new_errmsg(),
                        "options: the lean transport (tg_transport_lean) does not support "
                        "proxies; use the default libcurl transport with proxy");
    assert_null(tg_bot_new(
        TOKEN, &(tg_bot_options){.transport = lean, .base_url = "http://127.0.0.1:99999"}));
    assert_non_null(strstr(tg_bot_new_errmsg(), "port"));
    assert_null(tg_bot_new(TOKEN, &(tg_bot_options){.transport = lean, .base_url = "http://[::1"}));
    /* both transports serve the same server side by side */
    tg_bot *bot =
        tg_bot_new(TOKEN, &(tg_bot_options){.transport = lean, .base_url = bot_server_url(f->srv)});
    assert_non_null(bot);
    tg_ctx *ctx = tg_ctx_new(bot);
    const char *res;
    assert_int_equal(call(ctx, "getMe", NULL, &res), TG_OK);
    assert_string_equal(res, "{\"id\":7,\"is_bot\":true,\"first_name\":\"Bot\"}");
    assert_int_equal(call(f->ctx, "getMe", NULL, &res), TG_OK);
    tg_ctx_free(ctx);
    tg_bot_free(bot);
}

static size_t count_of(const char *hay, const char *needle)
{
    size_t k = 0;
    for (const char *p = hay; p && (p = strstr(p, needle)) != NULL; p++)
        k++;
    return k;
}

/* debug_arena: a pointer kept past tg_ctx_reset() reads 0xA5 garbage; arena_warn_bytes: a
 * loop of calls without a reset is warned about, once (issue 17). */
static void test_arena_debug_and_warning(void **state)
{
    bot_fx *f = *state;
    bot_logcap cap;
    bot_logcap_init(&cap);
    tg_bot *bot = bot_for(f->srv, (tg_bot_options){.log = bot_logcap_sink,
                                                   .log_user = &cap,
                                                   .debug_arena = true,
                                                   .arena_warn_bytes = 1024});
    tg_ctx *ctx = tg_ctx_new(bot);
    const char *res;
    size_t n;
    assert_int_equal(tg_call_raw(ctx, "getMe", NULL, 0, &res, &n), TG_OK);
    assert_true(n > 10);
    tg_ctx_reset(ctx);
    for (size_t i = 0; i < n; i++) /* the chunk is kept for reuse: still readable memory */
        assert_int_equal((unsigned char)res[i], 0xA5);
    for (int i = 0; i < 60; i++)
        assert_int_equal(tg_call_raw(ctx, "getMe", NULL, 0, &res, &n), TG_OK);
    tg_ctx_free(ctx);
    tg_bot_free(bot);
    assert_int_equal(count_of(cap.text, "without a tg_ctx_reset()"), 1);
    bot_logcap_free(&cap);
}

static void test_token_never_logged(void **state)
{
    bot_fx *f = *state;
    bot_logcap cap;
    bot_logcap_init(&cap);
    tg_bot *bot = bot_for(f->srv, (tg_bot_options){.log = bot_logcap_sink,
                                                   .log_user = &cap,
                                                   .log_level = TG_LOG_TRACE,
                                                   .retry = FAST_RETRY});
    tg_ctx *ctx = tg_ctx_new(bot);
    const char *secret = strchr(TOKEN, ':') + 1;
    tg_status st[5];
    bot_server_push_429(f->srv, "getMe", 1);
    st[0] = call(ctx, "getMe", NULL, NULL);
    bot_server_push_raw(f->srv, "getMe", 502, "text/html", "<html>" TOKEN "</html>");
    st[1] = call(ctx, "getMe", NULL, NULL);
    bot_server_push_error(f->srv, "getMe", 400, "echo " TOKEN);
    st[2] = call(ctx, "getMe", NULL, NULL);
    assert_non_null(strstr(tg_ctx_errmsg(ctx), "[REDACTED]"));
    assert_null(strstr(tg_ctx_errmsg(ctx), secret));
    st[3] = call(ctx, "noSuchMethod", "{\"chat_id\":1}", NULL);
    const void *data;
    size_t n;
    st[4] = tg_download_to_memory(ctx, "no/such/file", 0, &data, &n);
    assert_null(strstr(tg_ctx_errmsg(ctx), secret));
    assert_int_equal(st[0], TG_OK);
    assert_int_equal(st[1], TG_ERR_HTTP);
    assert_int_equal(st[2], TG_ERR_API);
    assert_int_equal(st[3], TG_ERR_API);
    assert_int_equal(st[4], TG_ERR_API); /* the server's 404 envelope */
    tg_bot_log(bot, TG_LOG_WARN, "user line with %s", TOKEN);
    assert_true(cap.lines > 5);
    assert_non_null(cap.text);
    assert_null(strstr(cap.text, secret));
    /* the transport's request line (curl's verbose output, the lean transport's trace) went
     * through the scrubber */
    assert_non_null(strstr(cap.text, "POST /bot[REDACTED]/getMe"));
    assert_non_null(strstr(cap.text, "user line with [REDACTED]"));
    tg_ctx_free(ctx);
    tg_bot_free(bot);
    bot_logcap_free(&cap);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_shapes),
        cmocka_unit_test_setup_teardown(test_get_me, setup, teardown),
        cmocka_unit_test_setup_teardown(test_params_body, setup, teardown),
        cmocka_unit_test_setup_teardown(test_test_env, setup, teardown),
        cmocka_unit_test_setup_teardown(test_api_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_429_honoured_and_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_5xx, setup, teardown),
        cmocka_unit_test_setup_teardown(test_html_502_and_bad_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_mid_response, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ctx_two_threads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_base_url_named, setup, teardown),
        cmocka_unit_test(test_connection_refused),
        cmocka_unit_test(test_connect_timeout),
        cmocka_unit_test_setup_teardown(test_shutdown_interrupts_wait, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_ctx, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_large_answer_and_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keep_alive, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shared_connection_cache, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads_share_bot, setup, teardown),
        cmocka_unit_test_setup_teardown(test_proxy_is_used, setup, teardown),
        cmocka_unit_test_setup_teardown(test_allocation_failures, setup, teardown),
        cmocka_unit_test(test_custom_transport),
        cmocka_unit_test_setup_teardown(test_arena_debug_and_warning, setup, teardown),
        cmocka_unit_test_setup_teardown(test_token_never_logged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lean_options, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
