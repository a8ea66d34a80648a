/*
 * upstream: the connector for the proxy's outgoing connections, to a DC or to the fronting
 * host.
 *
 * A connect request (struct upstream_req, embedded in the caller's object) is started for
 * a DC id or for the fronting host and ends with exactly one call of its done callback: a
 * connected socket, or the reason there is none. The connector never touches its caller's
 * state; it owns the request's socket and deadline until it reports, then the socket is the
 * caller's (libuv's connect request works the same way). A request that fails at once is
 * not reported through the callback: the start function returns the reason instead.
 *
 * Connects are non-blocking: the socket is registered in req->uio for WRITE, and the
 * request's own timer runs in the worker's connect queue ([network.timeout] tcp per DC
 * address, fronting per fronting address). A DC on this host (selfaddr_local) has answered
 * by the time connect() returns, so upstream_dc asks the socket once more and hands a
 * connected one back at once, without the epoll round (issue 30). A DC has an ordered list
 * of addresses (the [dcs] override for its id, else the built-in table, then sorted or
 * filtered by prefer-ip); a failed or timed-out address moves on to the next. With
 * [network] proxies, DC requests go through SOCKS5 upstreams instead, negotiated within the
 * same deadline (chain.h); fronting requests always go direct.
 *
 * Host names (the fronting host, configured or the ee secret's domain, and host names in
 * [dcs]) are resolved when a request first needs them, never at start-up, by short-lived
 * resolver threads (one per name being looked up, per worker), so a slow DNS server never
 * stalls the event loop. A request waits for the answer under the same deadline as a
 * connect (fronting, or the DC connect timeout). Answers are cached per worker: positive
 * ones for UPSTREAM_DNS_TTL_MS, negative ones for UPSTREAM_DNS_NEG_TTL_MS. With [network]
 * dns the resolver threads ask the shared DoH resolver (doh.h, conn_shared.doh) instead of
 * getaddrinfo, and answers are kept per worker for their own TTL (failures for
 * UPSTREAM_DNS_NEG_TTL_MS at most). IP literals, the normal case, are used as they are,
 * synchronously.
 *
 * Thread-safety: worker thread only.
 */
#ifndef TGPROXY_UPSTREAM_H
#define TGPROXY_UPSTREAM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "proxy/config/config.h"
#include "proxy/engine/loop.h"

struct chain;
struct conn_shared;
struct conn_tqs;
struct conn_worker;

#define UPSTREAM_DNS_TTL_MS     120000 /* a positive answer is reused this long */
#define UPSTREAM_DNS_NEG_TTL_MS 10000  /* a failed lookup is not retried for this long */
#define UPSTREAM_DNS_MAX_ADDRS  8      /* addresses kept per name */
#define UPSTREAM_NAMES_SPARE    64     /* host names reloads may add to a worker's cache */

struct addrinfo;
typedef int (*upstream_gai_fn)(const char *host, const char *port, const struct addrinfo *hints,
                               struct addrinfo **res);
/*
 * Tests only: the function resolver threads call instead of getaddrinfo (NULL restores
 * it). Results it returns are released with freeaddrinfo. Set it before server_start and
 * never while workers run (it is read by resolver threads without synchronisation).
 */
void upstream_set_resolver(upstream_gai_fn fn);

/*
 * The i-th address to try for DC id dc (0-based, in the order prefer-ip gives), from IP
 * literals and the built-in table only ([dcs] host names are skipped: the engine resolves
 * them through the worker's cache). Returns 0, or -ENOENT when there is no i-th address
 * (or the DC is unknown and fallback is off). No I/O.
 */
int upstream_dc_addr(const struct config *cfg, int32_t dc, unsigned i, struct sockaddr_storage *out,
                     socklen_t *len);

enum {
    UPSTREAM_CONNECTED = 1,    /* upstream_dc: connected inside the call */
    UPSTREAM_OK = 0,           /* connected */
    UPSTREAM_UNREACHABLE = -1, /* every address failed or timed out, or the lookup did */
    UPSTREAM_NO_ADDRESS = -2,  /* nothing to try: no target, or its names gave no address */
};
enum { UPSTREAM_EARLY = 1 }; /* upstream_front flag */

/* Why a failed request failed: the reason of its last attempt (req->why, valid in the done
   callback or after a failed start). Append only: metrics label DC failures with these. */
enum upstream_why {
    UPSTREAM_WHY_NONE = 0,
    UPSTREAM_WHY_REFUSED,          /* the target refused the TCP connect (ECONNREFUSED) */
    UPSTREAM_WHY_TIMEOUT,          /* the connect, lookup or SOCKS5 deadline passed */
    UPSTREAM_WHY_UNREACHABLE,      /* no route: ENETUNREACH, EHOSTUNREACH, ENETDOWN, ... */
    UPSTREAM_WHY_DNS,              /* the target's host names gave no address */
    UPSTREAM_WHY_NO_ADDRESS,       /* nothing to try: unknown DC, or prefer-ip left none */
    UPSTREAM_WHY_UPSTREAM_REFUSED, /* a SOCKS5 upstream answered CONNECT with a failure */
    UPSTREAM_WHY_UPSTREAM_ERROR,   /* a SOCKS5 upstream failed otherwise (auth, protocol, EOF) */
    UPSTREAM_WHY_ERROR,            /* anything else (no socket: EMFILE, ENOBUFS, ...) */
    UPSTREAM_WHY_COUNT
};
/* The reason for a connect that failed with errno err (positive). */
enum upstream_why upstream_why_errno(int err);

