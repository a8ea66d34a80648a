/*
 * workers: a fixed pool of threads that runs queued items with per-key ordering.
 *
 * Every item carries a key (libtgbot uses the chat id). Items with different keys run in
 * parallel; items with the same key run one at a time, in submission order. Items marked
 * unordered (inline queries, polls without a chat) run as soon as a worker is free.
 *
 * Invariants:
 *  - a key has at most one "lane" (its FIFO of pending items); a lane is either idle with
 *    items (on the ready list), busy (a worker runs its head item), or released;
 *  - queued (items waiting) never exceeds capacity: submit blocks up to wait_ms or fails
 *    with -EAGAIN, which is the backpressure a poller or the webhook server turns into
 *    "slow down" or 503;
 *  - lanes and hash buckets are preallocated (capacity + workers lanes), so submitting and
 *    running allocate nothing.
 * After running an item the pool calls done(item, cancelled=false) on the same worker; a
 * drain whose deadline passes calls done(item, cancelled=true) for items never started.
 * The pool never touches an item after done() returns: the callback may free it.
 *
 * Thread-safety: submit and stats may be called from any thread; drain and free from one
 * controlling thread, never from a worker.
 */
#ifndef TGKIT_BOT_DISPATCH_WORKERS_H
#define TGKIT_BOT_DISPATCH_WORKERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tg__witem {
    struct tg__witem *next; /* owned by the pool while queued */
    int64_t key;            /* ordering key (chat id) */
    bool ordered;           /* false: no ordering with any other item */
} tg__witem;

/* Runs one item on worker number worker (0 .. workers-1). */
typedef void (*tg__wrun_fn)(void *user, unsigned worker, tg__witem *it);
/* The item is finished (cancelled = it never ran). Called without the pool's lock. */
typedef void (*tg__wdone_fn)(void *user, tg__witem *it, bool cancelled);

typedef struct tg__workers_options {
    unsigned workers;  /* threads; 0 = 4 */
    size_t capacity;   /* queued items at most; 0 = 1024 */
    tg__wrun_fn run;   /* required */
    tg__wdone_fn done; /* optional */
    void *user;
} tg__workers_options;

typedef struct tg__workers tg__workers;

typedef struct tg__workers_stats {
    size_t queued;      /* waiting items */
    size_t inflight;    /* items being run */
    uint64_t finished;  /* items run to completion since start */
    uint64_t cancelled; /* items dropped by a drain deadline */
} tg__workers_stats;

/* Starts the threads. Returns 0, -EINVAL (no run callback) or -ENOMEM / -errno. */
int tg__workers_new(tg__workers **out, const tg__workers_options *opt);
/*
 * Queue it. wait_ms: 0 = fail at once when full, < 0 = wait as long as needed, else the
 * longest wait. Returns 0, -EAGAIN (still full), or -ECANCELED (pool is draining: the item
 * was not taken). On 0 the pool owns it until done().
 */
int tg__workers_submit(tg__workers *w, tg__witem *it, int64_t wait_ms);
/*
 * Stop accepting, let queued and running items finish until deadline_ms (tg__now_ms()
 * clock; 0 = cancel everything queued at once), cancel what never started, then wait for
 * running items and join the threads. Returns 0 if nothing was cancelled, else -ETIMEDOUT.
 * Idempotent.
 */
int tg__workers_drain(tg__workers *w, uint64_t deadline_ms);
/* Block until nothing is queued or running, or deadline_ms passes; 0 or -ETIMEDOUT. */
int tg__workers_wait_idle(tg__workers *w, uint64_t deadline_ms);
tg__workers_stats tg__workers_stats_get(tg__workers *w);
/* Drains with deadline 0 if still running, then frees. NULL-safe. */
void tg__workers_free(tg__workers *w);

#endif
