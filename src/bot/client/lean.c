/*
 * lean.c: the lean transport, HTTP/1.1 keep-alive over a plain socket or OpenSSL's libssl,
 * for bots that send a lot (tg_transport_lean(); docs/client.md says when to choose it).
 *
 * The bot owns one pool (struct tg__lean_pool): the parsed base URL, the TLS context (made on
 * first use: CA store, TLS 1.2 minimum, ALPN http/1.1, client session cache keeping the last
 * session for resumption) and a bounded LIFO stack of idle connections, under one mutex.
 * Each ctx's connection state (struct lean_conn) takes a connection from the pool for a
 * request and gives it back once the answer was read whole and the server keeps it open.
 *
 * A request: the head is built into a reused buffer; a JSON POST goes out with one sendmsg
 * (head + the encoder's buffer, no copy) or one SSL_write; forms are streamed by lean_body.c.
 * The answer is read into the connection's buffer and parsed in place by http1.c; body spans
 * go to the request's sink as they are, and the rest of a large body is received straight
 * into the call path's answer buffer (the one the JSON tokenizer reads). Nothing is allocated
 * per request once warm.
 *
 * Reuse without duplicates: an idle connection is checked (a non-blocking peek) before it is
 * used, and a closed or stray-data one is dropped. The probe costs a syscall (about as much
 * as a tenth of a local round trip), so a connection that came back less than 1 ms ago skips
 * it: a server that drops a connection idle for under a millisecond without having said
 * "Connection: close" is crashing, and the failure is still reported, never re-sent. If sending on
 * a reused connection fails before any byte left, the request is sent again on a new connection
 * (nothing was sent, so nothing can be duplicated). Once bytes were sent, a failure reports sent =
 * true and the retry policy decides (by default: not retried).
 *
 * Blocking with a deadline: sockets block with 100 ms send/receive timeouts; every timeout
 * checks the cancel callback (tg_ctx_cancel, tg_bot_shutdown) and the request's deadline.
 *
 * Secrets: the URL's path holds the token; it is only written to the socket and, at TRACE
 * level, to the bot's logger (which scrubs it). Error messages name host and port, never the
 * path.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "bot/client/http1.h"
#include "bot/client/lean_int.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "core/str.h"

#define SLICE_MS   100 /* blocking I/O wakes this often to check cancel and deadline */


struct lean_conn {
    tg_bot *bot;
    struct tg__lean_pool *pool;
    tg__buf head;
    struct lean_body body;
};

/* ---- results ---- */

int tg__lean_fail(struct lean_io *io, int code, const char *fmt, ...)
{
    tg_http_result *res = io->res;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->msg, sizeof res->msg, fmt, ap);
    va_end(ap);
    res->code = code;
    res->sent = io->sent_bytes > 0;
    switch (code) {
    case LEAN_E_TIMEOUT:
        res->status = TG_ERR_TIMEOUT;
        break;
    case LEAN_E_ABORTED:
        res->status = TG_ERR_CANCELLED;
        break;
    case LEAN_E_READ:
        res->status = TG_ERR_IO;
        break;
    case LEAN_E_NOMEM:
        res->status = TG_ERR_NOMEM;
        break;
    default:
        res->status = TG_ERR_TRANSPORT;
    }
    return -1;
}

/* 0 = go on waiting; else the failure is filled in. */
static int io_wait_check(struct lean_io *io, const char *what)
{
    if (io->cancelled && io->cancelled(io->cancel_user))
        return tg__lean_fail(io, LEAN_E_ABORTED, "cancelled while %s", what);
    if (io->deadline_ms && tg__now_ms() >= io->deadline_ms)
        return tg__lean_fail(io, LEAN_E_TIMEOUT, "no progress before the request timeout (%s)",
                             what);
    return 0;
}

/* ---- the pool ---- */

