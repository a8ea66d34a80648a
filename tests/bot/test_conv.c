/*
 * Conversations and their storage: the memory store, the Redis store against a real
 * redis-server on 127.0.0.1, a multi-step conversation with cancel and timeout, and one
 * conversation carried across two bot processes through Redis.
 */
#include "tgtest.h"

#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "redis_server.h"
#include "storage_contract.h"
#include "tgbot/dispatch.h"

static char trail[512];

static void note(const char *s)
{
    strncat(trail, s, sizeof trail - strlen(trail) - 1);
}

#define MSG(id, user, text)                                                                        \
    "{\"update_id\":" #id ",\"message\":{\"message_id\":" #id ",\"chat\":{\"id\":" #user ","       \
    "\"type\":\"private\"},\"from\":{\"id\":" #user "},\"text\":\"" text "\"}}"

static void test_memory_store(void **state)
{
    (void)state;
    tg_storage *s = tg_storage_memory_new();
    assert_non_null(s);
    tgtest_storage_contract(s);
    tg_storage_free(s);
    tg_storage_free(NULL);
}

/* ---- a pizza order: /order -> size -> address ---- */

static tg_status h_order(tg_hctx *h, void *user)
{
    (void)user;
    note("order;");
    return tg_conv_set(h, "ask_size", "pizza", 5);
}

static tg_status h_size(tg_hctx *h, void *user)
{
    (void)user;
    size_t n;
    const char *d = tg_conv_data(h, &n);
    char buf[64];
    snprintf(buf, sizeof buf, "%.*s %s", (int)n, d, tg_hctx_event(h)->text);
    note("size;");
    return tg_conv_set(h, "ask_addr", buf, strlen(buf));
}

static tg_status h_addr(tg_hctx *h, void *user)
{
    (void)user;
    size_t n;
    const char *d = tg_conv_data(h, &n);
    note("done:");
    strncat(trail, d, n);
    note(";");
    return tg_conv_end(h);
}

static tg_status h_cancel(tg_hctx *h, void *user)
{
    (void)user;
    note(tg_conv_state(h) ? "cancel-still-set;" : "cancelled;");
    return TG_OK;
}

static tg_status h_timeout(tg_hctx *h, void *user)
{
    (void)user;
    note("timeout:");
    note(tg_conv_state(h) ? tg_conv_state(h) : "?");
    note(";");
    return TG_OK;
}

static tg_status h_other(tg_hctx *h, void *user)
{
    (void)user;
    note(tg_conv_state(h) ? "other-in-conv;" : "other;");
    return TG_OK;
}

static tg_router *pizza_router(void)
{
    tg_router *r = tg_router_new();
    tg_router_on_command(r, "order", h_order, NULL);
    tg_router_add(r, 0,
                  tg_filter_and(tg_filter_state("ask_size"), tg_filter_kind(TG_UPDATE_MESSAGE)),
                  h_size, NULL);
    tg_router_add(r, 0, tg_filter_state("ask_addr"), h_addr, NULL);
    tg_router_add(r, 0, tg_filter_state(NULL), h_other, NULL);
    return r;
}

static tg_dispatcher *pizza_dispatcher(tg_router *r, tg_storage *s, uint64_t timeout_ms)
{
    tg_dispatcher_options o = {.workers = 1,
                               .storage = s,
                               .cancel_command = "cancel",
                               .on_cancel = h_cancel,
                               .on_timeout = h_timeout,
                               .conv_timeout_ms = timeout_ms};
    tg_dispatcher *d = tg_dispatcher_new(NULL, r, &o);
    assert_non_null(d);
    return d;
}

static void run(tg_dispatcher *d, const char *json)
{
    assert_int_equal(tg_dispatcher_run_one(d, json, strlen(json)), TG_OK);
}

