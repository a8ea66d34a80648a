/*
 * test_helpers_keyboard: the keyboard macros of tgbot/keyboard.h, sent through the generated
 * methods to the loopback Bot API server; the request bodies are compared byte for byte.
 * Keyboards that break the Bot API's rules (callback data over 64 bytes, two actions on a
 * button, a pay button not first, ...) must make the call fail before anything is sent.
 */
#include "tgtest.h"

#include "bot_server.h"
#include "tgbot/tgbot.h"

#define TOKEN "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_"

static const char ok_message[] = "{\"ok\":true,\"result\":{\"message_id\":1,\"date\":1,\"chat\":{"
                                 "\"id\":42,\"type\":\"private\"}}}";

static int setup(void **state)
{
    bot_fx *f = bot_fx_new(TOKEN, &(tg_bot_options){.log_level = TG_LOG_ERROR});
    bot_server_set_reply(f->srv, "sendMessage", 200, ok_message);
    bot_server_set_reply(f->srv, "editMessageReplyMarkup", 200, ok_message);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    bot_fx_free(*state);
    return 0;
}

/* sendMessage to chat 42 with text "k" and markup; returns the status. */
static tg_status send_with(bot_fx *f, tg_reply_markup markup)
{
    tg_message *m = NULL;
    tg_status st =
        tg_send_message(f->ctx,
                        &(tg_send_message_params){
                            .chat_id = tg_chat_id_int(42), .text = "k", .reply_markup = markup},
                        &m);
    return st;
}

static void test_inline_markup(void **state)
{
    bot_fx *f = *state;
    tg_status st = send_with(
        f,
        TG_INLINE_MARKUP(
            TG_INLINE_ROW(TG_BUTTON_CALLBACK("Yes", "yes"), TG_BUTTON_CALLBACK("No", "no")),
            TG_INLINE_ROW(TG_BUTTON_URL("Docs", "https://example.org")),
            TG_INLINE_ROW(TG_BUTTON_WEB_APP("App", "https://example.org/app"),
                          TG_BUTTON_LOGIN_URL("Log in", "https://example.org/login")),
            TG_INLINE_ROW(TG_BUTTON_SWITCH_INLINE("Share", "q"),
                          TG_BUTTON_SWITCH_INLINE_CURRENT("Here", ""),
                          TG_BUTTON_SWITCH_INLINE_CHOSEN(
                              "Pick",
                              &(tg_switch_inline_query_chosen_chat){
                                  .query = "x", .allow_user_chats = TG_SOME(true)})),
            TG_INLINE_ROW(TG_BUTTON_COPY_TEXT("Copy", "code-123"),
                          (tg_inline_keyboard_button){.text = "Del",
                                                      .callback_data = "del",
                                                      .style = TG_ENUM(TG_BUTTON_STYLE_DANGER)})));
    assert_int_equal(st, TG_OK);
    assert_string_equal(
        bot_server_last(f->srv)->body,
        "{\"chat_id\":42,\"text\":\"k\",\"reply_markup\":{\"inline_keyboard\":["
        "[{\"text\":\"Yes\",\"callback_data\":\"yes\"},{\"text\":\"No\",\"callback_data\":\"no\"}],"
        "[{\"text\":\"Docs\",\"url\":\"https://example.org\"}],"
        "[{\"text\":\"App\",\"web_app\":{\"url\":\"https://example.org/app\"}},"
        "{\"text\":\"Log in\",\"login_url\":{\"url\":\"https://example.org/login\"}}],"
        "[{\"text\":\"Share\",\"switch_inline_query\":\"q\"},"
        "{\"text\":\"Here\",\"switch_inline_query_current_chat\":\"\"},"
        "{\"text\":\"Pick\",\"switch_inline_query_chosen_chat\":{\"query\":\"x\","
        "\"allow_user_chats\":true}}],"
        "[{\"text\":\"Copy\",\"copy_text\":{\"text\":\"code-123\"}},"
        "{\"text\":\"Del\",\"style\":\"danger\",\"callback_data\":\"del\"}]]}}");
    assert_string_equal(tg_keyboard_errmsg(), "");
}

