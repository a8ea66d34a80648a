/*
 * The method side of the generated API without a network: the method table, params
 * encoding (exact JSON), required-parameter checks, the upload walk and its agreement with
 * the attach:// names the encoder writes, result decoding for every result shape, and a
 * params round trip (encode -> decode as the params type -> encode) for every method.
 */
#include "tgtest.h"

#include "bot/api/api.gen.h"
#include "core/arena.h"
#include "core/buf.h"

static char *encode(const tg__method *m, const void *p)
{
    tg__buf b;
    tg__buf_init(&b, 0);
    tg__jw w;
    tg__jw_init(&w, &b);
    tg__codec_encode_params(m, p, NULL, &w, NULL, 0);
    assert_int_equal(w.err, 0);
    return tg__buf_detach(&b, NULL);
}

static void test_method_table(void **state)
{
    (void)state;
    if (strcmp(TG_BOT_API_VERSION, "10.2") == 0)
        assert_int_equal(tg__method_count, 185);
    assert_ptr_equal(tg__codec_method_by_name("sendMessage"), &tg__m_send_message);
    assert_null(tg__codec_method_by_name("sendTelepathy"));
    assert_int_equal(tg__m_send_message.result_kind, TG__R_VALUE);
    assert_int_equal(tg__m_get_me.result_kind, TG__R_VALUE);
    assert_null(tg__m_get_me.params_desc);
    assert_int_equal(tg__m_delete_webhook.result_kind, TG__R_TRUE);
    assert_int_equal(tg__m_get_updates.result_kind, TG__R_ARRAY);
    assert_int_equal(tg__m_edit_message_text.result_kind, TG__R_OR_TRUE);
    assert_true(tg__m_send_photo.has_input_files);
    assert_true(tg__m_send_media_group.has_input_files);
    assert_false(tg__m_send_message.has_input_files);
    size_t files = 0;
    for (size_t i = 0; i < tg__method_count; i++)
        files += tg__methods[i]->has_input_files;
    assert_int_equal(files, 32); /* count.py: methods_may_need_multipart */
}

static void test_encode_send_message(void **state)
{
    (void)state;
    tg_inline_keyboard_button row0[] = {{.text = "ok", .callback_data = "ok:1"},
                                        {.text = "no", .callback_data = "no:1"}};
    tg_inline_keyboard_button_list rows[] = {{row0, 2}};
    tg_inline_keyboard_markup kb = {.inline_keyboard = rows, .inline_keyboard_count = 1};
    tg_send_message_params p = {
        .chat_id = tg_chat_id_int(-100123),
        .text = "hi \"there\"\n",
        .parse_mode = TG_ENUM(TG_PARSE_MODE_MARKDOWN_V2),
        .disable_notification = TG_SOME(false),
        .reply_markup = TG_UNION_OF(TG_REPLY_MARKUP_INLINE_KEYBOARD_MARKUP, &kb),
    };
    char *s = encode(&tg__m_send_message, &p);
    assert_string_equal(s, "{\"chat_id\":-100123,\"text\":\"hi \\\"there\\\"\\n\","
                           "\"parse_mode\":\"MarkdownV2\",\"disable_notification\":false,"
                           "\"reply_markup\":{\"inline_keyboard\":[[{\"text\":\"ok\","
                           "\"callback_data\":\"ok:1\"},{\"text\":\"no\",\"callback_data\":"
                           "\"no:1\"}]]}}");
    free(s);
    /* a username chat id, an unknown parse mode by string, a ForceReply (required True) */
    tg_force_reply fr = {0};
    p = (tg_send_message_params){.chat_id = tg_chat_id_username("@chan"),
                                 .text = "x",
                                 .parse_mode = TG_ENUM_STR("Markdown3"),
                                 .reply_markup = tg_reply_markup_from_force_reply(&fr)};
    s = encode(&tg__m_send_message, &p);
    assert_string_equal(s, "{\"chat_id\":\"@chan\",\"text\":\"x\",\"parse_mode\":\"Markdown3\","
                           "\"reply_markup\":{\"force_reply\":true}}");
    free(s);
    s = encode(&tg__m_get_me, NULL);
    assert_string_equal(s, "{}");
    free(s);
}

