/*
 * test_client_files: multipart uploads (path, memory, read callback, attach://) and
 * downloads (getFile, to a path, to memory with the cap, to a callback, local absolute
 * paths) against the fake server, plus a 50 MB upload checked byte for byte (SHA-256 of
 * every received byte) while the client's RSS stays small.
 */
#include "tgtest.h"

#include <openssl/evp.h>
#include <unistd.h>

#include "bot_server.h"
#include "tgbot/tgbot.h"

/* ASan's quarantine keeps freed memory resident, so RSS bounds mean nothing under it. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#define TOKEN  "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_"
#define OK_MSG "{\"ok\":true,\"result\":{\"message_id\":3}}"

static int setup(void **state)
{
    bot_fx *f = bot_fx_new(TOKEN, &(tg_bot_options){.timeout_ms = 120000});
    bot_server_set_reply(f->srv, "sendDocument", 200, OK_MSG);
    bot_server_set_reply(f->srv, "sendMediaGroup", 200, "{\"ok\":true,\"result\":[]}");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    bot_fx_free(*state);
    return 0;
}

static void sha256(const void *p, size_t n, unsigned char out[32])
{
    EVP_Digest(p, n, out, NULL, EVP_sha256(), NULL);
}

/* Deterministic content: byte i of the stream. */
static unsigned char pattern(uint64_t i)
{
    return (unsigned char)((i * 2654435761u) >> 13);
}

struct counter_src {
    uint64_t pos, size;
};

static size_t read_pattern(void *user, char *buf, size_t n)
{
    struct counter_src *c = user;
    size_t k = 0;
    for (; k < n && c->pos < c->size; k++, c->pos++)
        buf[k] = (char)pattern(c->pos);
    return k;
}

static size_t read_fail(void *user, char *buf, size_t n)
{
    (void)user, (void)buf, (void)n;
    return (size_t)-1;
}

static void test_upload_sources(void **state)
{
    bot_fx *f = *state;
    char path[] = "/tmp/tgkit_upload_XXXXXX";
    int fd = mkstemp(path);
    assert_int_equal(write(fd, "from disk", 9), 9);
    close(fd);
    struct counter_src src = {.size = 100000};
    tg_file_part parts[3] = {
        {.name = "document", .path = path},
        {.name = "thumbnail",
         .data = "\x89PNG",
         .len = 4,
         .filename = "t.png",
         .content_type = "image/png"},
        {.name = "extra", .read = read_pattern, .read_user = &src, .size = 100000},
    };
    const char *res;
    size_t n;
    const char *params = "{\"chat_id\":-100123,\"caption\":\"caf\\u00e9\",\"reply_markup\":"
                         "{\"inline_keyboard\":[]}}";
    assert_int_equal(
        tg_call_raw_files(f->ctx, "sendDocument", params, strlen(params), parts, 3, &res, &n),
        TG_OK);
    assert_string_equal(res, "{\"message_id\":3}");
    const bot_request *r = bot_server_last(f->srv);
    assert_string_equal(r->path, "/bot<TOKEN>/sendDocument");
    assert_int_equal(r->nparts, 6);
    assert_string_equal(bot_request_part(r, "chat_id")->data, "-100123");
    assert_string_equal(bot_request_part(r, "caption")->data, "caf\xc3\xa9");
    assert_string_equal(bot_request_part(r, "reply_markup")->data, "{\"inline_keyboard\":[]}");
    const bot_part *doc = bot_request_part(r, "document");
    assert_string_equal(doc->data, "from disk");
    assert_string_equal(doc->filename, strrchr(path, '/') + 1);
    assert_string_equal(doc->content_type, "application/octet-stream");
    const bot_part *th = bot_request_part(r, "thumbnail");
    assert_int_equal(th->size, 4);
    assert_memory_equal(th->data, "\x89PNG", 4);
    assert_string_equal(th->filename, "t.png");
    assert_string_equal(th->content_type, "image/png");
    const bot_part *ex = bot_request_part(r, "extra");
    assert_int_equal(ex->size, 100000);
    assert_string_equal(ex->filename, "file");
    for (size_t i = 0; i < ex->data_len; i++)
        if ((unsigned char)ex->data[i] != pattern(i))
            fail_msg("extra: byte %zu differs", i);

    /* a callback of unknown size (size -1): the body goes chunked, every byte arrives */
    struct counter_src open_ended = {.size = 200000};
    tg_file_part unknown = {
        .name = "document", .read = read_pattern, .read_user = &open_ended, .size = -1};
    assert_int_equal(
        tg_call_raw_files(f->ctx, "sendDocument", "{\"chat_id\":1}", 13, &unknown, 1, &res, &n),
        TG_OK);
    const bot_part *up = bot_request_part(bot_server_last(f->srv), "document");
    assert_non_null(up);
    assert_int_equal(up->size, 200000);
    for (size_t i = 0; i < up->data_len; i++)
        if ((unsigned char)up->data[i] != pattern(i))
            fail_msg("unknown size: byte %zu differs", i);

    /* a read callback that fails aborts the upload */
    tg_file_part bad = {.name = "document", .read = read_fail, .size = 10};
    assert_int_equal(
        tg_call_raw_files(f->ctx, "sendDocument", "{\"chat_id\":1}", 13, &bad, 1, &res, &n),
        TG_ERR_IO);
    /* bad part descriptions are refused before sending */
    size_t before = bot_server_nrequests(f->srv);
    tg_file_part two = {.name = "document", .path = path, .data = "x", .len = 1};
    assert_int_equal(tg_call_raw_files(f->ctx, "sendDocument", NULL, 0, &two, 1, &res, &n),
                     TG_ERR_INVALID);
    tg_file_part missing = {.name = "document", .path = "/nonexistent/x"};
    assert_int_equal(tg_call_raw_files(f->ctx, "sendDocument", NULL, 0, &missing, 1, &res, &n),
                     TG_ERR_IO);
    assert_non_null(strstr(tg_ctx_errmsg(f->ctx), "cannot open /nonexistent/x"));
    assert_int_equal(bot_server_nrequests(f->srv), before);
    unlink(path);
}