static void test_conversation_steps(void **state)
{
    (void)state;
    tg_router *r = pizza_router();
    tg_dispatcher *d = pizza_dispatcher(r, NULL, 0);
    trail[0] = '\0';
    run(d, MSG(1, 5, "hello"));
    run(d, MSG(2, 5, "/order"));
    run(d, MSG(3, 6, "other user, no conversation"));
    run(d, MSG(4, 5, "large"));
    run(d, MSG(5, 5, "Main St 1"));
    run(d, MSG(6, 5, "after"));
    assert_string_equal(trail, "other;order;other;size;done:pizza large;other;");
    trail[0] = '\0';
    run(d, MSG(7, 5, "/order"));
    run(d, MSG(8, 5, "/cancel"));
    run(d, MSG(9, 5, "x"));
    run(d, MSG(10, 5, "/cancel")); /* no conversation: routed normally */
    assert_string_equal(trail, "order;cancelled;other;other;");
    tg_dispatcher_free(d);
    tg_router_free(r);
}

static void test_conversation_timeout(void **state)
{
    (void)state;
    tg_router *r = pizza_router();
    tg_dispatcher *d = pizza_dispatcher(r, NULL, 5);
    trail[0] = '\0';
    run(d, MSG(1, 5, "/order"));
    tg__sleep_ms(30);
    run(d, MSG(2, 5, "large"));
    assert_string_equal(trail, "order;timeout:ask_size;other;");
    tg_dispatcher_free(d);
    tg_router_free(r);
}

/* An "auth" middleware: stops every update while *blocked. */
static tg_next mw_auth(tg_hctx *h, void *user)
{
    (void)h;
    bool blocked = *(const bool *)user;
    note(blocked ? "blocked;" : "mw;");
    return blocked ? TG_STOP : TG_NEXT;
}

/* Middleware sees the cancel command and the update that triggers on_timeout, and a
 * TG_STOP there stops on_cancel / on_timeout like any handler (issue 17). */
static void test_middleware_guards_cancel_and_timeout(void **state)
{
    (void)state;
    bool blocked = false;
    tg_router *r = pizza_router();
    assert_int_equal(tg_router_use(r, mw_auth, NULL, &blocked), TG_OK);
    tg_dispatcher *d = pizza_dispatcher(r, NULL, 0);
    trail[0] = '\0';
    run(d, MSG(1, 5, "/order"));
    blocked = true;
    run(d, MSG(2, 5, "/cancel"));
    blocked = false;
    run(d, MSG(3, 5, "/cancel"));
    assert_string_equal(trail, "mw;order;blocked;mw;cancelled;");
    tg_dispatcher_free(d);

    d = pizza_dispatcher(r, NULL, 5);
    trail[0] = '\0';
    run(d, MSG(4, 5, "/order"));
    tg__sleep_ms(30);
    blocked = true;
    run(d, MSG(5, 5, "large"));
    blocked = false;
    run(d, MSG(6, 5, "large"));
    assert_string_equal(trail, "mw;order;blocked;mw;timeout:ask_size;other;");
    tg_dispatcher_free(d);
    tg_router_free(r);
}

static tg_status h_bad_state(tg_hctx *h, void *user)
{
    (void)user;
    assert_int_equal(tg_conv_set(h, "has space", NULL, 0), TG_ERR_INVALID);
    assert_non_null(strstr(tg_hctx_errmsg(h), "has space"));
    assert_int_equal(tg_conv_set(h, "ok", "0123456789", 10), TG_ERR_TOO_BIG);
    note("checked;");
    return TG_OK;
}

static void test_conversation_bad_input(void **state)
{
    (void)state;
    tg_router *r = tg_router_new();
    tg_router_on_kind(r, TG_UPDATE_MESSAGE, h_bad_state, NULL);
    tg_router_on_kind(r, TG_UPDATE_INLINE_QUERY, h_order, NULL);
    tg_dispatcher_options o = {.workers = 1, .conv_max_bytes = 8};
    tg_dispatcher *d = tg_dispatcher_new(NULL, r, &o);
    trail[0] = '\0';
    run(d, MSG(1, 5, "x"));
    /* an inline query has no chat: entering a conversation fails cleanly */
    const char *iq = "{\"update_id\":2,\"inline_query\":{\"id\":\"1\",\"query\":\"q\"}}";
    assert_int_equal(tg_dispatcher_run_one(d, iq, strlen(iq)), TG_ERR_INVALID);
    assert_string_equal(trail, "checked;order;");
    tg_dispatcher_free(d);
    tg_router_free(r);
}

