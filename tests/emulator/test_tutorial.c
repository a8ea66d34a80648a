/*
 * The tutorial's bot (examples/tutorial, quoted by docs/tutorial.md) end to end through an
 * in-process tgbot-emulator, as a reader runs it: the command menu it publishes (read back
 * with getMyCommands), /start with formatted text, the whole order conversation through its
 * buttons and a typed reply, /cancel, and the same bot behind a webhook. Skipped when
 * examples are not built.
 */
#include "tgtest.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "tgbot/testing.h"
#include "tgbot/tgbot.h"

#define BOT     TGKIT_BINARY_DIR "/examples/tutorial/tutorial"
#define WAIT_MS 10000

static tg_test *t;

static int setup(void **state)
{
    (void)state;
    t = tg_test_start();
    return t ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    tg_test_free(t);
    t = NULL;
    return 0;
}

/* The bot's message in the default chat after id containing text; its message id. */
static int64_t expect(int64_t after, const char *text)
{
    char *m = tg_test_wait_message(t, 0, after, text, WAIT_MS);
    if (!m)
        fail_msg("%s: %s", text, tg_test_errmsg(t));
    free(m);
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
    id = expect(tg_test_send(t, 0, 0, "/order"), "Which size?");
    press(id, "size:large");
    expect(id, "Where should we deliver it?");
    id =
        expect(tg_test_send(t, 0, 0, "1 Main Street"), "A large pizza to 1 Main Street. Shall we?");
    press(id, "confirm:yes");
    char *e =
        tg_test_wait_edit(t, 0, id, "Ordered: a large pizza to 1 Main Street. Thanks!", WAIT_MS);
    if (!e)
        fail_msg("confirmation: %s", tg_test_errmsg(t));
    free(e);
    /* a second order, cancelled half way */
    id = expect(tg_test_send(t, 0, 0, "/order"), "Which size?");
    expect(tg_test_send(t, 0, 0, "/cancel"), "Order cancelled.");
}

static void test_tutorial_polling(void **state)
{
    (void)state;
    if (access(BOT, X_OK) != 0)
        skip();
    pid_t pid = tg_test_spawn(t, BOT, NULL);
    assert_true(pid > 0);
    walk_order();

    /* the menu it published at start */
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

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

static void test_tutorial_webhook(void **state)
{
    (void)state;
    if (access(BOT, X_OK) != 0)
        skip();
    char url[64], port[16];
    int p = free_port();
    snprintf(url, sizeof url, "http://127.0.0.1:%d/tg", p);
    snprintf(port, sizeof port, "%d", p);
    setenv("WEBHOOK_URL", url, 1);
    setenv("WEBHOOK_PORT", port, 1);
    pid_t pid = tg_test_spawn(t, BOT, NULL); /* generates its own secret token */
    unsetenv("WEBHOOK_URL");
    unsetenv("WEBHOOK_PORT");
    assert_true(pid > 0);
    walk_order();
    assert_int_equal(tg_test_stop_child(pid), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_tutorial_polling, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tutorial_webhook, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
