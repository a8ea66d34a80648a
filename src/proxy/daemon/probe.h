/*
 * probe: `tgproxy probe`, the operator's outside view of a running deployment (issue 23).
 *
 * It needs nothing but addresses (and optionally the secret), so it runs from any machine:
 * every kind of the active-probing suite (wire/probekind.h) goes to the proxy and to its
 * fronting site directly, one connection at a time, and the two answers are compared
 * (bytes, normalised where TLS randomness differs; FIN / RST / open; timing class). With the
 * secret, it also makes real FakeTLS handshakes with the proxy (checking the answer's HMAC
 * as Telegram clients do) and sends the same ClientHello shape to the site, and compares the
 * answers' shape (wire/probeshape.h). Output: a table and a verdict, as text or JSON.
 *
 * With a PROXY protocol setup (--config), the probes carry the v2 header where tgproxy's
 * own connections do (probe_opts.front_proxy_v2 / proxy_proxy_v2).
 *
 * The secret is never printed: only its domain (the SNI, which every hello shows anyway).
 * Exit codes (cli.h's table): 0 indistinguishable, 1 something gives the proxy away (or
 * the proxy refused the secret), 69 the proxy or the front cannot be resolved or reached,
 * 71 no threads or random bytes, 74 the output cannot be written.
 *
 * Blocking, on the calling thread; each connection is bounded by wait_ms, so a run takes at
 * most about 2 x (probes + handshakes) x wait_ms.
 */
#ifndef TGPROXY_PROBE_H
#define TGPROXY_PROBE_H

#include <stdbool.h>
#include <stdio.h>

#include "proxy/wire/secret.h"

#define PROBE_WAIT_MS_DEFAULT    6000
#define PROBE_HANDSHAKES_DEFAULT 5
#define PROBE_HANDSHAKES_MAX     50

struct probe_opts {
    const char *proxy;           /* HOST:PORT */
    const char *front;           /* HOST:PORT, or NULL: the secret's domain, port 443 */
    const char *sni;             /* NULL: the secret's domain, else the front's host name */
    const struct secret *secret; /* NULL: the probes alone (no handshakes) */
    int wait_ms;                 /* each probe's bound; 0 = PROBE_WAIT_MS_DEFAULT */
    int handshakes;              /* each way; 0 = PROBE_HANDSHAKES_DEFAULT */
    bool json;
    bool strict; /* a limit of FakeTLS itself counts as a giveaway too */
    /* PROXY v2 headers first (probeconn_send_proxy_v2), as --config sets them: to the front
       when it expects one from tgproxy ([domain-fronting] proxy-protocol), so the direct
       probes look like tgproxy's fronted connections; to the proxy when its listener expects
       one (proxy-protocol-listener, a balancer in front) */
    bool front_proxy_v2, proxy_proxy_v2;
};

/* Run the probe; messages on err ("tgproxy: probe: ..."), the report on out. Returns the
   exit code. */
int probe_run(const struct probe_opts *o, FILE *out, FILE *err);

#endif