static const char *parse_base(struct tg__lean_pool *p, const char *url)
{
    const char *a = url;
    p->tls = strncmp(url, "https://", 8) == 0;
    a += p->tls ? 8 : 7;
    size_t alen = strcspn(a, "/");
    if (alen == 0 || alen >= sizeof p->authority)
        return "options: base_url has no usable host for the lean transport";
    memcpy(p->authority, a, alen);
    p->authority[alen] = '\0';
    p->origin_len = (size_t)(a - url) + alen;
    const char *h = p->authority, *port = NULL;
    size_t hlen;
    if (*h == '[') {
        const char *e = strchr(h, ']');
        if (!e)
            return "options: base_url has an unterminated IPv6 address";
        h++;
        hlen = (size_t)(e - h);
        if (e[1] == ':')
            port = e + 2;
        else if (e[1])
            return "options: base_url has garbage after the IPv6 address";
    } else {
        const char *c = strrchr(h, ':');
        hlen = c ? (size_t)(c - h) : strlen(h);
        port = c ? c + 1 : NULL;
    }
    if (hlen == 0 || hlen >= sizeof p->host || strchr(p->authority, '@'))
        return "options: base_url has no usable host for the lean transport";
    memcpy(p->host, h, hlen);
    p->host[hlen] = '\0';
    const char *pn = port && *port ? port : p->tls ? "443" : "80";
    int64_t v;
    if (strlen(pn) >= sizeof p->port || tg__parse_i64(pn, strlen(pn), &v) != 0 || v < 1 ||
        v > 65535)
        return "options: base_url has an invalid port";
    snprintf(p->port, sizeof p->port, "%s", pn);
    unsigned char ip[16];
    p->host_is_ip = inet_pton(AF_INET, p->host, ip) == 1 || inet_pton(AF_INET6, p->host, ip) == 1;
    return NULL;
}

static void sock_close(struct lean_sock *s)
{
    if (!s)
        return;
    /* No close_notify (the peer learns from the FIN), but a clean end all the same: OpenSSL
     * would otherwise mark the session unusable, and later connections resume it. */
    if (s->ssl && !s->tls_failed)
        SSL_set_shutdown(s->ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    if (s->ssl)
        SSL_free(s->ssl);
    if (s->fd >= 0)
        close(s->fd);
    tg__free(s);
}

const char *tg__lean_pool_make(const tg_bot *bot, struct tg__lean_pool **out)
{
    *out = NULL;
    if (bot->proxy)
        return "options: the lean transport (tg_transport_lean) does not support proxies; "
               "use the default libcurl transport with proxy";
    struct tg__lean_pool *p = tg__calloc(1, sizeof *p);
    if (!p)
        return "out of memory";
    p->bot = bot;
    p->max = bot->max_connections < TG__LEAN_POOL_LIMIT ? bot->max_connections
                                                        : TG__LEAN_POOL_LIMIT;
    const char *why = parse_base(p, bot->base_url);
    if (!why && !(p->idle = tg__calloc(p->max, sizeof *p->idle)))
        why = "out of memory";
    if (why) {
        tg__free(p);
        return why;
    }
    pthread_mutex_init(&p->mu, NULL);
    *out = p;
    return NULL;
}

void tg__lean_pool_destroy(struct tg__lean_pool *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->nidle; i++)
        sock_close(p->idle[i]);
    if (p->session)
        SSL_SESSION_free(p->session);
    if (p->ssl_ctx)
        SSL_CTX_free(p->ssl_ctx);
    pthread_mutex_destroy(&p->mu);
    tg__free(p->idle);
    tg__free(p);
}

const char *tg__lean_pool_new(tg_bot *bot)
{
    return tg__lean_pool_make(bot, &bot->lean);
}

void tg__lean_pool_free(tg_bot *bot)
{
    tg__lean_pool_destroy(bot->lean);
    bot->lean = NULL;
}

/* Is an idle connection still usable? Anything readable (EOF, a reset, stray bytes, a TLS
 * alert) means no. */
