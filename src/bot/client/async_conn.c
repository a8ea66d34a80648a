/*
 * async_conn.c: the async client's connections (async_int.h): non-blocking connect over
 * every resolved address, OpenSSL's non-blocking handshake, the request sent from the call's
 * wire buffer (sendmsg with the JSON body as a second piece over plain TCP; one SSL_write
 * over TLS), the answer read into the connection's buffer and parsed in place by http1.c.
 * One request per connection at a time (no pipelining: async.h says why).
 *
 * Failures are reported exactly as the lean transport reports them (same codes, same
 * texts, the same `sent` rule: a byte handed to the kernel makes a lost connection
 * "maybe sent"), so the call path's classification and retry policy apply unchanged.
 *
 * The idle pool: a connection whose answer was read whole and that the server keeps open is
 * watched for reading while idle (a FIN or stray bytes close it at once), and probed with a
 * non-blocking MSG_PEEK before reuse when it has been idle for a millisecond or more. A
 * reused connection that fails before a single byte was sent is replaced once, silently
 * (nothing reached the server).
 *
 * Name resolution (getaddrinfo) blocks: it runs once per handle, and again after a
 * connection attempt failed on every address.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "bot/client/async_int.h"
#include "core/alloc.h"
#include "core/clock.h"

#define FRESH_NS 1000000u /* idle for less than this: reused without the probe */

static void set_watch(struct tg__aconn *k, int ev)
{
    if (k->watched != ev) {
        tg__async_watch(k->a, k->fd, ev);
        k->watched = ev;
    }
}

static int fd_register(tg_async *a, struct tg__aconn *k)
{
    size_t fd = (size_t)k->fd;
    if (fd >= a->byfd_cap) {
        size_t cap = a->byfd_cap ? a->byfd_cap : 64;
        while (cap <= fd)
            cap *= 2;
        struct tg__aconn **t = tg__realloc(a->byfd, cap * sizeof *t);
        if (!t)
            return -1;
        memset(t + a->byfd_cap, 0, (cap - a->byfd_cap) * sizeof *t);
        a->byfd = t;
        a->byfd_cap = cap;
    }
    a->byfd[fd] = k;
    return 0;
}

