/* dispatch_fakeapi: stateful getUpdates server for tests. See dispatch_fakeapi.h. */
#include "dispatch_fakeapi.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct upd {
    int64_t id;
    char *json;
};

struct call {
    char *method;
    char *body;
};

struct fakeapi {
    struct MHD_Daemon *mhd;
    char prefix[160]; /* "/bot<token>/" */
    char url[64];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct upd *upds;
    size_t nupds, cap;
    int64_t offset;
    size_t gu_calls;
    int conflicts;
    struct call *calls;
    size_t ncalls, ccap;
    int64_t msg_id;
    char *last_gu; /* body of the latest getUpdates */
    bool stopping;
};

struct body {
    char *p;
    size_t n;
};

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *json)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(json), (void *)json, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result rc = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return rc;
}

static int64_t num(json_t *o, const char *k, int64_t dflt)
{
    json_t *v = o ? json_object_get(o, k) : NULL;
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

static void deadline_after(struct timespec *ts, int64_t secs)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += secs;
}

/* Build the answer from updates >= offset (lock held). */
static char *answer_updates(fakeapi *f, int64_t limit)
{
    size_t cap = 64, n = 0;
    for (size_t i = 0; i < f->nupds && (int64_t)i < limit; i++)
        cap += strlen(f->upds[i].json) + 1;
    char *out = malloc(cap);
    n += (size_t)sprintf(out, "{\"ok\":true,\"result\":[");
    for (size_t i = 0; i < f->nupds && (int64_t)i < limit; i++)
        n += (size_t)sprintf(out + n, "%s%s", i ? "," : "", f->upds[i].json);
    sprintf(out + n, "]}");
    return out;
}

static void record(fakeapi *f, const char *method, const char *body);

static enum MHD_Result get_updates(fakeapi *f, struct MHD_Connection *c, const char *body)
{
    json_t *req = json_loads(body ? body : "{}", 0, NULL);
    int64_t offset = num(req, "offset", 0), limit = num(req, "limit", 100);
    int64_t timeout = num(req, "timeout", 0);
    json_decref(req);
    record(f, "getUpdates", body);
    pthread_mutex_lock(&f->mu);
    f->gu_calls++;
    free(f->last_gu);
    f->last_gu = strdup(body ? body : "");
    if (f->conflicts > 0) {
        f->conflicts--;
        pthread_mutex_unlock(&f->mu);
        return reply(c, 409,
                     "{\"ok\":false,\"error_code\":409,\"description\":\"Conflict: "
                     "terminated by other getUpdates request\"}");
    }
    if (offset > f->offset)
        f->offset = offset;
    size_t drop = 0;
    while (drop < f->nupds && f->upds[drop].id < offset)
        free(f->upds[drop++].json);
    if (drop) /* upds is NULL before the first update */
        memmove(f->upds, f->upds + drop, (f->nupds - drop) * sizeof *f->upds);
    f->nupds -= drop;
    struct timespec ts;
    deadline_after(&ts, timeout);
    while (f->nupds == 0 && timeout > 0 && !f->stopping &&
           pthread_cond_timedwait(&f->cv, &f->mu, &ts) == 0)
        ;
    char *out = answer_updates(f, limit);
    pthread_mutex_unlock(&f->mu);
    enum MHD_Result rc = reply(c, 200, out);
    free(out);
    return rc;
}

static void record(fakeapi *f, const char *method, const char *body)
{
    pthread_mutex_lock(&f->mu);
    if (f->ncalls == f->ccap) {
        f->ccap = f->ccap ? f->ccap * 2 : 256;
        f->calls = realloc(f->calls, f->ccap * sizeof *f->calls);
    }
    f->calls[f->ncalls++] = (struct call){strdup(method), strdup(body ? body : "")};
    pthread_mutex_unlock(&f->mu);
}

