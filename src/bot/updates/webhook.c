/*
 * webhook: the HTTP(S) endpoint Telegram posts updates to, on libmicrohttpd.
 *
 * Checks happen as soon as the headers are in, before any body byte is read: path (404),
 * method (405), secret token (401, constant-time compare), content type (415) and a declared
 * Content-Length over the cap (413). The body is then collected into a capped buffer (a
 * chunked body that grows past the cap also gets 413) and handed to the dispatcher, whose
 * strict tokenizer decides 400; the answer is 200 once the update is queued and 503 when the
 * queue stays full (Telegram retries later).
 *
 * The daemon comes from core/httpd: epoll (no descriptor ceiling), a connection limit sized
 * from the open-files limit, a per-IP limit and a deadline for each request, so clients
 * trickling headers cannot hold every slot (slowloris).
 *
 * Invariants: a request holds at most max_body_bytes; rejections never echo the secret or
 * the body; everything MHD calls runs on its threads and touches only the request's own
 * state, the dispatcher (thread-safe) and atomic counters.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "bot/dispatch/dispatch_int.h"
#include "bot/fleet/fleet_int.h"
#include "core/alloc.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/httpd.h"
#include "core/sized.h"
#include "core/str.h"
#include "tgbot/updates.h"

struct tg_webhook {
    struct tg__httpd *httpd;
    tg_dispatcher *d;
    tg_fleet *fleet;        /* set: publish to the fleet's streams instead of feeding d */
    atomic_bool fleet_down; /* the last publish failed (log once per outage) */
    char *path;
    char *secret;
    size_t secret_len;
    char *cert_pem;
    char *key_pem;
    size_t max_body;
    uint32_t queue_wait_ms;
    uint32_t reply_wait_ms;
    uint16_t port;
    atomic_ullong accepted, rejected, busy;
};

struct request {
    tg__buf body;
    bool too_big;
};

static _Thread_local char wh_err[256];

const char *tg_webhook_errmsg(void)
{
    return wh_err;
}

static void wh_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void wh_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(wh_err, sizeof wh_err, fmt, ap);
    va_end(ap);
}

static enum MHD_Result answer(tg_webhook *w, struct MHD_Connection *c, unsigned code,
                              const char *text)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
    if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, "Allow", "POST");
    enum MHD_Result rc = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    if (code == MHD_HTTP_OK)
        atomic_fetch_add(&w->accepted, 1);
    else if (code == MHD_HTTP_SERVICE_UNAVAILABLE)
        atomic_fetch_add(&w->busy, 1);
    else
        atomic_fetch_add(&w->rejected, 1);
    return rc;
}

static bool json_content_type(const char *ct)
{
    static const char want[] = "application/json";
    if (!ct || strncasecmp(ct, want, sizeof want - 1) != 0)
        return false;
    ct += sizeof want - 1;
    return *ct == '\0' || *ct == ';' || *ct == ' ';
}

