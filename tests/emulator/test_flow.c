/*
 * Updates flowing both ways and the emulator's larger behaviours, over real HTTP:
 *  - webhook delivery to a real local server (libmicrohttpd): the secret token header, a
 *    failed delivery kept and retried, last_error_* and pending_update_count as
 *    getWebhookInfo reports them, 409 for getUpdates meanwhile;
 *  - two concurrent getUpdates: the older one ends with 409;
 *  - members: my_chat_member when the bot is added, a join request answered by the bot,
 *    chat_member updates when asked for;
 *  - Telegram's file limits: uploads over 50 MB (413), getFile over 20 MB.
 */
#include "tgtest.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "tgbot/testing.h"

static tg_test *t;

static size_t collect(char *p, size_t size, size_t n, void *ud)
{
    char **s = ud;
    size_t old = *s ? strlen(*s) : 0, len = size * n;
    char *g = realloc(*s, old + len + 1);
    assert_non_null(g);
    memcpy(g + old, p, len);
    g[old + len] = '\0';
    *s = g;
    return len;
}

/* POST a JSON body to a Bot API method; the parsed answer and its HTTP status. */
static json_t *api(const char *method, const char *body, long *status)
{
    CURL *c = curl_easy_init();
    char url[256];
    snprintf(url, sizeof url, "%s/bot%s/%s", tg_test_url(t), tg_test_token(t), method);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    char *resp = NULL;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &resp);
    assert_int_equal(curl_easy_perform(c), CURLE_OK);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    json_t *j = json_loads(resp ? resp : "", 0, NULL);
    if (!j)
        fail_msg("%s: not JSON: %s", method, resp ? resp : "(empty)");
    free(resp);
    return j;
}

static char *api_text(const char *method, const char *body, long *status)
{
    json_t *j = api(method, body, status);
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return s;
}

static int setup(void **state)
{
    (void)state;
    t = tg_test_start();
    return t ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    tg_test_free(t);
    return 0;
}

/* ---- a webhook receiver: fails the first delivery, accepts the rest ---- */

typedef struct hook {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int count;
    char secret[2][64];
    char body[2][4096];
} hook;

static enum MHD_Result on_hook(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *data,
                               size_t *size, void **ptr)
{
    (void)url;
    (void)method;
    (void)version;
    hook *h = cls;
    if (!*ptr) {
        *ptr = calloc(1, 4096);
        return MHD_YES;
    }
    char *buf = *ptr;
    if (*size) {
        strncat(buf, data, *size < 4000 - strlen(buf) ? *size : 4000 - strlen(buf));
        *size = 0;
        return MHD_YES;
    }
    pthread_mutex_lock(&h->mu);
    int n = h->count < 2 ? h->count : 1;
    const char *sec =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Telegram-Bot-Api-Secret-Token");
    snprintf(h->secret[n], sizeof h->secret[n], "%s", sec ? sec : "");
    snprintf(h->body[n], sizeof h->body[n], "%s", buf);
    int status = h->count++ == 0 ? 500 : 200;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return rc;
}

static void on_hook_done(void *cls, struct MHD_Connection *c, void **ptr,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    free(*ptr);
    *ptr = NULL;
}

