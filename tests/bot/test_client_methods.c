/*
 * test_client_methods: the generated method wrappers through tg__call against the fake
 * server. Hand-written cases check the request and the decoded result of getMe,
 * sendMessage, sendDocument (multipart from a path) and sendMediaGroup (attach://); a
 * data-driven case walks the whole generated method table: for every method, one success
 * (a minimal valid result synthesised from the result descriptor) and one API error,
 * asserting the method path, that the body is a JSON object carrying every required
 * parameter, and the decoded status.
 *
 * TGKIT_TEST_TRANSPORT=async (ctest bot/test_client_methods@async) runs the walk again with
 * every call submitted through the asynchronous client (tgbot/async.h) on its own loop: the
 * same cases, the same assertions, the error details read from the completed call's ctx.
 */
#include "tgtest.h"

#include <jansson.h>
#include <stdalign.h>
#include <unistd.h>

#include "bot/codec/codec.h"
#include "bot/codec/method.h"
#include "bot/client/async_call.h"
#include "bot_server.h"
#include "core/alloc.h"
#include "core/buf.h"
#include "tgbot/api.h"
#include "tgbot/tgbot.h"

#define TOKEN "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_"

static int setup(void **state)
{
    bot_fx *f = bot_fx_new(TOKEN, &(tg_bot_options){.log_level = TG_LOG_ERROR});
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    bot_fx_free(*state);
    return 0;
}

static void test_get_me(void **state)
{
    bot_fx *f = *state;
    size_t n;
    char *body = tgtest_read_file(tgtest_data_path("fixtures/botapi/getme_response.json"), &n);
    assert_non_null(body);
    bot_server_set_reply(f->srv, "getMe", 200, body);
    free(body);
    tg_user *me = NULL;
    assert_int_equal(tg_get_me(f->ctx, &me), TG_OK);
    assert_non_null(me);
    assert_int_equal(me->id, 7);
    assert_string_equal(me->first_name, "Bot");
    assert_string_equal(me->username, "benchbot");
    assert_string_equal(bot_server_last(f->srv)->path, "/bot<TOKEN>/getMe");
    /* decoded objects keep their raw JSON, alive until reset even after more calls */
    assert_true(me->raw.len > 0 && me->raw.json[0] == '{');
    assert_int_equal(tg_get_me(f->ctx, NULL), TG_OK);
    assert_int_equal(me->raw.json[me->raw.len - 1], '}');
    tg_ctx_reset(f->ctx);
}

