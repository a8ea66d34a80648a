/*
 * Menus (tgbot/menu.h) driven by pressing their buttons in tgbot-emulator: a bot in this
 * process polls the emulator; the test opens the menu with /menu and presses: a button that
 * changes chat data (the text shows it at once), a submenu and its toggle, "« Back", a paged
 * list (next page, an item), each press followed by the edit of the same message. The
 * emulator only accepts presses of buttons the message has, so every press also checks the
 * keyboard the menu drew.
 */
#include "tgtest.h"

#include "tgbot/menu.h"
#include "emu_bot.h"
#include "tgbot/testing.h"
#include "tgbot/tgbot.h"

#define WAIT_MS 10000

static tg_status on_count(tg_hctx *h, void *user)
{
    (void)user;
    tg_data *c = tg_hctx_chat_data(h);
    return tg_data_set_int(c, "n", tg_data_get_int(c, "n", 0) + 1);
}

static const char *main_text(tg_hctx *h, void *user)
{
    (void)user;
    char *s = tg_hctx_alloc(h, 64);
    snprintf(s, 64, "Main: count %lld", (long long)tg_data_get_int(tg_hctx_chat_data(h), "n", 0));
    return s;
}

static tg_status on_toggle(tg_hctx *h, void *user)
{
    (void)user;
    tg_data *c = tg_hctx_chat_data(h);
    return tg_data_set_int(c, "sound", !tg_data_get_int(c, "sound", 0));
}

static const char *settings_text(tg_hctx *h, void *user)
{
    (void)user;
    return tg_data_get_int(tg_hctx_chat_data(h), "sound", 0) ? "Settings: sound on"
                                                             : "Settings: sound off";
}

static size_t items_count(tg_hctx *h, void *user)
{
    (void)h, (void)user;
    return 7;
}

static const char *item_label(tg_hctx *h, size_t i, void *user)
{
    (void)user;
    char *s = tg_hctx_alloc(h, 16);
    snprintf(s, 16, "Item %zu", i);
    return s;
}

static tg_status on_item(tg_hctx *h, size_t i, void *user)
{
    (void)user;
    return tg_data_set_int(tg_hctx_chat_data(h), "picked", (int64_t)i);
}

static const char *items_text(tg_hctx *h, void *user)
{
    (void)user;
    size_t pages, page = tg_menu_page(h, &pages);
    char *s = tg_hctx_alloc(h, 64);
    snprintf(s, 64, "Items, page %zu of %zu, picked %lld", page + 1, pages,
             (long long)tg_data_get_int(tg_hctx_chat_data(h), "picked", -1));
    return s;
}

static tg_status on_menu_cmd(tg_hctx *h, void *user)
{
    return tg_menu_send(h, user);
}

static tg_test *t;
static int64_t msg;

static void press(const char *data, const char *want)
{
    char *a = tg_test_press(t, 0, 0, msg, data, WAIT_MS);
    if (!a)
        fail_msg("press %s: %s", data, tg_test_errmsg(t));
    free(a);
    char *m = tg_test_wait_edit(t, 0, msg, want, WAIT_MS);
    if (!m)
        fail_msg("after %s: %s", data, tg_test_errmsg(t));
    free(m);
}

static void test_menu_navigation(void **state)
{
    (void)state;
    t = tg_test_start();
    assert_non_null(t);
    tg_menu *main = tg_menu_new("main", NULL), *settings = tg_menu_new("settings", NULL);
    tg_menu *items = tg_menu_new("items", NULL);
    assert_true(main && settings && items);
    tg_menu_text(main, main_text, NULL);
    tg_menu_text(settings, settings_text, NULL);
    tg_menu_text(items, items_text, NULL);
    assert_int_equal(tg_menu_add_button(main, "Count", on_count, NULL), TG_OK);
    assert_int_equal(tg_menu_add_row(main), TG_OK);
    assert_int_equal(tg_menu_add_submenu(main, "Settings", settings), TG_OK);
    assert_int_equal(tg_menu_add_submenu(main, "Items", items), TG_OK);
    assert_int_equal(tg_menu_add_button(settings, "Toggle sound", on_toggle, NULL), TG_OK);
    assert_int_equal(tg_menu_add_list(items, 3, items_count, item_label, on_item, NULL), TG_OK);
    assert_int_equal(tg_menu_add_submenu(items, "again", main), TG_ERR_INVALID); /* no cycles */
    tg_router *r = tg_router_new();
    assert_int_equal(tg_router_add_menu(r, main), TG_OK);
    tg_router_on_command(r, "menu", on_menu_cmd, main);
    tg_menu *dup = tg_menu_new("items", NULL);
    assert_int_equal(tg_router_add_menu(r, dup), TG_ERR_INVALID);
    assert_non_null(strstr(tg_router_errmsg(r), "used already"));
    tg_menu_free(dup);

    tgtest_emu_bot b;
    tgtest_emu_bot_start(&b, tg_test_token(t), tg_test_url(t), r, 2);

    int64_t id = tg_test_send(t, 0, 0, "/menu");
    char *m = tg_test_wait_message(t, 0, id, "Main: count 0", WAIT_MS);
    if (!m)
        fail_msg("%s", tg_test_errmsg(t));
    free(m);
    msg = tg_test_last_message_id(t, 0);
    press("menu:main:b0:0", "Main: count 1");
    press("menu:main:b0:0", "Main: count 2");
    press("menu:main:b1:0", "Settings: sound off");
    press("menu:settings:b0:0", "Settings: sound on");
    press("menu:main:s:0", "Main: count 2"); /* « Back */
    press("menu:main:b2:0", "Items, page 1 of 3, picked -1");
    press("menu:items:s:1", "Items, page 2 of 3"); /* Next › */
    press("menu:items:i4:1", "Items, page 2 of 3, picked 4");
    press("menu:items:s:2", "Items, page 3 of 3"); /* the last page: one item, ‹ Prev only */
    char *none = tg_test_press(t, 0, 0, msg, "menu:items:s:3", 500);
    assert_null(none);                                    /* no Next on the last page */
    press("menu:items:s:1", "Items, page 2 of 3");        /* ‹ Prev */
    assert_int_equal(tg_test_last_message_id(t, 0), msg); /* all in place: no new message */

    tgtest_emu_bot_stop(&b);
    tg_router_free(r);
    tg_test_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_menu_navigation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
