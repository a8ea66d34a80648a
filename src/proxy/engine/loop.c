/*
 * loop: epoll + FIFO timer queues. See loop.h.
 *
 * Invariants: a loop_io with fd >= 0 is registered in epfd with exactly io->mask (translated);
 * each loop_tq is a circular list sorted by deadline because every member was appended with
 * now + the same duration and now never decreases.
 */
#include "proxy/engine/loop.h"

#include "core/alloc.h"
#include "core/clock.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

static uint32_t to_epoll(unsigned mask)
{
    uint32_t ev = 0;
    if (mask & LOOP_READ)
        ev |= EPOLLIN | EPOLLRDHUP;
    if (mask & LOOP_WRITE)
        ev |= EPOLLOUT;
    return ev;
}

int loop_init(struct loop *l)
{
    *l = (struct loop){.epfd = -1, .wakefd = -1};
    l->batch = tg__calloc(LOOP_MAX_EVENTS, sizeof(struct epoll_event));
    if (!l->batch)
        return -ENOMEM;
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (l->epfd < 0)
        goto fail;
    l->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (l->wakefd < 0)
        goto fail;
    /* data.ptr == NULL marks the wake fd */
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->wakefd, &ev) < 0)
        goto fail;
    loop_set_clock(l, NULL, NULL);
    return 0;
fail:;
    int err = -errno;
    loop_cleanup(l);
    return err;
}

void loop_cleanup(struct loop *l)
{
    if (!l)
        return;
    if (l->wakefd >= 0)
        close(l->wakefd);
    if (l->epfd >= 0)
        close(l->epfd);
    tg__free(l->batch);
    l->batch = NULL;
    l->epfd = l->wakefd = -1;
}

int loop_io_add(struct loop *l, struct loop_io *io, int fd, unsigned mask, loop_io_fn cb)
{
    struct epoll_event ev = {.events = to_epoll(mask), .data.ptr = io};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
        return -errno;
    io->fd = fd;
    io->mask = mask;
    io->cb = cb;
    return 0;
}

int loop_io_set(struct loop *l, struct loop_io *io, unsigned mask)
{
    if (io->fd < 0)
        return -EBADF;
    if (io->mask == mask)
        return 0;
    struct epoll_event ev = {.events = to_epoll(mask), .data.ptr = io};
    if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, io->fd, &ev) < 0)
        return -errno;
    io->mask = mask;
    return 0;
}

void loop_io_del(struct loop *l, struct loop_io *io)
{
    if (!io || io->fd < 0)
        return;
    /* Failure here means the fd is already gone; the kernel dropped it for us. */
    epoll_ctl(l->epfd, EPOLL_CTL_DEL, io->fd, NULL);
    io->fd = -1;
    io->mask = 0;
    struct epoll_event *evs = l->batch;
    for (int i = l->batch_i; i < l->batch_n; i++)
        if (evs[i].data.ptr == io)
            evs[i].data.ptr = &l->batch; /* tombstone: never a loop_io */
}

int loop_tq_add(struct loop *l, struct loop_tq *q, uint64_t duration_ms)
{
    if (l->n_tq >= LOOP_MAX_TQ)
        return -ENOSPC;
    q->head.prev = q->head.next = &q->head;
    /* a zero duration would let a callback that restarts its timer run forever */
    q->duration_ms = duration_ms ? duration_ms : 1;
    l->tqs[l->n_tq++] = q;
    return 0;
}

void loop_tq_del(struct loop *l, struct loop_tq *q)
{
    for (size_t i = 0; i < l->n_tq; i++)
        if (l->tqs[i] == q) {
            memmove(&l->tqs[i], &l->tqs[i + 1], (l->n_tq - i - 1) * sizeof l->tqs[0]);
            l->n_tq--;
            return;
        }
}

void loop_timer_stop(struct loop_timer *t)
{
    if (!t->next)
        return;
    t->prev->next = t->next;
    t->next->prev = t->prev;
    t->prev = t->next = NULL;
}