static void test_webhook_delivery(void **state)
{
    (void)state;
    hook h = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct MHD_Daemon *d =
        MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, 0, NULL,
                         NULL, on_hook, &h, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                         MHD_OPTION_NOTIFY_COMPLETED, on_hook_done, NULL, MHD_OPTION_END);
    assert_non_null(d);
    unsigned port = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)->port;
    char body[256];
    snprintf(body, sizeof body,
             "{\"url\":\"http://127.0.0.1:%u/hook\",\"secret_token\":\"s3cr3t_T-ok\"}", port);
    long status;
    free(api_text("setWebhook", body, &status));
    assert_int_equal(status, 200);
    int64_t id = tg_test_send(t, 0, 0, "via webhook");
    assert_true(id > 0);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 15;
    pthread_mutex_lock(&h.mu);
    while (h.count < 2)
        if (pthread_cond_timedwait(&h.cv, &h.mu, &until) != 0)
            break;
    int count = h.count;
    pthread_mutex_unlock(&h.mu);
    assert_int_equal(count, 2); /* the failed delivery was retried */
    for (int i = 0; i < 2; i++) {
        assert_string_equal(h.secret[i], "s3cr3t_T-ok");
        assert_non_null(strstr(h.body[i], "\"text\":\"via webhook\""));
    }
    assert_string_equal(h.body[0], h.body[1]); /* the same update again */
    assert_true(tg_test_wait_idle(t, 5000));
    char *info = api_text("getWebhookInfo", "{}", &status);
    assert_non_null(strstr(info, "\"pending_update_count\":0"));
    assert_non_null(strstr(info, "\"last_error_message\":\"Wrong response from the webhook: 500"));
    free(info);
    char *conflict = api_text("getUpdates", "{}", &status);
    assert_int_equal(status, 409);
    free(conflict);
    free(api_text("deleteWebhook", "{}", &status));
    MHD_stop_daemon(d);
}

/* ---- concurrent long polls ---- */

static void *long_poll(void *arg)
{
    long status;
    char *s = api_text("getUpdates", "{\"timeout\":20}", &status);
    atomic_store((atomic_long *)arg, status);
    free(s);
    return NULL;
}

static void test_second_poll_ends_the_first(void **state)
{
    (void)state;
    atomic_long st1 = 0;
    long st2;
    free(api_text("getUpdates", "{\"offset\":-1}", &st2));
    json_t *j = api("getUpdates", "{\"offset\":-1}", &st2);
    json_t *last = json_array_get(json_object_get(j, "result"), 0);
    char body[64];
    snprintf(body, sizeof body, "{\"offset\":%lld}",
             last ? (long long)json_integer_value(json_object_get(last, "update_id")) + 1 : 0LL);
    json_decref(j);
    free(api_text("getUpdates", body, &st2)); /* nothing pending now */
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, long_poll, &st1), 0);
    /* later polls (repeated until the first one is waiting, at most 10 s) end it with 409 */
    time_t end = time(NULL) + 10;
    while (atomic_load(&st1) == 0 && time(NULL) < end)
        free(api_text("getUpdates", "{\"timeout\":0}", &st2));
    pthread_join(th, NULL);
    assert_int_equal(atomic_load(&st1), 409);
}

/* ---- members ---- */

static void test_member_updates(void **state)
{
    (void)state;
    long status;
    free(api_text("getUpdates",
                  "{\"offset\":-1,\"allowed_updates\":[\"message\","
                  "\"my_chat_member\",\"chat_member\",\"chat_join_request\"]}",
                  &status));
    int64_t g = tg_test_add_chat(t, "supergroup", "Members", 0);
    assert_int_equal(tg_test_join(t, g, tg_test_bot_id(t), true), 0);
    int64_t u2 = tg_test_add_user(t, "Joiner");
    char body[256];
    snprintf(body, sizeof body, "{\"chat_id\":%lld,\"user_id\":%lld}", (long long)g, (long long)u2);
    char *s = api_text("approveChatJoinRequest", body, &status);
    assert_int_equal(status, 400); /* no request yet */
    free(s);
    /* a join request through the control API, as the web chat sends it */
    char *r = NULL;
    CURL *c = curl_easy_init();
    char url[256], req[256];
    snprintf(url, sizeof url, "%s/control/join", tg_test_url(t));
    snprintf(req, sizeof req, "{\"chat_id\":%lld,\"user_id\":%lld,\"request\":true}", (long long)g,
             (long long)u2);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, req);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    assert_int_equal(curl_easy_perform(c), CURLE_OK);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    assert_non_null(strstr(r, "\"requested\":true"));
    free(r);
    s = api_text("approveChatJoinRequest", body, &status);
    assert_int_equal(status, 200);
    free(s);
    s = api_text("getChatMember", body, &status);
    assert_non_null(strstr(s, "\"status\":\"member\""));
    free(s);
    s = api_text("getUpdates", "{}", &status);
    assert_non_null(strstr(s, "\"my_chat_member\":{"));
    assert_non_null(strstr(s, "\"chat_join_request\":{"));
    assert_non_null(strstr(s, "\"chat_member\":{"));
    assert_non_null(strstr(s, "\"new_chat_member\":{\"status\":\"member\",\"user\":{\"id\":"));
    free(s);
}

