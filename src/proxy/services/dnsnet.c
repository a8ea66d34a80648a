/*
 * dnsnet: DNS exchanges over UDP and over TLS. See dnsnet.h.
 * Every wait is a poll() bounded by the deadline the caller gave; every socket opened here is
 * closed before the function returns.
 */
#include "proxy/services/dnsnet.h"

#include "core/clock.h"
#include "proxy/wire/value.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
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
    int one = 1; /* the query follows the handshake's last flight: no Nagle wait for its ACK */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0)
        fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return fd;
}

/* Writes of the TLS connection go through send(MSG_NOSIGNAL): a server that closed must
   give an error here, not a SIGPIPE that ends a process which did not ignore it (doctor,
   tests; `run` ignores it). */
static int nosig_write(BIO *b, const char *p, int n)
{
    ssize_t w = send(BIO_get_fd(b, NULL), p, (size_t)n, MSG_NOSIGNAL);
    BIO_clear_retry_flags(b);
    if (w < 0 && (errno == EAGAIN || errno == EINTR))
        BIO_set_retry_write(b);
    return (int)w;
}

static BIO_METHOD *nosig_method;
static pthread_once_t nosig_once = PTHREAD_ONCE_INIT;

static void nosig_init(void)
{
    const BIO_METHOD *s = BIO_s_socket();
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR,
                                 "tgproxy-dnsnet");
    if (!m)
        return;
    BIO_meth_set_write(m, nosig_write);
    BIO_meth_set_read(m, BIO_meth_get_read(s));
    BIO_meth_set_puts(m, BIO_meth_get_puts(s));
    BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(s));
    BIO_meth_set_create(m, BIO_meth_get_create(s));
    BIO_meth_set_destroy(m, BIO_meth_get_destroy(s));
    nosig_method = m;
}

/* ssl reads and writes fd, never raising SIGPIPE. false without memory. */
static bool attach_fd(SSL *ssl, int fd)
{
    pthread_once(&nosig_once, nosig_init);
    BIO *b = nosig_method ? BIO_new(nosig_method) : NULL;
    if (!b)
        return false;
    BIO_set_fd(b, fd, BIO_NOCLOSE);
    SSL_set_bio(ssl, b, b);
    return true;
}

/* Why a TLS step failed: the certificate verdict when the chain was refused. */
static void tls_err(SSL *ssl, const char *what, char *err, size_t errlen)
{
    long v = SSL_get_verify_result(ssl);
    unsigned long e = ERR_get_error();
    if (v != X509_V_OK)
        snprintf(err, errlen, "TLS certificate refused: %s", X509_verify_cert_error_string(v));
    else if (e && ERR_reason_error_string(e))
        snprintf(err, errlen, "TLS %s: %s", what, ERR_reason_error_string(e));
    else if (e) { /* the daemon does not load OpenSSL's error texts (main.c): the code */
        char code[128];
        ERR_error_string_n(e, code, sizeof code);
        snprintf(err, errlen, "TLS %s: %s (openssl errstr decodes it)", what, code);
    } else
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

/* Bound every read and write of c's socket by timeout_ms from now. */
static void set_timeouts(int fd, uint32_t timeout_ms)
{
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

int dnsnet_tls_exchange(struct dnsnet_tls_conn *c, const uint8_t *q, size_t qn, uint8_t *ans,
                        size_t cap, size_t *n, uint32_t timeout_ms, char *err, size_t errlen)
{
    uint8_t msg[2 + 512];
    *n = 0;
    if (qn > sizeof msg - 2) {
        snprintf(err, errlen, "query too long");
        return -1;
    }
    set_timeouts(c->fd, timeout_ms);
    msg[0] = (uint8_t)(qn >> 8);
    msg[1] = (uint8_t)qn;
    memcpy(msg + 2, q, qn);
    uint8_t lb[2];
    errno = 0;
    if (SSL_write(c->ssl, msg, (int)(qn + 2)) != (int)(qn + 2) || !tls_read(c->ssl, lb, 2)) {
        tls_err(c->ssl, "exchange", err, errlen);
        return -1;
    }
    size_t len = (size_t)(lb[0] << 8 | lb[1]);
    if (len > cap || !tls_read(c->ssl, ans, len)) {
        snprintf(err, errlen, len > cap ? "answer too long" : "answer cut short");
        ERR_clear_error();
        return -1;
    }
    *n = len;
    return 0;
}

int dnsnet_tls_open(const struct dnsnet_target *t, SSL_CTX *ctx, uint32_t connect_ms,
                    uint32_t timeout_ms, struct dnsnet_tls_conn *c, char *err, size_t errlen)
{
    c->ssl = NULL;
    c->fd = tcp_connect(t, connect_ms, tg__now_ms() + timeout_ms, err, errlen);
    if (c->fd < 0)
        return -1;
    struct sockaddr_storage lit;
    socklen_t litlen;
    bool ip = value_parse_ip(t->host, strlen(t->host), &lit, &litlen);
    if (!(c->ssl = SSL_new(ctx)) || !attach_fd(c->ssl, c->fd)) {
        snprintf(err, errlen, "TLS: out of memory");
        goto fail;
    }
    if (!ip)
        SSL_set_tlsext_host_name(c->ssl, t->host);
    X509_VERIFY_PARAM *vp = SSL_get0_param(c->ssl);
    if (!(ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, t->host) : SSL_set1_host(c->ssl, t->host))) {
        snprintf(err, errlen, "TLS: cannot set the name to verify");
        goto fail;
    }
    SSL_set_verify(c->ssl, SSL_VERIFY_PEER, NULL);
    errno = 0;
    if (SSL_connect(c->ssl) != 1) {
        tls_err(c->ssl, "handshake", err, errlen);
        goto fail;
    }
    return 0;
fail:
    dnsnet_tls_close(c);
    ERR_clear_error();
    return -1;
}

void dnsnet_tls_close(struct dnsnet_tls_conn *c)
{
    if (c->ssl && c->fd >= 0) {
        set_timeouts(c->fd, 100); /* close_notify, best effort: never a long wait */
        SSL_shutdown(c->ssl);
    }
    SSL_free(c->ssl);
    if (c->fd >= 0)
        close(c->fd);
    c->ssl = NULL;
    c->fd = -1;
    ERR_clear_error();
}
