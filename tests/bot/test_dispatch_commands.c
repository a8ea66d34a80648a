/*
 * test_dispatch_commands: the router's command menu published with setMyCommands to the
 * loopback Bot API server. Checks the exact request bodies for the default list, a
 * translated list with fallback to default descriptions, a scope that filters commands,
 * the one-call publication of every language, and the refusals (bad names, descriptions,
 * language codes, over 100 commands) that must not reach the server.
 */
#include "tgtest.h"

#include <unistd.h>

#include "bot_server.h"
#include "tgbot/tgbot.h"

#define TOKEN "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_"

static tg_status noop(tg_hctx *h, void *user)
{
    (void)h;
    (void)user;
    return TG_OK;
}

static int setup(void **state)
{
    bot_fx *f = bot_fx_new(TOKEN, &(tg_bot_options){.log_level = TG_LOG_ERROR});
    bot_server_set_reply(f->srv, "setMyCommands", 200, "{\"ok\":true,\"result\":true}");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    bot_fx_free(*state);
    return 0;
}

static tg_router *menu_router(void)
{
    tg_router *r = tg_router_new();
    assert_int_equal(tg_router_command(r, "start", "Start over", noop, NULL), TG_OK);
    assert_int_equal(tg_router_command(r, "order", "Order a pizza", noop, NULL), TG_OK);
    assert_int_equal(tg_router_on_command(r, "debug", noop, NULL), TG_OK); /* hidden */
    assert_int_equal(tg_router_command(r, "ban", "Ban a user", noop, NULL), TG_OK);
    assert_int_equal(tg_router_describe_command(r, "order", "de", "Pizza bestellen"), TG_OK);
    assert_int_equal(tg_router_describe_command(r, "start", "pt-br",
                                                "Recome\xC3\xA7"
                                                "ar"),
                     TG_OK);
    assert_int_equal(tg_router_describe_command(r, "order", "de", "Eine Pizza bestellen"), TG_OK);
    assert_int_equal(tg_router_command_scopes(
                         r, "ban", TG_SCOPE_BIT(TG_BOT_COMMAND_SCOPE_ALL_CHAT_ADMINISTRATORS)),
                     TG_OK);
    return r;
}

static void test_publish(void **state)
{
    bot_fx *f = *state;
    tg_router *r = menu_router();
    assert_int_equal(tg_router_publish_commands(r, f->ctx, NULL, NULL), TG_OK);
    assert_string_equal(bot_server_last(f->srv)->path, "/bot<TOKEN>/setMyCommands");
    assert_string_equal(bot_server_last(f->srv)->body,
                        "{\"commands\":[{\"command\":\"start\",\"description\":\"Start over\"},"
                        "{\"command\":\"order\",\"description\":\"Order a pizza\"}]}");

    assert_int_equal(tg_router_publish_commands(r, f->ctx, NULL, "de"), TG_OK);
    assert_string_equal(bot_server_last(f->srv)->body,
                        "{\"commands\":[{\"command\":\"start\",\"description\":\"Start over\"},"
                        "{\"command\":\"order\",\"description\":\"Eine Pizza "
                        "bestellen\"}],\"language_code\":\"de\"}");

    tg_bot_command_scope admins = tg_bot_command_scope_from_all_chat_administrators(
        &(tg_bot_command_scope_all_chat_administrators){0});
    assert_int_equal(tg_router_publish_commands(r, f->ctx, &admins, NULL), TG_OK);
    assert_string_equal(bot_server_last(f->srv)->body,
                        "{\"commands\":[{\"command\":\"start\",\"description\":\"Start over\"},"
                        "{\"command\":\"order\",\"description\":\"Order a pizza\"},"
                        "{\"command\":\"ban\",\"description\":\"Ban a user\"}],"
                        "\"scope\":{\"type\":\"all_chat_administrators\"}}");

    tg_bot_command_scope chat =
        tg_bot_command_scope_from_chat(&(tg_bot_command_scope_chat){.chat_id = tg_chat_id_int(-5)});
    assert_int_equal(tg_router_publish_commands(r, f->ctx, &chat, "pt-br"), TG_OK);
    assert_string_equal(
        bot_server_last(f->srv)->body,
        "{\"commands\":[{\"command\":\"start\",\"description\":\"Recome\xC3\xA7"
        "ar\"},{\"command\":\"order\",\"description\":\"Order a pizza\"}],"
        "\"scope\":{\"type\":\"chat\",\"chat_id\":-5},\"language_code\":\"pt-br\"}");
    tg_router_free(r);
}

