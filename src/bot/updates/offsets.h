/*
 * offsets: which getUpdates offset may be confirmed (at-least-once delivery).
 *
 * The poller registers every update_id it hands to the workers, in increasing order, and
 * marks each one finished when its handler has returned. The offset it may send to Telegram
 * is the lowest update_id not yet finished (everything below it is done), or last + 1 when
 * nothing is pending. Updates confirmed this way are never redelivered; the others are,
 * after a crash or restart, which is the point.
 *
 * Telegram redelivers updates above the confirmed offset that already ran while an older one
 * is still running: tg__offsets_add() reports those as already seen so they are not run
 * twice in one process.
 *
 * Memory: a ring of cap entries allocated at init; add() fails with -ENOSPC when full.
 * Thread-safety: every function may be called from any thread (one mutex).
 */
#ifndef TGKIT_BOT_UPDATES_OFFSETS_H
#define TGKIT_BOT_UPDATES_OFFSETS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tg__offsets {
    pthread_mutex_t mu;
    int64_t *ids; /* ring of pending or finished-but-blocked ids, increasing */
    bool *done;
    size_t cap, head, count;
    int64_t next; /* last registered id + 1; 0 before the first */
    bool any;
} tg__offsets;

/* cap: entries at most (the pool capacity + workers + one batch is enough). 0 or -ENOMEM. */
int tg__offsets_init(tg__offsets *o, size_t cap);
void tg__offsets_cleanup(tg__offsets *o); /* NULL-safe */
/* 0 = registered, 1 = already seen (skip it), -ENOSPC = ring full (retry later). */
int tg__offsets_add(tg__offsets *o, int64_t id);
/* Mark id finished; unknown ids are ignored. */
void tg__offsets_done(tg__offsets *o, int64_t id);
/* The offset to confirm: lowest unfinished id, or last + 1, or 0 before any update. */
int64_t tg__offsets_confirmed(tg__offsets *o);
/* Ids registered and not yet finished. */
size_t tg__offsets_pending(tg__offsets *o);

#endif
