/*
 * conn: accept, handshake, fronting decisions and teardown of a client connection.
 * See conn.h for the state machine; relay.c moves the bytes, upstream.c connects.
 *
 * Invariants: c->hs is non-NULL only in HELLO and FLIGHT (and holds exactly the bytes read
 * so far in HELLO, or the unwrapped ApplicationData payload in FLIGHT); nothing is written to
 * the client before a ClientHello validated; every exit goes through conn_close().
 */
#include "proxy/engine/conn_int.h"

#include "core/alloc.h"
#include "core/clock.h"
#include "proxy/services/acl.h"
#include "proxy/engine/antireplay.h"
#include "proxy/services/doh.h"
#include "proxy/services/doppel_fetch.h"
#include "proxy/engine/fleet.h"
#include "proxy/engine/limits.h"
#include "proxy/wire/proxyproto.h"
#include "proxy/engine/relay.h"
#include "proxy/engine/upstream.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CONN_POOL_KEEP 4096                /* struct conn kept cached per worker */
#define BUF_POOL_KEEP  256                 /* I/O buffers kept cached per worker */
#define BUF_SLACK      1024                /* pool block = max(buffer_size, 16384) + slack */
#define BULK_BUF       ((size_t)4 * 16389) /* bulk block: four full FakeTLS records + headers */
#define HS_HEADROOM                                                                                \
    64 /* bytes kept free in the handshake buffer for a PROXY v2                                   \
          header in front of the bytes replayed to the fronting host */
_Static_assert(HS_HEADROOM >= PROXYPROTO_BUILD_MAX, "PROXY v2 header room");

static const char *const end_names[] = {
    [END_NONE] = "none",
    [END_EOF] = "eof",
    [END_RESET] = "reset",
    [END_HS_TIMEOUT] = "handshake-timeout",
    [END_HS_BAD] = "bad-client-flight",
    [END_IDLE] = "idle",
    [END_DC_FAIL] = "dc-unreachable",
    [END_FRONT_FAIL] = "fronting-unreachable",
    [END_NOMEM] = "out-of-memory",
    [END_SHUTDOWN] = "shutdown",
    [END_PROTO] = "client-tls-error",
    [END_DNS] = "dns",
    [END_QUOTA] = "quota",
    [END_ACL] = "acl",
};

const char *conn_end_name(enum conn_end e)
{
    return (size_t)e < sizeof end_names / sizeof end_names[0] ? end_names[e] : "?";
}

static void on_hs_client(struct loop *l, struct loop_io *io, unsigned events);
static void on_timer(struct loop *l, struct loop_timer *t);
static void on_upstream(struct upstream_req *r, int fd, int result);
static void upstream_ready(struct conn *c);
static void relay_timer(struct conn *c);
static void front(struct conn *c, bool deadline);

/* c's secret as the fleet knows it: by label (its slot keeps the counts across reloads). */
static struct fleet_secret fleet_sec(const struct conn *c)
{
    const struct gen *g = c->gen;
    uint32_t slot = c->secret < g->cfg->nsecrets ? g->slot[c->secret] : GEN_NO_SLOT;
    return (struct fleet_secret){
        .slot = slot,
        .label = slot != GEN_NO_SLOT ? gen_labels_name(&c->w->sh->labels, slot) : NULL,
        .lim = c->secret < g->cfg->nsecrets ? &g->cfg->secrets[c->secret].limits : NULL};
}

/* Charge c's bytes relayed since the last fold to its secret's quota; true when the quota
   is used up. */
static bool quota_fold(struct conn *c)
{
    uint64_t total = c->bytes_up + c->bytes_down, delta = total - c->quota_folded;
    c->quota_folded = total;
    struct fleet_secret fs = fleet_sec(c);
    bool fleet_spent = fleet_charge(c->w->fleet, &fs, delta);
    return limits_charge(c->gen->limits, c->secret, delta, tg__wall_s()) || fleet_spent;
}

/* One of the [limits] of c's secret refused or ended c: counted for the secret too (which
   limit, in the worker's totals). */
static void secret_limit_hit(struct conn *c)
{
    uint32_t slot = c->secret < c->gen->cfg->nsecrets ? c->gen->slot[c->secret] : GEN_NO_SLOT;
    if (slot < c->w->nsec)
        stats_add(&c->w->sec[slot], limits_hit, 1);
}

/* Once a second while some secret has a quota: fold every relay's bytes (one atomic add per
   connection and second, none per read) and end the relays of secrets whose quota is spent. */
static void on_limits_tick(struct loop *l, struct loop_timer *t)
{
    struct conn_worker *w =
        (struct conn_worker *)(void *)((char *)t - offsetof(struct conn_worker, limits_tick));
    for (struct conn *c = w->conns, *next; c; c = next) {
        next = c->next;
        if (c->limit_held && quota_fold(c)) {
            stats_add(&w->stats, limit_quota, 1);
            secret_limit_hit(c);
            conn_close(c, END_QUOTA);
        }
    }
    loop_timer_start(l, &w->tq_limits, &w->limits_tick, on_limits_tick);
}

int conn_shared_init(struct conn_shared *sh, const struct config *cfg)
{
    memset(sh, 0, sizeof *sh);
    sh->cfg = cfg;
    pthread_mutex_init(&sh->gen_mu, NULL);
    int rc = gen_labels_init(&sh->labels);
    if (rc == 0)
        rc = gen_new(cfg, NULL, NULL, &sh->labels, 1, &sh->gen);
    if (rc < 0)
        return rc;
    sh->gen_seq = 1;
    if (cfg->antireplay.enabled) {
        sh->replay = antireplay_new(cfg->antireplay.max_entries, cfg->antireplay.window_s);
        if (!sh->replay)
            return -ENOMEM;
    }
    if (cfg->dns.url[0]) {
        char err[CONFIG_ERR_MAX];
        if (!(sh->doh = doh_new(cfg, err, sizeof err))) {
            tg__log(NULL, TG__LOG_ERROR, "%s", err);
            return -ENOMEM;
        }
    }
    /* the doppelganger's scout and profile: restart-only, like anti-replay */
    if (cfg->doppel.enabled && !(sh->doppel = doppel_live_new(cfg, sh->doh)))
        return -ENOMEM;
    if (cfg->fleet.enabled && !(sh->fleet = fleet_new(cfg))) /* [fleet] is not reloaded */
        return -ENOMEM;
    if (!(sh->hints = tg__calloc(1, sizeof *sh->hints)))
        return -ENOMEM;
    sh->concurrency = cfg->concurrency ? cfg->concurrency : UINT32_MAX;
    size_t b = cfg->buffer_size > 16384 ? cfg->buffer_size : 16384;
    sh->buf_size = b + BUF_SLACK;
    /* bulk buffers: four maximum-size TLS records per read and per send for flows that fill
       their small buffer, within a per-worker memory budget */
    sh->big_max = b < BULK_BUF ? (uint32_t)(cfg->bulk_budget / (BULK_BUF + BUF_SLACK)) : 0;
    sh->big_size = sh->big_max ? BULK_BUF + BUF_SLACK : 0;
    return 0;
}

void conn_shared_cleanup(struct conn_shared *sh)
{
    if (!sh || !sh->cfg)
        return;
    selfaddr_cleanup(&sh->self);
    gen_unref(sh->gen);
    gen_labels_cleanup(&sh->labels);
    doppel_live_free(sh->doppel); /* its raids may be resolving through doh */
    doh_free(sh->doh);
    antireplay_free(sh->replay);
    fleet_free(sh->fleet);
    tg__free(sh->hints);
    pthread_mutex_destroy(&sh->gen_mu);
    memset(sh, 0, sizeof *sh);
}

