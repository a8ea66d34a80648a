/*
 * pp_site: a web site that expects a PROXY protocol v2 header first, as one behind
 * HAProxy's `accept-proxy` or nginx's `proxy_protocol` listener does: on 127.0.0.1, it
 * accepts a connection, reads the header (parsed here by hand, from the HAProxy spec: the
 * 12-byte signature, version 2, command PROXY, TCP over IPv4 or IPv6, the length), and
 * only then relays the rest both ways to the real site at 127.0.0.1:upstream. A connection
 * whose first bytes are not such a header is closed at once, unanswered, as those sites do.
 * Connections are served one at a time (the fronts of tls_front.h serve one at a time too).
 *
 * Ownership: caller storage; pp_site_stop joins the thread. Thread-safety: start and stop
 * from one thread; pp_site_counts from any.
 */
#ifndef TGKIT_TEST_PP_SITE_H
#define TGKIT_TEST_PP_SITE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct pp_site {
    pthread_t th;
    int lfd, stop_pipe[2];
    uint16_t port, upstream;
    pthread_mutex_t mu;
    unsigned with_header, without; /* connections, under mu */
    char last_src[64];             /* the last header's source "ip:port", under mu */
};

/* Listen on 127.0.0.1 (a free port, into s->port), relaying to 127.0.0.1:upstream. */
void pp_site_start(struct pp_site *s, uint16_t upstream);
/* Connections that came with a valid header and without one, so far; src (64 bytes, or
   NULL) the last header's source address. */
void pp_site_counts(struct pp_site *s, unsigned *with_header, unsigned *without, char *src);
void pp_site_stop(struct pp_site *s);

#endif
