/*
 * probeconn: one active prober's connection, as `tgproxy probe` makes it (issue 23): connect,
 * send the probe's bytes (then half-close, when asked), read until the peer closes or the
 * wait runs out, and report what a prober sees: the bytes, how the connection ended (FIN,
 * RST, or still open) and when, counted from the moment the probe's last byte left, and,
 * with after_eof bytes, whether a closed peer answers them with a reset. The connect time
 * is reported too: the caller's yardstick of "at once" for a peer far away.
 *
 * Blocking, every wait bounded (connect_ms, then wait_ms): run it from a thread of its own.
 * Thread-safety: reentrant. No allocation.
 */
#ifndef TGPROXY_PROBECONN_H
#define TGPROXY_PROBECONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "proxy/wire/probekind.h"

struct probeconn_req {
    const uint8_t *bytes; /* may be NULL with n 0: a silent prober */
    size_t n;
    bool shut_wr;
    const void *after_eof; /* sent after the peer's FIN (NULL = none) */
    size_t after_eof_n;
    int connect_ms; /* 0 = 5000 */
    int wait_ms;    /* the read phase's bound; 0 = 5000 */
    bool proxy_v2;  /* a PROXY v2 header first (probeconn_send_proxy_v2), for a peer that
                       expects one: a site behind [domain-fronting] proxy-protocol, a tgproxy
                       with proxy-protocol-listener */
};

struct probeconn_res {
    uint8_t *buf; /* caller's: the answer's first cap bytes are kept */
    size_t cap;
    struct probekind_obs obs; /* obs.bytes = buf */
    long connect_ms;          /* how long the connect took */
};

/* A TCP connection to addr (TCP_NODELAY, non-blocking, close-on-exec) within timeout_ms:
   the fd, or -errno (-ETIMEDOUT when the time ran out). */
int probeconn_dial(const struct sockaddr *addr, socklen_t addr_len, int timeout_ms);

/* Send all of p[0..n) on a non-blocking fd by the deadline (tg__now_ms() clock): 0, or
   -errno (-ETIMEDOUT when it passed; -EPIPE / -ECONNRESET when the peer refused more). */
int probeconn_send(int fd, const uint8_t *p, size_t n, uint64_t deadline);

/* A PROXY v2 header naming fd's own ends (this host as the client, the peer as the
   destination), sent by the deadline: 0 or -errno. The one writer of the probes' header:
   tlsscout's probes and `tgproxy probe` send it where a fronted connection would carry one. */
int probeconn_send_proxy_v2(int fd, uint64_t deadline);

/* 0, or -errno when the connection cannot be made (nothing else is an error: a reset is
   what the peer said). */
int probeconn_run(const struct sockaddr *addr, socklen_t addr_len, const struct probeconn_req *q,
                  struct probeconn_res *r);

#endif
