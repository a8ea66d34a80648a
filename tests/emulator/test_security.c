/*
 * The emulator's origin under attack (issue 21), over real HTTP with libcurl:
 *  - item 5: a file a bot uploads (text/html with a script) comes back as an attachment with
 *    nosniff and a sandboxing CSP, from /file/bot<TOKEN>/ and from /control/file; raster
 *    images stay inline for the web chat; the web chat page itself carries a CSP;
 *  - item 6: the control API refuses what a foreign web page can send: JSON as text/plain
 *    or a form (415), a foreign or null Origin (403), a Host that is not this emulator
 *    (DNS rebinding, 421); curl-like calls and the emulator's own page pass;
 *  - item 10: javascript: and other links Telegram refuses in text_link entities and URL
 *    buttons get Telegram's errors; a file_id is random and works only for the bots that
 *    were shown it; a %00 in a download path (or a control query) is refused.
 */
#include "tgtest.h"

#include <curl/curl.h>
#include <jansson.h>

#include "emulator/server.h"
#include "tgbot/testing.h"

static tg_test *t;

typedef struct resp {
    long status;
    char *body;
    char *headers; /* every header line, as received */
} resp;

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

static void resp_free(resp *r)
{
    free(r->body);
    free(r->headers);
    *r = (resp){0};
}

/* The value of header name in r (a static copy, "" when absent). */
static const char *header(const resp *r, const char *name)
{
    static char v[1024];
    v[0] = '\0';
    size_t n = strlen(name);
    for (const char *l = r->headers; l && *l;) {
        const char *end = strstr(l, "\r\n");
        size_t ll = end ? (size_t)(end - l) : strlen(l);
        if (ll > n && l[n] == ':' && !strncasecmp(l, name, n)) {
            const char *p = l + n + 1;
            while (*p == ' ')
                p++;
            snprintf(v, sizeof v, "%.*s", (int)(ll - (size_t)(p - l)), p);
            return v;
        }
        l = end ? end + 2 : l + ll;
    }
    return v;
}

/* method path (after the base URL) with extra header lines (NULL-ended) and an optional
 * body (mime: a multipart form instead). */
static resp http(const char *method, const char *path, const char *const *hdrs, const char *body,
                 curl_mime *(*mime)(CURL *c))
{
    CURL *c = curl_easy_init();
    assert_non_null(c);
    char url[512];
    snprintf(url, sizeof url, "%s%s", tg_test_url(t), path);
    struct curl_slist *h = NULL;
    for (size_t i = 0; hdrs && hdrs[i]; i++)
        h = curl_slist_append(h, hdrs[i]);
    resp r = {0};
    curl_mime *m = mime ? mime(c) : NULL;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (body)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    if (m)
        curl_easy_setopt(c, CURLOPT_MIMEPOST, m);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r.headers);
    assert_int_equal(curl_easy_perform(c), CURLE_OK);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    curl_mime_free(m);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (!r.body)
        r.body = strdup("");
    return r;
}

static const char *const json_ct[] = {"Content-Type: application/json", NULL};

/* A page that, rendered on the emulator's origin, would act as the user. */
#define EVIL_HTML                                                                                 \
    "<html><body><script>fetch('/control/send',{method:'POST',headers:{'Content-Type':"            \
    "'application/json'},body:JSON.stringify({text:'pwned'})})</script></body></html>"

/* A multipart form of chat_id (the test user) and one file part. */
static curl_mime *file_form(CURL *c, const char *field, const char *name, const char *type,
                            const void *data, size_t len)
{
    curl_mime *m = curl_mime_init(c);
    char chat[32];
    snprintf(chat, sizeof chat, "%lld", (long long)tg_test_user_id(t));
    curl_mimepart *p = curl_mime_addpart(m);
    curl_mime_name(p, "chat_id");
    curl_mime_data(p, chat, CURL_ZERO_TERMINATED);
    p = curl_mime_addpart(m);
    curl_mime_name(p, field);
    curl_mime_data(p, data, len);
    curl_mime_filename(p, name);
    curl_mime_type(p, type);
    return m;
}

