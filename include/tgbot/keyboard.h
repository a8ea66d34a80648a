/*
 * tgbot/keyboard.h: inline and reply keyboards in one expression, as the generated types of
 * tgbot/api.h (no JSON by hand).
 *
 *   tg_send_message(ctx, &(tg_send_message_params){
 *       .chat_id = tg_chat_id_int(chat), .text = "Sure?",
 *       .reply_markup = TG_INLINE_MARKUP(
 *           TG_INLINE_ROW(TG_BUTTON_CALLBACK("Yes", "yes"), TG_BUTTON_CALLBACK("No", "no")),
 *           TG_INLINE_ROW(TG_BUTTON_URL("Read the docs", "https://example.org")))}, &m);
 *
 *   tg_edit_message_reply_markup(ctx, &(tg_edit_message_reply_markup_params){...,
 *       .reply_markup = TG_INLINE_KEYBOARD(TG_INLINE_ROW(TG_BUTTON_CALLBACK("Undo", "undo")))},
 *       &out);
 *
 * Buttons: one macro per kind of the Bot API's InlineKeyboardButton (callback, url, web app,
 * login url, switch inline query (any chat, current chat, chosen chat), copy text, game, pay)
 * and KeyboardButton (text, contact, location, poll, web app, request users, request chat,
 * request managed bot). Each is a compound literal of the generated struct, so every other
 * field (style, icon_custom_emoji_id, ...) can be set by writing the struct directly:
 *   (tg_inline_keyboard_button){.text = "Delete", .callback_data = "del",
 *                               .style = TG_ENUM(TG_BUTTON_STYLE_DANGER)}
 *
 * Checks: TG_INLINE_KEYBOARD / TG_INLINE_MARKUP / TG_REPLY_KEYBOARD pass the keyboard through
 * tg_inline_keyboard_check() or tg_reply_keyboard_check(), which enforce what the Bot API page
 * states: every button has a non-empty text; an inline button has exactly one action;
 * callback_data is 1..64 bytes (TG_CALLBACK_DATA_MAX); a pay or game button is the first
 * button of the first row; a reply button requests at most one thing. A keyboard that fails
 * is replaced by a poisoned value that makes the call carrying it fail with TG_ERR_INVALID
 * before anything is sent; tg_keyboard_errmsg() says which button and why
 * ("inline keyboard: row 2, button 1: callback_data is 70 bytes; Telegram allows 1 to 64").
 *
 * Ownership and lifetime: the macros build compound literals, which live until the end of
 * the enclosing block; every string is borrowed, not copied. Use them within the statement
 * (or block) that makes the call. Nothing is allocated.
 * Thread-safety: the check functions touch only their arguments and a thread-local error
 * message; safe from any thread.
 */
#ifndef TGBOT_KEYBOARD_H
#define TGBOT_KEYBOARD_H

#include "tgbot/api.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TG_CALLBACK_DATA_MAX 64 /* bytes, Bot API InlineKeyboardButton.callback_data */

/* ---- inline buttons (InlineKeyboardButton) ---- */

#define TG_BUTTON_CALLBACK(text_, data_)                                                           \
    ((tg_inline_keyboard_button){.text = (text_), .callback_data = (data_)})
#define TG_BUTTON_URL(text_, url_) ((tg_inline_keyboard_button){.text = (text_), .url = (url_)})
#define TG_BUTTON_WEB_APP(text_, url_)                                                             \
    ((tg_inline_keyboard_button){.text = (text_), .web_app = &(tg_web_app_info){.url = (url_)}})
#define TG_BUTTON_LOGIN_URL(text_, url_)                                                           \
    ((tg_inline_keyboard_button){.text = (text_), .login_url = &(tg_login_url){.url = (url_)}})
/* Opens the chat picker, then inserts "@bot query" (query may be ""). */
#define TG_BUTTON_SWITCH_INLINE(text_, query_)                                                     \
    ((tg_inline_keyboard_button){.text = (text_), .switch_inline_query = (query_)})
/* Inserts "@bot query" in the current chat. */
#define TG_BUTTON_SWITCH_INLINE_CURRENT(text_, query_)                                             \
    ((tg_inline_keyboard_button){.text = (text_), .switch_inline_query_current_chat = (query_)})
/* The rest: a const tg_switch_inline_query_chosen_chat * (kinds of chats to offer); a
 * compound literal with commas may be written directly. Likewise for TG_KEY_REQUEST_*. */
