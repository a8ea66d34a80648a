/*
 * conn: a connection's state machine: accept, handshake, fronting decisions, relay and
 * deadline glue, teardown. See conn_int.h for the states; worker.c runs the worker,
 * admission.c decides whether a validated hello may go on, conn_pp.c reads the balancer's
 * PROXY header, relay.c moves the bytes, upstream.c connects.
 *
 * conn_enter() is the only place that changes c->state; it runs conn_check() (debug builds)
 * before and after. Invariants (conn_check checks them): c->hs->buf is non-NULL only in HELLO,
 * FLIGHT and CHECK (and holds exactly the bytes read so far in HELLO and CHECK, or the
 * unwrapped ApplicationData payload in FLIGHT); a relaying connection has its upstream
 * socket; nothing is written to the client before a ClientHello validated; every exit goes
 * through conn_close().
 */
#include "proxy/engine/conn_int.h"

#include "core/clock.h"
#include "proxy/engine/admission.h"
#include "proxy/engine/antireplay.h"
#include "proxy/engine/midproxy.h"
#include "proxy/engine/mprelay.h"
#include "proxy/engine/relay.h"
#include "proxy/engine/seen.h"
#include "proxy/engine/upstream.h"
#include "proxy/wire/proxyproto.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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
    [END_REVOKED] = "revoked",
};

const char *conn_end_name(enum conn_end e)
{
    return (size_t)e < sizeof end_names / sizeof end_names[0] ? end_names[e] : "?";
}

#if TGKIT_CHECKS
void conn_check_fail(const struct conn *c, const char *what, const char *file, int line)
{
    if (c->magic != CONN_MAGIC) /* closed: the rest of it is no longer ours to read */
        fprintf(stderr, "conn_check: %s:%d: %s (conn %p, magic %08x)\n", file, line, what,
                (const void *)c, (unsigned)c->magic);
    else
        fprintf(stderr, "conn_check: %s:%d: %s (conn %p, state %u)\n", file, line, what,
                (const void *)c, (unsigned)c->state);
    abort();
}
#endif

/* The handshake is over (the relay starts) or the connection closes: give its state back. */
static void hs_release(struct conn *c)
{
    struct conn_hs *h = c->hs;
    if (!h)
        return;
    upstream_cancel(&h->up); /* idle by now unless closing mid-connect: no-op then */
    conn_buf_put(conn_w(c), h->buf);
    c->uio.req = NULL;
    c->hs = NULL;
    tg__pool_put(&conn_w(c)->hs_pool, h);
    conn_pools_note(conn_w(c));
}

/* Every state change: checked before (c is live) and after (the new state's invariants).
   A relay state gives the handshake's state back. */
static void conn_enter(struct conn *c, enum conn_state s)
{
    conn_check(c);
    if (s == CONN_RELAY || s == CONN_FRONT_RELAY)
        hs_release(c);
    c->state = (uint8_t)s;
    conn_check(c);
}

static void on_hs_client(struct loop *l, struct loop_io *io, unsigned events);
static void on_timer(struct loop *l, struct loop_timer *t);
static void on_upstream(struct upstream_req *r, int fd, int result);
static void upstream_ready(struct conn *c);
static void relay_timer(struct conn *c);
static void front(struct conn *c, bool deadline);

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
            (unsigned long long)(conn_w(c)->loop.now_ms - c->start_ms),
            (unsigned long long)c->bytes_up, (unsigned long long)c->bytes_down,
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

/* The counters a closing connection adds: its end reason, its secret's gauge (its bytes are
   in the counters as they were read: conn_count_bytes). */
static void stats_close(struct conn *c)
{
    struct conn_worker *w = conn_w(c);
    if (c->end != END_NONE)
        stats_add_at(&w->stats, STATS_END_INDEX(c->end), 1);
    if (c->state == CONN_FRONT_RELAY)
        stats_sub(&w->stats, front_active, 1);
    bool authed = c->state == CONN_DC_CONNECT || c->state == CONN_RELAY;
    uint32_t slot = c->secret < c->gen->cfg->nsecrets ? c->gen->slot[c->secret] : GEN_NO_SLOT;
    if (authed && slot < w->nsec)
        stats_sub(&w->sec[slot], active, 1);
}