static curl_mime *evil_document(CURL *c)
{
    return file_form(c, "document", "invoice.html", "text/html", EVIL_HTML, strlen(EVIL_HTML));
}

/* The bot's answer's document (file_id and file_path), after a getFile. */
static void upload(curl_mime *(*mime)(CURL *c), const char *method, const char *kind,
                   char *file_id, size_t idcap, char *file_path, size_t pathcap)
{
    char path[256];
    snprintf(path, sizeof path, "/bot%s/%s", tg_test_token(t), method);
    resp r = http("POST", path, NULL, NULL, mime);
    assert_int_equal(r.status, 200);
    json_t *j = json_loads(r.body, 0, NULL);
    assert_non_null(j);
    json_t *doc = json_object_get(json_object_get(j, "result"), kind);
    if (json_is_array(doc))
        doc = json_array_get(doc, json_array_size(doc) - 1);
    snprintf(file_id, idcap, "%s", json_string_value(json_object_get(doc, "file_id")));
    json_decref(j);
    resp_free(&r);
    char body[256];
    snprintf(body, sizeof body, "{\"file_id\":\"%s\"}", file_id);
    snprintf(path, sizeof path, "/bot%s/getFile", tg_test_token(t));
    r = http("POST", path, json_ct, body, NULL);
    assert_int_equal(r.status, 200);
    j = json_loads(r.body, 0, NULL);
    assert_non_null(j);
    snprintf(file_path, pathcap, "%s",
             json_string_value(json_object_get(json_object_get(j, "result"), "file_path")));
    json_decref(j);
    resp_free(&r);
}

static void assert_inert(const resp *r, const char *disposition)
{
    assert_int_equal(r->status, 200);
    assert_string_equal(header(r, "X-Content-Type-Options"), "nosniff");
    assert_string_equal(header(r, "Content-Security-Policy"), "default-src 'none'; sandbox");
    assert_string_equal(header(r, "Cross-Origin-Resource-Policy"), "same-origin");
    assert_string_equal(header(r, "Content-Disposition"), disposition);
}

static void test_uploaded_html_is_an_attachment(void **state)
{
    (void)state;
    assert_true(tg_test_send(t, 0, 0, "/start") > 0); /* the bot may write to the user now */
    char id[128], fpath[128], path[512];
    upload(evil_document, "sendDocument", "document", id, sizeof id, fpath, sizeof fpath);
    static const char cd[] = "attachment; filename=\"invoice.html\"; "
                             "filename*=UTF-8''invoice.html";
    snprintf(path, sizeof path, "/file/bot%s/%s", tg_test_token(t), fpath);
    resp r = http("GET", path, NULL, NULL, NULL);
    assert_inert(&r, cd);
    assert_string_equal(header(&r, "Content-Type"), "text/html");
    assert_string_equal(r.body, EVIL_HTML); /* the bytes themselves are untouched */
    resp_free(&r);
    snprintf(path, sizeof path, "/control/file?file_id=%s", id);
    r = http("GET", path, NULL, NULL, NULL);
    assert_inert(&r, cd);
    assert_string_equal(r.body, EVIL_HTML);
    resp_free(&r);
}

/* A type that is not a plain type/subtype (a parameter, a second header smuggled in) is
 * served as application/octet-stream; a name's quote, line break or non-ASCII letters
 * cannot break out of Content-Disposition. */