static bool sock_alive(struct lean_sock *s)
{
    char c;
    if (s->rlen > 0 || (s->ssl && SSL_pending(s->ssl) > 0))
        return false;
    ssize_t n = recv(s->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

uint64_t tg__lean_fresh_ns = 1000000;

static struct lean_sock *pool_take(struct tg__lean_pool *p)
{
    for (;;) {
        struct lean_sock *s = NULL;
        pthread_mutex_lock(&p->mu);
        if (p->nidle > 0)
            s = p->idle[--p->nidle];
        pthread_mutex_unlock(&p->mu);
        if (!s)
            return NULL;
        bool fresh = tg__now_ns() - s->idle_since_ns < tg__lean_fresh_ns;
        if (fresh ? s->rlen == 0 && !(s->ssl && SSL_pending(s->ssl) > 0) : sock_alive(s))
            return s;
        sock_close(s); /* closed by the server while idle: bounded by the pool's size */
    }
}

static void pool_put(struct tg__lean_pool *p, struct lean_sock *s)
{
    s->idle_since_ns = tg__now_ns();
    pthread_mutex_lock(&p->mu);
    if (p->nidle < p->max) {
        p->idle[p->nidle++] = s;
        s = NULL;
    }
    pthread_mutex_unlock(&p->mu);
    sock_close(s);
}

/* ---- TLS ---- */

/* A socket BIO whose writes never raise SIGPIPE (send with MSG_NOSIGNAL). */
static int bio_write(BIO *b, const char *p, int n)
{
    ssize_t w = send(BIO_get_fd(b, NULL), p, (size_t)n, MSG_NOSIGNAL);
    BIO_clear_retry_flags(b);
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        BIO_set_retry_write(b);
    return (int)w;
}

static BIO_METHOD *bio_method;
static pthread_once_t bio_once = PTHREAD_ONCE_INIT;

static void bio_method_init(void)
{
    const BIO_METHOD *sock = BIO_s_socket();
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR,
                                 "tgbot-lean");
    if (!m)
        return;
    BIO_meth_set_write(m, bio_write);
    BIO_meth_set_read(m, BIO_meth_get_read(sock));
    BIO_meth_set_puts(m, BIO_meth_get_puts(sock));
    BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(sock));
    BIO_meth_set_create(m, BIO_meth_get_create(sock));
    BIO_meth_set_destroy(m, BIO_meth_get_destroy(sock));
    bio_method = m;
}

static int new_session(SSL *ssl, SSL_SESSION *sess)
{
    struct tg__lean_pool *p = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
    pthread_mutex_lock(&p->mu);
    if (p->session)
        SSL_SESSION_free(p->session);
    p->session = sess;
    pthread_mutex_unlock(&p->mu);
    return 1; /* we keep the reference */
}

static void ssl_ctx_make(struct tg__lean_pool *p)
{
    const tg_bot *bot = p->bot;
    SSL_CTX *c = SSL_CTX_new(TLS_client_method());
    p->ssl_tried = true;
    p->ssl_code = LEAN_E_TLS_CONNECT;
    if (!c) {
        snprintf(p->ssl_err, sizeof p->ssl_err, "cannot create the TLS context");
        return;
    }
    SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
    /* HTTP framing says whether an answer is whole; a missing close_notify changes nothing */
    SSL_CTX_set_options(c, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_alpn_protos(c, (const unsigned char *)"\x08http/1.1", 9);
    SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(c, new_session);
    SSL_CTX_set_app_data(c, p);
    int ok = bot->ca_file || bot->ca_path
                 ? SSL_CTX_load_verify_locations(c, bot->ca_file, bot->ca_path)
                 : SSL_CTX_set_default_verify_paths(c);
    if (ok != 1) {
        unsigned long e = ERR_get_error();
        p->ssl_code = LEAN_E_CA_FILE;
        snprintf(p->ssl_err, sizeof p->ssl_err, "cannot load the CA certificates from %s: %s",
                 bot->ca_file   ? bot->ca_file
                 : bot->ca_path ? bot->ca_path
                                : "the system store",
                 e ? ERR_reason_error_string(e) : "unknown error");
        ERR_clear_error();
        SSL_CTX_free(c);
        return;
    }
    pthread_once(&bio_once, bio_method_init);
    p->ssl_ctx = c;
}

/* An SSL for fd with SNI, host name (or IP) verification and the last session. */
SSL *tg__lean_ssl_new(struct tg__lean_pool *p, int fd, struct lean_io *io)
{
    pthread_mutex_lock(&p->mu);
    if (!p->ssl_tried)
        ssl_ctx_make(p);
    SSL *ssl = p->ssl_ctx && bio_method ? SSL_new(p->ssl_ctx) : NULL;
    if (ssl && p->session)
        SSL_set_session(ssl, p->session);
    pthread_mutex_unlock(&p->mu);
    if (!ssl) {
        tg__lean_fail(io, p->ssl_ctx ? LEAN_E_NOMEM : p->ssl_code, "%s",
                      p->ssl_ctx ? "cannot create a TLS session" : p->ssl_err);
        return NULL;
    }
    BIO *b = BIO_new(bio_method);
    int ok = b != NULL;
    if (b) {
        BIO_set_fd(b, fd, BIO_NOCLOSE);
        SSL_set_bio(ssl, b, b);
    }
    if (p->host_is_ip)
        ok = ok && X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), p->host) == 1;
    else
        ok = ok && SSL_set_tlsext_host_name(ssl, p->host) == 1 && SSL_set1_host(ssl, p->host) == 1;
    if (!ok) {
        SSL_free(ssl);
        tg__lean_fail(io, LEAN_E_NOMEM, "cannot set up TLS for %s", p->host);
        return NULL;
    }
    return ssl;
}