static void test_attach_media_group(void **state)
{
    bot_fx *f = *state;
    tg_file_part parts[2] = {
        {.name = "p0", .data = "AAAA", .len = 4, .filename = "a.jpg"},
        {.name = "t0", .data = "TT", .len = 2, .filename = "t.jpg"},
    };
    const char *params = "{\"chat_id\":5,\"media\":[{\"type\":\"video\",\"media\":\"attach://p0\","
                         "\"thumbnail\":\"attach://t0\"},{\"type\":\"photo\",\"media\":\"ID\"}]}";
    const char *res;
    size_t n;
    assert_int_equal(
        tg_call_raw_files(f->ctx, "sendMediaGroup", params, strlen(params), parts, 2, &res, &n),
        TG_OK);
    const bot_request *r = bot_server_last(f->srv);
    assert_non_null(strstr(bot_request_part(r, "media")->data, "\"attach://p0\""));
    assert_string_equal(bot_request_part(r, "p0")->data, "AAAA");
    assert_string_equal(bot_request_part(r, "t0")->data, "TT");
}

static void test_upload_50mb(void **state)
{
    bot_fx *f = *state;
    const size_t total = (size_t)50 << 20, chunk = (size_t)1 << 20;
    char path[] = "/tmp/tgkit_big_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unsigned char *buf = malloc(chunk), want[32];
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    EVP_DigestInit_ex(md, EVP_sha256(), NULL);
    for (size_t off = 0; off < total; off += chunk) {
        for (size_t i = 0; i < chunk; i++)
            buf[i] = pattern(off + i);
        EVP_DigestUpdate(md, buf, chunk);
        assert_int_equal(write(fd, buf, chunk), (ssize_t)chunk);
    }
    EVP_DigestFinal_ex(md, want, NULL);
    EVP_MD_CTX_free(md);
    free(buf);
    close(fd);
    long rss0 = tgtest_rss_kb();
    tg_file_part part = {.name = "document", .path = path, .filename = "big.bin"};
    const char *res;
    size_t n;
    assert_int_equal(
        tg_call_raw_files(f->ctx, "sendDocument", "{\"chat_id\":1}", 13, &part, 1, &res, &n),
        TG_OK);
    long grown_kb = tgtest_rss_kb() - rss0;
    const bot_part *doc = bot_request_part(bot_server_last(f->srv), "document");
    assert_non_null(doc);
    assert_int_equal(doc->size, total);
    assert_memory_equal(doc->sha256, want, 32);
    /* the server keeps only a 1 MiB prefix; the client streams: far below the 50 MB */
    fprintf(stderr, "50 MB upload: RSS grew by %ld KiB\n", grown_kb);
#if UNDER_ASAN
    (void)grown_kb; /* ASan's quarantine keeps freed chunks resident: RSS says nothing */
#else
    assert_true(grown_kb < 16 * 1024);
#endif
    unlink(path);
}