void conn_close(struct conn *c, enum conn_end why)
{
    conn_check(c); /* a second close of the same connection stops here */
    struct conn_worker *w = conn_w(c);
    if (c->end == END_NONE || why == END_SHUTDOWN)
        c->end = (uint8_t)why;
    log_end(c);
    stats_close(c);
    loop_timer_stop(&c->timer);
    if (c->hs)
        upstream_cancel(&c->hs->up); /* no-op unless a connect or a lookup is under way */
    /* unregistered before the close: a fork or posix_spawn on another thread (a program
       embedding the engine, the tests' scrapers) holds the sockets open until its exec, and
       epoll would go on reporting them for this connection's freed struct */
    loop_io_del(&w->loop, &c->cli);
    loop_io_del(&w->loop, &c->uio.io);
    if ((c->state == CONN_FRONT_RELAY || c->state == CONN_HELLO) && c->reset_by != CONN_RESET_NONE)
        reset_on_close(c->reset_by == CONN_RESET_UPSTREAM ? c->cfd : c->ufd);
    if (c->cfd >= 0)
        close(c->cfd);
    if (c->ufd >= 0)
        close(c->ufd);
    relay_release(c);
    mprelay_release(c); /* middle-proxy mode: cancelled on the middle proxy */
    admit_release(c);
    hs_release(c);
    crypto_ctr_cleanup(&c->c2p);
    crypto_ctr_cleanup(&c->p2dc);
    if (c->rx) {
        crypto_ctr_cleanup(&c->rx->p2c);
        crypto_ctr_cleanup(&c->rx->dc2p);
        tg__pool_put(&w->recrypt_pool, c->rx);
        c->rx = NULL;
    }
    __atomic_sub_fetch(&w->sh->active, 1, __ATOMIC_RELAXED);
    gen_unref(c->gen);
    c->tqs->users--; /* a set no longer used is released at a later accept (conn_tqs_sweep) */
    conn_mark_dead(c);
    tg__slab_put(&w->conn_slab, c);
    conn_pools_note(w);
    /* last, so whoever sees the gauge drop also sees the buffers released */
    stats_add(&w->stats, closed, 1);
    stats_sub(&w->stats, active, 1);
}

static void revoke_one(void *obj, void *arg)
{
    struct conn *c = obj;
    const uint64_t *rev = arg;
    if (c->secret >= c->gen->cfg->nsecrets || c->state == CONN_FRONT_CONNECT ||
        c->state == CONN_FRONT_RELAY || c->state == CONN_DISCARD)
        return; /* not authenticated, or fronted: nothing of the secret's to end */
    uint32_t slot = c->gen->slot[c->secret];
    if (slot < GEN_LABELS_MAX && c->gen->seq < __atomic_load_n(&rev[slot], __ATOMIC_ACQUIRE))
        conn_close(c, END_REVOKED);
}

void conn_worker_revoke_sweep(struct conn_worker *w)
{
    tg__slab_each(&w->conn_slab, revoke_one, w->sh->revoked);
}

void conn_accept(struct conn_worker *w, int fd)
{
    conn_accept_peer(w, fd, NULL);
}

void conn_accept_peer(struct conn_worker *w, int fd, const struct sockaddr *peer)
{
    struct conn_shared *sh = w->sh;
    conn_worker_refresh(w);
    if (w->tqs_all->next)
        conn_tqs_sweep(w); /* an older set of timeouts may be unused now */
    uint32_t n = __atomic_add_fetch(&sh->active, 1, __ATOMIC_RELAXED);
    struct conn *c = n <= sh->concurrency ? tg__slab_get(&w->conn_slab) : NULL;
    struct conn_hs *h = c ? tg__pool_get(&w->hs_pool) : NULL;
    if (!h) {
        tg__slab_put(&w->conn_slab, c);
        __atomic_sub_fetch(&sh->active, 1, __ATOMIC_RELAXED);
        stats_add(&w->stats, rejected_limit, 1);
        close(fd);
        return;
    }
    memset(c, 0, sizeof *c);
    memset(h, 0, sizeof *h);
    c->hs = h;
    c->cfd = fd;
    c->ufd = -1;
    c->cli.fd = -1;
    upstream_req_init(&h->up, &c->uio);
    c->gen = w->gen;
    c->tqs = w->tqs;
    upstream_req_bind(&h->up, c->gen->cfg, c->tqs);
    c->secret = UINT32_MAX;
    conn_pp_accepted(&h->pp, peer);
    admit_conn_init(&c->adm, &h->chk);
    c->start_ms = w->loop.now_ms;
    conn_touch(c);
    conn_mark_live(c);
    conn_enter(c, CONN_HELLO); /* TCP_NODELAY and keepalive are inherited from the listener */
    if (loop_io_add(&w->loop, &c->cli, fd, LOOP_READ, on_hs_client) < 0) {
        close(fd);
        c->gen = NULL;
        conn_mark_dead(c);
        __atomic_sub_fetch(&sh->active, 1, __ATOMIC_RELAXED);
        tg__pool_put(&w->hs_pool, h);
        tg__slab_put(&w->conn_slab, c);
        return;
    }
    gen_ref(c->gen);
    c->tqs->users++;
    stats_add(&w->stats, accepted, 1);
    stats_add(&w->stats, active, 1);
    loop_timer_start(&w->loop, &c->tqs->silent, &c->timer, on_timer);
    /* the client's first bytes are usually there already when its connection is accepted
       (here 88% of the time): read them now instead of after one more epoll round; when
       they are not, the recv finds nothing and no buffer is kept (issue 30) */
    on_hs_client(&w->loop, &c->cli, LOOP_READ);
}