static void test_send_message(void **state)
{
    bot_fx *f = *state;
    size_t n;
    char *body =
        tgtest_read_file(tgtest_data_path("fixtures/botapi/sendmessage_response.json"), &n);
    bot_server_set_reply(f->srv, "sendMessage", 200, body);
    free(body);
    tg_message *m = NULL;
    tg_status st = tg_send_message(f->ctx,
                                   &(tg_send_message_params){.chat_id = tg_chat_id_int(42),
                                                             .text = "hi \"there\"",
                                                             .disable_notification = TG_SOME(true)},
                                   &m);
    assert_int_equal(st, TG_OK);
    assert_int_equal(m->message_id, 1);
    assert_int_equal(m->chat->id, 42);
    assert_string_equal(m->text, "hello");
    const bot_request *r = bot_server_last(f->srv);
    assert_string_equal(r->path, "/bot<TOKEN>/sendMessage");
    assert_string_equal(r->content_type, "application/json");
    assert_string_equal(
        r->body, "{\"chat_id\":42,\"text\":\"hi \\\"there\\\"\",\"disable_notification\":true}");

    /* a required parameter missing: refused before sending */
    size_t before = bot_server_nrequests(f->srv);
    st = tg_send_message(f->ctx, &(tg_send_message_params){.chat_id = tg_chat_id_int(42)}, &m);
    assert_int_equal(st, TG_ERR_INVALID);
    assert_string_equal(tg_ctx_errmsg(f->ctx),
                        "sendMessage: params: required parameter text is missing");
    assert_int_equal(bot_server_nrequests(f->srv), before);

    /* a chat id of no valid kind, or a username one without a username: refused naming the
     * field, never sent as "chat_id": null (issue 17) */
    st = tg_send_message(
        f->ctx, &(tg_send_message_params){.chat_id = tg_chat_id_username(NULL), .text = "x"}, &m);
    assert_int_equal(st, TG_ERR_INVALID);
    assert_string_equal(tg_ctx_errmsg(f->ctx),
                        "sendMessage: params: chat_id: a username chat id without a username "
                        "(tg_chat_id_username(NULL) or \"\")");
    tg_chat_id bad = {.kind = (tg_chat_id_kind)7, .id = 42};
    st = tg_send_message(f->ctx, &(tg_send_message_params){.chat_id = bad, .text = "x"}, &m);
    assert_int_equal(st, TG_ERR_INVALID);
    assert_non_null(strstr(tg_ctx_errmsg(f->ctx), "params: chat_id: not a valid chat id kind"));
    /* nested: the path says where */
    tg_bot_command cmd = {.command = "start", .description = "Start"};
    tg_bot_command_scope_chat scope = {.chat_id = tg_chat_id_username("")};
    st = tg_set_my_commands(
        f->ctx, &(tg_set_my_commands_params){.commands = &cmd,
                                             .commands_count = 1,
                                             .scope = tg_bot_command_scope_from_chat(&scope)});
    assert_int_equal(st, TG_ERR_INVALID);
    assert_non_null(strstr(tg_ctx_errmsg(f->ctx), "params: scope.chat_id: a username chat id"));
    assert_int_equal(bot_server_nrequests(f->srv), before);

    /* a result that does not match the schema: TG_ERR_DECODE with the JSON path */
    bot_server_push_raw(f->srv, "sendMessage", 200, NULL,
                        "{\"ok\":true,\"result\":{\"message_id\":\"x\",\"date\":1,"
                        "\"chat\":{\"id\":1,\"type\":\"private\"}}}");
    st = tg_send_message(f->ctx,
                         &(tg_send_message_params){.chat_id = tg_chat_id_int(42), .text = "x"}, &m);
    assert_int_equal(st, TG_ERR_DECODE);
    assert_string_equal(tg_ctx_error(f->ctx)->json_path, "result.message_id");
    assert_non_null(strstr(tg_ctx_errmsg(f->ctx), "sendMessage: result.message_id: "));
}

