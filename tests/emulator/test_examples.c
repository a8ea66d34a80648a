/*
 * Every example bot end to end through the emulator, as a user would meet it: the built
 * binary is started with TELEGRAM_BOT_TOKEN and TELEGRAM_API_URL pointing at an in-process
 * tgbot-emulator (tgbot/testing.h), a scripted user talks to it, and the test checks what the
 * bot sent, then stops it with SIGTERM and expects a clean exit. Skipped when examples are
 * not built.
 */
#include "tgtest.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tgbot/testing.h"
#include "tgbot/tgbot.h"

#define EX(name) TGKIT_BINARY_DIR "/examples/" name "/" name
#define WAIT_MS  10000

static tg_test *t;
static char db[64]; /* the tutorial's SQLite file (BOT_DB), fresh for each test */

static void remove_db(void)
{
    tgtest_remove_sqlite(db);
}

static int setup(void **state)
{
    (void)state;
    static int n;
    snprintf(db, sizeof db, "/tmp/tgkit-examples-%d-%d.db", (int)getpid(), n++);
    remove_db();
    setenv("BOT_DB", db, 1);
    t = tg_test_start();
    return t ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    tg_test_free(t);
    t = NULL;
    remove_db();
    return 0;
}

static pid_t start(const char *path)
{
#ifdef TGKIT_NO_EXAMPLES
    tgtest_skip("the example bots are not built here (TGKIT_BUILD_EXAMPLES=OFF)");
#endif
    if (access(path, X_OK) != 0) /* a build dependency (CMakeLists.txt) */
        fail_msg("%s: not built", path);
    pid_t pid = tg_test_spawn(t, path, NULL);
    assert_true(pid > 0);
    return pid;
}

static void expect(char *json, const char *what)
{
    if (!json)
        fail_msg("%s: %s", what, tg_test_errmsg(t));
    free(json);
}

static void test_echo(void **state)
{
    (void)state;
    pid_t pid = start(EX("echo"));
    int64_t id = tg_test_send(t, 0, 0, "h\xc3\xa9llo emulator");
    assert_true(id > 0);
    char *m = tg_test_wait_message(t, 0, id, "h\xc3\xa9llo emulator", WAIT_MS);
    assert_non_null(m);
    char want[64];
    snprintf(want, sizeof want, "\"reply_to_message\":{\"message_id\":%lld", (long long)id);
    assert_non_null(strstr(m, want));
    free(m);
    assert_int_equal(tg_test_stop_child(pid), 0);
}

static void test_inline_keyboard(void **state)
{
    (void)state;
    pid_t pid = start(EX("inline_keyboard"));
    int64_t id = tg_test_send(t, 0, 0, "/start");
    expect(tg_test_wait_message(t, 0, id, "Count: 0", WAIT_MS), "Count: 0");
    int64_t kb = tg_test_last_message_id(t, 0);
    char *ans = tg_test_press(t, 0, 0, kb, "count:1", WAIT_MS);
    assert_non_null(ans);
    assert_non_null(strstr(ans, "\"show_alert\":false"));
    free(ans);
    char *m = tg_test_wait_edit(t, 0, kb, "Count: 1", WAIT_MS);
    assert_non_null(m);
    assert_non_null(strstr(m, "\"callback_data\":\"count:2\""));
    free(m);
    assert_int_equal(tg_test_stop_child(pid), 0);
}

static void test_conversation(void **state)
{
    (void)state;
    pid_t pid = start(EX("conversation"));
    int64_t id = tg_test_send(t, 0, 0, "/order");
    expect(tg_test_wait_message(t, 0, id, "Which size?", WAIT_MS), "size question");
    id = tg_test_send(t, 0, 0, "huge");
    expect(tg_test_wait_message(t, 0, id, "Please answer small", WAIT_MS), "size retry");
    id = tg_test_send(t, 0, 0, "large");
    expect(tg_test_wait_message(t, 0, id, "Where should we deliver", WAIT_MS), "address");
    id = tg_test_send(t, 0, 0, "1 Main Street");
    expect(tg_test_wait_message(t, 0, id, "Ordered: one large pizza to 1 Main Street", WAIT_MS),
           "order");
    assert_int_equal(tg_test_stop_child(pid), 0);
}

