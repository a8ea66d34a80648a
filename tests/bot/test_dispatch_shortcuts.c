/*
 * The handler shortcuts and the webhook helpers against the stateful fake Bot API, with
 * updates arriving through a real webhook POST: the requests the bot makes (sendMessage with
 * reply_parameters, answerCallbackQuery, editMessageText for chat and inline messages,
 * setWebhook with every option, deleteWebhook) are checked field by field.
 */
#include "tgtest.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdatomic.h>

#include "dispatch_fakeapi.h"
#include "tgbot/client.h"
#include "tgbot/dispatch.h"
#include "tgbot/updates.h"

#define TOKEN "123456:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

static atomic_int then_ran;

static tg_status then_me(tg_hctx *h, tg_status st, const char *json, size_t len, void *user)
{
    (void)h, (void)user;
    if (st == TG_OK && json && len && strstr(json, "username"))
        atomic_store(&then_ran, 1);
    return st;
}

static tg_status h_text(tg_hctx *h, void *user)
{
    (void)user;
    /* on workers the continuation runs at once, with the call's result */
    assert_int_equal(tg_hctx_call_then(h, "getMe", NULL, then_me, NULL), TG_OK);
    assert_int_equal(atomic_load(&then_ran), 1);
    /* tg_edit refuses a plain message: it is the user's, not the bot's (issue 17) */
    assert_int_equal(tg_edit(h, "hijack", NULL), TG_ERR_INVALID);
    assert_non_null(strstr(tg_hctx_errmsg(h), "callback query"));
    tg_status st = tg_reply(h, "re: \"quoted\"");
    /* one place for the last error, cleared by a later success */
    assert_int_equal(st, TG_OK);
    assert_string_equal(tg_hctx_errmsg(h), "");
    if (st == TG_OK)
        st = tg_send_ex(h, "menu", "\"reply_markup\":{\"inline_keyboard\":[]}");
    return st;
}

static tg_status h_callback(tg_hctx *h, void *user)
{
    (void)user;
    tg_status st = tg_answer(h, "done");
    return st == TG_OK ? tg_edit(h, "edited", NULL) : st;
}

static tg_status h_inline(tg_hctx *h, void *user)
{
    (void)user;
    /* no chat: sending fails cleanly, answering a non-callback fails cleanly */
    assert_int_equal(tg_reply(h, "x"), TG_ERR_INVALID);
    assert_non_null(strstr(tg_hctx_errmsg(h), "has no chat"));
    assert_int_equal(tg_answer(h, NULL), TG_ERR_INVALID);
    return TG_OK;
}

static long post(uint16_t port, const char *body)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/tg", port);
    CURL *c = curl_easy_init();
    struct curl_slist *hs = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hs);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
    long status = 0;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hs);
    curl_easy_cleanup(c);
    return status;
}

static json_t *call(fakeapi *f, const char *method, size_t i)
{
    char *b = fakeapi_body(f, method, i);
    if (!b)
        fail_msg("no %s call #%zu", method, i);
    json_t *j = json_loads(b, 0, NULL);
    free(b);
    assert_non_null(j);
    return j;
}

static void expect_int(json_t *j, const char *path, long long want)
{
    json_t *v = j;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *k = strtok(buf, "."); k && v; k = strtok(NULL, "."))
        v = json_object_get(v, k);
    if (!json_is_integer(v) || json_integer_value(v) != want)
        fail_msg("%s: expected %lld", path, want);
}

static void expect_str(json_t *j, const char *key, const char *want)
{
    const char *v = json_string_value(json_object_get(j, key));
    if (!v || strcmp(v, want) != 0)
        fail_msg("%s: expected \"%s\", got \"%s\"", key, want, v ? v : "(absent)");
}

