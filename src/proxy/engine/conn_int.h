/*
 * conn_int: the engine's private view of a connection: its states, its struct and the
 * helpers the connection's room shares: conn.c (the state machine), worker.c (the worker's
 * life), admission.c (replay, limits, fleet), conn_pp.c (the PROXY-protocol step) and
 * relay.c. Every other file sees a connection through conn.h (a worker accepts, closes all
 * at shutdown).
 *
 * conn.c is the only file that changes c->state (conn_enter) and starts or stops c->timer;
 * relay.c moves bytes and reports what happened through conn_relay_event(); admission.c
 * returns verdicts (and the fleet's answer through conn_admitted); the connector
 * (upstream.c) sees only the struct upstream_req inside. Each of them keeps its own part of
 * the struct (c->adm, c->hs->pp, c->shape, c->hs->up) and writes no other. docs/proxy-engine.md
 * draws the state diagram with the function behind each transition.
 *
 * Debug check: in Debug and sanitizer builds (TGKIT_CHECKS) conn_check(c) aborts, naming
 * what failed, unless c is a live connection (its magic is set at accept and cleared at
 * close: a second close of the same connection stops at once) whose fields agree with its
 * state (the invariants below and in conn.c). It runs at every state change and at close;
 * in release builds it is nothing.
 *
 * A connection is a small state machine (brief 4.1):
 *
 *   HELLO      read the first bytes: a FakeTLS ClientHello (ee secrets) or a 64-byte obfs2
 *              header (dd / classic secrets); validate. Failure -> FRONT_CONNECT. Bytes no
 *              accepted handshake starts with fail at once; while undecided (or silent
 *              for CONN_SILENT_MS) an early fronting connection is opened and the
 *              undecided bytes passed on (conn.c, "Early fronting connection").
 *   FLIGHT     FakeTLS only, after our ServerHello: unwrap records until the 64-byte obfs2
 *              header is complete; failure -> close (brief 2.6).
 *   DC_CONNECT the connector (upstream.c) resolves the DC's [dcs] names if needed and
 *              tries its addresses in turn; its one report starts RELAY or closes.
 *   RELAY      both directions re-encrypted in place (relay.c); in middle-proxy mode
 *              (c->mp) there is no DC socket and mprelay.c moves the bytes instead.
 *   FRONT_CONNECT, FRONT_RELAY  domain fronting: the connector reaches the fronting host,
 *              then every byte read so far is replayed and the rest relayed byte for byte.
 *   DISCARD    no fronting target known: read and drop until the handshake deadline.
 *   CHECK      a hello (FakeTLS or bare obfs2) validated locally waits for the [fleet] check
 * (shared anti-replay and limits in Redis, bounded by [fleet] timeout); the client is not read
 * meanwhile. Its answer goes on as HELLO would (ServerHello, FLIGHT) or fronts (a replay or a limit
 * across the fleet).
 *
 * Memory: the fixed state below is a few hundred bytes; the keyed cipher contexts belong to
 * the worker thread and follow the active streams (crypto.h). Byte buffers come from the
 * worker's pool and are held only while bytes are in flight: during the handshake (the bytes
 * read so far, kept for fronting) and while a direction has unwritten bytes. An idle relayed
 * connection holds no buffer.
 *
 * Deadlines: one timer per connection, in the worker's queue for the current phase
 * (handshake, park, idle, fronted-done); the connect and lookup deadlines of the *_CONNECT
 * states are the connector's own timer, and the connection's is stopped meanwhile. The idle
 * deadline is checked lazily: any I/O stamps last_io_ms and an expiring timer re-arms itself if
 * there was activity. A relayed connection quiet for CONN_PARK_MS (or half the idle timeout, if
 * shorter) parks its cipher streams (crypto_ctr_park: the thread gets their contexts back at once;
 * the next byte re-keys them at their position), so an idle connection holds neither buffers nor
 * cipher heap.
 *
 * Ownership: a conn belongs to its worker (an object of worker->conn_slab: a walk of the
 * slab visits every open connection) and is freed by conn_close(). Thread-safety: a conn and its
 * worker are touched by the worker thread only.
 */
#ifndef TGPROXY_CONN_INT_H
#define TGPROXY_CONN_INT_H

#include "proxy/engine/admission.h"
#include "proxy/engine/conn.h"
#include "proxy/engine/conn_pp.h"
#include "proxy/engine/generation.h"
#include "proxy/engine/upstream.h"
#include "proxy/wire/crypto.h"

enum conn_state {
    CONN_HELLO,
    CONN_FLIGHT,
    CONN_DC_CONNECT, /* the connector looks the DC's names up and connects (upstream.c) */
    CONN_RELAY,
    CONN_FRONT_CONNECT, /* the connector looks the fronting host up and connects */
    CONN_FRONT_RELAY,
    CONN_DISCARD,
    CONN_CHECK, /* validated locally; the [fleet] check is in flight (fleet.h) */
};