static void test_game_pay_first(void **state)
{
    bot_fx *f = *state;
    assert_int_equal(send_with(f, TG_INLINE_MARKUP(TG_INLINE_ROW(TG_BUTTON_PAY("Pay 5 XTR")))),
                     TG_OK);
    assert_string_equal(bot_server_last(f->srv)->body,
                        "{\"chat_id\":42,\"text\":\"k\",\"reply_markup\":{\"inline_keyboard\":"
                        "[[{\"text\":\"Pay 5 XTR\",\"pay\":true}]]}}");
    assert_int_equal(send_with(f, TG_INLINE_MARKUP(TG_INLINE_ROW(TG_BUTTON_GAME("Play")))), TG_OK);
    assert_string_equal(bot_server_last(f->srv)->body,
                        "{\"chat_id\":42,\"text\":\"k\",\"reply_markup\":{\"inline_keyboard\":"
                        "[[{\"text\":\"Play\",\"callback_game\":{}}]]}}");
}

static void test_reply_keyboards(void **state)
{
    bot_fx *f = *state;
    assert_int_equal(
        send_with(
            f,
            TG_REPLY_KEYBOARD(
                TG_KEY_ROW(TG_KEY_TEXT("A"), TG_KEY_CONTACT("Phone")),
                TG_KEY_ROW(TG_KEY_LOCATION("Where"), TG_KEY_POLL("Quiz", TG_POLL_TYPE_QUIZ)),
                TG_KEY_ROW(TG_KEY_WEB_APP("App", "https://example.org"),
                           TG_KEY_REQUEST_USERS("Users",
                                                &(tg_keyboard_button_request_users){
                                                    .request_id = 7, .max_quantity = TG_SOME(3)})),
                TG_KEY_ROW(TG_KEY_REQUEST_CHAT(
                    "Chan", &(tg_keyboard_button_request_chat){.request_id = 8,
                                                               .chat_is_channel = true})))),
        TG_OK);
    assert_string_equal(
        bot_server_last(f->srv)->body,
        "{\"chat_id\":42,\"text\":\"k\",\"reply_markup\":{\"keyboard\":["
        "[{\"text\":\"A\"},{\"text\":\"Phone\",\"request_contact\":true}],"
        "[{\"text\":\"Where\",\"request_location\":true},"
        "{\"text\":\"Quiz\",\"request_poll\":{\"type\":\"quiz\"}}],"
        "[{\"text\":\"App\",\"web_app\":{\"url\":\"https://example.org\"}},"
        "{\"text\":\"Users\",\"request_users\":{\"request_id\":7,\"max_quantity\":3}}],"
        "[{\"text\":\"Chan\",\"request_chat\":{\"request_id\":8,\"chat_is_channel\":true}}]],"
        "\"resize_keyboard\":true}}");
    assert_int_equal(send_with(f, TG_REPLY_KEYBOARD_ONE_TIME(TG_KEY_ROW(TG_KEY_TEXT("x")))), TG_OK);
    assert_string_equal(
        bot_server_last(f->srv)->body,
        "{\"chat_id\":42,\"text\":\"k\",\"reply_markup\":{\"keyboard\":"
        "[[{\"text\":\"x\"}]],\"resize_keyboard\":true,\"one_time_keyboard\":true}}");
    assert_int_equal(send_with(f, TG_REMOVE_KEYBOARD), TG_OK);
    assert_string_equal(
        bot_server_last(f->srv)->body,
        "{\"chat_id\":42,\"text\":\"k\",\"reply_markup\":{\"remove_keyboard\":true}}");
    assert_int_equal(send_with(f, TG_FORCE_REPLY("Your name")), TG_OK);
    assert_string_equal(bot_server_last(f->srv)->body,
                        "{\"chat_id\":42,\"text\":\"k\",\"reply_markup\":{\"force_reply\":true,"
                        "\"input_field_placeholder\":\"Your name\"}}");
}

static void test_edit_inline_keyboard(void **state)
{
    bot_fx *f = *state;
    tg_message *out = NULL;
    tg_status st = tg_edit_message_reply_markup(
        f->ctx,
        &(tg_edit_message_reply_markup_params){
            .chat_id = tg_chat_id_int(42),
            .message_id = TG_SOME(5),
            .reply_markup = TG_INLINE_KEYBOARD(TG_INLINE_ROW(TG_BUTTON_CALLBACK("Undo", "undo")))},
        &out);
    assert_int_equal(st, TG_OK);
    assert_string_equal(bot_server_last(f->srv)->body,
                        "{\"chat_id\":42,\"message_id\":5,\"reply_markup\":{\"inline_keyboard\":"
                        "[[{\"text\":\"Undo\",\"callback_data\":\"undo\"}]]}}");
}