static void close_fd(struct tg__aconn *k)
{
    if (k->fd < 0)
        return;
    set_watch(k, 0);
    if ((size_t)k->fd < k->a->byfd_cap)
        k->a->byfd[k->fd] = NULL;
    if (k->ssl) {
        if (!k->tls_failed) /* a clean end: the session stays resumable */
            SSL_set_shutdown(k->ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
        SSL_free(k->ssl);
        k->ssl = NULL;
    }
    close(k->fd);
    k->fd = -1;
    k->watched = 0;
}

static void idle_unlink(tg_async *a, struct tg__aconn *k)
{
    if (k->prev)
        k->prev->next = k->next;
    else
        a->idle = k->next;
    if (k->next)
        k->next->prev = k->prev;
    k->next = k->prev = NULL;
}

static void conn_destroy(struct tg__aconn *k)
{
    tg_async *a = k->a;
    if (k->state == CN_IDLE)
        idle_unlink(a, k);
    tg__timer_cancel(&a->timers, &k->timer);
    close_fd(k);
    a->nconns--;
    a->stats.connections = a->nconns;
    tg__free(k);
}

void tg__aconn_close_idle(tg_async *a)
{
    while (a->idle)
        conn_destroy(a->idle);
}

/* The attempt on k ended with k->res: k goes idle (keep) or is closed, the call is told. */
static void attempt_end(struct tg__aconn *k, bool keep)
{
    tg_async *a = k->a;
    struct tg__acall *c = k->call;
    tg_http_result res = k->res;
    k->call = NULL;
    if (c)
        c->conn = NULL;
    if (keep) {
        tg__timer_cancel(&a->timers, &k->timer);
        k->state = CN_IDLE;
        k->reused = true;
        k->idle_since_ns = tg__now_ns();
        k->rlen = 0;
        k->prev = NULL;
        k->next = a->idle;
        if (a->idle)
            a->idle->prev = k;
        a->idle = k;
        set_watch(k, TG_ASYNC_READ);
    } else {
        conn_destroy(k);
    }
    if (c)
        tg__acall_attempt_done(c, &res);
    tg__async_pump(a);
}

static int conn_failv(struct tg__aconn *k, int code, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
static int conn_failv(struct tg__aconn *k, int code, const char *fmt, va_list ap)
{
    char msg[sizeof k->res.msg];
    vsnprintf(msg, sizeof msg, fmt, ap);
    struct lean_io io = {.res = &k->res, .sent_bytes = k->sent};
    return tg__lean_fail(&io, code, "%s", msg);
}

/* Record a failure on k without ending anything (the caller decides). */
static void conn_note(struct tg__aconn *k, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void conn_note(struct tg__aconn *k, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    conn_failv(k, code, fmt, ap);
    va_end(ap);
}

/* Fail the attempt: k is closed, the call is told. */
static void conn_fail(struct tg__aconn *k, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void conn_fail(struct tg__aconn *k, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    conn_failv(k, code, fmt, ap);
    va_end(ap);
    attempt_end(k, false);
}

static const char *state_what(const struct tg__aconn *k)
{
    switch (k->state) {
    case CN_CONNECTING:
        return "connecting";
    case CN_HANDSHAKE:
        return "in the TLS handshake";
    case CN_SENDING:
        return "sending the request";
    default:
        return "waiting for the answer";
    }
}

void tg__aconn_abort(struct tg__aconn *k, int code, bool quiet, const char *msg)
{
    conn_note(k, code, "%s (%s)", msg, state_what(k));
    if (!quiet) {
        attempt_end(k, false);
        return;
    }
    struct tg__acall *c = k->call;
    k->call = NULL;
    if (c)
        c->conn = NULL;
    tg_async *a = k->a;
    conn_destroy(k);
    tg__async_pump(a);
}

/* ---- sending ---- */

static void start_recv(struct tg__aconn *k)
{
    k->state = CN_RECEIVING;
    tg__h1_init(&k->h1, LEAN_RBUF / 2);
    k->rlen = 0;
    k->received = false;
    set_watch(k, TG_ASYNC_READ);
}

/* A reused connection that died before taking a byte: the call goes on a new one, once. */
static bool resend_elsewhere(struct tg__aconn *k)
{
    struct tg__acall *c = k->call;
    if (!k->reused || k->sent != 0 || c->reconnected || k->res.status != TG_ERR_TRANSPORT)
        return false;
    tg_async *a = k->a;
    c->reconnected = true;
    k->call = NULL;
    c->conn = NULL;
    conn_destroy(k);
    tg__aconn_open(a, c);
    return true;
}

static void do_send(struct tg__aconn *k)
{
    struct tg__acall *c = k->call;
    size_t wlen = c->wire.len, total = wlen + c->body_len;
    while (k->sent < total) {
        if (k->ssl) {
            size_t w = 0;
            ERR_clear_error();
            int rc = SSL_write_ex(k->ssl, c->wire.data + k->sent, wlen - k->sent, &w);
            if (rc == 1) {
                k->sent += w;
                continue;
            }
            int e = SSL_get_error(k->ssl, rc);
            if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
                set_watch(k, e == SSL_ERROR_WANT_WRITE ? TG_ASYNC_WRITE : TG_ASYNC_READ);
                return;
            }
            k->tls_failed |= e == SSL_ERROR_SSL;
            conn_note(k, LEAN_E_SEND, "sending over TLS failed: %s",
                      e == SSL_ERROR_SYSCALL ? strerror(errno) : "TLS error");
        } else {
            struct iovec iov[2];
            int n = 0;
            if (k->sent < wlen)
                iov[n++] = (struct iovec){c->wire.data + k->sent, wlen - k->sent};
            size_t boff = k->sent > wlen ? k->sent - wlen : 0;
            if (c->body_len > boff)
                iov[n++] = (struct iovec){(char *)c->body + boff, c->body_len - boff};
            struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
            ssize_t w = sendmsg(k->fd, &m, MSG_NOSIGNAL);
            if (w >= 0) {
                k->sent += (size_t)w;
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
                set_watch(k, TG_ASYNC_WRITE);
                return;
            }
            conn_note(k, LEAN_E_SEND, "sending the request failed: %s", strerror(errno));
        }
        if (!resend_elsewhere(k))
            attempt_end(k, false);
        return;
    }
    start_recv(k);
}

static void start_send(struct tg__aconn *k)
{
    tg_async *a = k->a;
    tg__timer_cancel(&a->timers, &k->timer);
    k->state = CN_SENDING;
    k->sent = 0;
    if (tg__log_enabled(&a->bot->log, TG__LOG_TRACE))
        tg__log(&a->bot->log, TG__LOG_TRACE, "async > POST %s (%s:%s)",
                tg__buf_cstr(&k->call->ctx->url) + a->pool->origin_len, a->pool->host,
                a->pool->port);
    do_send(k);
}

/* ---- receiving ---- */

static void answer_ok(struct tg__aconn *k, bool keep)
{
    k->res.status = TG_OK;
    k->res.sent = true;
    attempt_end(k, keep);
}

/* Parse what rbuf holds. 1: the attempt ended (k may be gone); 0: more bytes needed. */
static int parse(struct tg__aconn *k)
{
    struct tg__lean_pool *p = k->a->pool;
    size_t off = 0;
    for (;;) {
        size_t used, bl = 0;
        const char *b = NULL;
        enum tg__h1_ev ev = tg__h1_feed(&k->h1, k->rbuf + off, k->rlen - off, &used, &b, &bl);
        off += used;
        switch (ev) {
        case TG__H1_HEAD:
            k->res.http_status = k->h1.status;
            tg__log(&k->a->bot->log, TG__LOG_TRACE, "async < HTTP/1.%d %d", k->h1.minor,
                    k->h1.status);
            break;
        case TG__H1_BODY:
            if (tg__resp_sink(k->call->ctx, b, bl) != bl) {
                k->res.aborted = true;
                conn_fail(k, LEAN_E_WRITE, "the answer's body was refused by its sink");
                return 1;
            }
            break;
        case TG__H1_DONE:
            answer_ok(k, k->h1.keep_alive && off == k->rlen);
            return 1;
        case TG__H1_ERROR:
            conn_fail(k, LEAN_E_WEIRD_REPLY, "malformed HTTP answer from %s:%s: %s (at byte %llu)",
                      p->host, p->port, k->h1.err, (unsigned long long)k->h1.err_at);
            return 1;
        case TG__H1_MORE:
            memmove(k->rbuf, k->rbuf + off, k->rlen - off);
            k->rlen -= off;
            return 0;
        }
    }
}

static void answer_eof(struct tg__aconn *k)
{
    struct tg__lean_pool *p = k->a->pool;
    if (tg__h1_eof(&k->h1) == TG__H1_DONE)
        answer_ok(k, false);
    else if (!k->received)
        conn_fail(k, LEAN_E_NOTHING, "%s:%s closed the connection without answering", p->host,
                  p->port);
    else
        conn_fail(k, LEAN_E_PARTIAL, "%s:%s closed the connection mid-answer: %s", p->host,
                  p->port, k->h1.err);
}

static void do_recv(struct tg__aconn *k)
{
    /* bounded: each pass reads fresh bytes or leaves; a flood of bytes ends with the answer
     * or the response cap */
    for (;;) {
        size_t room = sizeof k->rbuf - k->rlen;
        if (room == 0) {
            conn_fail(k, LEAN_E_WEIRD_REPLY, "answer framing overflows the buffer");
            return;
        }
        ssize_t n;
        if (k->ssl) {
            size_t got = 0;
            ERR_clear_error();
            errno = 0;
            int rc = SSL_read_ex(k->ssl, k->rbuf + k->rlen, room, &got);
            if (rc == 1) {
                n = (ssize_t)got;
            } else {
                int e = SSL_get_error(k->ssl, rc);
                if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
                    set_watch(k, e == SSL_ERROR_WANT_READ ? TG_ASYNC_READ : TG_ASYNC_WRITE);
                    return;
                }
                if (e == SSL_ERROR_ZERO_RETURN ||
                    (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 && errno == 0)) {
                    n = 0; /* EOF, with or without close_notify: HTTP framing decides */
                } else {
                    k->tls_failed |= e == SSL_ERROR_SSL;
                    conn_fail(k, LEAN_E_RECV, "receiving over TLS failed: %s",
                              e == SSL_ERROR_SYSCALL ? strerror(errno) : "TLS error");
                    return;
                }
            }
        } else {
            n = recv(k->fd, k->rbuf + k->rlen, room, 0);
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
                return;
            if (n < 0) {
                conn_fail(k, LEAN_E_RECV, "receiving the answer failed: %s", strerror(errno));
                return;
            }
        }
        if (n == 0) {
            answer_eof(k);
            return;
        }
        k->received = true;
        k->rlen += (size_t)n;
        if (parse(k))
            return;
    }
}

/* ---- connecting ---- */

static void step_handshake(struct tg__aconn *k)
{
    struct tg__lean_pool *p = k->a->pool;
    ERR_clear_error();
    int rc = SSL_connect(k->ssl);
    if (rc == 1) {
        tg__log(&k->a->bot->log, TG__LOG_TRACE, "async * %s with %s:%s%s",
                SSL_get_version(k->ssl), p->host, p->port,
                SSL_session_reused(k->ssl) ? " (session resumed)" : "");
        start_send(k);
        return;
    }
    int e = SSL_get_error(k->ssl, rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        set_watch(k, e == SSL_ERROR_WANT_READ ? TG_ASYNC_READ : TG_ASYNC_WRITE);
        return;
    }
    k->tls_failed = true;
    long v = SSL_get_verify_result(k->ssl);
    if (v != X509_V_OK) {
        conn_fail(k, LEAN_E_PEER_VERIFY, "TLS with %s:%s: server certificate not accepted: %s",
                  p->host, p->port, X509_verify_cert_error_string(v));
        return;
    }
    unsigned long err = ERR_peek_last_error();
    conn_fail(k, LEAN_E_TLS_CONNECT, "TLS handshake with %s:%s failed: %s", p->host, p->port,
              err                      ? ERR_reason_error_string(err)
              : e == SSL_ERROR_SYSCALL ? "connection closed"
                                       : "protocol error");
}

static void connected(struct tg__aconn *k)
{
    int one = 1;
    setsockopt(k->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct tg__lean_pool *p = k->a->pool;
    if (!p->tls) {
        start_send(k);
        return;
    }
    struct lean_io io = {.res = &k->res};
    if (!(k->ssl = tg__lean_ssl_new(p, k->fd, &io))) {
        attempt_end(k, false);
        return;
    }
    k->state = CN_HANDSHAKE;
    step_handshake(k);
}

static void on_conn_timer(tg__timer *t, uint64_t now)
{
    struct tg__aconn *k = t->user;
    struct tg__lean_pool *p = k->a->pool;
    (void)now;
    conn_fail(k, LEAN_E_TIMEOUT, "connecting to %s:%s took longer than %u ms", p->host, p->port,
              k->a->bot->connect_timeout_ms);
}

/* Try k->ai and the addresses after it. */
static void connect_next(struct tg__aconn *k)
{
    tg_async *a = k->a;
    struct tg__lean_pool *p = a->pool;
    int err = 0;
    for (; k->ai; k->ai = k->ai->ai_next) {
        const struct addrinfo *ai = k->ai;
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                        ai->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        k->fd = fd;
        if (fd_register(a, k) != 0) {
            close(fd);
            k->fd = -1;
            conn_fail(k, LEAN_E_NOMEM, "no memory for a connection");
            return;
        }
        int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
        if (rc == 0) {
            connected(k);
            return;
        }
        if (errno == EINPROGRESS) {
            k->state = CN_CONNECTING;
            set_watch(k, TG_ASYNC_WRITE);
            return;
        }
        err = errno;
        close_fd(k);
    }
    if (a->ai) { /* every address failed: resolve again next time */
        freeaddrinfo(a->ai);
        a->ai = NULL;
    }
    conn_fail(k, LEAN_E_CONNECT, "cannot connect to %s:%s: %s", p->host, p->port,
              strerror(err ? err : ECONNREFUSED));
}

static void on_connect_ready(struct tg__aconn *k)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(k->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    if (err == 0) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        if (getpeername(k->fd, (struct sockaddr *)&ss, &sl) != 0 && errno == ENOTCONN)
            return; /* not connected yet: a stale readiness */
        connected(k);
        return;
    }
    close_fd(k);
    k->ai = k->ai->ai_next;
    connect_next(k);
}

void tg__aconn_open(tg_async *a, struct tg__acall *c)
{
    struct tg__lean_pool *p = a->pool;
    struct tg__aconn *k = tg__malloc(sizeof *k);
    if (!k) {
        tg_http_result res = {0};
        struct lean_io io = {.res = &res};
        tg__lean_fail(&io, LEAN_E_NOMEM, "no memory for a connection");
        tg__acall_attempt_done(c, &res);
        return;
    }
    memset(k, 0, offsetof(struct tg__aconn, rbuf));
    k->a = a;
    k->fd = -1;
    k->call = c;
    c->conn = k;
    k->res.connects = 1;
    tg__timer_init(&k->timer, on_conn_timer, k);
    a->nconns++;
    a->stats.connects++;
    a->stats.connections = a->nconns;
    if (a->nconns > a->stats.peak_connections)
        a->stats.peak_connections = a->nconns;
    if (a->bot->connect_timeout_ms)
        tg__timer_add_in(&a->timers, &k->timer, (uint64_t)a->bot->connect_timeout_ms * 1000000u);
    if (!a->ai) {
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_ADDRCONFIG};
        int gai = getaddrinfo(p->host, p->port, &hints, &a->ai);
        if (gai != 0) {
            a->ai = NULL;
            conn_fail(k, LEAN_E_RESOLVE, "cannot resolve %s: %s", p->host, gai_strerror(gai));
            return;
        }
    }
    k->ai = a->ai;
    connect_next(k);
}

/* ---- the idle pool ---- */

static bool alive(struct tg__aconn *k)
{
    if (k->rlen > 0 || (k->ssl && SSL_pending(k->ssl) > 0))
        return false;
    if (tg__now_ns() - k->idle_since_ns < FRESH_NS)
        return true;
    char ch;
    ssize_t n = recv(k->fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

struct tg__aconn *tg__aconn_take_idle(tg_async *a)
{
    while (a->idle) {
        struct tg__aconn *k = a->idle;
        if (alive(k)) {
            idle_unlink(a, k);
            return k;
        }
        conn_destroy(k);
    }
    return NULL;
}

void tg__aconn_start(struct tg__aconn *k, struct tg__acall *c)
{
    k->call = c;
    c->conn = k;
    memset(&k->res, 0, sizeof k->res);
    start_send(k);
}

void tg__aconn_event(tg_async *a, int fd, int events)
{
    if (fd < 0 || (size_t)fd >= a->byfd_cap || !a->byfd[fd])
        return;
    struct tg__aconn *k = a->byfd[fd];
    if (events & TG_ASYNC_ERROR)
        events |= TG_ASYNC_READ | TG_ASYNC_WRITE;
    switch (k->state) {
    case CN_CONNECTING:
        if (events & TG_ASYNC_WRITE)
            on_connect_ready(k);
        break;
    case CN_HANDSHAKE:
        step_handshake(k);
        break;
    case CN_SENDING:
        do_send(k);
        break;
    case CN_RECEIVING:
        do_recv(k);
        break;
    case CN_IDLE:
        if (events & TG_ASYNC_READ) { /* closed by the server (or stray bytes) while idle */
            conn_destroy(k);
            tg__async_pump(a);
        }
        break;
    }
}
