/*
 * doctor_mp: `tgproxy doctor`'s checks of middle-proxy mode (docs/tgproxy.md, doctor), run
 * when the file has [middle-proxy]:
 *
 *   middle-proxy proxy-secret / proxy-config / proxy-config-v6 / public-ip-url
 *       each source downloads (HTTPS, certificate verified) or reads, and its document
 *       passes the checks `run` applies; a source that fails while state-dir holds a good
 *       stored copy is a warning (`run` would start from it), else a failure
 *   middle-proxy clock
 *       this host's clock against the Date header of the first URL source's answer: the
 *       middle proxies refuse a nonce more than 30 s off theirs
 *   middle-proxy public address
 *       the address the key derivation will use (configured, detected, or the socket's own
 *       toward the first middle proxy, which fails when private)
 *   middle-proxy DC N
 *       for each DC of the list (by prefer-ip), the nonce and handshake with its first middle
 *       proxy, bounded by [network.timeout] tcp (at most 5 s); a failure says why (keys: the
 *       proxy secret or the public address is wrong)
 *
 * Nothing is retried; every socket is closed before the function returns. The proxy secret
 * is never printed. Thread-safety: one thread; libcurl must be initialised by the caller.
 */
#ifndef TGPROXY_DOCTOR_MP_H
#define TGPROXY_DOCTOR_MP_H

#include "proxy/config/config.h"

enum doctor_mark { DOCTOR_OK = 0, DOCTOR_FAIL, DOCTOR_WARN };

/* One line of doctor's output: what the check is, and what it found. */
typedef void (*doctor_line_fn)(void *ud, enum doctor_mark m, const char *what, const char *text);

void doctor_midproxy(const struct config *cfg, doctor_line_fn line, void *ud);

#endif