static int tls_handshake(struct tg__lean_pool *p, struct lean_sock *s, struct lean_io *io)
{
    if (!(s->ssl = tg__lean_ssl_new(p, s->fd, io)))
        return -1;
    for (int spins = 0; spins < 1 << 20; spins++) {
        ERR_clear_error();
        int rc = SSL_connect(s->ssl);
        if (rc == 1)
            break;
        int e = SSL_get_error(s->ssl, rc);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
            if (io_wait_check(io, "in the TLS handshake") != 0)
                return -1;
            continue;
        }
        s->tls_failed = true;
        long v = SSL_get_verify_result(s->ssl);
        if (v != X509_V_OK)
            return tg__lean_fail(io, LEAN_E_PEER_VERIFY,
                                 "TLS with %s:%s: server certificate not accepted: %s", p->host,
                                 p->port, X509_verify_cert_error_string(v));
        unsigned long err = ERR_peek_last_error();
        return tg__lean_fail(io, LEAN_E_TLS_CONNECT, "TLS handshake with %s:%s failed: %s", p->host,
                             p->port,
                             err                      ? ERR_reason_error_string(err)
                             : e == SSL_ERROR_SYSCALL ? "connection closed"
                                                      : "protocol error");
    }
    tg__log((tg__logger *)&p->bot->log, TG__LOG_TRACE, "lean * %s with %s:%s%s",
            SSL_get_version(s->ssl), p->host, p->port,
            SSL_session_reused(s->ssl) ? " (session resumed)" : "");
    return 0;
}

/* ---- connecting ---- */

static int set_blocking_with_slices(int fd)
{
    int one = 1, fl = fcntl(fd, F_GETFL);
    struct timeval tv = {.tv_sec = 0, .tv_usec = SLICE_MS * 1000};
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
        return -1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return 0;
}

/* Non-blocking connect to one address, waiting in slices until connect_deadline. Returns the
 * fd, -1 (refused or unreachable: errno set; try the next address) or -2 (failure filled). */
static int connect_one(const struct addrinfo *ai, uint64_t connect_deadline, struct lean_io *io,
                       const struct tg__lean_pool *p)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 || errno == EINPROGRESS) {
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        for (int spins = 0; spins < 1 << 20; spins++) {
            int r = poll(&pfd, 1, SLICE_MS);
            if (r > 0)
                break;
            if (io_wait_check(io, "connecting") != 0 ||
                (tg__now_ms() >= connect_deadline &&
                 tg__lean_fail(io, LEAN_E_TIMEOUT, "connecting to %s:%s took longer than %u ms",
                               p->host, p->port, p->bot->connect_timeout_ms) != 0)) {
                close(fd);
                return -2;
            }
        }
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err == 0 && set_blocking_with_slices(fd) == 0)
            return fd;
        errno = err ? err : errno;
    }
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

