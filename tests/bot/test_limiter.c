/*
 * The anti-spam limiter (tg_router_use_limiter) in virtual time: a flood from one user
 * beside a normal user, the window starting again, per-chat keys, updates without a key,
 * and the bound on tracked keys.
 */
#include "tgtest.h"

#include "tgbot/dispatch.h"

static uint64_t vnow = 1000;

static uint64_t vclock(void *user)
{
    (void)user;
    return vnow;
}

static int ran[16];

static tg_status h_any(tg_hctx *h, void *user)
{
    (void)user;
    const tg_event *ev = tg_hctx_event(h);
    ran[ev->has_user ? ev->user_id % 16 : 0]++;
    return TG_OK;
}

static void msg(tg_dispatcher *d, int64_t chat, int64_t user)
{
    char j[256];
    snprintf(j, sizeof j,
             "{\"update_id\":1,\"message\":{\"message_id\":1,\"date\":0,\"chat\":{\"id\":%lld,"
             "\"type\":\"group\"},\"from\":{\"id\":%lld},\"text\":\"hi\"}}",
             (long long)chat, (long long)user);
    assert_int_equal(tg_dispatcher_run_one(d, j, strlen(j)), TG_OK);
}

static void test_flood_beside_normal(void **state)
{
    (void)state;
    memset(ran, 0, sizeof ran);
    tg_router *r = tg_router_new();
    assert_int_equal(
        tg_router_use_limiter(
            r, &(tg_limiter_options){.limit = 5, .window_ms = 10000, .clock_ms = vclock}),
        TG_OK);
    tg_router_on_kind(r, TG_UPDATE_MESSAGE, h_any, NULL);
    tg_dispatcher *d = tg_dispatcher_new(NULL, r, &(tg_dispatcher_options){.workers = 1});
    for (int i = 0; i < 30; i++) {
        msg(d, -100, 5); /* the flood */
        if (i % 10 == 0)
            msg(d, -100, 6); /* a normal user in the same chat */
    }
    assert_int_equal(ran[5], 5);
    assert_int_equal(ran[6], 3);
    vnow += 9999;
    msg(d, -100, 5); /* same window */
    assert_int_equal(ran[5], 5);
    vnow += 1;
    msg(d, -100, 5); /* a new window */
    assert_int_equal(ran[5], 6);
    const char *iq = "{\"update_id\":2,\"poll\":{\"id\":\"p\",\"question\":\"q\",\"options\":[],"
                     "\"total_voter_count\":0,\"is_closed\":false,\"is_anonymous\":true,"
                     "\"type\":\"regular\",\"allows_multiple_answers\":false}}";
    tg_router_on_kind(r, TG_UPDATE_POLL, h_any, NULL);
    for (int i = 0; i < 10; i++) /* no user: never limited */
        assert_int_equal(tg_dispatcher_run_one(d, iq, strlen(iq)), TG_OK);
    assert_int_equal(ran[0], 10);
    tg_dispatcher_free(d);
    tg_router_free(r);
}

static void test_per_chat_and_bounds(void **state)
{
    (void)state;
    memset(ran, 0, sizeof ran);
    tg_router *r = tg_router_new();
    assert_int_equal(tg_router_use_limiter(r, &(tg_limiter_options){.key = TG_LIMIT_CHAT,
                                                                    .limit = 2,
                                                                    .max_keys = 2,
                                                                    .clock_ms = vclock}),
                     TG_OK);
    tg_router_on_kind(r, TG_UPDATE_MESSAGE, h_any, NULL);
    tg_dispatcher *d = tg_dispatcher_new(NULL, r, &(tg_dispatcher_options){.workers = 1});
    for (int i = 0; i < 4; i++) {
        msg(d, -1, 1); /* chat -1: users 1 and 2 share its limit */
        msg(d, -1, 2);
    }
    assert_int_equal(ran[1] + ran[2], 2);
    msg(d, -2, 3);
    msg(d, -2, 3);
    msg(d, -2, 3);
    assert_int_equal(ran[3], 2);
    for (int i = 0; i < 4; i++) /* a third chat finds no room: it passes, unlimited */
        msg(d, -3, 4);
    assert_int_equal(ran[4], 4);
    assert_int_equal(tg_router_use_limiter(r, &(tg_limiter_options){.key = 7}), TG_ERR_INVALID);
    assert_non_null(strstr(tg_router_errmsg(r), "not a tg_limit_key"));
    tg_dispatcher_free(d);
    tg_router_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flood_beside_normal),
        cmocka_unit_test(test_per_chat_and_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
