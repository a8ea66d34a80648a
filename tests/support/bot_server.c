/*
 * bot_server.c: the loopback fake Bot API server for tests (see bot_server.h).
 *
 * One libmicrohttpd daemon, a thread per connection (so a slow reply blocks only its own
 * connection). Each request collects its body (JSON kept, multipart parts streamed through
 * MHD's post processor into SHA-256 and a bounded prefix), then takes its answer from, in
 * order: the token check, the file table, flood enforcement, the method's action queue, the
 * "*" queue, the method's persistent reply, or 404. All shared state sits under one mutex.
 */
#include "bot_server.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_RECORDS    200000
#define MAX_ACTIONS    4096
#define MAX_FLOOD_KEYS 4096
#define TOL            0.2

struct action {
    char method[64];
    bot_action a;
    char *body;
};

struct reply {
    char *method;
    int status;
    char *body;
};

struct file {
    char *path;
    char *data;
    size_t len;
};

struct flood_key {
    int64_t key;
    double last_chat;
    double last_group;
};

struct bot_server {
    struct MHD_Daemon *d;
    char token[256];
    char url[64];
    char *cert_pem, *key_pem; /* TLS: PEM text given to libmicrohttpd (kept until stop) */
    uint16_t port;
    pthread_mutex_t mu;
    pthread_cond_t stop_cv;
    bool stopping;
    bot_request **recs;
    size_t nrecs, caprecs;
    struct action *actions;
    size_t nactions;
    struct reply *replies;
    size_t nreplies;
    struct file *files;
    size_t nfiles;
    size_t connections;
    /* flood */
    double f_global, f_chat, f_group; /* rates per second (group converted) */
    double *g_ring;
    size_t g_n, g_pos, g_count;
    struct flood_key *fkeys;
    size_t nfkeys;
    size_t flood_429s;
};

/* Per-request state while the body arrives. */
struct req_state {
    bot_server *s;
    bot_request *r;
    struct MHD_PostProcessor *pp;
    EVP_MD_CTX *md;
    bot_part *cur;
    /* close-mid reply */
    char *body;
    size_t body_len;
};

static char *xstrdup(const char *s)
{
    return strdup(s ? s : "");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- request recording ---- */

static void finish_part(struct req_state *st)
{
    if (st->cur && st->md) {
        EVP_DigestFinal_ex(st->md, st->cur->sha256, NULL);
        EVP_MD_CTX_free(st->md);
    }
    st->md = NULL;
    st->cur = NULL;
}

static bot_part *new_part(struct req_state *st, const char *key, const char *filename,
                          const char *ctype)
{
    bot_request *r = st->r;
    finish_part(st);
    bot_part *np = realloc(r->parts, (r->nparts + 1) * sizeof *np);
    if (!np)
        return NULL;
    r->parts = np;
    bot_part *p = &np[r->nparts++];
    memset(p, 0, sizeof *p);
    p->name = xstrdup(key);
    p->filename = filename ? xstrdup(filename) : NULL;
    p->content_type = ctype ? xstrdup(ctype) : NULL;
    p->data = calloc(1, 1);
    st->md = EVP_MD_CTX_new();
    EVP_DigestInit_ex(st->md, EVP_sha256(), NULL);
    st->cur = p;
    return p;
}

static void part_data(struct req_state *st, const char *data, size_t size)
{
    bot_part *p = st->cur;
    EVP_DigestUpdate(st->md, data, size);
    p->size += size;
    size_t keep = BOT_PART_KEEP - p->data_len;
    if (keep > size)
        keep = size;
    if (keep) {
        char *nd = realloc(p->data, p->data_len + keep + 1);
        if (!nd)
            return;
        memcpy(nd + p->data_len, data, keep);
        p->data_len += keep;
        nd[p->data_len] = '\0';
        p->data = nd;
    }
}

static enum MHD_Result on_post(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *filename, const char *ctype, const char *enc,
                               const char *data, uint64_t off, size_t size)
{
    struct req_state *st = cls;
    (void)kind, (void)enc;
    if (!st->cur || strcmp(st->cur->name, key) != 0 || (off == 0 && st->cur->size > 0))
        if (!new_part(st, key, filename, ctype))
            return MHD_NO;
    if (size)
        part_data(st, data, size);
    return MHD_YES;
}

static void body_data(bot_request *r, const char *data, size_t size)
{
    r->body_total += size;
    size_t keep = BOT_PART_KEEP - r->body_len;
    if (keep > size)
        keep = size;
    if (!keep)
        return;
    char *nb = realloc(r->body, r->body_len + keep + 1);
    if (!nb)
        return;
    memcpy(nb + r->body_len, data, keep);
    r->body_len += keep;
    nb[r->body_len] = '\0';
    r->body = nb;
}

static void free_request(bot_request *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nparts; i++) {
        free(r->parts[i].name);
        free(r->parts[i].filename);
        free(r->parts[i].content_type);
        free(r->parts[i].data);
    }
    free(r->parts);
    free(r->method);
    free(r->path);
    free(r->http_method);
    free(r->content_type);
    free(r->user_agent);
    free(r->body);
    free(r);
}

