/* proxy_front: recording fronting host. See proxy_front.h. */
#include "proxy_front.h"

#include "proxy_util.h"
#include "wait.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

struct fconn {
    int fd;
    uint8_t data[PFRONT_MAX_BYTES];
    size_t len; /* bytes received (data keeps the first PFRONT_MAX_BYTES) */
};

struct pfront {
    int lfd, wakefd;
    pthread_t th;
    pthread_mutex_t mu;
    struct fconn *c[PFRONT_MAX_CONNS];
    size_t n;
};

static void accept_one(struct pfront *f)
{
    int fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    struct fconn *c = calloc(1, sizeof *c);
    pthread_mutex_lock(&f->mu);
    if (!c || f->n == PFRONT_MAX_CONNS) {
        pthread_mutex_unlock(&f->mu);
        free(c);
        close(fd);
        return;
    }
    c->fd = fd;
    f->c[f->n++] = c;
    pthread_mutex_unlock(&f->mu);
    psock_write_all(fd, PFRONT_BANNER, sizeof PFRONT_BANNER - 1);
}

static void read_one(struct pfront *f, struct fconn *c)
{
    uint8_t tmp[4096];
    ssize_t r = recv(c->fd, tmp, sizeof tmp, 0);
    pthread_mutex_lock(&f->mu);
    if (r <= 0) {
        close(c->fd);
        c->fd = -1;
    } else {
        size_t keep = c->len < PFRONT_MAX_BYTES ? PFRONT_MAX_BYTES - c->len : 0;
        memcpy(c->data + c->len, tmp, (size_t)r < keep ? (size_t)r : keep);
        c->len += (size_t)r;
    }
    pthread_mutex_unlock(&f->mu);
}

static void *front_thread(void *arg)
{
    struct pfront *f = arg;
    struct pollfd pf[PFRONT_MAX_CONNS + 2];
    struct fconn *who[PFRONT_MAX_CONNS + 2];
    for (;;) {
        size_t n = 0;
        pf[n++] = (struct pollfd){.fd = f->wakefd, .events = POLLIN};
        pf[n++] = (struct pollfd){.fd = f->lfd, .events = POLLIN};
        pthread_mutex_lock(&f->mu);
        for (size_t i = 0; i < f->n; i++)
            if (f->c[i]->fd >= 0) {
                who[n] = f->c[i];
                pf[n++] = (struct pollfd){.fd = f->c[i]->fd, .events = POLLIN};
            }
        pthread_mutex_unlock(&f->mu);
        if (poll(pf, n, -1) < 0 && errno != EINTR)
            return NULL;
        if (pf[0].revents)
            return NULL;
        if (pf[1].revents)
            accept_one(f);
        for (size_t i = 2; i < n; i++)
            if (pf[i].revents)
                read_one(f, who[i]);
    }
}

struct pfront *pfront_start(uint16_t *port)
{
    struct pfront *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    *port = 0;
    f->lfd = psock_listen(port, 256);
    f->wakefd = eventfd(0, EFD_CLOEXEC);
    pthread_mutex_init(&f->mu, NULL);
    if (f->lfd < 0 || f->wakefd < 0 || pthread_create(&f->th, NULL, front_thread, f) != 0) {
        if (f->lfd >= 0)
            close(f->lfd);
        if (f->wakefd >= 0)
            close(f->wakefd);
        free(f);
        return NULL;
    }
    return f;
}

void pfront_stop(struct pfront *f)
{
    if (!f)
        return;
    uint64_t one = 1;
    ssize_t w = write(f->wakefd, &one, sizeof one);
    (void)w;
    pthread_join(f->th, NULL);
    for (size_t i = 0; i < f->n; i++) {
        if (f->c[i]->fd >= 0)
            close(f->c[i]->fd);
        free(f->c[i]);
    }
    close(f->lfd);
    close(f->wakefd);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

size_t pfront_count(struct pfront *f)
{
    pthread_mutex_lock(&f->mu);
    size_t n = f->n;
    pthread_mutex_unlock(&f->mu);
    return n;
}

long pfront_bytes(struct pfront *f, size_t i, uint8_t *out, size_t cap)
{
    long r = -1;
    pthread_mutex_lock(&f->mu);
    if (i < f->n) {
        struct fconn *c = f->c[i];
        size_t have = c->len < PFRONT_MAX_BYTES ? c->len : PFRONT_MAX_BYTES;
        memcpy(out, c->data, have < cap ? have : cap);
        r = (long)c->len;
    }
    pthread_mutex_unlock(&f->mu);
    return r;
}

struct bytes_want {
    struct pfront *f;
    size_t i, n;
};

static bool has_bytes(void *arg)
{
    const struct bytes_want *w = arg;
    uint8_t dummy;
    long have = pfront_bytes(w->f, w->i, &dummy, 0);
    return have >= 0 && (size_t)have >= w->n;
}

int pfront_wait(struct pfront *f, size_t i, size_t n, int timeout_ms)
{
    struct bytes_want w = {f, i, n};
    return tgtest_wait_until(has_bytes, &w, timeout_ms) ? 0 : -1;
}