int conn_shared_publish(struct conn_shared *sh, struct config *cfg)
{
    struct gen *old = conn_shared_gen(sh), *g = NULL;
    int rc = gen_new(NULL, cfg, old, &sh->labels, old->seq + 1, &g);
    gen_unref(old);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&sh->gen_mu);
    old = sh->gen;
    sh->gen = g;
    __atomic_store_n(&sh->gen_seq, g->seq, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&sh->gen_mu);
    gen_unref(old); /* freed here, or when its last connection ends */
    return 0;
}

struct gen *conn_shared_gen(struct conn_shared *sh)
{
    pthread_mutex_lock(&sh->gen_mu);
    struct gen *g = sh->gen;
    gen_ref(g);
    pthread_mutex_unlock(&sh->gen_mu);
    return g;
}

/* Release the sets of deadline queues no connection uses any more (but the current one).
   Never from a timer callback: the loop may be walking its queues. */
static void tqs_sweep(struct conn_worker *w)
{
    for (struct conn_tqs **pp = &w->tqs_all, *t; (t = *pp);) {
        if (t->users || t == w->tqs) {
            pp = &t->next;
            continue;
        }
        struct loop_tq *q[] = {&t->handshake, &t->connect, &t->front, &t->silent,
                               &t->hs_rest,   &t->park,    &t->idle,  &t->done};
        for (size_t i = 0; i < sizeof q / sizeof q[0]; i++)
            loop_tq_del(&w->loop, q[i]);
        *pp = t->next;
        tg__free(t);
    }
}

/* Make cfg's timeouts the worker's current set (a new one when they differ). 0 or -errno:
   the current set stays. */
static int tqs_adopt(struct conn_worker *w, const struct config *cfg)
{
    struct conn_tqs *cur = w->tqs, *t;
    if (cur && cur->tcp_ms == cfg->timeout.tcp_ms && cur->idle_ms == cfg->timeout.idle_ms &&
        cur->handshake_ms == cfg->timeout.handshake_ms &&
        cur->fronting_ms == cfg->timeout.fronting_ms)
        return 0;
    tqs_sweep(w);
    if (w->loop.n_tq + 8 > LOOP_MAX_TQ || !(t = tg__calloc(1, sizeof *t)))
        return -ENOSPC;
    t->tcp_ms = cfg->timeout.tcp_ms;
    t->handshake_ms = cfg->timeout.handshake_ms;
    t->fronting_ms = cfg->timeout.fronting_ms;
    loop_tq_add(&w->loop, &t->handshake, cfg->timeout.handshake_ms);
    /* the handshake deadline in two legs: silence, then the rest (see on_timer) */
    uint64_t silent = cfg->timeout.handshake_ms / 4;
    silent = silent < CONN_SILENT_MS ? silent : CONN_SILENT_MS;
    loop_tq_add(&w->loop, &t->silent, silent);
    loop_tq_add(&w->loop, &t->hs_rest, cfg->timeout.handshake_ms - silent);
    loop_tq_add(&w->loop, &t->connect, cfg->timeout.tcp_ms);
    loop_tq_add(&w->loop, &t->front, cfg->timeout.fronting_ms);
    /* parking splits the idle timeout: quiet for park, then the rest of idle */
    t->idle_ms = cfg->timeout.idle_ms;
    uint64_t park = t->idle_ms / 2 < CONN_PARK_MS ? t->idle_ms / 2 : CONN_PARK_MS;
    loop_tq_add(&w->loop, &t->park, park);
    loop_tq_add(&w->loop, &t->idle, t->idle_ms - park);
    uint64_t done = CONN_FRONT_DONE_MS;
    done = cfg->timeout.handshake_ms < done ? cfg->timeout.handshake_ms : done;
    loop_tq_add(&w->loop, &t->done, t->idle_ms < done ? t->idle_ms : done);
    t->next = w->tqs_all;
    w->tqs_all = t;
    w->tqs = t;
    return 0;
}

/* Move the worker to the current generation (at accept, after a reload). */
static void worker_adopt(struct conn_worker *w)
{
    struct gen *g = conn_shared_gen(w->sh);
    if (tqs_adopt(w, g->cfg) < 0)
        tg__log(NULL, TG__LOG_WARN,
                "reload: too many sets of [network.timeout] values still in use by open "
                "connections; this worker keeps its timeouts until they end");
    upstream_worker_adopt(w, g->cfg);
    if (limits_any_quota(g->limits) && !loop_timer_active(&w->limits_tick))
        loop_timer_start(&w->loop, &w->tq_limits, &w->limits_tick, on_limits_tick);
    gen_unref(w->gen);
    w->gen = g;
    w->gen_seq = g->seq;
}

void conn_worker_refresh(struct conn_worker *w)
{
    if (__atomic_load_n(&w->sh->gen_seq, __ATOMIC_ACQUIRE) != w->gen_seq)
        worker_adopt(w); /* a reload published a new generation */
}

int conn_worker_init(struct conn_worker *w, struct conn_shared *sh)
{
    memset(w, 0, sizeof *w);
    w->sh = sh;
    int rc = loop_init(&w->loop);
    if (rc < 0)
        return rc;
    w->gen = conn_shared_gen(sh);
    w->gen_seq = w->gen->seq;
    if ((rc = upstream_worker_init(w)) < 0) {
        upstream_worker_cleanup(w);
        gen_unref(w->gen);
        loop_cleanup(&w->loop);
        return rc;
    }
    tg__pool_init(&w->pool, sh->buf_size, BUF_POOL_KEEP);
    tg__pool_init(&w->big_pool, sh->big_size ? sh->big_size : sizeof(void *), sh->big_max);
    tg__pool_init(&w->conn_pool, sizeof(struct conn), CONN_POOL_KEEP);
    tg__ratelimit_init(&w->rl, 5, 20);
    w->scratch = tg__malloc(FAKETLS_SERVER_HELLO_MAX);
    loop_tq_add(&w->loop, &w->tq_limits, CONN_QUOTA_FOLD_MS);
    if (!w->scratch || tqs_adopt(w, w->gen->cfg) < 0 ||
        shape_worker_init(&w->shape, &w->loop, sh->doppel, sh->cfg) < 0) {
        conn_worker_cleanup(w);
        return -ENOMEM;
    }
    if (limits_any_quota(w->gen->limits))
        loop_timer_start(&w->loop, &w->tq_limits, &w->limits_tick, on_limits_tick);
    if (sh->fleet && !(w->fleet = fleet_worker_new(sh->fleet, &w->loop, &w->stats))) {
        conn_worker_cleanup(w);
        return -ENOMEM;
    }
    return 0;
}

void conn_worker_cleanup(struct conn_worker *w)
{
    if (!w || !w->sh)
        return;
    while (w->conns)
        conn_close(w->conns, END_SHUTDOWN);
    fleet_worker_free(w->fleet);
    w->fleet = NULL;
    upstream_worker_cleanup(w);
    tg__free(w->scratch);
    w->scratch = NULL;
    tg__pool_cleanup(&w->pool);
    tg__pool_cleanup(&w->big_pool);
    tg__pool_cleanup(&w->conn_pool);
    w->tqs = NULL;
    for (struct conn_tqs *t = w->tqs_all, *next; t; t = next) { /* loop_cleanup drops them */
        next = t->next;
        tg__free(t);
    }
    w->tqs_all = NULL;
    gen_unref(w->gen);
    w->gen = NULL;
    loop_cleanup(&w->loop);
    w->sh = NULL;
}

static const char *label_of(const struct conn *c)
{
    const struct config *cfg = c->gen->cfg;
    return c->secret < cfg->nsecrets ? cfg->secrets[c->secret].label : "-";
}

static void log_end(const struct conn *c)
{
    if (!tg__log_enabled(NULL, TG__LOG_INFO))
        return;
    tg__log(NULL, TG__LOG_INFO,
            "conn end: reason=%s dc=%d secret=%s dur_ms=%llu up=%llu down=%llu mode=%s",
            conn_end_name((enum conn_end)c->end), c->dc, label_of(c),
            (unsigned long long)(c->w->loop.now_ms - c->start_ms), (unsigned long long)c->bytes_up,
            (unsigned long long)c->bytes_down,
            c->state == CONN_FRONT_RELAY || c->state == CONN_FRONT_CONNECT || c->early_up
                ? "fronted"
            : c->tls ? "tls"
                     : "obfs2");
}

