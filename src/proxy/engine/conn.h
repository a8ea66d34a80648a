/*
 * conn: the connections of one worker thread, as the rest of tgproxy sees them.
 *
 * server.c creates one struct conn_worker per thread (conn_worker_init), hands it every
 * accepted client socket (conn_accept) and, at shutdown, closes them all
 * (conn_worker_cleanup). A connection itself is private to the engine (conn_int.h): its
 * state machine is in conn.c, its relay in relay.c, its upstream connects in upstream.c.
 * The worker's timer queues (one duration each) and pools are shared by its connections.
 *
 * Ownership: caller-owned worker struct (init/cleanup); connections belong to their worker.
 * Reloads: each connection holds the configuration generation (generation.h) and the deadline
 * queues (struct conn_tqs) it was accepted with until it ends; a worker moves to a newly
 * published generation at its next accept.
 *
 * Thread-safety: a worker and its connections are touched by the worker thread only; the
 * shared struct is read-only once workers run (except its atomic active count and the
 * current generation, swapped under its lock).
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
#include "core/slab.h"
#include "proxy/config/config.h"
#include "proxy/engine/admission.h"
#include "proxy/engine/chain.h"
#include "proxy/engine/generation.h"
#include "proxy/engine/loop.h"
#include "proxy/engine/keyscan.h"
#include "proxy/engine/selfaddr.h"
#include "proxy/engine/shape.h"
#include "proxy/engine/stats.h"
#include "proxy/engine/tlsanswer.h"
#include "proxy/engine/upstream.h"
#include "proxy/services/acl.h"
#include "proxy/wire/faketls.h"
#include "proxy/wire/obfs2.h"

struct acl;
struct antireplay;
struct fleet;
struct fleet_worker;
struct midproxy_worker;
struct mp_pool;
struct mpsource;
struct limits;
struct upstream_name;
struct doh;

/* State shared by every worker; read-only once the workers run, except the atomics and the
   current generation (gen, under gen_mu, announced by gen_seq). */
struct conn_shared {
    const struct config *cfg; /* the config the server started with: what a reload cannot
                                 change (listeners, workers, buffers, anti-replay, stats) */
    struct gen *gen;          /* current generation, for new connections; under gen_mu */
    uint64_t gen_seq;         /* atomic: gen->seq, read without the lock at each accept */
    pthread_mutex_t gen_mu;
    struct gen_labels labels;  /* every secret label seen: per-secret counter slots */
    struct antireplay *replay; /* NULL = anti-replay disabled */
    struct fleet *fleet;       /* [fleet]: Redis shared with other processes; NULL = off */
    struct selfaddr self;      /* endpoints of our own listeners: never fronted to */
    struct acl *acl;           /* [defense.*list] (server.c owns it), or NULL */
    struct doh *doh;           /* [network] dns at start: names resolved by DoH; NULL =
                                  getaddrinfo (a reload keeps it: a restart changes it) */
    uint32_t concurrency;      /* limit on active connections, all workers */
    uint32_t active;           /* atomic: active connections, all workers */
    size_t buf_size;           /* pool block size */
    size_t big_size;           /* bulk block size; 0 = bulk buffers off (buf_size is large) */
    uint32_t big_max;          /* bulk blocks one worker may hold at once */
    /* [defense.doppelganger]: the live profile (doppel_fetch.h); NULL = no shaping */
    struct doppel_live *doppel;
    /* [defense.tls-front]: the learned answers (services/tlsfront.h); NULL = today's answer */
    struct tlsfront *tlsfront;
    struct keyscan_hints *hints; /* who authenticated with which key (keyscan.h) */
    struct seen *seen;           /* per label slot: recent client addresses (seen.h) */
    struct mpsource *mpsrc;      /* [middle-proxy] documents (server.c owns it), or NULL */
    /* GEN_LABELS_MAX entries, atomic each: a connection of label slot i whose generation
       is older than revoked[i] is closed at its worker's next conn_worker_revoke_sweep */
    uint64_t *revoked;
};

/* A worker's deadline queues for one set of [network.timeout] values. A connection keeps the
   set it was accepted with (its generation's timeouts); a reload that changes them gives the
   worker a new set, and an old one is released when its last connection ends. */
struct conn_tqs {
    struct loop_tq handshake, connect, front;
    struct loop_tq silent, hs_rest; /* the handshake deadline's two legs */
    struct loop_tq park;            /* quiet time after which a relay parks its ciphers */
    struct loop_tq idle;            /* the rest of the idle timeout, once parked */
    struct loop_tq done;            /* fronted: the site closed; the client's quiet time left */
    uint64_t idle_ms;               /* [network.timeout] idle */
    uint32_t tcp_ms, handshake_ms, fronting_ms; /* what the set was made for */
    uint32_t users;                             /* connections holding it */
    struct conn_tqs *next;                      /* the worker's list of sets */
};

struct conn;

