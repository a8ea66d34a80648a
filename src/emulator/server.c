/*
 * server: tgbot-emulator's HTTP front (libmicrohttpd, one thread per connection, so a long
 * poll blocks only its own connection). Routes:
 *   /bot<TOKEN>/<method>        the Bot API (GET query, urlencoded, multipart or JSON body)
 *   /file/bot<TOKEN>/<path>     file downloads
 *   /control/<name>             the control API (control.c)
 *   / , /app.js, /style.css     the web chat (web.c)
 * Bodies are collected up to EMU_UPLOAD_MAX plus room for the multipart framing; a larger
 * one gets 413 before it is read. The token never reaches a log or an error text.
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/alloc.h"
#include "emulator/api.h"
#include "emulator/server.h"

#define BODY_MAX (EMU_UPLOAD_MAX + ((size_t)1 << 20)) /* bytes */

struct hreq {
    tg__buf body;
    bool too_big;
};

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *ctype,
                             const void *data, size_t len, bool copy)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        len, (void *)data, copy ? MHD_RESPMEM_MUST_COPY : MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", ctype);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    enum MHD_Result rc = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result reply_lit(struct MHD_Connection *c, unsigned code, const char *json)
{
    return reply(c, code, "application/json", json, strlen(json), false);
}

static enum MHD_Result reply_buf(struct MHD_Connection *c, unsigned code, const tg__buf *b)
{
    return reply(c, code, "application/json", b->len ? b->data : "", b->len, true);
}

static enum MHD_Result add_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *value)
{
    (void)kind;
    emu_form *f = cls;
    if (key && *key)
        emu_form_add(f, key, strlen(key), value ? value : "", value ? strlen(value) : 0);
    return MHD_YES;
}

static bool ctype_is(const char *ct, const char *want)
{
    return ct && !strncasecmp(ct, want, strlen(want));
}

static enum MHD_Result bot_api(emu *e, struct MHD_Connection *c, const char *rest,
                               const tg__buf *body)
{
    const char *slash = strchr(rest, '/');
    tg__buf out;
    tg__buf_init(&out, 0);
    char token[160];
    size_t tl = slash ? (size_t)(slash - rest) : 0;
    if (!slash || tl >= sizeof token || strchr(slash + 1, '/')) {
        tg__buf_puts(&out, "{\"ok\":false,\"error_code\":404,\"description\":\"Not Found\"}");
        enum MHD_Result rc = reply_buf(c, 404, &out);
        tg__buf_cleanup(&out);
        return rc;
    }
    memcpy(token, rest, tl);
    token[tl] = '\0';
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    emu_form f;
    emu_form_init(&f);
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, add_arg, &f);
    const char *json = NULL;
    size_t jlen = 0;
    int bad = 0;
    if (body->len && ctype_is(ct, "application/json")) {
        json = body->data;
        jlen = body->len;
    } else if (body->len && ctype_is(ct, "multipart/form-data")) {
        bad = emu_form_multipart(&f, ct, body->data, body->len);
    } else if (body->len) {
        bad = emu_form_urlencoded(&f, body->data, body->len);
    }
    int code;
    if (bad) {
        tg__buf_printf(&out, "{\"ok\":false,\"error_code\":400,\"description\":\"Bad Request: ");
        for (const char *p = f.err; *p; p++)
            tg__buf_putc(&out, *p == '"' || *p == '\\' ? '\'' : *p);
        tg__buf_puts(&out, "\"}");
        code = 400;
    } else {
        code = emu_api_call(e, token, slash + 1, json, jlen, &f, &out);
    }
    enum MHD_Result rc = reply_buf(c, (unsigned)code, &out);
    tg__buf_cleanup(&out);
    emu_form_cleanup(&f);
    return rc;
}