/* The next close of fd sends a reset instead of a FIN (a fronted peer was reset). */
static void reset_on_close(int fd)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
}

/* Every reason from END_EOF to the last has its end_* field, and they close struct stats:
   a reason added to enum conn_end without one fails here instead of writing past it. */
static_assert(STATS_END_INDEX(END_COUNT - 1) + 1 == STATS_COUNT,
              "stats end_* fields follow enum conn_end");

/* Add the bytes c relayed since the last call to the worker's counters, and to its secret's
   for an authenticated connection: while a relay runs (relay_timer, every park period at
   most) and at close, so a long relay shows in the byte counters as it goes. */
static void stats_bytes(struct conn *c)
{
    struct conn_worker *w = c->w;
    uint64_t up = c->bytes_up - c->up_counted, down = c->bytes_down - c->down_counted;
    c->up_counted = c->bytes_up;
    c->down_counted = c->bytes_down;
    stats_add(&w->stats, bytes_up, up);
    stats_add(&w->stats, bytes_down, down);
    bool authed = c->state == CONN_DC_CONNECT || c->state == CONN_RELAY;
    uint32_t slot = c->secret < c->gen->cfg->nsecrets ? c->gen->slot[c->secret] : GEN_NO_SLOT;
    if (authed && slot < w->nsec) {
        stats_add(&w->sec[slot], bytes_up, up);
        stats_add(&w->sec[slot], bytes_down, down);
    } else if (!authed) { /* only a fronted connection relays before it authenticates */
        stats_add(&w->stats, front_bytes_up, up);
        stats_add(&w->stats, front_bytes_down, down);
    }
}

/* The counters a closing connection adds: the rest of its bytes, end reason, its secret's. */
static void stats_close(struct conn *c)
{
    struct conn_worker *w = c->w;
    stats_bytes(c);
    if (c->end != END_NONE)
        stats_add_at(&w->stats, STATS_END_INDEX(c->end), 1);
    bool authed = c->state == CONN_DC_CONNECT || c->state == CONN_RELAY;
    uint32_t slot = c->secret < c->gen->cfg->nsecrets ? c->gen->slot[c->secret] : GEN_NO_SLOT;
    if (authed && slot < w->nsec)
        stats_sub(&w->sec[slot], active, 1);
}

void conn_close(struct conn *c, enum conn_end why)
{
    struct conn_worker *w = c->w;
    if (c->end == END_NONE || why == END_SHUTDOWN)
        c->end = (uint8_t)why;
    log_end(c);
    stats_close(c);
    loop_timer_stop(&c->timer);
    upstream_cancel(&c->up); /* no-op unless a connect or a lookup is under way */
    /* unregistered before the close: a fork or posix_spawn on another thread (a program
       embedding the engine, the tests' scrapers) holds the sockets open until its exec, and
       epoll would go on reporting them for this connection's freed struct */
    loop_io_del(&w->loop, &c->cli);
    loop_io_del(&w->loop, &c->up.io);
    if ((c->state == CONN_FRONT_RELAY || c->state == CONN_HELLO) && c->reset_by != CONN_RESET_NONE)
        reset_on_close(c->reset_by == CONN_RESET_UPSTREAM ? c->cfd : c->ufd);
    if (c->cfd >= 0)
        close(c->cfd);
    if (c->ufd >= 0)
        close(c->ufd);
    relay_release(c);
    if (c->limit_held)
        quota_fold(c);
    if (c->limit_held)
        limits_release(c->gen->limits, c->secret, c->limit_ip, tg__wall_s());
    if (c->fleet_ticket != FLEET_NONE)
        fleet_cancel(w->fleet, c->fleet_ticket);
    if (c->fleet_held) {
        struct fleet_secret fs = fleet_sec(c);
        fleet_release(w->fleet, &fs);
    }
    conn_buf_put(w, c->hs);
    crypto_ctr_cleanup(&c->c2p);
    crypto_ctr_cleanup(&c->p2c);
    crypto_ctr_cleanup(&c->p2dc);
    crypto_ctr_cleanup(&c->dc2p);
    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    __atomic_sub_fetch(&w->sh->active, 1, __ATOMIC_RELAXED);
    gen_unref(c->gen);
    c->tqs->users--; /* a set no longer used is released at a later accept (tqs_sweep) */
    tg__pool_put(&w->conn_pool, c);
    /* last, so whoever sees the gauge drop also sees the buffers released */
    stats_add(&w->stats, closed, 1);
    stats_sub(&w->stats, active, 1);
}

void conn_accept(struct conn_worker *w, int fd)
{
    struct conn_shared *sh = w->sh;
    conn_worker_refresh(w);
    if (w->tqs_all->next)
        tqs_sweep(w); /* an older set of timeouts may be unused now */
    uint32_t n = __atomic_add_fetch(&sh->active, 1, __ATOMIC_RELAXED);
    struct conn *c = n <= sh->concurrency ? tg__pool_get(&w->conn_pool) : NULL;
    if (!c) {
        __atomic_sub_fetch(&sh->active, 1, __ATOMIC_RELAXED);
        stats_add(&w->stats, rejected_limit, 1);
        close(fd);
        return;
    }
    memset(c, 0, sizeof *c);
    c->w = w;
    c->cfd = fd;
    c->ufd = -1;
    c->cli.fd = -1;
    upstream_req_init(&c->up);
    c->gen = w->gen;
    c->tqs = w->tqs;
    c->up.cfg = c->gen->cfg;
    c->up.tqs = c->tqs;
    c->secret = UINT32_MAX;
    c->fleet_ticket = FLEET_NONE;
    c->start_ms = c->last_io_ms = w->loop.now_ms;
    c->state = CONN_HELLO; /* TCP_NODELAY and keepalive are inherited from the listener */
    if (loop_io_add(&w->loop, &c->cli, fd, LOOP_READ, on_hs_client) < 0) {
        close(fd);
        c->gen = NULL;
        __atomic_sub_fetch(&sh->active, 1, __ATOMIC_RELAXED);
        tg__pool_put(&w->conn_pool, c);
        return;
    }
    gen_ref(c->gen);
    c->tqs->users++;
    c->next = w->conns;
    if (w->conns)
        w->conns->prev = c;
    w->conns = c;
    stats_add(&w->stats, accepted, 1);
    stats_add(&w->stats, active, 1);
    loop_timer_start(&w->loop, &c->tqs->silent, &c->timer, on_timer);
}

/* The client's addresses for the PROXY v2 header toward the fronting host: what the
   balancer's header said, else the client socket's peer and local address. */
static bool pp_source(const struct conn *c, struct proxyproto_addr *a)
{
    if (c->pp.family) {
        *a = c->pp;
        return true;
    }
    struct sockaddr_storage src = {0},
                            dst = {0}; /* zeroed: the analyzer cannot see the kernel fill them */
    socklen_t sl = sizeof src, dl = sizeof dst;
    if (getpeername(c->cfd, (struct sockaddr *)&src, &sl) < 0 ||
        getsockname(c->cfd, (struct sockaddr *)&dst, &dl) < 0 || src.ss_family != dst.ss_family)
        return false;
    memset(a, 0, sizeof *a);
    if (src.ss_family == AF_INET) {
        const struct sockaddr_in *s4 = (const void *)&src, *d4 = (const void *)&dst;
        memcpy(a->src, &s4->sin_addr, 4);
        memcpy(a->dst, &d4->sin_addr, 4);
        a->src_port = s4->sin_port;
        a->dst_port = d4->sin_port;
    } else if (src.ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const void *)&src, *d6 = (const void *)&dst;
        memcpy(a->src, &s6->sin6_addr, 16);
        memcpy(a->dst, &d6->sin6_addr, 16);
        a->src_port = s6->sin6_port;
        a->dst_port = d6->sin6_port;
    } else {
        return false;
    }
    a->family = (uint8_t)src.ss_family;
    return true;
}

