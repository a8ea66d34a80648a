/*
 * The trial's friction, end to end through tgbot-emulator with a bot in this process:
 * formatted text with a keyboard in one call (tg_reply_text, then tg_edit_text on the
 * press), a refused keyboard failing with the keyboard's own message in tg_hctx_errmsg,
 * and tg_call_raw with len 0 taking its parameters as a C string.
 */
#include "tgtest.h"

#include "emu_bot.h"
#include "tgbot/testing.h"
#include "tgbot/tgbot.h"

#define WAIT_MS 10000

static char failure[512];

static tg_status on_fmt(tg_hctx *h, void *user)
{
    (void)user;
    tg_text *t = tg_text_new();
    tg_text_plain(t, "Hello, ");
    tg_text_bold(t, "world");
    tg_status st =
        tg_reply_text(h, t, TG_INLINE_MARKUP(TG_INLINE_ROW(TG_BUTTON_CALLBACK("Yes", "y"))));
    tg_text_free(t);
    return st;
}

static tg_status on_press(tg_hctx *h, void *user)
{
    (void)user;
    tg_text *t = tg_text_new();
    tg_text_italic(t, "Done");
    tg_status st = tg_edit_text(h, t, NULL);
    if (st == TG_OK)
        st = tg_answer(h, NULL);
    tg_text_free(t);
    return st;
}

static tg_status on_bad(tg_hctx *h, void *user)
{
    (void)user;
    char big[101];
    memset(big, 'b', 100);
    big[100] = '\0';
    tg_text *t = tg_text_plain(tg_text_new(), "never sent");
    tg_status st = tg_reply_text(h, t,
                                 TG_INLINE_MARKUP(TG_INLINE_ROW(TG_BUTTON_CALLBACK("ok", "o"),
                                                                TG_BUTTON_CALLBACK("Big", big))));
    snprintf(failure, sizeof failure, "%d %s", (int)st, tg_hctx_errmsg(h));
    tg_text_free(t);
    return tg_reply(h, "bad done");
}

static tg_status on_raw(tg_hctx *h, void *user)
{
    (void)user;
    char json[128];
    snprintf(json, sizeof json, "{\"chat_id\":%lld,\"text\":\"raw with len 0\"}",
             (long long)tg_hctx_event(h)->chat_id);
    const char *res;
    size_t rl;
    return tg_call_raw(tg_hctx_ctx(h), "sendMessage", json, 0, &res, &rl);
}

static void test_friction(void **state)
{
    (void)state;
    tg_test *t = tg_test_start();
    assert_non_null(t);
    tg_router *r = tg_router_new();
    tg_router_on_command(r, "fmt", on_fmt, NULL);
    tg_router_on_command(r, "bad", on_bad, NULL);
    tg_router_on_command(r, "raw", on_raw, NULL);
    tg_router_on_callback(r, "y", on_press, NULL);
    tgtest_emu_bot b;
    tgtest_emu_bot_start(&b, tg_test_token(t), tg_test_url(t), r, 2);

    int64_t id = tg_test_send(t, 0, 0, "/fmt");
    char *m = tg_test_wait_message(t, 0, id, "Hello, world", WAIT_MS);
    if (!m)
        fail_msg("%s", tg_test_errmsg(t));
    assert_non_null(strstr(m, "{\"type\":\"bold\",\"offset\":7,\"length\":5}"));
    assert_non_null(strstr(m, "\"callback_data\":\"y\""));
    char rt[64];
    snprintf(rt, sizeof rt, "\"reply_to_message\":{\"message_id\":%lld", (long long)id);
    assert_non_null(strstr(m, rt));
    free(m);
    int64_t mid = tg_test_last_message_id(t, 0);
    char *a = tg_test_press(t, 0, 0, mid, "y", WAIT_MS);
    assert_non_null(a);
    free(a);
    m = tg_test_wait_edit(t, 0, mid, "Done", WAIT_MS);
    assert_non_null(m);
    assert_non_null(strstr(m, "\"italic\""));
    assert_null(strstr(m, "inline_keyboard")); /* NULL removed the keyboard */
    free(m);

    id = tg_test_send(t, 0, 0, "/bad");
    m = tg_test_wait_message(t, 0, id, "bad done", WAIT_MS);
    assert_non_null(m);
    free(m);
    assert_non_null(strstr(failure, "row 1, button 2 (\"Big\"): callback_data is 100 bytes; "
                                    "Telegram allows 1 to 64"));
    assert_int_equal(atoi(failure), TG_ERR_INVALID);

    id = tg_test_send(t, 0, 0, "/raw");
    m = tg_test_wait_message(t, 0, id, "raw with len 0", WAIT_MS);
    assert_non_null(m);
    free(m);

    tgtest_emu_bot_stop(&b);
    tg_router_free(r);
    tg_test_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_friction),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
