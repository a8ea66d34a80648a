/*
 * httpd: a libmicrohttpd daemon with the limits every HTTP listener of ours needs (libtgbot's
 * webhook server, tgproxy's metrics page and its control API).
 *
 *   - poll/epoll, never select(): MHD_USE_AUTO picks epoll on Linux, so a socket numbered
 *     above FD_SETSIZE (1024) is served like any other. On select() MHD cannot watch such a
 *     socket and drops the connection, so a process holding 1024 descriptors (a busy proxy)
 *     stops answering;
 *   - a connection limit (callers size it from the open-files limit: tg__httpd_fd_share)
 *     and a per-IP connection limit;
 *   - a request deadline: each request, headers and body, must have arrived within
 *     request_timeout_ms of the connection's accept or of the end of its previous request,
 *     however steadily it trickles in. MHD's own timeout (idle_timeout_s) restarts on every
 *     byte, so a client sending one byte every few seconds (slowloris) would otherwise hold
 *     its slot for ever. The time a handler spends answering does not count.
 *
 * The deadline is kept by one watchdog thread per daemon: connections are queued in the
 * order their deadlines fall (one timeout for all, so arming appends), and a connection
 * past its deadline has its socket shut down, which MHD sees as the peer leaving and
 * closes. Invariant: an entry is in the queue only while MHD has not yet reported its
 * connection closed, and MHD closes the socket only after that report, so the watchdog
 * never touches a descriptor that may have been reused.
 *
 * Ownership: opts is copied (the strings are borrowed until tg__httpd_start returns).
 * Thread-safety: start and stop from one thread; the handlers run on MHD's threads.
 */
#ifndef TGKIT_CORE_HTTPD_H
#define TGKIT_CORE_HTTPD_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct tg__httpd_opts {
    const struct sockaddr *addr; /* listen address, IPv4 or IPv6 (port 0: any free port) */
    MHD_AccessHandlerCallback handler;
    void *handler_cls;
    MHD_RequestCompletedCallback completed; /* NULL = none */
    void *completed_cls;
    unsigned threads;            /* 0 or 1: one polling thread; more: a pool of them */
    unsigned max_connections;    /* connections at once; 0 = tg__httpd_fd_share(2, 16, 65536);
                                    when reached, accepting pauses: new ones wait in the
                                    listen queue until a connection ends */
    unsigned per_ip;             /* connections at once from one address (more are closed at
                                    accept); 0 = no limit */
    unsigned idle_timeout_s;     /* MHD's inactivity timeout; 0 = none */
    uint32_t request_timeout_ms; /* the request deadline above; 0 = none */
    size_t memory_limit;         /* bytes of buffers per connection; 0 = MHD's 32 KiB */
    const char *cert_pem;        /* both set: HTTPS */
    const char *key_pem;
    MHD_LogCallback log; /* MHD's own messages; NULL = not shown */
    void *log_cls;
};

struct tg__httpd;

/* Start serving. NULL on failure, with errno set (EADDRINUSE when MHD does not say). */
struct tg__httpd *tg__httpd_start(const struct tg__httpd_opts *o);
/* Stop serving (requests in progress are cut) and free. NULL-safe. */
void tg__httpd_stop(struct tg__httpd *h);
/* The port listened on. */
uint16_t tg__httpd_port(const struct tg__httpd *h);
/* Connections open now. */
unsigned tg__httpd_connections(const struct tg__httpd *h);
/* Connections closed so far because their request missed the deadline. */
uint64_t tg__httpd_expired(const struct tg__httpd *h);

/* The soft open-files limit / divisor, clamped to [lo, hi] (hi when unlimited): a share of
   the descriptors the process may hold, so a flood of HTTP clients cannot take them all. */
unsigned tg__httpd_fd_share(unsigned divisor, unsigned lo, unsigned hi);

#endif