/* PROXY v2 header (brief 6.2) for c into out[0..HS_HEADROOM). Returns its length, or 0
   when no address is known. */
static size_t pp_build(const struct conn *c, uint8_t *out)
{
    struct proxyproto_addr a;
    return pp_source(c, &a) ? proxyproto_build_v2(&a, out) : 0;
}

/* Index of a STATS_HS_LIST field, for hs_failed. */
#define HS_REASON(field) (offsetof(struct stats, field) / sizeof(uint64_t))

/* A failed client handshake: counted in the total and under its one reason. */
static void hs_failed(struct conn *c, size_t reason)
{
    stats_add(&c->w->stats, handshake_bad, 1);
    stats_add_at(&c->w->stats, reason, 1);
}

static void hs_debug(struct conn *c, const char *what, const char *why)
{
    struct conn_worker *w = c->w;
    if (tg__log_enabled(NULL, TG__LOG_DEBUG) && tg__ratelimit_allow(&w->rl, w->loop.now_ms))
        tg__log(NULL, TG__LOG_DEBUG, "handshake: %s: %s (after %u bytes)", what, why,
                (unsigned)c->hs_len);
}

/*
 * Early fronting connection. While the first bytes leave the handshake undecided (a TLS
 * record still incomplete, fewer than 64 bytes of a possible obfs2 header), the connection
 * to the fronting host is opened at once, so the site's own timers run from about the
 * client's accept, as when the prober talks to it directly, and the bytes that leave the
 * handshake undecided are passed on as they arrive (without [domain-fronting]
 * proxy-protocol, whose header must come first), so the site sees what it would see
 * directly and when. The read that completes a hello or an obfs2 header is never passed
 * on before it is checked: a handshake that validates drops the early connection, and the
 * site has seen an incomplete handshake and a close; one that fails is fronted with the
 * bytes not yet sent. While undecided, the site's FIN closes the client (a site that gave
 * up on a slow client) and its reset resets the client. When the site sends bytes:
 *  - if only an obfs2 header (dd / classic) could still match, the client is not genuine:
 *    a real obfs2 client writes its 64-byte header in one go and never waits for the
 *    server before finishing it, so a site that answered the first part (as real sites
 *    answer junk, at once) answered a prober. The client bytes already queued are read
 *    first (a header whose two segments are both here still decides, at no cost in
 *    time), then the client is fronted and the site's answer relayed at once, as it
 *    would reach the prober directly;
 *  - if a ClientHello could still complete (an ee secret and a TLS record not yet whole:
 *    hellos do come in several segments, and an HTTPS site never speaks before the hello
 *    is whole), its bytes wait for the verdict (relayed if the client is fronted), so a
 *    genuine client is never fronted because of them.
 */
static void early_drop(struct conn *c)
{
    upstream_cancel(&c->up); /* still connecting */
    if (c->ufd < 0)
        return;
    loop_io_del(&c->w->loop, &c->up.io);
    close(c->ufd);
    c->ufd = -1;
    c->early_up = false;
    c->early_sent = 0;
}

static void on_early_up(struct loop *l, struct loop_io *io, unsigned events)
{
    (void)l;
    (void)events;
    struct conn *c = (struct conn *)(void *)((char *)io - offsetof(struct conn, up.io));
    uint8_t b;
    ssize_t n = recv(c->ufd, &b, 1, MSG_PEEK);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n > 0) {
        /* The site spoke: its bytes wait in its socket until the client is fronted (or
           dropped with the early connection). */
        loop_io_del(&c->w->loop, &c->up.io);
        if (c->state == CONN_HELLO) {
            c->site_spoke = true;
            on_hs_client(l, &c->cli, LOOP_READ); /* the client's queued bytes, then decide */
        }
        return;
    }
    if (n < 0 && errno == ECONNRESET)
        c->reset_by = CONN_RESET_UPSTREAM;
    conn_close(c, n == 0 ? END_EOF : END_RESET);
}

/* Pass the undecided bytes not yet sent to the connected early connection. A short send
   leaves the rest for later (or for the replay); an error shows on the socket. */
static void early_push(struct conn *c)
{
    if (!c->early_up || c->gen->cfg->fronting.proxy_protocol)
        return;
    while (c->early_sent < c->hs_len) {
        ssize_t n = send(c->ufd, c->hs + c->early_sent, c->hs_len - c->early_sent, MSG_NOSIGNAL);
        if (n <= 0)
            return;
        c->early_sent += (uint32_t)n;
    }
}

/* The handshake is undecided after some bytes: open the early connection (once) and pass
   the bytes on. */
static void early_front(struct conn *c)
{
    if (c->ufd < 0 && !upstream_busy(&c->up) && !c->early_tried) {
        c->early_tried = true;
        if (upstream_front(&c->up, c->w, c->secret, UPSTREAM_EARLY, on_upstream) == 0)
            stats_add(&c->w->stats, front_early, 1);
    }
    early_push(c);
}

/* A fronting connect is under way: the connector's deadlines bound it, not the handshake's. */
static void front_connecting(struct conn *c)
{
    c->state = CONN_FRONT_CONNECT;
    loop_timer_stop(&c->timer);
}

/*
 * Failed validation before anything was written: relay to the fronting host, replaying
 * every byte read so far (brief 5.3). Without a fronting target, read and discard until
 * the handshake deadline (brief 2.6); at the deadline itself, close.
 */
static void front(struct conn *c, bool deadline)
{
    crypto_ctr_cleanup(&c->c2p); /* a failed obfs2 parse leaves it unspecified */
    if (c->gen->cfg->fronting.proxy_protocol && !c->hs)
        c->hs = conn_buf_get(c->w); /* a silent client still gets its PROXY header sent */
    if (c->gen->cfg->fronting.proxy_protocol && c->hs) {
        uint8_t hdr[HS_HEADROOM];
        size_t k = pp_build(c, hdr); /* the handshake buffer always keeps this room */
        memmove(c->hs + k, c->hs, c->hs_len);
        memcpy(c->hs, hdr, k);
        c->hs_len += (uint32_t)k;
    }
    /* the listener's keepalive is inherited; a prober must not see probes the site never
       sends */
    int off = 0;
    setsockopt(c->cfd, SOL_SOCKET, SO_KEEPALIVE, &off, sizeof off);
    struct relay_dir *u = &c->dir[DIR_UP];
    u->buf = c->hs;
    u->off = c->early_sent; /* bytes an early connection already passed on */
    u->len = c->hs_len;
    c->bytes_up += c->hs_len; /* what was read before fronting goes to the site too */
    c->hs = NULL;
    c->hs_len = 0;
    if (u->off == u->len)
        conn_dir_put(c->w, u);
    loop_io_set(&c->w->loop, &c->cli, 0); /* the kernel buffers the client meanwhile */
    if (c->early_up) {                    /* connected early (early_front) */
        c->state = CONN_FRONT_CONNECT;
        upstream_ready(c);
        return;
    }
    if (upstream_busy(&c->up)) { /* still connecting early: now under the fronting timeout */
        front_connecting(c);
        upstream_promote(&c->up);
        return;
    }
    if (upstream_front(&c->up, c->w, c->secret, 0, on_upstream) == 0) {
        front_connecting(c);
        return;
    }
    conn_dir_put(c->w, u);
    if (deadline) {
        conn_close(c, END_HS_TIMEOUT);
        return;
    }
    c->state = CONN_DISCARD;
    loop_io_set(&c->w->loop, &c->cli, LOOP_READ);
}

/* No fronting target after all (the lookup gave no address): read and discard until the
   handshake deadline, as when there was none to begin with. */
