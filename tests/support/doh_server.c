/*
 * doh_server: a table-driven DNS-over-HTTPS server for tests. See doh_server.h.
 * The DNS side is written here from RFC 1035 (not with src/proxy/dnsmsg.c, so the client's
 * parser is not checked against itself): the question is read label by label, the answer
 * names its first owner with a pointer to the question (0xC00C) and later owners in full.
 */
#include "doh_server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CT_DNS        "application/dns-message"
#define BODY_MAX      4096
#define OUT_MAX       2048
#define NAME_MAX_TEXT 256

struct dohsrv {
    struct MHD_Daemon *d;
    struct dohsrv_opts o;
    pthread_mutex_t mu;
    unsigned queries;
    unsigned connections;
    char last[512];
    char names[64][NAME_MAX_TEXT]; /* the name of each question, the first 64 */
};

struct req {
    size_t n;
    bool over;
    uint8_t body[BODY_MAX];
};

/* ---- DNS ---- */

/* The question of m[0..n): name (lower case, no final dot), type; *end after QCLASS. */
static int read_question(const uint8_t *m, size_t n, char *name, uint16_t *type, size_t *end)
{
    size_t p = 12, w = 0;
    if (n < 12 || m[4] != 0 || m[5] != 1)
        return -1;
    while (p < n && m[p] != 0) {
        size_t len = m[p++];
        if (len > 63 || p + len > n || w + len + 2 > NAME_MAX_TEXT)
            return -1;
        if (w)
            name[w++] = '.';
        for (size_t i = 0; i < len; i++) {
            uint8_t c = m[p + i];
            name[w++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
        }
        p += len;
    }
    name[w] = '\0';
    if (p + 5 > n)
        return -1;
    *type = (uint16_t)(m[p + 1] << 8 | m[p + 2]);
    *end = p + 5;
    return 0;
}

struct out {
    uint8_t b[OUT_MAX];
    size_t n;
};

static void put(struct out *o, const void *p, size_t n)
{
    if (o->n + n <= sizeof o->b) {
        memcpy(o->b + o->n, p, n);
        o->n += n;
    }
}

static void put16(struct out *o, unsigned v)
{
    uint8_t b[2] = {(uint8_t)(v >> 8), (uint8_t)v};
    put(o, b, 2);
}

static void put32(struct out *o, uint32_t v)
{
    put16(o, v >> 16);
    put16(o, v & 0xffff);
}

static void put_name(struct out *o, const char *name)
{
    while (*name) {
        const char *dot = strchr(name, '.');
        size_t len = dot ? (size_t)(dot - name) : strlen(name);
        uint8_t l = (uint8_t)len;
        put(o, &l, 1);
        put(o, name, len);
        name += len + (dot ? 1 : 0);
    }
    put(o, "", 1);
}

/* One resource record; owner NULL = the question's name (pointer 0xC00C). */
static void put_rr(struct out *o, const char *owner, const struct dohsrv_record *r)
{
    if (owner)
        put_name(o, owner);
    else
        put16(o, 0xC00C);
    put16(o, r->type);
    put16(o, 1);
    put32(o, r->ttl);
    uint8_t a[16];
    if (r->type == 1 && inet_pton(AF_INET, r->data, a) == 1) {
        put16(o, 4);
        put(o, a, 4);
    } else if (r->type == 28 && inet_pton(AF_INET6, r->data, a) == 1) {
        put16(o, 16);
        put(o, a, 16);
    } else { /* CNAME */
        struct out t = {.n = 0};
        put_name(&t, r->data);
        put16(o, (unsigned)t.n);
        put(o, t.b, t.n);
    }
}

/* Records owned by name, counted; with rcode != 0 the first such record in *special. */
static size_t records_of(const struct dohsrv *s, const char *name,
                         const struct dohsrv_record **special)
{
    size_t n = 0;
    *special = NULL;
    for (size_t i = 0; i < s->o.nrecords; i++)
        if (strcmp(s->o.records[i].name, name) == 0) {
            n++;
            if (s->o.records[i].rcode && !*special)
                *special = &s->o.records[i];
        }
    return n;
}

static const struct dohsrv_record *find(const struct dohsrv *s, const char *name, uint16_t type)
{
    for (size_t i = 0; i < s->o.nrecords; i++)
        if (!s->o.records[i].rcode && s->o.records[i].type == type &&
            strcmp(s->o.records[i].name, name) == 0)
            return &s->o.records[i];
    return NULL;
}

/* The answer section for (qname, type): CNAMEs, then the records. Returns the count. */
static unsigned answers(const struct dohsrv *s, const char *qname, uint16_t type, struct out *o)
{
    unsigned an = 0;
    const char *cur = qname, *owner = NULL;
    const struct dohsrv_record *c;
    for (int links = 0; links < 16 && type != 5 && (c = find(s, cur, 5)); links++) {
        put_rr(o, owner, c);
        an++;
        owner = cur = c->data;
    }
    for (size_t i = 0; i < s->o.nrecords; i++) {
        const struct dohsrv_record *r = &s->o.records[i];
        if (!r->rcode && r->type == type && strcmp(r->name, cur) == 0) {
            put_rr(o, owner, r);
            an++;
        }
    }
    return an;
}

/* The whole response to the query q[0..qn) into o. false when q is not a query. */
static bool respond(struct dohsrv *s, const uint8_t *q, size_t qn, char *name, uint16_t *qtype,
                    struct out *o)
{
    uint16_t type = 0;
    size_t qend = 0;
    if (read_question(q, qn, name, &type, &qend) != 0)
        return false;
    *qtype = type;
    const struct dohsrv_record *special;
    size_t nrec = records_of(s, name, &special);
    unsigned rcode = special ? special->rcode : nrec ? 0 : 3;
    uint16_t id = (uint16_t)(q[0] << 8 | q[1]);
    if (rcode == DOHSRV_BAD_ID) {
        id ^= 0x5a5a;
        rcode = 0;
    }
    struct out body = {.n = 0};
    unsigned an = rcode ? 0 : answers(s, name, type, &body);
    bool soa = special && special->rcode != DOHSRV_BAD_ID && special->ttl > 0;
    put16(o, id);
    put16(o, 0x8000 | (q[2] & 0x01) << 8 | 0x80 | rcode); /* QR, RD echoed, RA, RCODE */
    put16(o, 1);
    put16(o, an);
    put16(o, soa ? 1 : 0);
    put16(o, 0);
    put(o, q + 12, qend - 12);
    put(o, body.b, body.n);
    if (soa) { /* RFC 2308: negative TTL = min(SOA TTL, MINIMUM) */
        put16(o, 0xC00C);
        put16(o, 6);
        put16(o, 1);
        put32(o, special->ttl);
        put16(o, 2 + 20);
        put(o, "\0\0", 2); /* MNAME, RNAME: the root */
        for (int i = 0; i < 4; i++)
            put32(o, 3600);
        put32(o, special->ttl);
    }
    return true;
}

/* ---- HTTP ---- */

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const void *p, size_t n)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(n, (void *)(uintptr_t)p, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    if (code == 200)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CT_DNS);
    enum MHD_Result rc = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result serve(struct dohsrv *s, struct MHD_Connection *c, const char *url,
                             const char *method, struct req *r)
{
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    const char *acc = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept");
    char name[NAME_MAX_TEXT] = "";
    uint16_t type = 0;
    struct out o = {.n = 0};
    bool ok = strcmp(method, "POST") == 0 && strcmp(url, "/dns-query") == 0 && ct &&
              strcasecmp(ct, CT_DNS) == 0 && !r->over && respond(s, r->body, r->n, name, &type, &o);
    pthread_mutex_lock(&s->mu);
    snprintf(s->last, sizeof s->last, "%s %s ct=%s accept=%s type=%u name=%s", method, url,
             ct ? ct : "-", acc ? acc : "-", (unsigned)type, name);
    if (ok) {
        if (s->queries < 64)
            snprintf(s->names[s->queries], NAME_MAX_TEXT, "%s", name);
        s->queries++;
    }
    pthread_mutex_unlock(&s->mu);
    if (ok)
        return reply(c, 200, o.b, o.n);
    if (strcmp(url, "/dns-query") != 0)
        return reply(c, 404, "", 0);
    if (strcmp(method, "POST") != 0)
        return reply(c, 405, "", 0);
    return reply(c, ct && strcasecmp(ct, CT_DNS) == 0 ? 400 : 415, "", 0);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *size, void **ctx)
{
    (void)version;
    struct req *r = *ctx;
    if (!r) {
        if (!(r = calloc(1, sizeof *r)))
            return MHD_NO;
        *ctx = r;
        return MHD_YES;
    }
    if (*size) {
        if (*size > sizeof r->body - r->n)
            r->over = true;
        else
            memcpy(r->body + r->n, data, *size), r->n += *size;
        *size = 0;
        return MHD_YES;
    }
    return serve(cls, c, url, method, r);
}