static void test_odd_types_become_octet_stream(void **state)
{
    (void)state;
    static const char *const types[] = {"text/html; charset=utf-8", "text/html\r\nX-A: b",
                                        "text", "/html", "a/b/c"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        json_t *b = json_pack("{s:s,s:s,s:s}", "file_name", "a\"b\r\nX-B: c\xc3\xbc.bin",
                              "data", "bytes", "mime_type", types[i]);
        char *body = json_dumps(b, 0);
        json_decref(b);
        resp r = http("POST", "/control/document", json_ct, body, NULL);
        free(body);
        assert_int_equal(r.status, 200);
        json_t *j = json_loads(r.body, 0, NULL);
        const char *id = json_string_value(json_object_get(
            json_object_get(json_object_get(j, "message"), "document"), "file_id"));
        assert_non_null(id);
        char path[256];
        snprintf(path, sizeof path, "/control/file?file_id=%s", id);
        json_decref(j);
        resp_free(&r);
        r = http("GET", path, NULL, NULL, NULL);
        assert_inert(&r, "attachment; filename=\"a_b__X-B__c__.bin\"; "
                         "filename*=UTF-8''a%22b%0D%0AX-B%3A%20c%C3%BC.bin");
        assert_string_equal(header(&r, "Content-Type"), "application/octet-stream");
        assert_string_equal(header(&r, "X-A"), "");
        assert_string_equal(header(&r, "X-B"), "");
        resp_free(&r);
    }
}

static curl_mime *png_photo(CURL *c)
{
    static const unsigned char png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    return file_form(c, "photo", "cat.png", "image/png", png, sizeof png);
}

/* Raster images are shown by the web chat: inline, but still nosniff and sandboxed. */
static void test_images_stay_inline(void **state)
{
    (void)state;
    assert_true(tg_test_send(t, 0, 0, "/start") > 0);
    char id[128], fpath[128], path[512];
    upload(png_photo, "sendPhoto", "photo", id, sizeof id, fpath, sizeof fpath);
    snprintf(path, sizeof path, "/control/file?file_id=%s", id);
    resp r = http("GET", path, NULL, NULL, NULL);
    assert_inert(&r, "inline; filename=\"cat.png\"; filename*=UTF-8''cat.png");
    assert_string_equal(header(&r, "Content-Type"), "image/png");
    resp_free(&r);
}