#define TG_BUTTON_SWITCH_INLINE_CHOSEN(text_, ...)                                                 \
    ((tg_inline_keyboard_button){.text = (text_), .switch_inline_query_chosen_chat = (__VA_ARGS__)})
#define TG_BUTTON_COPY_TEXT(text_, copy_)                                                          \
    ((tg_inline_keyboard_button){.text = (text_),                                                  \
                                 .copy_text = &(tg_copy_text_button){.text = (copy_)}})
/* Launches the message's game; must be the first button of the first row. */
#define TG_BUTTON_GAME(text_)                                                                      \
    ((tg_inline_keyboard_button){.text = (text_), .callback_game = &(tg_callback_game){{0}}})
/* A payment button (invoices only); must be the first button of the first row. */
#define TG_BUTTON_PAY(text_) ((tg_inline_keyboard_button){.text = (text_), .pay = {true, true}})

/* ---- reply buttons (KeyboardButton) ---- */

#define TG_KEY_TEXT(text_) ((tg_keyboard_button){.text = (text_)})
#define TG_KEY_CONTACT(text_)                                                                      \
    ((tg_keyboard_button){.text = (text_), .request_contact = {true, true}})
#define TG_KEY_LOCATION(text_)                                                                     \
    ((tg_keyboard_button){.text = (text_), .request_location = {true, true}})
/* type_: TG_POLL_TYPE_QUIZ, TG_POLL_TYPE_REGULAR, or 0 for any kind of poll. */
#define TG_KEY_POLL(text_, type_)                                                                  \
    ((tg_keyboard_button){.text = (text_),                                                         \
                          .request_poll =                                                          \
                              &(tg_keyboard_button_poll_type){.type = {(type_), NULL}}})
#define TG_KEY_WEB_APP(text_, url_)                                                                \
    ((tg_keyboard_button){.text = (text_), .web_app = &(tg_web_app_info){.url = (url_)}})
/* req_: a const tg_keyboard_button_request_users * (request_id and criteria). */
#define TG_KEY_REQUEST_USERS(text_, ...)                                                           \
    ((tg_keyboard_button){.text = (text_), .request_users = (__VA_ARGS__)})
/* req_: a const tg_keyboard_button_request_chat *. */
#define TG_KEY_REQUEST_CHAT(text_, ...)                                                            \
    ((tg_keyboard_button){.text = (text_), .request_chat = (__VA_ARGS__)})
/* req_: a const tg_keyboard_button_request_managed_bot *. */
#define TG_KEY_REQUEST_MANAGED_BOT(text_, ...)                                                     \
    ((tg_keyboard_button){.text = (text_), .request_managed_bot = (__VA_ARGS__)})

/* ---- rows ---- */

/* A row of inline buttons (at least one). */
#define TG_INLINE_ROW(...)                                                                         \
    ((tg_inline_keyboard_button_list){(const tg_inline_keyboard_button[]){__VA_ARGS__},            \
                                      sizeof((const tg_inline_keyboard_button[]){__VA_ARGS__}) /   \
                                          sizeof(tg_inline_keyboard_button)})
/* A row of reply buttons (at least one). */
#define TG_KEY_ROW(...)                                                                            \
    ((tg_keyboard_button_list){(const tg_keyboard_button[]){__VA_ARGS__},                          \
                               sizeof((const tg_keyboard_button[]){__VA_ARGS__}) /                 \
                                   sizeof(tg_keyboard_button)})

/* ---- keyboards ---- */

/* An inline keyboard of rows, checked: a const tg_inline_keyboard_markup * (for the fields
 * typed so: editMessage*, stopPoll, answerInlineQuery results, ...). */
#define TG_INLINE_KEYBOARD(...)                                                                    \
    tg_inline_keyboard_check(&(tg_inline_keyboard_markup){                                         \
        .inline_keyboard = (const tg_inline_keyboard_button_list[]){__VA_ARGS__},                  \
        .inline_keyboard_count = sizeof((const tg_inline_keyboard_button_list[]){__VA_ARGS__}) /   \
                                 sizeof(tg_inline_keyboard_button_list)})
/* The same as a tg_reply_markup (sendMessage and the other send* methods). */
#define TG_INLINE_MARKUP(...) tg_reply_markup_inline(TG_INLINE_KEYBOARD(__VA_ARGS__))

/* A reply keyboard of rows, resized to fit its buttons (resize_keyboard), as a
 * tg_reply_markup. For other options, fill a tg_reply_keyboard_markup and pass it to
 * tg_reply_keyboard_check(). */