static void front_unavailable(struct conn *c)
{
    struct relay_dir *u = &c->dir[DIR_UP];
    conn_dir_put(c->w, u);
    c->state = CONN_DISCARD;
    loop_io_set(&c->w->loop, &c->cli, LOOP_READ);
    loop_timer_start(&c->w->loop, &c->tqs->handshake, &c->timer, on_timer);
}

static bool replayed(struct conn *c, enum antireplay_kind kind, const uint8_t *key, size_t n)
{
    struct antireplay *ar = c->w->sh->replay;
    uint64_t now_s = c->w->loop.now_ms / 1000, total = 0;
    bool early = false;
    if (!ar)
        return false;
    bool seen = antireplay_insert(ar, kind, key, n, now_s, &early);
    if (early) {
        stats_add(&c->w->stats, replay_early_evictions, 1);
        if (antireplay_warn_due(ar, now_s, &total))
            tg__log(NULL, TG__LOG_WARN,
                    "anti-replay: cache full, %llu handshake(s) forgotten so far before their "
                    "window ended (replays of them would pass); raise [defense.anti-replay] "
                    "max-entries",
                    (unsigned long long)total);
    }
    return seen;
}

/* c's DC counters: its DC's slot (the test DCs count as other ids unless test-dcs was on at
   start: the page shows the slots of the starting config, sh->cfg, for its whole life). */
static struct stats_dc *dc_stats(struct conn *c)
{
    size_t slot = stats_dc_slot(c->dc);
    if (stats_dc_id(slot) > 10000 && !c->w->sh->cfg->use_test_dcs)
        slot = STATS_DC_OTHER;
    return &c->w->dcs[slot];
}

static_assert(UPSTREAM_WHY_COUNT - 1 == STATS_DC_FAIL_COUNT,
              "stats.h STATS_DC_FAIL_LIST follows enum upstream_why");

/* The DC connect failed (result from the connector, its reason in c->up.why): count it for
   the DC and close. */
static void dc_failed(struct conn *c, int result)
{
    size_t why = c->up.why ? (size_t)c->up.why - 1 : (size_t)UPSTREAM_WHY_ERROR - 1;
    stats_add(&c->w->stats, dc_connect_fail, 1);
    stats_dc_fail(dc_stats(c), why);
    conn_close(c, result == UPSTREAM_NO_ADDRESS ? END_DNS : END_DC_FAIL);
}

/* Authenticated obfs2 header at hs[0..64), payload after it: queue the DC header and the
   payload for the DC, then connect. */
static void start_dc(struct conn *c, struct obfs2_client *oc)
{
    c->dc = oc->dc;
    c->fast = c->gen->fast_mode;
    uint8_t wire[OBFS2_HEADER_LEN];
    int rc = c->fast ? 0 : crypto_ctr_init(&c->p2c, oc->keys.enc_key, oc->keys.enc_iv);
    if (rc == 0)
        rc = obfs2_dc_header(oc->tag, oc->dc, c->fast ? &oc->keys : NULL, NULL, NULL, wire, NULL,
                             &c->p2dc, c->fast ? NULL : &c->dc2p);
    crypto_wipe(&oc->keys, sizeof oc->keys);
    uint8_t *p = c->hs + OBFS2_HEADER_LEN;
    size_t n = c->hs_len - OBFS2_HEADER_LEN;
    if (rc == 0 && n)
        rc = crypto_ctr_apply(&c->c2p, p, n) < 0 || crypto_ctr_apply(&c->p2dc, p, n) < 0;
    if (rc != 0) {
        conn_close(c, END_NOMEM);
        return;
    }
    memcpy(c->hs, wire, OBFS2_HEADER_LEN);
    struct relay_dir *u = &c->dir[DIR_UP];
    u->buf = c->hs;
    u->off = 0;
    u->len = c->hs_len;
    c->bytes_up += c->hs_len; /* the header and what came with it go to the DC */
    c->hs = NULL;
    c->hs_len = 0;
    stats_add(&c->w->stats, handshake_ok, 1);
    uint32_t slot = c->gen->slot[c->secret]; /* authenticated: c->secret is valid */
    if (slot < c->w->nsec) {
        stats_add(&c->w->sec[slot], conns, 1);
        stats_add(&c->w->sec[slot], active, 1);
    }
    c->state = CONN_DC_CONNECT;
    loop_timer_stop(&c->timer); /* the connector's deadlines bound the connect */
    loop_io_set(&c->w->loop, &c->cli, 0);
    /* the client is not read while connecting, so last_io_ms marks the connect's start
       until the relay begins (the DC connect time, on_upstream) */
    conn_touch(c);
    rc = upstream_dc(&c->up, c->w, c->dc, on_upstream);
    if (rc < 0)
        dc_failed(c, rc);
}

/* FLIGHT: the client's records after our answer are not TLS records, or it sent an alert
   (closing): the handshake failed, and the connection ends (nothing to front any more). */
static void flight_failed(struct conn *c)
{
    hs_failed(c, HS_REASON(hs_bad_flight));
    conn_close(c, END_PROTO);
}

/* FLIGHT: the unwrapped payload in hs; authenticate its obfs2 header with the TLS key. */
static void flight_step(struct conn *c)
{
    if (c->hs_len < OBFS2_HEADER_LEN)
        return;
    struct obfs2_candidate cand = {.tags = OBFS2_ALLOW_PADDED};
    memcpy(cand.key, c->gen->cfg->secrets[c->secret].secret.key, 16);
    struct obfs2_client oc;
    enum obfs2_status st = obfs2_parse_client(c->hs, c->hs_len, &cand, 1, &c->c2p, &oc);
    crypto_wipe(&cand, sizeof cand);
    if (st != OBFS2_OK || replayed(c, ANTIREPLAY_OBFS2, oc.replay_key, sizeof oc.replay_key)) {
        hs_debug(c, "tls client flight",
                 st == OBFS2_OK ? "replayed obfs2 header" : "obfs2 header does not authenticate");
        hs_failed(c, st == OBFS2_OK      ? HS_REASON(hs_replay)
                     : st == OBFS2_ERROR ? HS_REASON(hs_error)
                                         : HS_REASON(hs_bad_flight));
        conn_close(c, st == OBFS2_ERROR ? END_NOMEM : END_HS_BAD);
        return;
    }
    start_dc(c, &oc);
}

/* Write our whole three-record answer; the socket is fresh, so it fits its buffer. */
static int send_answer(struct conn *c, const struct faketls_hello *h, const uint8_t *key)
{
    struct faketls_answer a = {.cipher = h->cipher};
    int n = faketls_server_hello(h, key, &a, c->w->scratch, FAKETLS_SERVER_HELLO_MAX);
    if (n < 0)
        return n;
    ssize_t wr = send(c->cfd, c->w->scratch, (size_t)n, MSG_NOSIGNAL);
    return wr == n ? 0 : -EIO;
}

/* The handshake named c->secret: over one of its limits, the client is fronted like any
   failed handshake (nothing has been written to it), so it cannot learn a proxy is here. */
/* The client's address as 16 bytes (IPv4 as ::ffff:a.b.c.d); false when unknown. */
static bool client_ip(const struct conn *c, uint8_t ip[16])
{
    struct proxyproto_addr a = {0};
    if (!pp_source(c, &a))
        return false;
    memset(ip, 0, 16);
    ip[10] = ip[11] = 0xff;
    memcpy(a.family == AF_INET ? ip + 12 : ip, a.src, a.family == AF_INET ? 4 : 16);
    return true;
}