/* The web chat runs only its own script and style, and cannot be framed. */
static void test_page_has_a_csp(void **state)
{
    (void)state;
    resp r = http("GET", "/", NULL, NULL, NULL);
    assert_int_equal(r.status, 200);
    const char *csp = header(&r, "Content-Security-Policy");
    assert_non_null(strstr(csp, "default-src 'none'"));
    assert_non_null(strstr(csp, "script-src 'self'"));
    assert_non_null(strstr(csp, "frame-ancestors 'none'"));
    assert_null(strstr(csp, "unsafe-inline"));
    assert_string_equal(header(&r, "X-Content-Type-Options"), "nosniff");
    assert_string_equal(header(&r, "X-Frame-Options"), "DENY");
    assert_non_null(strstr(r.body, "<script src=\"/app.js\"></script>"));
    resp_free(&r);
    /* control answers are inert too */
    r = http("GET", "/control/state", NULL, NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(header(&r, "Content-Security-Policy"), "default-src 'none'; sandbox");
    assert_string_equal(header(&r, "X-Content-Type-Options"), "nosniff");
    resp_free(&r);
}

/* ---- item 6: foreign pages ---- */

/* s with its "%s" (if any) replaced by the emulator's port; one of 4 static buffers. */
static char *with_port(const char *s)
{
    static char b[4][160];
    static int i;
    const char *port = strrchr(tg_test_url(t), ':') + 1, *at = strstr(s, "%s");
    char *out = b[i++ % 4];
    if (at)
        snprintf(out, sizeof b[0], "%.*s%s%s", (int)(at - s), s, port, at + 2);
    else
        snprintf(out, sizeof b[0], "%s", s);
    return out;
}

/* How many messages the test user's private chat holds (0 when there is none yet). */
static size_t user_messages(void)
{
    char path[128];
    snprintf(path, sizeof path, "/control/messages?chat_id=%lld", (long long)tg_test_user_id(t));
    resp r = http("GET", path, NULL, NULL, NULL);
    json_t *j = json_loads(r.body, 0, NULL);
    size_t n = r.status == 200 ? json_array_size(json_object_get(j, "messages")) : 0;
    json_decref(j);
    resp_free(&r);
    return n;
}

static void expect_post(const char *const *hdrs, long status, const char *words)
{
    resp r = http("POST", "/control/send", hdrs, "{\"text\":\"hello\"}", NULL);
    if (r.status != status || !strstr(r.body, words))
        fail_msg("POST /control/send with %s: %ld %s, expected %ld and \"%s\"",
                 hdrs && hdrs[0] ? hdrs[0] : "(no headers)", r.status, r.body, status, words);
    resp_free(&r);
}

/* What a page on another origin can send without a preflight is refused, and does nothing. */
static void test_cross_origin_posts_refused(void **state)
{
    (void)state;
    const char *evil = "Origin: http://evil.example";
    const char *const text_plain_evil[] = {"Content-Type: text/plain", evil, NULL};
    const char *const text_plain[] = {"Content-Type: text/plain", NULL};
    const char *const form[] = {"Content-Type: application/x-www-form-urlencoded", NULL};
    const char *const multipart[] = {"Content-Type: multipart/form-data; boundary=x", NULL};
    const char *const json_evil[] = {"Content-Type: application/json", evil, NULL};
    const char *const json_null[] = {"Content-Type: application/json", "Origin: null", NULL};
    const char *const json_https[] = {"Content-Type: application/json",
                                      with_port("Origin: https://127.0.0.1:%s"), NULL};
    const char *const json_other_port[] = {"Content-Type: application/json",
                                           "Origin: http://127.0.0.1:1", NULL};
    const char *const json_jsonp[] = {"Content-Type: application/jsonp", NULL};
    const char *const none[] = {"Content-Type:", NULL}; /* curl sends no Content-Type */
    expect_post(text_plain_evil, 403, "Origin");
    expect_post(text_plain, 415, "application/json");
    expect_post(form, 415, "application/json");
    expect_post(multipart, 415, "application/json");
    expect_post(json_jsonp, 415, "application/json");
    expect_post(none, 415, "application/json");
    expect_post(json_evil, 403, "cross-origin");
    expect_post(json_null, 403, "cross-origin");
    expect_post(json_https, 403, "cross-origin");
    expect_post(json_other_port, 403, "cross-origin");
    assert_int_equal(user_messages(), 0);
    /* GET calls answer a foreign page neither (their answers are not readable cross-origin
     * anyway, but a sandboxed file's fetch must get nothing) */
    const char *const get_evil[] = {evil, NULL};
    resp r = http("GET", "/control/state", get_evil, NULL, NULL);
    assert_int_equal(r.status, 403);
    resp_free(&r);
}

/* DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1 is same-origin
 * for the browser, but its requests name evil.example in Host. */
static void test_rebinding_host_refused(void **state)
{
    (void)state;
    static const char *const hosts[] = {"Host: evil.example:%s", "Host: 127.0.0.1:1",
                                        "Host: 127.0.0.1.evil.example:%s", "Host: localhost",
                                        "Host: [::1]", "Host: 127.0.0.2:%s", "Host: :%s",
                                        "Host: 127.0.0.1:%s0", "Host: 127.0.0.1:%sx"};
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) {
        const char *const h[] = {with_port(hosts[i]), NULL};
        const char *const hj[] = {with_port(hosts[i]), "Content-Type: application/json", NULL};
        resp r = http("GET", "/control/state", h, NULL, NULL);
        if (r.status != 421)
            fail_msg("GET /control/state with %s: %ld", h[0], r.status);
        assert_non_null(strstr(r.body, "DNS rebinding"));
        resp_free(&r);
        r = http("GET", "/", h, NULL, NULL);
        assert_int_equal(r.status, 421);
        resp_free(&r);
        r = http("GET", "/control/file?file_id=x", h, NULL, NULL);
        assert_int_equal(r.status, 421);
        resp_free(&r);
        expect_post(hj, 421, "Host");
    }
    assert_int_equal(user_messages(), 0);
    /* the Bot API is the token's to guard: bots may name the emulator as they reach it */
    char path[160];
    snprintf(path, sizeof path, "/bot%s/getMe", tg_test_token(t));
    const char *const h[] = {with_port("Host: emulator.docker.internal:%s"), NULL};
    resp r = http("GET", path, h, NULL, NULL);
    assert_int_equal(r.status, 200);
    resp_free(&r);
}