static void test_files(void **state)
{
    (void)state;
    pid_t pid = start(EX("files"));
    const char doc[] = "first line here\nsecond line\n";
    int64_t id = tg_test_send_document(t, 0, 0, "notes.txt", doc, sizeof doc - 1);
    assert_true(id > 0);
    expect(
        tg_test_wait_message(t, 0, id, "notes.txt: 28 bytes; first line: first line here", WAIT_MS),
        "download answer");
    id = tg_test_send(t, 0, 0, "/report");
    char *m = tg_test_wait_message(t, 0, id, "Here is your report", WAIT_MS);
    assert_non_null(m);
    assert_non_null(strstr(m, "\"file_name\":\"report.txt\""));
    free(m);
    assert_int_equal(tg_test_stop_child(pid), 0);
}

static void test_inline_mode(void **state)
{
    (void)state;
    pid_t pid = start(EX("inline_mode"));
    char *r = tg_test_inline(t, 0, "Hello There", WAIT_MS);
    assert_non_null(r);
    assert_non_null(strstr(r, "\"message_text\":\"HELLO THERE\""));
    assert_non_null(strstr(r, "\"message_text\":\"hello there\""));
    free(r);
    int64_t id = tg_test_choose(t, 0, 0, "upper");
    assert_true(id > 0);
    assert_int_equal(tg_test_last_message_id(t, 0), id); /* sent by the user, via the bot */
    assert_int_equal(tg_test_stop_child(pid), 0);
}

static void test_moderation(void **state)
{
    (void)state;
    pid_t pid = start(EX("moderation"));
    int64_t owner = tg_test_user_id(t);
    int64_t spammer = tg_test_add_user(t, "Spammer");
    int64_t g = tg_test_add_chat(t, "supergroup", "Moderated", owner);
    assert_true(g != 0);
    assert_int_equal(tg_test_join(t, g, tg_test_bot_id(t), true), 0);
    assert_int_equal(tg_test_join(t, g, spammer, false), 0);
    int64_t spam = tg_test_send(t, spammer, g, "buy now");
    int64_t id = tg_test_send_reply(t, spammer, g, "/ban", spam);
    expect(tg_test_wait_message(t, g, id, "Only administrators", WAIT_MS), "refusal");
    id = tg_test_send_reply(t, owner, g, "/ban", spam);
    expect(tg_test_wait_message(t, g, id, "Banned Spammer.", WAIT_MS), "ban");
    assert_int_equal(tg_test_send(t, spammer, g, "still here?"), -1);
    assert_int_equal(tg_test_stop_child(pid), 0);
}

static void test_webhook(void **state)
{
    (void)state;
    char url[64], port[16];
    int p = tgtest_listen_port();
    assert_true(p > 0);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/tg", p);
    snprintf(port, sizeof port, "%d", p);
    setenv("WEBHOOK_URL", url, 1);
    setenv("WEBHOOK_PORT", port, 1);
    setenv("WEBHOOK_SECRET", "s3cret-token", 1);
    pid_t pid = start(EX("webhook"));
    unsetenv("WEBHOOK_URL");
    unsetenv("WEBHOOK_PORT");
    unsetenv("WEBHOOK_SECRET");
    int64_t id = tg_test_send(t, 0, 0, "over the hook");
    expect(tg_test_wait_message(t, 0, id, "over the hook", WAIT_MS), "webhook echo");
    assert_int_equal(tg_test_stop_child(pid), 0);
}

/* ---- the tutorial's bot (examples/tutorial, quoted by docs/tutorial.md) ---- */