static bool over_limit(struct conn *c)
{
    struct limits *l = c->gen->limits;
    uint8_t ip[16];
    bool known = limits_by_addr(l, c->secret) && client_ip(c, ip);
    enum limits_verdict v =
        limits_admit(l, c->secret, known ? ip : NULL, tg__wall_s(), &c->limit_ip);
    switch (v) {
    case LIMITS_OK:
        c->limit_held = true;
        return false;
    case LIMITS_EXPIRED:
        stats_add(&c->w->stats, limit_expired, 1);
        break;
    case LIMITS_CONNECTIONS:
        stats_add(&c->w->stats, limit_connections, 1);
        break;
    case LIMITS_UNIQUE_IPS:
        stats_add(&c->w->stats, limit_unique_ips, 1);
        break;
    case LIMITS_QUOTA:
        stats_add(&c->w->stats, limit_quota, 1);
        break;
    }
    secret_limit_hit(c);
    hs_debug(c, "limits", limits_verdict_name(v));
    return true;
}

/* The handshakes_total outcome of a rejected ClientHello. */
static size_t verdict_reason(enum faketls_verdict v)
{
    switch (v) {
    case FAKETLS_BAD_DIGEST:
        return HS_REASON(hs_bad_digest);
    case FAKETLS_BAD_TIME:
        return HS_REASON(hs_stale);
    case FAKETLS_BAD_SNI:
        return HS_REASON(hs_wrong_sni);
    case FAKETLS_BAD_CIPHER:
        return HS_REASON(hs_bad_hello);
    case FAKETLS_ACCEPT:
    case FAKETLS_INTERNAL:
    default:
        return HS_REASON(hs_error);
    }
}

/*
 * [fleet]: a hello that validated here (a FakeTLS ClientHello, or a dd / classic obfs2
 * header; local replay cache: new; local limits: admitted) is checked against the fleet's
 * Redis before anything is written to the client or the DC.
 * The check is asynchronous (CONN_CHECK, client not read) and bounded by [fleet] timeout;
 * fleet.c answers exactly once through on_fleet, unless conn_close cancels it first.
 */
static void tls_answer(struct conn *c, const struct faketls_hello *h, size_t ee, size_t rl);
static void on_fleet(void *owner, enum fleet_verdict v);
static void plain_resume(struct conn *c);

/* Whether an admitted c holds a fleet connection slot (its secret has max-connections). */
static void fleet_admitted(struct conn *c)
{
    struct fleet_secret fs = fleet_sec(c);
    c->fleet_held = fs.slot != GEN_NO_SLOT && fs.lim && fs.lim->max_connections;
}

/* Ask the fleet about c's hello (replay key key[0..n) of kind). True when the answer is
   pending; false when c goes on at once (no fleet, or decided locally: Redis is away). */
static bool fleet_ask(struct conn *c, enum antireplay_kind kind, const uint8_t *key, size_t n)
{
    struct conn_worker *w = c->w;
    bool replay = w->sh->replay != NULL;
    uint8_t ip[16];
    struct fleet_query q = {.kind = (uint8_t)kind,
                            .key = replay ? key : NULL,
                            .key_len = n,
                            .sec = fleet_sec(c),
                            .addr = client_ip(c, ip) ? ip : NULL};
    if (!fleet_wanted(w->fleet, &q.sec, replay))
        return false;
    enum fleet_verdict v = fleet_check(w->fleet, &q, c, on_fleet, &c->fleet_ticket);
    if (v != FLEET_PENDING) {
        fleet_admitted(c); /* FLEET_LOCAL: accepted on local state */
        return false;
    }
    c->state = CONN_CHECK;
    c->fleet_plain = kind == ANTIREPLAY_OBFS2;
    loop_io_set(&w->loop, &c->cli, 0); /* the kernel keeps the client's flight meanwhile */
    return true;
}

/* A connection fronted after the local limits admitted it holds no slot any more, and
   its address does not count locally (the fleet's count is the one that refused it). */
static void limit_give_back(struct conn *c)
{
    if (c->limit_held)
        limits_cancel(c->gen->limits, c->secret, c->limit_ip);
    c->limit_held = false;
}

/* The fleet refused a hello the local checks admitted: give back the local slot and front
   it like any failed handshake. */
static void fleet_refused(struct conn *c, enum fleet_verdict v)
{
    struct conn_worker *w = c->w;
    if (v == FLEET_CONNECTIONS)
        stats_add(&w->stats, limit_connections, 1);
    else if (v == FLEET_UNIQUE_IPS)
        stats_add(&w->stats, limit_unique_ips, 1);
    else if (v == FLEET_QUOTA)
        stats_add(&w->stats, limit_quota, 1);
    if (v != FLEET_REPLAY)
        secret_limit_hit(c);
    limit_give_back(c);
    hs_debug(c, "client hello", fleet_verdict_name(v));
    hs_failed(c, v == FLEET_REPLAY ? HS_REASON(hs_replay) : HS_REASON(hs_limit));
    front(c, false);
}

static void on_fleet(void *owner, enum fleet_verdict v)
{
    struct conn *c = owner;
    const struct gen *g = c->gen;
    c->fleet_ticket = FLEET_NONE;
    c->state = CONN_HELLO;
    if (v != FLEET_OK && v != FLEET_LOCAL) {
        fleet_refused(c, v);
        return;
    }
    fleet_admitted(c);
    loop_io_set(&c->w->loop, &c->cli, LOOP_READ);
    if (c->fleet_plain) {
        plain_resume(c);
        return;
    }
    /* hs still holds exactly the hello (and what followed it): parse it again */
    struct faketls_hello h;
    const char *why = NULL;
    size_t rl = 0, ee = 0;
    while (ee < g->nee && g->ee_idx[ee] != c->secret)
        ee++;
    if (faketls_peek(c->hs, c->hs_len, &rl) != FAKETLS_OK ||
        faketls_parse_hello(c->hs, c->hs_len, &h, &why) != FAKETLS_OK || ee == g->nee) {
        conn_close(c, END_PROTO); /* cannot happen: the same bytes parsed before */
        return;
    }
    tls_answer(c, &h, ee, rl);
}

/* HELLO with a complete ClientHello record of rl bytes at hs. */
static void tls_hello(struct conn *c, size_t rl)
{
    const struct gen *sh = c->gen;
    struct faketls_hello h;
    const char *why = "bad record";
    size_t fail_why = HS_REASON(hs_bad_hello);
    if (faketls_parse_hello(c->hs, c->hs_len, &h, &why) != FAKETLS_OK) {
        hs_debug(c, "client hello", why);
        goto fail;
    }
    uint32_t skew = sh->cfg->tolerate_time_skewness_s;
    struct faketls_policy pol = {.now = tg__wall_s(), .past_s = skew, .future_s = skew};
    struct faketls_match m;
    /* Beyond two candidate keys (no SNI, or many secrets for its domain), the client's hint
       and the worker's scan budget bound what the hello costs (keyscan.h). */
    uint8_t ip[16];
    size_t ncand = sh->nee > 2 ? faketls_candidates(&h, sh->ee, sh->nee, &pol) : sh->nee;
    bool gated = ncand > 2 && client_ip(c, ip) &&
                 keyscan_gate(c->w->sh->hints, &c->w->scan, ip, sh->seq, c->w->loop.now_ms,
                              h.len, ncand, &pol);
    if (gated && pol.hint_only) {
        stats_add(&c->w->stats, scan_capped, 1);
        hs_debug(c, "client hello", "scan budget spent: the address's last key only");
    }
    enum faketls_verdict v = faketls_validate(&h, sh->ee, sh->nee, &pol, &m);
    if (gated && v == FAKETLS_ACCEPT)
        keyscan_hint_put(c->w->sh->hints, ip, sh->seq, m.index);
    if (v != FAKETLS_ACCEPT) {
        if (m.matched)
            c->secret = (uint32_t)sh->ee_idx[m.index];
        char reason[64];
        snprintf(reason, sizeof reason, "%s (clock skew %lld s)", faketls_verdict_name(v),
                 v == FAKETLS_BAD_TIME ? (long long)m.skew : 0LL);
        hs_debug(c, "client hello", reason); /* brief 4.4: log the skew of rejected clients */
        fail_why = verdict_reason(v);
        goto fail;
    }
    c->secret = (uint32_t)sh->ee_idx[m.index];
    if (replayed(c, ANTIREPLAY_TLS, h.random, FAKETLS_REPLAY_KEY_LEN)) {
        hs_debug(c, "client hello", "replayed");
        fail_why = HS_REASON(hs_replay);
        goto fail;
    }
    fail_why = HS_REASON(hs_limit);
    if (over_limit(c))
        goto fail;
    if (fleet_ask(c, ANTIREPLAY_TLS, h.random, FAKETLS_REPLAY_KEY_LEN))
        return; /* on_fleet goes on */
    tls_answer(c, &h, m.index, rl);
    return;
fail:
    hs_failed(c, fail_why);
    front(c, false);
}