/* curl-like clients (no Origin), the page itself (its own Origin) and each name of the
 * loopback address pass. */
static void test_own_clients_pass(void **state)
{
    (void)state;
    const char *const plain[] = {"Content-Type: application/json", NULL};
    const char *const charset[] = {"Content-Type: Application/JSON; charset=utf-8", NULL};
    const char *const page[] = {"Content-Type: application/json",
                                with_port("Origin: http://127.0.0.1:%s"), NULL};
    const char *const local[] = {"Content-Type: application/json",
                                 with_port("Host: LocalHost:%s"),
                                 with_port("Origin: http://localhost:%s"), NULL};
    const char *const v6[] = {"Content-Type: application/json", with_port("Host: [::1]:%s"),
                              NULL};
    expect_post(plain, 200, "\"ok\":true");
    expect_post(charset, 200, "\"ok\":true");
    expect_post(page, 200, "\"ok\":true");
    expect_post(local, 200, "\"ok\":true");
    expect_post(v6, 200, "\"ok\":true");
    assert_int_equal(user_messages(), 5);
    resp r = http("GET", "/", (const char *const[]){with_port("Host: localhost:%s"), NULL}, NULL,
                  NULL);
    assert_int_equal(r.status, 200);
    resp_free(&r);
}

/* The verdicts themselves, including what only a 0.0.0.0 listener or port 80 allows. */
static void test_guard_verdicts(void **state)
{
    (void)state;
    const char *why;
    assert_int_equal(emu_guard("0.0.0.0", 8081, true, true, "192.168.1.5:8081",
                               "http://192.168.1.5:8081", "application/json", &why),
                     0);
    assert_int_equal(emu_guard("0.0.0.0", 8081, true, false, "[fe80::1]:8081", NULL, NULL, &why),
                     0);
    assert_int_equal(emu_guard("0.0.0.0", 8081, true, false, "evil.example:8081", NULL, NULL, &why),
                     421);
    assert_int_equal(emu_guard("0.0.0.0", 8081, true, false, "[evil]:8081", NULL, NULL, &why), 421);
    assert_int_equal(emu_guard("127.0.0.1", 8081, true, false, "192.168.1.5:8081", NULL, NULL,
                               &why),
                     421);
    assert_int_equal(emu_guard("10.1.2.3", 8081, true, false, "10.1.2.3:8081", NULL, NULL, &why),
                     0);
    assert_int_equal(emu_guard("127.0.0.1", 80, false, false, "localhost", NULL, NULL, &why), 0);
    assert_int_equal(emu_guard("127.0.0.1", 80, true, true, "127.0.0.1", "http://127.0.0.1",
                               "application/json", &why),
                     0);
    assert_int_equal(emu_guard("127.0.0.1", 8081, false, true, NULL, "http://evil.example", NULL,
                               &why),
                     0); /* the page and its assets: Host only */
    assert_int_equal(emu_guard("127.0.0.1", 8081, true, true, NULL, NULL, "application/json",
                               &why),
                     0); /* HTTP/1.0 without Host cannot come from a rebound browser page */
    assert_int_equal(emu_guard("127.0.0.1", 8081, true, false, "", NULL, NULL, &why), 421);
    assert_int_equal(emu_guard("127.0.0.1", 8081, true, false, "[::1", NULL, NULL, &why), 421);
    assert_int_equal(emu_guard("127.0.0.1", 8081, true, false, "[::1]x8081", NULL, NULL, &why),
                     421);
    assert_int_equal(emu_guard("127.0.0.1", 8081, true, false, "127.0.0.1:", NULL, NULL, &why),
                     421);
    assert_int_equal(emu_guard("127.0.0.1", 8081, true, false, "127.0.0.1:008081", NULL, NULL,
                               &why),
                     421);
}