static char *write_temp(const char *content, size_t len)
{
    char *path = strdup("/tmp/tgkit_method_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, content, len), (ssize_t)len);
    close(fd);
    return path;
}

static void test_send_document_multipart(void **state)
{
    bot_fx *f = *state;
    bot_server_set_reply(f->srv, "sendDocument", 200,
                         "{\"ok\":true,\"result\":{\"message_id\":9,\"date\":1,"
                         "\"chat\":{\"id\":42,\"type\":\"private\"}}}");
    char *path = write_temp("hello file\n", 11);
    tg_send_document_params p = {.chat_id = tg_chat_id_int(42),
                                 .document = tg_input_file_path(path),
                                 .caption = "a \"caption\""};
    p.document.mime_type = "text/plain";
    tg_message *m = NULL;
    assert_int_equal(tg_send_document(f->ctx, &p, &m), TG_OK);
    assert_int_equal(m->message_id, 9);
    const bot_request *r = bot_server_last(f->srv);
    assert_true(strncmp(r->content_type, "multipart/form-data", 19) == 0);
    const bot_part *chat = bot_request_part(r, "chat_id");
    const bot_part *cap = bot_request_part(r, "caption");
    const bot_part *doc = bot_request_part(r, "document");
    assert_non_null(chat);
    assert_non_null(cap);
    assert_non_null(doc);
    assert_string_equal(chat->data, "42");
    assert_string_equal(cap->data, "a \"caption\""); /* decoded text, not JSON */
    assert_string_equal(doc->data, "hello file\n");
    assert_string_equal(doc->filename, strrchr(path, '/') + 1);
    assert_string_equal(doc->content_type, "text/plain");

    /* a file_id goes as JSON, no multipart */
    p.document = tg_input_file_id("BQACAgIAAxkBAAI");
    assert_int_equal(tg_send_document(f->ctx, &p, &m), TG_OK);
    r = bot_server_last(f->srv);
    assert_string_equal(r->content_type, "application/json");
    assert_non_null(strstr(r->body, "\"document\":\"BQACAgIAAxkBAAI\""));

    /* a path that cannot be opened: TG_ERR_IO before sending */
    size_t before = bot_server_nrequests(f->srv);
    p.document = tg_input_file_path("/nonexistent/tgkit/file");
    assert_int_equal(tg_send_document(f->ctx, &p, &m), TG_ERR_IO);
    assert_int_equal(bot_server_nrequests(f->srv), before);
    unlink(path);
    free(path);
}

static void test_send_media_group_attach(void **state)
{
    bot_fx *f = *state;
    bot_server_set_reply(f->srv, "sendMediaGroup", 200,
                         "{\"ok\":true,\"result\":[{\"message_id\":1,\"date\":1,"
                         "\"chat\":{\"id\":42,\"type\":\"private\"}},{\"message_id\":2,"
                         "\"date\":1,\"chat\":{\"id\":42,\"type\":\"private\"}}]}");
    tg_input_media_document d1 = {.media = tg_input_file_memory("one", 3, "one.txt"),
                                  .thumbnail = tg_input_file_memory("TH", 2, "t.jpg")};
    tg_input_media_document d2 = {.media = tg_input_file_id("FILEID2")};
    tg_input_media_group_item items[2] = {
        {.kind = TG_INPUT_MEDIA_GROUP_ITEM_DOCUMENT, .document = &d1},
        {.kind = TG_INPUT_MEDIA_GROUP_ITEM_DOCUMENT, .document = &d2},
    };
    tg_send_media_group_params p = {
        .chat_id = tg_chat_id_int(42), .media = items, .media_count = 2};
    tg_message *msgs = NULL;
    size_t count = 0;
    assert_int_equal(tg_send_media_group(f->ctx, &p, &msgs, &count), TG_OK);
    assert_int_equal(count, 2);
    assert_int_equal(msgs[1].message_id, 2);
    const bot_request *r = bot_server_last(f->srv);
    const bot_part *media = bot_request_part(r, "media");
    assert_non_null(media);
    json_t *arr = json_loads(media->data, 0, NULL);
    assert_true(json_is_array(arr));
    const char *m0 = json_string_value(json_object_get(json_array_get(arr, 0), "media"));
    const char *t0 = json_string_value(json_object_get(json_array_get(arr, 0), "thumbnail"));
    const char *m1 = json_string_value(json_object_get(json_array_get(arr, 1), "media"));
    assert_non_null(m0);
    assert_non_null(t0);
    assert_true(strncmp(m0, "attach://", 9) == 0);
    assert_true(strncmp(t0, "attach://", 9) == 0);
    assert_string_equal(m1, "FILEID2");
    const bot_part *p0 = bot_request_part(r, m0 + 9);
    const bot_part *pt = bot_request_part(r, t0 + 9);
    assert_non_null(p0);
    assert_non_null(pt);
    assert_string_equal(p0->data, "one");
    assert_string_equal(p0->filename, "one.txt");
    assert_string_equal(pt->data, "TH");
    json_decref(arr);
}

/* Fail our Nth allocation along a typed multipart call: always a clean NOMEM, never a crash,
 * a leak (ASan) or a wrong request. */
static void test_allocation_failures(void **state)
{
    bot_fx *f = *state;
    bot_server_set_reply(f->srv, "sendDocument", 200,
                         "{\"ok\":true,\"result\":{\"message_id\":9,\"date\":1,"
                         "\"chat\":{\"id\":42,\"type\":\"private\"}}}");
    int clean_runs = 0, failures = 0;
    for (uint64_t n = 1; n <= 80 && clean_runs < 3; n++) {
        tg_ctx *ctx = tg_ctx_new(f->bot);
        assert_non_null(ctx);
        tg_send_document_params p = {.chat_id = tg_chat_id_int(42),
                                     .document = tg_input_file_memory("abc", 3, "a.txt"),
                                     .caption = "c"};
        tg_message *m = NULL;
        tg__alloc_fail_at(n);
        tg_status st = tg_send_document(ctx, &p, &m);
        bool injected = tg__alloc_failed();
        tg__alloc_fail_at(0);
        if (st == TG_OK) {
            assert_int_equal(m->message_id, 9);
            assert_string_equal(bot_request_part(bot_server_last(f->srv), "document")->data, "abc");
        } else {
            assert_true(injected);
            assert_int_equal(st, TG_ERR_NOMEM);
        }
        clean_runs = injected ? 0 : clean_runs + 1;
        failures += injected;
        tg_ctx_free(ctx);
    }
    assert_int_equal(clean_runs, 3);
    assert_true(failures > 5);
}

/* ---- data-driven walk over every generated method ---- */

static void gen_value(tg__buf *b, const tg__field *f, int depth);

static void gen_object(tg__buf *b, const tg__type *t, int depth)
{
    if (t->is_union) {
        gen_object(b, t->members[0], depth);
        return;
    }
    tg__buf_putc(b, '{');
    bool first = true;
    for (uint16_t i = 0; i < t->nfields; i++) {
        const tg__field *f = &t->fields[i];
        if (f->flags & TG__F_OPT)
            continue;
        tg__buf_printf(b, "%s\"%s\":", first ? "" : ",", f->name);
        gen_value(b, f, depth + 1);
        first = false;
    }
    tg__buf_putc(b, '}');
}

static void gen_value(tg__buf *b, const tg__field *f, int depth)
{
    assert_true(depth < 16);
    if (f->flags & (TG__F_ARR | TG__F_ARR2)) {
        tg__buf_puts(b, "[]");
        return;
    }
    switch (f->kind) {
    case TG__K_BOOL:
        tg__buf_puts(b, "false");
        break;
    case TG__K_TRUE:
        tg__buf_puts(b, "true");
        break;
    case TG__K_I64:
    case TG__K_CHATID:
        tg__buf_puts(b, "1");
        break;
    case TG__K_F64:
        tg__buf_puts(b, "1.5");
        break;
    case TG__K_CONST:
        tg__buf_printf(b, "\"%s\"", (const char *)f->sub);
        break;
    case TG__K_OBJ:
    case TG__K_UNION:
        gen_object(b, f->sub, depth);
        break;
    default: /* strings, enums, files */
        tg__buf_puts(b, "\"s\"");
        break;
    }
}

/* The canned answer; *expect gets the result's own JSON (for the decode check). */
static void result_json(tg__buf *b, const tg__method *m, size_t *res_off)
{
    tg__buf_reset(b);
    tg__buf_puts(b, "{\"ok\":true,\"result\":");
    *res_off = b->len;
    const tg__field *f = m->result_desc;
    if (m->result_kind == TG__R_TRUE) {
        tg__buf_puts(b, "true");
    } else if (m->result_kind == TG__R_ARRAY && (f->flags & TG__F_ARR2)) {
        tg__buf_puts(b, "[]");
    } else if (m->result_kind == TG__R_ARRAY) {
        tg__field one = *f;
        one.flags &= (uint8_t)~TG__F_ARR;
        tg__buf_putc(b, '[');
        gen_value(b, &one, 0);
        tg__buf_putc(b, ']');
    } else {
        gen_value(b, f, 0);
    }
    tg__buf_putc(b, '}');
}

/* Re-encode what tg__call decoded and compare it, as JSON values, with what was served. */
static void check_result(const tg__method *m, const void *out, const char *served, size_t len)
{
    const tg__field *f = m->result_desc;
    tg__buf enc;
    tg__jw w;
    tg__buf_init(&enc, 1 << 20);
    tg__jw_init(&w, &enc);
    if (m->result_kind == TG__R_TRUE) {
        tg__jw_bool(&w, true);
    } else if (m->result_kind == TG__R_ARRAY) {
        const tg__array_out *a = out;
        assert_int_equal(a->count, (f->flags & TG__F_ARR2) ? 0 : 1);
        tg__buf_puts(&enc, "[]"); /* element checked by the count; layout varies by kind */
        served = "[]", len = 2;
    } else if (f->kind == TG__K_OBJ) {
        const void *obj = *(const void *const *)out;
        assert_non_null(obj);
        tg__codec_encode(f->sub, obj, &w, 0);
    } else if (f->kind == TG__K_UNION) {
        tg__codec_encode(f->sub, out, &w, 0);
    } else if (f->kind == TG__K_I64) {
        tg__jw_i64(&w, *(const int64_t *)out);
    } else if (f->kind == TG__K_STR) {
        tg__jw_str(&w, *(const char *const *)out);
    } else if (f->kind == TG__K_BOOL) {
        tg__jw_bool(&w, *(const bool *)out);
    } else {
        tg__jw_raw(&w, served, len);
    }
    assert_int_equal(w.err, 0);
    json_t *a = json_loadb(served, len, JSON_DECODE_ANY, NULL);
    json_t *b = json_loadb(enc.data, enc.len, JSON_DECODE_ANY, NULL);
    if (!a || !b || !json_equal(a, b))
        fail_msg("%s: served %.*s, decoded and re-encoded %s", m->name, (int)len, served,
                 tg__buf_cstr(&enc));
    json_decref(a);
    json_decref(b);
    tg__buf_cleanup(&enc);
}

static const tg_raw empty_raw = {"{}", 2};
static alignas(max_align_t) unsigned char scratch[4096];

/* Fill every required parameter with a present value. */
static void fill_required(const tg__type *t, unsigned char *p)
{
    for (uint16_t i = 0; t && i < t->nfields; i++) {
        const tg__field *f = &t->fields[i];
        unsigned char *v = p + f->off;
        if (f->flags & TG__F_OPT)
            continue;
        if (f->flags & (TG__F_ARR | TG__F_ARR2)) {
            *(const void **)(void *)v = scratch;
            continue;
        }
        switch (f->kind) {
        case TG__K_BOOL:
        case TG__K_TRUE:
            *(bool *)v = true;
            break;
        case TG__K_I64:
            *(int64_t *)(void *)v = 5;
            break;
        case TG__K_F64:
            *(double *)(void *)v = 2.5;
            break;
        case TG__K_STR:
            *(const char **)(void *)v = "v";
            break;
        case TG__K_ENUM:
            *(tg_strenum *)(void *)v = (tg_strenum){TG_ENUM_UNKNOWN, "e"};
            break;
        case TG__K_OBJ:
            *(const void **)(void *)v = scratch;
            break;
        case TG__K_UNION:
            ((tg__union_head *)(void *)v)->kind = TG_UNION_UNKNOWN;
            ((tg__union_head *)(void *)v)->raw = empty_raw;
            break;
        case TG__K_CHATID:
            *(tg_chat_id *)(void *)v = tg_chat_id_int(42);
            break;
        case TG__K_FILE:
            *(tg_input_file *)(void *)v = tg_input_file_id("FID");
            break;
        default:
            break;
        }
    }
}

static void check_body(const tg__method *m, const bot_request *r)
{
    json_t *root = json_loads(r->body, 0, NULL);
    assert_true(json_is_object(root));
    const tg__type *t = m->params_desc;
    for (uint16_t i = 0; t && i < t->nfields; i++)
        if (!(t->fields[i].flags & TG__F_OPT) && !json_object_get(root, t->fields[i].name)) {
            fprintf(stderr, "%s: %s missing from %s\n", m->name, t->fields[i].name, r->body);
            fail();
        }
    json_decref(root);
}

static alignas(max_align_t) unsigned char params[8192];
static alignas(max_align_t) unsigned char out[8192];

/* The async run: one handle, and the ctx of the last completed call (kept, so its error
 * details and decoded result outlive the callback). */
static tg_async *g_async;
static tg_ctx *g_async_ctx;
static tg_status g_async_st;
static int g_async_calls;

static bool async_run(void)
{
    const char *t = getenv("TGKIT_TEST_TRANSPORT");
    return t && strcmp(t, "async") == 0;
}

static void on_async(tg_async *a, const tg_async_result *r, void *user)
{
    const tg__method *m = user;
    g_async_calls++;
    g_async_st = r->status;
    if (r->result)
        memcpy(out, r->result, tg__async_out_size(m));
    tg_ctx_free(g_async_ctx);
    g_async_ctx = tg_async_keep(a, r);
}

/* The ctx holding the last call's error: the fixture's, or the async call's. */
static tg_ctx *err_ctx(bot_fx *f)
{
    return g_async ? g_async_ctx : f->ctx;
}

static tg_status call_m(bot_fx *f, const tg__method *m)
{
    memset(out, 0, sizeof out);
    if (!g_async)
        return tg__call(f->ctx, m, m->params_desc ? params : NULL, out);
    g_async_calls = 0;
    uint64_t id = tg__async_call(g_async, m, m->params_desc ? params : NULL, NULL,
                                 (void (*)(void))on_async, (void *)m);
    assert_true(id != 0);
    for (int i = 0; i < 100000 && tg_async_pending(g_async) > 0; i++)
        assert_true(tg_async_run_once(g_async, 100) >= 0);
    assert_int_equal(g_async_calls, 1); /* exactly one completion */
    return g_async_st;
}

/* Success: path, JSON body with every required parameter, decoded result. */
static void method_success(bot_fx *f, const tg__method *m, tg__buf *b, const char *path)
{
    size_t res_off;
    result_json(b, m, &res_off);
    bot_server_set_reply(f->srv, m->name, 200, tg__buf_cstr(b));
    tg_status st = call_m(f, m);
    if (st != TG_OK)
        fail_msg("%s: %s (reply %s)", m->name, tg_ctx_errmsg(err_ctx(f)), tg__buf_cstr(b));
    const bot_request *r = bot_server_last(f->srv);
    assert_string_equal(r->path, path);
    assert_string_equal(r->content_type, "application/json");
    check_body(m, r);
    check_result(m, out, b->data + res_off, b->len - res_off - 1);
}

/* The bad days, each against every method (the persistent reply is a success). */
static void method_failures(bot_fx *f, const tg__method *m, const char *path)
{
    size_t before = bot_server_count(f->srv, m->name);
    bot_server_push_error(f->srv, m->name, 403, "Forbidden: bot was blocked by the user");
    assert_int_equal(call_m(f, m), TG_ERR_API);
    assert_int_equal(tg_ctx_error(err_ctx(f))->error_code, 403);
    assert_string_equal(tg_ctx_error(err_ctx(f))->method, m->name);
    assert_string_equal(bot_server_last(f->srv)->path, path);
    /* 429 without retry_after: backed off and retried once, then the success */
    bot_server_push_raw(f->srv, m->name, 429, NULL,
                        "{\"ok\":false,\"error_code\":429,\"description\":\"Too Many\"}");
    assert_int_equal(call_m(f, m), TG_OK);
    bot_server_push_raw(f->srv, m->name, 502, "text/html", "<html>502 Bad Gateway</html>");
    assert_int_equal(call_m(f, m), TG_ERR_HTTP);
    assert_int_equal(tg_ctx_error(err_ctx(f))->http_status, 502);
    bot_server_push_raw(f->srv, m->name, 200, NULL, "{\"ok\":true,\"result\":");
    assert_int_equal(call_m(f, m), TG_ERR_DECODE);
    bot_server_push_raw(f->srv, m->name, 200, NULL, "{\"ok\":true,\"result\":12.5}");
    assert_int_equal(call_m(f, m), TG_ERR_DECODE);
    assert_true(strncmp(tg_ctx_error(err_ctx(f))->json_path, "result", 6) == 0);
    bot_server_push(
        f->srv, m->name,
        &(bot_action){.kind = BOT_ACT_CLOSE_MID, .body = "{\"ok\":true,\"result\":true}"});
    assert_int_equal(call_m(f, m), TG_ERR_TRANSPORT);
    assert_int_equal(bot_server_count(f->srv, m->name), before + 7);
    /* a required parameter missing: refused before sending */
    const tg__type *pt = m->params_desc;
    for (uint16_t i = 0; pt && i < pt->nfields; i++) {
        const tg__field *fd = &pt->fields[i];
        bool pointer = (fd->flags & (TG__F_ARR | TG__F_ARR2)) || fd->kind == TG__K_STR ||
                       fd->kind == TG__K_OBJ;
        if ((fd->flags & TG__F_OPT) || !pointer)
            continue;
        const void *saved = *(const void **)(void *)(params + fd->off);
        *(const void **)(void *)(params + fd->off) = NULL;
        assert_int_equal(call_m(f, m), TG_ERR_INVALID);
        assert_non_null(strstr(tg_ctx_errmsg(err_ctx(f)), fd->name));
        *(const void **)(void *)(params + fd->off) = saved;
        break;
    }
    assert_int_equal(bot_server_count(f->srv, m->name), before + 7);
}

static void test_every_method(void **state)
{
    bot_fx *f = *state;
    tg__buf b;
    tg__buf_init(&b, 1 << 20);
    char path[128];
    size_t ok = 0;
    tg_ctx_set_retry_policy(f->ctx, &(tg_retry_policy){.backoff_base_ms = 1});
    if (async_run()) {
        g_async = tg_async_new(f->bot, NULL);
        assert_non_null(g_async);
        tg_async_set_retry_policy(g_async, &(tg_retry_policy){.backoff_base_ms = 1});
    }
    for (size_t i = 0; i < tg__method_count; i++) {
        const tg__method *m = tg__methods[i];
        const tg__type *pt = m->params_desc;
        assert_true(!pt || pt->size <= sizeof params);
        memset(params, 0, sizeof params);
        memset(scratch, 0, sizeof scratch);
        fill_required(pt, params);
        snprintf(path, sizeof path, "/bot<TOKEN>/%s", m->name);
        method_success(f, m, &b, path);
        method_failures(f, m, path);
        tg_ctx_reset(f->ctx);
        ok++;
    }
    assert_int_equal(ok, tg__method_count);
    assert_true(tg__method_count > 100);
    tg__buf_cleanup(&b);
    if (g_async) {
        tg_async_stats st;
        tg_async_get_stats(g_async, &st);
        assert_int_equal(st.submitted, st.completed);
        assert_true(st.completed >= 7 * tg__method_count);
        fprintf(stderr, "async walk: %llu calls completed\n", (unsigned long long)st.completed);
        tg_async_free(g_async);
        tg_ctx_free(g_async_ctx);
        g_async = NULL;
        g_async_ctx = NULL;
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_get_me, setup, teardown),
        cmocka_unit_test_setup_teardown(test_send_message, setup, teardown),
        cmocka_unit_test_setup_teardown(test_send_document_multipart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_send_media_group_attach, setup, teardown),
        cmocka_unit_test_setup_teardown(test_allocation_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_method, setup, teardown),
    };
    if (async_run()) { /* the walk only: the hand-written cases are the blocking API's */
        const struct CMUnitTest walk[] = {
            cmocka_unit_test_setup_teardown(test_every_method, setup, teardown),
        };
        return cmocka_run_group_tests(walk, NULL, NULL);
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