/* ---- reply keyboards and upgraded groups ---- */

/* GET or POST /control/<name>; the answer text. */
static char *control(const char *name, const char *body)
{
    CURL *c = curl_easy_init();
    char url[256];
    snprintf(url, sizeof url, "%s/control/%s", tg_test_url(t), name);
    char *r = NULL;
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (body)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    assert_int_equal(curl_easy_perform(c), CURLE_OK);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    assert_non_null(r);
    return r;
}

static void test_reply_keyboard(void **state)
{
    (void)state;
    tg_test_send(t, 0, 0, "/start");
    char body[256], q[96];
    snprintf(q, sizeof q, "messages?chat_id=%lld", (long long)tg_test_user_id(t));
    snprintf(body, sizeof body,
             "{\"chat_id\":%lld,\"text\":\"pick\",\"reply_markup\":{\"keyboard\":"
             "[[{\"text\":\"Yes\"},{\"text\":\"No\"}]],\"one_time_keyboard\":true}}",
             (long long)tg_test_user_id(t));
    long status;
    free(api_text("sendMessage", body, &status));
    assert_int_equal(status, 200);
    char *m = control(q, NULL);
    assert_non_null(strstr(m, "\"reply_keyboard\":{\"keyboard\":[[{\"text\":\"Yes\"}"));
    free(m);
    snprintf(body, sizeof body,
             "{\"chat_id\":%lld,\"text\":\"ok\",\"reply_markup\":{\"remove_keyboard\":true}}",
             (long long)tg_test_user_id(t));
    free(api_text("sendMessage", body, &status));
    m = control(q, NULL);
    assert_non_null(strstr(m, "\"reply_keyboard\":null"));
    free(m);
}

static void test_migrated_group(void **state)
{
    (void)state;
    int64_t g = tg_test_add_chat(t, "group", "Old", 0);
    assert_int_equal(tg_test_join(t, g, tg_test_bot_id(t), false), 0);
    char body[160];
    snprintf(body, sizeof body, "{\"chat_id\":%lld}", (long long)g);
    char *r = control("migrate", body);
    json_t *j = json_loads(r, 0, NULL);
    json_int_t sg = json_integer_value(json_object_get(json_object_get(j, "chat"), "id"));
    json_decref(j);
    free(r);
    assert_true(sg < -1000000000000LL);
    snprintf(body, sizeof body, "{\"chat_id\":%lld,\"text\":\"x\"}", (long long)g);
    long status;
    j = api("sendMessage", body, &status);
    assert_int_equal(status, 400);
    assert_string_equal(json_string_value(json_object_get(j, "description")),
                        "Bad Request: group chat was upgraded to a supergroup chat");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(j, "parameters"), "migrate_to_chat_id")),
        sg);
    json_decref(j);
    snprintf(body, sizeof body, "{\"chat_id\":%lld,\"text\":\"x\"}", (long long)sg);
    free(api_text("sendMessage", body, &status));
    assert_int_equal(status, 200); /* the bot came along */
}

