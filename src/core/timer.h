/*
 * timer: a min-heap of deadlines for one event loop (or one scheduler thread).
 *
 * Intrusive: the caller embeds a tg__timer in its own struct and gets back to it with
 * container_of-style arithmetic (or the `user` pointer). The heap is a pointer tree, not an
 * array, so nothing is ever allocated: arming a timer cannot fail, and a million timers cost
 * the caller's own storage only. add, cancel and rearm are O(log n); next_deadline is O(1).
 *
 * Order: by deadline (monotonic nanoseconds), then by arming order, so timers due at the same
 * instant fire first-armed first.
 *
 * Time: every heap has a clock, tg__now_ns (CLOCK_MONOTONIC) by default or one the owner
 * injects (tests run whole retry schedules in virtual time that way). The heap itself never
 * reads the clock except through tg__timers_now(); run_due() is told what "now" is.
 *
 * Callbacks: tg__timers_run_due(h, now) first takes every timer due at `now` off the heap, in
 * order, and then fires them one by one. A callback may add, rearm or cancel any timer of the
 * heap, its own included, and may free the memory of its own timer (the heap no longer
 * refers to it when the callback runs). A timer armed during run_due — even with a deadline
 * already passed — fires on the next run_due, never in the current one, so a callback that
 * rearms itself for "now" cannot starve the loop. Cancelling a timer that was taken off the
 * heap in this run but not yet fired stops it from firing.
 *
 * Threads: none. A heap and its timers belong to one thread (the loop thread); every function
 * here must be called on it. run_due must not be called from inside one of its callbacks.
 * Debug builds check both and abort.
 */
#ifndef TGKIT_CORE_TIMER_H
#define TGKIT_CORE_TIMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tg__timer tg__timer;
typedef void (*tg__timer_fn)(tg__timer *t, uint64_t now_ns);

struct tg__timer {
    /* heap links while armed; while due (taken off, not fired yet) left/right link the list */
    tg__timer *parent, *left, *right;
    uint64_t deadline_ns;
    uint64_t seq; /* arming order: the tie-break */
    tg__timer_fn fn;
    void *user; /* the owner's; never read by the heap */
    uint8_t state; /* private: idle, armed, due */
};

typedef uint64_t (*tg__timer_clock_fn)(void *clock_user);

typedef struct tg__timers {
    tg__timer *root;
    size_t count; /* armed timers (in the heap) */
    uint64_t seq;
    tg__timer *due_head, *due_tail; /* run_due's list of timers to fire */
    tg__timer_clock_fn clock;
    void *clock_user;
    bool running;
#ifndef NDEBUG
    unsigned long owner;
#endif
} tg__timers;

/* clock NULL = tg__now_ns. Allocates nothing; there is no cleanup (timers still armed are
 * simply forgotten, their memory is the owner's). */
void tg__timers_init(tg__timers *h, tg__timer_clock_fn clock, void *clock_user);
/* The heap's clock, monotonic nanoseconds. */
uint64_t tg__timers_now(const tg__timers *h);

/* Prepare a timer (idle). Must precede any other use. */
void tg__timer_init(tg__timer *t, tg__timer_fn fn, void *user);
/* Arm t to fire at deadline_ns (absolute, the heap's clock). An armed timer is moved. */
void tg__timer_add(tg__timers *h, tg__timer *t, uint64_t deadline_ns);
/* Same as tg__timer_add at tg__timers_now(h) + delay_ns (saturating). */
void tg__timer_add_in(tg__timers *h, tg__timer *t, uint64_t delay_ns);
/* Disarm t; a no-op when it is idle. Returns whether it was armed (or due). */
bool tg__timer_cancel(tg__timers *h, tg__timer *t);
static inline bool tg__timer_armed(const tg__timer *t)
{
    return t->state != 0;
}

/* Earliest deadline among armed timers, or UINT64_MAX when none is armed. */
uint64_t tg__timers_next_deadline(const tg__timers *h);
/* Milliseconds from now_ns to the earliest deadline, rounded up (an epoll_wait/uv timer
 * argument): -1 when none is armed, 0 when one is due, at most INT32_MAX. */
int tg__timers_timeout_ms(const tg__timers *h, uint64_t now_ns);
/* Fire every timer whose deadline is <= now_ns (see the header comment). Returns how many
 * callbacks ran. */
size_t tg__timers_run_due(tg__timers *h, uint64_t now_ns);
static inline size_t tg__timers_count(const tg__timers *h)
{
    return h->count;
}

/* Tests: walk the whole heap checking links, order and count. 0 = consistent, else -1. */
int tg__timers_check(const tg__timers *h);

#endif
