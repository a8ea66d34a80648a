/*
 * Typed conversation fields: strings and integers by name through a multi-step
 * conversation, with the memory store and with a real redis-server on 127.0.0.1 (two
 * dispatchers sharing it, so the fields must live in Redis, not in a process). Also the
 * refusals: no conversation, bad names, a blob from tg_conv_set, and stored data that was
 * damaged (read as absent, never past its end).
 */
#include "tgtest.h"

#include "redis_server.h"
#include "tgbot/dispatch.h"

static char trail[512];

static void note(const char *s)
{
    strncat(trail, s, sizeof trail - strlen(trail) - 1);
}

#define MSG(id, user, text)                                                                        \
    "{\"update_id\":" #id ",\"message\":{\"message_id\":" #id ",\"chat\":{\"id\":" #user ","       \
    "\"type\":\"private\"},\"from\":{\"id\":" #user "},\"text\":\"" text "\"}}"

static tg_status h_order(tg_hctx *h, void *user)
{
    (void)user;
    /* no conversation yet: fields are refused */
    note(tg_conv_set_str(h, "size", "x") == TG_ERR_INVALID ? "refused;" : "accepted;");
    return tg_conv_enter(h, "ask_size");
}

static tg_status h_size(tg_hctx *h, void *user)
{
    (void)user;
    tg_status st = tg_conv_set_str(h, "size", tg_hctx_event(h)->text);
    if (st == TG_OK)
        st = tg_conv_set_int(h, "qty", -3);
    if (st == TG_OK)
        st = tg_conv_set_int(h, "qty", INT64_MIN); /* replaced, not added */
    if (st == TG_OK)
        st = tg_conv_set_str(h, "note", "");
    if (st == TG_OK)
        st = tg_conv_unset(h, "note");
    if (st == TG_OK)
        st = tg_conv_unset(h, "never-set");
    return st == TG_OK ? tg_conv_enter(h, "ask_addr") : st;
}

static tg_status h_addr(tg_hctx *h, void *user)
{
    (void)user;
    int64_t qty = 0;
    bool has_qty = tg_conv_get_int(h, "qty", &qty); /* before the call that reads qty */
    char buf[160];
    snprintf(buf, sizeof buf, "%s/%s:size=%s,qty=%s%lld,note=%s,qty-as-str=%s,size-as-int=%s;",
             tg_conv_state(h), tg_hctx_event(h)->text, tg_conv_get_str(h, "size"),
             has_qty ? "" : "none", (long long)qty, tg_conv_get_str(h, "note") ? "set" : "none",
             tg_conv_get_str(h, "qty") ? "yes" : "no",
             tg_conv_get_int(h, "size", NULL) ? "yes" : "no");
    note(buf);
    return tg_conv_end(h);
}

static tg_status h_other(tg_hctx *h, void *user)
{
    (void)user;
    note(tg_conv_get_str(h, "size") ? "other-has-size;" : "other;");
    return TG_OK;
}

static tg_router *fields_router(void)
{
    tg_router *r = tg_router_new();
    tg_router_on_command(r, "order", h_order, NULL);
    tg_router_add(r, 0, tg_filter_state("ask_size"), h_size, NULL);
    tg_router_add(r, 0, tg_filter_state("ask_addr"), h_addr, NULL);
    tg_router_add(r, 0, tg_filter_state(NULL), h_other, NULL);
    return r;
}

static tg_dispatcher *dispatcher(tg_router *r, tg_storage *s)
{
    tg_dispatcher_options o = {.workers = 1, .storage = s};
    tg_dispatcher *d = tg_dispatcher_new(NULL, r, &o);
    assert_non_null(d);
    return d;
}

static void run(tg_dispatcher *d, const char *json)
{
    assert_int_equal(tg_dispatcher_run_one(d, json, strlen(json)), TG_OK);
}

/* The order conversation; d2 (may be d1) runs the later steps. */
static void order_steps(tg_dispatcher *d1, tg_dispatcher *d2)
{
    trail[0] = '\0';
    run(d1, MSG(1, 5, "/order"));
    run(d2, MSG(2, 5, "large \\u00e9"));
    run(d1, MSG(3, 6, "someone else"));
    run(d2, MSG(4, 5, "Main St 1"));
    run(d1, MSG(5, 5, "after"));
    assert_string_equal(trail, "refused;other;ask_addr/Main St 1:size=large \xC3\xA9,"
                               "qty=-9223372036854775808,note=none,qty-as-str=no,size-as-int=no;"
                               "other;");
}

static void test_memory_fields(void **state)
{
    (void)state;
    tg_router *r = fields_router();
    tg_dispatcher *d = dispatcher(r, NULL);
    order_steps(d, d);
    tg_dispatcher_free(d);
    tg_router_free(r);
}

/* ---- refusals and damaged data ---- */

static tg_status h_probe(tg_hctx *h, void *user)
{
    (void)user;
    char buf[256];
    tg_status st = tg_conv_set_int(h, "n", 1);
    snprintf(buf, sizeof buf, "get=%s,set=%s:%s;", tg_conv_get_str(h, "a") ? "found" : "none",
             tg_strerror(st), st == TG_OK ? "" : tg_hctx_errmsg(h));
    note(buf);
    return TG_OK;
}

