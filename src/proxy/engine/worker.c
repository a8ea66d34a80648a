/*
 * worker: a worker thread's life and what all workers share (conn.h): the shared state and
 * its generations, a worker's pools, deadline queues and per-file state (upstream's names,
 * chain's rotation, the access lists' reader slot, admission's quota tick, the shaper, the
 * fleet connection), and a worker's move to a newly published generation at its next
 * accept. It never touches a connection's state: conn.c owns that (conn_enter).
 *
 * Invariants: w->tqs is in w->tqs_all; a set of deadline queues other than w->tqs is freed
 * only when no connection uses it (users == 0), never from a timer callback.
 */
#include "proxy/engine/conn_int.h"

#include "core/alloc.h"
#include "proxy/engine/admission.h"
#include "proxy/engine/antireplay.h"
#include "proxy/engine/fleet.h"
#include "proxy/engine/limits.h"
#include "proxy/engine/midproxy.h"
#include "proxy/engine/seen.h"
#include "proxy/services/doh.h"
#include "proxy/services/doppel_fetch.h"
#include "proxy/services/mpsource.h"
#include "proxy/wire/crypto.h"
#include "proxy/services/tlsfront.h"

#include <arpa/inet.h>
#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <string.h>
#include <unistd.h>

#define CONN_POOL_KEEP 4096 /* second cipher pairs and shaper states kept cached */
#define HS_POOL_KEEP   256  /* struct conn_hs kept cached: handshakes in flight at once */
#define BUF_POOL_KEEP  256  /* I/O buffers kept cached per worker */
/* What the decay tick leaves cached however quiet the worker is: enough for a few
   handshakes and relays at once without a malloc (a sequential load never reaches it). */
#define HS_POOL_FLOOR   16
#define BUF_POOL_FLOOR  16
#define BIG_POOL_FLOOR  2
/* Decayed bytes after which the worker asks the C library to give its free pages back:
   glibc keeps freed blocks between live ones resident (malloc_trim releases their pages). */
#define POOL_TRIM_BYTES ((size_t)256 << 10)
#define BUF_SLACK      1024 /* pool block = max(buffer_size, 16384) + slack */
#define BULK_BUF       ((size_t)4 * 16389) /* bulk block: four full FakeTLS records + headers */

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
    char tf_err[128];
    if (!(sh->tlsfront = tlsfront_new(cfg, sh->doh, tf_err, sizeof tf_err)) && tf_err[0]) {
        tg__log(NULL, TG__LOG_ERROR, "%s", tf_err);
        return -ENOMEM;
    }
    if (cfg->fleet.enabled && !(sh->fleet = fleet_new(cfg))) /* [fleet] is not reloaded */
        return -ENOMEM;
    /* written only as clients authenticate / secrets are revoked: resident as used */
    if (!(sh->hints = tg__calloc_table(1, sizeof *sh->hints)) ||
        !(sh->revoked = tg__calloc_table(GEN_LABELS_MAX, sizeof *sh->revoked)) ||
        !(sh->seen = seen_new(GEN_LABELS_MAX)))
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
    tlsfront_free(sh->tlsfront);  /* so may its probes */
    doh_free(sh->doh);
    antireplay_free(sh->replay);
    fleet_free(sh->fleet);
    tg__free_table(sh->hints, 1, sizeof *sh->hints);
    tg__free_table(sh->revoked, GEN_LABELS_MAX, sizeof *sh->revoked);
    seen_free(sh->seen);
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
    tlsfront_update(sh->tlsfront, g->cfg); /* domains follow the secrets; refresh now */
    return 0;
}

