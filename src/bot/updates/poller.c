/*
 * poller: long polling over getUpdates, at least once.
 *
 * Each call asks for updates from the confirmed offset: the lowest update_id whose handler
 * has not finished (tg__offsets). Updates at or above it that already ran (or are queued)
 * come back in the answer and are skipped by id. Only once a handler finishes can the offset
 * move past it, so whatever is unfinished when the process dies is redelivered to the next
 * one. At a clean stop the dispatcher drains and one last getUpdates (timeout 0) confirms
 * everything that finished.
 *
 * A watcher thread turns tg_dispatcher_stop() into tg_ctx_cancel() on the polling ctx, so a
 * stop cuts a 30 s long poll short. Errors back off exponentially (interruptible by stop):
 * the loop is the only retry (the polling ctx makes one attempt per call; a 429's
 * retry_after lengthens the wait), and it logs once per state change: a warning when calls
 * start failing or fail differently, one info line when they work again, each failure in
 * between at debug level only.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "bot/dispatch/dispatch_int.h"
#include "bot/fleet/fleet_int.h"
#include "bot/updates/failstate.h"
#include "bot/updates/offsets.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/sized.h"
#include "tgbot/client.h"
#include "tgbot/updates.h"

struct poller {
    tg_dispatcher *d;
    tg_ctx *ctx;
    tg_polling_options o;
    tg__offsets offs;
    tg__jdoc doc;
    tg__buf req;
    uint32_t backoff_ms;
    struct tg__stop_watch watch;
    tg__failstate fails; /* when a failure is worth a warning */
};

static void on_done(void *user, int64_t update_id, bool handled)
{
    struct poller *p = user;
    if (handled) /* dropped ones stay unconfirmed: redelivered after a restart */
        tg__offsets_done(&p->offs, update_id);
}

int tg__getupdates_request(tg__buf *b, const tg_polling_options *o, int64_t offset,
                           uint32_t timeout_s, uint32_t limit)
{
    tg__jw w;
    tg__buf_reset(b);
    tg__jw_init(&w, b);
    tg__jw_obj_begin(&w);
    if (offset) {
        TG__JW_KEY(&w, "offset");
        tg__jw_i64(&w, offset);
    }
    TG__JW_KEY(&w, "timeout");
    tg__jw_i64(&w, timeout_s);
    TG__JW_KEY(&w, "limit");
    tg__jw_i64(&w, limit);
    if (o->allowed_updates) {
        TG__JW_KEY(&w, "allowed_updates");
        tg__jw_arr_begin(&w);
        for (size_t i = 0; o->allowed_updates[i]; i++)
            tg__jw_str(&w, o->allowed_updates[i]);
        tg__jw_arr_end(&w);
    }
    tg__jw_obj_end(&w);
    return w.err;
}

/* The wait before the next call: the backoff, or a 429's retry_after when longer. */
static uint32_t wait_ms(struct poller *p)
{
    int32_t ra = tg_ctx_error(p->ctx)->retry_after;
    uint64_t w = ra > 0 ? (uint64_t)ra * 1000 : 0;
    return w > p->backoff_ms ? (uint32_t)(w < UINT32_MAX ? w : UINT32_MAX) : p->backoff_ms;
}

/* A failed call: warn when the failing starts or its error changes; otherwise debug. */
static void report_error(struct poller *p, tg_status st, uint32_t wait)
{
    const tg_error_info *e = tg_ctx_error(p->ctx);
    if (st == TG_ERR_API && e->error_code == 409)
        tg__dispatcher_seterr(p->d,
                              "getUpdates: 409 Conflict: another instance is polling "
                              "with this token, or a webhook is set (deleteWebhook, or "
                              "tg_polling_options.delete_webhook): %s",
                              e->description);
    else
        tg__dispatcher_seterr(p->d, "getUpdates failed: %s", tg_ctx_errmsg(p->ctx));
    if (tg__failstate_fail(&p->fails, p->d->err)) {
        tg__dispatcher_log(p->d, TG__LOG_WARN,
                           "%s; retrying in %u ms, then backing off up to %u ms (logged again "
                           "when the error changes or polling works)",
                           p->d->err, wait, p->o.backoff_max_ms);
    } else {
        tg__dispatcher_log(p->d, TG__LOG_DEBUG, "%s (failure %llu in a row); retrying in %u ms",
                           p->d->err, (unsigned long long)p->fails.failures, wait);
    }
}

/* A call worked: the end of a failing state, if there was one. */
static void report_ok(struct poller *p)
{
    p->backoff_ms = p->o.backoff_min_ms;
    uint64_t n, secs;
    if (tg__failstate_ok(&p->fails, &n, &secs))
        tg__dispatcher_log(p->d, TG__LOG_INFO,
                           "getUpdates: working again after %llu failed calls in %llu s",
                           (unsigned long long)n, (unsigned long long)secs);
}