/* A hello accepted (locally, and by the fleet when there is one): answer it, then read
   the client's flight. */
static void tls_answer(struct conn *c, const struct faketls_hello *h, size_t ee, size_t rl)
{
    if (send_answer(c, h, c->gen->ee[ee].key) < 0) {
        hs_failed(c, HS_REASON(hs_closed)); /* the client's socket is gone */
        conn_close(c, END_RESET);
        return;
    }
    early_drop(c); /* a genuine client: the site never hears of it */
    c->tls = true;
    c->state = CONN_FLIGHT;
    faketls_reader_init(&c->rd, 65535); /* brief 4.8: any 16-bit length */
    /* Bytes after the hello are the start of the client's flight. */
    size_t rest = c->hs_len - rl, k = 0;
    memmove(c->hs, c->hs + rl, rest);
    if (faketls_reader_strip(&c->rd, c->hs, rest, &k) != FAKETLS_REC_NEED_MORE) {
        flight_failed(c);
        return;
    }
    c->hs_len = (uint32_t)k;
    flight_step(c);
}

/* HELLO without TLS: a 64-byte obfs2 header for one of the dd / classic secrets. */
static void plain_header(struct conn *c)
{
    const struct gen *sh = c->gen;
    struct obfs2_client oc;
    enum obfs2_status st =
        obfs2_parse_client(c->hs, c->hs_len, sh->plain, sh->nplain, &c->c2p, &oc);
    bool ok = st == OBFS2_OK && !replayed(c, ANTIREPLAY_OBFS2, oc.replay_key, sizeof oc.replay_key);
    if (ok) {
        c->secret = (uint32_t)sh->plain_idx[oc.match];
        if (!over_limit(c)) {
            if (fleet_ask(c, ANTIREPLAY_OBFS2, oc.replay_key, sizeof oc.replay_key)) {
                crypto_ctr_cleanup(&c->c2p); /* parsed again when the answer comes */
                crypto_wipe(&oc, sizeof oc);
                return;
            }
            early_drop(c);
            start_dc(c, &oc);
            return;
        }
        hs_failed(c, HS_REASON(hs_limit));
    } else {
        hs_debug(c, "obfs2 header", st == OBFS2_OK ? "replayed" : "no key matches");
        hs_failed(c, st == OBFS2_OK      ? HS_REASON(hs_replay)
                     : st == OBFS2_ERROR ? HS_REASON(hs_error)
                                         : HS_REASON(hs_bad_obfs2));
    }
    front(c, false);
}

/* The fleet admitted a bare obfs2 header: hs still holds exactly it (and what came with
   it), so parse it again for its keys, then go to the DC as plain_header would have. */
static void plain_resume(struct conn *c)
{
    const struct gen *g = c->gen;
    struct obfs2_client oc;
    if (obfs2_parse_client(c->hs, c->hs_len, g->plain, g->nplain, &c->c2p, &oc) != OBFS2_OK) {
        hs_failed(c, HS_REASON(hs_error)); /* cannot happen: the same bytes parsed before */
        conn_close(c, END_NOMEM);
        return;
    }
    early_drop(c);
    start_dc(c, &oc);
}

/* HELLO: validate once the first bytes can be decided; front at once what no accepted
   handshake can start with; otherwise wait for more (with an early fronting connection). */
static void hello_step(struct conn *c)
{
    const struct gen *sh = c->gen;
    bool tls = false; /* may still become a ClientHello */
    if (sh->nee) {
        size_t rl = 0;
        enum faketls_status st = faketls_peek(c->hs, c->hs_len, &rl);
        if (st == FAKETLS_OK && c->hs_len >= rl) {
            tls_hello(c, rl);
            return;
        }
        tls = st != FAKETLS_BAD;
    }
    bool plain = sh->nplain && obfs2_prefix_possible(c->hs, c->hs_len);
    if (!tls && plain && c->hs_len >= OBFS2_HEADER_LEN) {
        plain_header(c);
        return;
    }
    if (!tls && plain && c->site_spoke) {
        /* the site answered fewer than 64 bytes: no obfs2 client waits for the server
           before its header is whole (see "Early fronting connection") */
        hs_debug(c, "obfs2 header", "incomplete when the site answered");
        hs_failed(c, HS_REASON(hs_bad_obfs2));
        front(c, false);
        return;
    }
    if (tls || plain) {
        early_front(c);
        return;
    }
    hs_debug(c, "first bytes", "no accepted handshake starts like this");
    hs_failed(c, HS_REASON(hs_not_tls));
    front(c, false);
}

/* With a PROXY-protocol listener the socket's peer is the balancer: the access lists check
   the client address its header carries, before any client byte is looked at. */
static bool pp_refused(struct conn *c)
{
    struct conn_worker *w = c->w;
    struct acl *acl = __atomic_load_n(&w->sh->acl, __ATOMIC_ACQUIRE); /* a reload may set it */
    struct sockaddr_storage ss = {0};
    if (!acl || !c->pp.family)
        return false; /* no lists, or a LOCAL header (the balancer's own health check) */
    if (c->pp.family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)(void *)&ss;
        a->sin_family = AF_INET;
        memcpy(&a->sin_addr, c->pp.src, 4);
    } else {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)(void *)&ss;
        a->sin6_family = AF_INET6;
        memcpy(&a->sin6_addr, c->pp.src, 16);
    }
    enum acl_verdict v = acl_check(acl, w->acl_reader, (struct sockaddr *)&ss);
    if (v == ACL_BLOCKED)
        stats_add(&w->stats, acl_blocked, 1);
    else if (v == ACL_NOT_ALLOWED)
        stats_add(&w->stats, acl_not_allowed, 1);
    return v != ACL_PASS;
}

/* Consume the balancer's PROXY header (brief 6.1). 1: done, continue; 0: need more;
   -1: c closed (a missing or malformed header from a trusted balancer is not fronted). */
static int strip_pp(struct conn *c)
{
    size_t k = 0;
    int r = proxyproto_parse(c->hs, c->hs_len, &k, &c->pp);
    if (r == PROXYPROTO_MORE)
        return 0;
    if (r == PROXYPROTO_BAD) {
        hs_debug(c, "PROXY header", "missing or malformed");
        conn_close(c, END_PROTO);
        return -1;
    }
    if (pp_refused(c)) {
        conn_close(c, END_ACL);
        return -1;
    }
    memmove(c->hs, c->hs + k, c->hs_len - k);
    c->hs_len -= (uint32_t)k;
    c->pp_done = true;
    return c->hs_len ? 1 : 0;
}

static void discard(struct conn *c)
{
    for (int i = 0; i < 4; i++) {
        ssize_t n = recv(c->cfd, c->w->scratch, FAKETLS_SERVER_HELLO_MAX, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            conn_close(c, n == 0 ? END_EOF : END_RESET);
            return;
        }
        if (n < 0)
            return;
    }
}