static enum MHD_Result file_download(emu *e, struct MHD_Connection *c, const char *rest)
{
    const char *slash = strchr(rest, '/');
    char token[160];
    size_t tl = slash ? (size_t)(slash - rest) : 0;
    if (!slash || tl >= sizeof token)
        return reply(c, 404, "text/plain", "Not Found", 9, false);
    memcpy(token, rest, tl);
    token[tl] = '\0';
    pthread_mutex_lock(&e->mu);
    enum MHD_Result rc;
    emu_bot *b = emu_token_ok(token) ? emu_bot_get(e, token, false) : NULL;
    emu_file *f = b ? emu_file_by_path(e, slash + 1) : NULL;
    if (!b)
        rc =
            reply_lit(c, 401, "{\"ok\":false,\"error_code\":401,\"description\":\"Unauthorized\"}");
    else if (!f)
        rc = reply_lit(c, 404, "{\"ok\":false,\"error_code\":404,\"description\":\"Not Found\"}");
    else
        rc = reply(c, 200, f->mime ? f->mime : "application/octet-stream", f->data, f->len, true);
    pthread_mutex_unlock(&e->mu);
    return rc;
}

/* /control/file?file_id=...: a file's bytes, for the web chat (which has no token). */
static enum MHD_Result control_file(emu *e, struct MHD_Connection *c)
{
    const char *id = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "file_id");
    pthread_mutex_lock(&e->mu);
    emu_file *f = id ? emu_file_get(e, id) : NULL;
    enum MHD_Result rc =
        f ? reply(c, 200, f->mime ? f->mime : "application/octet-stream", f->data, f->len, true)
          : reply_lit(c, 404, "{\"ok\":false,\"error\":\"no file with that file_id\"}");
    pthread_mutex_unlock(&e->mu);
    return rc;
}

static enum MHD_Result route(emu *e, struct MHD_Connection *c, const char *url, const char *method,
                             const tg__buf *body)
{
    if (!strncmp(url, "/bot", 4))
        return bot_api(e, c, url + 4, body);
    if (!strncmp(url, "/file/bot", 9))
        return file_download(e, c, url + 9);
    if (!strcmp(url, "/control/file"))
        return control_file(e, c);
    if (!strncmp(url, "/control/", 9)) {
        emu_form q;
        emu_form_init(&q);
        MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, add_arg, &q);
        tg__buf out;
        tg__buf_init(&out, 0);
        int code = emu_control(e, url + 9, method, &q, body->data, body->len, &out);
        enum MHD_Result rc = reply_buf(c, (unsigned)code, &out);
        tg__buf_cleanup(&out);
        emu_form_cleanup(&q);
        return rc;
    }
    size_t len;
    const char *ctype;
    const char *asset = emu_web_asset(url, &len, &ctype);
    if (asset)
        return reply(c, 200, ctype, asset, len, false);
    return reply(c, 404, "text/plain", "Not Found", 9, false);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **ptr)
{
    (void)version;
    emu *e = cls;
    struct hreq *h = *ptr;
    if (!h) {
        h = tg__calloc(1, sizeof *h);
        if (!h)
            return MHD_NO;
        tg__buf_init(&h->body, BODY_MAX);
        *ptr = h;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > BODY_MAX)
            h->too_big = true;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!h->too_big && tg__buf_append(&h->body, upload_data, *upload_size) != 0)
            h->too_big = true;
        *upload_size = 0;
        return MHD_YES;
    }
    if (h->too_big)
        return reply_lit(c, 413,
                         "{\"ok\":false,\"error_code\":413,\"description\":"
                         "\"Request Entity Too Large\"}");
    return route(e, c, url, method, &h->body);
}

static void on_done(void *cls, struct MHD_Connection *c, void **ptr,
                    enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    struct hreq *h = *ptr;
    if (h) {
        tg__buf_cleanup(&h->body);
        tg__free(h);
        *ptr = NULL;
    }
}

int emu_http_start(emu *e, char *err, size_t errcap)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(e->o.port)};
    if (inet_pton(AF_INET, e->host, &sa.sin_addr) != 1) {
        snprintf(err, errcap, "listen: %s is not an IPv4 address", e->host);
        return -1;
    }
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0,
        NULL, NULL, on_request, e, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
        MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)(EMU_POLL_MAX_S + 30), MHD_OPTION_END);
    if (!d) {
        snprintf(err, errcap, "listen: cannot serve on %s:%u (address in use?)", e->host,
                 (unsigned)e->o.port);
        return -1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    e->port = info ? info->port : e->o.port;
    e->http = d;
    return 0;
}

void emu_http_stop(emu *e)
{
    if (e->http)
        MHD_stop_daemon(e->http);
    e->http = NULL;
}
