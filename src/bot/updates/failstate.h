/*
 * failstate: when a poller's failures deserve a log line (issue 27: once per change of
 * state). A run of failed calls is one state: its first failure and each failure whose
 * error differs from the one last warned about (up to its numbers: tg__log_shape, so
 * curl's "after 3 ms" is no change) deserve a warning; the others a debug line at most.
 * The first call that works ends the state, to be logged once as "working again after N
 * failed calls in S s". The three pollers use it (updates/poller.c, updates/async_poll.c,
 * fleet/poll.c); each writes its own lines.
 *
 * Ownership: caller storage, zeroed to start. Thread-safety: one thread (the poller's).
 */
#ifndef TGKIT_BOT_UPDATES_FAILSTATE_H
#define TGKIT_BOT_UPDATES_FAILSTATE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct tg__failstate {
    uint64_t failures; /* in a row; 0 = working */
    uint64_t since_ms; /* tg__now_ms() of the first of them */
    uint64_t warned;   /* tg__log_shape of the error last warned about; 0 = none */
} tg__failstate;

/* Count a failed call whose error is err: true when it deserves a warning. */
bool tg__failstate_fail(tg__failstate *fs, const char *err);
/* A call worked: true when it ends a failing state, with that state's failures and its
   length in whole seconds (either pointer may be NULL); the state is reset. */
bool tg__failstate_ok(tg__failstate *fs, uint64_t *failures, uint64_t *secs);

#endif
