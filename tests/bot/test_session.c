/*
 * Sessions (tg_hctx_user_data / tg_hctx_chat_data) on the memory store, on SQLite and on a
 * real redis-server: lazy loading, write-back only on change, one write per scope, delete
 * when emptied, user data shared across chats and chat data per chat, data surviving a new
 * dispatcher over the same SQLite file, damaged values, size limits and a failing
 * write-back. A counting store wraps the real one to see every storage call.
 */
#include "tgtest.h"

#include <unistd.h>

#include "redis_server.h"
#include "tgbot/dispatch.h"

/* ---- a store that counts the calls it passes to the real one ---- */

struct counting {
    tg_storage base;
    tg_storage *real;
    int gets, sets, dels;
    uint64_t last_ttl;
    bool fail_sets;
};

static tg_status c_get(tg_storage *s, const char *key, void *buf, size_t cap, size_t *len,
                       bool *found)
{
    struct counting *c = (struct counting *)s;
    c->gets++;
    return tg_storage_get(c->real, key, buf, cap, len, found);
}

static tg_status c_set(tg_storage *s, const char *key, const void *val, size_t len, uint64_t ttl_ms)
{
    struct counting *c = (struct counting *)s;
    c->sets++;
    c->last_ttl = ttl_ms;
    if (c->fail_sets)
        return TG_ERR_IO;
    return tg_storage_set(c->real, key, val, len, ttl_ms);
}

static tg_status c_del(tg_storage *s, const char *key)
{
    struct counting *c = (struct counting *)s;
    c->dels++;
    return tg_storage_del(c->real, key);
}

static void c_free(tg_storage *s)
{
    (void)s; /* the test owns both */
}

static const tg_storage_ops counting_ops = {
    .get = c_get, .set = c_set, .del = c_del, .free = c_free};

static void counts_reset(struct counting *c)
{
    c->gets = c->sets = c->dels = 0;
}

/* ---- the bot ---- */

static char trail[512];

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t n = strlen(trail);
    vsnprintf(trail + n, sizeof trail - n, fmt, ap);
    va_end(ap);
}

#define MSG(id, chat, user, text)                                                                  \
    "{\"update_id\":" #id ",\"message\":{\"message_id\":" #id ",\"chat\":{\"id\":" #chat ","       \
    "\"type\":\"private\"},\"from\":{\"id\":" #user "},\"text\":\"" text "\"}}"

/* /visit: count the user's visits (everywhere) and the chat's (from anyone). */
static tg_status h_visit(tg_hctx *h, void *user)
{
    (void)user;
    tg_data *u = tg_hctx_user_data(h), *c = tg_hctx_chat_data(h);
    assert_non_null(u);
    assert_non_null(c);
    int64_t uv = tg_data_get_int(u, "visits", 0) + 1, cv = tg_data_get_int(c, "visits", 0) + 1;
    assert_int_equal(tg_data_set_int(u, "visits", uv), TG_OK);
    assert_int_equal(tg_data_set_int(c, "visits", cv), TG_OK);
    note("u%lld/c%lld;", (long long)uv, (long long)cv);
    return TG_OK;
}

/* /lang X: set the user's language; setting the same one again is no change. */
static tg_status h_lang(tg_hctx *h, void *user)
{
    (void)user;
    tg_data *u = tg_hctx_user_data(h);
    const char *arg = tg_hctx_arg(h, 0);
    if (!arg)
        return tg_data_unset(u, "lang");
    return tg_data_set_str(u, "lang", arg);
}

static tg_status h_peek(tg_hctx *h, void *user)
{
    (void)user;
    const char *lang = tg_data_get_str(tg_hctx_user_data(h), "lang");
    note("lang=%s;", lang ? lang : "-");
    return TG_OK;
}

static tg_status h_forget(tg_hctx *h, void *user)
{
    (void)user;
    return tg_data_clear(tg_hctx_user_data(h));
}

static tg_status h_nothing(tg_hctx *h, void *user)
{
    (void)h, (void)user;
    note("plain;");
    return TG_OK;
}

static tg_status h_big(tg_hctx *h, void *user)
{
    (void)user;
    tg_data *u = tg_hctx_user_data(h);
    char big[200];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(tg_data_set_str(u, "bio", big), TG_ERR_TOO_BIG);
    assert_non_null(strstr(tg_hctx_errmsg(h), "at most 128"));
    assert_int_equal(tg_data_set_str(u, "bad name", "v"), TG_ERR_INVALID);
    assert_int_equal(tg_data_set_str(u, "bio", NULL), TG_ERR_INVALID);
    assert_int_equal(tg_data_set_str(u, "bio", "short"), TG_OK);
    note("big-checked;");
    return TG_OK;
}

