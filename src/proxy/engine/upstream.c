/*
 * upstream: the connector for DCs and the fronting host. See upstream.h.
 * Invariants: an idle request (PH_IDLE) holds nothing. While connecting (PH_CONNECT), r->io
 * holds the socket, registered for WRITE with on_connected, and r->timer runs in the
 * matching connect queue (not for an early request); a DC connect that completed inside
 * upstream_dc never enters PH_CONNECT (the socket goes straight to the caller). While
 * resolving (PH_RESOLVE), r is in exactly one name's wait list (r->dns_idx) with its timer
 * running, and has no socket.
 * Every path that leaves PH_CONNECT or PH_RESOLVE either starts the next attempt or calls
 * finish() once. A name's answer fields (ans_*) belong to its resolver thread while busy;
 * the cache fields belong to the worker thread alone.
 */
#include "proxy/engine/upstream.h"

#include "core/alloc.h"
#include "proxy/engine/conn.h"
#include "core/str.h"
#include "proxy/engine/chain.h"
#include "proxy/config/dc.h"
#include "proxy/services/doh.h"
#include "proxy/engine/selfaddr.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MAX_CANDIDATES 32

enum { PH_IDLE = 0, PH_RESOLVE = 1, PH_CONNECT = 2 };

struct addr_list {
    struct sockaddr_storage a[MAX_CANDIDATES];
    socklen_t len[MAX_CANDIDATES];
    size_t n;
};

/* A host name the engine may need, its cached answer and the connections waiting for it. */
struct upstream_name {
    char host[CONFIG_HOST_MAX];
    uint16_t port;
    uint16_t idx; /* own index in worker->names */
    bool front;   /* a fronting host (its answers are checked against our listeners) */
    /* cache (worker thread only) */
    bool known; /* an answer is cached (positive or negative) */
    bool busy;  /* a resolver thread runs; it owns the ans_* fields */
    uint64_t resolved_ms;
    int err;               /* getaddrinfo error of the cached answer, 0 = none */
    uint64_t expires_ms;   /* DoH: the answer's TTL ends then (doh_now_ms's clock) */
    char why[DOH_ERR_MAX]; /* DoH: why the cached answer has no address ("" = none) */
    size_t n;
    struct sockaddr_storage a[UPSTREAM_DNS_MAX_ADDRS];
    socklen_t len[UPSTREAM_DNS_MAX_ADDRS];
    struct upstream_req *wait; /* requests waiting for the running lookup */
    /* lookup in progress (resolver thread while busy) */
    pthread_t th;
    int notify_fd;
    struct doh *doh; /* DoH resolver, or NULL for getaddrinfo */
    enum config_prefer_ip prefer;
    int ans_err;
    uint64_t ans_expires_ms;
    char ans_why[DOH_ERR_MAX];
    size_t ans_n;
    struct sockaddr_storage ans_a[UPSTREAM_DNS_MAX_ADDRS];
    socklen_t ans_len[UPSTREAM_DNS_MAX_ADDRS];
};

static upstream_gai_fn gai_hook; /* tests only; NULL = getaddrinfo */

void upstream_set_resolver(upstream_gai_fn fn)
{
    gai_hook = fn;
}

static void list_add(struct addr_list *l, const struct sockaddr *sa, socklen_t len)
{
    if (l->n < MAX_CANDIDATES && len <= sizeof l->a[0]) {
        memcpy(&l->a[l->n], sa, len);
        l->len[l->n++] = len;
    }
}

/* Every cached address of name e (a name with no answer adds nothing). */
static void list_name(struct addr_list *l, const struct upstream_name *e)
{
    for (size_t i = 0; e->known && i < e->n; i++)
        list_add(l, (const struct sockaddr *)&e->a[i], e->len[i]);
}

static struct upstream_name *name_find(const struct conn_worker *w, const char *host, uint16_t port)
{
    for (size_t i = 0; w && i < w->upstream.nnames; i++)
        if (w->upstream.names[i].port == port && strcmp(w->upstream.names[i].host, host) == 0)
            return &w->upstream.names[i];
    return NULL;
}

/* A cached answer young enough to use: positive ones for UPSTREAM_DNS_TTL_MS, negative
   ones for UPSTREAM_DNS_NEG_TTL_MS (a passing DNS failure must not shut a DC for long);
   DoH answers for their own TTL (doh.h), on the DoH cache's clock. */
