/*
 * test_helpers_text: the formatted-text builder, escaping and entity extraction.
 * Offsets are checked against hand-counted UTF-16 units with astral-plane characters (emoji
 * U+1F600, CJK extension B U+20000), two-unit sequences next to one-unit ones, nesting, and
 * the entities of the shared fixture payloads (decoded through the generated codec). A
 * message built by the builder is sent to the loopback server and its body compared.
 */
#include "tgtest.h"

#include "bot/codec/codec.h"
#include "bot_server.h"
#include "core/arena.h"
#include "tgbot/tgbot.h"

#define TOKEN "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_"

#define GRIN   "\xF0\x9F\x98\x80" /* U+1F600, 4 bytes, 2 units */
#define CJKB   "\xF0\xA0\x80\x80" /* U+20000, 4 bytes, 2 units */
#define EACUTE "\xC3\xA9"         /* U+00E9, 2 bytes, 1 unit */
#define EURO   "\xE2\x82\xAC"     /* U+20AC, 3 bytes, 1 unit */

static void expect_entity(const tg_text *t, size_t i, int32_t type, int64_t off, int64_t len,
                          const char *covers)
{
    assert_true(i < tg_text_entity_count(t));
    const tg_message_entity *e = &tg_text_entities(t)[i];
    assert_int_equal(e->type.id, type);
    assert_int_equal(e->offset, off);
    assert_int_equal(e->length, len);
    const char *start;
    size_t n;
    assert_int_equal(tg_entity_text(tg_text_str(t), e, &start, &n), TG_OK);
    assert_int_equal(n, strlen(covers));
    assert_memory_equal(start, covers, n);
}

static void test_offsets_astral(void **state)
{
    (void)state;
    tg_text *t = tg_text_new();
    tg_text_plain(t, GRIN " hi ");                        /* 2 + 4 = 6 units */
    tg_text_bold(t, CJKB "x" GRIN);                       /* 6..11 */
    tg_text_plain(t, EACUTE EURO);                        /* 11..13 */
    tg_text_begin(t, TG_MESSAGE_ENTITY_TYPE_ITALIC);      /* 13.. */
    tg_text_plain(t, "a");                                /* 13..14 */
    tg_text_underline(t, GRIN GRIN);                      /* 14..18 */
    tg_text_end(t);                                       /* italic 13..18 */
    tg_text_pre(t, "int x;", "c");                        /* 18..24 */
    tg_text_link(t, CJKB, "https://example.org/");        /* 24..26 */
    tg_text_user(t, "Ann", 1234567);                      /* 26..29 */
    tg_text_custom_emoji(t, GRIN, "5368324170671202286"); /* 29..31 */
    tg_text_mention(t, "@bob");                           /* 31..35 */
    tg_text_spoiler(t, "s");                              /* 35..36 */
    tg_text_strikethrough(t, "z");                        /* 36..37 */
    tg_text_code(t, "c");                                 /* 37..38 */
    tg_text_blockquote(t, "q" GRIN);                      /* 38..41 */
    tg_text_bold(t, "");                                  /* empty: dropped */
    assert_int_equal(tg_text_status(t), TG_OK);
    assert_int_equal(tg_text_utf16_len(t), 41);
    assert_int_equal(tg_utf16_len(tg_text_str(t), tg_text_len(t)), 41);
    assert_int_equal(tg_text_entity_count(t), 12);
    expect_entity(t, 0, TG_MESSAGE_ENTITY_TYPE_BOLD, 6, 5, CJKB "x" GRIN);
    expect_entity(t, 1, TG_MESSAGE_ENTITY_TYPE_ITALIC, 13, 5, "a" GRIN GRIN);
    expect_entity(t, 2, TG_MESSAGE_ENTITY_TYPE_UNDERLINE, 14, 4, GRIN GRIN);
    expect_entity(t, 3, TG_MESSAGE_ENTITY_TYPE_PRE, 18, 6, "int x;");
    assert_string_equal(tg_text_entities(t)[3].language, "c");
    expect_entity(t, 4, TG_MESSAGE_ENTITY_TYPE_TEXT_LINK, 24, 2, CJKB);
    assert_string_equal(tg_text_entities(t)[4].url, "https://example.org/");
    expect_entity(t, 5, TG_MESSAGE_ENTITY_TYPE_TEXT_MENTION, 26, 3, "Ann");
    assert_int_equal(tg_text_entities(t)[5].user->id, 1234567);
    expect_entity(t, 6, TG_MESSAGE_ENTITY_TYPE_CUSTOM_EMOJI, 29, 2, GRIN);
    assert_string_equal(tg_text_entities(t)[6].custom_emoji_id, "5368324170671202286");
    expect_entity(t, 7, TG_MESSAGE_ENTITY_TYPE_MENTION, 31, 4, "@bob");
    expect_entity(t, 8, TG_MESSAGE_ENTITY_TYPE_SPOILER, 35, 1, "s");
    expect_entity(t, 9, TG_MESSAGE_ENTITY_TYPE_STRIKETHROUGH, 36, 1, "z");
    expect_entity(t, 10, TG_MESSAGE_ENTITY_TYPE_CODE, 37, 1, "c");
    expect_entity(t, 11, TG_MESSAGE_ENTITY_TYPE_BLOCKQUOTE, 38, 3, "q" GRIN);
    tg_text_clear(t);
    assert_string_equal(tg_text_str(t), "");
    assert_int_equal(tg_text_entity_count(t), 0);
    assert_null(tg_text_entities(t));
    tg_text_printf(t, "%d %s", 42, GRIN);
    assert_int_equal(tg_text_utf16_len(t), 5);
    tg_text_free(t);
    tg_text_free(NULL);
}