static void test_required_params(void **state)
{
    (void)state;
    tg_send_message_params p = {.text = "x"};
    assert_string_equal(tg__codec_missing_param(&tg__m_send_message, &p), "chat_id");
    p.chat_id = tg_chat_id_int(1);
    assert_null(tg__codec_missing_param(&tg__m_send_message, &p));
    p.text = NULL;
    assert_string_equal(tg__codec_missing_param(&tg__m_send_message, &p), "text");
    assert_string_equal(tg__codec_missing_param(&tg__m_send_message, NULL), "chat_id");
    assert_null(tg__codec_missing_param(&tg__m_get_me, NULL));
    tg_send_photo_params ph = {.chat_id = tg_chat_id_int(1)};
    assert_string_equal(tg__codec_missing_param(&tg__m_send_photo, &ph), "photo");
    /* a required false boolean is sent, not dropped */
    tg_answer_shipping_query_params a = {.shipping_query_id = "q", .ok = false};
    assert_null(tg__codec_missing_param(&tg__m_answer_shipping_query, &a));
    char *s = encode(&tg__m_answer_shipping_query, &a);
    assert_string_equal(s, "{\"shipping_query_id\":\"q\",\"ok\":false}");
    free(s);
}

typedef struct seen {
    char parts[8][32];
    const tg_input_file *files[8];
    int n;
} seen;

static int collect(void *ud, const char *part, const tg_input_file *f)
{
    seen *s = ud;
    if (s->n >= 8)
        return 1;
    snprintf(s->parts[s->n], sizeof s->parts[0], "%s", part);
    s->files[s->n++] = f;
    return 0;
}

static void test_uploads(void **state)
{
    (void)state;
    static const char bytes[] = "\x89PNG";
    tg_input_media_photo p1 = {.media = tg_input_file_memory(bytes, 4, "a.png")};
    tg_input_media_photo p2 = {.media = tg_input_file_id("AgADexisting")};
    tg_input_media_video v = {.media = tg_input_file_path("/tmp/v.mp4"),
                              .thumbnail = tg_input_file_memory(bytes, 4, "t.jpg")};
    tg_input_media_group_item items[] = {tg_input_media_group_item_from_photo(&p1),
                                         tg_input_media_group_item_from_photo(&p2),
                                         tg_input_media_group_item_from_video(&v)};
    tg_send_media_group_params g = {.chat_id = tg_chat_id_int(5), .media = items, .media_count = 3};
    char *s = encode(&tg__m_send_media_group, &g);
    assert_string_equal(s, "{\"chat_id\":5,\"media\":[{\"type\":\"photo\",\"media\":"
                           "\"attach://tgfile0\"},{\"type\":\"photo\",\"media\":\"AgADexisting\"},"
                           "{\"type\":\"video\",\"media\":\"attach://tgfile1\",\"thumbnail\":"
                           "\"attach://tgfile2\"}]}");
    free(s);
    seen sn = {0};
    assert_int_equal(tg__codec_foreach_file(&tg__m_send_media_group, &g, collect, &sn), 0);
    assert_int_equal(sn.n, 3);
    assert_string_equal(sn.parts[0], "tgfile0");
    assert_ptr_equal(sn.files[0], &p1.media);
    assert_string_equal(sn.parts[1], "tgfile1");
    assert_ptr_equal(sn.files[1], &v.media);
    assert_string_equal(sn.parts[2], "tgfile2");
    assert_ptr_equal(sn.files[2], &v.thumbnail);

    /* a direct upload is a part named after the parameter and left out of the JSON */
    tg_send_photo_params ph = {
        .chat_id = tg_chat_id_int(1), .photo = tg_input_file_path("/tmp/p.jpg"), .caption = "c"};
    s = encode(&tg__m_send_photo, &ph);
    assert_string_equal(s, "{\"chat_id\":1,\"caption\":\"c\"}");
    free(s);
    memset(&sn, 0, sizeof sn);
    assert_int_equal(tg__codec_foreach_file(&tg__m_send_photo, &ph, collect, &sn), 0);
    assert_int_equal(sn.n, 1);
    assert_string_equal(sn.parts[0], "photo");
    ph.photo = tg_input_file_url("https://x.test/p.jpg");
    memset(&sn, 0, sizeof sn);
    assert_int_equal(tg__codec_foreach_file(&tg__m_send_photo, &ph, collect, &sn), 0);
    assert_int_equal(sn.n, 0);
    s = encode(&tg__m_send_photo, &ph);
    assert_string_equal(s, "{\"chat_id\":1,\"photo\":\"https://x.test/p.jpg\",\"caption\":\"c\"}");
    free(s);
}

static tg_status result(const tg__method *m, const char *json, tg__arena *a, void *out)
{
    tg__jdoc d;
    tg__jerr err;
    tg__jdoc_init(&d, NULL);
    char *copy = tg__arena_strdup(a, json);
    assert_int_equal(tg__json_parse(&d, copy, strlen(copy), &err), 0);
    tg_status st = tg__codec_decode_result(m, &d, 0, a, out, &err);
    tg__jdoc_cleanup(&d);
    return st;
}

