/*
 * proxy_expect: what the proxy tests expect of a connection, asserted in one place.
 *
 * pexpect_fronted: a client that fails the handshake (or never starts one) reaches the
 * fronting host as if it had talked to it directly: the site's banner (PFRONT_BANNER) comes
 * back, and the site's connection number idx received exactly the client's bytes.
 *
 * Thread-safety: the test's thread (cmocka assertions).
 */
#ifndef TGKIT_TEST_PROXY_EXPECT_H
#define TGKIT_TEST_PROXY_EXPECT_H

#include <stddef.h>
#include <stdint.h>

#include "proxy_front.h"

#define PEXPECT_NEXT ((size_t)-1) /* idx: the site's next connection (its count before) */

/* Connect to the proxy on 127.0.0.1:port (from src_ip, another loopback address, unless
   NULL), send bytes[0..n) (n = 0: a silent client) and expect to be fronted to front as its
   connection idx (or PEXPECT_NEXT). */
void pexpect_fronted(struct pfront *front, uint16_t port, const char *src_ip, const void *bytes,
                     size_t n, size_t idx);

#endif