/* Split the URL into token check, test flag, method / file path; path gets <TOKEN>. */
static void classify_path(bot_server *s, bot_request *r, const char *url)
{
    size_t tl = strlen(s->token);
    const char *rest = NULL;
    char path[1024];
    if (strncmp(url, "/bot", 4) == 0)
        rest = url + 4;
    else if (strncmp(url, "/file/bot", 9) == 0)
        rest = url + 9, r->is_file = true;
    r->token_ok = rest && strncmp(rest, s->token, tl) == 0 && rest[tl] == '/';
    if (r->token_ok) {
        snprintf(path, sizeof path, "%.*s<TOKEN>%s", (int)(rest - url), url, rest + tl);
        rest += tl + 1;
        if (strncmp(rest, "test/", 5) == 0)
            r->test_env = true, rest += 5;
    } else {
        snprintf(path, sizeof path, "%s", rest ? "(wrong token)" : url);
        rest = "";
    }
    r->path = xstrdup(path);
    r->method = xstrdup(r->is_file ? "" : rest);
    if (r->is_file) {
        free(r->path);
        snprintf(path, sizeof path, "/file/bot<TOKEN>/%s%s", r->test_env ? "test/" : "", rest);
        r->path = xstrdup(path);
    }
}

static struct req_state *begin_request(bot_server *s, struct MHD_Connection *c, const char *url,
                                       const char *http_method)
{
    struct req_state *st = calloc(1, sizeof *st);
    bot_request *r = calloc(1, sizeof *r);
    if (!st || !r) {
        free(st);
        free(r);
        return NULL;
    }
    st->s = s;
    st->r = r;
    r->http_method = xstrdup(http_method);
    classify_path(s, r, url);
    r->content_type = xstrdup(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type"));
    r->user_agent = xstrdup(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "User-Agent"));
    r->body = calloc(1, 1);
    if (strncmp(r->content_type, "multipart/form-data", 19) == 0)
        st->pp = MHD_create_post_processor(c, 65536, on_post, st);
    return st;
}

/* ---- answers ---- */

static enum MHD_Result send_reply(struct MHD_Connection *c, int status, const char *ctype,
                                  const char *body, size_t len)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", ctype ? ctype : "application/json");
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static ssize_t half_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct req_state *st = cls;
    size_t half = st->body_len / 2;
    if (pos >= half)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    size_t n = half - (size_t)pos;
    if (n > max)
        n = max;
    memcpy(buf, st->body + pos, n);
    return (ssize_t)n;
}

static enum MHD_Result send_close_mid(struct MHD_Connection *c, struct req_state *st,
                                      const char *body)
{
    st->body = xstrdup(body);
    st->body_len = strlen(st->body);
    struct MHD_Response *resp =
        MHD_create_response_from_callback(st->body_len, 1024, half_reader, st, NULL);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", "application/json");
    enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    return rc;
}

static bool take_action(bot_server *s, const char *method, bot_action *out, char **body)
{
    for (int pass = 0; pass < 2; pass++) {
        const char *want = pass == 0 ? method : "*";
        for (size_t i = 0; i < s->nactions; i++) {
            if (strcmp(s->actions[i].method, want) != 0)
                continue;
            *out = s->actions[i].a;
            *body = s->actions[i].body;
            memmove(&s->actions[i], &s->actions[i + 1],
                    (s->nactions - i - 1) * sizeof s->actions[0]);
            s->nactions--;
            return true;
        }
    }
    return false;
}

