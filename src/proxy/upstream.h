/*
 * upstream: the proxy's outgoing connections, to a DC or to the fronting host.
 *
 * Connects are non-blocking: the socket is registered for WRITE and the connection's timer
 * runs in the connect queue (DC: [network.timeout] tcp per address; fronting: fronting).
 * A DC has an ordered list of addresses (the [dcs] override for its id, else the built-in
 * table, then sorted or filtered by prefer-ip); a failed or timed-out address moves on to the
 * next, and when none is left the connection ends with END_DC_FAIL.
 *
 * The fronting host's name (configured, or the ee secret's domain) is resolved when a
 * connection first needs it, never at start-up, by a short-lived resolver thread per worker
 * so a slow DNS server never stalls the event loop; connections wait for the answer in
 * FRONT_RESOLVE (bounded by the fronting timeout) and the answer, positive or negative, is
 * cached per worker for UPSTREAM_DNS_TTL_MS. Host names in [dcs] are still resolved with a
 * blocking getaddrinfo on the worker (IP literals, the normal case, never block).
 *
 * Thread-safety: worker thread only.
 */
#ifndef TGPROXY_UPSTREAM_H
#define TGPROXY_UPSTREAM_H

#include <stdint.h>
#include <sys/socket.h>

#include "proxy/conn.h"

#define UPSTREAM_DNS_TTL_MS 120000

/*
 * The i-th address to try for DC id dc (0-based, in the order prefer-ip gives).
 * Returns 0, -ENOENT when there is no i-th address (or the DC is unknown and fallback is
 * off), or a getaddrinfo failure as -EHOSTUNREACH.
 */
int upstream_dc_addr(const struct config *cfg, int32_t dc, unsigned i, struct sockaddr_storage *out,
                     socklen_t *len);

/* Start connecting c to its DC from address c->addr_i on; ends c on total failure. */
void upstream_connect_dc(struct conn *c);
/* Start connecting c to the fronting host. Returns -ENOENT if no target is known (the
   caller then discards), 0 when a connect or a lookup is under way (or c already closed on
   failure). */
int upstream_connect_front(struct conn *c);
/* A FRONT_RESOLVE connection is going away: take it off the wait list. */
void upstream_forget(struct conn *c);
/* Per-worker resolver plumbing (pipe + loop registration). 0 or -errno. */
int upstream_worker_init(struct conn_worker *w);
/* Waits for a running lookup to finish, then releases the plumbing. NULL-safe. */
void upstream_worker_cleanup(struct conn_worker *w);
/* Connect deadline passed: try the next address (DC) or end the connection. */
void upstream_timeout(struct conn *c);

/* Apply TCP_NODELAY and the configured keepalive to a socket (best effort). */
void upstream_tune(int fd, const struct config *cfg);

#endif