static void test_decode_results(void **state)
{
    (void)state;
    tg__arena a;
    tg__arena_init(&a, 0, 0);
    assert_int_equal(result(&tg__m_delete_webhook, "true", &a, NULL), TG_OK);
    assert_int_equal(result(&tg__m_delete_webhook, "false", &a, NULL), TG_ERR_DECODE);
    tg_message *m = (tg_message *)1;
    assert_int_equal(result(&tg__m_edit_message_text, "true", &a, &m), TG_OK);
    assert_null(m);
    assert_int_equal(
        result(&tg__m_edit_message_text,
               "{\"message_id\":3,\"date\":1,\"chat\":{\"id\":1,\"type\":\"private\"}}", &a, &m),
        TG_OK);
    assert_int_equal(m->message_id, 3);
    tg__array_out arr = {0};
    assert_int_equal(result(&tg__m_get_updates, "[{\"update_id\":1},{\"update_id\":2}]", &a, &arr),
                     TG_OK);
    assert_int_equal(arr.count, 2);
    assert_int_equal(((tg_update *)arr.items)[1].update_id, 2);
    int64_t n = 0;
    assert_int_equal(result(&tg__m_get_chat_member_count, "42", &a, &n), TG_OK);
    assert_int_equal(n, 42);
    const char *link = NULL;
    assert_int_equal(result(&tg__m_export_chat_invite_link, "\"https://t.me/+x\"", &a, &link),
                     TG_OK);
    assert_string_equal(link, "https://t.me/+x");
    tg_chat_member cm;
    assert_int_equal(result(&tg__m_get_chat_member,
                            "{\"status\":\"left\",\"user\":{\"id\":1,\"is_bot\":false,"
                            "\"first_name\":\"a\"}}",
                            &a, &cm),
                     TG_OK);
    assert_int_equal(cm.kind, TG_CHAT_MEMBER_LEFT);
    assert_int_equal(result(&tg__m_get_me, "{\"id\":\"x\"}", &a, NULL), TG_ERR_DECODE);
    assert_int_equal(result(&tg__m_get_me, "null", &a, NULL), TG_ERR_DECODE);
    tg__arena_cleanup(&a);
}

/* Every method's params: fill the scalars and strings, encode, decode as the params type,
 * encode again: identical bytes. */
static void test_params_round_trip(void **state)
{
    (void)state;
    tg__arena a;
    tg__arena_init(&a, 0, 0);
    tg__jdoc d;
    tg__jdoc_init(&d, NULL);
    for (size_t i = 0; i < tg__method_count; i++) {
        const tg__type *t = tg__methods[i]->params_desc;
        if (!t)
            continue;
        unsigned char *p = tg__arena_zalloc(&a, t->size);
        for (uint16_t j = 0; j < t->nfields; j++) {
            const tg__field *f = &t->fields[j];
            if (f->flags & (TG__F_ARR | TG__F_ARR2))
                continue;
            unsigned char *v = p + f->off;
            if (f->kind == TG__K_STR)
                *(const char **)(void *)v = f->name;
            else if (f->kind == TG__K_I64 && (f->flags & TG__F_OPT))
                *(tg_opt_i64 *)(void *)v = (tg_opt_i64){true, (int64_t)j * -7};
            else if (f->kind == TG__K_BOOL && (f->flags & TG__F_OPT))
                *(tg_opt_bool *)(void *)v = (tg_opt_bool){true, j % 2};
            else if (f->kind == TG__K_CHATID)
                *(tg_chat_id *)(void *)v = tg_chat_id_int(-(int64_t)j);
            else if (f->kind == TG__K_FILE)
                *(tg_input_file *)(void *)v = tg_input_file_id("fileid");
        }
        char *s1 = encode(tg__methods[i], p);
        void *back;
        tg__buf err;
        tg__buf_init(&err, 0);
        if (tg__codec_decode_json(t, s1, strlen(s1), &a, &d, &back, &err) != TG_OK)
            fail_msg("%s: %s", t->name, tg__buf_cstr(&err));
        char *s2 = encode(tg__methods[i], back);
        if (strcmp(s1, s2) != 0)
            fail_msg("%s: %s != %s", t->name, s1, s2);
        free(s1);
        free(s2);
        tg__buf_cleanup(&err);
    }
    tg__jdoc_cleanup(&d);
    tg__arena_cleanup(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_method_table),    cmocka_unit_test(test_encode_send_message),
        cmocka_unit_test(test_required_params), cmocka_unit_test(test_uploads),
        cmocka_unit_test(test_decode_results),  cmocka_unit_test(test_params_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