/* ---- item 10: links, file ids, NULs ---- */

/* A Bot API call with a JSON body as bot token; the answer. */
static resp bot_call(const char *token, const char *method, const char *body)
{
    char path[256];
    snprintf(path, sizeof path, "/bot%s/%s", token, method);
    return http("POST", path, json_ct, body, NULL);
}

static void expect_bot(const char *token, const char *method, const char *body, long status,
                       const char *words)
{
    resp r = bot_call(token, method, body);
    if (r.status != status || !strstr(r.body, words))
        fail_msg("%s %s: %ld %s, expected %ld and \"%s\"", method, body, r.status, r.body, status,
                 words);
    resp_free(&r);
}

static void test_links_refused(void **state)
{
    (void)state;
    assert_true(tg_test_send(t, 0, 0, "/start") > 0);
    const char *tok = tg_test_token(t);
    char body[512];
    long long u = (long long)tg_test_user_id(t);
    static const char port[] = "is invalid: Wrong port number specified in the URL";
    snprintf(body, sizeof body,
             "{\"chat_id\":%lld,\"text\":\"click\",\"entities\":[{\"type\":\"text_link\","
             "\"offset\":0,\"length\":5,\"url\":\"javascript:alert(1)\"}]}",
             u);
    expect_bot(tok, "sendMessage", body, 400,
               "Bad Request: entity URL 'javascript:alert(1)' is invalid: Wrong port number");
    snprintf(body, sizeof body,
             "{\"chat_id\":%lld,\"text\":\"<a href=\\\"javascript:alert(document.cookie)\\\">"
             "x</a>\",\"parse_mode\":\"HTML\"}",
             u);
    expect_bot(tok, "sendMessage", body, 400, port);
    snprintf(body, sizeof body,
             "{\"chat_id\":%lld,\"text\":\"[x](javascript://%%0aalert)\",\"parse_mode\":"
             "\"MarkdownV2\"}",
             u);
    expect_bot(tok, "sendMessage", body, 400, "is invalid: Unsupported URL protocol");
    snprintf(body, sizeof body,
             "{\"chat_id\":%lld,\"caption\":\"c\",\"photo\":\"https://x.y/a.png\","
             "\"caption_entities\":[{\"type\":\"text_link\",\"offset\":0,\"length\":1,"
             "\"url\":\"data:text/html,hi\"}]}",
             u);
    expect_bot(tok, "sendPhoto", body, 400, port);
    snprintf(body, sizeof body,
             "{\"chat_id\":%lld,\"text\":\"k\",\"reply_markup\":{\"inline_keyboard\":[[{"
             "\"text\":\"go\",\"url\":\"javascript:alert(1)\"}]]}}",
             u);
    expect_bot(tok, "sendMessage", body, 400,
               "Bad Request: inline keyboard button URL 'javascript:alert(1)' is invalid");
    /* what Telegram keeps: scheme-less links get http://, tg:// stays */
    snprintf(body, sizeof body,
             "{\"chat_id\":%lld,\"text\":\"ok\",\"entities\":[{\"type\":\"text_link\","
             "\"offset\":0,\"length\":2,\"url\":\"t.me/x\"}],\"reply_markup\":{"
             "\"inline_keyboard\":[[{\"text\":\"me\",\"url\":\"tg://user?id=%lld\"}]]}}",
             u, u);
    resp r = bot_call(tok, "sendMessage", body);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"url\":\"http://t.me/x\""));
    assert_non_null(strstr(r.body, "\"url\":\"tg://user?id="));
    json_t *j = json_loads(r.body, 0, NULL);
    long long mid = (long long)json_integer_value(
        json_object_get(json_object_get(j, "result"), "message_id"));
    json_decref(j);
    resp_free(&r);
    snprintf(body, sizeof body,
             "{\"chat_id\":%lld,\"message_id\":%lld,\"reply_markup\":{\"inline_keyboard\":"
             "[[{\"text\":\"go\",\"url\":\"vbscript://x\"}]]}}",
             u, mid);
    expect_bot(tok, "editMessageReplyMarkup", body, 400,
               "inline keyboard button URL 'vbscript://x' is invalid: Unsupported URL protocol");
}

