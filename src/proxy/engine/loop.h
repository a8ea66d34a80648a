/*
 * loop: a small epoll event loop with fixed-duration timer queues, one per worker thread.
 *
 * I/O: a struct loop_io (embedded in the caller's object) ties one fd to a callback and an
 * interest mask (LOOP_READ | LOOP_WRITE, level-triggered). loop_io_set() changes the mask and
 * makes a syscall only when the mask really changes, so the relay can toggle interest on
 * backpressure cheaply. Any callback may delete any loop_io, its own included: events still
 * pending for a deleted loop_io in the current batch are dropped, never delivered.
 *
 * Timers: every deadline tgproxy needs has a fixed duration per kind (handshake, DC connect,
 * idle), so timers live in FIFO queues (struct loop_tq) of one duration each: starting a timer
 * appends it, and a queue is naturally sorted by deadline. Start, stop and expiry are O(1);
 * the loop sleeps until the earliest head. A timer is one intrusive node (no allocation).
 * Time is read from the loop's clock once per iteration (now_ms); the clock is the
 * monotonic one unless loop_set_clock() injects another (tests run in virtual time).
 *
 * Wake-up: loop_stop() may be called from any thread (or a signal handler); it writes an
 * eventfd, then sets a flag, and loop_run() returns after the current iteration. Once
 * stopped, a loop's wake fd stays readable (loop_run_once no longer blocks).
 *
 * Ownership: caller-owned structs (init/cleanup). Thread-safety: a loop and everything
 * registered in it belong to the thread that runs it; only loop_stop() is cross-thread.
 */
#ifndef TGPROXY_LOOP_H
#define TGPROXY_LOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { LOOP_READ = 1u, LOOP_WRITE = 2u };
/* Delivered in addition to READ/WRITE when the fd reports an error or hang-up. */
enum { LOOP_ERROR = 4u };

struct loop;
struct loop_io;
struct loop_timer;

/* events: LOOP_READ / LOOP_WRITE / LOOP_ERROR as reported by epoll. */
typedef void (*loop_io_fn)(struct loop *l, struct loop_io *io, unsigned events);
typedef void (*loop_timer_fn)(struct loop *l, struct loop_timer *t);
/* The loop's clock: milliseconds on a scale that never goes back (ud: loop_set_clock's). */
typedef uint64_t (*loop_clock_fn)(void *ud);

struct loop_io {
    int fd;        /* -1 when not registered */
    unsigned mask; /* current interest */
    loop_io_fn cb;
};

struct loop_timer {
    struct loop_timer *prev, *next; /* NULL when not queued */
    uint64_t deadline_ms;
    loop_timer_fn cb;
};

/* A FIFO of timers that all run for duration_ms. */
struct loop_tq {
    struct loop_timer head; /* sentinel of a circular list */
    uint64_t duration_ms;
};

#define LOOP_MAX_EVENTS 256
#define LOOP_MAX_TQ     48 /* a worker: 2 of its own, 8 per set of timeouts in use */

struct loop {
    int epfd;
    int wakefd;          /* eventfd written by loop_stop */
    volatile int stop;   /* set by loop_stop, read with atomics */
    uint64_t now_ms;     /* the clock's time at the start of this iteration */
    loop_clock_fn clock; /* tg__now_ms unless loop_set_clock gave another */
    void *clock_ud;
    struct loop_tq *tqs[LOOP_MAX_TQ];
    size_t n_tq;
    /* dispatch state, so deletions can cancel pending events of this batch */
    void *batch; /* struct epoll_event[LOOP_MAX_EVENTS] */
    int batch_n, batch_i;
};

/* 0 or -errno. On failure nothing is held. The clock is the monotonic one. */
int loop_init(struct loop *l);
/*
 * Replace the loop's clock (NULL = the monotonic one again) and read it at once into
 * now_ms. Tests use it to run connections in virtual time: advance their clock, then call
 * loop_run_once(l, 0), which fires every timer whose deadline the clock reached (epoll
 * never sleeps on a virtual deadline: its wait is real time). Loop thread only.
 */
void loop_set_clock(struct loop *l, loop_clock_fn fn, void *ud);
/* The earliest deadline of any queued timer, or UINT64_MAX when none is queued. */
uint64_t loop_next_deadline(const struct loop *l);
/* Closes the epoll and wake fds; registered fds are the caller's to close. NULL-safe. */
void loop_cleanup(struct loop *l);

/* Events in the batch being dispatched (what the last epoll_wait returned), from a
   callback; 1 when the callback's event came alone (the loop was idle). Loop thread. */
static inline int loop_batch_size(const struct loop *l)
{
    return l->batch_n;
}
/* Register fd with an initial mask (may be 0). 0 or -errno. */
int loop_io_add(struct loop *l, struct loop_io *io, int fd, unsigned mask, loop_io_fn cb);
/* Change the interest mask; a no-op when unchanged. 0 or -errno. */
int loop_io_set(struct loop *l, struct loop_io *io, unsigned mask);
/* Unregister (the fd stays open); pending events of this batch are dropped. NULL-safe, and
   a no-op for an io that is not registered. */
void loop_io_del(struct loop *l, struct loop_io *io);

/* A queue owned by the caller, registered with the loop (at most LOOP_MAX_TQ). 0 or -ENOSPC. */
int loop_tq_add(struct loop *l, struct loop_tq *q, uint64_t duration_ms);
/* Unregister q (its timers must be stopped first). No-op when q is not registered. */
void loop_tq_del(struct loop *l, struct loop_tq *q);
/* (Re)start t in q: deadline = now + q's duration. Stops it first if queued anywhere. */
void loop_timer_start(struct loop *l, struct loop_tq *q, struct loop_timer *t, loop_timer_fn cb);
void loop_timer_stop(struct loop_timer *t); /* no-op when not queued */
static inline bool loop_timer_active(const struct loop_timer *t)
{
    return t->next != NULL;
}

/* Wait at most max_wait_ms (-1 = until an event or timer) and dispatch once. 0 or -errno. */
int loop_run_once(struct loop *l, int max_wait_ms);
/* Run until loop_stop(). 0 or -errno on an epoll failure. */
int loop_run(struct loop *l);
/* Ask the loop to return; async-signal-safe and callable from any thread. */
void loop_stop(struct loop *l);
static inline bool loop_stopping(const struct loop *l)
{
    return __atomic_load_n(&l->stop, __ATOMIC_ACQUIRE) != 0;
}

#endif
