/*
 * shape: the doppelganger's shaper, on the relay's path toward FakeTLS clients (relay.c
 * calls it; [defense.doppelganger] turns it on). It makes the records a passive observer
 * sees look like the fronting site's (doppel.h: the built-in profile or the one the scout
 * learned, doppel_fetch.h).
 *
 * Sizes, always: each record slot of a read gets a payload limit drawn from the profile's
 * size quantiles for its phase of the burst (records 0..39, 40..59, 60.. since the last
 * quiet second); with the built-in profile, dynamic record sizing's 1450 / 4096 less a
 * uniform 0..99 bytes (as mtg), or 16384. A record is smaller when fewer bytes are waiting,
 * as a site's are. Limits are clamped to [SHAPE_MIN_RECORD, 16384].
 *
 * Timing, only while it costs nothing a user would notice: the next record may leave a
 * drawn Weibull gap after the previous one (gaps accumulate in microseconds; records whose
 * time came within the same loop iteration leave in one send; the first record of a burst,
 * after a quiet second, and any record coming max-delay or more after the previous one
 * leave at once), unless
 *   - the burst is a bulk transfer: a read filled its buffer (more bytes were waiting), or
 *   - the client is backpressured: a send to it would have blocked;
 * then the rest of the burst (until a quiet second) is sent as fast as the client takes.
 * The delay a connection may add is a budget: SHAPE_BUDGET_MS at the start of a burst,
 * earning 1 ms per SHAPE_EARN_MS, spent by every millisecond a record is held; an empty
 * budget sends at once. No record waits longer than max-delay (default 20 ms) after its
 * bytes were read. Hence the bounds: added latency per record <= max-delay + 1 ms (the
 * timer tick); added time over any span T of a connection <= SHAPE_BUDGET_MS + T /
 * SHAPE_EARN_MS (+ 1 ms), so a flow the shaper does not recognise as bulk loses at most
 * that (10 % and 200 ms), and a recognised one nothing from then on.
 *
 * Waiting records are held in the direction's buffer (the relay does not read more from the
 * DC meanwhile: ordinary backpressure) and a 1 ms tick timer brings the relay back.
 * Thread-safety: worker thread only; the profile is the worker's copy (shape_refresh).
 */
#ifndef TGPROXY_SHAPE_H
#define TGPROXY_SHAPE_H

#include <stdbool.h>
#include <stdint.h>

#include "proxy/wire/doppel.h"
#include "proxy/engine/loop.h"
#include "proxy/engine/stats.h"

#define SHAPE_BUDGET_MS  200 /* delay budget: full at the start of a burst, and its cap */
#define SHAPE_EARN_MS    10  /* the budget earns 1 ms per this many ms */
#define SHAPE_MIN_RECORD 256 /* smallest record limit drawn (bounds the overhead per byte) */
#define SHAPE_TICK_MS    1   /* how often a waiting record is looked at */

struct doppel_live;
struct config;

/* One worker's shaper. */
struct shape_worker {
    struct doppel_live *live;   /* NULL: shaping off */
    struct doppel_profile prof; /* this worker's snapshot of the live profile */
    uint64_t gen;               /* its generation */
    uint64_t rng;               /* xorshift64* state */
    uint32_t delay_ms;          /* max-delay */
    struct loop_tq tq;          /* SHAPE_TICK_MS ticks */
};

/* One connection's shaping state (zero = idle). */
struct shape_conn {
    struct loop_timer timer; /* in the worker's tq while a record waits for its time */
    uint64_t due_us;         /* the next record's time (loop clock, microseconds) */
    uint64_t ready_ms;       /* when the bytes now waiting were read */
    uint64_t wait_ms;        /* when the head record started waiting; 0 = not waiting */
    uint64_t sent_ms;        /* when the last record it timed left */
    uint32_t rel;            /* bytes of the waiting buffer released (whole records) */
    uint64_t budget_at;      /* when the budget last earned */
    uint32_t budget_ms;      /* delay this connection may still add */
    bool free_run;           /* no more delays in this burst */
};

/* Set up s for a worker: off when live is NULL, else a tick queue in l. 0 or -errno. */
int shape_worker_init(struct shape_worker *s, struct loop *l, struct doppel_live *live,
                      const struct config *cfg);

/* Copy the live profile if a newer one was published. */
void shape_refresh(struct shape_worker *s);

/* The payload limit of record idx of a burst; dyn is the dynamic-sizing limit (16384 when
   sizing is off). Only while s->live. */
uint32_t shape_size(struct shape_worker *s, uint32_t idx, uint32_t dyn);

/* A read of fresh bytes is waiting: quiet = first read after a quiet second (a new burst),
   filled = the read filled its buffer (bulk). */
void shape_read(struct shape_conn *sc, bool quiet, bool filled, uint64_t now_ms);

/* A send to the client would block: no more delays in this burst. */
static inline void shape_blocked(struct shape_conn *sc)
{
    sc->free_run = true;
}

/*
 * How far into buf[off..len) (FakeTLS records from the start of the buffer) may be sent
 * now: returns an end offset > off, or off with *wait set when the next record must wait
 * (the caller arms sc->timer in s->tq). Counts shaped records and added delay in st.
 */
uint32_t shape_release(struct shape_worker *s, struct shape_conn *sc, const uint8_t *buf,
                       uint32_t off, uint32_t len, uint64_t now_ms, struct stats *st, bool *wait);

#endif