/* The bot's message in the default chat after id containing text; its message id. */
static int64_t expect_id(int64_t after, const char *text)
{
    expect(tg_test_wait_message(t, 0, after, text, WAIT_MS), text);
    return tg_test_last_message_id(t, 0);
}

static void press(int64_t message_id, const char *data)
{
    char *ans = tg_test_press(t, 0, 0, message_id, data, WAIT_MS);
    if (!ans)
        fail_msg("press %s: %s", data, tg_test_errmsg(t));
    free(ans);
}

/* The conversation a reader walks through in the tutorial. */
static void walk_order(void)
{
    int64_t id = tg_test_send(t, 0, 0, "/start");
    char *m = tg_test_wait_message(t, 0, id, "Hello, Developer! Send /order", WAIT_MS);
    assert_non_null(m);
    assert_non_null(strstr(m, "{\"type\":\"bold\",\"offset\":7,\"length\":9}"));
    free(m);
    id = expect_id(tg_test_send(t, 0, 0, "/order"), "Which size?");
    press(id, "size:large");
    expect_id(id, "Where should we deliver it?");
    id = expect_id(tg_test_send(t, 0, 0, "1 Main Street"),
                   "A large pizza to 1 Main Street. Shall we?");
    press(id, "confirm:yes");
    expect(tg_test_wait_edit(t, 0, id, "Ordered: a large pizza to 1 Main Street. Thanks!", WAIT_MS),
           "confirmation");
    /* a second order, cancelled half way */
    expect_id(tg_test_send(t, 0, 0, "/order"), "Which size?");
    expect_id(tg_test_send(t, 0, 0, "/cancel"), "Order cancelled.");
}

/* Polling: the conversation, the user's data surviving a restart (SQLite), then the
 * command menu it published at start. */
static void test_tutorial(void **state)
{
    (void)state;
    pid_t pid = start(EX("tutorial"));
    walk_order();
    assert_int_equal(tg_test_stop_child(pid), 0);
    pid = start(EX("tutorial"));
    expect_id(tg_test_send(t, 0, 0, "/start"),
              "Orders so far: 1; the last: a large pizza to 1 Main Street.");
    tg_bot *bot = tg_bot_new(tg_test_token(t), &(tg_bot_options){.base_url = tg_test_url(t)});
    tg_ctx *ctx = tg_ctx_new(bot);
    tg_bot_command *cmds = NULL;
    size_t n = 0;
    assert_int_equal(tg_get_my_commands(ctx, &(tg_get_my_commands_params){0}, &cmds, &n), TG_OK);
    assert_int_equal(n, 3);
    assert_string_equal(cmds[0].command, "start");
    assert_string_equal(cmds[1].command, "order");
    assert_string_equal(cmds[1].description, "Order a pizza");
    assert_string_equal(cmds[2].command, "cancel");
    tg_ctx_free(ctx);
    tg_bot_free(bot);
    assert_int_equal(tg_test_stop_child(pid), 0);
}

/* The same bot behind a webhook (it generates its own secret token). */
static void test_tutorial_webhook(void **state)
{
    (void)state;
    char url[64], port[16];
    int p = tgtest_listen_port();
    assert_true(p > 0);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/tg", p);
    snprintf(port, sizeof port, "%d", p);
    setenv("WEBHOOK_URL", url, 1);
    setenv("WEBHOOK_PORT", port, 1);
    pid_t pid = start(EX("tutorial"));
    unsetenv("WEBHOOK_URL");
    unsetenv("WEBHOOK_PORT");
    walk_order();
    assert_int_equal(tg_test_stop_child(pid), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_echo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_inline_keyboard, setup, teardown),
        cmocka_unit_test_setup_teardown(test_conversation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_inline_mode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_moderation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_webhook, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tutorial, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tutorial_webhook, setup, teardown),
    };
    return tgtest_result(cmocka_run_group_tests(tests, NULL, NULL));
}