/* A failed client handshake: counted in the total and under its one reason. */
void conn_hs_failed(struct conn *c, size_t reason)
{
    stats_add(&conn_w(c)->stats, handshake_bad, 1);
    stats_add_at(&conn_w(c)->stats, reason, 1);
    /* the secret's own count, when its key matched (the hello or header named it) */
    uint32_t slot = c->secret < c->gen->cfg->nsecrets ? c->gen->slot[c->secret] : GEN_NO_SLOT;
    if (slot >= conn_w(c)->nsec)
        return;
    struct stats_secret *s = &conn_w(c)->sec[slot];
    if (reason == HS_REASON(hs_stale))
        stats_add(s, hs_stale, 1);
    else if (reason == HS_REASON(hs_replay))
        stats_add(s, hs_replay, 1);
    else if (reason == HS_REASON(hs_limit))
        stats_add(s, hs_limit, 1);
    else
        stats_add(s, hs_other, 1);
}

void conn_hs_debug(struct conn *c, const char *what, const char *why)
{
    struct conn_worker *w = conn_w(c);
    if (tg__log_enabled(NULL, TG__LOG_DEBUG) && tg__ratelimit_allow(&w->rl, w->loop.now_ms))
        tg__log(NULL, TG__LOG_DEBUG, "handshake: %s: %s (after %u bytes)", what, why,
                c->hs ? (unsigned)c->hs->len : 0u);
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
    upstream_cancel(&c->hs->up); /* still connecting */
    if (c->ufd < 0)
        return;
    loop_io_del(&conn_w(c)->loop, &c->uio.io);
    close(c->ufd);
    c->ufd = -1;
    c->early_up = false;
    c->hs->early_sent = 0;
}

static void on_early_up(struct loop *l, struct loop_io *io, unsigned events)
{
    (void)l;
    (void)events;
    struct conn *c = (struct conn *)(void *)((char *)io - offsetof(struct conn, uio.io));
    uint8_t b;
    ssize_t n = recv(c->ufd, &b, 1, MSG_PEEK);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n > 0) {
        /* The site spoke: its bytes wait in its socket until the client is fronted (or
           dropped with the early connection). */
        loop_io_del(&conn_w(c)->loop, &c->uio.io);
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
    while (c->hs->early_sent < c->hs->len) {
        ssize_t n = send(c->ufd, c->hs->buf + c->hs->early_sent, c->hs->len - c->hs->early_sent,
                         MSG_NOSIGNAL);
        if (n <= 0)
            return;
        c->hs->early_sent += (uint32_t)n;
    }
}

/* The handshake is undecided after some bytes: open the early connection (once) and pass
   the bytes on. */
static void early_front(struct conn *c)
{
    if (c->ufd < 0 && !upstream_busy(&c->hs->up) && !c->early_tried) {
        c->early_tried = true;
        if (upstream_front(&c->hs->up, conn_w(c), c->secret, UPSTREAM_EARLY, on_upstream) == 0)
            stats_add(&conn_w(c)->stats, front_early, 1);
    }
    early_push(c);
}

/* A fronting connect is under way: the connector's deadlines bound it, not the handshake's. */
static void front_connecting(struct conn *c)
{
    conn_enter(c, CONN_FRONT_CONNECT);
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
    if (c->gen->cfg->fronting.proxy_protocol && !c->hs->buf)
        c->hs->buf = conn_buf_get(conn_w(c)); /* a silent client still gets its PROXY header sent */
    if (c->gen->cfg->fronting.proxy_protocol && c->hs->buf) {
        uint8_t hdr[HS_HEADROOM];
        size_t k = conn_pp_build(&c->hs->pp, c->cfd, hdr); /* the buffer always keeps this room */
        memmove(c->hs->buf + k, c->hs->buf, c->hs->len);
        memcpy(c->hs->buf, hdr, k);
        c->hs->len += (uint32_t)k;
    }
    /* the listener's keepalive is inherited; a prober must not see probes the site never
       sends */
    int off = 0;
    setsockopt(c->cfd, SOL_SOCKET, SO_KEEPALIVE, &off, sizeof off);
    struct relay_dir *u = &c->dir[DIR_UP];
    u->buf = c->hs->buf;
    u->off = c->hs->early_sent; /* bytes an early connection already passed on */
    u->len = c->hs->len;
    conn_count_bytes(c, DIR_UP, c->hs->len); /* what was read goes to the site too */
    c->hs->buf = NULL;
    c->hs->len = 0;
    if (u->off == u->len)
        conn_dir_put(conn_w(c), u);
    loop_io_set(&conn_w(c)->loop, &c->cli, 0); /* the kernel buffers the client meanwhile */
    if (c->early_up) {                    /* connected early (early_front) */
        conn_enter(c, CONN_FRONT_CONNECT);
        upstream_ready(c);
        return;
    }
    if (upstream_busy(&c->hs->up)) { /* still connecting early: now under the fronting timeout */
        front_connecting(c);
        upstream_promote(&c->hs->up);
        return;
    }
    if (upstream_front(&c->hs->up, conn_w(c), c->secret, 0, on_upstream) == 0) {
        front_connecting(c);
        return;
    }
    conn_dir_put(conn_w(c), u);
    if (deadline) {
        conn_close(c, END_HS_TIMEOUT);
        return;
    }
    conn_enter(c, CONN_DISCARD);
    loop_io_set(&conn_w(c)->loop, &c->cli, LOOP_READ);
}

