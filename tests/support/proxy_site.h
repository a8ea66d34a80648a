/*
 * proxy_site: a small local web site for tgproxy's fronting and probing tests, reached
 * either directly or through tgproxy, so a test can compare what a prober sees both ways.
 *
 * It listens on a chosen address (127.0.0.2, ::1, ... ; port 0 = pick one) with
 * SO_REUSEPORT, so it may sit on the same port as a wildcard tgproxy listener, and serves
 * each connection on a thread of its own, with blocking sockets:
 *
 *   PSITE_HTTP   a web server: a complete HTTP request (method, headers, blank line) gets
 *                "200" (PSITE_HTTP_OK) and a close; bytes that cannot start an HTTP
 *                request get "400" (PSITE_HTTP_BAD) and a close; EOF before a complete
 *                request closes; silence for idle_ms closes. Closes are FINs, and bytes
 *                that arrive after the close are answered by the kernel with a reset.
 *   PSITE_TLS    OpenSSL with a self-signed certificate made at start: TLS handshake, then
 *                the same HTTP rules inside TLS; a bad hello gets OpenSSL's alert and a
 *                close; silence for idle_ms closes.
 *   PSITE_RESET  resets (SO_LINGER {1, 0}, close) as soon as the first bytes arrive.
 *   PSITE_LOUD   an HTTPS front that answers junk at once, as nginx and other real servers
 *                do: a first read that starts a TLS handshake record (16) or an SSLv2-style
 *                hello (high bit set) goes to OpenSSL as in PSITE_TLS, and a hello OpenSSL
 *                refuses without a word gets PSITE_ALERT; any other first read is answered
 *                at once, with "400" (PSITE_HTTP_BAD) when it starts with an upper-case
 *                letter (an HTTP method), else with PSITE_ALERT, and closed.
 *
 * Ownership: psite_start returns a handle freed by psite_stop, which wakes and joins every
 * connection thread. Thread-safety: psite_count may be called from any thread.
 */
#ifndef TGKIT_TEST_PROXY_SITE_H
#define TGKIT_TEST_PROXY_SITE_H

#include <stddef.h>
#include <stdint.h>

#define PSITE_HTTP_OK                                                                              \
    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\nConnection: "             \
    "close\r\n\r\nok\n"
#define PSITE_HTTP_BAD  "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
#define PSITE_MAX_CONNS 64
/* TLS 1.0-framed fatal alert, unexpected_message: the loud site's answer to non-TLS junk */
#define PSITE_ALERT "\x15\x03\x01\x00\x02\x02\x0a"

enum psite_mode { PSITE_HTTP, PSITE_TLS, PSITE_RESET, PSITE_LOUD };

struct psite_opts {
    const char *addr; /* numeric IPv4 or IPv6 address to bind ("127.0.0.2", "::1") */
    uint16_t port;    /* 0 = any free port */
    enum psite_mode mode;
    int idle_ms; /* the site's own timer for a silent or incomplete client; 0 = 1000 */
};

struct psite;

/* Start the site; *port receives the bound port. NULL on failure (errno-style reason lost;
   a test treats NULL as "environment cannot do this" only where it says so). */
struct psite *psite_start(const struct psite_opts *o, uint16_t *port);
void psite_stop(struct psite *s); /* NULL-safe */
/* Connections accepted so far. */
size_t psite_count(struct psite *s);

#endif