/* One direction of a relay: bytes read from one socket waiting for the other. */
struct relay_dir {
    uint8_t *buf;        /* pool buffer while bytes are in flight, else NULL */
    uint32_t off;        /* unwritten bytes are buf[off..len) */
    uint32_t len : 28;   /* (a buffer is at most 1 MiB + slack: buffer-size's bound) */
    uint32_t eof : 1;    /* the source reached EOF */
    uint32_t shut : 1;   /* we sent FIN to the destination */
    uint32_t big : 1;    /* buf came from the bulk pool */
    uint32_t bulk : 1;   /* the last read filled its buffer: the next may take a bulk one */
};

enum { DIR_UP = 0, DIR_DOWN = 1 }; /* up: client -> upstream; down: upstream -> client */
/* Which socket of a connection was reset by its peer: a fronted connection passes the reset
   on to the other socket when it closes (SO_LINGER {1, 0}), as the site's own would. */
enum { CONN_RESET_NONE = 0, CONN_RESET_CLIENT = 1, CONN_RESET_UPSTREAM = 2 };

/* The second pair of ciphers, only without fast mode (the DC's stream decrypted and
   re-encrypted for the client): apart from struct conn, from the worker's recrypt_pool, so
   a fast-mode connection does not carry 160 bytes it never uses (issue 30). */
struct conn_recrypt {
    struct crypto_ctr p2c;  /* client leg: encrypt */
    struct crypto_ctr dc2p; /* DC leg: decrypt */
};

/* The doppelganger's per-connection state (shape.h), only for a FakeTLS relay while a
   profile is live: apart from struct conn, from the worker's shape_pool (relay.c takes it
   at the first shaped read and returns it with the buffers). */
struct conn_shape {
    struct shape_conn s;
    struct conn *c; /* the owner, for the tick's timer callback */
};

/* What only the handshake needs: from the worker's hs_pool at accept, given back when the
   relay starts (RELAY, FRONT_RELAY) or at close, so a relaying connection does not carry
   it (issue 30; docs/proxy-engine.md, "Bytes per parked connection"). */
struct conn_hs {
    struct upstream_req up; /* the connector (DC or fronting host); its socket is c->uio */
    uint8_t *buf;           /* handshake bytes read so far (pool buffer), else NULL */
    uint32_t len;
    uint32_t early_sent; /* bytes of buf already passed on to an early fronting connection */
    struct conn_pp pp;   /* conn_pp.c's: the listener's PROXY header */
    struct conn_admit_check chk; /* admission.c's: the [fleet] check in flight */
};

struct conn {
#if TGKIT_CHECKS
    uint32_t magic; /* CONN_MAGIC while live (conn_check); first, so that it stays readable
                       in a freed slab object (AddressSanitizer poisons all but its first 8
                       bytes, which hold the slab's free link: a second close fails here) */
#endif
    struct loop_io cli;     /* registration of the client socket */
    struct upstream_io uio; /* registration of ufd (the connector's while it connects) */
    struct conn_hs *hs;     /* until the relay starts, else NULL */
    int cfd, ufd;           /* client socket; DC or fronting socket (-1 = none) */
    struct loop_timer timer;
    /* the worker: its slab's owner (conn_w) */
    struct gen *gen;      /* the generation accepted under (a reference, dropped at close) */
    struct conn_tqs *tqs; /* its deadline queues (counted in tqs->users) */
    uint64_t start_ms;
    uint64_t bytes_up, bytes_down; /* in the counters as they are read (conn_count_bytes) */
    /* loop.now_ms's low 32 bits: only differences from now are taken (conn_ms_since), and
       they are bounded by the connection's timer (idle timeout at most 1 day) or only
       compared with a second (record sizing) */
    uint32_t last_io_ms;
    uint32_t recs_ms; /* when the last record toward a FakeTLS client was queued */
    uint32_t recs;    /* records toward the client since the last quiet second (sizing) */
    uint32_t secret; /* index into gen->cfg->secrets; UINT32_MAX = none yet */
    struct relay_dir dir[2];
    struct conn_shape *shape; /* toward a FakeTLS client, shaped; relay.c's (timer too) */
    struct crypto_ctr c2p;    /* client leg: decrypt */
    struct crypto_ctr p2dc;   /* DC leg: encrypt */
    struct conn_recrypt *rx;  /* without fast mode (from DC_CONNECT on) and in middle-proxy
                                 mode (mprelay.c: p2c only), else NULL */
    /* 16 bytes: the reader (10) and the small fields in its tail */
    struct faketls_reader rd; /* client records after the ServerHello */
    int16_t dc;
    uint8_t state; /* enum conn_state: conn_enter() only */
    uint8_t end;   /* enum conn_end */
    bool tls : 1, fast : 1;
    bool parked : 1; /* ciphers parked while quiet; timer in tq_idle */
    /* flags for fronting (issue 10) */
    uint8_t site_done : 1;   /* fronted: the site's FIN reached the client; timer in tq_done */
    uint8_t reset_by : 2;    /* CONN_RESET_*: the socket a reset came from (relay.c) */
    uint8_t early_tried : 1; /* HELLO: an early fronting connection was attempted (once) */
    uint8_t early_up : 1;    /* HELLO: ufd is an early fronting connection, connected */
    uint8_t silent_done : 1; /* HELLO: the deadline's first leg is over (timer in tq_hs_rest) */
    uint8_t site_spoke : 1;  /* HELLO: the early fronting connection's site sent bytes */
    struct conn_admit adm;   /* admission.c's: limits and fleet slots, the check in flight */
    struct mprelay *mp;      /* mprelay.c's: middle-proxy mode (no DC socket); else NULL */
};