/* Refused keyboards: the call fails with TG_ERR_INVALID and nothing reaches the server. */
static void test_refused(void **state)
{
    bot_fx *f = *state;
    char data65[66];
    memset(data65, 'd', 65);
    data65[65] = '\0';
    char data64[65];
    memset(data64, 'd', 64);
    data64[64] = '\0';
    size_t before = bot_server_nrequests(f->srv);

    assert_int_equal(
        send_with(f, TG_INLINE_MARKUP(TG_INLINE_ROW(TG_BUTTON_CALLBACK("ok", "a")),
                                      TG_INLINE_ROW(TG_BUTTON_CALLBACK("x", "b"),
                                                    TG_BUTTON_CALLBACK("big", data65)))),
        TG_ERR_INVALID);
    assert_string_equal(tg_keyboard_errmsg(), "inline keyboard: row 2, button 2 (\"big\"): "
                                              "callback_data is 65 bytes; Telegram allows 1 to 64");
    /* the call's own error is the keyboard's message, not the encoder's */
    assert_non_null(strstr(tg_ctx_errmsg(f->ctx), "sendMessage: params: reply_markup: inline "
                                                  "keyboard: row 2, button 2 (\"big\"): "
                                                  "callback_data is 65 bytes"));

    assert_int_equal(send_with(f, TG_INLINE_MARKUP(TG_INLINE_ROW(TG_BUTTON_CALLBACK("e", "")))),
                     TG_ERR_INVALID);
    assert_non_null(strstr(tg_keyboard_errmsg(), "callback_data is 0 bytes"));

    assert_int_equal(
        send_with(f, TG_INLINE_MARKUP(TG_INLINE_ROW((tg_inline_keyboard_button){
                         .text = "two", .callback_data = "a", .url = "https://x.org"}))),
        TG_ERR_INVALID);
    assert_non_null(strstr(tg_keyboard_errmsg(), "has 2 actions"));

    assert_int_equal(send_with(f, TG_INLINE_MARKUP(TG_INLINE_ROW(TG_BUTTON_URL("", "https://x")))),
                     TG_ERR_INVALID);
    assert_string_equal(tg_keyboard_errmsg(), "inline keyboard: row 1, button 1: text is empty");

    assert_int_equal(send_with(f, TG_INLINE_MARKUP(TG_INLINE_ROW(TG_BUTTON_CALLBACK("a", "a"),
                                                                 TG_BUTTON_PAY("Pay")))),
                     TG_ERR_INVALID);
    assert_non_null(strstr(tg_keyboard_errmsg(), "a pay button must be the first"));

    assert_int_equal(send_with(f, TG_REPLY_KEYBOARD(TG_KEY_ROW(
                                      (tg_keyboard_button){.text = "both",
                                                           .request_contact = TG_SOME(true),
                                                           .request_location = TG_SOME(true)}))),
                     TG_ERR_INVALID);
    assert_non_null(strstr(tg_keyboard_errmsg(), "reply keyboard: row 1, button 1 (\"both\")"));

    tg_message *out = NULL;
    assert_int_equal(
        tg_edit_message_reply_markup(
            f->ctx,
            &(tg_edit_message_reply_markup_params){.chat_id = tg_chat_id_int(42),
                                                   .message_id = TG_SOME(5),
                                                   .reply_markup = TG_INLINE_KEYBOARD(TG_INLINE_ROW(
                                                       TG_BUTTON_CALLBACK("big", data65)))},
            &out),
        TG_ERR_INVALID);
    assert_int_equal(bot_server_nrequests(f->srv), before);

    /* exactly 64 bytes is allowed */
    assert_int_equal(
        send_with(f, TG_INLINE_MARKUP(TG_INLINE_ROW(TG_BUTTON_CALLBACK("ok", data64)))), TG_OK);
    assert_int_equal(bot_server_nrequests(f->srv), before + 1);
    assert_int_equal(tg_inline_keyboard_validate(NULL), TG_ERR_INVALID);
    assert_int_equal(tg_reply_markup_inline(NULL).kind, TG_REPLY_MARKUP_INLINE_KEYBOARD_MARKUP);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_inline_markup, setup, teardown),
        cmocka_unit_test_setup_teardown(test_game_pay_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reply_keyboards, setup, teardown),
        cmocka_unit_test_setup_teardown(test_edit_inline_keyboard, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