/* No fronting target after all (the lookup gave no address): read and discard until the
   handshake deadline, as when there was none to begin with. */
static void front_unavailable(struct conn *c)
{
    struct relay_dir *u = &c->dir[DIR_UP];
    conn_dir_put(conn_w(c), u);
    conn_enter(c, CONN_DISCARD);
    loop_io_set(&conn_w(c)->loop, &c->cli, LOOP_READ);
    loop_timer_start(&conn_w(c)->loop, &c->tqs->handshake, &c->timer, on_timer);
}

/* c's DC counters: its DC's slot (the test DCs count as other ids unless test-dcs was on at
   start: the page shows the slots of the starting config, sh->cfg, for its whole life). */
static struct stats_dc *dc_stats(struct conn *c)
{
    size_t slot = stats_dc_slot(c->dc);
    if (stats_dc_id(slot) > 10000 && !conn_w(c)->sh->cfg->use_test_dcs)
        slot = STATS_DC_OTHER;
    return &conn_w(c)->dcs[slot];
}

static_assert(UPSTREAM_WHY_COUNT - 1 == STATS_DC_FAIL_COUNT,
              "stats.h STATS_DC_FAIL_LIST follows enum upstream_why");

/* The DC connect failed (result from the connector, its reason in c->hs->up.why): count it for
   the DC and close. */
static void dc_failed(struct conn *c, int result)
{
    size_t why = c->hs->up.why ? (size_t)c->hs->up.why - 1 : (size_t)UPSTREAM_WHY_ERROR - 1;
    stats_add(&conn_w(c)->stats, dc_connect_fail, 1);
    stats_dc_fail(dc_stats(c), why);
    conn_close(c, result == UPSTREAM_NO_ADDRESS ? END_DNS : END_DC_FAIL);
}

/* An authenticated connection: counted, for its secret too. */
static void count_authenticated(struct conn *c)
{
    stats_add(&conn_w(c)->stats, handshake_ok, 1);
    uint32_t slot = c->gen->slot[c->secret]; /* authenticated: c->secret is valid */
    if (slot < conn_w(c)->nsec) {
        stats_add(&conn_w(c)->sec[slot], conns, 1);
        stats_add(&conn_w(c)->sec[slot], active, 1);
    }
    uint8_t ip[16];
    seen_note(conn_w(c)->sh->seen, slot, conn_pp_client_ip(&c->hs->pp, c->cfd, ip) ? ip : NULL,
              tg__wall_s());
}

/* A secret with an ad tag goes through the worker's middle-proxy pool, with no DC socket
   (mprelay.h). True when that happened or the connection was closed; false: go direct (no
   tag, or no middle proxy up and fallback-direct). */
static bool start_mp(struct conn *c, struct obfs2_client *oc)
{
    if (!conn_w(c)->mp) /* no middle-proxy pool: direct, without reading the secret's tag */
        return false;
    const uint8_t *tag = config_ad_tag(c->gen->cfg, c->secret);
    if (!tag)
        return false;
    struct sockaddr_storage peer, me;
    socklen_t pl = sizeof peer, ml = sizeof me;
    memset(&peer, 0, sizeof peer);
    if (getpeername(c->cfd, (struct sockaddr *)&peer, &pl) != 0 ||
        getsockname(c->cfd, (struct sockaddr *)&me, &ml) != 0) {
        conn_close(c, END_RESET);
        return true;
    }
    struct proxyproto_addr a;
    if (conn_pp_source(&c->hs->pp, c->cfd, &a) &&
        c->hs->pp.addr.family) { /* the balancer's client */
        memset(&peer, 0, sizeof peer);
        if (a.family == AF_INET) {
            struct sockaddr_in *s4 = (struct sockaddr_in *)(void *)&peer;
            s4->sin_family = AF_INET, s4->sin_port = a.src_port;
            memcpy(&s4->sin_addr, a.src, 4);
        } else {
            struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)(void *)&peer;
            s6->sin6_family = AF_INET6, s6->sin6_port = a.src_port;
            memcpy(&s6->sin6_addr, a.src, 16);
        }
    }
    int rc = mprelay_start(c, oc, tag, (struct sockaddr *)&peer, (struct sockaddr *)&me);
    if (rc > 0) {
        crypto_wipe(&oc->keys, sizeof oc->keys);
        count_authenticated(c);
        conn_enter(c, CONN_RELAY);
        loop_timer_start(&conn_w(c)->loop, &c->tqs->park, &c->timer, on_timer);
        mprelay_go(c); /* c may be gone */
        return true;
    }
    if (rc == 0 && c->gen->cfg->mp.fallback_direct) {
        conn_w(c)->mp->st.fallbacks++;
        stats_add(&conn_w(c)->stats, mp_fallbacks, 1);
        return false;
    }
    crypto_wipe(&oc->keys, sizeof oc->keys);
    conn_close(c, rc == 0 ? END_DC_FAIL : END_NOMEM);
    return true;
}