/* c's worker: c is an object of its conn_slab, and the slab's header names the pool (one
   load from a line all connections of the slab share, instead of 8 bytes in each). */
static inline struct conn_worker *conn_w(const struct conn *c)
{
    return (struct conn_worker *)(void *)((char *)tg__slab_owner(c) -
                                          offsetof(struct conn_worker, conn_slab));
}

/* ---- the debug check (TGKIT_CHECKS: Debug and sanitizer builds) ---- */
#define CONN_MAGIC 0xc0ffee11u
#if TGKIT_CHECKS
void conn_check_fail(const struct conn *c, const char *what, const char *file, int line)
    __attribute__((noreturn));
#define CONN_CHECK_THAT(c, cond)                                                                   \
    ((cond) ? (void)0 : conn_check_fail((c), #cond, __FILE__, __LINE__))
static inline void conn_check(const struct conn *c)
{
    CONN_CHECK_THAT(c, c->magic == CONN_MAGIC); /* allocated and not yet closed */
    CONN_CHECK_THAT(c, c->gen && c->tqs && c->cfd >= 0);
    CONN_CHECK_THAT(c, c->state <= CONN_CHECK);
    CONN_CHECK_THAT(c, (!c->hs || !c->hs->buf) || c->state == CONN_HELLO ||
                           c->state == CONN_FLIGHT || c->state == CONN_CHECK);
    /* the handshake's state is given back when the relay starts */
    CONN_CHECK_THAT(c, !c->hs == (c->state == CONN_RELAY || c->state == CONN_FRONT_RELAY));
    CONN_CHECK_THAT(c, (c->state != CONN_RELAY && c->state != CONN_FRONT_RELAY) || c->ufd >= 0 ||
                           (c->mp && c->state == CONN_RELAY)); /* middle-proxy: no DC socket */
    CONN_CHECK_THAT(
        c, (c->state != CONN_DC_CONNECT && c->state != CONN_RELAY && c->state != CONN_FLIGHT) ||
               c->secret < c->gen->cfg->nsecrets);
    CONN_CHECK_THAT(c, !c->early_up || c->ufd >= 0);
    CONN_CHECK_THAT(c, (c->state != CONN_DC_CONNECT && c->state != CONN_RELAY) || c->fast ||
                           c->rx); /* without fast mode, or middle-proxy mode: its ciphers */
}
static inline void conn_mark_live(struct conn *c)
{
    c->magic = CONN_MAGIC;
}
static inline void conn_mark_dead(struct conn *c)
{
    c->magic = 0;
}
#else
#define conn_check(c)     ((void)0)
#define conn_mark_live(c) ((void)0)
#define conn_mark_dead(c) ((void)0)
#endif

/* ---- shared by the connection's room ---- */

/* Index of a STATS_HS_LIST field, for conn_hs_failed. */
#define HS_REASON(field) (offsetof(struct stats, field) / sizeof(uint64_t))
/* A failed client handshake: counted in the total and under its one reason. */
void conn_hs_failed(struct conn *c, size_t reason);
/* A debug line about a handshake (rate-limited: the network can trigger it). */
void conn_hs_debug(struct conn *c, const char *what, const char *why);
/* Release the sets of deadline queues no connection uses any more (but the current one).
   Never from a timer callback: the loop may be walking its queues (worker.c). */
void conn_tqs_sweep(struct conn_worker *w);

/* Log the end line, release buffers, ciphers and sockets, and free c. */
void conn_close(struct conn *c, enum conn_end why);

/* Start the worker's pool decay tick (worker.c) unless it runs: called after anything went
   back to a pool, so what a burst left cached is given back once no one takes it. */
void conn_worker_pools_arm(struct conn_worker *w);
static inline void conn_pools_note(struct conn_worker *w)
{
    if (!loop_timer_active(&w->pools_tick))
        conn_worker_pools_arm(w);
}

/* Pool buffers, counted in the worker's stats (bufs gauge and its peak). */
static inline void *conn_buf_get(struct conn_worker *w)
{
    void *b = tg__pool_get(&w->pool);
    if (b) {
        stats_add(&w->stats, bufs, 1);
        if (w->stats.bufs > w->stats.bufs_peak)
            stats_add(&w->stats, bufs_peak, 1);
    }
    return b;
}
static inline void conn_buf_put(struct conn_worker *w, void *b)
{
    if (b) {
        tg__pool_put(&w->pool, b);
        stats_sub(&w->stats, bufs, 1);
        conn_pools_note(w);
    }
}
/* A bulk buffer (sh->big_size bytes) if the worker is under its budget, else NULL. */
static inline void *conn_big_get(struct conn_worker *w)
{
    if (!w->sh->big_size || w->big_in_use >= w->sh->big_max)
        return NULL;
    void *b = tg__pool_get(&w->big_pool);
    if (b) {
        if (++w->big_in_use > w->stats.bulk_peak)
            stats_add(&w->stats, bulk_peak, 1);
        stats_add(&w->stats, bulk, 1);
        stats_add(&w->stats, bufs, 1);
        if (w->stats.bufs > w->stats.bufs_peak)
            stats_add(&w->stats, bufs_peak, 1);
    }
    return b;
}
/* Give back a direction's buffer to the pool it came from and empty the direction. */
static inline void conn_dir_put(struct conn_worker *w, struct relay_dir *r)
{
    if (r->buf && r->big) {
        tg__pool_put(&w->big_pool, r->buf);
        w->big_in_use--;
        stats_sub(&w->stats, bufs, 1);
        stats_sub(&w->stats, bulk, 1);
        conn_pools_note(w);
    } else {
        conn_buf_put(w, r->buf);
    }
    r->buf = NULL;
    r->big = false;
    r->off = r->len = 0;
}

/* Record I/O activity now (resets the idle deadline lazily). */
static inline void conn_touch(struct conn *c)
{
    c->last_io_ms = (uint32_t)conn_w(c)->loop.now_ms;
}
/* Milliseconds since a 32-bit stamp of loop.now_ms (right for up to 49 days). */
static inline uint32_t conn_ms_since(const struct conn *c, uint32_t stamp)
{
    return (uint32_t)conn_w(c)->loop.now_ms - stamp;
}

/* n bytes read from direction d's source: the connection's totals (its end line, quotas)
   and at once the worker's counters, with its secret's for an authenticated connection
   (DC_CONNECT, RELAY) or the fronted ones (only a fronted connection relays before it
   authenticates). Counting per read keeps no "already counted" copy in the connection. */
static inline void conn_count_bytes(struct conn *c, int d, uint64_t n)
{
    struct conn_worker *w = conn_w(c);
    bool authed = c->state == CONN_DC_CONNECT || c->state == CONN_RELAY;
    uint32_t slot = authed && c->secret < c->gen->cfg->nsecrets ? c->gen->slot[c->secret]
                                                                : GEN_NO_SLOT;
    if (d == DIR_UP) {
        c->bytes_up += n;
        stats_add(&w->stats, bytes_up, n);
        if (slot < w->nsec)
            stats_add(&w->sec[slot], bytes_up, n);
        else if (!authed)
            stats_add(&w->stats, front_bytes_up, n);
    } else {
        c->bytes_down += n;
        stats_add(&w->stats, bytes_down, n);
        if (slot < w->nsec)
            stats_add(&w->sec[slot], bytes_down, n);
        else if (!authed)
            stats_add(&w->stats, front_bytes_down, n);
    }
}
/* What the relay reports (relay.c -> conn.c); conn.c decides what it means. */
enum relay_event {
    RELAY_EV_DONE,     /* both directions finished: EOF each way, everything written */
    RELAY_EV_RESET,    /* a socket error, reset or hang-up that the relay cannot go on with */
    RELAY_EV_NOMEM,    /* no buffer for a read */
    RELAY_EV_PROTO,    /* a bad TLS record or an alert from the client */
    RELAY_EV_SITE_FIN, /* fronted: the site's FIN was passed to the client; relaying goes on */
};
/* The relay's report. After any event but RELAY_EV_SITE_FIN, c is gone. */
void conn_relay_event(struct conn *c, enum relay_event ev);
#endif