static void test_publish_all(void **state)
{
    bot_fx *f = *state;
    tg_router *r = menu_router();
    assert_int_equal(tg_router_describe_command(r, "start", "de", "Neu anfangen"), TG_OK);
    size_t before = bot_server_count(f->srv, "setMyCommands");
    assert_int_equal(tg_router_publish_all_commands(r, f->ctx, NULL), TG_OK);
    /* default, then each language in order of first appearance: "pt-br" ("start" has it
     * first), "de" (once, though two commands have it) */
    assert_int_equal(bot_server_count(f->srv, "setMyCommands"), before + 3);
    size_t n = bot_server_nrequests(f->srv);
    assert_null(strstr(bot_server_request(f->srv, n - 3)->body, "language_code"));
    assert_non_null(strstr(bot_server_request(f->srv, n - 2)->body, "\"language_code\":\"pt-br\""));
    assert_non_null(strstr(bot_server_request(f->srv, n - 1)->body, "\"language_code\":\"de\""));
    assert_non_null(strstr(bot_server_request(f->srv, n - 1)->body, "Neu anfangen"));

    /* an API error comes back as is */
    bot_server_push_error(f->srv, "setMyCommands", 400, "Bad Request: BOT_COMMAND_INVALID");
    assert_int_equal(tg_router_publish_all_commands(r, f->ctx, NULL), TG_ERR_API);
    assert_non_null(strstr(tg_ctx_errmsg(f->ctx), "BOT_COMMAND_INVALID"));
    tg_router_free(r);
}

static void test_refused(void **state)
{
    bot_fx *f = *state;
    tg_router *r = tg_router_new();
    char long_desc[300];
    memset(long_desc, 'x', 257);
    long_desc[257] = '\0';
    static const char *bad_names[] = {
        "", "/start", "Start", "a-b", "abcdefghijklmnopqrstuvwxyz0123456", NULL};
    for (size_t i = 0; i < sizeof bad_names / sizeof *bad_names; i++) {
        assert_int_equal(tg_router_command(r, bad_names[i], "d", noop, NULL), TG_ERR_INVALID);
        assert_non_null(strstr(tg_router_errmsg(r), "a name is 1 to 32 of a-z"));
    }
    assert_int_equal(tg_router_command(r, "ok", "", noop, NULL), TG_ERR_INVALID);
    assert_int_equal(tg_router_command(r, "ok", NULL, noop, NULL), TG_ERR_INVALID);
    assert_int_equal(tg_router_command(r, "ok", long_desc, noop, NULL), TG_ERR_INVALID);
    assert_string_equal(tg_router_errmsg(r),
                        "command \"ok\": a description is 1 to 256 characters, not 257");
    long_desc[256] = '\0';
    assert_int_equal(tg_router_command(r, "ok", long_desc, noop, NULL), TG_OK);
    assert_int_equal(tg_router_describe_command(r, "ok", "d e", "x"), TG_ERR_INVALID);
    assert_int_equal(tg_router_describe_command(r, "ok", "", "x"), TG_ERR_INVALID);
    assert_int_equal(tg_router_command_scopes(r, "nope", 1), TG_ERR_INVALID);

    size_t before = bot_server_nrequests(f->srv);
    char name[16];
    for (int i = 0; i < 100; i++) {
        snprintf(name, sizeof name, "c%d", i);
        assert_int_equal(tg_router_describe_command(r, name, NULL, "d"), TG_OK);
    }
    assert_int_equal(tg_router_publish_commands(r, f->ctx, NULL, NULL), TG_ERR_INVALID);
    assert_int_equal(bot_server_nrequests(f->srv), before);
    assert_int_equal(tg_router_publish_commands(NULL, f->ctx, NULL, NULL), TG_ERR_INVALID);
    tg_router_free(r);
}

/* Descriptions translated from a gettext catalog (compiled here with msgfmt). */
static void test_translate_from_catalog(void **state)
{
    bot_fx *f = *state;
    char dir[] = "/tmp/tgbot-cmds-XXXXXX", po[64], mo[64], cmd[256];
    assert_non_null(mkdtemp(dir));
    snprintf(po, sizeof po, "%s/de.po", dir);
    snprintf(mo, sizeof mo, "%s/de.mo", dir);
    FILE *fp = fopen(po, "w");
    assert_non_null(fp);
    fputs("msgid \"Order a pizza\"\nmsgstr \"Pizza bestellen\"\n", fp);
    fclose(fp);
    snprintf(cmd, sizeof cmd, "msgfmt -o '%s' '%s' && rm -f '%s'", mo, po, po);
    if (system(cmd) != 0)
        fail_msg("msgfmt (Debian package gettext) failed or is not installed");
    tg_i18n *tr = tg_i18n_new("en");
    assert_int_equal(tg_i18n_load_file(tr, "de", mo), TG_OK);
    unlink(mo);
    rmdir(dir);

    tg_router *r = tg_router_new();
    assert_int_equal(tg_router_command(r, "start", "Start over", noop, NULL), TG_OK);
    assert_int_equal(tg_router_command(r, "order", "Order a pizza", noop, NULL), TG_OK);
    size_t n = 9;
    assert_int_equal(tg_router_translate_commands(r, tr, "de", &n), TG_OK);
    assert_int_equal(n, 1);
    assert_int_equal(tg_router_publish_commands(r, f->ctx, NULL, "de"), TG_OK);
    assert_string_equal(
        bot_server_last(f->srv)->body,
        "{\"commands\":[{\"command\":\"start\",\"description\":\"Start over\"},"
        "{\"command\":\"order\",\"description\":\"Pizza bestellen\"}],\"language_code\":\"de\"}");
    assert_int_equal(tg_router_translate_commands(r, tr, NULL, NULL), TG_ERR_INVALID);
    tg_router_free(r);
    tg_i18n_free(tr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_publish, setup, teardown),
        cmocka_unit_test_setup_teardown(test_publish_all, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_translate_from_catalog, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
