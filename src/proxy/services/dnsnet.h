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
 * verified against the SSL_CTX's store; a connection carries exchanges one after the
 * other, so callers keep it open for the next query (doh.c pools them).
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

/* A verified TLS connection to a DNS-over-TLS server. */
struct dnsnet_tls_conn {
    int fd;
    SSL *ssl;
};

/*
 * Connect to t within connect_ms and complete a TLS handshake (ctx: a client context with
 * its verify store) within timeout_ms. 0, or -1 with err filled (nothing held).
 */
int dnsnet_tls_open(const struct dnsnet_target *t, SSL_CTX *ctx, uint32_t connect_ms,
                    uint32_t timeout_ms, struct dnsnet_tls_conn *c, char *err, size_t errlen);
/*
 * One exchange on c within timeout_ms: the query out, its answer into ans[0..cap), its
 * length in *n. 0, or -1 with err filled (c is then of no further use: close it). A
 * connection may carry any number of exchanges, one after the other.
 */
int dnsnet_tls_exchange(struct dnsnet_tls_conn *c, const uint8_t *q, size_t qn, uint8_t *ans,
                        size_t cap, size_t *n, uint32_t timeout_ms, char *err, size_t errlen);
/* Send close_notify (best effort) and release c. Safe on a closed c (fd -1). */
void dnsnet_tls_close(struct dnsnet_tls_conn *c);

#endif
