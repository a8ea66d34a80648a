/*
 * curl.c: the default transport, one reused curl easy handle per tg_ctx.
 *
 * Everything that does not change between requests (share handle, timeouts, proxy, CA, user
 * agent, HTTP/2, callbacks) is set once in conn_new; perform only sets the URL, the body and
 * the sink. The bot's share handle (connections, DNS, TLS sessions) lets every ctx reuse
 * every connection, and curl's own keep-alive keeps them open.
 *
 * Secrets: the URL holds the token. curl's error buffer never quotes the URL path, and
 * verbose output (only at TRACE level) goes through the bot's logger, which scrubs it.
 * Cancellation: the progress callback polls the ctx's cancel flag and the bot's shutdown
 * flag; curl calls it at least once a second while a transfer waits.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <string.h>

#include "bot/client/client_int.h"
#include "core/alloc.h"
#include "core/str.h"

struct curl_conn {
    CURL *h;
    const tg_bot *bot;
    struct curl_slist *json_headers;  /* Content-Type: application/json, no Expect */
    struct curl_slist *plain_headers; /* no Expect */
    tg__buf url;                      /* SECRET: the URL last given to curl */
    char errbuf[CURL_ERROR_SIZE];
    /* per request */
    const tg_http_request *req;
    bool (*cancelled)(void *);
    void *cancel_user;
    bool write_aborted;
    bool status_told;
};

struct mem_src {
    const char *p;
    size_t len, off;
};

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *user)
{
    tg_bot *bot = user;
    (void)h;
    (void)access;
    pthread_mutex_lock(&bot->share_mu[(size_t)data % 8]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *user)
{
    tg_bot *bot = user;
    (void)h;
    pthread_mutex_unlock(&bot->share_mu[(size_t)data % 8]);
}

int tg__curl_share_new(tg_bot *bot)
{
    CURLSH *sh = curl_share_init();
    if (!sh)
        return -1;
    curl_share_setopt(sh, CURLSHOPT_LOCKFUNC, share_lock);
    curl_share_setopt(sh, CURLSHOPT_UNLOCKFUNC, share_unlock);
    curl_share_setopt(sh, CURLSHOPT_USERDATA, bot);
    curl_share_setopt(sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    curl_share_setopt(sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
    bot->share = sh;
    return 0;
}

void tg__curl_share_free(tg_bot *bot)
{
    if (bot->share)
        curl_share_cleanup(bot->share);
    bot->share = NULL;
}

static size_t on_write(char *p, size_t size, size_t n, void *user)
{
    struct curl_conn *c = user;
    size_t len = size * n;
    if (!c->status_told && c->req->on_status) {
        long status = 0;
        curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &status);
        c->req->on_status(c->req->write_user, (int)status);
    }
    c->status_told = true;
    if (c->req->write(c->req->write_user, p, len) != len) {
        c->write_aborted = true;
        return 0;
    }
    return len;
}

static int on_progress(void *user, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    struct curl_conn *c = user;
    (void)dt, (void)dn, (void)ut, (void)un;
    return c->cancelled && c->cancelled(c->cancel_user) ? 1 : 0;
}

static int on_debug(CURL *h, curl_infotype type, char *data, size_t size, void *user)
{
    const struct curl_conn *c = user;
    (void)h;
    if (type != CURLINFO_TEXT && type != CURLINFO_HEADER_IN && type != CURLINFO_HEADER_OUT)
        return 0;
    while (size > 0 && (data[size - 1] == '\n' || data[size - 1] == '\r'))
        size--;
    /* The logger scrubs the token from the formatted line (request lines carry it). */
    tg__log((tg__logger *)&c->bot->log, TG__LOG_TRACE, "curl %s %.*s",
            type == CURLINFO_TEXT        ? "*"
            : type == CURLINFO_HEADER_IN ? "<"
                                         : ">",
            (int)(size > 900 ? 900 : size), data);
    return 0;
}

static void set_fixed_options(struct curl_conn *c, const tg_bot *bot)
{
    CURL *h = c->h;
    curl_easy_setopt(h, CURLOPT_SHARE, bot->share);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->errbuf);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)bot->connect_timeout_ms);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    /* The shared cache closes idle connections beyond this (curl's default, 5, made a bot
     * with 8 busy threads open a new connection for almost every call). */
    curl_easy_setopt(h, CURLOPT_MAXCONNECTS, (long)bot->max_connections);
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    /* An explicit proxy, or none: the environment's proxy variables are not used. (NOPROXY
     * "*" rather than PROXY "": the latter costs curl a malloc per request.) */
    if (bot->proxy)
        curl_easy_setopt(h, CURLOPT_PROXY, bot->proxy);
    else
        curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    if (bot->ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, bot->ca_file);
    if (bot->ca_path)
        curl_easy_setopt(h, CURLOPT_CAPATH, bot->ca_path);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, c);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    if (tg__log_enabled(&bot->log, TG__LOG_TRACE)) {
        curl_easy_setopt(h, CURLOPT_DEBUGFUNCTION, on_debug);
        curl_easy_setopt(h, CURLOPT_DEBUGDATA, c);
        curl_easy_setopt(h, CURLOPT_VERBOSE, 1L);
    }
}