/* Authenticated obfs2 header at hs[0..64), payload after it: queue the DC header and the
   payload for the DC, then connect. */
static void start_dc(struct conn *c, struct obfs2_client *oc)
{
    c->dc = oc->dc;
    if (start_mp(c, oc))
        return;
    c->fast = c->gen->fast_mode;
    uint8_t wire[OBFS2_HEADER_LEN];
    int rc = 0;
    if (!c->fast) { /* the second pair of ciphers (conn_int.h) */
        c->rx = tg__pool_get(&conn_w(c)->recrypt_pool);
        if (c->rx)
            memset(c->rx, 0, sizeof *c->rx);
        rc = c->rx ? crypto_ctr_init(&c->rx->p2c, oc->keys.enc_key, oc->keys.enc_iv) : -ENOMEM;
    }
    if (rc == 0)
        rc = obfs2_dc_header(oc->tag, oc->dc, c->fast ? &oc->keys : NULL, NULL, NULL, wire, NULL,
                             &c->p2dc, c->fast ? NULL : &c->rx->dc2p);
    crypto_wipe(&oc->keys, sizeof oc->keys);
    uint8_t *p = c->hs->buf + OBFS2_HEADER_LEN;
    size_t n = c->hs->len - OBFS2_HEADER_LEN;
    if (rc == 0 && n)
        rc = crypto_ctr_apply(&c->c2p, p, n) < 0 || crypto_ctr_apply(&c->p2dc, p, n) < 0;
    if (rc != 0) {
        conn_close(c, END_NOMEM);
        return;
    }
    memcpy(c->hs->buf, wire, OBFS2_HEADER_LEN);
    struct relay_dir *u = &c->dir[DIR_UP];
    u->buf = c->hs->buf;
    u->off = 0;
    u->len = c->hs->len;
    c->hs->buf = NULL;
    c->hs->len = 0;
    count_authenticated(c);
    conn_enter(c, CONN_DC_CONNECT);
    conn_count_bytes(c, DIR_UP, u->len); /* the header and what came with it go to the DC */
    loop_timer_stop(&c->timer); /* the connector's deadlines bound the connect */
    /* the client is not read while connecting, so last_io_ms marks the connect's start
       until the relay begins (the DC connect time, on_upstream). Its READ interest stays
       until it sends more (on_hs_client turns it off then): the relay wants it again, so a
       client that waits saves two epoll changes (issue 30) */
    conn_touch(c);
    int ufd;
    rc = upstream_dc(&c->hs->up, conn_w(c), c->dc, on_upstream, &ufd);
    if (rc == UPSTREAM_CONNECTED) /* a DC on this host: connected already, relay at once */
        on_upstream(&c->hs->up, ufd, UPSTREAM_OK);
    else if (rc < 0)
        dc_failed(c, rc);
}

/* FLIGHT: the client's records after our answer are not TLS records, or it sent an alert
   (closing): the handshake failed, and the connection ends (nothing to front any more). */
static void flight_failed(struct conn *c)
{
    conn_hs_failed(c, HS_REASON(hs_bad_flight));
    conn_close(c, END_PROTO);
}

/* FLIGHT: the unwrapped payload in hs; authenticate its obfs2 header with the TLS key. */
static void flight_step(struct conn *c)
{
    if (c->hs->len < OBFS2_HEADER_LEN)
        return;
    struct obfs2_candidate cand = {.tags = OBFS2_ALLOW_PADDED};
    memcpy(cand.key, c->gen->cfg->secrets[c->secret].secret.key, 16);
    struct obfs2_client oc;
    enum obfs2_status st = obfs2_parse_client(c->hs->buf, c->hs->len, &cand, 1, &c->c2p, &oc);
    crypto_wipe(&cand, sizeof cand);
    if (st != OBFS2_OK ||
        admit_replayed(c, ANTIREPLAY_OBFS2, oc.replay_key, sizeof oc.replay_key)) {
        conn_hs_debug(c, "tls client flight",
                      st == OBFS2_OK ? "replayed obfs2 header"
                                     : "obfs2 header does not authenticate");
        conn_hs_failed(c, st == OBFS2_OK      ? HS_REASON(hs_replay)
                          : st == OBFS2_ERROR ? HS_REASON(hs_error)
                                              : HS_REASON(hs_bad_flight));
        conn_close(c, st == OBFS2_ERROR ? END_NOMEM : END_HS_BAD);
        return;
    }
    start_dc(c, &oc);
}

/* Write our whole three-record answer (tlsanswer.h: the learned shape of the secret's
   domain, or today's); the socket is fresh, so it fits its buffer. */
static int send_answer(struct conn *c, const struct faketls_hello *h, size_t ee)
{
    return tlsanswer_send(&conn_w(c)->tlsa, conn_w(c)->sh->tlsfront, &c->gen->ee[ee], h, c->cfd,
                          conn_w(c)->scratch);
}

/* The handshake named c->secret: over one of its limits, the client is fronted like any
   failed handshake (nothing has been written to it), so it cannot learn a proxy is here. */
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

