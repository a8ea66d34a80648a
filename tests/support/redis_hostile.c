/* redis_hostile: a Redis that attacks its client's memory. See redis_hostile.h. */
#include "redis_hostile.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "proxy_util.h"

#define CHUNK 65536

/* Wait up to ms for fd to be readable, watching the stop flag. 1 ready, 0 not, -1 stop. */
static int wait_in(struct rhostile *h, int fd, int ms)
{
    for (int waited = 0; waited < ms; waited += 50) {
        if (atomic_load(&h->stop))
            return -1;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, 50);
        if (r > 0)
            return 1;
        if (r < 0 && errno != EINTR)
            return 0;
    }
    return 0;
}

/* Write all of s; false when the client went away (or stop). */
static bool put(struct rhostile *h, int fd, const char *s, size_t n)
{
    while (n) {
        if (atomic_load(&h->stop))
            return false;
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        if (poll(&p, 1, 50) <= 0)
            continue;
        if (p.revents & (POLLERR | POLLHUP))
            return false;
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (w <= 0)
            return false;
        atomic_fetch_add(&h->sent, (uint64_t)w);
        s += w;
        n -= (size_t)w;
    }
    return true;
}

/* The attack's opening and the unit it then repeats. */
static void script(enum rhostile_mode m, char *head, size_t hcap, char *unit, size_t *ulen)
{
    switch (m) {
    case RH_HUGE_ARRAY:
        snprintf(head, hcap, "*1170000000\r\n");
        *ulen = (size_t)snprintf(unit, CHUNK, ":1\r\n");
        break;
    case RH_BIG_REPLY: {
        snprintf(head, hcap, "*65536\r\n");
        int k = snprintf(unit, CHUNK, "$16384\r\n");
        memset(unit + k, 'x', 16384);
        memcpy(unit + k + 16384, "\r\n", 2);
        *ulen = (size_t)k + 16384 + 2;
        break;
    }
    case RH_HUGE_BULK:
        snprintf(head, hcap, "$4000000000\r\n");
        memset(unit, 'x', CHUNK);
        *ulen = CHUNK;
        break;
    case RH_DEEP:
        head[0] = '\0';
        for (int i = 0; i < 64; i++)
            strcat(head, "*1\r\n");
        strcat(head, ":1\r\n");
        *ulen = 0;
        break;
    case RH_LONG_LINE:
        snprintf(head, hcap, "+");
        memset(unit, 'o', CHUNK);
        *ulen = CHUNK;
        break;
    case RH_UNSOLICITED:
        snprintf(head, hcap, "+OK\r\n");
        *ulen = (size_t)snprintf(unit, CHUNK, ":1\r\n");
        break;
    }
}

static void serve(struct rhostile *h, int fd)
{
    char buf[4096];
    if (wait_in(h, fd, 10000) != 1 || recv(fd, buf, sizeof buf, MSG_DONTWAIT) <= 0)
        return;
    atomic_store(&h->sent, 0);
    static __thread char unit[CHUNK * 2];
    char head[512];
    size_t ulen = 0;
    script(h->mode, head, sizeof head, unit, &ulen);
    /* repeat the unit up to one chunk, so each write is large */
    size_t reps = ulen ? CHUNK / ulen : 0, blen = reps * ulen;
    for (size_t i = 1; i < reps; i++)
        memmove(unit + i * ulen, unit, ulen);
    if (!put(h, fd, head, strlen(head)))
        goto cut;
    while (blen && atomic_load(&h->sent) < h->cap) {
        (void)!recv(fd, buf, sizeof buf, MSG_DONTWAIT); /* later commands: never answered */
        if (!put(h, fd, unit, blen))
            goto cut;
    }
    /* everything offered: wait (bounded) for the client to go */
    while (wait_in(h, fd, 10000) == 1 && recv(fd, buf, sizeof buf, 0) > 0) {
    }
    return;
cut:
    if (!atomic_load(&h->stop))
        atomic_fetch_add(&h->cuts, 1);
}

static void *run(void *p)
{
    struct rhostile *h = p;
    while (!atomic_load(&h->stop)) {
        if (wait_in(h, h->lfd, 100) != 1)
            continue;
        int fd = accept4(h->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        atomic_fetch_add(&h->conns, 1);
        serve(h, fd);
        close(fd);
    }
    return NULL;
}

int rhostile_start(struct rhostile *h, enum rhostile_mode mode, uint64_t cap)
{
    memset(h, 0, sizeof *h);
    h->mode = mode;
    h->cap = cap ? cap : (uint64_t)256 << 20;
    h->lfd = psock_listen(&h->port, 16);
    if (h->lfd < 0)
        return -1;
    if (pthread_create(&h->th, NULL, run, h) != 0) {
        close(h->lfd);
        return -1;
    }
    h->running = true;
    return 0;
}

void rhostile_stop(struct rhostile *h)
{
    if (!h->running)
        return;
    atomic_store(&h->stop, true);
    pthread_join(h->th, NULL);
    close(h->lfd);
    h->running = false;
}

static int wait_count(atomic_uint *v, unsigned n)
{
    for (int i = 0; i < 1000; i++) {
        if (atomic_load(v) >= n)
            return 0;
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000000}, NULL);
    }
    return -1;
}

int rhostile_wait_conns(struct rhostile *h, unsigned n)
{
    return wait_count(&h->conns, n);
}

int rhostile_wait_cuts(struct rhostile *h, unsigned n)
{
    return wait_count(&h->cuts, n);
}

static uint64_t status_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    uint64_t kb = 0;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0)
            kb = strtoull(line + n, NULL, 10);
    if (f)
        fclose(f);
    return kb * 1024;
}

uint64_t tgtest_rss_peak(void)
{
    return status_kb("VmHWM:");
}

int tgtest_rss_reset(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return -1;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}
