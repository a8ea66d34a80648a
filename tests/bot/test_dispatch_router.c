/*
 * Router, filters, middleware, groups, error handler and the update -> event view, driven
 * synchronously through tg_dispatcher_run_one() (no bot, no network).
 */
#include "tgtest.h"

#include "bot/dispatch/dispatch_int.h"
#include "bot/dispatch/event.h"
#include "tgbot/api.h"
#include "tgbot/dispatch.h"

static char trail[1024]; /* what ran, in order: "A;C;" */

static void note(const char *s)
{
    strncat(trail, s, sizeof trail - strlen(trail) - 1);
}

static tg_status h_note(tg_hctx *h, void *user)
{
    (void)h;
    note(user);
    note(";");
    return TG_OK;
}

static tg_status h_fail(tg_hctx *h, void *user)
{
    (void)user;
    note("F;");
    return tg_hctx_fail(h, TG_ERR_API, "boom in update %lld",
                        (long long)tg_hctx_event(h)->update_id);
}

static tg_dispatcher *mk(tg_router *r)
{
    tg_dispatcher_options o = {.workers = 1};
    tg_dispatcher *d = tg_dispatcher_new(NULL, r, &o);
    assert_non_null(d);
    trail[0] = '\0';
    return d;
}

static tg_status run(tg_dispatcher *d, const char *json)
{
    return tg_dispatcher_run_one(d, json, strlen(json));
}

#define MSG(id, text)                                                                              \
    "{\"update_id\":" #id ",\"message\":{\"message_id\":5,\"date\":0,\"chat\":{\"id\":42,"         \
    "\"type\":\"private\"},\"from\":{\"id\":7,\"is_bot\":false,\"first_name\":\"A\","              \
    "\"username\":\"alice\"},\"text\":\"" text "\"}}"

static void test_event_fields(void **state)
{
    (void)state;
    tg__jdoc doc;
    tg__arena a;
    tg_event ev;
    char err[256];
    tg__jdoc_init(&doc, NULL);
    tg__arena_init(&a, 0, 0);
    const char *m = MSG(9, "/Start@MyBot  x \\\"y\\\"");
    assert_int_equal(tg__event_parse(&ev, &doc, &a, m, strlen(m), "mybot", err, sizeof err), 0);
    assert_int_equal(ev.update_id, 9);
    assert_int_equal(ev.kind, TG_UPDATE_MESSAGE);
    assert_true(ev.has_chat && ev.chat_id == 42);
    assert_string_equal(ev.chat_type, "private");
    assert_true(ev.has_user && ev.user_id == 7);
    assert_string_equal(ev.username, "alice");
    assert_int_equal(ev.message_id, 5);
    assert_int_equal(ev.command_len, 5);
    assert_memory_equal(ev.command, "Start", 5);
    assert_true(ev.command_for_me);
    assert_string_equal(ev.command_args, "x \"y\"");

    const char *cb = "{\"update_id\":3,\"callback_query\":{\"id\":\"q1\",\"from\":{\"id\":8},"
                     "\"message\":{\"message_id\":77,\"chat\":{\"id\":-100,\"type\":\"group\"}},"
                     "\"data\":\"vote:yes\"}}";
    assert_int_equal(tg__event_parse(&ev, &doc, &a, cb, strlen(cb), NULL, err, sizeof err), 0);
    assert_int_equal(ev.kind, TG_UPDATE_CALLBACK_QUERY);
    assert_true(ev.has_chat && ev.chat_id == -100);
    assert_int_equal(ev.message_id, 77);
    assert_string_equal(ev.id, "q1");
    assert_string_equal(ev.data, "vote:yes");
    assert_null(ev.command);

    const char *unk = "{\"update_id\":4,\"future_thing\":{\"x\":1}}";
    assert_int_equal(tg__event_parse(&ev, &doc, &a, unk, strlen(unk), NULL, err, sizeof err), 0);
    assert_int_equal(ev.kind, TG_UPDATE_UNKNOWN);
    assert_string_equal(ev.kind_name, "future_thing");
    tg__jdoc_cleanup(&doc);
    tg__arena_cleanup(&a);
}