void conn_shared_revoke(struct conn_shared *sh, uint32_t slot, uint64_t below_seq)
{
    if (slot < GEN_LABELS_MAX)
        __atomic_store_n(&sh->revoked[slot], below_seq, __ATOMIC_RELEASE);
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
void conn_tqs_sweep(struct conn_worker *w)
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
    conn_tqs_sweep(w);
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

static void mp_sweep(struct conn_worker *w);

/* Move the worker to the current generation (at accept, after a reload). */
static void worker_adopt(struct conn_worker *w)
{
    struct gen *g = conn_shared_gen(w->sh);
    if (tqs_adopt(w, g->cfg) < 0)
        tg__log(NULL, TG__LOG_WARN,
                "reload: too many sets of [network.timeout] values still in use by open "
                "connections; this worker keeps its timeouts until they end");
    upstream_worker_adopt(w, g->cfg);
    admit_worker_adopt(w, g);
    gen_unref(w->gen);
    w->gen = g;
    w->gen_seq = g->seq;
    if (w->mp || g->cfg->mp.enabled)
        conn_worker_mp_sync(w); /* [middle-proxy] settings may have changed */
}

void conn_worker_refresh(struct conn_worker *w)
{
    if (__atomic_load_n(&w->sh->gen_seq, __ATOMIC_ACQUIRE) != w->gen_seq)
        worker_adopt(w); /* a reload published a new generation */
    else if (w->mp_old)
        mp_sweep(w); /* retired pools whose last client ended */
}

/* ---- middle-proxy pools ---- */

/* A pool generation: the current one (w->mp points into it) or a retired one. */
struct mp_pool {
    struct midproxy_worker mw;
    struct mp_pool *next;
};

static struct mp_pool *pool_of(struct midproxy_worker *mw)
{
    return (struct mp_pool *)(void *)((char *)mw - offsetof(struct mp_pool, mw));
}

static void pool_free(struct mp_pool *p)
{
    midproxy_cleanup(&p->mw);
    tg__free(p);
}

/* Free the retired pools no client uses any more. */
static void mp_sweep(struct conn_worker *w)
{
    for (struct mp_pool **pp = &w->mp_old, *p; (p = *pp);) {
        if (!midproxy_drained(&p->mw)) {
            pp = &p->next;
            continue;
        }
        *pp = p->next;
        pool_free(p);
    }
}

/* What the pool should be: the documents in use, the generation's [middle-proxy] settings,
   and the public address (configured, else detected by public-ip-url, else the socket's). */
static void pool_cfg(const struct config *cfg, const struct mpdocs *d, struct midproxy_cfg *mc)
{
    memset(mc, 0, sizeof *mc);
    if (d && d->secret_len) {
        memcpy(mc->secret, d->secret, d->secret_len);
        mc->secret_len = d->secret_len;
        mpdocs_merge(d, cfg->prefer_ip, &mc->conf); /* no secret: no connection */
    }
    mc->per_dc = cfg->mp.connections;
    mc->client_buf_max = cfg->mp.client_buffer;
    /* the process's budget, an equal share per worker (as server.c counts them) */
    long nw = cfg->workers ? (long)cfg->workers : sysconf(_SC_NPROCESSORS_ONLN);
    nw = nw < 1 ? 1 : nw > CONFIG_MAX_WORKERS ? CONFIG_MAX_WORKERS : nw;
    mc->buf_total = cfg->mp.buffer_total / (size_t)nw;
    mc->have_public4 =
        cfg->public_ipv4[0] && inet_pton(AF_INET, cfg->public_ipv4, mc->public4) == 1;
    mc->have_public6 =
        cfg->public_ipv6[0] && inet_pton(AF_INET6, cfg->public_ipv6, mc->public6) == 1;
    if (!mc->have_public4 && d && d->has_ip4)
        mc->have_public4 = true, memcpy(mc->public4, d->ip4, 4);
    if (!mc->have_public6 && d && d->has_ip6)
        mc->have_public6 = true, memcpy(mc->public6, d->ip6, 16);
}

static bool pool_same(const struct midproxy_cfg *a, const struct midproxy_cfg *b)
{
    return a->secret_len == b->secret_len && memcmp(a->secret, b->secret, a->secret_len) == 0 &&
           memcmp(&a->conf, &b->conf, sizeof a->conf) == 0 && a->per_dc == b->per_dc &&
           a->client_buf_max == b->client_buf_max && a->buf_total == b->buf_total &&
           a->have_public4 == b->have_public4 && memcmp(a->public4, b->public4, 4) == 0 &&
           a->have_public6 == b->have_public6 && memcmp(a->public6, b->public6, 16) == 0;
}

void conn_worker_mp_sync(struct conn_worker *w)
{
    mp_sweep(w);
    const struct config *cfg = w->gen->cfg;
    if (!cfg->mp.enabled) { /* a reload removed [middle-proxy]: no pool for new clients */
        if (w->mp) {
            midproxy_retire(w->mp);
            pool_of(w->mp)->next = w->mp_old;
            w->mp_old = pool_of(w->mp);
            w->mp = NULL;
        }
        return;
    }
    struct mpdocs *d = mpsource_docs(__atomic_load_n(&w->sh->mpsrc, __ATOMIC_ACQUIRE));
    struct midproxy_cfg *mc = tg__malloc(sizeof *mc);
    struct mp_pool *p = NULL;
    if (mc)
        pool_cfg(cfg, d, mc);
    mpdocs_unref(d);
    if (mc && w->mp) {
        /* compare with the defaults midproxy_init applied */
        mc->ping_ms = w->mp->cfg.ping_ms, mc->dead_ms = w->mp->cfg.dead_ms;
        if (pool_same(&w->mp->cfg, mc))
            goto done;
    }
    p = mc ? tg__malloc(sizeof *p) : NULL;
    if (mc)
        mc->ping_ms = mc->dead_ms = 0;
    int rc = p ? midproxy_init(&p->mw, &w->loop, mc) : -ENOMEM;
    if (rc < 0) {
        tg__log(NULL, TG__LOG_ERROR,
                "middle-proxy: cannot build the new pool (%s); the worker keeps the one it has",
                strerror(-rc));
        tg__free(p);
        goto done;
    }
    p->mw.stats = &w->stats;
    p->mw.dcs = w->dcs;
    p->next = NULL;
    if (w->mp) { /* its clients stay on it; new ones go to p */
        midproxy_retire(w->mp);
        pool_of(w->mp)->next = w->mp_old;
        w->mp_old = pool_of(w->mp);
    }
    w->mp = &p->mw;
done:
    if (mc)
        crypto_wipe(mc, sizeof *mc);
    tg__free(mc);
}

/* ---- pool decay ---- */

/* The pools the decay tick looks after, each with the floor it keeps. */
static const struct {
    size_t off; /* of the tg__pool in struct conn_worker */
    size_t floor;
} decaying[] = {
    {offsetof(struct conn_worker, pool), BUF_POOL_FLOOR},
    {offsetof(struct conn_worker, big_pool), BIG_POOL_FLOOR},
    {offsetof(struct conn_worker, hs_pool), HS_POOL_FLOOR},
    {offsetof(struct conn_worker, recrypt_pool), HS_POOL_FLOOR},
    {offsetof(struct conn_worker, shape_pool), HS_POOL_FLOOR},
};
#define NDECAYING (sizeof decaying / sizeof decaying[0])

static tg__pool *decaying_pool(struct conn_worker *w, size_t i)
{
    return (tg__pool *)(void *)((char *)w + decaying[i].off);
}

static bool pools_above_floor(struct conn_worker *w)
{
    for (size_t i = 0; i < NDECAYING; i++)
        if (decaying_pool(w, i)->st.free > decaying[i].floor)
            return true;
    return false;
}

/* Once a period: free what each pool cached but no one took since the last tick (a past
   burst), then let the C library return the pages once enough was freed. Runs again while
   a pool is above its floor. */
static void on_pools_tick(struct loop *l, struct loop_timer *t)
{
    struct conn_worker *w =
        (struct conn_worker *)(void *)((char *)t - offsetof(struct conn_worker, pools_tick));
    for (size_t i = 0; i < NDECAYING; i++)
        w->pools_freed += tg__pool_decay(decaying_pool(w, i), decaying[i].floor);
    if (w->pools_freed >= POOL_TRIM_BYTES) {
#ifdef __GLIBC__
        malloc_trim(0);
#endif
        w->pools_freed = 0;
    }
    if (pools_above_floor(w))
        loop_timer_start(l, &w->pools_tq, &w->pools_tick, on_pools_tick);
}

void conn_worker_pools_arm(struct conn_worker *w)
{
    if (pools_above_floor(w))
        loop_timer_start(&w->loop, &w->pools_tq, &w->pools_tick, on_pools_tick);
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
    tg__slab_init(&w->conn_slab, sizeof(struct conn));
    tg__pool_init(&w->hs_pool, sizeof(struct conn_hs), HS_POOL_KEEP);
    tg__pool_init(&w->recrypt_pool, sizeof(struct conn_recrypt), CONN_POOL_KEEP);
    tg__pool_init(&w->shape_pool, sizeof(struct conn_shape), CONN_POOL_KEEP);
    loop_tq_add(&w->loop, &w->pools_tq, CONN_POOL_DECAY_MS);
    tg__ratelimit_init(&w->rl, 5, 20);
    w->scratch = tg__malloc(TLSANSWER_SCRATCH);
    admit_worker_init(w);
    if (!w->scratch || tqs_adopt(w, w->gen->cfg) < 0 ||
        shape_worker_init(&w->shape, &w->loop, sh->doppel, sh->cfg) < 0) {
        conn_worker_cleanup(w);
        return -ENOMEM;
    }
    admit_worker_adopt(w, w->gen);
    if (sh->fleet && !(w->fleet = fleet_worker_new(sh->fleet, &w->loop, &w->stats))) {
        conn_worker_cleanup(w);
        return -ENOMEM;
    }
    if (w->gen->cfg->mp.enabled) {
        conn_worker_mp_sync(w);
        if (!w->mp) {
            conn_worker_cleanup(w);
            return -ENOMEM;
        }
    }
    return 0;
}

static void close_one(void *obj, void *arg)
{
    (void)arg;
    conn_close(obj, END_SHUTDOWN);
}

void conn_worker_cleanup(struct conn_worker *w)
{
    if (!w || !w->sh)
        return;
    tg__slab_each(&w->conn_slab, close_one, NULL);
    if (w->mp) /* after the connections: their clients are detached by now */
        pool_free(pool_of(w->mp));
    w->mp = NULL;
    for (struct mp_pool *p = w->mp_old, *next; p; p = next) {
        next = p->next;
        pool_free(p);
    }
    w->mp_old = NULL;
    fleet_worker_free(w->fleet);
    w->fleet = NULL;
    upstream_worker_cleanup(w);
    tlsanswer_worker_cleanup(&w->tlsa);
    tg__free(w->scratch);
    w->scratch = NULL;
    tg__pool_cleanup(&w->pool);
    tg__pool_cleanup(&w->big_pool);
    tg__slab_cleanup(&w->conn_slab);
    tg__pool_cleanup(&w->hs_pool);
    tg__pool_cleanup(&w->recrypt_pool);
    tg__pool_cleanup(&w->shape_pool);
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

void conn_worker_attach(struct conn_worker *w, size_t index, struct stats_secret *sec, size_t nsec)
{
    w->sec = sec;
    w->nsec = nsec;
    acl_worker_init(&w->acl, index);
}