/* Header checks; returns 0 when the request may proceed, else the status to answer. */
static unsigned check_headers(tg_webhook *w, struct MHD_Connection *c, const char *url,
                              const char *method, const char **why)
{
    if (strcmp(url, w->path) != 0)
        return *why = "not found", MHD_HTTP_NOT_FOUND;
    if (strcmp(method, "POST") != 0)
        return *why = "only POST is allowed", MHD_HTTP_METHOD_NOT_ALLOWED;
    if (w->secret) {
        const char *tok =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Telegram-Bot-Api-Secret-Token");
        if (!tok || !tg__ct_streq(tok, strlen(tok), w->secret, w->secret_len))
            return *why = "secret token missing or wrong", MHD_HTTP_UNAUTHORIZED;
    }
    if (!json_content_type(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type")))
        return *why = "Content-Type must be application/json", MHD_HTTP_UNSUPPORTED_MEDIA_TYPE;
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    uint64_t n;
    if (cl && tg__parse_u64(cl, strlen(cl), &n) == 0 && n > w->max_body)
        return *why = "body too large", MHD_HTTP_CONTENT_TOO_LARGE;
    return 0;
}

/* 200 with the handler's method call as the body (reply_wait_ms), else an empty 200. */
static enum MHD_Result answer_ok(tg_webhook *w, struct MHD_Connection *c, struct tg__reply *rp)
{
    size_t len = 0;
    char *body = rp ? tg__reply_wait(rp, tg__now_ms() + w->reply_wait_ms, &len) : NULL;
    tg__reply_release(rp);
    if (!body)
        return answer(w, c, MHD_HTTP_OK, "");
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_COPY);
    tg__free(body);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    atomic_fetch_add(&w->accepted, 1);
    return rc;
}

static void wh_log(tg_webhook *w, int level, const char *msg, ...)
    __attribute__((format(printf, 3, 4)));

static void wh_log(tg_webhook *w, int level, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (w->d)
        tg__dispatcher_log(w->d, level, "%s", line);
    else
        tg__log(NULL, level, "%s", line);
}

/* Fleet ingress: 200 only once Redis stored the update, 503 while it cannot. */
static enum MHD_Result publish(tg_webhook *w, struct MHD_Connection *c, struct request *rq)
{
    char err[256];
    tg_status st =
        tg__fleet_publish(w->fleet, tg__buf_cstr(&rq->body), rq->body.len, err, sizeof err);
    if (st == TG_OK && atomic_exchange(&w->fleet_down, false))
        wh_log(w, TG__LOG_INFO, "webhook: fleet storage reachable again");
    if (st == TG_OK)
        return answer(w, c, MHD_HTTP_OK, "");
    if (st == TG_ERR_DECODE)
        return answer(w, c, MHD_HTTP_BAD_REQUEST, err);
    if (!atomic_exchange(&w->fleet_down, true))
        wh_log(w, TG__LOG_WARN, "webhook: %s; answering 503 until it is back", err);
    return answer(w, c, MHD_HTTP_SERVICE_UNAVAILABLE, "storage unavailable, retry later");
}

static enum MHD_Result finish(tg_webhook *w, struct MHD_Connection *c, struct request *rq)
{
    if (rq->too_big)
        return answer(w, c, MHD_HTTP_CONTENT_TOO_LARGE, "body too large");
    if (w->fleet)
        return publish(w, c, rq);
    char err[256];
    struct tg__reply *rp = w->reply_wait_ms ? tg__reply_new() : NULL;
    tg_status st = tg__dispatcher_feed(w->d, tg__buf_cstr(&rq->body), rq->body.len,
                                       w->queue_wait_ms, NULL, NULL, rp, err, sizeof err);
    if (st == TG_OK)
        return answer_ok(w, c, rp);
    tg__reply_release(rp);
    switch (st) {
    case TG_ERR_DECODE:
        return answer(w, c, MHD_HTTP_BAD_REQUEST, err);
    case TG_ERR_FLOOD:
    case TG_ERR_CANCELLED:
        return answer(w, c, MHD_HTTP_SERVICE_UNAVAILABLE, "busy, retry later");
    default:
        return answer(w, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal error");
    }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *data_size, void **con_cls)
{
    tg_webhook *w = cls;
    struct request *rq = *con_cls;
    (void)version;
    if (!rq) {
        const char *why = "";
        unsigned code = check_headers(w, c, url, method, &why);
        if (code)
            return answer(w, c, code, why);
        rq = tg__calloc(1, sizeof *rq);
        if (!rq)
            return MHD_NO;
        tg__buf_init(&rq->body, w->max_body);
        *con_cls = rq;
        return MHD_YES;
    }
    if (*data_size) {
        if (!rq->too_big && tg__buf_append(&rq->body, data, *data_size) != 0) {
            rq->too_big = true;
            tg__buf_cleanup(&rq->body);
        }
        *data_size = 0;
        return MHD_YES;
    }
    return finish(w, c, rq);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct request *rq = *con_cls;
    (void)cls;
    (void)c;
    (void)toe;
    if (rq) {
        tg__buf_cleanup(&rq->body);
        tg__free(rq);
        *con_cls = NULL;
    }
}

static bool valid_secret(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > 256)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '-'))
            return false;
    }
    return true;
}

static char *read_pem(const char *path, const char *what)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        wh_fail("webhook: cannot open %s file %s: %s", what, path, strerror(errno));
        return NULL;
    }
    tg__buf b;
    tg__buf_init(&b, 1 << 20);
    char chunk[4096];
    size_t n;
    int rc = 0;
    while (rc == 0 && (n = fread(chunk, 1, sizeof chunk, f)) > 0)
        rc = tg__buf_append(&b, chunk, n);
    fclose(f);
    if (rc != 0 || b.len == 0) {
        wh_fail("webhook: %s file %s is %s", what, path, rc ? "too large" : "empty");
        tg__buf_cleanup(&b);
        return NULL;
    }
    return tg__buf_detach(&b, NULL);
}

static void wh_free(tg_webhook *w)
{
    if (!w)
        return;
    if (w->secret) {
        explicit_bzero(w->secret, w->secret_len);
        tg__free(w->secret);
    }
    if (w->key_pem) {
        explicit_bzero(w->key_pem, strlen(w->key_pem));
        tg__free(w->key_pem);
    }
    tg__free(w->cert_pem);
    tg__free(w->path);
    tg__free(w);
}