#define TG_REPLY_KEYBOARD(...)                                                                     \
    tg_reply_keyboard_check(&(tg_reply_keyboard_markup){                                           \
        .keyboard = (const tg_keyboard_button_list[]){__VA_ARGS__},                                \
        .keyboard_count = sizeof((const tg_keyboard_button_list[]){__VA_ARGS__}) /                 \
                          sizeof(tg_keyboard_button_list),                                         \
        .resize_keyboard = {true, true}})
/* The same, hidden by the client once a button was pressed (one_time_keyboard). */
#define TG_REPLY_KEYBOARD_ONE_TIME(...)                                                            \
    tg_reply_keyboard_check(&(tg_reply_keyboard_markup){                                           \
        .keyboard = (const tg_keyboard_button_list[]){__VA_ARGS__},                                \
        .keyboard_count = sizeof((const tg_keyboard_button_list[]){__VA_ARGS__}) /                 \
                          sizeof(tg_keyboard_button_list),                                         \
        .resize_keyboard = {true, true},                                                           \
        .one_time_keyboard = {true, true}})
/* Removes the reply keyboard (ReplyKeyboardRemove), as a tg_reply_markup. */
#define TG_REMOVE_KEYBOARD                                                                         \
    tg_reply_markup_from_reply_keyboard_remove(&(tg_reply_keyboard_remove){.remove_keyboard = true})
/* Asks the client to reply to the message (ForceReply); placeholder_ may be NULL. */
#define TG_FORCE_REPLY(placeholder_)                                                               \
    tg_reply_markup_from_force_reply(                                                              \
        &(tg_force_reply){.force_reply = true, .input_field_placeholder = (placeholder_)})

/*
 * Check an inline keyboard against the rules above. Returns kb when it passes; otherwise a
 * pointer to a static poisoned keyboard (encoding it fails, so the call carrying it returns
 * TG_ERR_INVALID without sending) and tg_keyboard_errmsg() says why. kb NULL: poisoned too.
 * kb is borrowed and returned as is (not copied).
 */
TG_API const tg_inline_keyboard_markup *
tg_inline_keyboard_check(const tg_inline_keyboard_markup *kb);
/* The same for a reply keyboard, returned as a tg_reply_markup (poisoned on failure). */
TG_API tg_reply_markup tg_reply_keyboard_check(const tg_reply_keyboard_markup *kb);
/* kb (from TG_INLINE_KEYBOARD or tg_inline_keyboard_check) as a tg_reply_markup; a poisoned
 * keyboard stays poisoned. */
TG_API tg_reply_markup tg_reply_markup_inline(const tg_inline_keyboard_markup *kb);
/* Validate without poisoning: TG_OK, or TG_ERR_INVALID with the reason in
 * tg_keyboard_errmsg(). */
TG_API tg_status tg_inline_keyboard_validate(const tg_inline_keyboard_markup *kb);
TG_API tg_status tg_reply_keyboard_validate(const tg_reply_keyboard_markup *kb);
/* Why the last check on this thread failed ("" when it passed). Thread-local; valid until
 * the next check on this thread. */
TG_API const char *tg_keyboard_errmsg(void);

/*
 * Typed callback data that fits a button (aiogram's CallbackData): a prefix naming the
 * action and fields, "prefix:field:field", at most 64 bytes.
 *
 *   char d[65];
 *   tg_callback_pack(d, sizeof d, "buy", (const char *[]){"42", "large"}, 2);  "buy:42:large"
 *   const char *f[4];
 *   char buf[65];
 *   int n = tg_callback_unpack(data, "buy", buf, sizeof buf, f, 4);   2: f[0] "42" ...
 *   int64_t id;
 *   tg_callback_field_int(f[0], &id);
 *
 * Fields may be empty but must not contain ':'; TG_ERR_TOO_BIG past 64 bytes (or cap),
 * TG_ERR_INVALID for a ':' (tg_keyboard_errmsg() says which field). For data of any size,
 * see tg_hctx_callback_put (tgbot/dispatch.h). unpack returns the number of fields, or -1
 * when data is not prefix's (another prefix, more than max fields, longer than cap).
 */
TG_API tg_status tg_callback_pack(char *out, size_t cap, const char *prefix,
                                  const char *const *fields, size_t n);
TG_API int tg_callback_unpack(const char *data, const char *prefix, char *buf, size_t cap,
                              const char **fields, size_t max);
/* A decimal integer field; false when it is not one (or out of range). */
TG_API bool tg_callback_field_int(const char *field, int64_t *out);

#ifdef __cplusplus
}
#endif

#endif