void loop_timer_start(struct loop *l, struct loop_tq *q, struct loop_timer *t, loop_timer_fn cb)
{
    loop_timer_stop(t);
    t->deadline_ms = l->now_ms + q->duration_ms;
    t->cb = cb;
    t->prev = q->head.prev;
    t->next = &q->head;
    q->head.prev->next = t;
    q->head.prev = t;
}

static uint64_t mono_ms(void *ud)
{
    (void)ud;
    return tg__now_ms();
}

void loop_set_clock(struct loop *l, loop_clock_fn fn, void *ud)
{
    l->clock = fn ? fn : mono_ms;
    l->clock_ud = fn ? ud : NULL;
    l->now_ms = l->clock(l->clock_ud);
}

uint64_t loop_next_deadline(const struct loop *l)
{
    uint64_t d = UINT64_MAX;
    for (size_t i = 0; i < l->n_tq; i++) {
        const struct loop_tq *q = l->tqs[i];
        if (q->head.next != &q->head && q->head.next->deadline_ms < d)
            d = q->head.next->deadline_ms;
    }
    return d;
}

/* Milliseconds until the earliest deadline, capped by max_wait_ms (-1 = no cap). */
static int next_wait(const struct loop *l, int max_wait_ms)
{
    uint64_t d = loop_next_deadline(l);
    if (d == UINT64_MAX)
        return max_wait_ms;
    uint64_t w = d > l->now_ms ? d - l->now_ms : 0;
    if (max_wait_ms >= 0 && (uint64_t)max_wait_ms < w)
        return max_wait_ms;
    return w > INT32_MAX ? INT32_MAX : (int)w;
}

static void run_timers(struct loop *l)
{
    for (size_t i = 0; i < l->n_tq; i++) {
        struct loop_tq *q = l->tqs[i];
        /* Bounded: each pass removes the head before calling out; a callback that restarts
           its timer in the same queue lands behind now, so at most the queue length runs. */
        while (q->head.next != &q->head && q->head.next->deadline_ms <= l->now_ms) {
            struct loop_timer *t = q->head.next;
            loop_timer_stop(t);
            t->cb(l, t);
        }
    }
}

static void dispatch(struct loop *l, struct epoll_event *ev)
{
    struct loop_io *io = ev->data.ptr;
    if (!io)
        return; /* the wake fd: never drained, it only ever signals a stop */
    if (io == (void *)&l->batch || io->fd < 0)
        return;
    unsigned events = 0;
    if (ev->events & (EPOLLIN | EPOLLRDHUP))
        events |= LOOP_READ;
    if (ev->events & EPOLLOUT)
        events |= LOOP_WRITE;
    if (ev->events & (EPOLLERR | EPOLLHUP))
        events |= LOOP_ERROR | LOOP_READ;
    io->cb(l, io, events);
}

int loop_run_once(struct loop *l, int max_wait_ms)
{
    struct epoll_event *evs = l->batch;
    int n = epoll_wait(l->epfd, evs, LOOP_MAX_EVENTS, next_wait(l, max_wait_ms));
    if (n < 0 && errno != EINTR)
        return -errno;
    l->now_ms = l->clock(l->clock_ud);
    l->batch_n = n < 0 ? 0 : n;
    for (l->batch_i = 0; l->batch_i < l->batch_n;) {
        int i = l->batch_i++;
        dispatch(l, &evs[i]);
    }
    l->batch_n = l->batch_i = 0;
    run_timers(l);
    return 0;
}

int loop_run(struct loop *l)
{
    while (!loop_stopping(l)) {
        int rc = loop_run_once(l, -1);
        if (rc < 0)
            return rc;
    }
    return 0;
}

void loop_stop(struct loop *l)
{
    /* Write first, flag second: the loop only exits (and closes wakefd) after it sees the
       flag, so this write can never hit a closed or reused descriptor. The eventfd stays
       readable, so a wake-up that beats the flag just spins until the flag lands. */
    uint64_t one = 1;
    ssize_t w = write(l->wakefd, &one, sizeof one);
    (void)w; /* a full eventfd counter still wakes the loop */
    __atomic_store_n(&l->stop, 1, __ATOMIC_RELEASE);
}