static void test_event_errors(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        const char *msg; /* expected substring */
    } cases[] = {
        {"[1]", "expected object, found array"},
        {"{\"message\":{}}", "update.update_id: missing"},
        {"{\"update_id\":\"x\"}", "update.update_id"},
        {"{\"update_id\":1,", "update:"},
        {"", "update:"},
    };
    tg__jdoc doc;
    tg__jdoc_init(&doc, NULL);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg__event_key k;
        char err[256] = "";
        assert_int_equal(
            tg__event_key_parse(&doc, cases[i].json, strlen(cases[i].json), &k, err, sizeof err),
            -1);
        if (!strstr(err, cases[i].msg))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err, cases[i].msg);
    }
    tg__event_key k;
    char err[256];
    const char *iq = "{\"update_id\":5,\"inline_query\":{\"id\":\"1\",\"query\":\"q\"}}";
    assert_int_equal(tg__event_key_parse(&doc, iq, strlen(iq), &k, err, sizeof err), 0);
    assert_false(k.ordered);
    assert_int_equal(k.kind, TG_UPDATE_INLINE_QUERY);
    tg__jdoc_cleanup(&doc);
}

static void test_every_kind_routes(void **state)
{
    (void)state;
    tg_router *r = tg_router_new();
    static int hits[TG_UPDATE_KIND_COUNT];
    memset(hits, 0, sizeof hits);
    for (int k = 1; k < TG_UPDATE_KIND_COUNT; k++)
        assert_int_equal(tg_router_on_kind(r, (tg_update_kind)k, h_note, (void *)"k"), TG_OK);
    tg_dispatcher *d = mk(r);
    for (int k = 1; k < TG_UPDATE_KIND_COUNT; k++) {
        char json[200];
        snprintf(json, sizeof json, "{\"update_id\":%d,\"%s\":{\"chat\":{\"id\":1}}}", k,
                 tg_update_kind_name((tg_update_kind)k));
        trail[0] = '\0';
        assert_int_equal(run(d, json), TG_OK);
        assert_string_equal(trail, "k;");
        assert_int_equal(tg_update_kind_parse(tg_update_kind_name((tg_update_kind)k),
                                              strlen(tg_update_kind_name((tg_update_kind)k))),
                         k);
    }
    tg_dispatcher_stats st;
    tg_dispatcher_get_stats(d, &st);
    assert_int_equal((int)st.handled, TG_UPDATE_KIND_COUNT - 1);
    assert_int_equal((int)st.unhandled, 0);
    tg_dispatcher_free(d);
    tg_router_free(r);
}

/* The dispatcher's kinds are the generated update types (issue 17: the list used to be
 * written twice, numbered differently): same names, one number apart, nothing missing on
 * either side. */
static void test_kinds_are_the_update_types(void **state)
{
    (void)state;
    int k = 1;
    for (; k < TG_UPDATE_KIND_COUNT; k++) {
        tg_update_type t = {TG_UPDATE_TYPE_OF_KIND(k), NULL};
        const char *s = tg_update_type_to_str(t);
        assert_non_null(s);
        assert_string_equal(tg_update_kind_name((tg_update_kind)k), s);
        assert_int_equal(TG_UPDATE_KIND_OF_TYPE(tg_update_type_from_str(s).id), k);
    }
    /* no update type beyond the last kind */
    assert_null(tg_update_type_to_str((tg_update_type){TG_UPDATE_TYPE_OF_KIND(k), NULL}));
}

static tg_status h_args(tg_hctx *h, void *user)
{
    (void)user;
    char buf[256];
    snprintf(buf, sizeof buf, "argc=%u", tg_hctx_argc(h));
    note(buf);
    for (unsigned i = 0; i < tg_hctx_argc(h); i++) {
        note("|");
        note(tg_hctx_arg(h, i));
    }
    assert_null(tg_hctx_arg(h, tg_hctx_argc(h)));
    const char *p = tg_hctx_payload(h);
    note(p ? " payload=" : "");
    note(p ? p : "");
    return TG_OK;
}

static void test_commands(void **state)
{
    (void)state;
    tg_router *r = tg_router_new();
    assert_int_equal(tg_router_set_username(r, "@MyBot"), TG_OK);
    assert_int_equal(tg_router_on_command(r, "start", h_args, NULL), TG_OK);
    assert_int_equal(tg_router_on_command(r, "sum", h_args, NULL), TG_OK);
    assert_int_equal(tg_router_on_command(r, "bad cmd", h_args, NULL), TG_ERR_INVALID);
    assert_non_null(strstr(tg_router_errmsg(r), "not a command name"));
    tg_dispatcher *d = mk(r);
    run(d, MSG(1, "/start ref_abc"));
    assert_string_equal(trail, "argc=1|ref_abc payload=ref_abc");
    trail[0] = '\0';
    run(d, MSG(2, "/sum@mybot 1 'two words' \\\"x y\\\""));
    assert_string_equal(trail, "argc=3|1|two words|x y");
    trail[0] = '\0';
    run(d, MSG(3, "/sum@otherbot 1"));
    assert_string_equal(trail, "");
    run(d, MSG(4, "/summary"));
    assert_string_equal(trail, "");
    run(d, MSG(5, "/start"));
    assert_string_equal(trail, "argc=0");
    tg_dispatcher_free(d);
    tg_router_free(r);
}

