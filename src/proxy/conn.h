/*
 * conn: one client connection of tgproxy and the worker thread that owns it.
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
 *   DC_CONNECT non-blocking connect to the DC's addresses in turn (upstream.c); first
 *              DC_RESOLVE while a [dcs] host name is being resolved.
 *   RELAY      both directions re-encrypted in place (relay.c).
 *   FRONT_*    domain fronting: connect to the fronting host, replay every byte read so far,
 *              then relay byte for byte.
 *   DISCARD    no fronting target known: read and drop until the handshake deadline.
 *
 * Memory: the fixed state below is a few hundred bytes; the keyed cipher contexts belong to
 * the worker thread and follow the active streams (crypto.h). Byte buffers come from the worker's
 * pool and are held only while bytes are in flight: during the handshake (the bytes read so far,
 * kept for fronting) and while a direction has unwritten bytes. An idle relayed connection holds no
 * buffer.
 *
 * Deadlines: one timer per connection, in the worker's queue for the current phase
 * (handshake, DC connect, fronting connect, idle). The idle deadline is checked lazily: any
 * I/O stamps last_io_ms and an expiring timer re-arms itself if there was activity. A
 * relayed connection quiet for CONN_PARK_MS (or half the idle timeout, if shorter) parks
 * its cipher streams (crypto_ctr_park: the thread gets their contexts back at once; the
 * next byte re-keys them at their position), so an idle connection holds neither buffers
 * nor cipher heap.
 *
 * Ownership: a conn belongs to its worker (listed in worker->conns) and is freed by
 * conn_close(). Thread-safety: a conn and its worker are touched by the worker thread only.
 */
#ifndef TGPROXY_CONN_H
#define TGPROXY_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>

#include "core/log.h"
#include "core/pool.h"
#include "proxy/config.h"
#include "proxy/crypto.h"
#include "proxy/faketls.h"
#include "proxy/loop.h"
#include "proxy/obfs2.h"
#include "proxy/proxyproto.h"
#include "proxy/selfaddr.h"
#include "proxy/stats.h"
#include "proxy/upstream.h"

struct antireplay;
struct upstream_name;

/* State shared by every worker; read-only once the workers run (except the atomics). */
struct conn_shared {
    const struct config *cfg;
    struct obfs2_candidate *plain; /* dd / classic secrets for plain obfs2 */
    size_t *plain_idx;             /* plain[i] is cfg->secrets[plain_idx[i]] */
    size_t nplain;
    struct faketls_key *ee; /* ee secrets for FakeTLS */
    size_t *ee_idx;         /* ee[i] is cfg->secrets[ee_idx[i]] */
    size_t nee;
    struct antireplay *replay; /* NULL = anti-replay disabled */
    struct selfaddr self;      /* endpoints of our own listeners: never fronted to */
    bool fast_mode;
    bool dyn_records;     /* dynamic record sizing toward FakeTLS clients */
    uint32_t concurrency; /* limit on active connections, all workers */
    uint32_t active;      /* atomic: active connections, all workers */
    size_t buf_size;      /* pool block size */
    size_t big_size;      /* bulk block size; 0 = bulk buffers off (buf_size is large) */
    uint32_t big_max;     /* bulk blocks one worker may hold at once */
};

struct conn;

/* One worker thread: its loop, pool, counters, deadline queues and connections. */
struct conn_worker {
    struct loop loop;
    tg__pool pool;
    tg__pool big_pool;   /* bulk buffers (relay.c): bigger reads and sends for busy flows */
    uint32_t big_in_use; /* of at most sh->big_max */
    struct stats stats;
    struct loop_tq tq_handshake, tq_connect, tq_front;
    struct loop_tq tq_silent, tq_hs_rest; /* the handshake deadline's two legs */
    struct loop_tq tq_park;               /* quiet time after which a relay parks its ciphers */
    struct loop_tq tq_idle;               /* the rest of the idle timeout, once parked */
    struct loop_tq tq_done; /* fronted: the site closed; the client's quiet time left */
    uint64_t idle_ms;       /* [network.timeout] idle */
    struct conn *conns;     /* every open connection, for shutdown */
    struct conn_shared *sh; /* shared; only sh->active is written */
    tg__ratelimit rl;       /* debug lines the network can trigger */
    tg__pool conn_pool;     /* struct conn storage */
    uint8_t *scratch;       /* FAKETLS_SERVER_HELLO_MAX bytes for building answers */
    /* host names (fronting host, [dcs] names) resolved off the loop by resolver threads,
       with their cached answers and waiting connections (upstream.c) */
    struct upstream_name *names;
    size_t nnames;
    int dns_fd[2]; /* resolver threads -> worker: 4-byte name indexes */
    struct loop_io dns_io;
};

#define CONN_PARK_MS 10000 /* quiet time before an idle relay hands back its cipher contexts */
/* A fronted connection whose site closed (FIN) is closed once the client is quiet this long
   (or the handshake or idle timeout, if shorter): bytes the client sends meanwhile still reach the
   site, which answers them as it would directly (a reset if it closed for good), and after it the
   client's socket is closed as the site's was. Lingering web servers keep reading about as
   long (nginx lingering_timeout is 5 s). */
