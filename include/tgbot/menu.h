/*
 * tgbot/menu.h: interactive inline-keyboard menus (grammY's menu plugin): buttons with
 * their own handlers, submenus with a back button, paged lists with previous/next, all
 * updated in place (the menu's message is edited, never resent).
 *
 *   static tg_status on_count(tg_hctx *h, void *user)      a button's handler
 *   {
 *       tg_data *c = tg_hctx_chat_data(h);
 *       return tg_data_set_int(c, "n", tg_data_get_int(c, "n", 0) + 1);
 *   }
 *   tg_menu *main = tg_menu_new("main", "Main menu");
 *   tg_menu_add_button(main, "Count", on_count, NULL);        then the menu is redrawn
 *   tg_menu *settings = tg_menu_new("settings", "Settings");
 *   tg_menu_add_submenu(main, "Settings", settings);          "« Back" added to settings
 *   tg_router_add_menu(r, main);                              the router owns the tree now
 *   ... in a command's handler: tg_menu_send(h, main);
 *
 * Pressing a button answers the callback query (unless the handler did, e.g. with an
 * alert) and redraws the menu with its text function, so a label or text that shows state
 * changes at once. A submenu replaces the menu in the same message; "« Back" brings the
 * parent back. A list shows per_page items of count(h) per page, with "‹ Prev" and
 * "Next ›"; pressing an item runs on_item with its index.
 *
 * Callback data: "menu:<id>:<op>:<page>" (ids are 1..16 of [a-z0-9_], unique in a router),
 * within Telegram's 64 bytes. The menus' route is in group INT32_MIN, before every other:
 * a handler of another group that takes every callback query also sees menu presses
 * (exclude them with tg_filter_not(tg_filter_callback_prefix("menu:"))). Presses of a menu the
 * router does not know (an old message after a restart with other menus) are answered "This menu is
 * no longer available". Build menus before the dispatcher starts; then they are read-only (any
 * worker).
 */
#ifndef TGBOT_MENU_H
#define TGBOT_MENU_H

#include "tgbot/dispatch.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_menu tg_menu;

/* The menu's text, computed at each draw (may return a string from tg_hctx_alloc). */
typedef const char *(*tg_menu_text_fn)(tg_hctx *h, void *user);
/* A list's length, an item's label, an item's handler. */
typedef size_t (*tg_menu_count_fn)(tg_hctx *h, void *user);
typedef const char *(*tg_menu_label_fn)(tg_hctx *h, size_t i, void *user);
typedef tg_status (*tg_menu_item_fn)(tg_hctx *h, size_t i, void *user);

/* A menu with a fixed text (copied). NULL on a bad id or out of memory. */
TG_API tg_menu *tg_menu_new(const char *id, const char *text);
/* Compute the text at each draw instead. */
TG_API void tg_menu_text(tg_menu *m, tg_menu_text_fn fn, void *user);
/* A button (label copied) that runs fn, then redraws the menu. fn NULL: only redraws. */
TG_API tg_status tg_menu_add_button(tg_menu *m, const char *label, tg_handler_fn fn, void *user);
/* A button that shows sub in place; sub gets a "« Back" row to m. m owns sub. */
TG_API tg_status tg_menu_add_submenu(tg_menu *m, const char *label, tg_menu *sub);
/* Start a new row of buttons (buttons go side by side until then). */
TG_API tg_status tg_menu_add_row(tg_menu *m);
/* A paged list above the buttons: per_page items (1..20) a page, one a row. */
TG_API tg_status tg_menu_add_list(tg_menu *m, size_t per_page, tg_menu_count_fn count,
                                  tg_menu_label_fn label, tg_menu_item_fn on_item, void *user);
/* Route the presses of root and its submenus (the router owns and frees the tree). */
TG_API tg_status tg_router_add_menu(tg_router *r, tg_menu *root);
/* In a text or label function: the list page being drawn (0-based) and *pages (optional)
 * the number of pages (0 without a list). */
TG_API size_t tg_menu_page(const tg_hctx *h, size_t *pages);
/* Send menu m as a new message to the update's chat. */
TG_API tg_status tg_menu_send(tg_hctx *h, const tg_menu *m);
/* Free a menu never added to a router (and its submenus). NULL-safe. */
TG_API void tg_menu_free(tg_menu *m);

#ifdef __cplusplus
}
#endif

#endif
