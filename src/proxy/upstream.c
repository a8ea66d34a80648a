/*
 * upstream: non-blocking connects to DCs and to the fronting host. See upstream.h.
 * Invariant: while a connect is under way, c->ufd is the socket, c->up is registered for
 * WRITE with on_connected, and c->timer runs in the matching connect queue.
 */
#include "proxy/upstream.h"

#include "core/alloc.h"
#include "core/str.h"
#include "proxy/dc.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MAX_CANDIDATES 32

struct addr_list {
    struct sockaddr_storage a[MAX_CANDIDATES];
    socklen_t len[MAX_CANDIDATES];
    size_t n;
};

static void list_add(struct addr_list *l, const struct sockaddr *sa, socklen_t len)
{
    if (l->n < MAX_CANDIDATES && len <= sizeof l->a[0]) {
        memcpy(&l->a[l->n], sa, len);
        l->len[l->n++] = len;
    }
}

/* Resolve host:port (numeric or DNS) and append every result. */
static void list_resolve(struct addr_list *l, const char *host, uint16_t port)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    char ps[8];
    snprintf(ps, sizeof ps, "%u", (unsigned)port);
    if (getaddrinfo(host, ps, &hints, &res) != 0)
        return;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next)
        list_add(l, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(res);
}

static void list_hostport(struct addr_list *l, const struct config_hostport *hp)
{
    if (hp->resolved)
        list_add(l, (const struct sockaddr *)&hp->addr, hp->addr_len);
    else
        list_resolve(l, hp->host, hp->port);
}

/* Candidates for dc before prefer-ip ordering: the [dcs] override, else the built-in
   table (dc.c applies the media, CDN, test and fallback rules). */
static void dc_candidates(const struct config *cfg, int32_t dc, struct addr_list *l)
{
    struct dc_options o;
    struct dc_target t;
    dc_options_from_config(&o, cfg);
    if (dc_resolve(&o, dc, &t) < 0)
        return;
    if (t.override) {
        for (size_t i = 0; i < t.override->naddrs; i++)
            list_hostport(l, &t.override->addrs[i]);
        return;
    }
    for (size_t i = 0; i < t.naddrs; i++)
        list_add(l, (const struct sockaddr *)&t.addrs[i], t.addr_lens[i]);
}

static bool family_ok(enum config_prefer_ip p, int fam, int pass)
{
    switch (p) {
    case CONFIG_ONLY_IPV4:
        return pass == 0 && fam == AF_INET;
    case CONFIG_ONLY_IPV6:
        return pass == 0 && fam == AF_INET6;
    case CONFIG_PREFER_IPV4:
        return fam == (pass == 0 ? AF_INET : AF_INET6);
    case CONFIG_PREFER_IPV6:
    default:
        return fam == (pass == 0 ? AF_INET6 : AF_INET);
    }
}

int upstream_dc_addr(const struct config *cfg, int32_t dc, unsigned i, struct sockaddr_storage *out,
                     socklen_t *len)
{
    struct addr_list l;
    l.n = 0;
    dc_candidates(cfg, dc, &l);
    unsigned seen = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t k = 0; k < l.n; k++) {
            if (!family_ok(cfg->prefer_ip, l.a[k].ss_family, pass) || seen++ != i)
                continue;
            memcpy(out, &l.a[k], l.len[k]);
            *len = l.len[k];
            return 0;
        }
    return -ENOENT;
}

void upstream_tune(int fd, const struct config *cfg)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (!cfg->keepalive.enabled)
        return;
    int idle = (int)cfg->keepalive.idle_s, intvl = (int)cfg->keepalive.interval_s;
    int cnt = (int)cfg->keepalive.count;
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

static void on_connected(struct loop *l, struct loop_io *io, unsigned events);
static void on_timer(struct loop *l, struct loop_timer *t);

