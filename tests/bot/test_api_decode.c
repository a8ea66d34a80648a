/*
 * Decoding Bot API JSON into the generated structs: the shared fixtures field by field,
 * union dispatch (discriminator, presence, date == 0, RichText forms, repeated values),
 * forward compatibility (unknown fields, unknown variants, unknown enum values) and the
 * error paths with their JSON path.
 */
#include "tgtest.h"


#include "bot/api/api.gen.h"
#include "bot/codec/codec.h"
#include "core/alloc.h"
#include "core/arena.h"
#include "core/buf.h"
#include "tgbot/api.h"

typedef struct fx {
    tg__arena a;
    tg__jdoc d;
    tg__buf err;
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    tg__arena_init(&f->a, 0, 0);
    tg__jdoc_init(&f->d, NULL);
    tg__buf_init(&f->err, 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    tg__buf_cleanup(&f->err);
    tg__jdoc_cleanup(&f->d);
    tg__arena_cleanup(&f->a);
    free(f);
    return 0;
}

static void *decode_as(fx *f, const char *type, const char *json, tg_status expect)
{
    const tg__type *t = tg__codec_type_by_name(type);
    assert_non_null(t);
    void *out = NULL;
    tg__buf_reset(&f->err);
    tg_status st = tg__codec_decode_json(t, json, strlen(json), &f->a, &f->d, &out, &f->err);
    if (st != expect)
        fail_msg("decode %s: status %d, expected %d (%s)", type, st, expect, tg__buf_cstr(&f->err));
    return out;
}

static char *fixture(const char *name)
{
    char rel[128];
    snprintf(rel, sizeof rel, "fixtures/botapi/%s", name);
    char *s = tgtest_read_file(tgtest_data_path(rel), NULL);
    assert_non_null(s);
    return s;
}

static void test_small_update(void **state)
{
    fx *f = *state;
    char *json = fixture("small_update.json");
    tg_update *u = decode_as(f, "Update", json, TG_OK);
    assert_int_equal(u->update_id, 123456789);
    assert_int_equal(tg_update_type_of(u), TG_UPDATE_TYPE_MESSAGE);
    assert_string_equal(tg_update_type_to_str((tg_update_type)TG_ENUM(TG_UPDATE_TYPE_MESSAGE)),
                        "message");
    const tg_message *m = u->message;
    assert_non_null(m);
    assert_int_equal(m->message_id, 1);
    assert_int_equal(m->date, 1715000000);
    assert_int_equal(m->chat->id, 42);
    assert_int_equal(m->chat->type.id, TG_CHAT_TYPE_PRIVATE);
    assert_string_equal(m->chat->type.str, "private");
    assert_string_equal(m->chat->first_name, "Alice");
    assert_null(m->chat->title);
    assert_int_equal(m->from->id, 42);
    assert_false(m->from->is_bot);
    assert_string_equal(m->from->first_name, "Alice");
    assert_string_equal(m->from->language_code, "en");
    assert_false(m->from->is_premium);
    assert_string_equal(m->text, "/start");
    assert_null(m->entities);
    assert_int_equal(m->entities_count, 0);
    assert_false(m->message_thread_id.has);
    assert_null(u->edited_message);
    assert_int_equal(m->reply_markup ? 1 : 0, 0);
    /* raw spans: the whole update and the nested chat */
    assert_true(u->raw.len > 200 && u->raw.json[0] == '{');
    assert_true(m->chat->raw.len > 10 && strncmp(m->chat->raw.json, "{\"id\": 42", 9) == 0);
    free(json);
}

static void test_large_update(void **state)
{
    fx *f = *state;
    char *json = fixture("large_update.json");
    tg_update *u = decode_as(f, "Update", json, TG_OK);
    const tg_message *m = u->message;
    assert_int_equal(u->update_id, 987654321);
    assert_int_equal(m->chat->id, -100123456789);
    assert_int_equal(m->chat->type.id, TG_CHAT_TYPE_SUPERGROUP);
    assert_string_equal(m->chat->title, "Devs");
    assert_string_equal(m->from->username, "alice");
    assert_string_equal(m->text, "see https://example.com and @bob too");
    assert_int_equal(m->entities_count, 3);
    assert_int_equal(m->entities[0].type.id, TG_MESSAGE_ENTITY_TYPE_URL);
    assert_int_equal(m->entities[0].offset, 4);
    assert_int_equal(m->entities[0].length, 19);
    assert_int_equal(m->entities[1].type.id, TG_MESSAGE_ENTITY_TYPE_MENTION);
    assert_int_equal(m->entities[1].offset, 28);
    assert_int_equal(m->entities[2].type.id, TG_MESSAGE_ENTITY_TYPE_BOLD);
    assert_int_equal(m->entities[2].length, 3);
    const tg_inline_keyboard_markup *kb = m->reply_markup;
    assert_non_null(kb);
    assert_int_equal(kb->inline_keyboard_count, 2);
    assert_int_equal(kb->inline_keyboard[0].count, 3);
    assert_int_equal(kb->inline_keyboard[1].count, 2);
    assert_string_equal(kb->inline_keyboard[0].items[2].text, "more");
    assert_string_equal(kb->inline_keyboard[0].items[2].callback_data, "more:1");
    assert_string_equal(kb->inline_keyboard[1].items[1].callback_data, "p:r");
    assert_int_equal(m->photo_count, 3);
    assert_string_equal(m->photo[2].file_id, "AgAD3");
    assert_string_equal(m->photo[1].file_unique_id, "u2");
    assert_int_equal(m->photo[0].width, 90);
    assert_int_equal(m->photo[2].height, 600);
    assert_true(m->photo[2].file_size.has);
    assert_int_equal(m->photo[2].file_size.v, 123456);
    free(json);
}

static void test_responses_and_dispatch_fixture(void **state)
{
    fx *f = *state;
    char *json = fixture("dispatch_update.json");
    tg_update *u = decode_as(f, "Update", json, TG_OK);
    assert_non_null(u->message);
    assert_int_equal(u->message->entities_count, 1);
    assert_int_equal(u->message->entities[0].type.id, TG_MESSAGE_ENTITY_TYPE_BOT_COMMAND);
    free(json);

    /* the envelopes decode as a generic object; their "result" as the method's type */
    const char *names[] = {"getme_response.json", "sendmessage_response.json"};
    const char *types[] = {"User", "Message"};
    for (int i = 0; i < 2; i++) {
        char *env = fixture(names[i]);
        tg__jerr err;
        assert_int_equal(tg__json_parse(&f->d, env, strlen(env), &err), 0);
        uint32_t res = tg__json_obj_get(&f->d, 0, "result");
        assert_int_not_equal(res, UINT32_MAX);
        const tg__type *t = tg__codec_type_by_name(types[i]);
        void *out = tg__arena_zalloc(&f->a, t->size);
        assert_int_equal(tg__codec_decode(t, &f->d, res, &f->a, out, &err), TG_OK);
        if (i == 0) {
            const tg_user *me = out;
            assert_true(me->is_bot);
            assert_true(me->id > 0);
            assert_non_null(me->username);
        } else {
            const tg_message *m = out;
            assert_true(m->message_id > 0);
            assert_non_null(m->chat);
        }
        free(env);
    }
}

static void test_error_paths(void **state)
{
    fx *f = *state;
    static const struct {
        const char *type, *json, *msg;
    } cases[] = {
        {"Message",
         "{\"message_id\":1,\"date\":2,\"chat\":{\"id\":1,\"type\":\"private\"},\"entities\":["
         "{\"type\":\"bold\",\"offset\":0,\"length\":1},{\"type\":\"bold\",\"offset\":0,"
         "\"length\":1},{\"type\":\"bold\",\"offset\":\"2\",\"length\":1}]}",
         "entities[2].offset: expected integer, found string"},
        {"Update", "{\"update_id\":1,\"message\":[]}", "message: expected object, found array"},
        {"Update", "[1]", "expected object, found array"},
        {"User", "{\"id\":1,\"is_bot\":\"yes\",\"first_name\":\"a\"}",
         "is_bot: expected boolean, found string"},
        {"Chat", "{\"id\":1,\"type\":7}", "type: expected string, found number"},
        {"Location", "{\"latitude\":\"x\",\"longitude\":1}", "latitude: expected number"},
        {"MessageEntity", "{\"type\":\"bold\",\"offset\":1.5,\"length\":1}", "offset"},
        {"User", "{\"id\":1, \"is_bot\":true,", "at byte"},
        {"ChatMember", "7", "expected object, found number"},
        {"Message", "{\"message_id\":1,\"date\":2}", "missing required field \"chat\""},
        {"Update",
         "{\"update_id\":1,\"message\":{\"message_id\":1,\"date\":2,\"chat\":{\"id\":1,"
         "\"type\":\"private\"},\"from\":{\"id\":2,\"is_bot\":false}}}",
         "message.from: missing required field \"first_name\""},
        {"Message",
         "{\"message_id\":1,\"date\":2,\"chat\":{\"id\":1,\"type\":\"private\"},"
         "\"photo\":{}}",
         "photo: expected array, found object"},
        /* a concrete variant whose discriminator holds another variant's value (issue 17) */
        {"InputMediaDocument", "{\"type\":\"photo\",\"media\":\"x\"}",
         "type: expected \"document\" (this type's constant), found \"photo\""},
        {"InputMediaPhoto", "{\"type\":7,\"media\":\"x\"}",
         "type: expected a string, found number"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        void *out = decode_as(f, cases[i].type, cases[i].json, TG_ERR_DECODE);
        assert_null(out);
        if (!strstr(tg__buf_cstr(&f->err), cases[i].msg))
            fail_msg("case %zu: '%s' lacks '%s'", i, tg__buf_cstr(&f->err), cases[i].msg);
    }
}

/* The walk's own path must be the one tg__json_path finds from the root. */
static void collect_key(void *ud, const tg__jdoc *d, uint32_t tok, bool variant, const char *path)
{
    tg__buf *b = ud, full;
    tg__buf_init(&full, 0);
    assert_int_equal(tg__json_path(d, tok, &full), 0);
    assert_non_null(path);
    assert_string_equal(path, tg__buf_cstr(&full));
    tg__buf_cleanup(&full);
    if (variant)
        tg__buf_putc(b, '~');
    tg__buf_puts(b, path);
    tg__buf_putc(b, ';');
}

static void public_key(void *ud, const char *path)
{
    tg__buf_puts(ud, path);
    tg__buf_putc(ud, ';');
}

static char *encode_keep(const tg__type *t, const void *v)
{
    tg__buf b;
    tg__buf_init(&b, 0);
    tg__jw w;
    tg__jw_init(&w, &b);
    tg__codec_encode(t, v, &w, TG__ENC_KEEP_UNKNOWN);
    assert_int_equal(w.err, 0);
    return tg__buf_detach(&b, NULL);
}

static void test_unknown_fields_stay_reachable(void **state)
{
    fx *f = *state;
    const char *json =
        "{\"update_id\":5,\"future_kind\":{\"x\":[1,2]},\"message\":{\"message_id\":1,"
        "\"date\":2,\"chat\":{\"id\":3,\"type\":\"private\",\"new_flag\":true},"
        "\"entities\":[{\"type\":\"bold\",\"offset\":0,\"length\":1,\"extra\":null}]}}";
    tg_update *u = decode_as(f, "Update", json, TG_OK);
    assert_int_equal(u->update_id, 5);
    assert_int_equal(tg_update_type_of(u), TG_UPDATE_TYPE_MESSAGE);
    tg_update empty = {0};
    assert_int_equal(tg_update_type_of(&empty), 0);
    assert_int_equal(u->message->chat->id, 3);
    /* the raw span of the chat still holds the unknown key */
    assert_non_null(
        memmem(u->message->chat->raw.json, u->message->chat->raw.len, "\"new_flag\":true", 15));
    tg__buf keys, path;
    tg__buf_init(&keys, 0);
    tg__buf_init(&path, 0);
    size_t n =
        tg__codec_unknown_keys(tg__codec_type_by_name("Update"), &f->d, 0, collect_key, &keys, &path);
    tg__buf_cleanup(&path);
    assert_int_equal(n, 3);
    assert_string_equal(tg__buf_cstr(&keys),
                        "future_kind;message.chat.new_flag;message.entities[0].extra;");
    tg__buf_cleanup(&keys);
    /* the public helper sees the same keys, relative to the object */
    tg__buf_init(&keys, 0);
    assert_int_equal(tg_unknown_keys("Message", u->message->raw, public_key, &keys), 2);
    assert_string_equal(tg__buf_cstr(&keys), "chat.new_flag;entities[0].extra;");
    tg__buf_cleanup(&keys);
    assert_int_equal(tg_unknown_keys("Chat", u->message->chat->raw, NULL, NULL), 1);
    assert_int_equal(tg_unknown_keys("NoSuchType", u->raw, NULL, NULL), 0);
    char *again = encode_keep(tg__codec_type_by_name("Update"), u);
    tgtest_assert_same_json(json, again);
    free(again);
}

static void test_unknown_variant_and_enum(void **state)
{
    fx *f = *state;
    const char *json = "{\"message_id\":1,\"date\":2,\"chat\":{\"id\":3,\"type\":\"guild\"},"
                       "\"forward_origin\":{\"type\":\"satellite\",\"orbit\":7},"
                       "\"entities\":[{\"type\":\"sparkle\",\"offset\":0,\"length\":1}]}";
    tg_message *m = decode_as(f, "Message", json, TG_OK);
    assert_int_equal(m->chat->type.id, TG_ENUM_UNKNOWN);
    assert_string_equal(m->chat->type.str, "guild");
    assert_string_equal(tg_chat_type_to_str(m->chat->type), "guild");
    assert_int_equal(m->forward_origin.kind, TG_MESSAGE_ORIGIN_UNKNOWN);
    assert_null(m->forward_origin.ptr);
    assert_int_equal(m->forward_origin.raw.len, strlen("{\"type\":\"satellite\",\"orbit\":7}"));
    assert_int_equal(m->entities[0].type.id, TG_ENUM_UNKNOWN);
    tg__buf seen, path;
    tg__buf_init(&seen, 0);
    tg__buf_init(&path, 0);
    assert_int_equal(
        tg__codec_unknown_keys(tg__codec_type_by_name("Message"), &f->d, 0, collect_key, &seen,
                               &path),
        0);
    tg__buf_cleanup(&path);
    assert_string_equal(tg__buf_cstr(&seen), "~forward_origin;");
    tg__buf_cleanup(&seen);
    char *again = encode_keep(tg__codec_type_by_name("Message"), m);
    tgtest_assert_same_json(json, again);
    free(again);
}

/* Issue 21 item 7: a counted enum string holding a NUL used to match by strncmp (which stops
 * at the NUL) and then read past the end of the enum's constant (ASan: global-buffer-overflow).
 * Lookups compare lengths before bytes; the decoder refuses such a value with a clear error. */
static void test_enum_with_nul(void **state)
{
    fx *f = *state;
    static const char html_nul[] = "HTML\0\0\0\0\0\0\0\0x";
    assert_int_equal(tg__codec_enum_id(&tg__e_parse_mode, html_nul, sizeof html_nul - 1),
                     TG_ENUM_UNKNOWN);
    assert_int_equal(tg__codec_enum_id(&tg__e_parse_mode, html_nul, 5), TG_ENUM_UNKNOWN);
    assert_true(tg__codec_enum_id(&tg__e_parse_mode, html_nul, 4) >= 2);
    assert_int_equal(tg__codec_enum_id(&tg__e_parse_mode, "", 0), TG_ENUM_UNKNOWN);
    assert_int_equal(tg__codec_enum_id(&tg__e_parse_mode, "\0", 1), TG_ENUM_UNKNOWN);

    decode_as(f, "Chat", "{\"id\":3,\"type\":\"private\\u0000\\u0000\\u0000xyz\"}",
              TG_ERR_DECODE);
    assert_non_null(
        strstr(tg__buf_cstr(&f->err), "type: expected a ChatType string without \\u0000"));
    tg_chat *c = decode_as(f, "Chat", "{\"id\":3,\"type\":\"priv\\u0061te\"}", TG_OK);
    assert_int_equal(c->type.id, TG_CHAT_TYPE_PRIVATE);
}

/* Issue 21 item 12: "a\u0000b" decoded as "a" (the struct's string is NUL-terminated and has
 * no length). A string field holding U+0000 is now a decode error naming the field; a key
 * holding one is not any field's, so it stays an unknown key, kept in raw. */
static void test_string_with_nul(void **state)
{
    fx *f = *state;
    const char *chat = "\"chat\":{\"id\":3,\"type\":\"private\"}";
    char json[256];
    snprintf(json, sizeof json, "{\"message_id\":1,\"date\":2,%s,\"text\":\"a\\u0000b\"}", chat);
    assert_null(decode_as(f, "Message", json, TG_ERR_DECODE));
    const char *msg = tg__buf_cstr(&f->err);
    if (!strstr(msg, "text: expected a string without \\u0000, found one holding it"))
        fail_msg("error: %s", msg);
    snprintf(json, sizeof json, "{\"message_id\":1,\"date\":2,%s,\"caption\":\"\\u0000\"}", chat);
    decode_as(f, "Message", json, TG_ERR_DECODE);
    assert_non_null(strstr(tg__buf_cstr(&f->err), "caption: expected a string without"));
    /* other escapes still decode */
    snprintf(json, sizeof json, "{\"message_id\":1,\"date\":2,%s,\"text\":\"a\\u0001b\"}", chat);
    tg_message *m = decode_as(f, "Message", json, TG_OK);
    assert_memory_equal(m->text, "a\001b", 4);
    /* a key holding U+0000 is unknown and kept */
    snprintf(json, sizeof json, "{\"message_id\":1,\"date\":2,%s,\"te\\u0000xt\":\"x\"}", chat);
    m = decode_as(f, "Message", json, TG_OK);
    assert_null(m->text);
    tg__buf seen, path;
    tg__buf_init(&seen, 0);
    tg__buf_init(&path, 0);
    assert_int_equal(tg__codec_unknown_keys(tg__codec_type_by_name("Message"), &f->d, 0,
                                            collect_key, &seen, &path),
                     1);
    assert_string_equal(tg__buf_cstr(&seen), "[\"te\\u0000xt\"];");
    tg__buf_cleanup(&seen);
    tg__buf_cleanup(&path);
}

static void test_union_dispatch(void **state)
{
    fx *f = *state;
    /* discriminator other than "type", value other than the class name */
    tg_chat_member *cm = decode_as(
        f, "ChatMember",
        "{\"status\":\"kicked\",\"user\":{\"id\":9,\"is_bot\":false,\"first_name\":\"B\"},"
        "\"until_date\":0}",
        TG_OK);
    assert_int_equal(cm->kind, TG_CHAT_MEMBER_BANNED);
    assert_int_equal(cm->banned->user->id, 9);
    cm = decode_as(f, "ChatMember",
                   "{\"status\":\"creator\",\"user\":{\"id\":1,\"is_bot\":false,\"first_name\":"
                   "\"O\"},\"is_anonymous\":true}",
                   TG_OK);
    assert_int_equal(cm->kind, TG_CHAT_MEMBER_OWNER);
    assert_true(cm->owner->is_anonymous);
    /* date == 0 decides MaybeInaccessibleMessage */
    tg_maybe_inaccessible_message *mm =
        decode_as(f, "MaybeInaccessibleMessage",
                  "{\"chat\":{\"id\":1,\"type\":\"group\"},\"message_id\":4,\"date\":0}", TG_OK);
    assert_int_equal(mm->kind, TG_MAYBE_INACCESSIBLE_MESSAGE_INACCESSIBLE_MESSAGE);
    assert_int_equal(mm->inaccessible_message->message_id, 4);
    mm = decode_as(f, "MaybeInaccessibleMessage",
                   "{\"chat\":{\"id\":1,\"type\":\"group\"},\"message_id\":4,\"date\":17}", TG_OK);
    assert_int_equal(mm->kind, TG_MAYBE_INACCESSIBLE_MESSAGE_MESSAGE);
    assert_int_equal(mm->message->date, 17);
    /* presence: InputMessageContent */
    tg_input_message_content *imc =
        decode_as(f, "InputMessageContent",
                  "{\"latitude\":1.5,\"longitude\":2.5,\"title\":\"T\",\"address\":\"A\"}", TG_OK);
    assert_int_equal(imc->kind, TG_INPUT_MESSAGE_CONTENT_VENUE_MESSAGE_CONTENT);
    imc = decode_as(f, "InputMessageContent", "{\"latitude\":1.5,\"longitude\":2.5}", TG_OK);
    assert_int_equal(imc->kind, TG_INPUT_MESSAGE_CONTENT_LOCATION_MESSAGE_CONTENT);
    imc = decode_as(f, "InputMessageContent", "{\"nothing\":1}", TG_OK);
    assert_int_equal(imc->kind, TG_INPUT_MESSAGE_CONTENT_UNKNOWN);
    /* repeated values: cached vs plain inline results */
    tg_inline_query_result *r = decode_as(
        f, "InlineQueryResult", "{\"type\":\"audio\",\"id\":\"1\",\"audio_file_id\":\"F\"}", TG_OK);
    assert_int_equal(r->kind, TG_INLINE_QUERY_RESULT_CACHED_AUDIO);
    r = decode_as(f, "InlineQueryResult",
                  "{\"type\":\"audio\",\"id\":\"1\",\"audio_url\":\"u\",\"title\":\"t\"}", TG_OK);
    assert_int_equal(r->kind, TG_INLINE_QUERY_RESULT_AUDIO);
    /* emoji sets compare bytes exactly: U+2764 alone is known, with U+FE0F it is not */
    tg_reaction_type *re =
        decode_as(f, "ReactionType", "{\"type\":\"emoji\",\"emoji\":\"\u2764\"}", TG_OK);
    assert_int_equal(re->kind, TG_REACTION_TYPE_EMOJI);
    assert_int_equal(re->emoji->emoji.id, TG_REACTION_EMOJI_U2764);
    re = decode_as(f, "ReactionType", "{\"type\":\"emoji\",\"emoji\":\"\u2764\ufe0f\"}", TG_OK);
    assert_int_equal(re->emoji->emoji.id, TG_ENUM_UNKNOWN);
    assert_string_equal(re->emoji->emoji.str, "\xe2\x9d\xa4\xef\xb8\x8f");
    /* RichText: string, array or object */
    tg_rich_text *rt = decode_as(f, "RichText", "\"hello\"", TG_OK);
    assert_int_equal(rt->kind, TG_RICH_TEXT_PLAIN);
    assert_string_equal(rt->text, "hello");
    rt = decode_as(f, "RichText", "[\"a\",{\"type\":\"bold\",\"text\":\"b\"}]", TG_OK);
    assert_int_equal(rt->kind, TG_RICH_TEXT_LIST);
    assert_int_equal(rt->items_count, 2);
    assert_int_equal(rt->items[1].kind, TG_RICH_TEXT_BOLD);
    assert_int_equal(rt->items[1].bold->text.kind, TG_RICH_TEXT_PLAIN);
    assert_string_equal(rt->items[1].bold->text.text, "b");
}

static void test_scalars_and_nulls(void **state)
{
    fx *f = *state;
    /* escaped keys, escaped strings, null as absent, big ids, doubles */
    tg_chat_full_info *c =
        decode_as(f, "ChatFullInfo",
                  "{\"\\u0069d\":-1001234567890123,\"type\":\"channel\",\"title\":\"a\\u00e9\\n\","
                  "\"accent_color_id\":3,\"max_reaction_count\":11,\"linked_chat_id\":null,"
                  "\"accepted_gift_types\":{\"unlimited_gifts\":true}}",
                  TG_OK);
    assert_int_equal(c->id, -1001234567890123);
    assert_string_equal(c->title, "a\xc3\xa9\n");
    assert_int_equal(c->type.id, TG_CHAT_TYPE_CHANNEL);
    assert_false(c->linked_chat_id.has);
    tg_location *l =
        decode_as(f, "Location", "{\"latitude\":-33.8688,\"longitude\":151.2093e0}", TG_OK);
    assert_true(l->latitude == -33.8688);
    assert_true(l->longitude == 151.2093);
    assert_false(l->horizontal_accuracy.has);
}

/* Fail the Nth allocation for N = 1, 2, ...: every failure is a clean error, never a crash
 * or a leak (ASan), until the decode needs no more allocations than N - 1. */
static void test_allocation_failures(void **state)
{
    (void)state;
    char *json = fixture("large_update.json");
    const tg__type *t = tg__codec_type_by_name("Update");
    bool done = false;
    for (uint64_t n = 1; n <= 64 && !done; n++) {
        tg__arena a;
        tg__jdoc d;
        tg__buf err;
        tg__arena_init(&a, 512, 0); /* small chunks: several allocations per decode */
        tg__jdoc_init(&d, NULL);
        tg__buf_init(&err, 0);
        void *out = NULL;
        tg__alloc_fail_at(n);
        tg_status st = tg__codec_decode_json(t, json, strlen(json), &a, &d, &out, NULL);
        bool injected = tg__alloc_failed() != 0;
        tg__alloc_fail_at(0);
        if (injected) {
            /* out of memory is its own status, wherever it strikes (issue 17: a failed
             * token array used to come out as a decode error) */
            assert_int_equal(st, TG_ERR_NOMEM);
            assert_null(out);
        } else {
            assert_int_equal(st, TG_OK);
            assert_int_equal(((tg_update *)out)->message->photo_count, 3);
            done = true;
        }
        tg__buf_cleanup(&err);
        tg__jdoc_cleanup(&d);
        tg__arena_cleanup(&a);
    }
    assert_true(done);
    free(json);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_small_update, setup, teardown),
        cmocka_unit_test_setup_teardown(test_large_update, setup, teardown),
        cmocka_unit_test_setup_teardown(test_responses_and_dispatch_fixture, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_paths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_fields_stay_reachable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_variant_and_enum, setup, teardown),
        cmocka_unit_test_setup_teardown(test_enum_with_nul, setup, teardown),
        cmocka_unit_test_setup_teardown(test_string_with_nul, setup, teardown),
        cmocka_unit_test_setup_teardown(test_union_dispatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scalars_and_nulls, setup, teardown),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
