/*
 * server: tgbot-emulator's HTTP front (libmicrohttpd, one thread per connection, so a long
 * poll blocks only its own connection). Routes:
 *   /bot<TOKEN>/<method>        the Bot API (GET query, urlencoded, multipart or JSON body)
 *   /file/bot<TOKEN>/<path>     file downloads
 *   /control/<name>             the control API (control.c)
 *   / , /app.js, /style.css     the web chat (web.c)
 * Bodies are collected up to EMU_UPLOAD_MAX plus room for the multipart framing; a larger
 * one gets 413 before it is read. The token never reaches a log or an error text.
 * Files are served so that they never run on this origin (serve_file); the page gets a CSP
 * of its own, every other answer an inert one.
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/alloc.h"
#include "emulator/api.h"
#include "emulator/server.h"

#define BODY_MAX (EMU_UPLOAD_MAX + ((size_t)1 << 20)) /* bytes */

struct hreq {
    tg__buf body;
    bool too_big;
    int nul; /* the raw URI holds %00: 1 in the path, 2 in the query */
};

/* What on_uri saw, as markers (only their addresses matter): libmicrohttpd decodes %00 into
 * a NUL that ends every string it hands over, so "/file/bot.../documents/file_1.txt%00.html"
 * would be read as ".../file_1.txt". Such URIs are refused. */
static char nul_in_path, nul_in_query;

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    (void)cls;
    (void)c;
    const char *nul = strstr(uri, "%00"), *q = strchr(uri, '?');
    return !nul ? NULL : q && nul > q ? (void *)&nul_in_query : (void *)&nul_in_path;
}

/* Every answer: nosniff, and unless it is the web chat itself a CSP that lets nothing run
 * (a JSON answer or a file opened in a tab is inert, and sandboxed off the origin). */
#define CSP_INERT "default-src 'none'; sandbox"
/* The web chat: its own script, style and images, fetches to this origin, nothing else. */
#define CSP_PAGE                                                                                  \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "                   \
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

static struct MHD_Response *response(const void *data, size_t len, bool copy, const char *ctype,
                                     const char *csp)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        len, (void *)data, copy ? MHD_RESPMEM_MUST_COPY : MHD_RESPMEM_PERSISTENT);
    if (!r)
        return NULL;
    MHD_add_response_header(r, "Content-Type", ctype);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Content-Security-Policy", csp);
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    return r;
}

static enum MHD_Result queue(struct MHD_Connection *c, unsigned code, struct MHD_Response *r)
{
    if (!r)
        return MHD_NO;
    enum MHD_Result rc = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *ctype,
                             const void *data, size_t len, bool copy)
{
    return queue(c, code, response(data, len, copy, ctype, CSP_INERT));
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

/* ---- files: uploads are someone else's bytes ----
 * A bot or a user chose the bytes, the name and the type of every file, so a file must never
 * run on this origin (issue 21: an uploaded text/html file opened from a link read
 * /control/state and posted as the user). Every file is served with nosniff, the inert
 * sandboxing CSP and Cross-Origin-Resource-Policy: same-origin; only the raster image types
 * below, which the web chat shows in <img>, are "inline", everything else is an attachment
 * (a browser downloads it instead of showing it). The type is the uploader's when it is a
 * plain type/subtype, else application/octet-stream. */
static const char *const inline_types[] = {"image/jpeg", "image/png", "image/gif", "image/webp"};

static bool mime_ok(const char *m)
{
    static const char tok[] = "!#$&-^_.+"; /* RFC 6838 restricted-name characters */
    size_t slashes = 0, run = 0;
    for (const char *p = m; *p; p++) {
        if (*p == '/') {
            if (!run || ++slashes > 1)
                return false;
            run = 0;
        } else if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                   (*p >= '0' && *p <= '9') || (run && strchr(tok, *p))) {
            if (++run > 127)
                return false;
        } else {
            return false;
        }
    }
    return slashes == 1 && run;
}

