/* proxy_probe: one prober connection and what it saw. See proxy_probe.h. */
#include "proxy_probe.h"

#include "proxy_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int dial(const char *addr, uint16_t port)
{
    struct sockaddr_storage ss;
    socklen_t len;
    if (psock_addr_parse(addr, port, &ss, &len) < 0)
        return -EINVAL;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&ss, len) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    return fd;
}

static void pause_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Read until FIN, RST or the deadline (absolute, ms). */
static void read_phase(int fd, long t0, long until, struct pprobe_result *r)
{
    r->end = PPROBE_OPEN;
    for (;;) {
        long left = until - now_ms();
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&pf, 1, (int)left) == 0) {
            r->end_ms = now_ms() - t0;
            return;
        }
        uint8_t tmp[4096];
        ssize_t k = recv(fd, tmp, sizeof tmp, 0);
        if (k > 0) {
            if (r->first_ms < 0)
                r->first_ms = now_ms() - t0;
            size_t keep = r->n < PPROBE_MAX_BYTES ? PPROBE_MAX_BYTES - r->n : 0;
            memcpy(r->bytes + r->n, tmp, (size_t)k < keep ? (size_t)k : keep);
            r->n += (size_t)k;
            continue;
        }
        if (k < 0 && errno == EINTR)
            continue;
        r->end = k == 0 ? PPROBE_FIN : PPROBE_RST;
        r->end_ms = now_ms() - t0;
        return;
    }
}

/* After the peer's FIN: send more, and wait (bounded) for the reset a closed peer sends
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

int pprobe_run(const char *addr, uint16_t port, const struct pprobe *p, struct pprobe_result *r)
{
    memset(r, 0, sizeof *r);
    r->first_ms = -1;
    long t0 = now_ms();
    int fd = dial(addr, port);
    if (fd < 0)
        return fd;
    if (p->n && send(fd, p->bytes, p->n, MSG_NOSIGNAL) < 0)
        goto read;
    if (p->bytes2) {
        pause_ms(p->pause_ms);
        if (send(fd, p->bytes2, p->n2, MSG_NOSIGNAL) < 0)
            goto read;
    }
    if (p->shut_wr)
        shutdown(fd, SHUT_WR);
read:
    read_phase(fd, t0, t0 + p->wait_ms, r);
    if (r->end == PPROBE_FIN && p->after_eof)
        r->reset_after_eof = reset_after(fd, p->after_eof, p->after_eof_n, 2000);
    close(fd);
    return 0;
}

const char *pprobe_end_name(enum pprobe_end e)
{
    return e == PPROBE_FIN ? "FIN" : e == PPROBE_RST ? "RST" : "open";
}