/* A stored value and its length (string literals may hold NULs). */
#define BLOB(s) s, sizeof(s) - 1

static void test_refusals(void **state)
{
    (void)state;
    tg_storage *s = tg_storage_memory_new();
    tg_router *r = tg_router_new();
    tg_router_add(r, 0, tg_filter_kind(TG_UPDATE_MESSAGE), h_probe, NULL);
    tg_dispatcher *d = dispatcher(r, s);
    static const struct {
        const char *value;
        size_t len;
        const char *expect;
    } cases[] = {
        /* a blob from tg_conv_set */
        {BLOB("tgc1\n0\nst\nblob"),
         "get=none,set=invalid argument:conversation: its data is a blob"},
        /* fields whose second record's value length runs past the end */
        {BLOB("tgc1\n0\nst\ntgf1s\1a\0\1\0\0\0x\0s\1b\0\377\0\0\0y\0"),
         "get=found,set=cannot decode reply:conversation: stored fields are malformed at byte 14"},
        /* a name length running past the end */
        {BLOB("tgc1\n0\nst\ntgf1s\100a"), "get=none,set=cannot decode reply:"},
        /* a record without its NUL */
        {BLOB("tgc1\n0\nst\ntgf1s\1a\0\1\0\0\0xx"), "get=none,set=cannot decode reply:"},
        /* a record that ends right after its value length: the value's NUL is missing */
        {BLOB("tgc1\n0\nst\ntgf1s\1a\0\0\0\0\0"), "get=none,set=cannot decode reply:"},
        /* an unknown record type */
        {BLOB("tgc1\n0\nst\ntgf1q\1a\0\0\0\0\0\0"), "get=none,set=cannot decode reply:"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        assert_int_equal(tg_storage_set(s, "conv:5:5", cases[i].value, cases[i].len, 0), TG_OK);
        trail[0] = '\0';
        run(d, MSG(1, 5, "x"));
        if (strncmp(trail, cases[i].expect, strlen(cases[i].expect)) != 0)
            fail_msg("case %zu: %s", i, trail);
    }
    /* a well-formed record still reads */
    assert_int_equal(tg_storage_set(s, "conv:5:5", BLOB("tgc1\n0\nst\ntgf1s\1a\0\2\0\0\0hi\0"), 0),
                     TG_OK);
    trail[0] = '\0';
    run(d, MSG(1, 5, "x"));
    assert_string_equal(trail, "get=found,set=ok:;");
    tg_dispatcher_free(d);
    tg_router_free(r);
    tg_storage_free(s);
}

static tg_status h_bad_names(tg_hctx *h, void *user)
{
    (void)user;
    tg_conv_enter(h, "s");
    note(tg_conv_set_str(h, "", "v") == TG_ERR_INVALID ? "empty;" : "?;");
    note(tg_conv_set_str(h, "a b", "v") == TG_ERR_INVALID ? "space;" : "?;");
    note(tg_conv_set_str(h, "ok", NULL) == TG_ERR_INVALID ? "null;" : "?;");
    note(strstr(tg_hctx_errmsg(h), "NULL value") ? "msg;" : "?;");
    char big[20000];
    memset(big, 'v', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    note(tg_conv_set_str(h, "big", big) == TG_ERR_TOO_BIG ? "big;" : "?;");
    return tg_conv_end(h);
}

static void test_bad_names(void **state)
{
    (void)state;
    tg_router *r = tg_router_new();
    tg_router_add(r, 0, tg_filter_kind(TG_UPDATE_MESSAGE), h_bad_names, NULL);
    tg_dispatcher *d = dispatcher(r, NULL);
    trail[0] = '\0';
    run(d, MSG(1, 5, "x"));
    assert_string_equal(trail, "empty;space;null;msg;big;");
    tg_dispatcher_free(d);
    tg_router_free(r);
}

/* ---- Redis ---- */

static void test_redis_fields(void **state)
{
    (void)state;
    tg_redis_options o = {.port = tgtest_redis_group.port, .prefix = "f:"};
    tg_storage *s1 = tg_storage_redis_new(&o), *s2 = tg_storage_redis_new(&o);
    assert_non_null(s1);
    assert_non_null(s2);
    tg_router *r = fields_router();
    tg_dispatcher *d1 = dispatcher(r, s1), *d2 = dispatcher(r, s2);
    order_steps(d1, d2);
    tg_dispatcher_free(d1);
    tg_dispatcher_free(d2);
    tg_router_free(r);
    tg_storage_free(s1);
    tg_storage_free(s2);
}

int main(void)
{
    const struct CMUnitTest local[] = {
        cmocka_unit_test(test_memory_fields),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_bad_names),
    };
    const struct CMUnitTest redis[] = {
        cmocka_unit_test(test_redis_fields),
    };
    int rc = cmocka_run_group_tests(local, NULL, NULL);
    return rc | cmocka_run_group_tests(redis, tgtest_redis_group_up, tgtest_redis_group_down);
}