static bool is_send_like(const char *m)
{
    if (strncmp(m, "send", 4) == 0)
        return strcmp(m, "sendChatAction") != 0;
    return strncmp(m, "forward", 7) == 0 || strncmp(m, "copy", 4) == 0;
}

static bool chat_of(const bot_request *r, int64_t *key)
{
    const char *v = NULL;
    json_t *root = NULL;
    if (r->nparts) {
        const bot_part *p = bot_request_part(r, "chat_id");
        v = p ? p->data : NULL;
    } else {
        root = json_loadb(r->body, r->body_len, 0, NULL);
        json_t *id = root ? json_object_get(root, "chat_id") : NULL;
        if (json_is_integer(id)) {
            *key = (int64_t)json_integer_value(id);
            json_decref(root);
            return true;
        }
        v = json_is_string(id) ? json_string_value(id) : NULL;
    }
    bool ok = v && *v;
    if (ok) {
        char *end;
        long long n = strtoll(v, &end, 10);
        uint64_t h = 1469598103934665603ull;
        for (const char *p = v; *p; p++)
            h = (h ^ (unsigned char)*p) * 1099511628211ull;
        *key = *end == '\0' ? (int64_t)n : (int64_t)(h | (1ull << 63));
    }
    json_decref(root);
    return ok;
}

static struct flood_key *flood_key(bot_server *s, int64_t key)
{
    for (size_t i = 0; i < s->nfkeys; i++)
        if (s->fkeys[i].key == key)
            return &s->fkeys[i];
    if (s->nfkeys == MAX_FLOOD_KEYS)
        return NULL;
    struct flood_key *k = &s->fkeys[s->nfkeys++];
    *k = (struct flood_key){.key = key, .last_chat = -1e9, .last_group = -1e9};
    return k;
}

/* true if the message breaks a limit (and is then not counted). Called under s->mu. */
static bool flood_violates(bot_server *s, const bot_request *r)
{
    int64_t key;
    if (!s->fkeys || !r->token_ok || !is_send_like(r->method) || !chat_of(r, &key))
        return false;
    double t = now_s();
    struct flood_key *k = flood_key(s, key);
    if (!k)
        return false;
    bool bad = false;
    if (s->f_chat > 0 && t - k->last_chat < (1.0 - TOL) / s->f_chat)
        bad = true;
    if (key < 0 && s->f_group > 0 && t - k->last_group < (1.0 - TOL) / s->f_group)
        bad = true;
    /* global: the N-th previous message must be at least N/rate*(1-TOL) ago */
    if (s->g_n && s->g_count >= s->g_n &&
        t - s->g_ring[s->g_pos] < (double)s->g_n / s->f_global * (1.0 - TOL))
        bad = true;
    if (bad) {
        s->flood_429s++;
        return true;
    }
    k->last_chat = k->last_group = t;
    if (s->g_n) {
        s->g_ring[s->g_pos] = t;
        s->g_pos = (s->g_pos + 1) % s->g_n;
        s->g_count++;
    }
    return false;
}

static const struct file *find_file(const bot_server *s, const char *path)
{
    const char *p = strstr(path, "<TOKEN>/");
    if (!p)
        return NULL;
    p += 8;
    if (strncmp(p, "test/", 5) == 0)
        p += 5;
    for (size_t i = 0; i < s->nfiles; i++)
        if (strcmp(s->files[i].path, p) == 0)
            return &s->files[i];
    return NULL;
}

static void slow_wait(bot_server *s, uint32_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L)
        ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < 10000 && !s->stopping; i++)
        if (pthread_cond_timedwait(&s->stop_cv, &s->mu, &ts) != 0)
            break;
    pthread_mutex_unlock(&s->mu);
}

static const char TOO_MANY[] = "{\"ok\":false,\"error_code\":429,\"description\":\"Too Many "
                               "Requests: retry after 1\",\"parameters\":{\"retry_after\":1}}";
static const char UNAUTHORIZED[] = "{\"ok\":false,\"error_code\":401,\"description\":"
                                   "\"Unauthorized\"}";
static const char NOT_FOUND[] = "{\"ok\":false,\"error_code\":404,\"description\":\"Not Found\"}";