static void on_done(void *cls, struct MHD_Connection *c, void **ctx,
                    enum MHD_RequestTerminationCode why)
{
    (void)cls, (void)c, (void)why;
    free(*ctx);
    *ctx = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code)
{
    (void)c, (void)socket_ctx;
    struct dohsrv *s = cls;
    if (code != MHD_CONNECTION_NOTIFY_STARTED)
        return;
    pthread_mutex_lock(&s->mu);
    s->connections++;
    pthread_mutex_unlock(&s->mu);
}

unsigned dohsrv_connections(struct dohsrv *s)
{
    pthread_mutex_lock(&s->mu);
    unsigned n = s->connections;
    pthread_mutex_unlock(&s->mu);
    return n;
}

struct dohsrv *dohsrv_start(const struct dohsrv_opts *o, uint16_t *port)
{
    struct dohsrv *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->o = *o;
    pthread_mutex_init(&s->mu, NULL);
    struct sockaddr_storage ss = {0};
    bool v6 = strchr(o->addr, ':') != NULL;
    if (v6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        inet_pton(AF_INET6, o->addr, &a->sin6_addr);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        inet_pton(AF_INET, o->addr, &a->sin_addr);
    }
    s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_TLS | (v6 ? MHD_USE_IPv6 : 0),
                            0, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, &ss,
                            MHD_OPTION_HTTPS_MEM_CERT, o->crt_pem, MHD_OPTION_HTTPS_MEM_KEY,
                            o->key_pem, MHD_OPTION_NOTIFY_COMPLETED, on_done, s,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                            MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
    if (!s->d) {
        pthread_mutex_destroy(&s->mu);
        free(s);
        return NULL;
    }
    *port = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT)->port;
    return s;
}

void dohsrv_stop(struct dohsrv *s)
{
    if (!s)
        return;
    MHD_stop_daemon(s->d);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

unsigned dohsrv_queries(struct dohsrv *s)
{
    pthread_mutex_lock(&s->mu);
    unsigned n = s->queries;
    pthread_mutex_unlock(&s->mu);
    return n;
}

unsigned dohsrv_queries_for(struct dohsrv *s, const char *name)
{
    unsigned n = 0;
    pthread_mutex_lock(&s->mu);
    for (unsigned i = 0; i < s->queries && i < 64; i++)
        n += strcmp(s->names[i], name) == 0;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void dohsrv_last(struct dohsrv *s, char *out, size_t cap)
{
    pthread_mutex_lock(&s->mu);
    snprintf(out, cap, "%s", s->last);
    pthread_mutex_unlock(&s->mu);
}