#define CONN_FRONT_DONE_MS 5000
/* A client silent this long after accept (or a quarter of the handshake timeout, if
   shorter) gets an early fronting connection, so a silent prober meets the site's own
   timers nearly as soon as a direct one; a genuine client's hello follows its TCP
   handshake at once, so it rarely costs one. */
#define CONN_SILENT_MS 500

enum conn_state {
    CONN_HELLO,
    CONN_FLIGHT,
    CONN_DC_CONNECT, /* the connector looks the DC's names up and connects (upstream.c) */
    CONN_RELAY,
    CONN_FRONT_CONNECT, /* the connector looks the fronting host up and connects */
    CONN_FRONT_RELAY,
    CONN_DISCARD,
};

enum conn_end {
    END_NONE,
    END_EOF,        /* both sides finished */
    END_RESET,      /* a socket error or reset */
    END_HS_TIMEOUT, /* handshake deadline (nothing to front) */
    END_HS_BAD,     /* bad client flight after the ServerHello */
    END_IDLE,
    END_DC_FAIL, /* every DC address failed or the DC is unknown */
    END_FRONT_FAIL,
    END_NOMEM,
    END_SHUTDOWN,
    END_PROTO, /* bad TLS record or alert from the client */
    END_DNS,   /* the DC's host names gave no address (failed or timed-out lookup) */
};

/* One direction of a relay: bytes read from one socket waiting for the other. */
struct relay_dir {
    uint8_t *buf;      /* pool buffer while bytes are in flight, else NULL */
    uint32_t off, len; /* unwritten bytes are buf[off..len) */
    bool eof;          /* the source reached EOF */
    bool shut;         /* we sent FIN to the destination */
    bool big;          /* buf came from the bulk pool */
    bool bulk;         /* the last read filled its buffer: the next may take a bulk one */
};

enum { DIR_UP = 0, DIR_DOWN = 1 }; /* up: client -> upstream; down: upstream -> client */
/* Which socket of a connection was reset by its peer: a fronted connection passes the reset
   on to the other socket when it closes (SO_LINGER {1, 0}), as the site's own would. */
enum { CONN_RESET_NONE = 0, CONN_RESET_CLIENT = 1, CONN_RESET_UPSTREAM = 2 };

struct conn {
    struct loop_io cli;     /* registration of the client socket */
    struct upstream_req up; /* the upstream connect; then up.io registers ufd */
    int cfd, ufd;           /* client socket; DC or fronting socket (-1 = none) */
    struct loop_timer timer;
    struct conn_worker *w;
    struct conn *prev, *next;
    uint64_t start_ms, last_io_ms;
    uint64_t bytes_up, bytes_down;
    uint64_t recs_ms; /* when the last record toward a FakeTLS client was queued */
    uint32_t recs;    /* records toward the client since the last quiet second (sizing) */
    struct relay_dir dir[2];
    struct crypto_ctr c2p, p2c;   /* client leg: decrypt, encrypt (p2c unused in fast mode) */
    struct crypto_ctr p2dc, dc2p; /* DC leg: encrypt, decrypt (dc2p unused in fast mode) */
    struct faketls_reader rd;     /* client records after the ServerHello */
    uint8_t *hs;                  /* handshake bytes read so far (pool buffer) */
    uint32_t hs_len;
    uint32_t early_sent; /* bytes of hs already passed on to an early fronting connection */
    uint32_t secret;     /* index into cfg->secrets; UINT32_MAX = none yet */
    int16_t dc;
    uint8_t state; /* enum conn_state */
    uint8_t end;   /* enum conn_end */
    bool tls, fast;
    bool pp_done;              /* listener PROXY header consumed (if configured) */
    struct proxyproto_addr pp; /* what that header said (family 0 = use the socket) */
    bool parked;               /* ciphers parked while quiet; timer in tq_idle */
    /* one byte of flags for fronting (issue 10) */
    uint8_t site_done : 1;   /* fronted: the site's FIN reached the client; timer in tq_done */
    uint8_t reset_by : 2;    /* CONN_RESET_*: the socket a reset came from (relay.c) */
    uint8_t early_tried : 1; /* HELLO: an early fronting connection was attempted (once) */
    uint8_t early_up : 1;    /* HELLO: ufd is an early fronting connection, connected */
    uint8_t silent_done : 1; /* HELLO: the deadline's first leg is over (timer in tq_hs_rest) */
};

/* Worker set-up on the thread that will run it (the pool checks its owner). 0 or -errno. */
int conn_worker_init(struct conn_worker *w, struct conn_shared *sh);
/* Close every connection (END_SHUTDOWN) and release the worker. NULL-safe. */
void conn_worker_cleanup(struct conn_worker *w);

/* Take over an accepted, non-blocking client socket. On failure the fd is closed. */
void conn_accept(struct conn_worker *w, int fd);
/* Log the end line, release buffers, ciphers and sockets, and free c. */
void conn_close(struct conn *c, enum conn_end why);
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
    c->last_io_ms = c->w->loop.now_ms;
}
const char *conn_end_name(enum conn_end e);

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