static void test_blocked_by_user(void **state)
{
    (void)state;
    long status;
    tg_test_send(t, 0, 0, "/start");
    char body[128];
    snprintf(body, sizeof body, "{\"chat_id\":%lld,\"text\":\"hi\"}",
             (long long)tg_test_user_id(t));
    free(control("block", "{\"blocked\":true}"));
    json_t *j = api("sendMessage", body, &status);
    assert_int_equal(status, 403);
    assert_string_equal(json_string_value(json_object_get(j, "description")),
                        "Forbidden: bot was blocked by the user");
    json_decref(j);
    char *u = api_text("getUpdates", "{}", &status);
    assert_non_null(strstr(u, "\"my_chat_member\":{"));
    assert_non_null(strstr(u, "\"new_chat_member\":{\"status\":\"kicked\""));
    free(u);
    free(control("block", "{\"blocked\":false}"));
    free(api_text("sendMessage", body, &status));
    assert_int_equal(status, 200);
}

/* ---- file limits ---- */

static long upload(const char *method, const char *field, size_t size, char **resp)
{
    CURL *c = curl_easy_init();
    char url[256], chat[32];
    snprintf(url, sizeof url, "%s/bot%s/%s", tg_test_url(t), tg_test_token(t), method);
    snprintf(chat, sizeof chat, "%lld", (long long)tg_test_user_id(t));
    char *data = calloc(1, size);
    assert_non_null(data);
    curl_mime *mime = curl_mime_init(c);
    curl_mimepart *p = curl_mime_addpart(mime);
    curl_mime_name(p, "chat_id");
    curl_mime_data(p, chat, CURL_ZERO_TERMINATED);
    p = curl_mime_addpart(mime);
    curl_mime_name(p, field);
    curl_mime_data(p, data, size);
    curl_mime_filename(p, "big.bin");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_MIMEPOST, mime);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, resp);
    assert_int_equal(curl_easy_perform(c), CURLE_OK);
    long status;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_mime_free(mime);
    curl_easy_cleanup(c);
    free(data);
    return status;
}

static void test_file_limits(void **state)
{
    (void)state;
    tg_test_send(t, 0, 0, "/files");
    char *r = NULL;
    assert_int_equal(upload("sendDocument", "document", ((size_t)21 << 20), &r), 200);
    json_t *j = json_loads(r, 0, NULL);
    const char *fid = json_string_value(
        json_object_get(json_object_get(json_object_get(j, "result"), "document"), "file_id"));
    assert_non_null(fid);
    char body[160];
    snprintf(body, sizeof body, "{\"file_id\":\"%s\"}", fid);
    json_decref(j);
    free(r);
    long status;
    char *s = api_text("getFile", body, &status);
    assert_int_equal(status, 400);
    assert_non_null(strstr(s, "Bad Request: file is too big"));
    free(s);
    r = NULL;
    assert_int_equal(upload("sendDocument", "document", ((size_t)51 << 20), &r), 413);
    assert_non_null(strstr(r, "Request Entity Too Large"));
    free(r);
}

/* A \u0000 in a control call's string is refused with where it is, not cut there. */
static void test_control_refuses_nul(void **state)
{
    (void)state;
    tg_test_send(t, 0, 0, "/start");
    int64_t last = tg_test_last_message_id(t, 0);
    char *r = control("send", "{\"text\":\"visible\\u0000hidden\"}");
    if (!strstr(r, "\"ok\":false") || !strstr(r, "text: a string holding") ||
        !strstr(r, "would cut the text"))
        fail_msg("send with \\u0000: %s", r);
    free(r);
    assert_int_equal(tg_test_last_message_id(t, 0), last); /* nothing was sent */
    r = control("users", "{\"first_name\":\"Ann\\u0000ie\"}");
    assert_non_null(strstr(r, "first_name: a string holding"));
    free(r);
    r = control("users", "{\"first_name\":\"Annie\"}"); /* the same without it works */
    assert_non_null(strstr(r, "\"ok\":true"));
    free(r);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_control_refuses_nul, setup, teardown),
        cmocka_unit_test_setup_teardown(test_webhook_delivery, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_poll_ends_the_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_member_updates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reply_keyboard, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrated_group, setup, teardown),
        cmocka_unit_test_setup_teardown(test_blocked_by_user, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_limits, setup, teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