static struct lean_sock *sock_connect(struct tg__lean_pool *p, struct lean_io *io)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_ADDRCONFIG}, *ai = NULL;
    int gai = getaddrinfo(p->host, p->port, &hints, &ai);
    if (gai != 0) {
        tg__lean_fail(io, LEAN_E_RESOLVE, "cannot resolve %s: %s", p->host, gai_strerror(gai));
        return NULL;
    }
    uint64_t cdl = tg__now_ms() + p->bot->connect_timeout_ms;
    int fd = -1, err = 0;
    for (const struct addrinfo *a = ai; a && fd == -1; a = a->ai_next) {
        fd = connect_one(a, cdl, io, p);
        err = fd == -1 ? errno : err;
    }
    freeaddrinfo(ai);
    if (fd == -2)
        return NULL;
    if (fd < 0) {
        tg__lean_fail(io, LEAN_E_CONNECT, "cannot connect to %s:%s: %s", p->host, p->port,
                      strerror(err));
        return NULL;
    }
    struct lean_sock *s = tg__malloc(sizeof *s);
    if (!s) {
        close(fd);
        tg__lean_fail(io, LEAN_E_NOMEM, "no memory for a connection");
        return NULL;
    }
    s->fd = fd;
    s->ssl = NULL;
    s->tls_failed = false;
    s->rlen = 0;
    io->res->connects++;
    if (p->tls && tls_handshake(p, s, io) != 0) {
        sock_close(s);
        return NULL;
    }
    return s;
}

/* ---- sending ---- */

/* Did a blocking call time out (a slice), so we should check and retry? */
static bool would_block(int e)
{
    return e == EAGAIN || e == EWOULDBLOCK || e == EINTR;
}

static int tls_write(struct lean_io *io, const char *p, size_t n)
{
    while (n > 0) {
        size_t w = 0;
        ERR_clear_error();
        int rc = SSL_write_ex(io->s->ssl, p, n, &w);
        if (rc == 1) {
            io->sent_bytes += w;
            p += w;
            n -= w;
            continue;
        }
        int e = SSL_get_error(io->s->ssl, rc);
        io->s->tls_failed |= e == SSL_ERROR_SSL;
        if (e != SSL_ERROR_WANT_WRITE && e != SSL_ERROR_WANT_READ)
            return tg__lean_fail(io, LEAN_E_SEND, "sending over TLS failed: %s",
                                 e == SSL_ERROR_SYSCALL ? strerror(errno) : "TLS error");
        if (io_wait_check(io, "sending the request") != 0)
            return -1;
    }
    return 0;
}

int tg__lean_send2(struct lean_io *io, const void *a, size_t an, const void *b, size_t bn)
{
    struct iovec iov[2] = {{(void *)a, an}, {(void *)b, bn}};
    size_t total = an + bn;
    if (io->capture) { /* rendering a request into memory (the async client) */
        if (tg__buf_append(io->capture, a, an) != 0 || tg__buf_append(io->capture, b, bn) != 0)
            return tg__lean_fail(io, LEAN_E_NOMEM, "no memory for the request body");
        io->sent_bytes += total;
        return 0;
    }
    if (io->s->ssl) {
        if (tls_write(io, a, an) != 0)
            return -1;
        return bn ? tls_write(io, b, bn) : 0;
    }
    for (size_t done = 0; done < total;) {
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};
        ssize_t w = sendmsg(io->s->fd, &m, MSG_NOSIGNAL);
        if (w < 0 && would_block(errno)) {
            if (io_wait_check(io, "sending the request") != 0)
                return -1;
            continue;
        }
        if (w < 0)
            return tg__lean_fail(io, LEAN_E_SEND, "sending the request failed: %s",
                                 strerror(errno));
        done += (size_t)w;
        io->sent_bytes += (size_t)w;
        /* advance the two pieces past what went out */
        size_t k = (size_t)w < iov[0].iov_len ? (size_t)w : iov[0].iov_len;
        iov[0].iov_base = (char *)iov[0].iov_base + k;
        iov[0].iov_len -= k;
        if ((size_t)w > k) {
            iov[1].iov_base = (char *)iov[1].iov_base + ((size_t)w - k);
            iov[1].iov_len -= (size_t)w - k;
        }
    }
    return 0;
}

