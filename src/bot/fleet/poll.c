/*
 * poll: long polling as the ingress of a fleet (tg_polling_options.fleet).
 *
 * Any number of processes may run it; the one holding the lease {Ppoll}:lease polls, the
 * others wait and take over within lease_ms when it stops or dies. The next offset lives in
 * Redis ({Ppoll}:offset) and moves only past updates that XADD stored, and only while the
 * lease is held (one script checks both): so Telegram is told to forget an update only once
 * it is in a stream, and a new poller starts where the last one stopped. A poller that dies
 * between an XADD and the offset update makes its successor publish that update again (a
 * duplicate the idempotency helper absorbs); nothing is lost.
 *
 * Each getUpdates waits at most lease_ms / 2 (and the configured timeout), so the lease is
 * renewed between calls; a batch that came back after the lease ran out by the local clock
 * is dropped unpublished (the new owner fetches it again).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "bot/dispatch/dispatch_int.h"
#include "bot/fleet/fleet_int.h"
#include "bot/updates/failstate.h"
#include "core/buf.h"
#include "core/clock.h"
#include "tgbot/client.h"
#include "tgbot/updates.h"

/* KEYS: lease, offset. ARGV: id, offset. */
static const char offset_lua[] = "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end\n"
                                 "redis.call('SET', KEYS[2], ARGV[2])\n"
                                 "return 1\n";
static struct tg__rscript offset_script;
static pthread_once_t offset_once = PTHREAD_ONCE_INIT;

static void offset_make(void)
{
    tg__rscript_init(&offset_script, offset_lua);
}

struct fpoll {
    tg_fleet *f;
    tg_dispatcher *d;
    tg_polling_options o;
    tg_ctx *ctx;
    tg__rconn *rc;
    tg__jdoc doc;
    tg__buf req;
    char lease[TG__FLEET_KEY_MAX], offset_key[TG__FLEET_KEY_MAX];
    uint64_t valid_until;
    bool held;
    bool round_failed;   /* this round (lease, poll, publish) had a failure */
    tg__failstate fails; /* when a failure is worth a warning */
    struct tg__stop_watch watch;
};

/* A failure of this round: a warning when the failing starts or its error changes,
 * otherwise a debug line. */
static void warn(struct fpoll *p, const char *what, const char *why)
{
    char line[512];
    snprintf(line, sizeof line, "fleet polling: %s: %s", what, why);
    p->round_failed = true;
    if (tg__failstate_fail(&p->fails, line))
        tg__dispatcher_log(p->d, TG__LOG_WARN,
                           "%s; retrying (logged again when the error changes or polling works)",
                           line);
    else
        tg__dispatcher_log(p->d, TG__LOG_DEBUG, "%s (failure %llu in a row); retrying", line,
                           (unsigned long long)p->fails.failures);
}

/* A round without a failure: the end of a failing state, if there was one. */
static void round_ok(struct fpoll *p)
{
    uint64_t n, secs;
    if (tg__failstate_ok(&p->fails, &n, &secs))
        tg__dispatcher_log(p->d, TG__LOG_INFO,
                           "fleet polling: working again after %llu failed calls in %llu s",
                           (unsigned long long)n, (unsigned long long)secs);
}

/* Take or renew the polling lease. true while held. */
static bool hold_lease(struct fpoll *p)
{
    char ms[16];
    snprintf(ms, sizeof ms, "%u", p->f->lease_ms);
    const char *keys[] = {p->lease};
    const char *args[] = {p->f->worker_id, ms};
    uint64_t t0 = tg__now_ms();
    redisReply *r = tg__rconn_eval(p->rc, &tg__fleet_lease_script, 1, keys, 2, args, NULL);
    long long v = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r)
        freeReplyObject(r);
    if (v < 0) {
        warn(p, "lease", tg__rconn_err(p->rc));
        return p->held = false;
    }
    if (v > 0 && !p->held)
        tg__dispatcher_log(p->d, TG__LOG_INFO, "fleet polling: %s polls now", p->f->worker_id);
    p->held = v > 0;
    if (p->held)
        p->valid_until = t0 + p->f->lease_ms - p->f->lease_ms / 5;
    return p->held;
}

static int64_t stored_offset(struct fpoll *p, bool *ok)
{
    const char *argv[] = {"GET", p->offset_key};
    redisReply *r = tg__rconn_cmd(p->rc, p->offset_key, 2, argv, NULL);
    *ok = r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL);
    int64_t v = r && r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : 0;
    if (!*ok)
        warn(p, "reading the offset", r ? r->str : tg__rconn_err(p->rc));
    if (r)
        freeReplyObject(r);
    return v;
}

static bool save_offset(struct fpoll *p, int64_t next)
{
    char v[24];
    const char *keys[] = {p->lease, p->offset_key};
    const char *args[] = {p->f->worker_id, tg__fleet_i64(next, v, sizeof v)};
    redisReply *r = tg__rconn_eval(p->rc, &offset_script, 2, keys, 2, args, NULL);
    bool ok = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    if (r)
        freeReplyObject(r);
    return ok;
}

/* Publish the answer's updates at or above offset, in order, until one fails. Returns the
 * next offset (offset itself when nothing was published). */