static void tls_answer(struct conn *c, const struct faketls_hello *h, size_t ee, size_t rl);
static void plain_resume(struct conn *c);

/*
 * A validated hello goes to admission (admission.h): the local anti-replay cache, the
 * secret's limits and, with [fleet], the fleet's Redis, before anything is written to the
 * client or the DC. PENDING: the fleet's check is asynchronous, bounded by [fleet] timeout;
 * the connection waits in CONN_CHECK without reading the client (the kernel keeps its
 * flight) until conn_admitted, unless the handshake deadline or conn_close comes first.
 */
static void checking(struct conn *c)
{
    conn_enter(c, CONN_CHECK);
    loop_io_set(&conn_w(c)->loop, &c->cli, 0);
}

/* HELLO with a complete ClientHello record of rl bytes at hs. */
static void tls_hello(struct conn *c, size_t rl)
{
    const struct gen *sh = c->gen;
    struct faketls_hello h;
    const char *why = "bad record";
    size_t fail_why = HS_REASON(hs_bad_hello);
    if (faketls_parse_hello(c->hs->buf, c->hs->len, &h, &why) != FAKETLS_OK) {
        conn_hs_debug(c, "client hello", why);
        goto fail;
    }
    uint32_t skew = sh->cfg->tolerate_time_skewness_s;
    struct faketls_policy pol = {.now = tg__wall_s(), .past_s = skew, .future_s = skew};
    struct faketls_match m;
    /* Beyond two candidate keys (no SNI, or many secrets for its domain), the client's hint
       and the worker's scan budget bound what the hello costs (keyscan.h). */
    uint8_t ip[16];
    size_t ncand = sh->nee > 2 ? faketls_candidates(&h, sh->ee, sh->nee, &pol) : sh->nee;
    bool capped = false;
    enum faketls_verdict v;
    if (ncand > 2 && conn_pp_client_ip(&c->hs->pp, c->cfd, ip))
        v = keyscan_validate(conn_w(c)->sh->hints, &conn_w(c)->scan, ip, conn_w(c)->loop.now_ms, &h,
                             sh->ee, sh->nee, ncand, &pol, &m, &capped);
    else
        v = faketls_validate(&h, sh->ee, sh->nee, &pol, &m);
    if (capped) {
        stats_add(&conn_w(c)->stats, scan_capped, 1);
        conn_hs_debug(c, "client hello", "scan budget spent: no key checked");
    }
    if (v != FAKETLS_ACCEPT) {
        if (m.matched)
            c->secret = (uint32_t)sh->ee_idx[m.index];
        char reason[64];
        snprintf(reason, sizeof reason, "%s (clock skew %lld s)", faketls_verdict_name(v),
                 v == FAKETLS_BAD_TIME ? (long long)m.skew : 0LL);
        conn_hs_debug(c, "client hello", reason); /* brief 4.4: log the skew of rejected clients */
        fail_why = verdict_reason(v);
        goto fail;
    }
    c->secret = (uint32_t)sh->ee_idx[m.index];
    switch (
        admit_hello(c, c->secret, ANTIREPLAY_TLS, h.random, FAKETLS_REPLAY_KEY_LEN, &fail_why)) {
    case ADMIT_OK:
        tls_answer(c, &h, m.index, rl);
        return;
    case ADMIT_PENDING:
        checking(c); /* conn_admitted goes on */
        return;
    case ADMIT_REFUSED:
        if (fail_why == HS_REASON(hs_replay))
            conn_hs_debug(c, "client hello", "replayed");
        break;
    }
fail:
    conn_hs_failed(c, fail_why);
    front(c, false);
}

/* A hello accepted (locally, and by the fleet when there is one): answer it, then read
   the client's flight. */
static void tls_answer(struct conn *c, const struct faketls_hello *h, size_t ee, size_t rl)
{
    if (send_answer(c, h, ee) < 0) {
        conn_hs_failed(c, HS_REASON(hs_closed)); /* the client's socket is gone */
        conn_close(c, END_RESET);
        return;
    }
    early_drop(c); /* a genuine client: the site never hears of it */
    c->tls = true;
    conn_enter(c, CONN_FLIGHT);
    faketls_reader_init(&c->rd, 65535); /* brief 4.8: any 16-bit length */
    /* Bytes after the hello are the start of the client's flight. */
    size_t rest = c->hs->len - rl, k = 0;
    memmove(c->hs->buf, c->hs->buf + rl, rest);
    if (faketls_reader_strip(&c->rd, c->hs->buf, rest, &k) != FAKETLS_REC_NEED_MORE) {
        flight_failed(c);
        return;
    }
    c->hs->len = (uint32_t)k;
    flight_step(c);
}