static tg_status h_inline(tg_hctx *h, void *user)
{
    (void)user;
    assert_null(tg_hctx_chat_data(h)); /* an inline query has no chat */
    assert_int_equal(tg_data_set_int(tg_hctx_chat_data(h), "x", 1), TG_ERR_INVALID);
    assert_int_equal(tg_data_get_int(tg_hctx_chat_data(h), "x", 7), 7);
    note("inline u%lld;", (long long)tg_data_get_int(tg_hctx_user_data(h), "visits", 0));
    return TG_OK;
}

static tg_status h_damaged(tg_hctx *h, void *user)
{
    (void)user;
    assert_null(tg_hctx_user_data(h));
    note("%s;", tg_hctx_errmsg(h));
    return TG_OK;
}

static void on_error(tg_hctx *h, tg_status st, const char *errmsg, void *user)
{
    (void)h, (void)user;
    note("error %d: %s;", (int)st, errmsg);
}

static tg_router *session_router(void)
{
    tg_router *r = tg_router_new();
    tg_router_on_command(r, "visit", h_visit, NULL);
    tg_router_on_command(r, "lang", h_lang, NULL);
    tg_router_on_command(r, "peek", h_peek, NULL);
    tg_router_on_command(r, "forget", h_forget, NULL);
    tg_router_on_command(r, "big", h_big, NULL);
    tg_router_on_command(r, "damaged", h_damaged, NULL);
    tg_router_on_kind(r, TG_UPDATE_INLINE_QUERY, h_inline, NULL);
    tg_router_on_kind(r, TG_UPDATE_MESSAGE, h_nothing, NULL);
    tg_router_on_error(r, on_error, NULL);
    return r;
}

static tg_dispatcher *session_dispatcher(tg_router *r, tg_storage *s, size_t max, uint64_t ttl)
{
    tg_dispatcher *d = tg_dispatcher_new(
        NULL, r,
        &(tg_dispatcher_options){
            .workers = 1, .storage = s, .session_max_bytes = max, .session_ttl_ms = ttl});
    assert_non_null(d);
    return d;
}

static void run(tg_dispatcher *d, const char *json)
{
    assert_int_equal(tg_dispatcher_run_one(d, json, strlen(json)), TG_OK);
}