/* An inline result the user picks carries the bot's links into the chat: checked too. */
static void test_inline_result_links_refused(void **state)
{
    (void)state;
    resp r = http("POST", "/control/inline", json_ct, "{\"query\":\"q\"}", NULL);
    assert_int_equal(r.status, 200);
    json_t *j = json_loads(r.body, 0, NULL);
    char qid[64];
    snprintf(qid, sizeof qid, "%s", json_string_value(json_object_get(j, "query_id")));
    json_decref(j);
    resp_free(&r);
    char body[512];
    snprintf(body, sizeof body,
             "{\"inline_query_id\":\"%s\",\"results\":[{\"type\":\"article\",\"id\":\"a\","
             "\"title\":\"A\",\"input_message_content\":{\"message_text\":\"<a href=\\\""
             "javascript:alert(1)\\\">x</a>\",\"parse_mode\":\"HTML\"}}]}",
             qid);
    expect_bot(tg_test_token(t), "answerInlineQuery", body, 200, "true");
    r = http("POST", "/control/choose", json_ct, "{\"result_id\":\"a\"}", NULL);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "entity URL 'javascript:alert(1)' is invalid"));
    resp_free(&r);
    assert_int_equal(user_messages(), 0);
}

#define OTHER_TOKEN "7000002:AAHtgkitEmulatorOtherTokenAAAAAAAAA"

/* The first file_id in a JSON text (static copy). */
static const char *first_file_id(const char *json)
{
    static char id[128];
    const char *p = strstr(json, "\"file_id\":\"");
    assert_non_null(p);
    snprintf(id, sizeof id, "%.*s", (int)strcspn(p + 11, "\""), p + 11);
    return id;
}