static void test_download(void **state)
{
    bot_fx *f = *state;
    const size_t size = 300000;
    unsigned char *blob = malloc(size), want[32], got_sha[32];
    for (size_t i = 0; i < size; i++)
        blob[i] = pattern(i);
    sha256(blob, size, want);
    bot_server_add_file(f->srv, "documents/file_1.bin", blob, size);
    bot_server_set_reply(f->srv, "getFile", 200,
                         "{\"ok\":true,\"result\":{\"file_id\":\"F1\",\"file_unique_id\":\"U\","
                         "\"file_size\":300000,\"file_path\":\"documents/file_1.bin\"}}");
    const char *fp;
    assert_int_equal(tg_get_file_path(f->ctx, "F1", &fp), TG_OK);
    assert_string_equal(fp, "documents/file_1.bin");
    assert_string_equal(bot_server_last(f->srv)->body, "{\"file_id\":\"F1\"}");

    /* to a path */
    char dest[] = "/tmp/tgkit_dl_XXXXXX";
    close(mkstemp(dest));
    assert_int_equal(tg_download_to_path(f->ctx, fp, dest), TG_OK);
    assert_string_equal(bot_server_last(f->srv)->path, "/file/bot<TOKEN>/documents/file_1.bin");
    assert_string_equal(bot_server_last(f->srv)->http_method, "GET");
    size_t n;
    char *disk = tgtest_read_file(dest, &n);
    assert_int_equal(n, size);
    assert_memory_equal(disk, blob, size);
    free(disk);

    /* to memory, under and over the cap */
    const void *data;
    size_t len;
    assert_int_equal(tg_download_to_memory(f->ctx, fp, size, &data, &len), TG_OK);
    assert_int_equal(len, size);
    sha256(data, len, got_sha);
    assert_memory_equal(got_sha, want, 32);
    assert_int_equal(tg_download_to_memory(f->ctx, fp, size - 1, &data, &len), TG_ERR_TOO_BIG);
    assert_non_null(strstr(tg_ctx_errmsg(f->ctx), "exceeds max_bytes (299999)"));

    /* a missing file: the server's 404 through the same envelope parser as calls (error_code
     * kept), naming the URL without the token; the destination removed */
    assert_int_equal(tg_download_to_path(f->ctx, "documents/nope", dest), TG_ERR_API);
    assert_int_equal(tg_ctx_error(f->ctx)->http_status, 404);
    assert_int_equal(tg_ctx_error(f->ctx)->error_code, 404);
    assert_string_equal(tg_ctx_error(f->ctx)->description, "Not Found");
    char msg[256];
    snprintf(
        msg, sizeof msg,
        "download: Bot API error 404: Not Found (URL tried: %s/file/bot<token>/documents/nope)",
        bot_server_url(f->srv));
    assert_string_equal(tg_ctx_errmsg(f->ctx), msg);
    assert_int_equal(access(dest, F_OK), -1);

    /* bad file paths are refused */
    assert_int_equal(tg_download_to_memory(f->ctx, "../etc/passwd", 0, &data, &len),
                     TG_ERR_INVALID);
    assert_int_equal(tg_download_to_memory(f->ctx, "", 0, &data, &len), TG_ERR_INVALID);
    free(blob);
}

static size_t stop_early(void *user, const char *p, size_t n)
{
    size_t *seen = user;
    (void)p;
    *seen += n;
    return *seen > 1000 ? 0 : n;
}

static void test_download_callback_and_local(void **state)
{
    bot_fx *f = *state;
    char big[20000];
    memset(big, 'z', sizeof big);
    bot_server_add_file(f->srv, "photos/p.jpg", big, sizeof big);
    size_t seen = 0;
    assert_int_equal(tg_download_to_fn(f->ctx, "photos/p.jpg", stop_early, &seen), TG_ERR_IO);
    assert_string_equal(tg_ctx_errmsg(f->ctx), "download: the write callback stopped the download");
    assert_true(seen > 1000);

    /* a local Bot API server answers absolute paths: read from disk */
    char path[] = "/tmp/tgkit_local_XXXXXX";
    int fd = mkstemp(path);
    assert_int_equal(write(fd, "local bytes", 11), 11);
    close(fd);
    size_t before = bot_server_nrequests(f->srv);
    const void *data;
    size_t len;
    assert_int_equal(tg_download_to_memory(f->ctx, path, 0, &data, &len), TG_OK);
    assert_int_equal(len, 11);
    assert_memory_equal(data, "local bytes", 11);
    assert_int_equal(bot_server_nrequests(f->srv), before);
    assert_int_equal(tg_download_to_memory(f->ctx, path, 5, &data, &len), TG_ERR_TOO_BIG);
    unlink(path);
    assert_int_equal(tg_download_to_memory(f->ctx, path, 0, &data, &len), TG_ERR_IO);

    /* getFile without file_path */
    bot_server_push_raw(f->srv, "getFile", 200, NULL,
                        "{\"ok\":true,\"result\":{\"file_id\":\"F\",\"file_unique_id\":\"U\"}}");
    const char *fp;
    assert_int_equal(tg_get_file_path(f->ctx, "F", &fp), TG_ERR_DECODE);
    assert_string_equal(tg_ctx_error(f->ctx)->json_path, "result.file_path");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_upload_sources, setup, teardown),
        cmocka_unit_test_setup_teardown(test_attach_media_group, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upload_50mb, setup, teardown),
        cmocka_unit_test_setup_teardown(test_download, setup, teardown),
        cmocka_unit_test_setup_teardown(test_download_callback_and_local, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