static enum MHD_Result answer_file(bot_server *s, struct MHD_Connection *c, bot_request *r)
{
    pthread_mutex_lock(&s->mu);
    const struct file *f = find_file(s, r->path);
    pthread_mutex_unlock(&s->mu); /* files are only added, never removed, before stop */
    if (!f) {
        r->status = 404;
        return send_reply(c, 404, NULL, NOT_FOUND, sizeof NOT_FOUND - 1);
    }
    r->status = 200;
    return send_reply(c, 200, "application/octet-stream", f->data, f->len);
}

static enum MHD_Result answer(bot_server *s, struct MHD_Connection *c, struct req_state *st)
{
    bot_request *r = st->r;
    if (!r->token_ok) {
        r->status = 401;
        return send_reply(c, 401, NULL, UNAUTHORIZED, sizeof UNAUTHORIZED - 1);
    }
    if (r->is_file)
        return answer_file(s, c, r);
    bot_action a = {0};
    char *body = NULL;
    pthread_mutex_lock(&s->mu);
    bool flooded = flood_violates(s, r);
    bool have = !flooded && take_action(s, r->method, &a, &body);
    for (size_t i = 0; !flooded && !have && i < s->nreplies; i++)
        if (strcmp(s->replies[i].method, r->method) == 0) {
            a = (bot_action){.status = s->replies[i].status};
            body = xstrdup(s->replies[i].body);
            have = true;
        }
    pthread_mutex_unlock(&s->mu);
    if (flooded) {
        r->status = 429;
        return send_reply(c, 429, NULL, TOO_MANY, sizeof TOO_MANY - 1);
    }
    if (!have) {
        r->status = 404;
        return send_reply(c, 404, NULL, NOT_FOUND, sizeof NOT_FOUND - 1);
    }
    if (a.kind == BOT_ACT_SLOW)
        slow_wait(s, a.delay_ms);
    enum MHD_Result rc;
    if (a.kind == BOT_ACT_CLOSE_MID) {
        r->status = 0;
        rc = send_close_mid(c, st, body);
    } else {
        r->status = a.status ? a.status : 200;
        rc = send_reply(c, r->status, a.content_type, body ? body : "", body ? strlen(body) : 0);
    }
    free(body);
    return rc;
}