int tg__lean_send(struct lean_io *io, const void *p, size_t n)
{
    return tg__lean_send2(io, p, n, NULL, 0);
}

/* ---- receiving ---- */

/* Read up to room bytes into p. Returns bytes read, 0 at EOF, -1 (filled). */
static ssize_t sock_read(struct lean_io *io, char *p, size_t room)
{
    struct lean_sock *s = io->s;
    for (int spins = 0; spins < 1 << 24; spins++) {
        if (s->ssl) {
            size_t got = 0;
            ERR_clear_error();
            errno = 0;
            int rc = SSL_read_ex(s->ssl, p, room, &got);
            if (rc == 1)
                return (ssize_t)got;
            int e = SSL_get_error(s->ssl, rc);
            if (e == SSL_ERROR_ZERO_RETURN)
                return 0;
            if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 && errno == 0)
                return 0; /* EOF without close_notify: as good as a FIN for HTTP framing */
            s->tls_failed |= e == SSL_ERROR_SSL;
            if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
                return tg__lean_fail(io, LEAN_E_RECV, "receiving over TLS failed: %s",
                                     e == SSL_ERROR_SYSCALL ? strerror(errno) : "TLS error");
        } else {
            ssize_t n = recv(s->fd, p, room, 0);
            if (n >= 0)
                return n;
            if (!would_block(errno))
                return tg__lean_fail(io, LEAN_E_RECV, "receiving the answer failed: %s",
                                     strerror(errno));
        }
        if (io_wait_check(io, "waiting for the answer") != 0)
            return -1;
    }
    return tg__lean_fail(io, LEAN_E_TIMEOUT, "waiting for the answer did not end");
}

static int answer_done(struct lean_io *io, const tg__h1 *h, size_t leftover, bool *keep)
{
    /* bytes after the answer were never asked for: do not reuse such a connection */
    *keep = h->keep_alive && leftover == 0;
    io->s->rlen = 0;
    return 0;
}

static int answer_eof(struct lean_io *io, tg__h1 *h, bool received, bool *keep,
                      const struct tg__lean_pool *p)
{
    if (tg__h1_eof(h) == TG__H1_DONE)
        return answer_done(io, h, 0, keep);
    if (!received)
        return tg__lean_fail(io, LEAN_E_NOTHING, "%s:%s closed the connection without answering",
                             p->host, p->port);
    return tg__lean_fail(io, LEAN_E_PARTIAL, "%s:%s closed the connection mid-answer: %s", p->host,
                         p->port, h->err);
}

/* Receive body bytes the parser need not see (tg__h1_body_left) straight into the call
 * path's answer buffer, the one the JSON tokenizer reads: no copy through the connection's
 * buffer. Returns what sock_read returns. */
static ssize_t read_direct(struct lean_io *io, const tg_http_request *req, tg__h1 *h)
{
    uint64_t left = tg__h1_body_left(h);
    size_t room, want = left < LEAN_DIRECT ? (size_t)left : LEAN_DIRECT;
    char *dst = tg__resp_room(req->write_user, want, &room);
    if (!dst) {
        io->res->aborted = true;
        return tg__lean_fail(io, LEAN_E_WRITE, "the answer's body was refused by its sink");
    }
    ssize_t n = sock_read(io, dst, room);
    if (n > 0) {
        tg__resp_commit(req->write_user, (size_t)n);
        tg__h1_body_skip(h, (size_t)n);
    }
    return n;
}

/* Read and parse the answer in place. Body bytes that came with the head (or with chunk
 * framing) go to the sink from the connection's buffer; the rest of a body, when the sink is
 * the call path's own, is received straight into the answer buffer (read_direct). */