static void test_errors_stick(void **state)
{
    (void)state;
    tg_text *t = tg_text_new();
    tg_text_plain(t, "ok ");
    tg_text_plain(t, "bad \xC3(");
    tg_text_plain(t, "more");
    assert_int_equal(tg_text_status(t), TG_ERR_INVALID);
    assert_string_equal(tg_text_errmsg(t), "text: invalid UTF-8 at byte 4 of \"bad \xC3(\"");
    assert_string_equal(tg_text_str(t), "ok ");

    const char *bad[] = {"\xED\xA0\x80" /* surrogate */, "\xC0\xAF" /* overlong */,
                         "\xF4\x90\x80\x80" /* > U+10FFFF */, "\xF0\x9F\x98" /* truncated */};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tg_text_clear(t);
        tg_text_bold(t, bad[i]);
        assert_int_equal(tg_text_status(t), TG_ERR_INVALID);
    }
    tg_text_clear(t);
    tg_text_end(t);
    assert_string_equal(tg_text_errmsg(t), "text: tg_text_end without an open span");
    tg_text_clear(t);
    tg_text_begin(t, TG_MESSAGE_ENTITY_TYPE_BOLD);
    assert_int_equal(tg_text_status(t), TG_ERR_INVALID);
    assert_non_null(strstr(tg_text_errmsg(t), "still open"));
    tg_text_clear(t);
    tg_text_link(t, "x", NULL);
    assert_string_equal(tg_text_errmsg(t), "text: a text link needs a URL");
    tg_text_clear(t);
    tg_text_mention(t, "bob");
    assert_non_null(strstr(tg_text_errmsg(t), "\"@username\""));
    tg_text_clear(t);
    tg_text_begin(t, 999);
    assert_string_equal(tg_text_errmsg(t), "text: 999 is not an entity type");
    tg_text_clear(t);
    for (int i = 0; i < 40; i++)
        tg_text_begin(t, TG_MESSAGE_ENTITY_TYPE_BOLD);
    assert_non_null(strstr(tg_text_errmsg(t), "more than 32 spans"));
    tg_text_free(t);
    assert_int_equal(tg_text_status(NULL), TG_ERR_INVALID);
}

