/*
 * chain: the connector's DC attempts through SOCKS5 upstream proxies ([network] proxies, as
 * mtg). Internal to the connector (upstream.c); nothing else calls these.
 *
 * When upstreams are configured, a DC request does not connect to the DC: attempt k
 * (r->addr_i) connects to upstream (start + k) mod n, where start is taken round-robin per
 * worker for each request, and asks it (socks5.h) to CONNECT to the DC's address k / n in
 * the usual order: IP addresses first ([dcs] literals or the built-in table, as prefer-ip
 * orders them), then [dcs] host names, which the upstream resolves (domain address type). So
 * a failing upstream fails over to the next one for the same DC address, and when every
 * upstream failed for it, the next DC address is tried. The TCP connect and the whole
 * negotiation of one attempt are bounded by [network.timeout] tcp: the request stays in its
 * connecting phase, deadline running, until the CONNECT reply. Fronting requests always go
 * direct.
 *
 * Non-blocking on the worker's loop; the negotiation state (about 1.3 KB) is allocated when
 * a DC request starts and freed when it reports or is cancelled (chain_free). Failures are
 * logged (rate-limited) with the upstream's address and the exact reason, never the user
 * name or password. Thread-safety: worker thread only.
 */
#ifndef TGPROXY_CHAIN_H
#define TGPROXY_CHAIN_H

#include <stdbool.h>
#include <sys/socket.h>

#include "proxy/engine/upstream.h"

/* True when DC requests go through upstream proxies. */
/* A worker's round-robin position over [network] proxies: chain.c's own, embedded in
   struct conn_worker as w->chain. */
struct chain_worker {
    uint32_t rr;
};

bool chain_enabled(const struct config *cfg);

/* Start attempt r->addr_i of a DC request (and the following ones if an attempt fails at
   once). 0 when one is under way, else UPSTREAM_UNREACHABLE (the caller frees r->chain). */
int chain_try(struct upstream_req *r);

/* The TCP connection of the attempt is up: send the greeting and read the answers; the
   connector hears back through upstream_chain_done / upstream_chain_failed. */
void chain_connected(struct upstream_req *r);

/* The attempt's deadline passed (the connector moves on): log it. */
void chain_timeout(struct upstream_req *r);

/* Release r's negotiation state, if any. */
void chain_free(struct upstream_req *r);

/* Connector internals chain.c calls back (defined in upstream.c). */
int upstream_chain_connect(struct upstream_req *r, const struct sockaddr_storage *sa,
                           socklen_t len);          /* start_connect: 0 or -errno */
void upstream_chain_done(struct upstream_req *r);   /* negotiated: report the socket */
void upstream_chain_failed(struct upstream_req *r); /* refused: the next attempt */

#endif