static int read_answer(struct lean_io *io, const tg_http_request *req, bool *keep,
                       const struct tg__lean_pool *p)
{
    struct lean_sock *s = io->s;
    tg__h1 h;
    tg__h1_init(&h, LEAN_RBUF / 2);
    size_t off = 0;
    bool received = false, direct = req->write == tg__resp_sink;
    for (;;) {
        size_t used, bl = 0;
        const char *b = NULL;
        enum tg__h1_ev ev = tg__h1_feed(&h, s->rbuf + off, s->rlen - off, &used, &b, &bl);
        off += used;
        if (ev == TG__H1_HEAD) {
            io->res->http_status = h.status;
            tg__log((tg__logger *)&p->bot->log, TG__LOG_TRACE, "lean < HTTP/1.%d %d", h.minor,
                    h.status);
            if (req->on_status)
                req->on_status(req->write_user, h.status);
        } else if (ev == TG__H1_BODY && req->write(req->write_user, b, bl) != bl) {
            io->res->aborted = true;
            return tg__lean_fail(io, LEAN_E_WRITE, "the answer's body was refused by its sink");
        } else if (ev == TG__H1_DONE) {
            return answer_done(io, &h, s->rlen - off, keep);
        } else if (ev == TG__H1_ERROR) {
            return tg__lean_fail(io, LEAN_E_WEIRD_REPLY,
                                 "malformed HTTP answer from %s:%s: %s (at byte %llu)", p->host,
                                 p->port, h.err, (unsigned long long)h.err_at);
        } else if (ev == TG__H1_MORE) {
            memmove(s->rbuf, s->rbuf + off, s->rlen - off);
            s->rlen -= off;
            off = 0;
            if (s->rlen == sizeof s->rbuf)
                return tg__lean_fail(io, LEAN_E_WEIRD_REPLY, "answer framing overflows the buffer");
            ssize_t n;
            if (direct && s->rlen == 0 && tg__h1_body_left(&h) > 0) {
                n = read_direct(io, req, &h);
            } else {
                n = sock_read(io, s->rbuf + s->rlen, sizeof s->rbuf - s->rlen);
                s->rlen += n > 0 ? (size_t)n : 0;
            }
            if (n < 0)
                return -1;
            if (n == 0)
                return answer_eof(io, &h, received, keep, p);
            received = true;
        }
    }
}

/* ---- the request ---- */

int tg__lean_put_u64(tg__buf *b, uint64_t v)
{
    char tmp[24];
    size_t i = sizeof tmp;
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return tg__buf_append(b, tmp + i, sizeof tmp - i);
}

/* The request head (and, over TLS, the JSON body after it: one SSL_write). */
static int build_head(struct lean_conn *c, const tg_http_request *req, const char *path,
                      struct lean_io *io, bool *form, bool *chunked)
{
    tg__buf *h = &c->head;
    int rc = 0;
    tg__buf_reset(h);
    *form = req->post && req->nfields + req->nfiles > 0;
    rc |= tg__buf_puts(h, req->post ? "POST " : "GET ");
    rc |= tg__buf_puts(h, path);
    rc |= tg__buf_append(h, " HTTP/1.1\r\nHost: ", 17);
    rc |= tg__buf_puts(h, c->pool->authority);
    rc |= tg__buf_append(h, "\r\nUser-Agent: ", 14);
    rc |= tg__buf_puts(h, c->bot->user_agent);
    rc |= tg__buf_append(h, "\r\n", 2);
    if (rc == 0 && *form) {
        if (tg__lean_form_head(io, &c->body, req, h, chunked) != 0)
            return -1;
    } else if (req->post) {
        rc |= tg__buf_puts(h, "Content-Type: application/json\r\nContent-Length: ");
        rc |= tg__lean_put_u64(h, req->body_len);
        rc |= tg__buf_append(h, "\r\n", 2);
    }
    rc |= tg__buf_append(h, "\r\n", 2);
    if (rc == 0 && req->post && !*form && c->pool->tls && req->body_len)
        rc |= tg__buf_append(h, req->body, req->body_len);
    if (rc != 0)
        return tg__lean_fail(io, LEAN_E_NOMEM, "no memory for the request head");
    return 0;
}