/* Content-Disposition for a file named name: an ASCII fallback (anything but letters,
 * digits, '.', '-' and '_' becomes '_') and the exact name as RFC 8187 UTF-8. */
static void disposition(char *out, size_t cap, bool inline_, const char *name)
{
    static const char attr[] = "!#$&+-.^_`|~"; /* RFC 8187 attr-char besides ALPHA / DIGIT */
    char plain[128], ext[3 * 128 + 1];
    size_t np = 0, ne = 0;
    for (const unsigned char *p = (const unsigned char *)name; *p && np < sizeof plain - 1; p++) {
        bool alnum = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9');
        plain[np++] = alnum || *p == '.' || *p == '-' || *p == '_' ? (char)*p : '_';
        if (ne + 4 > sizeof ext)
            continue;
        if (alnum || (*p < 0x80 && *p && strchr(attr, *p)))
            ext[ne++] = (char)*p;
        else
            ne += (size_t)snprintf(ext + ne, sizeof ext - ne, "%%%02X", *p);
    }
    plain[np] = ext[ne] = '\0';
    if (!np || plain[0] == '.')
        snprintf(out, cap, "%s; filename=\"file%s\"", inline_ ? "inline" : "attachment", plain);
    else
        snprintf(out, cap, "%s; filename=\"%s\"; filename*=UTF-8''%s",
                 inline_ ? "inline" : "attachment", plain, ext);
}

static enum MHD_Result serve_file(struct MHD_Connection *c, const emu_file *f)
{
    const char *type = f->mime && mime_ok(f->mime) ? f->mime : "application/octet-stream";
    bool inline_ = false;
    for (size_t i = 0; i < sizeof inline_types / sizeof inline_types[0]; i++)
        inline_ |= !strcasecmp(type, inline_types[i]);
    const char *slash = strrchr(f->path, '/');
    char cd[700];
    disposition(cd, sizeof cd, inline_, f->name && *f->name ? f->name : slash ? slash + 1 : f->path);
    struct MHD_Response *r = response(f->data, f->len, true, type, CSP_INERT);
    if (r) {
        MHD_add_response_header(r, "Content-Disposition", cd);
        MHD_add_response_header(r, "Cross-Origin-Resource-Policy", "same-origin");
    }
    return queue(c, 200, r);
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
    if (f && !emu_file_for_bot(e, f->file_id, b->u.id))
        f = NULL; /* another bot's file: its path is not this bot's to download */
    if (!b)
        rc =
            reply_lit(c, 401, "{\"ok\":false,\"error_code\":401,\"description\":\"Unauthorized\"}");
    else if (!f)
        rc = reply_lit(c, 404, "{\"ok\":false,\"error_code\":404,\"description\":\"Not Found\"}");
    else
        rc = serve_file(c, f);
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
        f ? serve_file(c, f)
          : reply_lit(c, 404, "{\"ok\":false,\"error\":\"no file with that file_id\"}");
    pthread_mutex_unlock(&e->mu);
    return rc;
}

/* {"ok":false,"error":why} with status code. */
static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned code, const char *why)
{
    tg__buf out;
    tg__buf_init(&out, 0);
    tg__jw w;
    tg__jw_init(&w, &out);
    tg__jw_obj_begin(&w);
    TG__JW_KEY(&w, "ok");
    tg__jw_bool(&w, false);
    TG__JW_KEY(&w, "error");
    tg__jw_str(&w, why);
    tg__jw_obj_end(&w);
    enum MHD_Result rc = reply_buf(c, code, &out);
    tg__buf_cleanup(&out);
    return rc;
}

/* The web chat and the control API answer only this emulator's own pages and clients
 * (guard.c): 0, or the status to refuse with. The Bot API and downloads are left out: the
 * token is their key, and bots may reach a --listen 0.0.0.0 emulator under any name (a
 * container's host name). */
