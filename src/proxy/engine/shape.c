/*
 * shape: record sizes and gaps toward FakeTLS clients. See shape.h.
 *
 * Invariants: sc->rel is at a record boundary of the buffer being sent (or its end), and
 * bytes past it are never sent before shape_release() moved it; sc->wait_ms != 0 only while
 * the head record is held back.
 */
#include "proxy/engine/shape.h"

#include <errno.h>

#include "proxy/config/config.h"
#include "proxy/services/doppel_fetch.h"
#include "proxy/wire/crypto.h"

#define REC_HDR 5     /* TLS record header */
#define REC_MAX 16384 /* payload limit toward the client (brief 4.9) */

int shape_worker_init(struct shape_worker *s, struct loop *l, struct doppel_live *live,
                      const struct config *cfg)
{
    *s = (struct shape_worker){.live = live, .delay_ms = cfg->doppel.delay_ms};
    if (!live)
        return 0;
    if (crypto_random(&s->rng, sizeof s->rng) != 0) /* the kernel's: no OpenSSL provider */
        return -EIO;
    s->rng |= 1; /* xorshift state must not be zero */
    s->gen = doppel_live_get(live, &s->prof);
    return loop_tq_add(l, &s->tq, SHAPE_TICK_MS);
}

void shape_refresh(struct shape_worker *s)
{
    if (s->live && doppel_live_gen(s->live) != s->gen)
        s->gen = doppel_live_get(s->live, &s->prof);
}

/* Uniform in [0, 1) (xorshift64*: fast, and plenty for spacing records). */
static double uniform(struct shape_worker *s)
{
    uint64_t x = s->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    s->rng = x;
    return (double)((x * 0x2545F4914F6CDD1Dull) >> 11) * 0x1p-53;
}

uint32_t shape_size(struct shape_worker *s, uint32_t idx, uint32_t dyn)
{
    uint32_t v;
    if (s->prof.phases) {
        unsigned phase = idx < 40 ? 0u : idx < 60 ? 1u : 2u;
        v = doppel_size(&s->prof, phase, uniform(s));
    } else if (dyn < REC_MAX) {
        v = dyn - (uint32_t)(uniform(s) * 100); /* mtg: sizes do not repeat exactly */
    } else {
        v = REC_MAX;
    }
    return v < SHAPE_MIN_RECORD ? SHAPE_MIN_RECORD : v > REC_MAX ? REC_MAX : v;
}

void shape_read(struct shape_conn *sc, bool quiet, bool filled, uint64_t now_ms)
{
    if (quiet) { /* a new burst: its first record leaves at once, with a full budget */
        sc->free_run = false;
        sc->budget_ms = SHAPE_BUDGET_MS;
        sc->budget_at = now_ms;
        sc->due_us = 0;
    }
    if (filled)
        sc->free_run = true;
    sc->ready_ms = now_ms;
    sc->rel = 0;
    sc->wait_ms = 0;
}

/* The delay budget earns 1 ms per SHAPE_EARN_MS of time, up to SHAPE_BUDGET_MS. */
static void earn(struct shape_conn *sc, uint64_t now_ms)
{
    uint64_t got = (now_ms - sc->budget_at) / SHAPE_EARN_MS;
    sc->budget_at += got * SHAPE_EARN_MS;
    sc->budget_ms =
        sc->budget_ms + got >= SHAPE_BUDGET_MS ? SHAPE_BUDGET_MS : sc->budget_ms + (uint32_t)got;
}

/* The head record waited from sc->wait_ms until now: account for it. */
static void waited(struct shape_conn *sc, uint64_t now_ms, struct stats *st)
{
    uint64_t d = now_ms - sc->wait_ms;
    sc->budget_ms = d >= sc->budget_ms ? 0 : sc->budget_ms - (uint32_t)d;
    stats_add(st, shape_delay_ms, d);
    sc->wait_ms = 0;
}

uint32_t shape_release(struct shape_worker *s, struct shape_conn *sc, const uint8_t *buf,
                       uint32_t off, uint32_t len, uint64_t now_ms, struct stats *st, bool *wait)
{
    *wait = false;
    if (sc->rel > off)
        return sc->rel; /* the rest of records already released */
    earn(sc, now_ms);
    if (sc->free_run || (!sc->budget_ms && !sc->wait_ms)) {
        if (sc->wait_ms)
            waited(sc, now_ms, st);
        sc->due_us = 0;
        return sc->rel = len;
    }
    uint64_t now_us = now_ms * 1000;
    /* a record coming max-delay or more after the previous one leaves at once: the shaper
       never adds a gap that long, so a quiet spell that long is already the site's rhythm */
    if (!sc->wait_ms && now_ms >= sc->sent_ms + s->delay_ms)
        sc->due_us = 0;
    /* the cap per record (from when its bytes were read) and what is left of the burst's */
    uint64_t held = sc->wait_ms ? now_ms - sc->wait_ms : 0;
    bool capped = now_ms >= sc->ready_ms + s->delay_ms || held >= sc->budget_ms;
    uint32_t rel = off;
    while (rel < len) {
        if (now_us < sc->due_us && !capped)
            break;
        if (sc->wait_ms)
            waited(sc, now_ms, st);
        uint32_t rl = len - rel < REC_HDR ? len - rel
                                          : REC_HDR + ((uint32_t)buf[rel + 3] << 8 | buf[rel + 4]);
        rel = rl > len - rel ? len : rel + rl;
        /* the schedule runs on from the previous record's time, so gaps shorter than the
           loop's millisecond add up; a record more than a tick late for its time (its bytes
           came late, or the cap released it) restarts it from now */
        uint64_t base = capped || sc->due_us + SHAPE_TICK_MS * 1000 < now_us ? now_us : sc->due_us;
        sc->due_us = base + (uint64_t)(doppel_draw(&s->prof.gap, 1.0 - uniform(s)) * 1000.0);
        stats_add(st, shaped_records, 1);
        sc->sent_ms = now_ms;
    }
    if (rel == off) {
        *wait = true;
        if (!sc->wait_ms)
            sc->wait_ms = now_ms;
    }
    return sc->rel = rel;
}