static enum MHD_Result route(fakeapi *f, struct MHD_Connection *c, const char *url,
                             const char *body)
{
    size_t pl = strlen(f->prefix);
    if (strncmp(url, f->prefix, pl) != 0)
        return reply(c, 401, "{\"ok\":false,\"error_code\":401,\"description\":\"Unauthorized\"}");
    const char *method = url + pl;
    if (strcmp(method, "getUpdates") == 0)
        return get_updates(f, c, body);
    if (strcmp(method, "getMe") == 0)
        return reply(c, 200,
                     "{\"ok\":true,\"result\":{\"id\":1,\"is_bot\":true,"
                     "\"first_name\":\"T\",\"username\":\"testbot\"}}");
    record(f, method, body);
    char out[160];
    pthread_mutex_lock(&f->mu);
    long long id = (long long)++f->msg_id;
    pthread_mutex_unlock(&f->mu);
    snprintf(out, sizeof out,
             "{\"ok\":true,\"result\":{\"message_id\":%lld,\"date\":0,"
             "\"chat\":{\"id\":1,\"type\":\"private\"}}}",
             id);
    return reply(c, 200, out);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *size, void **con_cls)
{
    fakeapi *f = cls;
    struct body *b = *con_cls;
    (void)method;
    (void)version;
    if (!b) {
        *con_cls = calloc(1, sizeof *b);
        return MHD_YES;
    }
    if (*size) {
        b->p = realloc(b->p, b->n + *size + 1);
        memcpy(b->p + b->n, data, *size);
        b->n += *size;
        b->p[b->n] = '\0';
        *size = 0;
        return MHD_YES;
    }
    return route(f, c, url, b->p);
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls,
                    enum MHD_RequestTerminationCode toe)
{
    struct body *b = *con_cls;
    (void)cls;
    (void)c;
    (void)toe;
    if (b) {
        free(b->p);
        free(b);
    }
}

fakeapi *fakeapi_start(const char *token)
{
    fakeapi *f = calloc(1, sizeof *f);
    snprintf(f->prefix, sizeof f->prefix, "/bot%s/", token);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    f->mhd = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD, 0,
                              NULL, NULL, on_request, f, MHD_OPTION_SOCK_ADDR, &a,
                              MHD_OPTION_NOTIFY_COMPLETED, on_done, f, MHD_OPTION_END);
    if (!f->mhd) {
        fprintf(stderr, "fakeapi: cannot start\n");
        free(f);
        return NULL;
    }
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(f->mhd, MHD_DAEMON_INFO_BIND_PORT);
    snprintf(f->url, sizeof f->url, "http://127.0.0.1:%u", i ? i->port : 0);
    return f;
}

void fakeapi_stop(fakeapi *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    f->stopping = true;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    MHD_stop_daemon(f->mhd);
    for (size_t i = 0; i < f->nupds; i++)
        free(f->upds[i].json);
    for (size_t i = 0; i < f->ncalls; i++) {
        free(f->calls[i].method);
        free(f->calls[i].body);
    }
    free(f->upds);
    free(f->calls);
    free(f->last_gu);
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

const char *fakeapi_url(const fakeapi *f)
{
    return f->url;
}

void fakeapi_add_update(fakeapi *f, int64_t id, const char *json)
{
    pthread_mutex_lock(&f->mu);
    if (f->nupds == f->cap) {
        f->cap = f->cap ? f->cap * 2 : 256;
        f->upds = realloc(f->upds, f->cap * sizeof *f->upds);
    }
    f->upds[f->nupds++] = (struct upd){id, strdup(json)};
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

int64_t fakeapi_offset(fakeapi *f)
{
    pthread_mutex_lock(&f->mu);
    int64_t v = f->offset;
    pthread_mutex_unlock(&f->mu);
    return v;
}

size_t fakeapi_getupdates_calls(fakeapi *f)
{
    pthread_mutex_lock(&f->mu);
    size_t v = f->gu_calls;
    pthread_mutex_unlock(&f->mu);
    return v;
}

char *fakeapi_last_getupdates(fakeapi *f)
{
    pthread_mutex_lock(&f->mu);
    char *out = f->last_gu ? strdup(f->last_gu) : NULL;
    pthread_mutex_unlock(&f->mu);
    return out;
}

void fakeapi_conflict(fakeapi *f, int n)
{
    pthread_mutex_lock(&f->mu);
    f->conflicts = n;
    pthread_mutex_unlock(&f->mu);
}

size_t fakeapi_count(fakeapi *f, const char *method)
{
    size_t n = 0;
    pthread_mutex_lock(&f->mu);
    for (size_t i = 0; i < f->ncalls; i++)
        n += !method || strcmp(f->calls[i].method, method) == 0;
    pthread_mutex_unlock(&f->mu);
    return n;
}

char *fakeapi_body(fakeapi *f, const char *method, size_t idx)
{
    char *out = NULL;
    pthread_mutex_lock(&f->mu);
    for (size_t i = 0, k = 0; i < f->ncalls && !out; i++)
        if ((!method || strcmp(f->calls[i].method, method) == 0) && k++ == idx)
            out = strdup(f->calls[i].body);
    pthread_mutex_unlock(&f->mu);
    return out;
}
