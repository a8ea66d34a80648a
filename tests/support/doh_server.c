/*
 * doh_server: a table-driven DNS-over-HTTPS server for tests. See doh_server.h.
 * The DNS side is written here from RFC 1035 (not with src/proxy/wire/dnsmsg.c, so the client's
 * parser is not checked against itself): the question is read label by label, the answer
 * names its first owner with a pointer to the question (0xC00C) and later owners in full.
 */
#include "doh_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
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
    int udp_fd, dot_fd, stop_fd; /* -1 when not serving that transport */
    uint16_t udp_port, dot_port;
    SSL_CTX *tls;
    pthread_t udp_th, dot_th;
    bool udp_run, dot_run;
    struct dohsrv_opts o;
    pthread_mutex_t mu;
    unsigned queries;
    unsigned connections;
    unsigned dropped;
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
    if (rcode == DOHSRV_DROP_FIRST || rcode == DOHSRV_CLOSE_AFTER)
        rcode = 0;
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

/* Count an answered question and remember the request's form. */
static void record(struct dohsrv *s, bool ok, const char *form, uint16_t type, const char *name)
{
    pthread_mutex_lock(&s->mu);
    snprintf(s->last, sizeof s->last, "%s type=%u name=%s", form, (unsigned)type, name);
    if (ok) {
        if (s->queries < 64)
            snprintf(s->names[s->queries], NAME_MAX_TEXT, "%s", name);
        s->queries++;
    }
    pthread_mutex_unlock(&s->mu);
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
    char form[160];
    snprintf(form, sizeof form, "%s %s ct=%s accept=%s", method, url, ct ? ct : "-",
             acc ? acc : "-");
    record(s, ok, form, type, name);
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

/* ---- plain UDP and TLS (RFC 7858) ---- */

/* A socket of type on addr:0, bound; its port in *port. fd or -1. */
static int bind_any(const char *addr, int type, uint16_t *port)
{
    struct sockaddr_storage ss = {0};
    socklen_t len;
    if (strchr(addr, ':')) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        inet_pton(AF_INET6, addr, &a->sin6_addr);
        len = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        inet_pton(AF_INET, addr, &a->sin_addr);
        len = sizeof *a;
    }
    int fd = socket(ss.ss_family, type | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) != 0 ||
        (type == SOCK_STREAM && listen(fd, 16) != 0) ||
        getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                           : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

/* Wait until fd is readable (1) or the server stops (0). */
static int wait_readable(const struct dohsrv *s, int fd)
{
    for (;;) {
        struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = s->stop_fd, .events = POLLIN}};
        if (poll(p, 2, -1) < 0 && errno == EINTR)
            continue;
        return p[1].revents ? 0 : 1;
    }
}

/* A DOHSRV_DROP_FIRST name's first UDP question: to be ignored (counted in dropped). */
static bool drop_first(struct dohsrv *s, const char *name)
{
    const struct dohsrv_record *special;
    records_of(s, name, &special);
    if (!special || special->rcode != DOHSRV_DROP_FIRST)
        return false;
    pthread_mutex_lock(&s->mu);
    bool drop = s->dropped++ == 0;
    if (!drop)
        s->dropped--;
    pthread_mutex_unlock(&s->mu);
    return drop;
}

unsigned dohsrv_dropped(struct dohsrv *s)
{
    pthread_mutex_lock(&s->mu);
    unsigned n = s->dropped;
    pthread_mutex_unlock(&s->mu);
    return n;
}