static void conn_free(void *p)
{
    struct curl_conn *c = p;
    if (!c)
        return;
    if (c->h)
        curl_easy_cleanup(c->h);
    curl_slist_free_all(c->json_headers);
    curl_slist_free_all(c->plain_headers);
    if (c->url.data)
        memset(c->url.data, 0, c->url.cap);
    tg__buf_cleanup(&c->url);
    tg__free(c);
}

/* Append to *l; on failure free the whole list (curl leaves it unchanged) and return -1. */
static int header_add(struct curl_slist **l, const char *line)
{
    struct curl_slist *n = curl_slist_append(*l, line);
    if (!n) {
        curl_slist_free_all(*l);
        *l = NULL;
        return -1;
    }
    *l = n;
    return 0;
}

/* The user agent goes in the header lists: set through CURLOPT_USERAGENT, curl formats the
 * header anew on every request (one malloc per call); "Expect:" stops 100-continue waits. */
static int build_headers(struct curl_conn *c, const tg_bot *bot)
{
    char ua[300];
    snprintf(ua, sizeof ua, "User-Agent: %s", bot->user_agent);
    if (header_add(&c->json_headers, ua) != 0 ||
        header_add(&c->json_headers, "Content-Type: application/json") != 0 ||
        header_add(&c->json_headers, "Expect:") != 0 || header_add(&c->plain_headers, ua) != 0 ||
        header_add(&c->plain_headers, "Expect:") != 0)
        return -1;
    return 0;
}

static void *conn_new(void *user, const tg_bot *bot)
{
    (void)user;
    struct curl_conn *c = tg__calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->bot = bot;
    c->h = curl_easy_init();
    tg__buf_init(&c->url, 0);
    if (!c->h || build_headers(c, bot) != 0) {
        conn_free(c);
        return NULL;
    }
    set_fixed_options(c, bot);
    return c;
}

static size_t mem_read(char *buf, size_t size, size_t n, void *arg)
{
    struct mem_src *m = arg;
    size_t want = size * n, left = m->len - m->off;
    if (want > left)
        want = left;
    memcpy(buf, m->p + m->off, want);
    m->off += want;
    return want;
}

static int mem_seek(void *arg, curl_off_t off, int origin)
{
    struct mem_src *m = arg;
    if (origin != SEEK_SET || off < 0 || (size_t)off > m->len)
        return CURL_SEEKFUNC_FAIL;
    m->off = (size_t)off;
    return CURL_SEEKFUNC_OK;
}

static size_t cb_read(char *buf, size_t size, size_t n, void *arg)
{
    const tg_file_part *f = arg;
    size_t got = f->read(f->read_user, buf, size * n);
    return got == (size_t)-1 ? CURL_READFUNC_ABORT : got;
}

static CURLcode add_file(curl_mimepart *part, const tg_file_part *f, struct mem_src *m)
{
    CURLcode rc = curl_mime_name(part, f->name);
    if (rc == CURLE_OK && f->path)
        rc = curl_mime_filedata(part, f->path); /* streamed; sets the file name too */
    else if (rc == CURLE_OK && f->data) {
        *m = (struct mem_src){.p = f->data, .len = f->len};
        rc = curl_mime_data_cb(part, (curl_off_t)f->len, mem_read, mem_seek, NULL, m);
    } else if (rc == CURLE_OK)
        rc = curl_mime_data_cb(part, f->size >= 0 ? (curl_off_t)f->size : -1, cb_read, NULL, NULL,
                               (void *)f);
    if (rc == CURLE_OK && (f->filename || !f->path))
        rc = curl_mime_filename(part, f->filename ? f->filename : "file");
    if (rc == CURLE_OK)
        rc = curl_mime_type(part, f->content_type ? f->content_type : "application/octet-stream");
    return rc;
}

