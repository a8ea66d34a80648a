/*
 * proxy_front: a stand-in for the fronting (mask) host on 127.0.0.1, for tgproxy's tests.
 *
 * It accepts connections, sends a fixed banner (PFRONT_BANNER) as soon as a connection is
 * accepted (so a client can tell it reached the fronting host), and records every byte each
 * connection sends, in order, up to PFRONT_MAX_BYTES per connection. A connection is closed
 * when its peer closes. One thread with poll().
 *
 * Ownership: pfront_start returns a handle freed by pfront_stop. Thread-safety: the
 * accessors may be called from any thread (a mutex guards the records).
 */
#ifndef TGKIT_TEST_PROXY_FRONT_H
#define TGKIT_TEST_PROXY_FRONT_H

#include <stddef.h>
#include <stdint.h>

#define PFRONT_BANNER    "HTTP/1.1 200 OK fronting host\r\n"
#define PFRONT_MAX_CONNS 256
#define PFRONT_MAX_BYTES (64 * 1024)

struct pfront;

struct pfront *pfront_start(uint16_t *port);
void pfront_stop(struct pfront *f); /* NULL-safe */
/* Connections accepted so far. */
size_t pfront_count(struct pfront *f);
/* Copy up to cap bytes received on connection i (accept order); returns the bytes it has
   received so far (may exceed cap), or -1 if there is no connection i. */
long pfront_bytes(struct pfront *f, size_t i, uint8_t *out, size_t cap);
/* Wait (bounded by timeout_ms) until connection i exists and has received at least n bytes.
   0 or -1 on timeout. */
int pfront_wait(struct pfront *f, size_t i, size_t n, int timeout_ms);

#endif
