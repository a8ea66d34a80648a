/* pp_site: see pp_site.h. */
#include "pp_site.h"

#include "proxy_util.h"
#include "tgtest.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const uint8_t sig[12] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
                                0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a};

/* Read exactly n bytes within 5 s: 0, or -1. */
static int read_n(int fd, uint8_t *p, size_t n)
{
    while (n > 0) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, 5000) != 1)
            return -1;
        ssize_t k = recv(fd, p, n, 0);
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* The v2 header at the start of fd's stream: 0 with the source as "ip:port", or -1. */
static int take_header(int fd, char *src, size_t cap)
{
    uint8_t h[16], body[216];
    if (read_n(fd, h, sizeof h) != 0 || memcmp(h, sig, sizeof sig) != 0)
        return -1;
    size_t len = (size_t)h[14] << 8 | h[15];
    if (h[12] != 0x21 || len > sizeof body || read_n(fd, body, len) != 0)
        return -1; /* version 2, command PROXY */
    char ip[INET6_ADDRSTRLEN];
    if (h[13] == 0x11 && len >= 12) { /* TCP over IPv4: src, dst, src port, dst port */
        inet_ntop(AF_INET, body, ip, sizeof ip);
        snprintf(src, cap, "%s:%u", ip, (unsigned)(body[8] << 8 | body[9]));
        return 0;
    }
    if (h[13] == 0x21 && len >= 36) { /* TCP over IPv6 */
        inet_ntop(AF_INET6, body, ip, sizeof ip);
        snprintf(src, cap, "[%s]:%u", ip, (unsigned)(body[32] << 8 | body[33]));
        return 0;
    }
    return -1;
}

/* Both ways until either side closes (or 10 s of silence). */
static void relay(int a, int b)
{
    uint8_t buf[16384];
    for (;;) {
        struct pollfd pf[2] = {{.fd = a, .events = POLLIN}, {.fd = b, .events = POLLIN}};
        if (poll(pf, 2, 10000) <= 0)
            return;
        for (int i = 0; i < 2; i++) {
            if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t k = recv(pf[i].fd, buf, sizeof buf, 0);
            if (k <= 0 || psock_write_all(i ? a : b, buf, (size_t)k) != 0)
                return;
        }
    }
}

static void *site_main(void *arg)
{
    struct pp_site *s = arg;
    for (;;) {
        struct pollfd pf[2] = {{.fd = s->lfd, .events = POLLIN},
                               {.fd = s->stop_pipe[0], .events = POLLIN}};
        if (poll(pf, 2, -1) < 0 && errno != EINTR)
            return NULL;
        if (pf[1].revents)
            return NULL;
        if (!(pf[0].revents & POLLIN))
            continue;
        int c = accept(s->lfd, NULL, NULL);
        if (c < 0)
            continue;
        char src[64];
        bool ok = take_header(c, src, sizeof src) == 0;
        pthread_mutex_lock(&s->mu);
        if (ok) {
            s->with_header++;
            memcpy(s->last_src, src, sizeof src);
        } else {
            s->without++;
        }
        pthread_mutex_unlock(&s->mu);
        int u = ok ? psock_connect(s->upstream, 10000) : -1;
        if (u >= 0) {
            relay(c, u);
            close(u);
        }
        close(c);
    }
}

void pp_site_start(struct pp_site *s, uint16_t upstream)
{
    memset(s, 0, sizeof *s);
    s->upstream = upstream;
    pthread_mutex_init(&s->mu, NULL);
    assert_int_equal(pipe(s->stop_pipe), 0);
    s->lfd = psock_listen(&s->port, 64);
    assert_true(s->lfd >= 0);
    assert_int_equal(pthread_create(&s->th, NULL, site_main, s), 0);
}

void pp_site_counts(struct pp_site *s, unsigned *with_header, unsigned *without, char *src)
{
    pthread_mutex_lock(&s->mu);
    *with_header = s->with_header;
    *without = s->without;
    if (src)
        memcpy(src, s->last_src, sizeof s->last_src);
    pthread_mutex_unlock(&s->mu);
}

void pp_site_stop(struct pp_site *s)
{
    assert_int_equal(write(s->stop_pipe[1], "x", 1), 1);
    pthread_join(s->th, NULL);
    close(s->lfd);
    close(s->stop_pipe[0]);
    close(s->stop_pipe[1]);
    pthread_mutex_destroy(&s->mu);
}