static void test_shortcuts_through_webhook(void **state)
{
    (void)state;
    fakeapi *f = fakeapi_start(TOKEN);
    tg_bot *bot = tg_bot_new(TOKEN, &(tg_bot_options){.base_url = fakeapi_url(f)});
    tg_router *r = tg_router_new();
    tg_router_on_kind(r, TG_UPDATE_MESSAGE, h_text, NULL);
    tg_router_on_kind(r, TG_UPDATE_CALLBACK_QUERY, h_callback, NULL);
    tg_router_on_kind(r, TG_UPDATE_INLINE_QUERY, h_inline, NULL);
    tg_dispatcher *d = tg_dispatcher_new(bot, r, &(tg_dispatcher_options){.workers = 2});
    assert_non_null(d);
    tg_webhook *w =
        tg_webhook_start(d, &(tg_webhook_options){.host = "127.0.0.1", .port = -1, .path = "/tg"});
    assert_non_null(w);
    uint16_t port = tg_webhook_port(w);
    assert_int_equal(post(port, "{\"update_id\":1,\"message\":{\"message_id\":31,\"chat\":{\"id\":"
                                "-77,\"type\":\"group\"},\"from\":{\"id\":5},\"text\":\"hi\"}}"),
                     200);
    assert_int_equal(post(port, "{\"update_id\":2,\"callback_query\":{\"id\":\"cb9\",\"from\":"
                                "{\"id\":5},\"message\":{\"message_id\":40,\"chat\":{\"id\":-77}},"
                                "\"data\":\"x\"}}"),
                     200);
    assert_int_equal(post(port, "{\"update_id\":3,\"callback_query\":{\"id\":\"cb10\",\"from\":"
                                "{\"id\":6},\"inline_message_id\":\"IM1\",\"data\":\"y\"}}"),
                     200);
    assert_int_equal(post(port, "{\"update_id\":4,\"inline_query\":{\"id\":\"iq\",\"from\":"
                                "{\"id\":6},\"query\":\"q\"}}"),
                     200);
    assert_int_equal(tg_dispatcher_wait_idle(d, 20000), TG_OK);
    tg_dispatcher_stats st;
    tg_dispatcher_get_stats(d, &st);
    assert_int_equal((int)st.failed, 0);

    json_t *j = call(f, "sendMessage", 0);
    expect_int(j, "chat_id", -77);
    expect_str(j, "text", "re: \"quoted\"");
    expect_int(j, "reply_parameters.message_id", 31);
    json_decref(j);
    j = call(f, "sendMessage", 1);
    expect_str(j, "text", "menu");
    assert_true(json_is_object(json_object_get(j, "reply_markup")));
    assert_null(json_object_get(j, "reply_parameters"));
    json_decref(j);
    assert_int_equal((int)fakeapi_count(f, "answerCallbackQuery"), 2);
    assert_int_equal((int)fakeapi_count(f, "editMessageText"), 2);
    for (size_t i = 0; i < 2; i++) { /* the two callbacks may run in either order */
        j = call(f, "editMessageText", i);
        expect_str(j, "text", "edited");
        if (json_object_get(j, "inline_message_id")) {
            expect_str(j, "inline_message_id", "IM1");
            assert_null(json_object_get(j, "chat_id"));
        } else {
            expect_int(j, "chat_id", -77);
            expect_int(j, "message_id", 40);
        }
        json_decref(j);
    }
    tg_webhook_stop(w);
    tg_dispatcher_free(d);
    tg_router_free(r);
    tg_bot_free(bot);
    fakeapi_stop(f);
}

static void test_set_and_delete_webhook(void **state)
{
    (void)state;
    fakeapi *f = fakeapi_start(TOKEN);
    tg_bot *bot = tg_bot_new(TOKEN, &(tg_bot_options){.base_url = fakeapi_url(f)});
    tg_ctx *ctx = tg_ctx_new(bot);
    static const char *const allowed[] = {"message", "callback_query", NULL};
    tg_webhook_options o = {.url = "https://bot.example.com:8443/tg",
                            .secret_token = "abc_DEF-1",
                            .max_connections = 10,
                            .allowed_updates = allowed,
                            .drop_pending_updates = true,
                            .ip_address = "203.0.113.7"};
    assert_int_equal(tg_webhook_set(ctx, &o), TG_OK);
    json_t *j = call(f, "setWebhook", 0);
    expect_str(j, "url", "https://bot.example.com:8443/tg");
    expect_str(j, "secret_token", "abc_DEF-1");
    expect_str(j, "ip_address", "203.0.113.7");
    expect_int(j, "max_connections", 10);
    assert_true(json_is_true(json_object_get(j, "drop_pending_updates")));
    json_t *au = json_object_get(j, "allowed_updates");
    assert_int_equal((int)json_array_size(au), 2);
    assert_string_equal(json_string_value(json_array_get(au, 1)), "callback_query");
    json_decref(j);
    assert_int_equal(tg_webhook_delete(ctx, true), TG_OK);
    j = call(f, "deleteWebhook", 0);
    assert_true(json_is_true(json_object_get(j, "drop_pending_updates")));
    json_decref(j);
    assert_int_equal(tg_webhook_set(ctx, &(tg_webhook_options){0}), TG_ERR_INVALID);
    assert_int_equal(
        tg_webhook_set(ctx, &(tg_webhook_options){.url = "https://x", .upload_certificate = true}),
        TG_ERR_INVALID);
    tg_ctx_free(ctx);
    tg_bot_free(bot);
    fakeapi_stop(f);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_ALL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shortcuts_through_webhook),
        cmocka_unit_test(test_set_and_delete_webhook),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
