/*
 * dnsnet: one DNS exchange with a configured server over plain UDP (RFC 1035 4.2.1) or over
 * TLS (RFC 7858: the message with a two-byte length, on a TLS connection), for
 * `[network] dns = "udp://IP"` / a bare IP and `dns = "tls://HOST"` (doh.c does DNS over
 * HTTPS with libcurl and uses these for the other two forms).
 *
 * The caller builds the query and parses the answer (dnsmsg.h); these functions only move
 * bytes, blocking the calling thread within the deadlines given. UDP: a connected socket
 * (the kernel drops datagrams from any other source), the query sent again while
 * it goes unanswered (see DNSNET_UDP_RESEND_*) (datagrams get lost), answers whose id is not the
 * query's skipped until the deadline. TLS: certificate chain and host name (or IP address)
 * verified against the SSL_CTX's store; a new connection per exchange.
 *
 * Errors fill err with what went wrong (never more than the server's address). Thread-safety:
 * reentrant; ctx may be shared (OpenSSL's SSL_CTX is thread-safe once set up).
 */
#ifndef TGPROXY_DNSNET_H
#define TGPROXY_DNSNET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <openssl/ssl.h>

/* UDP: send the query again after this long unanswered: an eighth of the timeout, within
   100..1000 ms. */
#define DNSNET_UDP_RESEND_MAX_MS 1000
#define DNSNET_UDP_RESEND_MIN_MS 100

/* The server: host (name or IP, for TLS's name check), port, and the address to connect to
   (ip; "" = host, resolved with getaddrinfo when it is a name). */
struct dnsnet_target {
    const char *host;
    uint16_t port;
    const char *ip;
};

/*
 * Send q[0..qn) (whose id is id) to t over UDP and receive the answer into ans[0..cap),
 * its length in *n, within timeout_ms. 0, or -1 with err filled.
 */
int dnsnet_udp(const struct dnsnet_target *t, uint16_t id, const uint8_t *q, size_t qn,
               uint8_t *ans, size_t cap, size_t *n, uint32_t timeout_ms, char *err, size_t errlen);

/*
 * The same over TLS (ctx: a client context with its verify store): connect within
 * connect_ms, the whole exchange within timeout_ms. 0, or -1 with err filled.
 */
int dnsnet_tls(const struct dnsnet_target *t, SSL_CTX *ctx, const uint8_t *q, size_t qn,
               uint8_t *ans, size_t cap, size_t *n, uint32_t connect_ms, uint32_t timeout_ms,
               char *err, size_t errlen);

#endif