struct upstream_req;
/*
 * The one report of a request: result UPSTREAM_OK with the connected socket fd (registered
 * in r->uio->io for WRITE; the caller now owns both and sets r->uio->io.cb before the loop
 * runs again), else a negative result and fd -1. The request is idle again when this runs.
 */
typedef void (*upstream_done_fn)(struct upstream_req *r, int fd, int result);

/* The registration of a request's socket. The caller keeps it apart from the request
   (upstream_req_init ties them), because it goes on using it once connected: so a
   connection can give its request back when its relay starts (issue 30). */
struct upstream_io {
    struct loop_io io;        /* the socket being connected; after UPSTREAM_OK the caller's */
    struct upstream_req *req; /* the request it belongs to while the caller has one */
};

/* A connect request. upstream_req_init it once; the fields are the connector's, but cfg
   and tqs, which the caller sets once (upstream_req_bind) and every request keeps, and
   uio once a request reported UPSTREAM_OK. */
struct upstream_req {
    const struct config *cfg; /* the caller's configuration generation (DCs, fronting) */
    struct conn_tqs *tqs;     /* the caller's deadline queues (connect, front) */
    struct upstream_io *uio;  /* the caller's registration for the socket */
    struct loop_timer timer;  /* the deadline of the address or lookup being waited for */
    struct conn_worker *w;
    upstream_done_fn done;
    struct upstream_req *dns_next; /* in a name's wait list while resolving */
    uint32_t secret;               /* fronting: the secret the client tried (its domain) */
    int32_t dc;                    /* DC id */
    uint16_t dns_idx;              /* worker->names[] entry waited for */
    uint8_t phase;                 /* idle, resolving, connecting */
    uint8_t addr_i;                /* address being tried */
    bool front, early;
    uint8_t why;         /* enum upstream_why of the last failed attempt */
    struct chain *chain; /* DC through a SOCKS5 upstream: its negotiation (chain.c) */
};

/* An idle request, tied to the caller's registration uio (unregistered). */
void upstream_req_init(struct upstream_req *r, struct upstream_io *uio);
/* The caller's configuration generation and deadline queues, for every request of r. */
void upstream_req_bind(struct upstream_req *r, const struct config *cfg, struct conn_tqs *tqs);
static inline bool upstream_busy(const struct upstream_req *r)
{
    return r->phase != 0;
}

/*
 * Connect to DC dc; its [dcs] host names are looked up first when their answers are stale.
 * Returns 0 when under way (done reports later, exactly once, never from inside this
 * call); UPSTREAM_CONNECTED when an address of this host accepted inside the call (*fd is
 * the connected socket, registered nowhere: the caller's, as after UPSTREAM_OK but not in
 * r->uio->io; r is idle and done is never called); or UPSTREAM_UNREACHABLE /
 * UPSTREAM_NO_ADDRESS when it failed at once (done is never called). Addresses that
 * failed at once (a refusal from this host) move on to the next, as a later failure
 * does. *fd is -1 unless UPSTREAM_CONNECTED. r must be idle.
 */
int upstream_dc(struct upstream_req *r, struct conn_worker *w, int32_t dc, upstream_done_fn done,
                int *fd);
/*
 * Connect to the fronting host (configured, else the domain of secret, else of the first ee
 * secret), looking its name up if needed; same contract as upstream_dc. With
 * UPSTREAM_EARLY: only when the host does not depend on the secret and its address is at
 * hand (else UPSTREAM_NO_ADDRESS at once, starting a lookup for later connections), and
 * without a deadline (the caller bounds it) until upstream_promote; a failure is reported
 * without trying the next address.
 */
int upstream_front(struct upstream_req *r, struct conn_worker *w, uint32_t secret, unsigned flags,
                   upstream_done_fn done);
/* An early request still connecting becomes an ordinary one: its deadline starts now, and a
   failure moves on to the next address. No-op otherwise. */
void upstream_promote(struct upstream_req *r);
/* Abandon a busy request: its socket is closed, its deadline stopped, it leaves any wait
   list; done is not called. No-op for an idle request. */
void upstream_cancel(struct upstream_req *r);

/* A worker's host names (fronting host, [dcs] names), resolved off the loop by resolver
   threads, with their cached answers and waiting connections: upstream.c's own, embedded
   in struct conn_worker as w->upstream and written by upstream.c only. */
struct upstream_name;
struct upstream_worker {
    struct upstream_name *names;
    size_t nnames, names_cap;
    bool dc_names; /* some name is a [dcs] address (else a DC connect has none to wait for) */
    int dns_fd[2]; /* resolver threads -> worker: 4-byte name indexes */
    struct loop_io dns_io;
};

/* Per-worker resolver plumbing (pipe + loop registration) and the name cache for the
   worker's generation (w->gen), in w->upstream. 0 or -errno. */
int upstream_worker_init(struct conn_worker *w);
/* A worker moves to a new generation: cache room for its new host names (a warning when
   more than UPSTREAM_NAMES_SPARE were added over the process's life). */
void upstream_worker_adopt(struct conn_worker *w, const struct config *cfg);
/* Waits for a running lookup to finish, then releases the plumbing. NULL-safe. */
void upstream_worker_cleanup(struct conn_worker *w);

/* Start-up and reload: warn when cfg's fronting IP literal is this proxy's own listener
   (sh->self). Host names are checked when they are resolved (once per lookup). */
void upstream_check_self(const struct conn_shared *sh, const struct config *cfg);

/* Apply TCP_NODELAY and the configured keepalive to a socket (best effort). */
void upstream_tune(int fd, const struct config *cfg);

#endif