static bool name_fresh(const struct conn_worker *w, const struct upstream_name *e)
{
    if (!e->known || e->busy)
        return false;
    if (w->sh->doh)
        return doh_now_ms() < e->expires_ms;
    uint64_t ttl = e->n ? UPSTREAM_DNS_TTL_MS : UPSTREAM_DNS_NEG_TTL_MS;
    return w->loop.now_ms - e->resolved_ms <= ttl;
}

/* Why name e gave no address, for a log line. */
static const char *name_why(const struct upstream_name *e)
{
    return e->busy     ? "lookup still running"
           : e->why[0] ? e->why
           : e->err    ? gai_strerror(e->err)
                       : "no usable address";
}

/* Candidates for dc before prefer-ip ordering: the [dcs] override, else the built-in
   table (dc.c applies the media, CDN, test and fallback rules). Names come from w's cache
   (skipped without a worker); *failed is set to a name that gave no address. */
static void dc_candidates(const struct config *cfg, const struct conn_worker *w, int32_t dc,
                          struct addr_list *l, const struct upstream_name **failed)
{
    struct dc_options o;
    struct dc_target t;
    dc_options_from_config(&o, cfg);
    if (dc_resolve(&o, dc, &t) < 0)
        return;
    if (t.override) {
        for (size_t i = 0; i < t.override->naddrs; i++) {
            const struct value_hostport *hp = &t.override->addrs[i];
            const struct upstream_name *e = hp->resolved ? NULL : name_find(w, hp->host, hp->port);
            if (hp->resolved)
                list_add(l, (const struct sockaddr *)&hp->addr, hp->addr_len);
            else if (e)
                list_name(l, e);
            if (e && (!e->known || !e->n) && failed)
                *failed = e;
        }
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

/* Every address to try for dc, in the order prefer-ip gives. */
static void dc_ordered(const struct config *cfg, const struct conn_worker *w, int32_t dc,
                       struct addr_list *out, const struct upstream_name **failed)
{
    struct addr_list l;
    l.n = 0;
    out->n = 0;
    dc_candidates(cfg, w, dc, &l, failed);
    for (int pass = 0; pass < 2; pass++)
        for (size_t k = 0; k < l.n; k++)
            if (family_ok(cfg->prefer_ip, l.a[k].ss_family, pass))
                list_add(out, (const struct sockaddr *)&l.a[k], l.len[k]);
}

int upstream_dc_addr(const struct config *cfg, int32_t dc, unsigned i, struct sockaddr_storage *out,
                     socklen_t *len)
{
    struct addr_list l;
    dc_ordered(cfg, NULL, dc, &l, NULL);
    if (i >= l.n)
        return -ENOENT;
    memcpy(out, &l.a[i], l.len[i]);
    *len = l.len[i];
    return 0;
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

void upstream_req_bind(struct upstream_req *r, const struct config *cfg, struct conn_tqs *tqs)
{
    r->cfg = cfg;
    r->tqs = tqs;
}

/* Idle again, keeping what the caller set once (cfg, tqs, uio). */
static void req_reset(struct upstream_req *r)
{
    const struct config *cfg = r->cfg;
    struct conn_tqs *tqs = r->tqs;
    struct upstream_io *uio = r->uio;
    memset(r, 0, sizeof *r);
    r->cfg = cfg;
    r->tqs = tqs;
    r->uio = uio;
}

void upstream_req_init(struct upstream_req *r, struct upstream_io *uio)
{
    r->uio = uio;
    req_reset(r);
    uio->io.fd = -1;
    uio->req = r;
}

/* The deadline queue of r's kind: fronting, or the DC connect timeout. */
static struct loop_tq *req_tq(const struct upstream_req *r)
{
    return r->front ? &r->tqs->front : &r->tqs->connect;
}

enum upstream_why upstream_why_errno(int err)
{
    switch (err) {
    case ECONNREFUSED:
        return UPSTREAM_WHY_REFUSED;
    case ETIMEDOUT:
        return UPSTREAM_WHY_TIMEOUT;
    case ENETUNREACH:
    case EHOSTUNREACH:
    case ENETDOWN:
    case EHOSTDOWN:
    case EADDRNOTAVAIL:
    case EAFNOSUPPORT:
        return UPSTREAM_WHY_UNREACHABLE;
    default:
        return UPSTREAM_WHY_ERROR;
    }
}

/* A connect attempt failed at once with errno err: r->why says why, fd is closed. -err. */
static int connect_failed(struct upstream_req *r, int fd, int err)
{
    r->why = (uint8_t)upstream_why_errno(err);
    close(fd);
    return -err;
}

/* Socket + connect toward sa. 0: under way, registered for WRITE, deadline running (not for
   an early request: its caller bounds it). With at_once (upstream_dc's own call only), 1
   when the connect completed inside the call: the socket in *at_once, registered nowhere,
   no deadline. Else -errno (nothing held; r->why says why). */
static int start_connect(struct upstream_req *r, const struct sockaddr_storage *sa, socklen_t len,
                         int *at_once)
{
    struct conn_worker *w = r->w;
    int fd = socket(sa->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        r->why = (uint8_t)upstream_why_errno(errno);
        return -errno;
    }
    upstream_tune(fd, r->cfg);
    int rc = connect(fd, (const struct sockaddr *)sa, len);
    if (rc < 0 && errno != EINPROGRESS)
        return connect_failed(r, fd, errno);
    if (rc < 0 && at_once && selfaddr_local(&w->sh->self, (const struct sockaddr *)sa)) {
        /* This host answers the SYN inside connect(), which says EINPROGRESS only because
           it held the socket meanwhile; asked again, it tells how that ended: 0 connected,
           the failure (a refusal), or EALREADY (not answered: a full accept queue). Asked
           only here, so a remote DC never pays the call (issue 30). */
        rc = connect(fd, (const struct sockaddr *)sa, len);
        if (rc < 0 && errno != EALREADY && errno != EINTR)
            return connect_failed(r, fd, errno);
    }
    if (rc == 0 && at_once) {
        *at_once = fd;
        return 1;
    }
    rc = loop_io_add(&w->loop, &r->uio->io, fd, LOOP_WRITE, on_connected);
    if (rc < 0) {
        r->why = UPSTREAM_WHY_ERROR;
        close(fd);
        return rc;
    }
    r->phase = PH_CONNECT;
    if (!r->early)
        loop_timer_start(&w->loop, req_tq(r), &r->timer, on_timer);
    return 0;
}

static void drop_socket(struct upstream_req *r)
{
    int fd = r->uio->io.fd;
    loop_io_del(&r->w->loop, &r->uio->io);
    if (fd >= 0)
        close(fd);
    r->uio->io.fd = -1;
}

/* The one report: r is idle again before its owner hears of it. */
static void finish(struct upstream_req *r, int fd, int result)
{
    chain_free(r);
    loop_timer_stop(&r->timer);
    r->phase = PH_IDLE;
    r->early = false;
    r->done(r, fd, result);
}

/* ---- resolver threads ---- */

/* Resolver thread, DoH: the answer (and how long it may be used) into e's ans_* fields. */
static void name_doh(struct upstream_name *e)
{
    struct doh_result res;
    int st = doh_resolve(e->doh, e->host, e->prefer, &res);
    for (size_t i = 0; i < res.n && e->ans_n < UPSTREAM_DNS_MAX_ADDRS; i++) {
        struct sockaddr_storage *ss = &e->ans_a[e->ans_n];
        memset(ss, 0, sizeof *ss);
        if (res.a[i].family == AF_INET) {
            struct sockaddr_in *in = (struct sockaddr_in *)(void *)ss;
            in->sin_family = AF_INET;
            memcpy(&in->sin_addr, res.a[i].addr, 4);
            e->ans_len[e->ans_n] = sizeof *in;
        } else {
            struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)(void *)ss;
            in6->sin6_family = AF_INET6;
            memcpy(&in6->sin6_addr, res.a[i].addr, 16);
            e->ans_len[e->ans_n] = sizeof *in6;
        }
        value_set_port(ss, e->port);
        e->ans_n++;
    }
    /* a failure (not an answer) is held as long as a failed system lookup */
    uint64_t ttl = st >= 0 ? res.ttl_ms : UPSTREAM_DNS_NEG_TTL_MS;
    if (st > 0 && ttl > UPSTREAM_DNS_NEG_TTL_MS)
        ttl = UPSTREAM_DNS_NEG_TTL_MS;
    e->ans_expires_ms = doh_now_ms() + ttl;
    tg__strlcpy(e->ans_why, res.err, sizeof e->ans_why);
}

/* Resolver thread: one lookup (getaddrinfo, or DoH when configured) into e's ans_* fields,
   then e's index to the worker. */
static void *name_main(void *arg)
{
    struct upstream_name *e = arg;
    e->ans_n = 0;
    e->ans_err = 0;
    e->ans_why[0] = '\0';
    if (e->doh) {
        name_doh(e);
    } else {
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
        char ps[8];
        snprintf(ps, sizeof ps, "%u", (unsigned)e->port);
        upstream_gai_fn gai = gai_hook ? gai_hook : getaddrinfo;
        e->ans_err = gai(e->host, ps, &hints, &res);
        for (struct addrinfo *ai = e->ans_err ? NULL : res; ai; ai = ai->ai_next)
            if (e->ans_n < UPSTREAM_DNS_MAX_ADDRS && ai->ai_addrlen <= sizeof e->ans_a[0]) {
                memcpy(&e->ans_a[e->ans_n], ai->ai_addr, ai->ai_addrlen);
                e->ans_len[e->ans_n++] = ai->ai_addrlen;
            }
        if (res)
            freeaddrinfo(res);
    }
    uint32_t idx = e->idx;
    /* 4 bytes are written atomically, and the pipe holds far more than one per name, so
       this never blocks; the worker joins this thread before it closes the pipe */
    ssize_t wr = write(e->notify_fd, &idx, sizeof idx);
    (void)wr;
    return NULL;
}

/* Start a lookup of e unless one runs. 0 or -errno (no thread). */
static int name_lookup(struct conn_worker *w, struct upstream_name *e)
{
    if (e->busy)
        return 0;
    e->notify_fd = w->upstream.dns_fd[1];
    e->doh = w->sh->doh;
    e->prefer = w->gen->cfg->prefer_ip; /* the worker's current generation */
    if (pthread_create(&e->th, NULL, name_main, e) != 0)
        return -EAGAIN;
    e->busy = true;
    return 0;
}

/* Queue r on e's running lookup, under the fronting or the DC connect timeout. */
static void name_wait(struct upstream_req *r, struct upstream_name *e)
{
    r->phase = PH_RESOLVE;
    r->dns_idx = e->idx;
    r->dns_next = e->wait;
    e->wait = r;
    loop_timer_start(&r->w->loop, req_tq(r), &r->timer, on_timer);
}

/* Take r off the wait list of the name it waits for. */
static void name_unwait(struct upstream_req *r)
{
    if (r->phase != PH_RESOLVE || r->dns_idx >= r->w->upstream.nnames)
        return;
    struct upstream_req **pp = &r->w->upstream.names[r->dns_idx].wait;
    while (*pp && *pp != r)
        pp = &(*pp)->dns_next;
    if (*pp)
        *pp = r->dns_next;
    r->dns_next = NULL;
}

static void front_resume(struct upstream_req *r);
static void dc_resume(struct upstream_req *r);

/* Log (warning) each of a[0..n) that is this proxy's own listener: a target that can
   never be connected to. Once per lookup or at start-up, never per connection. */
static void warn_self(const struct conn_shared *sh, const char *host,
                      const struct sockaddr_storage *a, const socklen_t *len, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct sockaddr_storage ss = a[i];
        socklen_t l = len[i];
        selfaddr_normalize(&ss, &l);
        if (!selfaddr_has(&sh->self, (const struct sockaddr *)&ss))
            continue;
        char text[64];
        value_format_addr(&a[i], text, sizeof text);
        tg__log(NULL, TG__LOG_WARN,
                "fronting host %s: %s is this proxy's own listener, so it is never fronted to "
                "(with no other address, failed handshakes are held until the handshake "
                "deadline and closed: probes can tell)",
                host, text);
    }
}

void upstream_check_self(const struct conn_shared *sh, const struct config *cfg)
{
    if (cfg->fronting.resolved)
        warn_self(sh, cfg->fronting.host, &cfg->fronting.addr, &cfg->fronting.addr_len, 1);
}

/* One lookup finished: cache its answer and resume every connection waiting for it. */
static void name_done(struct conn_worker *w, struct upstream_name *e)
{
    pthread_join(e->th, NULL); /* also makes the thread's ans_* writes visible here */
    e->busy = false;
    e->known = true;
    e->resolved_ms = w->loop.now_ms;
    e->err = e->ans_err;
    e->expires_ms = e->ans_expires_ms;
    memcpy(e->why, e->ans_why, sizeof e->why);
    e->n = e->ans_n;
    memcpy(e->a, e->ans_a, sizeof e->a);
    memcpy(e->len, e->ans_len, sizeof e->len);
    if (!e->n && tg__ratelimit_allow(&w->rl, w->loop.now_ms))
        tg__log(NULL, TG__LOG_WARN, "dns: cannot resolve %s: %s", e->host,
                e->why[0] ? e->why
                : e->err  ? gai_strerror(e->err)
                          : "no address");
    if (e->front)
        warn_self(w->sh, e->host, e->a, e->len, e->n);
    struct upstream_req *r = e->wait;
    e->wait = NULL;
    while (r) { /* each may be reported (and its owner gone) below: read the link first */
        struct upstream_req *next = r->dns_next;
        r->dns_next = NULL;
        loop_timer_stop(&r->timer);
        r->phase = PH_IDLE;
        if (r->front)
            front_resume(r);
        else
            dc_resume(r);
        r = next;
    }
}

static void on_dns(struct loop *l, struct loop_io *io, unsigned events)
{
    (void)l;
    (void)events;
    struct conn_worker *w =
        (struct conn_worker *)(void *)((char *)io - offsetof(struct conn_worker, upstream.dns_io));
    uint32_t idx[64];
    ssize_t n = read(w->upstream.dns_fd[0], idx, sizeof idx);
    for (ssize_t i = 0; i < n / (ssize_t)sizeof idx[0]; i++)
        if (idx[i] < w->upstream.nnames && w->upstream.names[idx[i]].busy)
            name_done(w, &w->upstream.names[idx[i]]);
}

/* Register host:port (a name, not an IP literal) once. 0 or -ENOMEM. */
static int name_add(struct conn_worker *w, const char *host, uint16_t port, bool front)
{
    size_t cap = w->upstream.names_cap;
    w->upstream.dc_names |= host[0] && !front;
    struct upstream_name *old = host[0] ? name_find(w, host, port) : NULL;
    if (old)
        old->front |= front;
    if (!host[0] || old)
        return 0;
    if (w->upstream.nnames == cap)
        return -ENOSPC; /* a reload added more names than the room kept for them */
    struct upstream_name *e = &w->upstream.names[w->upstream.nnames];
    tg__strlcpy(e->host, host, sizeof e->host);
    e->port = port;
    e->idx = (uint16_t)w->upstream.nnames++;
    e->front = front;
    return 0;
}

/* Every name a connection under cfg may need: the fronting host (configured, else each ee
   secret's domain) and the [dcs] host names. 0, or -ENOSPC past the table's room. */
static int names_add(struct conn_worker *w, const struct config *cfg)
{
    uint16_t fport = cfg->fronting.port ? cfg->fronting.port : 443;
    int rc = 0;
    if (!cfg->fronting.resolved && cfg->fronting.host[0])
        rc = name_add(w, cfg->fronting.host, fport, true);
    for (size_t i = 0; rc == 0 && !cfg->fronting.host[0] && i < cfg->nsecrets; i++)
        if (cfg->secrets[i].secret.kind == SECRET_EE)
            rc = name_add(w, cfg->secrets[i].secret.domain, fport, true);
    for (size_t i = 0; rc == 0 && i < cfg->ndcs; i++)
        for (size_t k = 0; rc == 0 && k < cfg->dcs[i].naddrs; k++)
            if (!cfg->dcs[i].addrs[k].resolved)
                rc = name_add(w, cfg->dcs[i].addrs[k].host, cfg->dcs[i].addrs[k].port, false);
    return rc;
}

/* The table is allocated once (resolver threads write into their entry): room for every
   name of the starting config plus UPSTREAM_NAMES_SPARE that reloads may add. */
static int names_init(struct conn_worker *w)
{
    const struct config *cfg = w->gen->cfg;
    size_t cap = cfg->nsecrets + 1 + UPSTREAM_NAMES_SPARE;
    for (size_t i = 0; i < cfg->ndcs; i++)
        cap += cfg->dcs[i].naddrs;
    w->upstream.names = tg__calloc(cap, sizeof *w->upstream.names);
    if (!w->upstream.names)
        return -ENOMEM;
    w->upstream.names_cap = cap;
    return names_add(w, cfg);
}

void upstream_worker_adopt(struct conn_worker *w, const struct config *cfg)
{
    if (names_add(w, cfg) < 0 && tg__ratelimit_allow(&w->rl, w->loop.now_ms))
        tg__log(NULL, TG__LOG_WARN,
                "reload: more new host names (fronting host, ee domains, [dcs]) than %d; "
                "the ones beyond are not resolved until a restart",
                UPSTREAM_NAMES_SPARE);
}

int upstream_worker_init(struct conn_worker *w)
{
    w->upstream.dns_fd[0] = w->upstream.dns_fd[1] = -1;
    w->upstream.dns_io.fd = -1;
    int rc = names_init(w);
    if (rc < 0)
        return rc;
    if (pipe2(w->upstream.dns_fd, O_CLOEXEC | O_NONBLOCK) < 0)
        return -errno;
    return loop_io_add(&w->loop, &w->upstream.dns_io, w->upstream.dns_fd[0], LOOP_READ, on_dns);
}

void upstream_worker_cleanup(struct conn_worker *w)
{
    if (!w)
        return;
    for (size_t i = 0; w->upstream.names && i < w->upstream.nnames; i++)
        if (w->upstream.names[i].busy) /* at most one lookup's time, at shutdown only */
            pthread_join(w->upstream.names[i].th, NULL);
    tg__free(w->upstream.names);
    w->upstream.names = NULL;
    w->upstream.nnames = 0;
    loop_io_del(&w->loop, &w->upstream.dns_io);
    for (int i = 0; i < 2; i++)
        if (w->upstream.dns_fd[i] >= 0)
            close(w->upstream.dns_fd[i]);
    w->upstream.dns_fd[0] = w->upstream.dns_fd[1] = -1;
}

/* ---- DC ---- */

/* Start a lookup for every [dcs] name of dc without a fresh answer; the first such name
   that is being looked up (for c to wait on), or NULL when every answer is fresh (or no
   lookup could start: then the stale or missing answer is used). */
static struct upstream_name *dc_pending(struct conn_worker *w, const struct config *cfg, int32_t dc)
{
    if (!w->upstream.dc_names) /* IP literals and the built-in table only: nothing to wait for */
        return NULL;
    struct dc_options o;
    struct dc_target t;
    dc_options_from_config(&o, cfg);
    if (dc_resolve(&o, dc, &t) < 0 || !t.override)
        return NULL;
    struct upstream_name *first = NULL;
    for (size_t i = 0; i < t.override->naddrs; i++) {
        const struct value_hostport *hp = &t.override->addrs[i];
        struct upstream_name *e = hp->resolved ? NULL : name_find(w, hp->host, hp->port);
        if (!e || name_fresh(w, e))
            continue;
        if (name_lookup(w, e) == 0 && !first)
            first = e;
    }
    return first;
}

/* Connect to the DC from address r->addr_i on, with the answers cached now (a name still
   being looked up contributes its previous answer, if any). 0 when a connect is under way;
   with at_once (upstream_dc's own call), UPSTREAM_CONNECTED when one completed at once (the
   socket in *at_once); else the result to report (nothing held). */
static int dc_connect_cached(struct upstream_req *r, int *at_once)
{
    struct conn_worker *w = r->w;
    struct addr_list l;
    const struct upstream_name *failed = NULL;
    if (chain_enabled(r->cfg)) { /* through the SOCKS5 upstreams */
        int rc = chain_try(r);
        if (rc < 0)
            chain_free(r);
        return rc;
    }
    dc_ordered(r->cfg, w, r->dc, &l, &failed);
    for (; r->addr_i < l.n; r->addr_i++) {
        int rc = start_connect(r, &l.a[r->addr_i], l.len[r->addr_i], at_once);
        if (rc >= 0)
            return rc ? UPSTREAM_CONNECTED : 0;
    }
    if (!l.n) /* nothing tried now: the reason is the names', or that there is nothing */
        r->why = failed ? UPSTREAM_WHY_DNS : UPSTREAM_WHY_NO_ADDRESS;
    if (!l.n && failed) {
        if (tg__ratelimit_allow(&w->rl, w->loop.now_ms))
            tg__log(NULL, TG__LOG_WARN, "dc %d: %s: no address (%s)", r->dc, failed->host,
                    name_why(failed));
        return UPSTREAM_NO_ADDRESS;
    }
    return UPSTREAM_UNREACHABLE;
}

/* The lookup r waited for is over (answered, or its deadline passed): connect with what
   the cache holds now. */
static void dc_resume(struct upstream_req *r)
{
    r->addr_i = 0;
    int rc = dc_connect_cached(r, NULL);
    if (rc < 0)
        finish(r, -1, rc);
}

int upstream_dc(struct upstream_req *r, struct conn_worker *w, int32_t dc, upstream_done_fn done,
                int *fd)
{
    req_reset(r);
    r->w = w;
    r->done = done;
    r->dc = dc;
    *fd = -1;
    if (chain_enabled(r->cfg)) /* [dcs] names go to the SOCKS5 upstream as they are */
        return dc_connect_cached(r, NULL);
    struct upstream_name *e =
        dc_pending(w, r->cfg, dc); /* the first attempt waits for fresh answers */
    if (e) {
        name_wait(r, e);
        return 0;
    }
    return dc_connect_cached(r, fd);
}

/* ---- fronting host ---- */

/* The fronting host's name: configured, else the domain of the matched or first ee secret. */
static const char *front_host(const struct upstream_req *r)
{
    const struct config *cfg = r->cfg;
    if (cfg->fronting.host[0])
        return cfg->fronting.host;
    if (r->secret < cfg->nsecrets && cfg->secrets[r->secret].secret.kind == SECRET_EE)
        return cfg->secrets[r->secret].secret.domain;
    for (size_t i = 0; i < cfg->nsecrets; i++)
        if (cfg->secrets[i].secret.kind == SECRET_EE)
            return cfg->secrets[i].secret.domain;
    return NULL;
}

/* Every address to front to, in prefer-ip order, without this proxy's own endpoints: the
   configured IP literal (used whatever its family: the operator wrote it), else the cached
   answer for the fronting host's name. *nself counts the addresses skipped as our own. */
static void front_list(const struct upstream_req *r, const struct upstream_name *e,
                       struct addr_list *out, size_t *nself)
{
    const struct conn_shared *sh = r->w->sh;
    const struct config *cfg = r->cfg;
    struct addr_list l;
    l.n = 0;
    out->n = 0;
    *nself = 0;
    if (cfg->fronting.resolved)
        list_add(&l, (const struct sockaddr *)&cfg->fronting.addr, cfg->fronting.addr_len);
    else if (e)
        list_name(&l, e);
    for (size_t k = 0; k < l.n; k++) {
        selfaddr_normalize(&l.a[k], &l.len[k]);
        if (selfaddr_has(&sh->self, (const struct sockaddr *)&l.a[k]))
            (*nself)++;
    }
    for (int pass = 0; pass < 2; pass++)
        for (size_t k = 0; k < l.n; k++)
            if ((cfg->fronting.resolved ? pass == 0
                                        : family_ok(cfg->prefer_ip, l.a[k].ss_family, pass)) &&
                !selfaddr_has(&sh->self, (const struct sockaddr *)&l.a[k]))
                list_add(out, (const struct sockaddr *)&l.a[k], l.len[k]);
}

/* The fronting host's name entry for r (NULL for an IP literal or no target). */
static struct upstream_name *front_name(const struct upstream_req *r)
{
    const struct config *cfg = r->cfg;
    if (cfg->fronting.resolved)
        return NULL;
    const char *host = front_host(r);
    return host ? name_find(r->w, host, cfg->fronting.port ? cfg->fronting.port : 443) : NULL;
}

/* Connect to the fronting host from address r->addr_i on. 0 when a connect is under way,
   -ENOENT when no address is left (nothing held; the caller decides). */
static int front_try(struct upstream_req *r, const struct upstream_name *e)
{
    struct conn_worker *w = r->w;
    struct addr_list l;
    size_t nself = 0;
    front_list(r, e, &l, &nself);
    if (r->addr_i == 0 && nself && !l.n)
        stats_add(&w->stats, front_self, 1); /* logged at start-up or with the lookup */
    for (; r->addr_i < l.n; r->addr_i++)
        if (start_connect(r, &l.a[r->addr_i], l.len[r->addr_i], NULL) == 0)
            return 0;
    return -ENOENT;
}

/* The lookup r waited for has an answer: connect, or report that it gave none. */
static void front_resume(struct upstream_req *r)
{
    if (front_try(r, &r->w->upstream.names[r->dns_idx]) < 0)
        finish(r, -1, UPSTREAM_NO_ADDRESS);
}

/* The fronting host does not depend on which secret a client tried: set in
   [domain-fronting], or every ee secret names the same domain. */
static bool front_fixed(const struct config *cfg)
{
    const char *d = NULL;
    for (size_t i = 0; !cfg->fronting.host[0] && i < cfg->nsecrets; i++) {
        const struct secret *sec = &cfg->secrets[i].secret;
        if (sec->kind != SECRET_EE)
            continue;
        if (d && strcmp(d, sec->domain) != 0)
            return false;
        d = sec->domain;
    }
    return true;
}

/* An early request: only with the address at hand, never waiting for a lookup. */
static int front_early(struct upstream_req *r, struct upstream_name *e)
{
    const struct config *cfg = r->cfg;
    if (!front_fixed(cfg))
        return UPSTREAM_NO_ADDRESS;
    if (!cfg->fronting.resolved && !(e && name_fresh(r->w, e))) {
        if (e)
            name_lookup(r->w, e); /* ready for the connections that come next */
        return UPSTREAM_NO_ADDRESS;
    }
    r->early = true;
    if (front_try(r, e) == 0)
        return 0;
    r->early = false;
    return UPSTREAM_NO_ADDRESS;
}

int upstream_front(struct upstream_req *r, struct conn_worker *w, uint32_t secret, unsigned flags,
                   upstream_done_fn done)
{
    req_reset(r);
    r->w = w;
    r->done = done;
    r->secret = secret;
    r->front = true;
    struct upstream_name *e = front_name(r);
    if (flags & UPSTREAM_EARLY)
        return front_early(r, e);
    if (r->cfg->fronting.resolved || (e && name_fresh(w, e)))
        return front_try(r, e) == 0 ? 0 : UPSTREAM_NO_ADDRESS;
    if (!e || name_lookup(w, e) < 0)
        return UPSTREAM_NO_ADDRESS;
    name_wait(r, e);
    return 0;
}

void upstream_promote(struct upstream_req *r)
{
    if (r->phase != PH_CONNECT || !r->early)
        return;
    r->early = false;
    loop_timer_start(&r->w->loop, req_tq(r), &r->timer, on_timer);
}

void upstream_cancel(struct upstream_req *r)
{
    chain_free(r);
    if (r->phase == PH_IDLE)
        return;
    loop_timer_stop(&r->timer);
    name_unwait(r);
    if (r->phase == PH_CONNECT)
        drop_socket(r);
    r->phase = PH_IDLE;
    r->early = false;
}

/* The address being tried failed (an error, or its deadline), or the lookup's deadline
   passed: the next attempt, or the report. */
static void attempt_failed(struct upstream_req *r)
{
    if (r->phase == PH_RESOLVE) { /* the lookup outlived the deadline */
        name_unwait(r);
        r->phase = PH_IDLE;
        if (r->front)
            finish(r, -1, UPSTREAM_UNREACHABLE);
        else
            dc_resume(r); /* the addresses at hand, if any */
        return;
    }
    drop_socket(r);
    r->phase = PH_IDLE;
    if (r->early) { /* the caller bounds an early request and retries later itself */
        finish(r, -1, UPSTREAM_UNREACHABLE);
        return;
    }
    r->addr_i++;
    int rc = r->front ? (front_try(r, front_name(r)) == 0 ? 0 : UPSTREAM_UNREACHABLE)
                      : dc_connect_cached(r, NULL);
    if (rc < 0)
        finish(r, -1, rc);
}

static void on_timer(struct loop *l, struct loop_timer *t)
{
    (void)l;
    struct upstream_req *r =
        (struct upstream_req *)(void *)((char *)t - offsetof(struct upstream_req, timer));
    chain_timeout(r); /* logs an upstream's silence; no-op otherwise */
    r->why = UPSTREAM_WHY_TIMEOUT;
    attempt_failed(r);
}

int upstream_chain_connect(struct upstream_req *r, const struct sockaddr_storage *sa, socklen_t len)
{
    return start_connect(r, sa, len, NULL);
}

void upstream_chain_done(struct upstream_req *r)
{
    r->uio->io.cb = on_connected; /* as after a direct connect: WRITE, until the owner takes over */
    if (loop_io_set(&r->w->loop, &r->uio->io, LOOP_WRITE) < 0) {
        attempt_failed(r);
        return;
    }
    finish(r, r->uio->io.fd, UPSTREAM_OK);
}

void upstream_chain_failed(struct upstream_req *r)
{
    attempt_failed(r);
}

static void on_connected(struct loop *l, struct loop_io *io, unsigned events)
{
    (void)l;
    struct upstream_req *r = ((struct upstream_io *)(void *)io)->req;
    if (r->phase != PH_CONNECT)
        return; /* reported already; the owner has not taken the socket over yet */
    int err = 0;
    socklen_t el = sizeof err;
    /* writable without an error or hang-up: connected (no SO_ERROR call, issue 30); a
       failed connect reports EPOLLERR, whose reason SO_ERROR gives */
    if ((events & LOOP_ERROR) && getsockopt(io->fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
        err = errno;
    if ((events & LOOP_ERROR) && !err)
        err = ECONNRESET; /* a hang-up with no error recorded */
    if (err) {
        r->why = (uint8_t)upstream_why_errno(err);
        attempt_failed(r);
        return;
    }
    if (r->chain) { /* a SOCKS5 upstream: negotiate first, the deadline still runs */
        chain_connected(r);
        return;
    }
    finish(r, io->fd, UPSTREAM_OK);
}