static bool copy_config(tg_webhook *w, const tg_webhook_options *o)
{
    w->path = tg__strdup(o->path ? o->path : "/");
    w->max_body = o->max_body_bytes ? o->max_body_bytes : (size_t)1 << 20;
    w->queue_wait_ms = o->queue_wait_ms;
    w->reply_wait_ms = o->reply_wait_ms;
    w->fleet = o->fleet;
    if (w->fleet && w->reply_wait_ms)
        return wh_fail("webhook: reply_wait_ms cannot be used with a fleet (handlers run on "
                       "the workers, after the answer)"),
               false;
    if (!w->path)
        return wh_fail("webhook: out of memory"), false;
    if (w->path[0] != '/')
        return wh_fail("webhook: path \"%s\" must start with '/'", w->path), false;
    if (o->secret_token) {
        if (!valid_secret(o->secret_token))
            return wh_fail("webhook: secret_token must be 1-256 of [A-Za-z0-9_-]"), false;
        w->secret = tg__strdup(o->secret_token);
        w->secret_len = strlen(o->secret_token);
        if (!w->secret)
            return wh_fail("webhook: out of memory"), false;
    }
    if (!o->cert_file != !o->key_file)
        return wh_fail("webhook: HTTPS needs both cert_file and key_file"), false;
    if (o->cert_file) {
        w->cert_pem = read_pem(o->cert_file, "certificate");
        w->key_pem = w->cert_pem ? read_pem(o->key_file, "key") : NULL;
        if (!w->key_pem)
            return false;
    }
    return true;
}

static bool start_mhd(tg_webhook *w, const tg_webhook_options *o)
{
    const char *host = o->host ? o->host : "0.0.0.0";
    int port = o->port == 0 ? 8443 : o->port < 0 ? 0 : o->port;
    struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port)};
    struct sockaddr *sa = (struct sockaddr *)&a4;
    if (inet_pton(AF_INET6, host, &a6.sin6_addr) == 1)
        sa = (struct sockaddr *)&a6;
    else if (inet_pton(AF_INET, host, &a4.sin_addr) != 1)
        return wh_fail("webhook: host \"%s\" is not an IPv4 or IPv6 address", host), false;
    if (port > 65535)
        return wh_fail("webhook: port %d out of range", port), false;
    struct tg__httpd_opts ho = {
        .addr = sa,
        .handler = on_request,
        .handler_cls = w,
        .completed = on_completed,
        .completed_cls = w,
        .threads = o->threads ? o->threads : 2,
        .max_connections = o->max_server_connections,
        .per_ip = o->max_connections_per_ip ? o->max_connections_per_ip : 128,
        .idle_timeout_s = 30,
        .request_timeout_ms = o->request_timeout_ms ? o->request_timeout_ms : 10000,
        .cert_pem = w->cert_pem,
        .key_pem = w->key_pem,
    };
    w->httpd = tg__httpd_start(&ho);
    if (!w->httpd)
        return wh_fail("webhook: cannot listen on %s:%d (address in use, no permission, or a "
                       "bad certificate/key)",
                       host, port),
               false;
    w->port = tg__httpd_port(w->httpd) ? tg__httpd_port(w->httpd) : (uint16_t)port;
    return true;
}

tg_webhook *tg_webhook_start_sized(tg_dispatcher *d, const tg_webhook_options *opts,
                                   size_t opts_size)
{
    tg_webhook_options copy;
    const tg_webhook_options *o = &copy;
    wh_err[0] = '\0';
    if (!tg__sized_in(&copy, sizeof copy, opts, opts_size))
        return wh_fail("webhook: options: " TG__SIZED_ERRMSG), NULL;
    if (!d && !o->fleet)
        return wh_fail("webhook: dispatcher is NULL"), NULL;
    if (d && d->loop)
        return wh_fail("webhook: the dispatcher is in loop mode (.async); the webhook server "
                       "feeds from its own threads: use a dispatcher with workers"),
               NULL;
    tg_webhook *w = tg__calloc(1, sizeof *w);
    if (!w)
        return wh_fail("webhook: out of memory"), NULL;
    w->d = d;
    if (!copy_config(w, o) || !start_mhd(w, o)) {
        wh_free(w);
        return NULL;
    }
    return w;
}

uint16_t tg_webhook_port(const tg_webhook *w)
{
    return w ? w->port : 0;
}

void tg_webhook_get_stats_sized(tg_webhook *w, tg_webhook_stats *out, size_t out_size)
{
    tg_webhook_stats st = {.accepted = atomic_load(&w->accepted),
                           .rejected = atomic_load(&w->rejected),
                           .busy = atomic_load(&w->busy),
                           .timed_out = tg__httpd_expired(w->httpd)};
    tg__sized_out(out, out_size, &st, sizeof st);
}

void tg_webhook_stop(tg_webhook *w)
{
    if (!w)
        return;
    tg__httpd_stop(w->httpd);
    wh_free(w);
}