static void test_escape(void **state)
{
    (void)state;
    static const struct {
        tg_escape_mode mode;
        const char *in, *out;
    } cases[] = {
        {TG_ESCAPE_HTML, "a<b> & \"c\" 'd' " GRIN, "a&lt;b&gt; &amp; &quot;c&quot; 'd' " GRIN},
        {TG_ESCAPE_MARKDOWN_V2, "_*[]()~`>#+-=|{}.!\\x",
         "\\_\\*\\[\\]\\(\\)\\~\\`\\>\\#\\+\\-\\=\\|\\{\\}\\.\\!\\\\x"},
        {TG_ESCAPE_MARKDOWN_V2, "1.5 - ok!", "1\\.5 \\- ok\\!"},
        {TG_ESCAPE_MARKDOWN_V2_CODE, "a`b\\c*_", "a\\`b\\\\c*_"},
        {TG_ESCAPE_MARKDOWN_V2_URL, "https://x.org/a_(b)\\", "https://x.org/a_(b\\)\\\\"},
        {TG_ESCAPE_HTML, "", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char out[128];
        size_t n = tg_escape(cases[i].mode, cases[i].in, out, sizeof out);
        assert_string_equal(out, cases[i].out);
        assert_int_equal(n, strlen(cases[i].out));
        assert_int_equal(tg_escape(cases[i].mode, cases[i].in, NULL, 0), n);
    }
    /* truncation never splits an escape */
    char small[6];
    assert_int_equal(tg_escape(TG_ESCAPE_HTML, "ab<cd", small, sizeof small), 8);
    assert_string_equal(small, "ab");
    assert_int_equal(tg_escape(TG_ESCAPE_MARKDOWN_V2, "abcd.", small, sizeof small), 6);
    assert_string_equal(small, "abcd");
}

/* Entities of the shared fixtures, decoded by the generated codec, cover what they say. */
static void test_fixture_entities(void **state)
{
    (void)state;
    static const struct {
        const char *file;
        size_t index;
        const char *covers;
    } cases[] = {
        {"fixtures/botapi/large_update.json", 0, "https://example.com"},
        {"fixtures/botapi/large_update.json", 1, "@bob"},
        {"fixtures/botapi/large_update.json", 2, "see"},
        {"fixtures/botapi/dispatch_update.json", 0, "/cmd19"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t len;
        char *json = tgtest_read_file(tgtest_data_path(cases[i].file), &len);
        assert_non_null(json);
        tg__arena a;
        tg__arena_init(&a, 0, 0);
        tg__jdoc doc;
        tg__jdoc_init(&doc, NULL);
        void *out = NULL;
        assert_int_equal(tg__codec_decode_json(tg__codec_type_by_name("Update"), json, len, &a,
                                               &doc, &out, NULL),
                         TG_OK);
        const tg_update *u = out;
        const tg_message *m = u->message;
        assert_true(cases[i].index < m->entities_count);
        const char *start;
        size_t n;
        assert_int_equal(tg_entity_text(m->text, &m->entities[cases[i].index], &start, &n), TG_OK);
        assert_int_equal(n, strlen(cases[i].covers));
        assert_memory_equal(start, cases[i].covers, n);
        tg__jdoc_cleanup(&doc);
        tg__arena_cleanup(&a);
        free(json);
    }
}

static void test_entity_text_bounds(void **state)
{
    (void)state;
    const char *text = "a" GRIN "b";
    tg_message_entity e = {.offset = 1, .length = 2};
    const char *s;
    size_t n;
    assert_int_equal(tg_entity_text(text, &e, &s, &n), TG_OK);
    assert_int_equal(n, 4);
    e.offset = 2; /* inside the surrogate pair */
    assert_int_equal(tg_entity_text(text, &e, &s, &n), TG_ERR_INVALID);
    e = (tg_message_entity){.offset = 1, .length = 1}; /* ends inside it */
    assert_int_equal(tg_entity_text(text, &e, &s, &n), TG_ERR_INVALID);
    e = (tg_message_entity){.offset = 3, .length = 2}; /* past the end */
    assert_int_equal(tg_entity_text(text, &e, &s, &n), TG_ERR_INVALID);
    e = (tg_message_entity){.offset = 4, .length = 0};
    assert_int_equal(tg_entity_text(text, &e, &s, &n), TG_OK);
    assert_int_equal(n, 0);
    e = (tg_message_entity){.offset = -1, .length = 1};
    assert_int_equal(tg_entity_text(text, &e, &s, &n), TG_ERR_INVALID);
}

static void test_send_built_text(void **state)
{
    (void)state;
    bot_fx *f = bot_fx_new(TOKEN, &(tg_bot_options){.log_level = TG_LOG_ERROR});
    bot_server_set_reply(f->srv, "sendMessage", 200,
                         "{\"ok\":true,\"result\":{\"message_id\":1,\"date\":1,"
                         "\"chat\":{\"id\":42,\"type\":\"private\"}}}");
    tg_text *t = tg_text_new();
    tg_text_plain(t, GRIN " ");
    tg_text_bold(t, "Ann");
    tg_text_plain(t, ", see ");
    tg_text_link(t, "docs", "https://example.org");
    tg_text_user(t, "you", 77);
    tg_message *m;
    assert_int_equal(
        tg_send_message(f->ctx,
                        &(tg_send_message_params){.chat_id = tg_chat_id_int(42),
                                                  .text = tg_text_str(t),
                                                  .entities = tg_text_entities(t),
                                                  .entities_count = tg_text_entity_count(t)},
                        &m),
        TG_OK);
    assert_string_equal(
        bot_server_last(f->srv)->body,
        "{\"chat_id\":42,\"text\":\"" GRIN " Ann, see docsyou\",\"entities\":["
        "{\"type\":\"bold\",\"offset\":3,\"length\":3},"
        "{\"type\":\"text_link\",\"offset\":12,\"length\":4,\"url\":\"https://example.org\"},"
        "{\"type\":\"text_mention\",\"offset\":16,\"length\":3,"
        "\"user\":{\"id\":77,\"is_bot\":false,\"first_name\":\"\"}}]}");
    tg_text_free(t);
    bot_fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_offsets_astral),
        cmocka_unit_test(test_errors_stick),
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_fixture_entities),
        cmocka_unit_test(test_entity_text_bounds),
        cmocka_unit_test(test_send_built_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