static tg_status h_caps(tg_hctx *h, void *user)
{
    (void)user;
    size_t n;
    char buf[128];
    const char *c1 = tg_hctx_capture(h, 1, &n);
    const char *c2 = tg_hctx_capture(h, 2, NULL);
    snprintf(buf, sizeof buf, "n=%u c1=%.*s c2=%s", tg_hctx_ncaptures(h), (int)n, c1,
             c2 ? "set" : "unset");
    note(buf);
    assert_null(tg_hctx_capture(h, 9, NULL));
    return TG_OK;
}

static void test_regex_and_callbacks(void **state)
{
    (void)state;
    tg_router *r = tg_router_new();
    assert_int_equal(tg_router_on_text(r, "^order (\\d+)(x)?$", h_caps, NULL), TG_OK);
    assert_int_equal(tg_router_on_text(r, "([", h_caps, NULL), TG_ERR_INVALID);
    assert_non_null(strstr(tg_router_errmsg(r), "regex filter \"([\""));
    assert_int_equal(tg_router_on_callback(r, "vote:", h_note, (void *)"V"), TG_OK);
    assert_int_equal(tg_router_add(r, 0, tg_filter_callback_regex("^page:(\\d+)$"), h_caps, NULL),
                     TG_OK);
    tg_dispatcher *d = mk(r);
    run(d, MSG(1, "order 66"));
    assert_string_equal(trail, "n=2 c1=66 c2=unset");
    trail[0] = '\0';
    run(d, MSG(2, "order 6a"));
    assert_string_equal(trail, "");
    run(d, "{\"update_id\":3,\"callback_query\":{\"id\":\"1\",\"from\":{\"id\":2},\"data\":\"vote:"
           "y\"}}");
    assert_string_equal(trail, "V;");
    trail[0] = '\0';
    run(d, "{\"update_id\":4,\"callback_query\":{\"id\":\"1\",\"from\":{\"id\":2},\"data\":\"page:"
           "12\"}}");
    assert_string_equal(trail, "n=2 c1=12 c2=unset");
    tg_dispatcher_free(d);
    tg_router_free(r);
}

static bool is_even_update(const tg_hctx *h, void *user)
{
    (void)user;
    return tg_hctx_event(h)->update_id % 2 == 0;
}

static void test_filters_compose(void **state)
{
    (void)state;
    tg_router *r = tg_router_new();
    tg_filter *f = tg_filter_and(
        tg_filter_chat_type("private"),
        tg_filter_or(tg_filter_text("hi"), tg_filter_not(tg_filter_fn_new(is_even_update, NULL))));
    assert_int_equal(tg_router_add(r, 0, f, h_note, (void *)"P"), TG_OK);
    assert_int_equal(tg_router_add(r, 0, tg_filter_and(tg_filter_user(7), tg_filter_chat(42)),
                                   h_note, (void *)"U"),
                     TG_OK);
    /* a failed operand poisons the whole expression */
    assert_null(tg_filter_and(tg_filter_regex("("), tg_filter_text("x")));
    assert_non_null(strstr(tg_filter_errmsg(), "regex"));
    assert_int_equal(tg_router_add(r, 0, NULL, h_note, NULL), TG_ERR_INVALID);
    tg_dispatcher *d = mk(r);
    run(d, MSG(2, "hi")); /* private and text */
    run(d, MSG(3, "yo")); /* private and odd */
    run(d, MSG(4, "yo")); /* even, not hi: falls to U */
    assert_string_equal(trail, "P;P;U;");
    tg_dispatcher_free(d);
    tg_router_free(r);
}

static tg_next mw_before(tg_hctx *h, void *user)
{
    note(user);
    return tg_hctx_event(h)->update_id == 99 ? TG_STOP : TG_NEXT;
}

static void mw_after(tg_hctx *h, tg_status st, bool handled, void *user)
{
    (void)h;
    char buf[64];
    snprintf(buf, sizeof buf, "after%s(%d,%d);", (const char *)user, (int)st, handled);
    note(buf);
}

static int errors_seen;

static void on_err(tg_hctx *h, tg_status st, const char *msg, void *user)
{
    (void)h;
    (void)user;
    assert_int_equal(st, TG_ERR_API);
    assert_non_null(strstr(msg, "boom in update 7"));
    errors_seen++;
}