/* File ids are per bot: bot B cannot use bot A's file until it is shown it. */
static void test_file_ids_are_per_bot(void **state)
{
    (void)state;
    assert_true(tg_test_send(t, 0, 0, "/start") > 0);
    char a_id[128], a_path[128], b_id[128], body[512], path[512];
    upload(evil_document, "sendDocument", "document", a_id, sizeof a_id, a_path, sizeof a_path);
    upload(evil_document, "sendDocument", "document", b_id, sizeof b_id, path, sizeof path);
    /* random, not a counter: two uploads in a row share no run of the id after its prefix */
    assert_true(strlen(a_id) >= 24 && strlen(b_id) >= 24);
    assert_null(strstr(a_id, "0000"));
    size_t same = 0;
    for (size_t i = 4; a_id[i] && b_id[i]; i++)
        same += a_id[i] == b_id[i];
    assert_true(same < 8);
    expect_bot(OTHER_TOKEN, "getMe", "{}", 200, "\"is_bot\":true");
    snprintf(body, sizeof body, "{\"file_id\":\"%s\"}", a_id);
    expect_bot(OTHER_TOKEN, "getFile", body, 400, "Bad Request: invalid file_id");
    expect_bot(tg_test_token(t), "getFile", body, 200, a_path);
    /* nor send it (to a user who started it), nor download it by its path */
    resp r = http("POST", "/control/send", json_ct, "{\"bot_id\":7000002,\"text\":\"/start\"}",
                  NULL);
    assert_int_equal(r.status, 200);
    resp_free(&r);
    snprintf(body, sizeof body, "{\"chat_id\":%lld,\"document\":\"%s\"}",
             (long long)tg_test_user_id(t), a_id);
    expect_bot(OTHER_TOKEN, "sendDocument", body, 400, "wrong file identifier/HTTP URL specified");
    snprintf(path, sizeof path, "/file/bot%s/%s", OTHER_TOKEN, a_path);
    r = http("GET", path, NULL, NULL, NULL);
    assert_int_equal(r.status, 404);
    resp_free(&r);
    /* a file the user sends to bot B is B's (and not A's) */
    char send[256];
    snprintf(send, sizeof send, "{\"bot_id\":7000002,\"file_name\":\"n.txt\",\"data\":\"x\"}");
    r = http("POST", "/control/document", json_ct, send, NULL);
    assert_int_equal(r.status, 200);
    char user_id[128];
    snprintf(user_id, sizeof user_id, "%s", first_file_id(r.body));
    resp_free(&r);
    snprintf(body, sizeof body, "{\"file_id\":\"%s\"}", user_id);
    expect_bot(OTHER_TOKEN, "getFile", body, 200, "\"file_path\"");
    expect_bot(tg_test_token(t), "getFile", body, 400, "invalid file_id");
    /* and the web chat sees every file */
    snprintf(path, sizeof path, "/control/file?file_id=%s", a_id);
    r = http("GET", path, NULL, NULL, NULL);
    assert_int_equal(r.status, 200);
    resp_free(&r);
}

/* libmicrohttpd hands over %00 as a NUL that ends the path: "file_1.html%00.png" must not
 * be read as "file_1.html". */
static void test_nul_in_uri_refused(void **state)
{
    (void)state;
    assert_true(tg_test_send(t, 0, 0, "/start") > 0);
    char id[128], fpath[128], path[512];
    upload(evil_document, "sendDocument", "document", id, sizeof id, fpath, sizeof fpath);
    snprintf(path, sizeof path, "/file/bot%s/%s", tg_test_token(t), fpath);
    resp r = http("GET", path, NULL, NULL, NULL);
    assert_int_equal(r.status, 200);
    resp_free(&r);
    snprintf(path, sizeof path, "/file/bot%s/%s%%00.png", tg_test_token(t), fpath);
    r = http("GET", path, NULL, NULL, NULL);
    assert_int_equal(r.status, 404);
    resp_free(&r);
    snprintf(path, sizeof path, "/control/file?file_id=%s%%00x", id);
    r = http("GET", path, NULL, NULL, NULL);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "NUL"));
    resp_free(&r);
    snprintf(path, sizeof path, "/bot%s/getMe%%00x", tg_test_token(t));
    r = http("GET", path, NULL, NULL, NULL);
    assert_int_equal(r.status, 404);
    resp_free(&r);
    /* an escaped percent sign is no NUL */
    snprintf(path, sizeof path, "/control/file?file_id=%s%%2500", id);
    r = http("GET", path, NULL, NULL, NULL);
    assert_int_equal(r.status, 404);
    resp_free(&r);
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

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_uploaded_html_is_an_attachment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_odd_types_become_octet_stream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_images_stay_inline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_page_has_a_csp, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cross_origin_posts_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rebinding_host_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_own_clients_pass, setup, teardown),
        cmocka_unit_test(test_guard_verdicts),
        cmocka_unit_test_setup_teardown(test_links_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_inline_result_links_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_ids_are_per_bot, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nul_in_uri_refused, setup, teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