static void on_hs_client(struct loop *l, struct loop_io *io, unsigned events)
{
    (void)l;
    struct conn *c = (struct conn *)(void *)((char *)io - offsetof(struct conn, cli));
    if (c->state == CONN_DISCARD) {
        discard(c);
        return;
    }
    if (c->state != CONN_HELLO && c->state != CONN_FLIGHT) {
        /* Connecting upstream: the client is not read meanwhile (interest 0), so only an
           error or hang-up gets here (nothing queued can reach it any more), or a read
           fetched in the same batch as the site's answer that already read the client
           (on_early_up) and decided. */
        if (events & LOOP_ERROR)
            conn_close(c, END_RESET);
        return;
    }
    if (!c->hs && !(c->hs = conn_buf_get(c->w))) {
        hs_failed(c, HS_REASON(hs_error));
        conn_close(c, END_NOMEM);
        return;
    }
    size_t room = c->w->sh->buf_size - HS_HEADROOM - c->hs_len;
    ssize_t n = room ? recv(c->cfd, c->hs + c->hs_len, room, 0) : 0;
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        /* nothing more from the client: decide on what is here when the site spoke */
        if (c->site_spoke && c->state == CONN_HELLO &&
            (!c->gen->cfg->proxy_protocol_listener || c->pp_done))
            hello_step(c);
        return;
    }
    if (n <= 0) {
        /* EOF, error, or a handshake that cannot fit: before our answer that is a failed
           handshake (front what we have); after it, the end. */
        size_t why = c->state == CONN_HELLO ? HS_REASON(hs_bad_hello) : HS_REASON(hs_bad_flight);
        hs_failed(c, room ? HS_REASON(hs_closed) : why);
        if (c->state == CONN_HELLO && n == 0) {
            front(c, false);
        } else {
            conn_close(c, n == 0 ? END_EOF : END_RESET);
        }
        return;
    }
    conn_touch(c);
    if (c->state == CONN_HELLO) {
        c->hs_len += (uint32_t)n;
        if (c->gen->cfg->proxy_protocol_listener && !c->pp_done && strip_pp(c) <= 0)
            return;
        hello_step(c);
        return;
    }
    size_t k = 0;
    if (faketls_reader_strip(&c->rd, c->hs + c->hs_len, (size_t)n, &k) != FAKETLS_REC_NEED_MORE) {
        flight_failed(c);
        return;
    }
    c->hs_len += (uint32_t)k;
    flight_step(c);
}

/* Upstream connected (DC or fronting host): start relaying; in HELLO (an early fronting
   connection), only watch it. */
static void upstream_ready(struct conn *c)
{
    struct conn_worker *w = c->w;
    if (c->state == CONN_HELLO || c->state == CONN_CHECK) { /* the early connection: watch the
                                                                site, send nothing */
        c->early_up = true;
        c->up.io.cb = on_early_up;
        if (loop_io_set(&w->loop, &c->up.io, LOOP_READ) < 0)
            early_drop(c);
        early_push(c);
        return;
    }
    if (c->state == CONN_FRONT_CONNECT) {
        c->state = CONN_FRONT_RELAY;
        stats_add(&w->stats, fronted, 1);
    } else {
        c->state = CONN_RELAY;
    }
    loop_timer_start(&w->loop, &c->tqs->park, &c->timer, on_timer);
    relay_start(c);
}

/* The connector's one report (upstream.c): a connected socket, or why there is none. */
static void on_upstream(struct upstream_req *r, int fd, int result)
{
    struct conn *c = (struct conn *)(void *)((char *)r - offsetof(struct conn, up));
    if (result == UPSTREAM_OK) {
        c->ufd = fd;
        if (c->state == CONN_DC_CONNECT)
            stats_dc_ok(dc_stats(c), c->w->loop.now_ms - c->last_io_ms);
        upstream_ready(c);
        return;
    }
    switch (c->state) {
    case CONN_HELLO: /* the early connection failed: fronting connects afresh if needed */
    case CONN_CHECK:
        return;
    case CONN_FRONT_CONNECT:
        if (result == UPSTREAM_NO_ADDRESS)
            front_unavailable(c);
        else
            conn_close(c, END_FRONT_FAIL);
        return;
    default:
        dc_failed(c, result);
        return;
    }
}

void conn_relay_event(struct conn *c, enum relay_event ev)
{
    switch (ev) {
    case RELAY_EV_SITE_FIN: /* close once the client is quiet for the done time */
        if (c->state == CONN_FRONT_RELAY) {
            c->site_done = true;
            loop_timer_start(&c->w->loop, &c->tqs->done, &c->timer, on_timer);
        }
        return;
    case RELAY_EV_DONE:
        conn_close(c, END_EOF);
        return;
    case RELAY_EV_NOMEM:
        conn_close(c, END_NOMEM);
        return;
    case RELAY_EV_PROTO:
        conn_close(c, END_PROTO);
        return;
    case RELAY_EV_RESET:
    default:
        conn_close(c, END_RESET);
        return;
    }
}

/*
 * Relay deadline, checked lazily against last_io_ms. Quiet for the park time: park the
 * ciphers and wait out the rest of the idle timeout; quiet for the whole idle timeout:
 * close. Any activity in between sends the timer back to the park queue.
 */
static void relay_timer(struct conn *c)
{
    struct conn_worker *w = c->w;
    struct conn_tqs *q = c->tqs;
    uint64_t quiet = w->loop.now_ms - c->last_io_ms;
    stats_bytes(c);
    if (c->site_done) { /* fronted, the site closed: the client's quiet time decides */
        if (quiet >= q->done.duration_ms)
            conn_close(c, END_EOF);
        else
            loop_timer_start(&w->loop, &q->done, &c->timer, on_timer);
        return;
    }
    if (c->parked && quiet >= q->idle_ms) {
        stats_add(&w->stats, idle_timeout, 1);
        conn_close(c, END_IDLE);
        return;
    }
    if (quiet >= q->park.duration_ms) {
        /* no-ops for streams already parked (or unused, as in fast mode and fronting) */
        crypto_ctr_park(&c->c2p);
        crypto_ctr_park(&c->p2c);
        crypto_ctr_park(&c->p2dc);
        crypto_ctr_park(&c->dc2p);
        if (!c->parked)
            stats_add(&w->stats, parked, 1);
        c->parked = true;
        loop_timer_start(&w->loop, &q->idle, &c->timer, on_timer);
        return;
    }
    c->parked = false; /* traffic resumed the streams; back to watching for quiet */
    loop_timer_start(&w->loop, &q->park, &c->timer, on_timer);
}

static void on_timer(struct loop *l, struct loop_timer *t)
{
    struct conn *c = (struct conn *)(void *)((char *)t - offsetof(struct conn, timer));
    struct conn_worker *w = c->w;
    if (!c->silent_done && (c->state == CONN_HELLO || c->state == CONN_FLIGHT ||
                            c->state == CONN_DISCARD || c->state == CONN_CHECK)) {
        /* the handshake deadline's first leg: a client still silent gets the early
           fronting connection; then the rest of the deadline */
        c->silent_done = true;
        if (c->state == CONN_HELLO && !c->hs_len)
            early_front(c);
        loop_timer_start(&w->loop, &c->tqs->hs_rest, &c->timer, on_timer);
        return;
    }
    switch (c->state) {
    case CONN_HELLO:
        /* brief 5.4: a silent or slow client goes to the fronting host like any failure */
        stats_add(&w->stats, handshake_timeout, 1);
        front(c, true);
        return;
    case CONN_RELAY:
    case CONN_FRONT_RELAY:
        relay_timer(c);
        return;
    case CONN_CHECK: /* the handshake deadline came before the fleet's answer */
        fleet_cancel(w->fleet, c->fleet_ticket);
        c->fleet_ticket = FLEET_NONE;
        limit_give_back(c);
        stats_add(&w->stats, handshake_timeout, 1);
        front(c, true);
        return;
    default: /* FLIGHT; or DISCARD, a handshake already counted as failed */
        if (c->state == CONN_FLIGHT)
            stats_add(&w->stats, handshake_timeout, 1);
        conn_close(c, END_HS_TIMEOUT);
        return;
    }
}
