/*
 * tlsscout: the front prober's one probe (issue 23). It connects to a fronting site, sends
 * a ClientHello shaped like a Telegram client's (tlsflight_client_hello: fresh random,
 * session id, GREASE and x25519 key share each time) and records the site's first flight
 * the way a passive observer sees it: every non-blocking read() after a poll() wake-up is
 * one observed TCP segment (what arrived together; TCP_INFO's count of the segments that
 * arrived marks a read that held more: tlsflight_mark_merged), and the recording ends
 * after a quiet gap of quiet_ms with nothing new, at EOF, or at TLSFLIGHT_RECORDING_MAX
 * bytes. The bytes are then parsed (tlsflight_parse) into the flight's shape.
 *
 * Blocking (bounded by timeout_ms in all): call it from a thread of its own, never from a
 * worker's loop. The address is resolved by the caller ([network] dns / prefer-ip).
 * Thread-safety: reentrant. Returns 0, or -errno with err saying what failed (connect,
 * timeout, a malformed answer) and where.
 */
#ifndef TGPROXY_TLSSCOUT_H
#define TGPROXY_TLSSCOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "proxy/wire/tlsflight.h"

#define TLSSCOUT_QUIET_MS 150 /* default quiet gap that ends a recording */

struct tlsscout_opts {
    int timeout_ms; /* connect to end of recording; 0 = 5000 */
    int quiet_ms;   /* 0 = TLSSCOUT_QUIET_MS */
    bool proxy_v2;  /* a PROXY v2 header first, naming the probe connection's own addresses:
                       for a site behind [domain-fronting] proxy-protocol, which refuses a
                       connection without one */
};

int tlsscout_probe(const struct sockaddr *addr, socklen_t addr_len, const char *sni,
                   const struct tlsscout_opts *o, struct tlsflight *out, char *err,
                   size_t errlen);

/*
 * The same recording for a ClientHello the caller built (hello[0..hl): e.g. a FakeTLS one
 * signed with a secret, `tgproxy probe`): the answer's bytes go to rec (room for
 * TLSFLIGHT_RECORDING_MAX), *rec_n = how many, and are parsed into out with the hello's own
 * session id for the echo. what names the peer in err. 0 or -errno as tlsscout_probe.
 */
int tlsscout_exchange(const struct sockaddr *addr, socklen_t addr_len, const uint8_t *hello,
                      size_t hl, const char *what, const struct tlsscout_opts *o, uint8_t *rec,
                      size_t *rec_n, struct tlsflight *out, char *err, size_t errlen);

#endif
