/*
 * async_poll.c: long polling on an async handle (tg_async_poll_start in tgbot/async.h).
 *
 * One getUpdates in flight at a time, submitted with a per-call timeout of the long poll's
 * plus 10 s (the handle's own timeout would cut a 30 s poll short). Its completion hands
 * each update to the user in order, moves the offset past the last, and submits the next
 * poll; a failure waits on a timer (1 s doubling to 30 s) first, and is logged once per
 * change of state (failstate.h): a warning when polls start failing or fail differently,
 * one info line when they work again, debug lines between. Stopping cancels the poll in
 * flight; the poller's memory goes when that cancellation has completed.
 */
#include <stdio.h>

#include "bot/client/async_int.h"
#include "bot/updates/failstate.h"
#include "core/alloc.h"
#include "tgbot/api.h"

#define RETRY_MIN_MS 1000
#define RETRY_MAX_MS 30000

struct tg_async_poller {
    tg_async *a;
    tg_async_update_fn fn;
    void *user;
    uint32_t timeout_s, limit;
    int64_t offset;
    uint64_t call; /* the poll in flight, 0 = none */
    uint32_t backoff_ms;
    uint32_t backoff_min_ms, backoff_max_ms; /* RETRY_MIN_MS, RETRY_MAX_MS (tests: shorter) */
    tg__failstate fails;                     /* when a failed poll is worth a warning */
    tg__timer retry;
    bool stopped;
    bool dead; /* the handle shut down: only tg_async_poll_stop (free) is left */
    bool held;   /* tg__async_poll_hold: the next poll waits */
    bool parked; /* a poll is owed since the hold was asked */
};

/* For the dispatcher's loop mode (dispatch/loop.c): hold the next getUpdates back while
 * its queue is full (backpressure), and send it once released. */
void tg__async_poll_hold(tg_async_poller *p, bool hold);

static void poll_next(tg_async_poller *p);

static void on_updates(tg_async *a, const tg_async_result *r, tg_update *u, size_t n, void *user)
{
    tg_async_poller *p = user;
    p->call = 0;
    if (p->stopped) {
        tg__free(p);
        return;
    }
    if (r->status == TG_ERR_CANCELLED && a->shut) {
        p->dead = true; /* the handle is going away: never touch it again */
        return;
    }
    if (r->status != TG_OK) {
        p->backoff_ms = p->backoff_ms ? p->backoff_ms * 2 : p->backoff_min_ms;
        if (p->backoff_ms > p->backoff_max_ms)
            p->backoff_ms = p->backoff_max_ms;
        const char *err = tg_ctx_errmsg(r->ctx);
        if (tg__failstate_fail(&p->fails, err))
            tg__log(&a->bot->log, TG__LOG_WARN,
                    "async polling: %s; polling again in %u ms, then backing off up to %u ms "
                    "(logged again when the error changes or polling works)",
                    err, p->backoff_ms, p->backoff_max_ms);
        else
            tg__log(&a->bot->log, TG__LOG_DEBUG,
                    "async polling: %s (failure %llu in a row); polling again in %u ms", err,
                    (unsigned long long)p->fails.failures, p->backoff_ms);
        tg__timer_add_in(&a->timers, &p->retry, (uint64_t)p->backoff_ms * 1000000u);
        tg__async_sync_timer(a);
        return;
    }
    p->backoff_ms = 0;
    uint64_t failures, secs;
    if (tg__failstate_ok(&p->fails, &failures, &secs))
        tg__log(&a->bot->log, TG__LOG_INFO,
                "async polling: working again after %llu failed calls in %llu s",
                (unsigned long long)failures, (unsigned long long)secs);
    for (size_t i = 0; i < n && !p->stopped; i++) {
        if (u[i].update_id >= p->offset)
            p->offset = u[i].update_id + 1;
        p->fn(a, &u[i], p->user);
    }
    if (p->stopped) { /* stopped from on_update: nothing is in flight */
        tg__free(p);
        return;
    }
    if (p->held) {
        p->parked = true;
        return;
    }
    poll_next(p);
}

void tg__async_poll_hold(tg_async_poller *p, bool hold)
{
    p->held = hold;
    if (!hold && p->parked && !p->stopped && !p->dead) {
        p->parked = false;
        poll_next(p);
    }
}

static void poll_next(tg_async_poller *p)
{
    tg_get_updates_params prm = {.timeout = TG_SOME((int64_t)p->timeout_s),
                                 .limit = TG_SOME((int64_t)p->limit)};
    if (p->offset)
        prm.offset = (tg_opt_i64)TG_SOME(p->offset);
    p->a->next_timeout_ms = (p->timeout_s + 10) * 1000u;
    p->call = tg_async_get_updates(p->a, &prm, on_updates, p);
    p->a->next_timeout_ms = 0;
    if (p->call == 0) { /* the handle is full: try again later */
        tg__timer_add_in(&p->a->timers, &p->retry, (uint64_t)RETRY_MIN_MS * 1000000u);
        tg__async_sync_timer(p->a);
    }
}

static void on_retry(tg__timer *t, uint64_t now)
{
    (void)now;
    tg_async_poller *p = t->user;
    if (!p->stopped)
        poll_next(p);
}

TG_API tg_async_poller *tg_async_poll_start(tg_async *a, const tg_async_poll_options *opts,
                                            tg_async_update_fn on_update, void *user)
{
    if (!a || !on_update)
        return NULL;
    tg_async_poller *p = tg__calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->a = a;
    p->fn = on_update;
    p->user = user;
    p->timeout_s = opts && opts->timeout_s ? opts->timeout_s : 30;
    p->limit = opts && opts->limit ? opts->limit : 100;
    p->backoff_min_ms = RETRY_MIN_MS;
    p->backoff_max_ms = RETRY_MAX_MS;
    tg__timer_init(&p->retry, on_retry, p);
    poll_next(p);
    return p;
}

void tg__async_poll_backoff(tg_async_poller *p, uint32_t min_ms, uint32_t max_ms)
{
    p->backoff_min_ms = min_ms;
    p->backoff_max_ms = max_ms;
}

TG_API void tg_async_poll_stop(tg_async_poller *p)
{
    if (!p || p->stopped)
        return;
    if (p->dead) {
        tg__free(p);
        return;
    }
    p->stopped = true;
    tg__timer_cancel(&p->a->timers, &p->retry);
    if (p->call) /* completes (cancelled) through the loop, which frees p */
        tg_async_cancel(p->a, p->call);
    else if (!p->a->in_cb || p->a->in_cb->fn != (void (*)(void))on_updates)
        tg__free(p); /* nothing in flight, and not inside our own callback */
}