/* One worker thread: its loop, pool, counters, deadline queues and connections. */
struct conn_worker {
    struct loop loop;
    tg__pool pool;
    tg__pool big_pool;   /* bulk buffers (relay.c): bigger reads and sends for busy flows */
    uint32_t big_in_use; /* of at most sh->big_max */
    struct stats stats;
    struct stats_secret *sec; /* per-secret counters by label slot (generation.h;
                                 conn_worker_attach) */
    size_t nsec;
    struct conn_tqs *tqs;                /* the set new connections get (current generation) */
    struct conn_tqs *tqs_all;            /* every set still in use, tqs among them */
    struct stats_dc dcs[STATS_DC_SLOTS]; /* DC connect times and failures (stats.h) */
    struct admit_worker admit;           /* admission.c's: the quota tick (limits.h) */
    struct gen *gen;                     /* the generation new connections get (a reference) */
    uint64_t gen_seq;                    /* gen->seq */
    struct conn_shared *sh;              /* shared; only sh->active is written */
    tg__ratelimit rl;                    /* debug lines the network can trigger */
    tg__slab conn_slab; /* struct conn storage (dense, apart from buffers); walked for every
                           open connection (revocation, quotas, shutdown) */
    tg__pool hs_pool;                    /* struct conn_hs: connections in their handshake */
    tg__pool recrypt_pool;               /* struct conn_recrypt: connections without fast mode */
    tg__pool shape_pool;                 /* struct conn_shape: shaped FakeTLS relays */
    struct loop_tq pools_tq;             /* CONN_POOL_DECAY_MS */
    struct loop_timer pools_tick;        /* in pools_tq while a pool caches above its floor */
    size_t pools_freed;                  /* bytes decayed since the last malloc_trim */
    uint8_t *scratch;                    /* TLSANSWER_SCRATCH bytes for building answers */
    /* each file's own per-worker state, written by that file only */
    struct upstream_worker upstream; /* host names and their lookups (upstream.c) */
    struct chain_worker chain;       /* round-robin over [network] proxies (chain.c) */
    struct acl_worker acl;           /* this worker's reader slot in sh->acl (acl.c) */
    struct shape_worker shape;       /* doppelganger shaper (shape.c) */
    struct tlsanswer_worker tlsa;    /* the learned answers' set in use (tlsanswer.c) */
    struct fleet_worker *fleet;      /* this worker's [fleet] Redis connection; NULL = off */
    struct midproxy_worker *mp;      /* middle-proxy pool (midproxy.h); NULL = no [middle-proxy] */
    struct mp_pool *mp_old;          /* retired pools whose clients still run (worker.c) */
    struct keyscan_budget scan;      /* HMAC bytes hellos may still scan (keyscan.h) */
};

#define CONN_QUOTA_FOLD_MS 1000  /* how often workers charge relayed bytes to quotas */
#define CONN_PARK_MS       10000 /* quiet time before an idle relay hands back its cipher contexts */
/* How often a worker gives back the pool entries no connection took meanwhile (worker.c):
   a burst's buffers and handshake state go back to the system within two periods. */
#define CONN_POOL_DECAY_MS 1000
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
    END_QUOTA, /* the secret's [limits] quota was used up */
    END_ACL,   /* the PROXY header's client address is refused by [defense.*list] */
    END_REVOKED, /* the secret was revoked (conn_shared_revoke: disabled, rotated, deleted) */
    END_COUNT  /* not a reason: one past the last (stats.h STATS_END_LIST follows the enum) */
};

/*
 * The shared state for cfg (borrowed: it must outlive sh): generation 1 (generation.h), the
 * anti-replay cache, buffer sizes. sh->self is left empty (the server fills it once bound).
 * 0 or -ENOMEM; on failure, and when done, conn_shared_cleanup (NULL-safe).
 */
int conn_shared_init(struct conn_shared *sh, const struct config *cfg);
void conn_shared_cleanup(struct conn_shared *sh);
/* Revoke label slot `slot`: connections of that label accepted under a generation older
   than below_seq are to close (END_REVOKED). The caller then has every worker run
   conn_worker_revoke_sweep on its own thread. Any thread. */
void conn_shared_revoke(struct conn_shared *sh, uint32_t slot, uint64_t below_seq);
/* On the worker's thread: close this worker's revoked connections. */
void conn_worker_revoke_sweep(struct conn_worker *w);

/*
 * Build the next generation from *cfg (moved into it on success; *cfg is left empty) and
 * make it the one new connections get: each worker takes it at its next accept, connections
 * already open keep theirs. Controlling thread only. 0 or -ENOMEM (nothing changed, *cfg
 * still the caller's).
 */
int conn_shared_publish(struct conn_shared *sh, struct config *cfg);
/* The current generation with a reference the caller drops with gen_unref. Any thread. */
struct gen *conn_shared_gen(struct conn_shared *sh);

/* Worker set-up on the thread that will run it (the pool checks its owner). 0 or -errno. */
int conn_worker_init(struct conn_worker *w, struct conn_shared *sh);
/* The server's worker number index (its reader slot in the access lists) and its per-secret
   counters sec[0..nsec). Before the worker runs. */
void conn_worker_attach(struct conn_worker *w, size_t index, struct stats_secret *sec, size_t nsec);
/* Close every connection (END_SHUTDOWN) and release the worker. NULL-safe. */
void conn_worker_cleanup(struct conn_worker *w);

/* Move w to the generation a reload published, if any (conn_accept does it first; the
   server calls it before its own checks of w->gen at accept). Worker thread. */
void conn_worker_refresh(struct conn_worker *w);
/* Rebuild the middle-proxy pool when the documents (sh->mpsrc) or the generation's
   [middle-proxy] settings changed: new clients go to the new pool, the old one is retired and
   keeps its clients (midproxy.h). The server calls it when the documents change. Worker
   thread. */
void conn_worker_mp_sync(struct conn_worker *w);
/* Take over an accepted, non-blocking client socket. On failure the fd is closed. */
void conn_accept(struct conn_worker *w, int fd);
/* The same with the peer address accept returned (kept, so the handshake need not ask the
   socket for it: two system calls fewer); NULL: unknown. */
void conn_accept_peer(struct conn_worker *w, int fd, const struct sockaddr *peer);
/* The name of an end reason as logged ("eof", "handshake-timeout", ...), static. */
const char *conn_end_name(enum conn_end e);

#endif
