/*
 * proxy_probe: what an active prober sees from one TCP connection, so a test can compare a
 * web site reached directly with the same site reached through tgproxy.
 *
 * pprobe_run() connects to addr:port (numeric IPv4 or IPv6), sends the probe's bytes (and
 * an optional half-close after them), then reads until the peer closes or wait_ms pass, and
 * reports: the bytes received, how the connection ended (FIN, RST, or still open when the
 * wait ran out) and when, in milliseconds since connect. It is `tgproxy probe`'s own prober
 * (src/proxy/services/probeconn.h) in the shape these tests read. With after_eof bytes, they are
 * sent once the peer's FIN was read, and the reset that a closed peer answers them with (or not) is
 * reported in reset_after_eof.
 *
 * Thread-safety: reentrant. Every wait is bounded by wait_ms.
 */
#ifndef TGKIT_TEST_PROXY_PROBE_H
#define TGKIT_TEST_PROXY_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PPROBE_MAX_BYTES 8192

enum pprobe_end { PPROBE_OPEN, PPROBE_FIN, PPROBE_RST };

struct pprobe {
    const void *bytes; /* may be NULL with n 0: a silent prober */
    size_t n;
    bool shut_wr;          /* half-close after sending */
    const void *after_eof; /* sent after the peer's FIN (NULL = none) */
    size_t after_eof_n;
    int wait_ms; /* bound of the whole read phase */
};

struct pprobe_result {
    uint8_t bytes[PPROBE_MAX_BYTES];
    size_t n; /* bytes received (kept up to PPROBE_MAX_BYTES) */
    enum pprobe_end end;
    long end_ms;          /* when the FIN or RST arrived (or wait_ms for PPROBE_OPEN) */
    long first_ms;        /* when the first byte arrived; -1 = none */
    bool reset_after_eof; /* after_eof bytes were answered with a reset */
};

/* 0, or -errno when the connection cannot be made. */
int pprobe_run(const char *addr, uint16_t port, const struct pprobe *p, struct pprobe_result *r);
const char *pprobe_end_name(enum pprobe_end e);

#endif
