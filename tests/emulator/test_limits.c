/*
 * Rate limits (--rate-limits): a burst of 3 then about one message a second in a private
 * chat, 20 a minute in a group, 30 a second per bot; the 429 carries retry_after in
 * Telegram's shape. Without the option nothing is limited.
 */
#include "tgtest.h"

#include "core/clock.h"
#include "emulator/api.h"
#include "emulator/server.h"

#define TOKEN "7400001:AAHlimitsTestTokenAAAAAAAAAAAAAAAAAA"

static emu *world(bool limits)
{
    char err[200];
    emu *e = emu_new(&(emu_options){.rate_limits = limits, .max_wait_ms = 1}, err, sizeof err);
    assert_non_null(e);
    pthread_mutex_lock(&e->mu);
    assert_non_null(emu_bot_add(e, TOKEN, NULL, NULL));
    pthread_mutex_unlock(&e->mu);
    return e;
}

static void control(emu *e, const char *name, const char *body)
{
    emu_form q;
    emu_form_init(&q);
    tg__buf out;
    tg__buf_init(&out, 0);
    assert_int_equal(emu_control(e, name, "POST", &q, body, strlen(body), &out), 200);
    tg__buf_cleanup(&out);
    emu_form_cleanup(&q);
}

/* sendMessage to chat; returns the HTTP status, the body in out (optional). */
static int send_to(emu *e, int64_t chat, char *out, size_t cap)
{
    char body[96];
    snprintf(body, sizeof body, "{\"chat_id\":%lld,\"text\":\"x\"}", (long long)chat);
    tg__buf b;
    tg__buf_init(&b, 0);
    int code = emu_api_call(e, TOKEN, "sendMessage", body, strlen(body), NULL, &b);
    if (out)
        snprintf(out, cap, "%s", tg__buf_cstr(&b));
    tg__buf_cleanup(&b);
    return code;
}

static void test_private_chat(void **state)
{
    (void)state;
    emu *e = world(true);
    control(e, "send", "{\"text\":\"/start\"}");
    for (int i = 0; i < 3; i++)
        assert_int_equal(send_to(e, 100000001, NULL, 0), 200);
    char out[256];
    assert_int_equal(send_to(e, 100000001, out, sizeof out), 429);
    assert_string_equal(out, "{\"ok\":false,\"error_code\":429,\"description\":\"Too Many "
                             "Requests: retry after 1\",\"parameters\":{\"retry_after\":1}}");
    emu_free(e);
}

static void test_group(void **state)
{
    (void)state;
    emu *e = world(true);
    control(e, "chats", "{\"type\":\"supergroup\",\"title\":\"G\"}");
    control(e, "join", "{\"chat_id\":-1000000001001,\"user_id\":7400001}");
    for (int i = 0; i < 20; i++)
        assert_int_equal(send_to(e, -1000000001001LL, NULL, 0), 200);
    char out[256];
    assert_int_equal(send_to(e, -1000000001001LL, out, sizeof out), 429);
    assert_non_null(strstr(out, "\"retry_after\":3")); /* one message per 3 s on average */
    emu_free(e);
}

static void test_per_bot(void **state)
{
    (void)state;
    emu *e = world(true);
    int ok = 0, limited = 0;
    uint64_t start = tg__now_ms();
    for (int u = 0; u < 11; u++) {
        char body[96];
        snprintf(body, sizeof body, "{\"first_name\":\"U%d\"}", u);
        control(e, "users", body);
        snprintf(body, sizeof body, "{\"user_id\":%d,\"text\":\"/start\"}", 100000002 + u);
        control(e, "send", body);
        for (int i = 0; i < 3; i++)
            send_to(e, 100000002 + u, NULL, 0) == 200 ? ok++ : limited++;
    }
    /* 33 sends, 3 per chat: within one second the bot's 30 pass and 3 are refused; on a
     * machine so slow that a second went by, the window restarted and more may pass */
    assert_int_equal(ok + limited, 33);
    if (tg__now_ms() - start < 1000)
        assert_int_equal(limited, 3);
    else
        assert_true(ok >= 30);
    emu_free(e);
}

static void test_off_by_default(void **state)
{
    (void)state;
    emu *e = world(false);
    control(e, "send", "{\"text\":\"/start\"}");
    for (int i = 0; i < 50; i++)
        assert_int_equal(send_to(e, 100000001, NULL, 0), 200);
    emu_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_private_chat),
        cmocka_unit_test(test_group),
        cmocka_unit_test(test_per_bot),
        cmocka_unit_test(test_off_by_default),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
