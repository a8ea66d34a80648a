/*
 * dnsnet: DNS exchanges over UDP and over TLS. See dnsnet.h.
 * Every wait is a poll() bounded by the deadline the caller gave; every socket opened here is
 * closed before the function returns.
 */
#include "proxy/dnsnet.h"

#include "core/clock.h"
#include "proxy/value.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The address to connect to. 0, or -1 with err filled. */
static int target_addr(const struct dnsnet_target *t, struct sockaddr_storage *ss, socklen_t *len,
                       char *err, size_t errlen)
{
    const char *h = t->ip && t->ip[0] ? t->ip : t->host;
    if (!value_parse_ip(h, strlen(h), ss, len)) {
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
        int rc = getaddrinfo(h, NULL, &hints, &res);
        if (rc != 0 || !res || res->ai_addrlen > sizeof *ss) {
            snprintf(err, errlen, "cannot resolve the DNS server's name: %s",
                     rc ? gai_strerror(rc) : "no address");
            if (res)
                freeaddrinfo(res);
            return -1;
        }
        memcpy(ss, res->ai_addr, res->ai_addrlen);
        *len = res->ai_addrlen;
        freeaddrinfo(res);
    }
    value_set_port(ss, t->port);
    return 0;
}

/* Milliseconds left until deadline (0 when passed). */
static int left_ms(uint64_t deadline)
{
    uint64_t now = tg__now_ms();
    return now >= deadline ? 0 : (int)(deadline - now);
}

/* Wait for events on fd until deadline. 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, uint64_t deadline)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        int rc = poll(&p, 1, left_ms(deadline));
        if (rc < 0 && errno == EINTR)
            continue;
        return rc < 0 ? -1 : rc;
    }
}

int dnsnet_udp(const struct dnsnet_target *t, uint16_t id, const uint8_t *q, size_t qn,
               uint8_t *ans, size_t cap, size_t *n, uint32_t timeout_ms, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t len;
    *n = 0;
    if (target_addr(t, &ss, &len, err, errlen) != 0)
        return -1;
    int fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&ss, len) != 0 || send(fd, q, qn, 0) < 0) {
        snprintf(err, errlen, "cannot send the query: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    uint32_t every = timeout_ms / 8 < DNSNET_UDP_RESEND_MIN_MS   ? DNSNET_UDP_RESEND_MIN_MS
                     : timeout_ms / 8 > DNSNET_UDP_RESEND_MAX_MS ? DNSNET_UDP_RESEND_MAX_MS
                                                                 : timeout_ms / 8;
    uint64_t deadline = tg__now_ms() + timeout_ms, resend = tg__now_ms() + every;
    int rc = -1;
    while (rc < 0) {
        int w = wait_fd(fd, POLLIN, resend < deadline ? resend : deadline);
        if (w == 0 && tg__now_ms() < deadline) { /* a datagram may be lost: send it again */
            if (send(fd, q, qn, 0) < 0 && errno != EAGAIN)
                w = -1;
            resend = tg__now_ms() + every;
            if (w == 0)
                continue;
        }
        if (w <= 0) {
            snprintf(err, errlen, "%s", w == 0 ? "no answer within the timeout" : strerror(errno));
            break;
        }
        ssize_t got = recv(fd, ans, cap, 0);
        if (got < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (got < 0) { /* e.g. ECONNREFUSED: an ICMP port unreachable came back */
            snprintf(err, errlen, "no DNS server there: %s", strerror(errno));
            break;
        }
        if (got >= 2 && (uint16_t)(ans[0] << 8 | ans[1]) == id) {
            *n = (size_t)got;
            rc = 0;
        } /* else a stale or forged answer: keep waiting for ours */
    }
    close(fd);
    return rc;
}

/* A TCP connection to t within connect_ms, blocking afterwards with timeouts set to the
   rest of deadline. fd, or -1 with err filled. */