/* ---- Redis ---- */

static tg_storage *redis_store(void)
{
    tg_redis_options o = {.port = tgtest_redis_group.port, .prefix = "t:"};
    tg_storage *s = tg_storage_redis_new(&o);
    if (!s)
        fail_msg("redis: %s", tg_storage_errmsg());
    return s;
}

static void test_redis_store(void **state)
{
    (void)state;
    tg_storage *s = redis_store();
    tgtest_storage_contract(s);
    tg_storage_free(s);
}

static void test_redis_connect_error(void **state)
{
    (void)state;
    tg_redis_options o = {.port = 1, .password = "hunter2-secret", .timeout_ms = 500};
    assert_null(tg_storage_redis_new(&o));
    assert_non_null(strstr(tg_storage_errmsg(), "127.0.0.1:1: connect"));
    assert_null(strstr(tg_storage_errmsg(), "hunter2"));
}

static void test_redis_reconnects(void **state)
{
    (void)state;
    tg_storage *s = redis_store();
    char buf[8];
    size_t len;
    bool found;
    assert_int_equal(tg_storage_set(s, "r1", "v", 1, 0), TG_OK);
    assert_int_equal(tgtest_redis_restart(&tgtest_redis_group),
                     0); /* the server forgets everything */
    /* The first call notices the dead connection; later ones reconnect. */
    tg_status st = tg_storage_get(s, "r1", buf, sizeof buf, &len, &found);
    assert_true(st == TG_ERR_TRANSPORT || (st == TG_OK && !found));
    assert_int_equal(tg_storage_get(s, "r1", buf, sizeof buf, &len, &found), TG_OK);
    assert_false(found);
    assert_int_equal(tg_storage_set(s, "r1", "w", 1, 0), TG_OK);
    assert_int_equal(tg_storage_get(s, "r1", buf, sizeof buf, &len, &found), TG_OK);
    assert_true(found && len == 1 && buf[0] == 'w');
    tg_storage_free(s);
}

/* Child process: one bot instance handling one update, exits 0 if trail matches. */
static void child_bot(const char *json, const char *expect)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        tg_storage *s = redis_store();
        tg_router *r = pizza_router();
        tg_dispatcher *d = pizza_dispatcher(r, s, 0);
        trail[0] = '\0';
        tg_status st = tg_dispatcher_run_one(d, json, strlen(json));
        int ok = st == TG_OK && strcmp(trail, expect) == 0;
        if (!ok)
            fprintf(stderr, "child: trail \"%s\", expected \"%s\"\n", trail, expect);
        tg_dispatcher_free(d);
        tg_router_free(r);
        tg_storage_free(s);
        _exit(ok ? 0 : 1);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_redis_two_processes(void **state)
{
    (void)state;
    child_bot(MSG(1, 9, "/order"), "order;");
    child_bot(MSG(2, 9, "small"), "size;");
    tg_storage *s = redis_store();
    char buf[256];
    size_t len;
    bool found;
    assert_int_equal(tg_storage_get(s, "conv:9:9", buf, sizeof buf - 1, &len, &found), TG_OK);
    assert_true(found);
    buf[len] = '\0';
    assert_non_null(strstr(buf, "\nask_addr\npizza small"));
    tg_storage_free(s);
    child_bot(MSG(3, 9, "Elm St"), "done:pizza small;");
}

int main(void)
{
    const struct CMUnitTest local[] = {
        cmocka_unit_test(test_memory_store),
        cmocka_unit_test(test_conversation_steps),
        cmocka_unit_test(test_conversation_timeout),
        cmocka_unit_test(test_middleware_guards_cancel_and_timeout),
        cmocka_unit_test(test_conversation_bad_input),
    };
    const struct CMUnitTest redis[] = {
        cmocka_unit_test(test_redis_store),
        cmocka_unit_test(test_redis_connect_error),
        cmocka_unit_test(test_redis_two_processes),
        cmocka_unit_test(test_redis_reconnects),
    };
    int rc = cmocka_run_group_tests(local, NULL, NULL);
    return rc | cmocka_run_group_tests(redis, tgtest_redis_group_up, tgtest_redis_group_down);
}