static int foreign(const emu *e, struct MHD_Connection *c, const char *url, const char *method,
                   const char **why)
{
    return emu_guard(e->host, e->port, !strncmp(url, "/control/", 9), !strcmp(method, "POST"),
                     MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host"),
                     MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin"),
                     MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type"), why);
}

static enum MHD_Result route(emu *e, struct MHD_Connection *c, const char *url, const char *method,
                             const tg__buf *body)
{
    if (!strncmp(url, "/bot", 4))
        return bot_api(e, c, url + 4, body);
    if (!strncmp(url, "/file/bot", 9))
        return file_download(e, c, url + 9);
    const char *why;
    int refused = foreign(e, c, url, method, &why);
    if (refused)
        return reply_error(c, (unsigned)refused, why);
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
    if (asset) {
        struct MHD_Response *r = response(asset, len, false, ctype, CSP_PAGE);
        if (r)
            MHD_add_response_header(r, "X-Frame-Options", "DENY");
        return queue(c, 200, r);
    }
    return reply(c, 404, "text/plain", "Not Found", 9, false);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **ptr)
{
    (void)version;
    emu *e = cls;
    struct hreq *h = *ptr;
    if (!h || *ptr == &nul_in_path || *ptr == &nul_in_query) {
        int nul = *ptr == &nul_in_path ? 1 : *ptr == &nul_in_query ? 2 : 0;
        *ptr = h = tg__calloc(1, sizeof *h);
        if (!h)
            return MHD_NO;
        tg__buf_init(&h->body, BODY_MAX);
        h->nul = nul;
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
    if (h->nul == 1)
        return reply_lit(c, 404, "{\"ok\":false,\"error_code\":404,\"description\":\"Not Found\"}");
    if (h->nul == 2)
        return reply_lit(c, 400,
                         "{\"ok\":false,\"error_code\":400,\"description\":\"Bad Request: "
                         "the query string holds a NUL byte (%00)\"}");
    return route(e, c, url, method, &h->body);
}

static void on_done(void *cls, struct MHD_Connection *c, void **ptr,
                    enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    struct hreq *h = *ptr;
    if (h && *ptr != &nul_in_path && *ptr != &nul_in_query) {
        tg__buf_cleanup(&h->body);
        tg__free(h);
        *ptr = NULL;
    }
}

/* A listening socket on sa, its port in *port (the kernel's pick for port 0); -1 on error. */
static int listen_on(struct sockaddr_in *sa, uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    socklen_t n = sizeof *sa;
    if (fd < 0)
        return -1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (struct sockaddr *)sa, sizeof *sa) != 0 || listen(fd, 128) != 0 ||
        getsockname(fd, (struct sockaddr *)sa, &n) != 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(sa->sin_port);
    return fd;
}

int emu_http_start(emu *e, char *err, size_t errcap)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(e->o.port)};
    if (inet_pton(AF_INET, e->host, &sa.sin_addr) != 1) {
        snprintf(err, errcap, "listen: %s is not an IPv4 address", e->host);
        return -1;
    }
    /* The socket is ours first, so e->port is known before any request thread can read it
       (the Host check compares against it). */
    int fd = listen_on(&sa, &e->port);
    if (fd < 0) {
        snprintf(err, errcap, "listen: cannot serve on %s:%u (address in use?)", e->host,
                 (unsigned)e->o.port);
        return -1;
    }
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0,
        NULL, NULL, on_request, e, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_NOTIFY_COMPLETED,
        on_done, NULL, MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)(EMU_POLL_MAX_S + 30), MHD_OPTION_END);
    if (!d) { /* not closed here: MHD closes a given listen socket on most of its failures */
        snprintf(err, errcap, "listen: cannot serve on %s:%u", e->host, (unsigned)e->port);
        return -1;
    }
    e->http = d; /* MHD_stop_daemon closes fd */
    return 0;
}

void emu_http_stop(emu *e)
{
    if (e->http)
        MHD_stop_daemon(e->http);
    e->http = NULL;
}