/* The whole behaviour on one real store. */
static void session_behaviour(tg_storage *real)
{
    struct counting c = {.base.ops = &counting_ops, .real = real};
    tg_router *r = session_router();
    tg_dispatcher *d = session_dispatcher(r, &c.base, 0, 0);
    trail[0] = '\0';

    run(d, MSG(1, 5, 5, "hello")); /* never asks: no storage call at all */
    assert_int_equal(c.gets + c.sets + c.dels, 0);

    run(d, MSG(2, 5, 5, "/visit"));
    assert_int_equal(c.gets, 2); /* user and chat, loaded once each */
    assert_int_equal(c.sets, 2); /* written back once each */
    run(d, MSG(3, 5, 5, "/visit"));
    run(d, MSG(4, -100, 5, "/visit")); /* same user in a group: user data follows */
    run(d, MSG(5, -100, 6, "/visit")); /* another user in that group: chat data shared */
    assert_string_equal(trail, "plain;u1/c1;u2/c2;u3/c1;u1/c2;");

    counts_reset(&c);
    run(d, MSG(6, 5, 5, "/lang de"));
    assert_int_equal(c.sets, 1); /* only the user scope was touched */
    counts_reset(&c);
    run(d, MSG(7, 5, 5, "/lang de")); /* the same value: no write */
    assert_int_equal(c.gets, 1);
    assert_int_equal(c.sets + c.dels, 0);
    run(d, MSG(8, 5, 5, "/peek"));
    assert_int_equal(c.sets + c.dels, 0);

    trail[0] = '\0';
    const char *iq = "{\"update_id\":9,\"inline_query\":{\"id\":\"q\",\"from\":{\"id\":5},"
                     "\"query\":\"\",\"offset\":\"\"}}";
    run(d, iq);
    run(d, MSG(10, 5, 5, "/lang")); /* unset */
    run(d, MSG(11, 5, 5, "/peek"));
    assert_string_equal(trail, "inline u3;lang=-;");

    counts_reset(&c);
    run(d, MSG(12, 5, 5, "/forget")); /* no field left: the record is deleted */
    assert_int_equal(c.dels, 1);
    assert_int_equal(c.sets, 0);
    char buf[64];
    size_t len;
    bool found = true;
    assert_int_equal(tg_storage_get(real, "sess:u5", buf, sizeof buf, &len, &found), TG_OK);
    assert_false(found);
    counts_reset(&c);
    run(d, MSG(13, 5, 5, "/forget")); /* nothing stored, nothing to delete */
    assert_int_equal(c.dels + c.sets, 0);
    tg_dispatcher_free(d);

    /* A small limit, and a write-back that fails. */
    d = session_dispatcher(r, &c.base, 128, 60000);
    trail[0] = '\0';
    run(d, MSG(14, 7, 7, "/big"));
    assert_int_equal(c.last_ttl, 60000);
    c.fail_sets = true;
    assert_int_equal(
        tg_dispatcher_run_one(d, MSG(15, 7, 7, "/visit"), strlen(MSG(15, 7, 7, "/visit"))),
        TG_ERR_IO);
    c.fail_sets = false;
    assert_non_null(strstr(trail, "big-checked;u1/c1;error"));
    assert_non_null(strstr(trail, "user data sess:u7: storage set failed"));

    /* Something else under the key: refused, and left alone. */
    assert_int_equal(tg_storage_set(real, "sess:u8", "not fields", 10, 0), TG_OK);
    trail[0] = '\0';
    run(d, MSG(16, 8, 8, "/damaged"));
    assert_string_equal(trail, "user data sess:u8: the stored value is not fields;");
    run(d, MSG(17, 8, 8, "/damaged"));
    assert_int_equal(tg_storage_get(real, "sess:u8", buf, sizeof buf, &len, &found), TG_OK);
    assert_true(found && len == 10 && memcmp(buf, "not fields", 10) == 0);
    tg_storage_del(real, "sess:u8");
    tg_storage_del(real, "sess:u7");
    tg_storage_del(real, "sess:c7");
    tg_storage_del(real, "sess:c5");
    tg_storage_del(real, "sess:c-100");
    tg_storage_del(real, "sess:u6");
    tg_dispatcher_free(d);
    tg_router_free(r);
}

static void test_memory(void **state)
{
    (void)state;
    tg_storage *s = tg_storage_memory_new();
    session_behaviour(s);
    tg_storage_free(s);
}

static char db[64];

static void test_sqlite(void **state)
{
    (void)state;
    snprintf(db, sizeof db, "/tmp/tgkit-session-%d.db", (int)getpid());
    tg_storage *s = tg_storage_sqlite_new(&(tg_sqlite_options){.path = db});
    assert_non_null(s);
    session_behaviour(s);
    tg_storage_free(s);
}

/* The data outlives the dispatcher and the store: a new one over the same file sees it. */
static void test_sqlite_restart(void **state)
{
    (void)state;
    tg_router *r = session_router();
    for (int round = 1; round <= 3; round++) {
        tg_storage *s = tg_storage_sqlite_new(&(tg_sqlite_options){.path = db});
        assert_non_null(s);
        tg_dispatcher *d = session_dispatcher(r, s, 0, 0);
        trail[0] = '\0';
        run(d, MSG(1, 42, 42, "/visit"));
        char want[32];
        snprintf(want, sizeof want, "u%d/c%d;", round, round);
        assert_string_equal(trail, want);
        tg_dispatcher_free(d);
        tg_storage_free(s);
    }
    tg_router_free(r);
    tgtest_remove_sqlite(db);
}

static void test_redis(void **state)
{
    (void)state;
    tg_storage *s = tg_storage_redis_new(&(tg_redis_options){.port = tgtest_redis_group.port});
    if (!s)
        fail_msg("redis: %s", tg_storage_errmsg());
    session_behaviour(s);
    tg_storage_free(s);
}

int main(void)
{
    const struct CMUnitTest local[] = {
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_sqlite),
        cmocka_unit_test(test_sqlite_restart),
    };
    const struct CMUnitTest redis[] = {
        cmocka_unit_test(test_redis),
    };
    int rc = cmocka_run_group_tests(local, NULL, NULL);
    return rc | cmocka_run_group_tests(redis, tgtest_redis_group_up, tgtest_redis_group_down);
}