static void *udp_main(void *arg)
{
    struct dohsrv *s = arg;
    uint8_t q[BODY_MAX];
    while (wait_readable(s, s->udp_fd)) {
        struct sockaddr_storage from;
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(s->udp_fd, q, sizeof q, MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
        if (n <= 0)
            continue;
        char name[NAME_MAX_TEXT] = "";
        uint16_t type = 0;
        struct out o = {.n = 0};
        bool ok = respond(s, q, (size_t)n, name, &type, &o);
        if (ok && drop_first(s, name))
            continue;
        record(s, ok, "UDP", type, name);
        if (ok)
            sendto(s->udp_fd, o.b, o.n, 0, (struct sockaddr *)&from, fl);
    }
    return NULL;
}

static bool ssl_read_all(SSL *ssl, uint8_t *p, size_t n)
{
    while (n > 0) {
        int r = SSL_read(ssl, p, (int)n);
        if (r <= 0)
            return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

/* A DOHSRV_CLOSE_AFTER name: its TLS connection ends after the answer. */
static bool close_after(const struct dohsrv *s, const char *name)
{
    const struct dohsrv_record *special;
    records_of(s, name, &special);
    return special && special->rcode == DOHSRV_CLOSE_AFTER;
}

/* One DoT client: length-prefixed questions until it closes (reads time out after 2 s). */
static void dot_serve(struct dohsrv *s, int c)
{
    struct timeval tv = {.tv_sec = 2};
    int one = 1;
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    SSL *ssl = SSL_new(s->tls);
    uint8_t lb[2], q[BODY_MAX];
    if (ssl && SSL_set_fd(ssl, c) && SSL_accept(ssl) == 1) {
        while (ssl_read_all(ssl, lb, 2)) {
            size_t n = (size_t)(lb[0] << 8 | lb[1]);
            char name[NAME_MAX_TEXT] = "";
            uint16_t type = 0;
            struct out o = {.n = 2};
            if (n > sizeof q || !ssl_read_all(ssl, q, n))
                break;
            bool ok = respond(s, q, n, name, &type, &o);
            record(s, ok, "TLS", type, name);
            if (!ok)
                break;
            o.b[0] = (uint8_t)((o.n - 2) >> 8);
            o.b[1] = (uint8_t)(o.n - 2);
            if (SSL_write(ssl, o.b, (int)o.n) != (int)o.n || close_after(s, name))
                break;
        }
    }
    SSL_free(ssl);
    ERR_clear_error();
    close(c);
}

static void *dot_main(void *arg)
{
    struct dohsrv *s = arg;
    while (wait_readable(s, s->dot_fd)) {
        int c = accept4(s->dot_fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            continue;
        pthread_mutex_lock(&s->mu);
        s->connections++;
        pthread_mutex_unlock(&s->mu);
        dot_serve(s, c);
    }
    return NULL;
}

/* The server side TLS context from the PEM texts. */
static SSL_CTX *server_ctx(const char *crt_pem, const char *key_pem)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    BIO *cb = BIO_new_mem_buf(crt_pem, -1), *kb = BIO_new_mem_buf(key_pem, -1);
    X509 *crt = cb ? PEM_read_bio_X509(cb, NULL, NULL, NULL) : NULL;
    EVP_PKEY *key = kb ? PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL) : NULL;
    bool ok = ctx && crt && key && SSL_CTX_use_certificate(ctx, crt) == 1 &&
              SSL_CTX_use_PrivateKey(ctx, key) == 1;
    X509_free(crt);
    EVP_PKEY_free(key);
    BIO_free(cb);
    BIO_free(kb);
    if (!ok) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

/* The UDP and DoT listeners the options ask for. 0 or -1. */
static int start_extra(struct dohsrv *s)
{
    s->udp_fd = s->dot_fd = -1;
    s->stop_fd = eventfd(0, EFD_CLOEXEC);
    if (s->stop_fd < 0)
        return -1;
    if (s->o.udp) {
        if ((s->udp_fd = bind_any(s->o.addr, SOCK_DGRAM, &s->udp_port)) < 0 ||
            pthread_create(&s->udp_th, NULL, udp_main, s) != 0)
            return -1;
        s->udp_run = true;
    }
    if (s->o.dot) {
        if (!(s->tls = server_ctx(s->o.crt_pem, s->o.key_pem)) ||
            (s->dot_fd = bind_any(s->o.addr, SOCK_STREAM, &s->dot_port)) < 0 ||
            pthread_create(&s->dot_th, NULL, dot_main, s) != 0)
            return -1;
        s->dot_run = true;
    }
    return 0;
}

static void stop_extra(struct dohsrv *s)
{
    uint64_t one = 1;
    if (s->stop_fd >= 0 && write(s->stop_fd, &one, sizeof one) < 0)
        perror("doh_server: stop");
    if (s->udp_run)
        pthread_join(s->udp_th, NULL);
    if (s->dot_run)
        pthread_join(s->dot_th, NULL);
    int fds[3] = {s->udp_fd, s->dot_fd, s->stop_fd};
    for (int i = 0; i < 3; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    SSL_CTX_free(s->tls);
}

uint16_t dohsrv_udp_port(const struct dohsrv *s)
{
    return s->udp_port;
}

uint16_t dohsrv_dot_port(const struct dohsrv *s)
{
    return s->dot_port;
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
    if (!s->d || start_extra(s) != 0) {
        if (s->d)
            MHD_stop_daemon(s->d);
        stop_extra(s);
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
    stop_extra(s);
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