static int send_request(struct lean_conn *c, const tg_http_request *req, struct lean_io *io,
                        bool form, bool chunked)
{
    if (form)
        return tg__lean_send(io, c->head.data, c->head.len) != 0
                   ? -1
                   : tg__lean_form_send(io, &c->body, req, chunked);
    if (req->post && !c->pool->tls)
        return tg__lean_send2(io, c->head.data, c->head.len, req->body, req->body_len);
    return tg__lean_send(io, c->head.data, c->head.len);
}

/* One exchange on a connection from the pool (or a new one). Returns 1 when a reused
 * connection failed before a byte was sent (worth one more go), else 0. */
static int exchange(struct lean_conn *c, const tg_http_request *req, struct lean_io *io, bool form,
                    bool chunked)
{
    struct tg__lean_pool *p = c->pool;
    struct lean_sock *s = pool_take(p);
    bool reused = s != NULL;
    if (!s && !(s = sock_connect(p, io)))
        return 0;
    io->s = s;
    io->sent_bytes = 0;
    bool keep = false;
    int rc = send_request(c, req, io, form, chunked);
    if (rc != 0 && reused && io->sent_bytes == 0 && io->res->status == TG_ERR_TRANSPORT) {
        sock_close(s);
        return 1;
    }
    if (rc == 0)
        rc = read_answer(io, req, &keep, p);
    if (rc == 0) {
        io->res->status = TG_OK;
        io->res->sent = true;
    }
    if (rc == 0 && keep)
        pool_put(p, s);
    else
        sock_close(s);
    return 0;
}

static void perform(void *cp, const tg_http_request *req, tg_http_result *res,
                    bool (*cancelled)(void *), void *cancel_user)
{
    struct lean_conn *c = cp;
    struct tg__lean_pool *p = c->pool;
    struct lean_io io = {.cancelled = cancelled, .cancel_user = cancel_user, .res = res};
    bool form = false, chunked = false;
    memset(res, 0, sizeof *res);
    if (req->timeout_ms)
        io.deadline_ms = tg__now_ms() + req->timeout_ms;
    /* every URL the client builds starts with the base URL the pool was made from */
    const char *path = req->url + p->origin_len;
    if (strncmp(req->url, c->bot->base_url, p->origin_len) != 0 || *path != '/') {
        tg__lean_fail(&io, LEAN_E_MALFORMAT, "the request URL is not under the bot's base URL");
        return;
    }
    if (build_head(c, req, path, &io, &form, &chunked) != 0)
        return;
    if (tg__log_enabled(&c->bot->log, TG__LOG_TRACE))
        tg__log(&c->bot->log, TG__LOG_TRACE, "lean > %s %s HTTP/1.1 (%s:%s)",
                req->post ? "POST" : "GET", path, p->host, p->port);
    if (exchange(c, req, &io, form, chunked) == 1) {
        uint32_t connects = res->connects;
        memset(res, 0, sizeof *res);
        res->connects = connects;
        exchange(c, req, &io, form, chunked);
    }
}

static void *conn_new(void *user, const tg_bot *cbot)
{
    tg_bot *bot = (tg_bot *)cbot;
    (void)user;
    if (!bot->lean)
        return NULL;
    struct lean_conn *c = tg__calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->bot = bot;
    c->pool = bot->lean;
    tg__buf_init(&c->head, 0);
    tg__lean_body_init(&c->body);
    return c;
}

static void conn_free(void *cp)
{
    struct lean_conn *c = cp;
    if (!c)
        return;
    if (c->head.data) /* it held the token */
        memset(c->head.data, 0, c->head.cap);
    tg__buf_cleanup(&c->head);
    tg__lean_body_cleanup(&c->body);
    tg__free(c);
}

static const tg_transport lean_transport = {
    .conn_new = conn_new,
    .perform = perform,
    .conn_free = conn_free,
    .user = NULL,
};

TG_API const tg_transport *tg_transport_lean(void)
{
    return &lean_transport;
}

bool tg__lean_is(const tg_transport *t)
{
    return t->perform == perform;
}
