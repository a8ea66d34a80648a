/* proxy_site: a local web site (HTTP, TLS or resetting) for probing tests. See proxy_site.h. */
#include "proxy_site.h"

#include "proxy_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

struct sconn {
    struct psite *site;
    int fd;
    pthread_t th;
};

struct psite {
    struct psite_opts o;
    int lfd, wakefd;
    pthread_t th;
    pthread_mutex_t mu;
    SSL_CTX *tls;
    struct sconn conns[PSITE_MAX_CONNS];
    size_t n;
};

/* ---- HTTP rules, shared by the plain and the TLS site ---- */

static const char *const methods[] = {"GET ",     "POST ",  "HEAD ",    "PUT ",  "DELETE ",
                                      "OPTIONS ", "PATCH ", "CONNECT ", "TRACE "};

/* Could b[0..n) still become an HTTP request line? */
static bool http_prefix(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        size_t k = strlen(methods[i]);
        if (!memcmp(b, methods[i], n < k ? n : k))
            return true;
    }
    return false;
}

static bool http_complete(const uint8_t *b, size_t n)
{
    for (size_t i = 3; i < n; i++)
        if (b[i - 3] == '\r' && b[i - 2] == '\n' && b[i - 1] == '\r' && b[i] == '\n')
            return true;
    return false;
}

/* One exchange on an I/O pair: read until a verdict, answer it. */
typedef long (*rd_fn)(void *io, uint8_t *p, size_t n);
typedef long (*wr_fn)(void *io, const void *p, size_t n);

static void http_serve(void *io, rd_fn rd, wr_fn wr)
{
    uint8_t buf[4096];
    size_t n = 0;
    while (n < sizeof buf) {
        long r = rd(io, buf + n, sizeof buf - n);
        if (r <= 0)
            return; /* EOF, error or the idle timer: close */
        n += (size_t)r;
        if (!http_prefix(buf, n)) {
            wr(io, PSITE_HTTP_BAD, sizeof PSITE_HTTP_BAD - 1);
            return;
        }
        if (http_complete(buf, n)) {
            wr(io, PSITE_HTTP_OK, sizeof PSITE_HTTP_OK - 1);
            return;
        }
    }
    wr(io, PSITE_HTTP_BAD, sizeof PSITE_HTTP_BAD - 1);
}

static long fd_rd(void *io, uint8_t *p, size_t n)
{
    return (long)recv(*(int *)io, p, n, 0);
}

static long fd_wr(void *io, const void *p, size_t n)
{
    return (long)send(*(int *)io, p, n, MSG_NOSIGNAL);
}

static long tls_rd(void *io, uint8_t *p, size_t n)
{
    return SSL_read(io, p, (int)n);
}

static long tls_wr(void *io, const void *p, size_t n)
{
    return SSL_write(io, p, (int)n);
}

static void serve_tls(struct psite *s, int fd)
{
    SSL *ssl = SSL_new(s->tls);
    if (!ssl)
        return;
    SSL_set_fd(ssl, fd);
    if (SSL_accept(ssl) == 1) {
        http_serve(ssl, tls_rd, tls_wr);
        SSL_shutdown(ssl);
    }
    SSL_free(ssl);
    ERR_clear_error();
}

/* PSITE_LOUD: whatever the first read holds gets an answer at once (see proxy_site.h). */
static void serve_loud(struct psite *s, int fd)
{
    uint8_t b[8];
    ssize_t n = recv(fd, b, sizeof b, MSG_PEEK);
    if (n <= 0)
        return; /* EOF, error or the idle timer: close */
    if (b[0] == 0x16 || (b[0] & 0x80)) {
        SSL *ssl = SSL_new(s->tls);
        if (!ssl)
            return;
        SSL_set_fd(ssl, fd);
        int rc = SSL_accept(ssl);
        if (rc == 1) {
            http_serve(ssl, tls_rd, tls_wr);
            SSL_shutdown(ssl);
        } else if (SSL_get_error(ssl, rc) == SSL_ERROR_SSL &&
                   BIO_number_written(SSL_get_wbio(ssl)) == 0) {
            fd_wr(&fd, PSITE_ALERT, sizeof PSITE_ALERT - 1); /* refused without a word */
        }
        SSL_free(ssl);
        ERR_clear_error();
        return;
    }
    uint8_t junk[4096];
    if (recv(fd, junk, sizeof junk, 0) <= 0)
        return;
    if (b[0] >= 'A' && b[0] <= 'Z')
        fd_wr(&fd, PSITE_HTTP_BAD, sizeof PSITE_HTTP_BAD - 1);
    else
        fd_wr(&fd, PSITE_ALERT, sizeof PSITE_ALERT - 1);
}

