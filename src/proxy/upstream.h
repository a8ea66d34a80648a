/*
 * upstream: the proxy's outgoing connections, to a DC or to the fronting host.
 *
 * Connects are non-blocking: the socket is registered for WRITE and the connection's timer
 * runs in the connect queue (DC: [network.timeout] tcp per address; fronting: fronting).
 * A DC has an ordered list of addresses (the [dcs] override for its id, else the built-in
 * table, then sorted or filtered by prefer-ip); a failed or timed-out address moves on to the
 * next, and when none is left the connection ends with END_DC_FAIL.
 *
 * Host names (the fronting host, configured or the ee secret's domain, and host names in
 * [dcs]) are resolved when a connection first needs them, never at start-up, by short-lived
 * resolver threads (one per name being looked up, per worker), so a slow DNS server never
 * stalls the event loop. Connections wait for the answer in FRONT_RESOLVE (bounded by the
 * fronting timeout) or DC_RESOLVE (bounded by the DC connect timeout). Answers are cached
 * per worker: positive ones for UPSTREAM_DNS_TTL_MS, negative ones for
 * UPSTREAM_DNS_NEG_TTL_MS. A DC whose names give no address (and that has no IP literal)
 * ends the connection with END_DNS ("dns") and a warning naming the DC id and the host.
 * IP literals, the normal case, are used as they are, synchronously.
 *
 * Thread-safety: worker thread only.
 */
#ifndef TGPROXY_UPSTREAM_H
#define TGPROXY_UPSTREAM_H

#include <stdint.h>
#include <sys/socket.h>

#include "proxy/conn.h"

#define UPSTREAM_DNS_TTL_MS     120000 /* a positive answer is reused this long */
#define UPSTREAM_DNS_NEG_TTL_MS 10000  /* a failed lookup is not retried for this long */
#define UPSTREAM_DNS_MAX_ADDRS  8      /* addresses kept per name */

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

/* Start connecting c to its DC from address c->addr_i on; with addr_i 0 it may first wait
   for host names (DC_RESOLVE). Ends c on total failure. */
void upstream_connect_dc(struct conn *c);
/* Start connecting c to the fronting host. Returns -ENOENT if no target is known (the
   caller then discards), 0 when a connect or a lookup is under way (or c already closed on
   failure). */
int upstream_connect_front(struct conn *c);
/* While c is still in HELLO: open a connection to the fronting host now, without waiting
   for a lookup and without a connect timer (the handshake deadline bounds it); the result
   comes through conn_upstream_ready, and a failure only drops the socket. 0 when a connect
   is under way, -ENOENT when no address is at hand or the host depends on the secret. */
int upstream_connect_front_early(struct conn *c);
/* c is going away: if it waits for a lookup (FRONT_RESOLVE, DC_RESOLVE), take it off the
   wait list. No-op otherwise. */
void upstream_forget(struct conn *c);
/* Per-worker resolver plumbing (pipe + loop registration). 0 or -errno. */
int upstream_worker_init(struct conn_worker *w);
/* Waits for a running lookup to finish, then releases the plumbing. NULL-safe. */
void upstream_worker_cleanup(struct conn_worker *w);
/* Connect deadline passed: try the next address (DC) or end the connection. */
void upstream_timeout(struct conn *c);

/* Start-up: warn when the configured fronting IP literal is this proxy's own listener
   (sh->self). Host names are checked when they are resolved (once per lookup). */
void upstream_check_self(const struct conn_shared *sh);

/* Apply TCP_NODELAY and the configured keepalive to a socket (best effort). */
void upstream_tune(int fd, const struct config *cfg);

#endif