static int tcp_connect(const struct dnsnet_target *t, uint32_t connect_ms, uint64_t deadline,
                       char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t len;
    if (target_addr(t, &ss, &len, err, errlen) != 0)
        return -1;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    int soerr = 0;
    socklen_t el = sizeof soerr;
    uint64_t cdl = tg__now_ms() + connect_ms;
    if (connect(fd, (struct sockaddr *)&ss, len) != 0 && errno != EINPROGRESS)
        soerr = errno;
    else if (wait_fd(fd, POLLOUT, cdl < deadline ? cdl : deadline) <= 0)
        soerr = ETIMEDOUT;
    else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &el) != 0)
        soerr = errno;
    if (soerr) {
        snprintf(err, errlen, "cannot connect: %s", strerror(soerr));
        close(fd);
        return -1;
    }
    int ms = left_ms(deadline) + 1;
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0)
        fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return fd;
}

/* Why a TLS step failed: the certificate verdict when the chain was refused. */
static void tls_err(SSL *ssl, const char *what, char *err, size_t errlen)
{
    long v = SSL_get_verify_result(ssl);
    unsigned long e = ERR_get_error();
    if (v != X509_V_OK)
        snprintf(err, errlen, "TLS certificate refused: %s", X509_verify_cert_error_string(v));
    else if (e)
        snprintf(err, errlen, "TLS %s: %s", what, ERR_reason_error_string(e));
    else
        snprintf(err, errlen, "TLS %s: %s", what, errno ? strerror(errno) : "connection closed");
    ERR_clear_error();
}

/* Read exactly n bytes. */
static bool tls_read(SSL *ssl, uint8_t *p, size_t n)
{
    while (n > 0) {
        int r = SSL_read(ssl, p, (int)(n > 16384 ? 16384 : n));
        if (r <= 0)
            return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

/* The exchange on an established session: length-prefixed query, length-prefixed answer. */
static int tls_exchange(SSL *ssl, const uint8_t *q, size_t qn, uint8_t *ans, size_t cap, size_t *n,
                        char *err, size_t errlen)
{
    uint8_t msg[2 + 512];
    if (qn > sizeof msg - 2) {
        snprintf(err, errlen, "query too long");
        return -1;
    }
    msg[0] = (uint8_t)(qn >> 8);
    msg[1] = (uint8_t)qn;
    memcpy(msg + 2, q, qn);
    uint8_t lb[2];
    if (SSL_write(ssl, msg, (int)(qn + 2)) != (int)(qn + 2) || !tls_read(ssl, lb, 2)) {
        tls_err(ssl, "exchange", err, errlen);
        return -1;
    }
    size_t len = (size_t)(lb[0] << 8 | lb[1]);
    if (len > cap || !tls_read(ssl, ans, len)) {
        snprintf(err, errlen, len > cap ? "answer too long" : "answer cut short");
        ERR_clear_error();
        return -1;
    }
    *n = len;
    return 0;
}

int dnsnet_tls(const struct dnsnet_target *t, SSL_CTX *ctx, const uint8_t *q, size_t qn,
               uint8_t *ans, size_t cap, size_t *n, uint32_t connect_ms, uint32_t timeout_ms,
               char *err, size_t errlen)
{
    *n = 0;
    uint64_t deadline = tg__now_ms() + timeout_ms;
    int fd = tcp_connect(t, connect_ms, deadline, err, errlen);
    if (fd < 0)
        return -1;
    SSL *ssl = SSL_new(ctx);
    struct sockaddr_storage lit;
    socklen_t litlen;
    bool ip = value_parse_ip(t->host, strlen(t->host), &lit, &litlen);
    int rc = -1;
    if (!ssl || !SSL_set_fd(ssl, fd)) {
        snprintf(err, errlen, "TLS: out of memory");
        goto out;
    }
    if (!ip)
        SSL_set_tlsext_host_name(ssl, t->host);
    X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);
    if (!(ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, t->host) : SSL_set1_host(ssl, t->host))) {
        snprintf(err, errlen, "TLS: cannot set the name to verify");
        goto out;
    }
    SSL_set_verify(ssl, SSL_VERIFY_PEER, NULL);
    errno = 0;
    if (SSL_connect(ssl) != 1) {
        tls_err(ssl, "handshake", err, errlen);
        goto out;
    }
    rc = tls_exchange(ssl, q, qn, ans, cap, n, err, errlen);
    if (rc == 0)
        SSL_shutdown(ssl);
out:
    SSL_free(ssl);
    close(fd);
    ERR_clear_error();
    return rc;
}