/* Socket + connect toward sa, registered for WRITE. 0 or -errno (nothing held). */
static int start_connect(struct conn *c, const struct sockaddr_storage *sa, socklen_t len)
{
    int fd = socket(sa->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    upstream_tune(fd, c->w->sh->cfg);
    if (connect(fd, (const struct sockaddr *)sa, len) < 0 && errno != EINPROGRESS) {
        int err = -errno;
        close(fd);
        return err;
    }
    int rc = loop_io_add(&c->w->loop, &c->up, fd, LOOP_WRITE, on_connected);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    c->ufd = fd;
    struct loop_tq *q = c->state == CONN_DC_CONNECT ? &c->w->tq_connect : &c->w->tq_front;
    loop_timer_start(&c->w->loop, q, &c->timer, on_timer);
    return 0;
}

static void drop_socket(struct conn *c)
{
    loop_io_del(&c->w->loop, &c->up);
    if (c->ufd >= 0)
        close(c->ufd);
    c->ufd = -1;
}

void upstream_connect_dc(struct conn *c)
{
    const struct config *cfg = c->w->sh->cfg;
    for (unsigned tries = 0; tries < MAX_CANDIDATES * 2; tries++) {
        struct sockaddr_storage ss;
        socklen_t len;
        if (upstream_dc_addr(cfg, c->dc, c->addr_i, &ss, &len) < 0)
            break;
        if (start_connect(c, &ss, len) == 0)
            return;
        c->addr_i++;
    }
    stats_add(&c->w->stats, dc_connect_fail, 1);
    conn_close(c, END_DC_FAIL);
}

/* The fronting host's name: configured, else the domain of the matched or first ee secret. */
static const char *front_host(const struct conn *c)
{
    const struct config *cfg = c->w->sh->cfg;
    if (cfg->fronting.host[0])
        return cfg->fronting.host;
    if (c->secret < cfg->nsecrets && cfg->secrets[c->secret].secret.kind == SECRET_EE)
        return cfg->secrets[c->secret].secret.domain;
    for (size_t i = 0; i < cfg->nsecrets; i++)
        if (cfg->secrets[i].secret.kind == SECRET_EE)
            return cfg->secrets[i].secret.domain;
    return NULL;
}

/* Is sa one of our own listening addresses (fronting onto ourselves would loop)? */
static bool is_self(const struct config *cfg, const struct sockaddr_storage *sa)
{
    for (size_t i = 0; i < cfg->nlisten; i++) {
        const struct sockaddr_storage *ls = &cfg->listen[i].addr;
        if (ls->ss_family != sa->ss_family)
            continue;
        if (sa->ss_family == AF_INET) {
            const struct sockaddr_in *a = (const void *)sa, *b = (const void *)ls;
            if (a->sin_port == b->sin_port && (a->sin_addr.s_addr == b->sin_addr.s_addr ||
                                               b->sin_addr.s_addr == htonl(INADDR_ANY)))
                return true;
        } else if (sa->ss_family == AF_INET6) {
            const struct sockaddr_in6 *a = (const void *)sa, *b = (const void *)ls;
            if (a->sin6_port == b->sin6_port && (!memcmp(&a->sin6_addr, &b->sin6_addr, 16) ||
                                                 IN6_IS_ADDR_UNSPECIFIED(&b->sin6_addr)))
                return true;
        }
    }
    return false;
}

/* ---- fronting host: cache and asynchronous lookup ---- */

struct dns_job {
    char host[CONFIG_HOST_MAX];
    uint16_t port;
    int fd; /* write end of the worker's pipe */
};

struct dns_answer {
    struct sockaddr_storage addr;
    socklen_t len; /* 0 = no address */
};

/* Resolver thread: one getaddrinfo, one answer written (atomically: < PIPE_BUF). */
static void *dns_main(void *arg)
{
    struct dns_job *job = arg;
    struct addr_list l;
    l.n = 0;
    list_resolve(&l, job->host, job->port);
    struct dns_answer a;
    memset(&a, 0, sizeof a);
    for (size_t i = 0; i < l.n && !a.len; i++) /* IPv4 first: the likelier to be routable */
        if (l.a[i].ss_family == AF_INET)
            memcpy(&a.addr, &l.a[i], (a.len = l.len[i]));
    if (!a.len && l.n)
        memcpy(&a.addr, &l.a[0], (a.len = l.len[0]));
    ssize_t w = write(job->fd, &a, sizeof a);
    (void)w; /* the worker joins this thread before it closes the pipe */
    tg__free(job);
    return NULL;
}

static void connect_front_to(struct conn *c, const struct sockaddr_storage *ss, socklen_t len)
{
    c->state = CONN_FRONT_CONNECT;
    if (start_connect(c, ss, len) < 0)
        conn_close(c, END_FRONT_FAIL);
}

static void on_dns(struct loop *l, struct loop_io *io, unsigned events)
{
    (void)events;
    struct conn_worker *w =
        (struct conn_worker *)(void *)((char *)io - offsetof(struct conn_worker, dns_io));
    struct dns_answer a;
    if (read(w->dns_fd[0], &a, sizeof a) != (ssize_t)sizeof a)
        memset(&a, 0, sizeof a);
    pthread_join(w->dns_th, NULL);
    w->dns_busy = false;
    w->front_known = true;
    w->front_resolved_ms = l->now_ms;
    w->front_len = a.len && !is_self(w->sh->cfg, &a.addr) ? a.len : 0;
    memcpy(&w->front_addr, &a.addr, sizeof a.addr);
    struct conn *c = w->dns_wait;
    w->dns_wait = NULL;
    while (c) { /* each may be closed by what follows: read the link first */
        struct conn *next = c->dns_next;
        c->dns_next = NULL;
        loop_timer_stop(&c->timer);
        if (w->front_len)
            connect_front_to(c, &w->front_addr, w->front_len);
        else
            conn_front_unavailable(c);
        c = next;
    }
}

int upstream_worker_init(struct conn_worker *w)
{
    w->dns_fd[0] = w->dns_fd[1] = -1;
    w->dns_io.fd = -1;
    if (pipe2(w->dns_fd, O_CLOEXEC | O_NONBLOCK) < 0)
        return -errno;
    return loop_io_add(&w->loop, &w->dns_io, w->dns_fd[0], LOOP_READ, on_dns);
}

void upstream_worker_cleanup(struct conn_worker *w)
{
    if (!w)
        return;
    if (w->dns_busy)
        pthread_join(w->dns_th, NULL); /* at most one lookup's time, at shutdown only */
    w->dns_busy = false;
    loop_io_del(&w->loop, &w->dns_io);
    for (int i = 0; i < 2; i++)
        if (w->dns_fd[i] >= 0)
            close(w->dns_fd[i]);
    w->dns_fd[0] = w->dns_fd[1] = -1;
}

void upstream_forget(struct conn *c)
{
    struct conn **pp = &c->w->dns_wait;
    while (*pp && *pp != c)
        pp = &(*pp)->dns_next;
    if (*pp)
        *pp = c->dns_next;
    c->dns_next = NULL;
}

/* Queue c for the fronting address; starts a lookup if none runs. 0 or -errno. */
static int wait_for_dns(struct conn *c, const char *host)
{
    struct conn_worker *w = c->w;
    if (!w->dns_busy) {
        struct dns_job *job = tg__malloc(sizeof *job);
        if (!job)
            return -ENOMEM;
        tg__strlcpy(job->host, host, sizeof job->host);
        job->port = w->sh->cfg->fronting.port ? w->sh->cfg->fronting.port : 443;
        job->fd = w->dns_fd[1];
        if (pthread_create(&w->dns_th, NULL, dns_main, job) != 0) {
            tg__free(job);
            return -EAGAIN;
        }
        w->dns_busy = true;
    }
    c->state = CONN_FRONT_RESOLVE;
    c->dns_next = w->dns_wait;
    w->dns_wait = c;
    loop_timer_start(&w->loop, &w->tq_front, &c->timer, on_timer);
    return 0;
}

int upstream_connect_front(struct conn *c)
{
    const struct config *cfg = c->w->sh->cfg;
    struct conn_worker *w = c->w;
    if (cfg->fronting.resolved) {
        if (is_self(cfg, &cfg->fronting.addr))
            return -ENOENT;
        connect_front_to(c, &cfg->fronting.addr, cfg->fronting.addr_len);
        return 0;
    }
    const char *host = front_host(c);
    if (!host)
        return -ENOENT;
    if (w->front_known && w->loop.now_ms - w->front_resolved_ms <= UPSTREAM_DNS_TTL_MS) {
        if (!w->front_len)
            return -ENOENT;
        connect_front_to(c, &w->front_addr, w->front_len);
        return 0;
    }
    return wait_for_dns(c, host) == 0 ? 0 : -ENOENT;
}

static void connect_failed(struct conn *c)
{
    drop_socket(c);
    if (c->state == CONN_FRONT_RESOLVE) { /* the lookup outlived the fronting timeout */
        upstream_forget(c);
        conn_close(c, END_FRONT_FAIL);
        return;
    }
    if (c->state == CONN_FRONT_CONNECT) {
        conn_close(c, END_FRONT_FAIL);
        return;
    }
    c->addr_i++;
    upstream_connect_dc(c);
}

void upstream_timeout(struct conn *c)
{
    connect_failed(c);
}

static void on_timer(struct loop *l, struct loop_timer *t)
{
    (void)l;
    struct conn *c = (struct conn *)(void *)((char *)t - offsetof(struct conn, timer));
    upstream_timeout(c);
}

static void on_connected(struct loop *l, struct loop_io *io, unsigned events)
{
    (void)l;
    (void)events;
    struct conn *c = (struct conn *)(void *)((char *)io - offsetof(struct conn, up));
    int err = 0;
    socklen_t el = sizeof err;
    if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
        err = errno;
    if (err) {
        connect_failed(c);
        return;
    }
    loop_timer_stop(&c->timer);
    conn_upstream_ready(c);
}