static void test_groups_middleware_errors(void **state)
{
    (void)state;
    tg_router *r = tg_router_new();
    tg_router_add(r, 1, tg_filter_kind(TG_UPDATE_MESSAGE), h_note, (void *)"C");
    tg_router_add(r, 0, tg_filter_text("fail"), h_fail, NULL);
    tg_router_add(r, 0, tg_filter_kind(TG_UPDATE_MESSAGE), h_note, (void *)"A");
    tg_router_add(r, 0, tg_filter_kind(TG_UPDATE_MESSAGE), h_note, (void *)"B");
    tg_router_add(r, -1, tg_filter_kind(TG_UPDATE_POLL), h_note, (void *)"Z");
    tg_router_use(r, mw_before, mw_after, (void *)"1");
    tg_router_use(r, NULL, mw_after, (void *)"2");
    tg_router_on_error(r, on_err, NULL);
    errors_seen = 0;
    tg_dispatcher *d = mk(r);
    assert_int_equal(run(d, MSG(1, "x")), TG_OK);
    assert_string_equal(trail, "1A;C;after2(0,1);after1(0,1);");
    trail[0] = '\0';
    assert_int_equal(run(d, MSG(7, "fail")), TG_ERR_API);
    assert_string_equal(trail, "1F;after2(5,1);after1(5,1);");
    assert_int_equal(errors_seen, 1);
    trail[0] = '\0';
    assert_int_equal(run(d, MSG(99, "x")), TG_OK); /* stopped by middleware */
    assert_string_equal(trail, "1");
    trail[0] = '\0';
    run(d, "{\"update_id\":5,\"chat_boost\":{\"chat\":{\"id\":1}}}");
    assert_string_equal(trail, "1after2(0,0);after1(0,0);");
    tg_dispatcher_stats st;
    tg_dispatcher_get_stats(d, &st);
    assert_int_equal((int)st.failed, 1);
    assert_int_equal((int)st.unhandled, 2); /* update 99 (stopped) and the boost */
    tg_dispatcher_free(d);
    tg_router_free(r);
}

static void test_feed_rejects(void **state)
{
    (void)state;
    tg_router *r = tg_router_new();
    tg_router_on_kind(r, TG_UPDATE_MESSAGE, h_note, (void *)"A");
    tg_dispatcher *d = mk(r);
    assert_int_equal(tg_dispatcher_feed(d, "{oops", 5, 0, NULL, NULL), TG_ERR_DECODE);
    assert_non_null(strstr(tg_dispatcher_errmsg(d), "update:"));
    const char *m = MSG(1, "x");
    assert_int_equal(tg_dispatcher_feed(d, m, strlen(m), 0, NULL, NULL), TG_OK);
    assert_int_equal(tg_dispatcher_drain(d, 10000), TG_OK);
    assert_int_equal(tg_dispatcher_feed(d, m, strlen(m), 0, NULL, NULL), TG_ERR_CANCELLED);
    assert_string_equal(trail, "A;");
    assert_null(tg_dispatcher_new(NULL, NULL, NULL));
    assert_non_null(strstr(tg_dispatcher_errmsg(NULL), "router is NULL"));
    tg_dispatcher_free(d);
    tg_router_free(r);
}

static tg_status h_full(tg_hctx *h, void *user)
{
    (void)user;
    const tg_update *u = tg_hctx_update(h);
    if (!u) {
        note("decode-error:");
        note(tg_hctx_errmsg(h));
        return TG_OK;
    }
    assert_ptr_equal(u, tg_hctx_update(h)); /* decoded once */
    char buf[128];
    snprintf(buf, sizeof buf, "id=%lld chat=%lld text=%s", (long long)u->update_id,
             (long long)u->message->chat->id, u->message->text);
    note(buf);
    return TG_OK;
}

static void test_full_update_on_demand(void **state)
{
    (void)state;
    tg_router *r = tg_router_new();
    tg_router_on_kind(r, TG_UPDATE_MESSAGE, h_full, NULL);
    tg_dispatcher *d = mk(r);
    run(d, MSG(12, "hello"));
    assert_string_equal(trail, "id=12 chat=42 text=hello");
    trail[0] = '\0';
    run(d, "{\"update_id\":13,\"message\":{\"message_id\":\"x\",\"chat\":{\"id\":1}}}");
    assert_non_null(strstr(trail, "decode-error:update 13: message.message_id"));
    tg_dispatcher_free(d);
    tg_router_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_event_fields),      cmocka_unit_test(test_event_errors),
        cmocka_unit_test(test_every_kind_routes), cmocka_unit_test(test_kinds_are_the_update_types),
        cmocka_unit_test(test_commands),          cmocka_unit_test(test_regex_and_callbacks),
        cmocka_unit_test(test_filters_compose),   cmocka_unit_test(test_groups_middleware_errors),
        cmocka_unit_test(test_feed_rejects),      cmocka_unit_test(test_full_update_on_demand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
