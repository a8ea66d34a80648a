/*
 * Bot-wide defaults (tg_bot_set_defaults) end to end through tgbot-emulator, checked on what
 * the emulator received (tg_test_last_call): filled in when the caller left a parameter
 * unset, by the generated blocking calls, by the async calls, in multipart uploads, in
 * nested objects (InputTextMessageContent, ReplyParameters) and by the handler shortcuts
 * (tg_reply, tg_send_ex, tg_edit, tg_reply_text); never over an explicit value, "none" and false
 * included; kept out where entities format the text; absent from methods that have no such
 * parameter.
 */
#include "tgtest.h"

#include "emu_bot.h"
#include "tgbot/testing.h"
#include "tgbot/tgbot.h"

#define WAIT_MS 10000

static const tg_link_preview_options no_preview = {.is_disabled = TG_SOME(true)};
static const tg_link_preview_options telegram_own; /* nothing set: sent as {} */

struct fx {
    tg_test *t;
    tg_bot *bot;
    tg_ctx *ctx;
};

static void set_all(tg_bot *bot)
{
    tg_bot_defaults d = {.parse_mode = TG_ENUM(TG_PARSE_MODE_HTML),
                         .link_preview_options = &no_preview,
                         .protect_content = TG_SOME(true),
                         .disable_notification = TG_SOME(true)};
    assert_int_equal(tg_bot_set_defaults(bot, &d), TG_OK);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->t = tg_test_start();
    assert_non_null(f->t);
    f->bot = tg_bot_new(tg_test_token(f->t), &(tg_bot_options){.base_url = tg_test_url(f->t)});
    assert_non_null(f->bot);
    f->ctx = tg_ctx_new(f->bot);
    assert_non_null(f->ctx);
    set_all(f->bot);
    /* The user writes first, so the bot may write to them. */
    assert_true(tg_test_send(f->t, 0, 0, "hi") > 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    tg_ctx_free(f->ctx);
    tg_bot_free(f->bot);
    tg_test_free(f->t);
    free(f);
    return 0;
}

/* The last request of method, which must hold every string of has and none of hasnt. */
static void expect_call(struct fx *f, const char *method, const char *const *has,
                        const char *const *hasnt)
{
    char *req = tg_test_last_call(f->t, method);
    if (!req)
        fail_msg("%s", tg_test_errmsg(f->t));
    for (; has && *has; has++)
        if (!strstr(req, *has))
            fail_msg("%s request %s lacks %s", method, req, *has);
    for (; hasnt && *hasnt; hasnt++)
        if (strstr(req, *hasnt))
            fail_msg("%s request %s has %s", method, req, *hasnt);
    free(req);
}

#define LIST(...) ((const char *const[]){__VA_ARGS__, NULL})
#define DEFAULTS                                                                                   \
    "\"parse_mode\":\"HTML\"", "\"link_preview_options\":{\"is_disabled\":true}",                  \
        "\"protect_content\":true", "\"disable_notification\":true"

static tg_chat_id user_chat(struct fx *f)
{
    return tg_chat_id_int(tg_test_user_id(f->t));
}

static void test_applied_when_unset(void **state)
{
    struct fx *f = *state;
    tg_message *m = NULL;
    assert_int_equal(tg_send_message(f->ctx,
                                     &(tg_send_message_params){.chat_id = user_chat(f),
                                                               .text = "<b>bold</b> by default"},
                                     &m),
                     TG_OK);
    expect_call(f, "sendMessage", LIST(DEFAULTS), NULL);
    /* The emulator parsed the HTML the default asked for. */
    assert_non_null(m);
    assert_string_equal(m->text, "bold by default");
    assert_int_equal(m->entities_count, 1);
    assert_string_equal(tg_message_entity_type_to_str(m->entities[0].type), "bold");

    /* editMessageText has parse_mode and link_preview_options, not the other two. */
    assert_int_equal(
        tg_edit_message_text(f->ctx,
                             &(tg_edit_message_text_params){.chat_id = user_chat(f),
                                                            .message_id = TG_SOME(m->message_id),
                                                            .text = "<i>edited</i>"},
                             NULL),
        TG_OK);
    expect_call(f, "editMessageText",
                LIST("\"parse_mode\":\"HTML\"", "\"link_preview_options\":{\"is_disabled\":true}"),
                LIST("protect_content", "disable_notification"));
    tg_ctx_reset(f->ctx);
}

static void test_explicit_values_win(void **state)
{
    struct fx *f = *state;
    tg_message *m = NULL;
    /* Explicit "none" and false: no parse mode, no protection, a sound, Telegram's own preview. */
    assert_int_equal(
        tg_send_message(f->ctx,
                        &(tg_send_message_params){.chat_id = user_chat(f),
                                                  .text = "<b>literal</b>",
                                                  .parse_mode = TG_ENUM(TG_ENUM_NONE),
                                                  .link_preview_options = &telegram_own,
                                                  .protect_content = TG_SOME(false),
                                                  .disable_notification = TG_SOME(false)},
                        &m),
        TG_OK);
    expect_call(f, "sendMessage",
                LIST("\"link_preview_options\":{}", "\"protect_content\":false",
                     "\"disable_notification\":false"),
                LIST("parse_mode", "is_disabled"));
    assert_string_equal(m->text, "<b>literal</b>");
    assert_int_equal(m->entities_count, 0);

    /* An explicit other value. */
    assert_int_equal(tg_send_message(f->ctx,
                                     &(tg_send_message_params){
                                         .chat_id = user_chat(f),
                                         .text = "*bold*",
                                         .parse_mode = TG_ENUM(TG_PARSE_MODE_MARKDOWN_V2),
                                         .link_preview_options =
                                             &(tg_link_preview_options){.url = "https://x.test/"}},
                                     NULL),
                     TG_OK);
    expect_call(f, "sendMessage",
                LIST("\"parse_mode\":\"MarkdownV2\"",
                     "\"link_preview_options\":{\"url\":\"https://x.test/\"}",
                     "\"protect_content\":true"),
                LIST("HTML", "is_disabled"));

    /* Entities format the text: the default parse mode stays out, the others apply. */
    tg_message_entity bold = {
        .type = TG_ENUM(TG_MESSAGE_ENTITY_TYPE_BOLD), .offset = 0, .length = 1};
    assert_int_equal(tg_send_message(f->ctx,
                                     &(tg_send_message_params){.chat_id = user_chat(f),
                                                               .text = "<",
                                                               .entities = &bold,
                                                               .entities_count = 1},
                                     NULL),
                     TG_OK);
    expect_call(f, "sendMessage", LIST("\"entities\":", "\"protect_content\":true"),
                LIST("parse_mode"));
    tg_ctx_reset(f->ctx);
}

static void test_other_methods_unaffected(void **state)
{
    struct fx *f = *state;
    assert_int_equal(
        tg_send_chat_action(
            f->ctx, &(tg_send_chat_action_params){.chat_id = user_chat(f),
                                                  .action = TG_ENUM(TG_CHAT_ACTION_TYPING)}),
        TG_OK);
    expect_call(f, "sendChatAction", LIST("\"action\":\"typing\""),
                LIST("parse_mode", "link_preview", "protect_content", "disable_notification"));
    assert_int_equal(tg_get_me(f->ctx, NULL), TG_OK);
    expect_call(f, "getMe", LIST("{"),
                LIST("parse_mode", "link_preview", "protect_content", "disable_notification"));

    /* Cleared: nothing is added any more. */
    assert_int_equal(tg_bot_set_defaults(f->bot, NULL), TG_OK);
    assert_int_equal(
        tg_send_message(f->ctx, &(tg_send_message_params){.chat_id = user_chat(f), .text = "plain"},
                        NULL),
        TG_OK);
    expect_call(f, "sendMessage", LIST("\"text\":\"plain\""),
                LIST("parse_mode", "link_preview", "protect_content", "disable_notification"));
    assert_int_equal(tg_bot_get_defaults(f->bot)->parse_mode.id, TG_ENUM_ABSENT);

    /* A parse mode that is no value of the set is refused, and the old defaults stay. */
    set_all(f->bot);
    tg_bot_defaults bad = {.parse_mode = {77, NULL}};
    assert_int_equal(tg_bot_set_defaults(f->bot, &bad), TG_ERR_INVALID);
    assert_int_equal(tg_bot_get_defaults(f->bot)->parse_mode.id, TG_PARSE_MODE_HTML);
    tg_ctx_reset(f->ctx);
}

static void test_nested_and_multipart(void **state)
{
    struct fx *f = *state;
    /* An inline answer's InputTextMessageContent (the emulator refuses the unknown query id,
     * but it records what it received first). */
    tg_input_text_message_content itmc = {.message_text = "<b>x</b>"};
    tg_inline_query_result_article art = {
        .id = "1",
        .title = "t",
        .input_message_content = tg_input_message_content_from_text_message_content(&itmc)};
    tg_inline_query_result res = tg_inline_query_result_from_article(&art);
    (void)tg_answer_inline_query(f->ctx, &(tg_answer_inline_query_params){.inline_query_id = "404",
                                                                          .results = &res,
                                                                          .results_count = 1});
    expect_call(f, "answerInlineQuery",
                LIST("\"message_text\":\"<b>x</b>\",\"parse_mode\":\"HTML\","
                     "\"link_preview_options\":{\"is_disabled\":true}"),
                NULL);

    /* A quote's parse mode in ReplyParameters, and a photo upload (multipart form fields). */
    static const unsigned char png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    tg_message *sent = NULL;
    assert_int_equal(
        tg_send_message(f->ctx, &(tg_send_message_params){.chat_id = user_chat(f), .text = "first"},
                        &sent),
        TG_OK);
    tg_reply_parameters rp = {.message_id = TG_SOME(sent->message_id), .quote = "fir"};
    assert_int_equal(tg_send_photo(f->ctx,
                                   &(tg_send_photo_params){
                                       .chat_id = user_chat(f),
                                       .photo = tg_input_file_memory(png, sizeof png, "p.png"),
                                       .caption = "<b>cap</b>",
                                       .reply_parameters = &rp},
                                   NULL),
                     TG_OK);
    expect_call(f, "sendPhoto",
                LIST("\"parse_mode\":\"HTML\"", "\"protect_content\":true",
                     "\"disable_notification\":true", "\"quote_parse_mode\":\"HTML\""),
                LIST("link_preview_options"));
    tg_ctx_reset(f->ctx);
}

struct async_done {
    int calls;
    tg_status st;
};

static void on_sent(tg_async *a, const tg_async_result *r, tg_message *m, void *user)
{
    (void)a;
    (void)m;
    struct async_done *d = user;
    d->calls++;
    d->st = r->status;
}

static void test_async(void **state)
{
    struct fx *f = *state;
    tg_async *a = tg_async_new(f->bot, NULL);
    assert_non_null(a);
    struct async_done d1 = {0}, d2 = {0};
    assert_true(tg_async_send_message(
                    a, &(tg_send_message_params){.chat_id = user_chat(f), .text = "<b>async</b>"},
                    on_sent, &d1) != 0);
    for (int i = 0; i < 1000 && tg_async_pending(a) > 0; i++)
        assert_true(tg_async_run_once(a, 100) >= 0);
    assert_int_equal(d1.calls, 1);
    assert_int_equal(d1.st, TG_OK);
    expect_call(f, "sendMessage", LIST("\"text\":\"<b>async</b>\"", DEFAULTS), NULL);

    assert_true(
        tg_async_send_message(a,
                              &(tg_send_message_params){.chat_id = user_chat(f),
                                                        .text = "async explicit",
                                                        .parse_mode = TG_ENUM(TG_ENUM_NONE),
                                                        .disable_notification = TG_SOME(false)},
                              on_sent, &d2) != 0);
    for (int i = 0; i < 1000 && tg_async_pending(a) > 0; i++)
        assert_true(tg_async_run_once(a, 100) >= 0);
    assert_int_equal(d2.calls, 1);
    assert_int_equal(d2.st, TG_OK);
    expect_call(f, "sendMessage",
                LIST("\"text\":\"async explicit\"", "\"disable_notification\":false",
                     "\"protect_content\":true"),
                LIST("parse_mode"));
    tg_async_free(a);
}

/* ---- the handler shortcuts ---- */

static tg_status on_plain(tg_hctx *h, void *user)
{
    (void)user;
    return tg_reply(h, "<b>reply</b>");
}

static tg_status on_extra(tg_hctx *h, void *user)
{
    (void)user;
    return tg_send_ex(h, "*extra*", "\"parse_mode\":\"MarkdownV2\",\"protect_content\":false");
}

static tg_status on_menu(tg_hctx *h, void *user)
{
    (void)user;
    return tg_send_ex(h, "menu",
                      "\"reply_markup\":{\"inline_keyboard\":[[{\"text\":\"Go\","
                      "\"callback_data\":\"go\"}]]}");
}

static tg_status on_go(tg_hctx *h, void *user)
{
    (void)user;
    tg_status st = tg_edit(h, "<i>edited</i>", NULL);
    return st == TG_OK ? tg_answer(h, NULL) : st;
}

static tg_status on_text(tg_hctx *h, void *user)
{
    (void)user;
    tg_text *t = tg_text_bold(tg_text_new(), "<formatted>");
    tg_status st = tg_reply_text(h, t, (tg_reply_markup){0});
    tg_text_free(t);
    return st;
}

static void test_shortcuts(void **state)
{
    struct fx *f = *state;
    tg_router *r = tg_router_new();
    tg_router_on_command(r, "plain", on_plain, NULL);
    tg_router_on_command(r, "extra", on_extra, NULL);
    tg_router_on_command(r, "text", on_text, NULL);
    tg_router_on_command(r, "menu", on_menu, NULL);
    tg_router_on_callback(r, "go", on_go, NULL);
    tgtest_emu_bot b;
    tgtest_emu_bot_start(&b, tg_test_token(f->t), tg_test_url(f->t), r, 1);
    set_all(b.bot);

    int64_t id = tg_test_send(f->t, 0, 0, "/plain");
    char *m = tg_test_wait_message(f->t, 0, id, "reply", WAIT_MS);
    if (!m)
        fail_msg("%s", tg_test_errmsg(f->t));
    assert_non_null(strstr(m, "\"type\":\"bold\""));
    free(m);
    expect_call(f, "sendMessage", LIST("\"text\":\"<b>reply</b>\"", DEFAULTS), NULL);

    id = tg_test_send(f->t, 0, 0, "/extra");
    m = tg_test_wait_message(f->t, 0, id, "extra", WAIT_MS);
    assert_non_null(m);
    free(m);
    expect_call(f, "sendMessage",
                LIST("\"parse_mode\":\"MarkdownV2\"", "\"protect_content\":false",
                     "\"disable_notification\":true",
                     "\"link_preview_options\":{\"is_disabled\":true}"),
                LIST("HTML", "\"protect_content\":true"));

    id = tg_test_send(f->t, 0, 0, "/text");
    m = tg_test_wait_message(f->t, 0, id, "<formatted>", WAIT_MS);
    assert_non_null(m);
    free(m);
    expect_call(f, "sendMessage", LIST("\"entities\":", "\"protect_content\":true"),
                LIST("parse_mode"));

    /* tg_edit: editMessageText has parse_mode and link_preview_options only. */
    id = tg_test_send(f->t, 0, 0, "/menu");
    m = tg_test_wait_message(f->t, 0, id, "menu", WAIT_MS);
    assert_non_null(m);
    free(m);
    int64_t mid = tg_test_last_message_id(f->t, 0);
    char *a = tg_test_press(f->t, 0, 0, mid, "go", WAIT_MS);
    if (!a)
        fail_msg("%s", tg_test_errmsg(f->t));
    free(a);
    m = tg_test_wait_edit(f->t, 0, mid, "edited", WAIT_MS);
    assert_non_null(m);
    assert_non_null(strstr(m, "\"type\":\"italic\"")); /* the default HTML was applied */
    free(m);
    expect_call(f, "editMessageText",
                LIST("\"parse_mode\":\"HTML\"", "\"link_preview_options\":{\"is_disabled\":true}"),
                LIST("protect_content", "disable_notification"));

    tgtest_emu_bot_stop(&b);
    tg_router_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_applied_when_unset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_explicit_values_win, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_methods_unaffected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nested_and_multipart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_async, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shortcuts, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