/* Wait (a stop ends it at once), then double the backoff. */
static void back_off(struct poller *p, uint32_t wait)
{
    tg__wait_stop(p->d, wait > INT32_MAX ? INT32_MAX : (int)wait);
    p->backoff_ms =
        p->backoff_ms > p->o.backoff_max_ms / 2 ? p->o.backoff_max_ms : p->backoff_ms * 2;
}

/* Feed one update of the answer. Returns 1 if it was new, 0 if skipped, -1 to stop. */
static int feed_one(struct poller *p, uint32_t tok, const char *res)
{
    tg__jerr je;
    int64_t id;
    uint32_t idt = tg__json_obj_get(&p->doc, tok, "update_id");
    if (idt == UINT32_MAX || tg__json_get_i64(&p->doc, idt, &id, &je) != 0) {
        tg__dispatcher_log(p->d, TG__LOG_WARN, "getUpdates: an update without update_id");
        return 0;
    }
    int rc = tg__offsets_add(&p->offs, id);
    if (rc == 1)
        return 0;
    if (rc < 0)
        return -1; /* too many unfinished: stop the batch; it is asked for again */
    const tg__jtok *t = &p->doc.toks[tok];
    char err[256];
    tg_status st =
        tg__dispatcher_feed(p->d, res + t->start, t->len, -1, on_done, p, NULL, err, sizeof err);
    if (st == TG_OK)
        return 1;
    if (st == TG_ERR_CANCELLED)
        return -1; /* stopping: stays unconfirmed */
    tg__dispatcher_log(p->d, TG__LOG_WARN, "getUpdates: skipping update %lld: %s", (long long)id,
                       err);
    tg__offsets_done(&p->offs, id); /* it can never succeed: confirm it */
    return 0;
}

/* Feed a getUpdates answer. Returns the number of new updates, or -1 on a bad answer. */
static int feed_batch(struct poller *p, const char *res, size_t len)
{
    tg__jerr je;
    if (tg__json_parse(&p->doc, res, len, &je) != 0 || p->doc.toks[0].type != TG__J_ARRAY) {
        tg__dispatcher_seterr(p->d, "getUpdates: result is not an array of updates");
        return -1;
    }
    int fresh = 0;
    uint32_t tok = 1;
    for (uint32_t i = 0; i < p->doc.toks[0].count; i++, tok = p->doc.toks[tok].next) {
        if (p->doc.toks[tok].type != TG__J_OBJECT)
            continue;
        int rc = feed_one(p, tok, res);
        if (rc < 0)
            break;
        fresh += rc;
    }
    return fresh;
}

static tg_status poll_once(struct poller *p, uint32_t timeout_s)
{
    const char *res;
    size_t len;
    if (tg__getupdates_request(&p->req, &p->o, tg__offsets_confirmed(&p->offs), timeout_s,
                               p->o.limit) != 0)
        return TG_ERR_NOMEM;
    tg_status st = tg_call_raw(p->ctx, "getUpdates", tg__buf_cstr(&p->req), p->req.len, &res, &len);
    if (st != TG_OK)
        return st;
    int fresh = feed_batch(p, res, len);
    size_t n = p->doc.toks[0].count;
    tg_ctx_reset(p->ctx);
    if (fresh < 0)
        return TG_ERR_DECODE;
    if (fresh == 0 && n > 0) /* only redeliveries of running updates: let them progress */
        tg__wait_stop(p->d, 100);
    return TG_OK;
}

/* 401 and 404 mean the token is wrong or revoked: retrying cannot help. */
static bool fatal(struct poller *p, tg_status st)
{
    int code = tg_ctx_error(p->ctx)->error_code;
    if (st != TG_ERR_API || (code != 401 && code != 404))
        return false;
    tg__dispatcher_seterr(p->d,
                          "getUpdates: %d %s: the bot token is wrong or was revoked; "
                          "giving up",
                          code, tg_ctx_error(p->ctx)->description);
    tg__dispatcher_log(p->d, TG__LOG_ERROR, "%s", p->d->err);
    return true;
}

static tg_status loop(struct poller *p)
{
    while (!tg_dispatcher_stopping(p->d)) {
        tg_status st = poll_once(p, p->o.timeout_s);
        if (st == TG_OK) {
            report_ok(p);
            continue;
        }
        if (tg_dispatcher_stopping(p->d))
            break;
        if (fatal(p, st))
            return st;
        uint32_t wait = wait_ms(p);
        report_error(p, st, wait);
        back_off(p, wait);
    }
    return TG_OK;
}