static int64_t publish_batch(struct fpoll *p, const char *res, size_t len, int64_t offset)
{
    tg__jerr je;
    if (tg__json_parse(&p->doc, res, len, &je) != 0 || p->doc.toks[0].type != TG__J_ARRAY) {
        warn(p, "getUpdates", "the result is not an array of updates");
        return offset;
    }
    uint32_t tok = 1;
    for (uint32_t i = 0; i < p->doc.toks[0].count; i++, tok = p->doc.toks[tok].next) {
        const tg__jtok *t = &p->doc.toks[tok];
        int64_t id;
        uint32_t idt =
            t->type == TG__J_OBJECT ? tg__json_obj_get(&p->doc, tok, "update_id") : UINT32_MAX;
        if (idt == UINT32_MAX || tg__json_get_i64(&p->doc, idt, &id, &je) != 0 || id < offset)
            continue;
        char err[256];
        tg_status st = tg__fleet_publish(p->f, res + t->start, t->len, err, sizeof err);
        if (st == TG_ERR_TRANSPORT || st == TG_ERR_NOMEM) {
            warn(p, "publishing", err);
            break;
        }
        if (st != TG_OK) /* not an Update: it can never be published; skip it */
            tg__dispatcher_log(p->d, TG__LOG_WARN, "fleet polling: skipping: %s", err);
        offset = id + 1;
    }
    return offset;
}

static tg_status poll_once(struct fpoll *p, bool *empty)
{
    bool ok;
    int64_t offset = stored_offset(p, &ok);
    if (!ok)
        return TG_ERR_TRANSPORT;
    uint32_t timeout_s = p->o.timeout_s ? p->o.timeout_s : 30;
    if (timeout_s > p->f->lease_ms / 2000)
        timeout_s = p->f->lease_ms / 2000;
    uint32_t limit = p->o.limit && p->o.limit <= 100 ? p->o.limit : 100;
    if (tg__getupdates_request(&p->req, &p->o, offset, timeout_s, limit) != 0)
        return TG_ERR_NOMEM;
    const char *res;
    size_t len;
    tg_status st = tg_call_raw(p->ctx, "getUpdates", tg__buf_cstr(&p->req), p->req.len, &res, &len);
    *empty = st == TG_OK && len <= 2; /* "[]" */
    if (st == TG_OK && tg__now_ms() < p->valid_until) {
        int64_t next = publish_batch(p, res, len, offset);
        if (next != offset && !save_offset(p, next))
            warn(p, "saving the offset", tg__rconn_err(p->rc));
    } else if (st != TG_OK && !tg_dispatcher_stopping(p->d)) {
        warn(p, "getUpdates", tg_ctx_errmsg(p->ctx));
    }
    tg_ctx_reset(p->ctx);
    return st;
}

static void loop(struct fpoll *p)
{
    uint32_t wait_ms = p->f->lease_ms / 4;
    while (!tg_dispatcher_stopping(p->d)) {
        p->round_failed = false;
        if (!hold_lease(p)) {
            if (!p->round_failed) /* another worker polls: Redis answered */
                round_ok(p);
            tg__wait_stop(p->d, (int)wait_ms);
            continue;
        }
        bool empty = false;
        tg_status st = poll_once(p, &empty);
        if (st != TG_OK)
            tg__wait_stop(p->d, (int)wait_ms);
        else if (!p->round_failed)
            round_ok(p);
        if (st == TG_OK && empty && p->f->lease_ms < 2000)
            tg__wait_stop(p->d, 100); /* short polls (timeout 0): do not spin */
    }
}

tg_status tg__fleet_run_polling(tg_dispatcher *d, const tg_polling_options *o)
{
    pthread_once(&offset_once, offset_make);
    struct fpoll p = {.f = o->fleet, .d = d, .o = *o};
    snprintf(p.lease, sizeof p.lease, "{%spoll}:lease", p.f->prefix);
    snprintf(p.offset_key, sizeof p.offset_key, "{%spoll}:offset", p.f->prefix);
    tg__jdoc_init(&p.doc, NULL);
    tg__buf_init(&p.req, 4096);
    p.ctx = tg_ctx_new(d->bot);
    p.rc = tg__rconn_new(&p.f->rcfg);
    tg_status st = TG_ERR_NOMEM;
    if (p.ctx && o->delete_webhook && tg_webhook_delete(p.ctx, false) != TG_OK) {
        tg__dispatcher_seterr(d, "deleteWebhook failed: %s", tg_ctx_errmsg(p.ctx));
        st = TG_ERR_TRANSPORT;
    } else if (p.ctx && p.rc && tg__stop_watch_start(&p.watch, d, p.ctx) == 0) {
        tg__dispatcher_log(d, TG__LOG_INFO, "fleet polling: %s waits for the polling lease",
                           p.f->worker_id);
        loop(&p);
        tg__stop_watch_end(&p.watch);
        const char *keys[] = {p.lease};
        const char *args[] = {p.f->worker_id};
        redisReply *r = tg__rconn_eval(p.rc, &tg__fleet_release_script, 1, keys, 1, args, NULL);
        if (r)
            freeReplyObject(r);
        st = TG_OK;
    }
    tg__rconn_free(p.rc);
    tg_ctx_free(p.ctx);
    tg__jdoc_cleanup(&p.doc);
    tg__buf_cleanup(&p.req);
    return st;
}
