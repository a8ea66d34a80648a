/* probeconn: see probeconn.h. */
#include "proxy/services/probeconn.h"

#include "core/clock.h"
#include "proxy/wire/proxyproto.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

static long left_ms(uint64_t deadline)
{
    uint64_t now = tg__now_ms();
    return now >= deadline ? 0 : (long)(deadline - now);
}

int probeconn_dial(const struct sockaddr *addr, socklen_t len, int ms)
{
    int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, addr, len) < 0 && errno != EINPROGRESS) {
        int e = -errno;
        close(fd);
        return e;
    }
    struct pollfd pf = {.fd = fd, .events = POLLOUT};
    int rc;
    while ((rc = poll(&pf, 1, ms)) < 0 && errno == EINTR)
        ;
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    if (rc == 1)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
    if (rc != 1 || soerr) {
        int e = rc == 0 ? -ETIMEDOUT : soerr ? -soerr : -errno;
        close(fd);
        return e;
    }
    return fd;
}

int probeconn_send(int fd, const uint8_t *p, size_t n, uint64_t deadline)
{
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
            continue;
        }
        if (k < 0 && errno != EAGAIN && errno != EINTR)
            return -errno;
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        if (poll(&pf, 1, (int)left_ms(deadline)) != 1)
            return -ETIMEDOUT;
    }
    return 0;
}

int probeconn_send_proxy_v2(int fd, uint64_t deadline)
{
    struct sockaddr_storage l, r;
    socklen_t ll = sizeof l, rl = sizeof r;
    if (getsockname(fd, (struct sockaddr *)&l, &ll) != 0 ||
        getpeername(fd, (struct sockaddr *)&r, &rl) != 0)
        return -errno;
    struct proxyproto_addr a = {0};
    if (l.ss_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)&l, *d4 = (const void *)&r;
        a.family = AF_INET;
        memcpy(a.src, &s4->sin_addr, 4);
        memcpy(a.dst, &d4->sin_addr, 4);
        a.src_port = s4->sin_port;
        a.dst_port = d4->sin_port;
    } else {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&l, *d6 = (const void *)&r;
        a.family = AF_INET6;
        memcpy(a.src, &s6->sin6_addr, 16);
        memcpy(a.dst, &d6->sin6_addr, 16);
        a.src_port = s6->sin6_port;
        a.dst_port = d6->sin6_port;
    }
    uint8_t hdr[PROXYPROTO_BUILD_MAX];
    size_t n = proxyproto_build_v2(&a, hdr);
    return n ? probeconn_send(fd, hdr, n, deadline) : -EAFNOSUPPORT;
}

static void read_phase(int fd, uint64_t t0, uint64_t until, struct probeconn_res *r)
{
    struct probekind_obs *o = &r->obs;
    o->end = PROBEKIND_OPEN;
    for (;;) {
        long left = left_ms(until);
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int rc = left > 0 ? poll(&pf, 1, (int)left) : 0;
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0) {
            o->end_ms = (long)(tg__now_ms() - t0);
            return;
        }
        uint8_t tmp[4096];
        ssize_t k = recv(fd, tmp, sizeof tmp, 0);
        if (k > 0) {
            if (o->first_ms < 0)
                o->first_ms = (long)(tg__now_ms() - t0);
            size_t keep = r->cap - o->n < (size_t)k ? r->cap - o->n : (size_t)k;
            memcpy(r->buf + o->n, tmp, keep);
            o->n += keep;
            o->total += (size_t)k;
            continue;
        }
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        o->end = k == 0 ? PROBEKIND_FIN : PROBEKIND_RST;
        o->end_ms = (long)(tg__now_ms() - t0);
        return;
    }
}

/* After the peer's FIN: send more and wait (bounded) for the reset a closed peer sends
   (Linux reports it as EPIPE in CLOSE_WAIT, ECONNRESET otherwise). */
static bool reset_after(int fd, const void *p, size_t n, int wait_ms)
{
    if (send(fd, p, n, MSG_NOSIGNAL) < 0)
        return errno == ECONNRESET || errno == EPIPE;
    struct pollfd pf = {.fd = fd, .events = 0}; /* only an error or a hang-up wakes it */
    if (poll(&pf, 1, wait_ms) != 1)
        return false;
    int err = 0;
    socklen_t el = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
    return err == ECONNRESET || err == EPIPE;
}

int probeconn_run(const struct sockaddr *addr, socklen_t addr_len, const struct probeconn_req *q,
                  struct probeconn_res *r)
{
    memset(&r->obs, 0, sizeof r->obs);
    r->obs.bytes = r->buf;
    r->obs.first_ms = -1;
    int cms = q->connect_ms > 0 ? q->connect_ms : 5000;
    int wms = q->wait_ms > 0 ? q->wait_ms : 5000;
    uint64_t c0 = tg__now_ms();
    int fd = probeconn_dial(addr, addr_len, cms);
    if (fd < 0)
        return fd;
    r->connect_ms = (long)(tg__now_ms() - c0);
    if (q->proxy_v2) {
        int rc = probeconn_send_proxy_v2(fd, tg__now_ms() + (uint64_t)wms);
        /* a reset or a stall already is the peer's answer (read next); else no probe */
        if (rc < 0 && rc != -EPIPE && rc != -ECONNRESET && rc != -ETIMEDOUT) {
            close(fd);
            return rc;
        }
    }
    /* a peer that refuses more bytes has said something: it is read next */
    if (q->n)
        (void)probeconn_send(fd, q->bytes, q->n, tg__now_ms() + (uint64_t)wms);
    if (q->shut_wr)
        shutdown(fd, SHUT_WR);
    uint64_t t0 = tg__now_ms(); /* the probe's last byte left */
    read_phase(fd, t0, t0 + (uint64_t)wms, r);
    if (r->obs.end == PROBEKIND_FIN && q->after_eof)
        r->obs.reset_after_eof = reset_after(fd, q->after_eof, q->after_eof_n, 2000);
    close(fd);
    return 0;
}