/* HELLO without TLS: a 64-byte obfs2 header for one of the dd / classic secrets. */
static void plain_header(struct conn *c)
{
    const struct gen *sh = c->gen;
    struct obfs2_client oc;
    enum obfs2_status st =
        obfs2_parse_client(c->hs->buf, c->hs->len, sh->plain, sh->nplain, &c->c2p, &oc);
    size_t why = HS_REASON(hs_bad_obfs2);
    if (st == OBFS2_OK) {
        switch (admit_hello(c, (uint32_t)sh->plain_idx[oc.match], ANTIREPLAY_OBFS2, oc.replay_key,
                            sizeof oc.replay_key, &why)) {
        case ADMIT_OK:
            early_drop(c);
            start_dc(c, &oc);
            return;
        case ADMIT_PENDING:
            crypto_ctr_cleanup(&c->c2p); /* parsed again when the answer comes */
            crypto_wipe(&oc, sizeof oc);
            checking(c);
            return;
        case ADMIT_REFUSED:
            if (why == HS_REASON(hs_replay))
                conn_hs_debug(c, "obfs2 header", "replayed");
            break;
        }
    } else {
        conn_hs_debug(c, "obfs2 header", "no key matches");
        why = st == OBFS2_ERROR ? HS_REASON(hs_error) : HS_REASON(hs_bad_obfs2);
    }
    conn_hs_failed(c, why);
    front(c, false);
}

/* The fleet admitted a bare obfs2 header: hs still holds exactly it (and what came with
   it), so parse it again for its keys, then go to the DC as plain_header would have. */
static void plain_resume(struct conn *c)
{
    const struct gen *g = c->gen;
    struct obfs2_client oc;
    if (obfs2_parse_client(c->hs->buf, c->hs->len, g->plain, g->nplain, &c->c2p, &oc) != OBFS2_OK) {
        conn_hs_failed(c, HS_REASON(hs_error)); /* cannot happen: the same bytes parsed before */
        conn_close(c, END_NOMEM);
        return;
    }
    early_drop(c);
    start_dc(c, &oc);
}

void conn_admitted(struct conn *c, enum admit_verdict v, size_t reason)
{
    const struct gen *g = c->gen;
    conn_enter(c, CONN_HELLO);
    if (v != ADMIT_OK) {
        conn_hs_failed(c, reason);
        front(c, false);
        return;
    }
    loop_io_set(&conn_w(c)->loop, &c->cli, LOOP_READ);
    if (c->hs->chk.kind == ANTIREPLAY_OBFS2) {
        plain_resume(c);
        return;
    }
    /* hs still holds exactly the hello (and what followed it): parse it again */
    struct faketls_hello h;
    const char *why = NULL;
    size_t rl = 0, ee = 0;
    while (ee < g->nee && g->ee_idx[ee] != c->secret)
        ee++;
    if (faketls_peek(c->hs->buf, c->hs->len, &rl) != FAKETLS_OK ||
        faketls_parse_hello(c->hs->buf, c->hs->len, &h, &why) != FAKETLS_OK || ee == g->nee) {
        conn_close(c, END_PROTO); /* cannot happen: the same bytes parsed before */
        return;
    }
    tls_answer(c, &h, ee, rl);
}

/* HELLO: validate once the first bytes can be decided; front at once what no accepted
   handshake can start with; otherwise wait for more (with an early fronting connection). */
static void hello_step(struct conn *c)
{
    const struct gen *sh = c->gen;
    bool tls = false; /* may still become a ClientHello */
    if (sh->nee) {
        size_t rl = 0;
        enum faketls_status st = faketls_peek(c->hs->buf, c->hs->len, &rl);
        if (st == FAKETLS_OK && c->hs->len >= rl) {
            tls_hello(c, rl);
            return;
        }
        tls = st != FAKETLS_BAD;
    }
    bool plain = sh->nplain && obfs2_prefix_possible(c->hs->buf, c->hs->len);
    if (!tls && plain && c->hs->len >= OBFS2_HEADER_LEN) {
        plain_header(c);
        return;
    }
    if (!tls && plain && c->site_spoke) {
        /* the site answered fewer than 64 bytes: no obfs2 client waits for the server
           before its header is whole (see "Early fronting connection") */
        conn_hs_debug(c, "obfs2 header", "incomplete when the site answered");
        conn_hs_failed(c, HS_REASON(hs_bad_obfs2));
        front(c, false);
        return;
    }
    if (tls || plain) {
        early_front(c);
        return;
    }
    conn_hs_debug(c, "first bytes", "no accepted handshake starts like this");
    conn_hs_failed(c, HS_REASON(hs_not_tls));
    front(c, false);
}

/* Consume the balancer's PROXY header (brief 6.1). 1: done, continue; 0: need more;
   -1: c closed (a missing or malformed header from a trusted balancer is not fronted). */
static int strip_pp(struct conn *c)
{
    size_t k = 0;
    switch (conn_pp_take(&c->hs->pp, conn_w(c), c->hs->buf, c->hs->len, &k)) {
    case CONN_PP_MORE:
        return 0;
    case CONN_PP_BAD:
        conn_hs_debug(c, "PROXY header", "missing or malformed");
        conn_close(c, END_PROTO);
        return -1;
    case CONN_PP_REFUSED:
        conn_close(c, END_ACL);
        return -1;
    case CONN_PP_DONE:
        break;
    }
    memmove(c->hs->buf, c->hs->buf + k, c->hs->len - k);
    c->hs->len -= (uint32_t)k;
    return c->hs->len ? 1 : 0;
}