static void record(bot_server *s, bot_request *r)
{
    pthread_mutex_lock(&s->mu);
    if (s->nrecs == s->caprecs && s->caprecs < MAX_RECORDS) {
        size_t cap = s->caprecs ? s->caprecs * 2 : 64;
        bot_request **nr = realloc(s->recs, cap * sizeof *nr);
        if (nr)
            s->recs = nr, s->caprecs = cap;
    }
    if (s->nrecs < s->caprecs)
        s->recs[s->nrecs++] = r;
    else
        free_request(r);
    pthread_mutex_unlock(&s->mu);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls)
{
    bot_server *s = cls;
    struct req_state *st = *con_cls;
    (void)version;
    if (!st) {
        st = begin_request(s, c, url, method);
        *con_cls = st;
        return st ? MHD_YES : MHD_NO;
    }
    if (*upload_size) {
        if (st->pp)
            MHD_post_process(st->pp, upload_data, *upload_size);
        else
            body_data(st->r, upload_data, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (st->pp) {
        MHD_destroy_post_processor(st->pp);
        st->pp = NULL;
    }
    finish_part(st);
    bot_request *r = st->r;
    enum MHD_Result rc = answer(s, c, st);
    st->r = NULL;
    record(s, r);
    return rc;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct req_state *st = *con_cls;
    (void)cls, (void)c, (void)toe;
    if (!st)
        return;
    if (st->pp)
        MHD_destroy_post_processor(st->pp);
    finish_part(st);
    free_request(st->r);
    free(st->body);
    free(st);
    *con_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    bot_server *s = cls;
    (void)c, (void)socket_context;
    if (toe != MHD_CONNECTION_NOTIFY_STARTED)
        return;
    pthread_mutex_lock(&s->mu);
    s->connections++;
    pthread_mutex_unlock(&s->mu);
}

/* ---- lifecycle and scripting ---- */

/* Whole file into a NUL-terminated heap string (MHD wants PEM text); NULL on error. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = calloc(1, 65536);
    size_t n = buf ? fread(buf, 1, 65535, f) : 0;
    fclose(f);
    if (!n) {
        free(buf);
        return NULL;
    }
    return buf;
}

bot_server *bot_server_start(const char *token)
{
    return bot_server_start_tls(token, NULL, NULL);
}

bot_server *bot_server_start_tls(const char *token, const char *cert_file, const char *key_file)
{
    bot_server *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    bool tls = cert_file && key_file;
    if (tls && (!(s->cert_pem = slurp(cert_file)) || !(s->key_pem = slurp(key_file)))) {
        fprintf(stderr, "bot_server: cannot read %s / %s\n", cert_file, key_file);
        free(s->cert_pem);
        free(s->key_pem);
        free(s);
        return NULL;
    }
    snprintf(s->token, sizeof s->token, "%s", token);
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->stop_cv, &ca);
    pthread_condattr_destroy(&ca);
    s->actions = calloc(MAX_ACTIONS, sizeof *s->actions);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION;
    if (tls)
        s->d = MHD_start_daemon(flags | MHD_USE_TLS, 0, NULL, NULL, on_request, s,
                                MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_NOTIFY_COMPLETED,
                                on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                                MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_HTTPS_MEM_CERT,
                                s->cert_pem, MHD_OPTION_HTTPS_MEM_KEY, s->key_pem,
                                MHD_OPTION_END);
    else
        s->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, &sa,
                                MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                                MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                                MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_END);
    const union MHD_DaemonInfo *info =
        s->d ? MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT) : NULL;
    if (!s->actions || !info) {
        fprintf(stderr, "bot_server: cannot start libmicrohttpd on 127.0.0.1\n");
        bot_server_stop(s);
        return NULL;
    }
    s->port = info->port;
    snprintf(s->url, sizeof s->url, "%s://127.0.0.1:%u", tls ? "https" : "http",
             (unsigned)s->port);
    return s;
}

void bot_server_stop(bot_server *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_cond_broadcast(&s->stop_cv);
    pthread_mutex_unlock(&s->mu);
    if (s->d)
        MHD_stop_daemon(s->d);
    for (size_t i = 0; i < s->nrecs; i++)
        free_request(s->recs[i]);
    for (size_t i = 0; i < s->nactions; i++)
        free(s->actions[i].body);
    for (size_t i = 0; i < s->nreplies; i++)
        free(s->replies[i].method), free(s->replies[i].body);
    for (size_t i = 0; i < s->nfiles; i++)
        free(s->files[i].path), free(s->files[i].data);
    free(s->recs);
    free(s->actions);
    free(s->replies);
    free(s->files);
    free(s->g_ring);
    free(s->fkeys);
    free(s->cert_pem);
    free(s->key_pem);
    pthread_cond_destroy(&s->stop_cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

const char *bot_server_url(const bot_server *s)
{
    return s->url;
}

uint16_t bot_server_port(const bot_server *s)
{
    return s->port;
}

void bot_server_set_reply(bot_server *s, const char *method, int status, const char *body)
{
    pthread_mutex_lock(&s->mu);
    size_t i = 0;
    while (i < s->nreplies && strcmp(s->replies[i].method, method) != 0)
        i++;
    if (i == s->nreplies) {
        struct reply *nr = realloc(s->replies, (s->nreplies + 1) * sizeof *nr);
        if (nr) {
            s->replies = nr;
            s->replies[s->nreplies++] = (struct reply){.method = xstrdup(method)};
        }
    } else {
        free(s->replies[i].body);
    }
    if (i < s->nreplies) {
        s->replies[i].status = status;
        s->replies[i].body = xstrdup(body);
    }
    pthread_mutex_unlock(&s->mu);
}

void bot_server_push(bot_server *s, const char *method, const bot_action *a)
{
    pthread_mutex_lock(&s->mu);
    if (s->nactions < MAX_ACTIONS) {
        struct action *x = &s->actions[s->nactions++];
        snprintf(x->method, sizeof x->method, "%s", method);
        x->a = *a;
        x->body = xstrdup(a->body);
        x->a.body = NULL;
    }
    pthread_mutex_unlock(&s->mu);
}

void bot_server_push_429(bot_server *s, const char *method, int retry_after)
{
    char body[256];
    snprintf(body, sizeof body,
             "{\"ok\":false,\"error_code\":429,\"description\":\"Too Many Requests: retry "
             "after %d\",\"parameters\":{\"retry_after\":%d}}",
             retry_after, retry_after);
    bot_server_push(s, method, &(bot_action){.status = 429, .body = body});
}

void bot_server_push_error(bot_server *s, const char *method, int code, const char *desc)
{
    char body[512];
    snprintf(body, sizeof body, "{\"ok\":false,\"error_code\":%d,\"description\":\"%s\"}", code,
             desc);
    bot_server_push(s, method, &(bot_action){.status = code, .body = body});
}

void bot_server_push_raw(bot_server *s, const char *method, int status, const char *ctype,
                         const char *body)
{
    bot_server_push(s, method,
                    &(bot_action){.status = status, .content_type = ctype, .body = body});
}

void bot_server_add_file(bot_server *s, const char *file_path, const void *data, size_t len)
{
    pthread_mutex_lock(&s->mu);
    struct file *nf = realloc(s->files, (s->nfiles + 1) * sizeof *nf);
    char *copy = malloc(len ? len : 1);
    if (nf && copy) {
        memcpy(copy, data, len);
        s->files = nf;
        s->files[s->nfiles++] = (struct file){.path = xstrdup(file_path), .data = copy, .len = len};
    } else {
        free(copy);
        if (nf)
            s->files = nf;
    }
    pthread_mutex_unlock(&s->mu);
}

void bot_server_enforce_flood(bot_server *s, double global_per_sec, double chat_per_sec,
                              double group_per_min)
{
    pthread_mutex_lock(&s->mu);
    s->f_global = global_per_sec;
    s->f_chat = chat_per_sec;
    s->f_group = group_per_min / 60.0;
    size_t n = global_per_sec > 0 ? (size_t)(global_per_sec / 10.0) : 0;
    s->g_n = global_per_sec > 0 ? (n ? n : 1) : 0;
    free(s->g_ring);
    s->g_ring = s->g_n ? calloc(s->g_n, sizeof *s->g_ring) : NULL;
    s->g_pos = s->g_count = 0;
    if (!s->fkeys)
        s->fkeys = calloc(MAX_FLOOD_KEYS, sizeof *s->fkeys);
    s->nfkeys = 0;
    pthread_mutex_unlock(&s->mu);
}

size_t bot_server_flood_429s(const bot_server *s)
{
    pthread_mutex_lock((pthread_mutex_t *)&s->mu);
    size_t n = s->flood_429s;
    pthread_mutex_unlock((pthread_mutex_t *)&s->mu);
    return n;
}

size_t bot_server_nrequests(const bot_server *s)
{
    pthread_mutex_lock((pthread_mutex_t *)&s->mu);
    size_t n = s->nrecs;
    pthread_mutex_unlock((pthread_mutex_t *)&s->mu);
    return n;
}

const bot_request *bot_server_request(const bot_server *s, size_t i)
{
    pthread_mutex_lock((pthread_mutex_t *)&s->mu);
    const bot_request *r = i < s->nrecs ? s->recs[i] : NULL;
    pthread_mutex_unlock((pthread_mutex_t *)&s->mu);
    return r;
}

const bot_request *bot_server_last(const bot_server *s)
{
    size_t n = bot_server_nrequests(s);
    return n ? bot_server_request(s, n - 1) : NULL;
}

size_t bot_server_count(const bot_server *s, const char *method)
{
    size_t n = 0;
    pthread_mutex_lock((pthread_mutex_t *)&s->mu);
    for (size_t i = 0; i < s->nrecs; i++)
        n += strcmp(s->recs[i]->method, method) == 0;
    pthread_mutex_unlock((pthread_mutex_t *)&s->mu);
    return n;
}

size_t bot_server_connections(const bot_server *s)
{
    pthread_mutex_lock((pthread_mutex_t *)&s->mu);
    size_t n = s->connections;
    pthread_mutex_unlock((pthread_mutex_t *)&s->mu);
    return n;
}

const bot_part *bot_request_part(const bot_request *r, const char *name)
{
    for (size_t i = 0; i < r->nparts; i++)
        if (strcmp(r->parts[i].name, name) == 0)
            return &r->parts[i];
    return NULL;
}