static void *conn_main(void *arg)
{
    struct sconn *c = arg;
    struct psite *s = c->site;
    int fd = c->fd;
    if (s->o.mode == PSITE_RESET) {
        uint8_t b[512];
        if (recv(fd, b, sizeof b, 0) > 0) {
            struct linger lg = {.l_onoff = 1, .l_linger = 0};
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        }
    } else if (s->o.mode == PSITE_TLS) {
        serve_tls(s, fd);
    } else if (s->o.mode == PSITE_LOUD) {
        serve_loud(s, fd);
    } else {
        http_serve(&fd, fd_rd, fd_wr);
    }
    pthread_mutex_lock(&s->mu);
    c->fd = -1;
    pthread_mutex_unlock(&s->mu);
    close(fd);
    return NULL;
}

static void accept_one(struct psite *s)
{
    int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    int ms = s->o.idle_ms ? s->o.idle_ms : 1000;
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    pthread_mutex_lock(&s->mu);
    struct sconn *c = s->n < PSITE_MAX_CONNS ? &s->conns[s->n] : NULL;
    if (c) {
        c->site = s;
        c->fd = fd;
        if (pthread_create(&c->th, NULL, conn_main, c) == 0)
            s->n++;
        else
            c = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    if (!c)
        close(fd);
}

static void *site_main(void *arg)
{
    struct psite *s = arg;
    for (;;) {
        struct pollfd pf[2] = {{.fd = s->wakefd, .events = POLLIN},
                               {.fd = s->lfd, .events = POLLIN}};
        if (poll(pf, 2, -1) < 0 && errno != EINTR)
            return NULL;
        if (pf[0].revents)
            return NULL;
        if (pf[1].revents)
            accept_one(s);
    }
}

/* A self-signed P-256 certificate for "localhost", valid for a day. */
static SSL_CTX *tls_ctx(void)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *crt = X509_new();
    bool ok = ctx && key && crt;
    if (ok) {
        X509_set_version(crt, 2);
        ASN1_INTEGER_set(X509_get_serialNumber(crt), 1);
        X509_gmtime_adj(X509_getm_notBefore(crt), -60);
        X509_gmtime_adj(X509_getm_notAfter(crt), 86400);
        X509_NAME *nm = X509_get_subject_name(crt);
        X509_NAME_add_entry_by_txt(nm, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1,
                                   -1, 0);
        X509_set_issuer_name(crt, nm);
        X509_set_pubkey(crt, key);
        ok = X509_sign(crt, key, EVP_sha256()) > 0 && SSL_CTX_use_certificate(ctx, crt) == 1 &&
             SSL_CTX_use_PrivateKey(ctx, key) == 1;
    }
    X509_free(crt);
    EVP_PKEY_free(key);
    if (!ok) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

static int site_listen(const struct psite_opts *o, uint16_t *port)
{
    struct sockaddr_storage ss;
    socklen_t len;
    if (psock_addr_parse(o->addr, o->port, &ss, &len) < 0)
        return -EINVAL;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    if (ss.ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 64) < 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    *port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)(void *)&ss)->sin_port
                                          : ((struct sockaddr_in6 *)(void *)&ss)->sin6_port);
    return fd;
}

struct psite *psite_start(const struct psite_opts *o, uint16_t *port)
{
    struct psite *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->o = *o;
    s->lfd = site_listen(o, port);
    s->wakefd = eventfd(0, EFD_CLOEXEC);
    pthread_mutex_init(&s->mu, NULL);
    bool tls = o->mode == PSITE_TLS || o->mode == PSITE_LOUD;
    if (tls)
        s->tls = tls_ctx();
    if (s->lfd < 0 || s->wakefd < 0 || (tls && !s->tls) ||
        pthread_create(&s->th, NULL, site_main, s) != 0) {
        if (s->lfd >= 0)
            close(s->lfd);
        if (s->wakefd >= 0)
            close(s->wakefd);
        SSL_CTX_free(s->tls);
        pthread_mutex_destroy(&s->mu);
        free(s);
        return NULL;
    }
    return s;
}

void psite_stop(struct psite *s)
{
    if (!s)
        return;
    uint64_t one = 1;
    ssize_t w = write(s->wakefd, &one, sizeof one);
    (void)w;
    pthread_join(s->th, NULL);
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->n; i++)
        if (s->conns[i].fd >= 0)
            shutdown(s->conns[i].fd, SHUT_RDWR); /* wakes a blocked read */
    pthread_mutex_unlock(&s->mu);
    for (size_t i = 0; i < s->n; i++)
        pthread_join(s->conns[i].th, NULL);
    close(s->lfd);
    close(s->wakefd);
    SSL_CTX_free(s->tls);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

size_t psite_count(struct psite *s)
{
    pthread_mutex_lock(&s->mu);
    size_t n = s->n;
    pthread_mutex_unlock(&s->mu);
    return n;
}