static void discard(struct conn *c)
{
    for (int i = 0; i < 4; i++) {
        ssize_t n = recv(c->cfd, conn_w(c)->scratch, FAKETLS_SERVER_HELLO_MAX, 0);
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
        else if (c->state == CONN_DC_CONNECT) /* more bytes: the kernel keeps them meanwhile */
            loop_io_set(l, io, 0);
        return;
    }
    if (!c->hs->buf && !(c->hs->buf = conn_buf_get(conn_w(c)))) {
        conn_hs_failed(c, HS_REASON(hs_error));
        conn_close(c, END_NOMEM);
        return;
    }
    size_t room = conn_w(c)->sh->buf_size - HS_HEADROOM - c->hs->len;
    ssize_t n = room ? recv(c->cfd, c->hs->buf + c->hs->len, room, 0) : 0;
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        if (!c->hs->len && !c->site_spoke) { /* nothing yet (a silent client): no buffer held */
            conn_buf_put(conn_w(c), c->hs->buf);
            c->hs->buf = NULL;
        }
        /* nothing more from the client: decide on what is here when the site spoke */
        if (c->site_spoke && c->state == CONN_HELLO &&
            (!c->gen->cfg->proxy_protocol_listener || c->hs->pp.done))
            hello_step(c);
        return;
    }
    if (n <= 0) {
        /* EOF, error, or a handshake that cannot fit: before our answer that is a failed
           handshake (front what we have); after it, the end. */
        size_t why = c->state == CONN_HELLO ? HS_REASON(hs_bad_hello) : HS_REASON(hs_bad_flight);
        conn_hs_failed(c, room ? HS_REASON(hs_closed) : why);
        if (c->state == CONN_HELLO && n == 0) {
            front(c, false);
        } else {
            conn_close(c, n == 0 ? END_EOF : END_RESET);
        }
        return;
    }
    conn_touch(c);
    if (c->state == CONN_HELLO) {
        c->hs->len += (uint32_t)n;
        if (c->gen->cfg->proxy_protocol_listener && !c->hs->pp.done && strip_pp(c) <= 0)
            return;
        hello_step(c);
        return;
    }
    size_t k = 0;
    if (faketls_reader_strip(&c->rd, c->hs->buf + c->hs->len, (size_t)n, &k) !=
        FAKETLS_REC_NEED_MORE) {
        flight_failed(c);
        return;
    }
    c->hs->len += (uint32_t)k;
    flight_step(c);
}

/* Upstream connected (DC or fronting host): start relaying; in HELLO (an early fronting
   connection), only watch it. */
static void upstream_ready(struct conn *c)
{
    struct conn_worker *w = conn_w(c);
    if (c->state == CONN_HELLO || c->state == CONN_CHECK) { /* the early connection: watch the
                                                                site, send nothing */
        c->early_up = true;
        c->uio.io.cb = on_early_up;
        if (loop_io_set(&w->loop, &c->uio.io, LOOP_READ) < 0)
            early_drop(c);
        early_push(c);
        return;
    }
    if (c->state == CONN_FRONT_CONNECT) {
        conn_enter(c, CONN_FRONT_RELAY); /* until it closes (stats_close) */
        stats_add(&w->stats, fronted, 1);
        stats_add(&w->stats, front_active, 1);
    } else {
        conn_enter(c, CONN_RELAY);
    }
    loop_timer_start(&w->loop, &c->tqs->park, &c->timer, on_timer);
    relay_start(c);
}

/* The connector's one report (upstream.c): a connected socket, or why there is none. */
static void on_upstream(struct upstream_req *r, int fd, int result)
{
    struct conn *c = (struct conn *)(void *)((char *)r->uio - offsetof(struct conn, uio));
    if (result == UPSTREAM_OK) {
        c->ufd = fd;
        if (c->state == CONN_DC_CONNECT)
            stats_dc_ok(dc_stats(c), conn_ms_since(c, c->last_io_ms));
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
            loop_timer_start(&conn_w(c)->loop, &c->tqs->done, &c->timer, on_timer);
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
    struct conn_worker *w = conn_w(c);
    struct conn_tqs *q = c->tqs;
    uint64_t quiet = conn_ms_since(c, c->last_io_ms);
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
        crypto_ctr_park(&c->p2dc);
        if (c->rx) {
            crypto_ctr_park(&c->rx->p2c);
            crypto_ctr_park(&c->rx->dc2p);
        }
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
    struct conn_worker *w = conn_w(c);
    if (!c->silent_done && (c->state == CONN_HELLO || c->state == CONN_FLIGHT ||
                            c->state == CONN_DISCARD || c->state == CONN_CHECK)) {
        /* the handshake deadline's first leg: a client still silent gets the early
           fronting connection; then the rest of the deadline */
        c->silent_done = true;
        if (c->state == CONN_HELLO && !c->hs->len)
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
        admit_cancel(c);
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