/* Build the form. mem holds one reader state per file (caller-owned, nfiles entries). */
static curl_mime *build_mime(CURL *h, const tg_http_request *req, struct mem_src *mem)
{
    curl_mime *mime = curl_mime_init(h);
    CURLcode rc = mime ? CURLE_OK : CURLE_OUT_OF_MEMORY;
    for (size_t i = 0; rc == CURLE_OK && i < req->nfields; i++) {
        curl_mimepart *part = curl_mime_addpart(mime);
        rc = part ? curl_mime_name(part, req->fields[i].name) : CURLE_OUT_OF_MEMORY;
        if (rc == CURLE_OK)
            rc = curl_mime_data(part, req->fields[i].value, req->fields[i].len);
    }
    for (size_t i = 0; rc == CURLE_OK && i < req->nfiles; i++) {
        curl_mimepart *part = curl_mime_addpart(mime);
        rc = part ? add_file(part, &req->files[i], &mem[i]) : CURLE_OUT_OF_MEMORY;
    }
    if (rc != CURLE_OK) {
        curl_mime_free(mime);
        return NULL;
    }
    return mime;
}

static bool sent_before_failure(CURL *h, CURLcode rc)
{
    curl_off_t pre = 0;
    switch (rc) {
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
        return false;
    default:
        /* Nothing went out before the connection was set up. */
        if (curl_easy_getinfo(h, CURLINFO_PRETRANSFER_TIME_T, &pre) == CURLE_OK && pre == 0)
            return false;
        return true;
    }
}

static void fill_result(struct curl_conn *c, CURLcode rc, tg_http_result *res)
{
    long status = 0, connects = 0;
    curl_easy_getinfo(c->h, CURLINFO_NUM_CONNECTS, &connects);
    res->connects = (uint32_t)connects;
    res->code = (int)rc;
    if (rc == CURLE_OK) {
        curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &status);
        res->status = TG_OK;
        res->http_status = (int)status;
        res->sent = true;
        return;
    }
    res->sent = sent_before_failure(c->h, rc);
    res->aborted = c->write_aborted;
    tg__strlcpy(res->msg, c->errbuf[0] ? c->errbuf : curl_easy_strerror(rc), sizeof res->msg);
    /* Aborted by us (cancel, shutdown) or by an upload's read callback. */
    if (rc == CURLE_ABORTED_BY_CALLBACK && c->cancelled && c->cancelled(c->cancel_user))
        res->status = TG_ERR_CANCELLED;
    else if (rc == CURLE_ABORTED_BY_CALLBACK)
        res->status = TG_ERR_IO;
    else if (rc == CURLE_OPERATION_TIMEDOUT)
        res->status = TG_ERR_TIMEOUT;
    else if (rc == CURLE_READ_ERROR || rc == CURLE_FILE_COULDNT_READ_FILE)
        res->status = TG_ERR_IO;
    else
        res->status = TG_ERR_TRANSPORT;
}

static void perform(void *p, const tg_http_request *req, tg_http_result *res,
                    bool (*cancelled)(void *), void *cancel_user)
{
    struct curl_conn *c = p;
    CURL *h = c->h;
    struct mem_src mem_small[4];
    struct mem_src *mem = req->nfiles <= 4 ? mem_small : tg__calloc(req->nfiles, sizeof *mem);
    curl_mime *mime = NULL;
    c->req = req;
    c->cancelled = cancelled;
    c->cancel_user = cancel_user;
    c->write_aborted = false;
    c->status_told = false;
    c->errbuf[0] = '\0';
    memset(res, 0, sizeof *res);
    /* curl copies the URL on every set: set it only when it changes (same method again) */
    if (strcmp(tg__buf_cstr(&c->url), req->url) != 0) {
        tg__buf_reset(&c->url);
        tg__buf_puts(&c->url, req->url);
        curl_easy_setopt(h, CURLOPT_URL, req->url);
    }
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)req->timeout_ms);
    if (!req->post) {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->plain_headers);
    } else if (req->nfields + req->nfiles > 0) {
        mime = mem ? build_mime(h, req, mem) : NULL;
        if (!mime) {
            res->status = TG_ERR_NOMEM;
            tg__strlcpy(res->msg, "cannot build the multipart form", sizeof res->msg);
            goto out;
        }
        curl_easy_setopt(h, CURLOPT_MIMEPOST, mime);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->plain_headers);
    } else {
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body ? req->body : "");
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->json_headers);
    }
    fill_result(c, curl_easy_perform(h), res);
    if (res->status == TG_OK && !c->status_told && req->on_status)
        req->on_status(req->write_user, res->http_status);
out:
    if (mime) {
        curl_easy_setopt(h, CURLOPT_MIMEPOST, NULL);
        curl_mime_free(mime);
    }
    if (mem != mem_small)
        tg__free(mem);
    c->req = NULL;
}

const tg_transport tg__curl_transport = {
    .conn_new = conn_new,
    .perform = perform,
    .conn_free = conn_free,
    .user = NULL,
};