/* After the drain: one short call so Telegram learns the final offset. */
static void confirm_final(struct poller *p)
{
    int64_t off = tg__offsets_confirmed(&p->offs);
    if (!off)
        return;
    const char *res;
    size_t len;
    tg__buf_reset(&p->req);
    tg__buf_printf(&p->req, "{\"offset\":%lld,\"timeout\":0,\"limit\":1}", (long long)off);
    tg_ctx_reset(p->ctx); /* clears the cancel flag set by the stop */
    /* One attempt, briefly: a stopping bot must not wait out retry backoffs against a
     * server that is away (the unconfirmed updates just come again at the next start). */
    tg_ctx_set_retry_policy(p->ctx, &(tg_retry_policy){.max_attempts = 1});
    tg_ctx_set_timeout(p->ctx, 2000);
    if (tg_call_raw(p->ctx, "getUpdates", tg__buf_cstr(&p->req), p->req.len, &res, &len) != TG_OK)
        tg__dispatcher_log(p->d, TG__LOG_WARN, "getUpdates: final confirmation failed: %s",
                           tg_ctx_errmsg(p->ctx));
    tg_ctx_set_retry_policy(p->ctx, NULL);
    tg_ctx_set_timeout(p->ctx, 0);
    tg_ctx_reset(p->ctx);
}

static void defaults(tg_polling_options *o)
{
    if (!o->timeout_s)
        o->timeout_s = 30;
    if (!o->limit || o->limit > 100)
        o->limit = 100;
    if (!o->backoff_min_ms)
        o->backoff_min_ms = 500;
    if (!o->backoff_max_ms)
        o->backoff_max_ms = 30000;
    if (o->backoff_max_ms < o->backoff_min_ms)
        o->backoff_max_ms = o->backoff_min_ms;
    if (!o->drain_ms)
        o->drain_ms = 10000;
}

static tg_status start(struct poller *p)
{
    p->ctx = tg_ctx_new(p->d->bot);
    if (!p->ctx ||
        tg__offsets_init(&p->offs, p->d->o.queue_capacity + p->d->nworkers + p->o.limit + 1) != 0)
        return TG_ERR_NOMEM;
    if (tg__stop_watch_start(&p->watch, p->d, p->ctx) != 0)
        return TG_ERR_NOMEM;
    if (p->o.delete_webhook && tg_webhook_delete(p->ctx, false) != TG_OK) {
        tg__dispatcher_seterr(p->d, "deleteWebhook failed: %s", tg_ctx_errmsg(p->ctx));
        return TG_ERR_TRANSPORT;
    }
    /* The loop retries (and logs) by itself: one attempt per getUpdates. */
    tg_ctx_set_retry_policy(p->ctx, &(tg_retry_policy){.max_attempts = 1});
    return TG_OK;
}

tg_status tg_run_polling_sized(tg_dispatcher *d, const tg_polling_options *opts, size_t opts_size)
{
    tg_polling_options copy;
    if (d && !tg__sized_in(&copy, sizeof copy, opts, opts_size)) {
        tg__dispatcher_seterr(d, "polling: options: %s", TG__SIZED_ERRMSG);
        return TG_ERR_INVALID;
    }
    opts = &copy;
    if (!d || !d->bot) {
        if (d)
            tg__dispatcher_seterr(d, "tg_run_polling: the dispatcher has no bot");
        return TG_ERR_INVALID;
    }
    if (d->loop) {
        tg__dispatcher_seterr(d, "tg_run_polling: the dispatcher is in loop mode (.async): "
                                 "poll on the loop with tg_dispatcher_poll_async");
        return TG_ERR_INVALID;
    }
    if (opts->fleet)
        return tg__fleet_run_polling(d, opts);
    struct poller p = {.d = d, .o = *opts};
    defaults(&p.o);
    p.backoff_ms = p.o.backoff_min_ms;
    tg__jdoc_init(&p.doc, NULL);
    tg__buf_init(&p.req, (size_t)64 * 1024);
    tg_status st = start(&p);
    if (st == TG_OK) { /* one line, so a bot that starts is seen starting */
        tg__dispatcher_log(
            d, TG__LOG_INFO, "polling: started for @%s (long polls of %u s, %u workers)",
            d->router->username ? d->router->username : "?", p.o.timeout_s, d->nworkers);
        st = loop(&p);
    }
    tg__stop_watch_end(&p.watch); /* before the final call: its cancel must not hit it */
    tg_status dst = tg_dispatcher_drain(d, p.o.drain_ms);
    if (st == TG_OK) {
        st = dst;
        confirm_final(&p);
    }
    tg_ctx_free(p.ctx);
    tg__offsets_cleanup(&p.offs);
    tg__jdoc_cleanup(&p.doc);
    tg__buf_cleanup(&p.req);
    return st;
}
