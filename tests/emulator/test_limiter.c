/*
 * The anti-spam limiter end to end: a bot in this process polls tgbot-emulator; one user
 * floods it with 12 messages while another writes 3. The flooding user gets 3 echoes and
 * one "Slow down", the other user every echo.
 */
#include "tgtest.h"

#include "emu_bot.h"
#include "tgbot/testing.h"
#include "tgbot/tgbot.h"

#define WAIT_MS 10000

static tg_status echo(tg_hctx *h, void *user)
{
    (void)user;
    return tg_send(h, tg_hctx_event(h)->text);
}

/* The bot's messages in chat (the user's private chat), counted; and those saying what. */
static int bot_messages(tg_test *t, int64_t chat, const char *what, int *matching)
{
    int n = 0;
    *matching = 0;
    int64_t after = 0;
    char *m;
    while ((m = tg_test_wait_message(t, chat, after, NULL, 200)) != NULL) {
        n++;
        if (strstr(m, what))
            ++*matching;
        const char *id = strstr(m, "\"message_id\":");
        after = id ? strtoll(id + 13, NULL, 10) : after + 1;
        free(m);
    }
    return n;
}

static void test_flood(void **state)
{
    (void)state;
    tg_test *t = tg_test_start();
    assert_non_null(t);
    int64_t flooder = tg_test_user_id(t), calm = tg_test_add_user(t, "Calm");
    assert_true(calm > 0);
    tg_router *r = tg_router_new();
    assert_int_equal(
        tg_router_use_limiter(
            r, &(tg_limiter_options){.limit = 3, .window_ms = 600000, .reply = "Slow down"}),
        TG_OK);
    tg_router_on_kind(r, TG_UPDATE_MESSAGE, echo, NULL);
    tgtest_emu_bot b;
    tgtest_emu_bot_start(&b, tg_test_token(t), tg_test_url(t), r, 2);
    for (int i = 0; i < 12; i++) {
        char text[32];
        snprintf(text, sizeof text, "flood %d", i);
        assert_true(tg_test_send(t, flooder, 0, text) > 0);
        if (i % 4 == 0) {
            snprintf(text, sizeof text, "calm %d", i);
            assert_true(tg_test_send(t, calm, calm, text) > 0);
        }
    }
    /* every update fetched and handled before counting what the bot sent */
    assert_true(tg_test_wait_idle(t, WAIT_MS));
    char *last = tg_test_wait_message(t, calm, 0, "calm 8", WAIT_MS);
    assert_non_null(last);
    free(last);
    assert_int_equal(tg_dispatcher_wait_idle(b.d, WAIT_MS), TG_OK);
    int slow, echoes;
    assert_int_equal(bot_messages(t, flooder, "Slow down", &slow), 4);
    assert_int_equal(slow, 1);
    assert_int_equal(bot_messages(t, calm, "calm", &echoes), 3);
    assert_int_equal(echoes, 3);
    tgtest_emu_bot_stop(&b);
    tg_router_free(r);
    tg_test_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flood),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
