/*
 * loop: the dispatcher's loop mode (tg_dispatcher_options.async; tgbot/dispatch.h, "the
 * dispatcher on an event loop"). Everything here runs on the async handle's loop thread.
 *
 * Updates (and job runs) wait in lanes keyed by chat, as the worker pool's do (workers.c):
 * a lane holds its chat's items in order and is "busy" while one of them runs. Running an
 * item takes a run (struct lrun: a tg_hctx plus its queue of calls) and calls the router
 * synchronously; the handlers' ctx is a deferred one (bot/client/defer.h), so their calls
 * are encoded and queued on the run instead of blocking. The run sends its calls one at a
 * time through the async handle, each after the previous one completed, and ends when the
 * last has completed: only then is the lane free for the chat's next item, which is what
 * keeps a chat's answers in order. Work starts from a zero-delay timer on the handle's
 * heap (core/timer), never inside feed, so feeding from a handler does not recurse.
 *
 * Ownership: the loop owns its lanes, runs and queued items. A call in flight points back
 * at its run; tg_dispatcher_free orphans it (op->run = NULL) and cancels it, and the
 * completion, which comes later through the handle, only frees it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "bot/client/async_int.h"
#include "bot/client/client_int.h"
#include "bot/dispatch/dispatch_int.h"
#include "core/alloc.h"

#define KICK_BATCH 64                   /* items run per kick before the loop gets a turn */
#define CHECK_NS   (1000ull * 1000000u) /* tg_dispatcher_stop is noticed this often */
#define JOBS_MAX_MS 1000                /* the jobs are looked at least this often */

struct litem { /* a queued update or job run */
    struct litem *next;
    int64_t key;
    bool ordered;
    int64_t update_id;
    tg_feed_done_fn done;
    void *user;
    tg__work_fn fn; /* a job run instead of an update */
    tg__work_done_fn fn_done;
    void *fn_arg;
    size_t len;
    char json[];
};

struct lane {
    int64_t key;
    struct litem *head, *tail;
    bool busy, ready;
    struct lane *hnext, *rnext;
};

struct lrun;

struct lop { /* one queued call of a run */
    struct lop *next;
    struct lrun *run; /* NULL: orphaned (the dispatcher was freed) */
    tg_hctx_result_fn fn;
    void *user;
    uint64_t id; /* in flight: the async call */
    size_t len;
    char method[64];
    char json[];
};

struct tg__lrun {
    struct tg_hctx h;
};

struct lrun {
    struct tg__lrun pub; /* first: h->lrun points here */
    struct tg__loop *l;
    struct lrun *next;     /* free list */
    struct lrun *all_next; /* every run ever made */
    struct lrun *bnext;    /* l->broken */
    struct litem *item;    /* running: the item */
    struct lane *lane;     /* its lane (NULL: unordered) */
    struct lop *ops, *ops_tail;
    struct lop *inflight;
    bool active;      /* has an item */
    bool in_handler;  /* the router (or the job) is running it now */
    bool refusing;    /* a call failed: cancelling the rest, new calls refused */
    bool in_error;    /* the error handler ran: later failures are only logged */
    bool broken;      /* inflight could not be submitted (reported from the kick) */
};

struct getme {
    struct tg__loop *l; /* NULL: orphaned */
};

struct tg__loop {
    tg_dispatcher *d;
    tg_async *a;
    pthread_t thread;
    tg__timer kick, check, jobs_timer;
    struct lane **map;
    size_t nmap, nlanes;
    struct lane *free_lanes;
    struct lane *ready, *ready_tail;
    struct litem *unordered, *unordered_tail;
    struct lrun *free_runs, *all_runs, *broken;
    size_t queued, active;
    tg__jdoc doc;
    tg_async_poller *poller;
    bool held;
    struct tg_jobs *jobs;
    uint64_t (*jobs_pass)(struct tg_jobs *);
    struct getme *getme;
    bool stopping, told, closing;
};

/* async_poll.c */
void tg__async_poll_hold(tg_async_poller *p, bool hold);

static void run_next_op(struct lrun *run);

static bool on_loop_thread(const struct tg__loop *l)
{
    return pthread_equal(pthread_self(), l->thread) != 0;
}

static void arm(struct tg__loop *l, tg__timer *t, uint64_t delay_ns)
{
    if (l->closing)
        return;
    if (tg__timer_armed(t))
        tg__timer_cancel(&l->a->timers, t);
    tg__timer_add_in(&l->a->timers, t, delay_ns);
    tg__async_sync_timer(l->a); /* a foreign loop learns of it (we may be outside its calls) */
}

static void kick(struct tg__loop *l)
{
    if (!tg__timer_armed(&l->kick))
        arm(l, &l->kick, 0);
}

/* ---- lanes ---- */

static size_t slot_of(const struct tg__loop *l, int64_t key)
{
    uint64_t h = (uint64_t)key * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 32) & (l->nmap - 1);
}

static void map_grow(struct tg__loop *l)
{
    size_t n = l->nmap ? l->nmap * 2 : 64;
    struct lane **m = tg__calloc(n, sizeof *m);
    if (!m)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < l->nmap; i++)
        for (struct lane *ln = l->map[i], *next; ln; ln = next) {
            next = ln->hnext;
            uint64_t h = (uint64_t)ln->key * 0x9e3779b97f4a7c15ull;
            size_t s = (size_t)(h >> 32) & (n - 1);
            ln->hnext = m[s];
            m[s] = ln;
        }
    tg__free(l->map);
    l->map = m;
    l->nmap = n;
}

static struct lane *lane_get(struct tg__loop *l, int64_t key)
{
    if (!l->nmap || l->nlanes >= l->nmap)
        map_grow(l);
    if (!l->nmap)
        return NULL;
    size_t s = slot_of(l, key);
    for (struct lane *ln = l->map[s]; ln; ln = ln->hnext)
        if (ln->key == key)
            return ln;
    struct lane *ln = l->free_lanes;
    if (ln)
        l->free_lanes = ln->hnext;
    else if (!(ln = tg__malloc(sizeof *ln)))
        return NULL;
    *ln = (struct lane){.key = key, .hnext = l->map[s]};
    l->map[s] = ln;
    l->nlanes++;
    return ln;
}

static void lane_release(struct tg__loop *l, struct lane *ln)
{
    struct lane **pp = &l->map[slot_of(l, ln->key)];
    while (*pp != ln)
        pp = &(*pp)->hnext;
    *pp = ln->hnext;
    l->nlanes--;
    ln->hnext = l->free_lanes;
    l->free_lanes = ln;
}

static void lane_make_ready(struct tg__loop *l, struct lane *ln)
{
    if (ln->ready || ln->busy || !ln->head)
        return;
    ln->ready = true;
    ln->rnext = NULL;
    if (l->ready_tail)
        l->ready_tail->rnext = ln;
    else
        l->ready = ln;
    l->ready_tail = ln;
}

/* The lane's item is over (NULL: an unordered item): the lane queues for its next item, or
   is released when it has none. */
static void lane_done(struct tg__loop *l, struct lane *ln)
{
    if (!ln)
        return;
    ln->busy = false;
    if (ln->head)
        lane_make_ready(l, ln);
    else
        lane_release(l, ln);
}

static int enqueue(struct tg__loop *l, struct litem *it)
{
    it->next = NULL;
    if (!it->ordered) {
        if (l->unordered_tail)
            l->unordered_tail->next = it;
        else
            l->unordered = it;
        l->unordered_tail = it;
    } else {
        struct lane *ln = lane_get(l, it->key);
        if (!ln)
            return -ENOMEM;
        if (ln->tail)
            ln->tail->next = it;
        else
            ln->head = it;
        ln->tail = it;
        lane_make_ready(l, ln);
    }
    l->queued++;
    kick(l);
    return 0;
}

/* ---- stopping ---- */

static void check_stopped(struct tg__loop *l)
{
    if (!l->stopping || l->told || l->queued || l->active || l->closing)
        return;
    l->told = true;
    tg__timer_cancel(&l->a->timers, &l->check);
    tg__timer_cancel(&l->a->timers, &l->jobs_timer);
    tg__async_sync_timer(l->a);
    tg_dispatcher *d = l->d;
    if (d->o.on_stopped)
        d->o.on_stopped(d, d->o.stopped_user);
}

static void notice_stop(struct tg__loop *l)
{
    if (l->stopping || !atomic_load(&l->d->stop))
        return;
    l->stopping = true;
    if (l->poller) {
        tg_async_poll_stop(l->poller);
        l->poller = NULL;
    }
}

/* ---- calls of a run ---- */

static void item_finished(struct tg__loop *l, struct litem *it, bool handled)
{
    if (it->fn) {
        if (it->fn_done)
            it->fn_done(it->fn_arg, handled);
    } else {
        if (!handled)
            atomic_fetch_add(&l->d->st.dropped, 1);
        if (it->done)
            it->done(it->user, it->update_id, handled);
    }
    tg__free(it);
}

static void run_finish(struct lrun *run)
{
    struct tg__loop *l = run->l;
    struct tg_hctx *h = &run->pub.h;
    tg_dispatcher *d = l->d;
    if (tg__session_flush(h) != TG_OK) { /* fields a continuation changed */
        atomic_fetch_add(&d->st.failed, 1);
        tg__dispatcher_log(d, TG__LOG_WARN, "update %lld (%s): %s", (long long)h->ev.update_id,
                           h->ev.kind_name, h->err);
    }
    struct litem *it = run->item;
    struct lane *ln = run->lane;
    run->item = NULL;
    run->lane = NULL;
    run->active = run->refusing = run->in_error = false;
    if (h->ctx)
        tg_ctx_reset(h->ctx);
    run->next = l->free_runs;
    l->free_runs = run;
    l->active--;
    item_finished(l, it, true);
    lane_done(l, ln);
    if (l->ready || l->unordered)
        kick(l);
    check_stopped(l);
}

/* The update failed with st (h->err says why): cancel its queued calls, then tell the
 * error handler once. */
static void run_failed(struct lrun *run, tg_status st)
{
    struct tg_hctx *h = &run->pub.h;
    tg_dispatcher *d = run->l->d;
    atomic_fetch_add(&d->st.failed, 1);
    if (run->in_error) {
        tg__dispatcher_log(d, TG__LOG_WARN, "update %lld (%s), in its error handler: %s",
                           (long long)h->ev.update_id, h->ev.kind_name, h->err);
        return;
    }
    char why[sizeof h->err];
    snprintf(why, sizeof why, "%s", h->err);
    run->refusing = true;
    while (run->ops) {
        struct lop *op = run->ops;
        run->ops = op->next;
        if (op->fn)
            op->fn(h, TG_ERR_CANCELLED, NULL, 0, op->user);
        tg__free(op);
    }
    run->ops_tail = NULL;
    run->refusing = false;
    run->in_error = true;
    snprintf(h->err, sizeof h->err, "%s", why);
    if (d->router->on_error)
        d->router->on_error(h, st, h->err, d->router->error_user);
    else
        tg__dispatcher_log(d, TG__LOG_WARN, "update %lld (%s): %s", (long long)h->ev.update_id,
                           h->ev.kind_name, h->err);
}

static void op_finished(struct lrun *run, struct lop *op, tg_status st, const char *errmsg,
                        const char *json, size_t len)
{
    struct tg_hctx *h = &run->pub.h;
    run->inflight = NULL;
    if (st != TG_OK)
        tg_hctx_fail(h, st, "%s", errmsg);
    else
        h->err[0] = '\0';
    tg_status ust = st;
    if (op->fn) {
        ust = op->fn(h, st, st == TG_OK ? json : NULL, st == TG_OK ? len : 0, op->user);
        if (ust != TG_OK && !h->err[0])
            tg_hctx_fail(h, ust, "%s: the continuation returned %s", op->method,
                         tg_strerror(ust));
    }
    tg__free(op);
    if (ust != TG_OK)
        run_failed(run, ust);
    run_next_op(run);
}

static void on_op_done(tg_async *a, const tg_async_result *r, void *user)
{
    (void)a;
    struct lop *op = user;
    struct lrun *run = op->run;
    if (!run) { /* the dispatcher is gone */
        tg__free(op);
        return;
    }
    op_finished(run, op, r->status, tg_ctx_errmsg(r->ctx), r->json, r->json_len);
}

static void run_next_op(struct lrun *run)
{
    struct tg__loop *l = run->l;
    if (run->inflight)
        return;
    if (!run->ops) {
        if (!run->in_handler)
            run_finish(run);
        return;
    }
    struct lop *op = run->ops;
    run->ops = op->next;
    if (!run->ops)
        run->ops_tail = NULL;
    run->inflight = op;
    op->id = tg_async_call_raw(l->a, op->method, op->json, op->len, on_op_done, op);
    if (op->id == 0) { /* the handle is full: report it from the kick, not from here */
        run->broken = true;
        run->bnext = l->broken;
        l->broken = run;
        kick(l);
    }
}

/* The deferred ctx's hook (bot/client/defer.h): queue the call on the run. */
static tg_status on_defer(void *user, tg_ctx *ctx, const char *method, const char *body,
                          size_t len)
{
    struct tg_hctx *h = user;
    struct lrun *run = (struct lrun *)h->lrun;
    tg_hctx_result_fn fn = h->then_fn;
    void *fn_user = h->then_user;
    h->then_fn = NULL;
    if (run->l->closing || !run->active)
        return tg__ctx_fail(ctx, TG_ERR_CANCELLED, "the dispatcher is closing");
    if (run->refusing)
        return tg__ctx_fail(ctx, TG_ERR_CANCELLED,
                            "not queued: an earlier call of this update failed");
    size_t mlen = strlen(method);
    if (mlen >= sizeof ((struct lop *)0)->method)
        return tg__ctx_fail(ctx, TG_ERR_INVALID, "method name too long");
    struct lop *op = tg__malloc(sizeof *op + len + 1);
    if (!op)
        return tg__ctx_fail(ctx, TG_ERR_NOMEM, "no memory to queue the call (%zu bytes)", len);
    *op = (struct lop){.run = run, .fn = fn, .user = fn_user, .len = len};
    memcpy(op->method, method, mlen + 1);
    memcpy(op->json, body, len);
    op->json[len] = '\0';
    if (run->ops_tail)
        run->ops_tail->next = op;
    else
        run->ops = op;
    run->ops_tail = op;
    run_next_op(run);
    return TG_OK;
}

/* ---- running items ---- */

static struct lrun *run_get(struct tg__loop *l)
{
    struct lrun *run = l->free_runs;
    if (run) {
        l->free_runs = run->next;
        return run;
    }
    tg_dispatcher *d = l->d;
    run = tg__calloc(1, sizeof *run);
    if (!run)
        return NULL;
    if (tg__hctx_init(&run->pub.h, d, 0, d->o.arena_max_bytes) != 0 ||
        (d->bot && !(run->pub.h.ctx = tg_ctx_new(d->bot)))) {
        tg__hctx_cleanup(&run->pub.h);
        tg__free(run);
        return NULL;
    }
    run->l = l;
    run->pub.h.lrun = &run->pub;
    if (run->pub.h.ctx)
        tg__ctx_set_defer(run->pub.h.ctx, on_defer, &run->pub.h);
    run->all_next = l->all_runs;
    l->all_runs = run;
    return run;
}

static void run_item(struct tg__loop *l, struct litem *it, struct lane *ln)
{
    struct lrun *run = run_get(l);
    if (!run) {
        tg__dispatcher_log(l->d, TG__LOG_WARN, "update %lld: out of memory; dropped",
                           (long long)it->update_id);
        item_finished(l, it, false);
        lane_done(l, ln);
        return;
    }
    run->item = it;
    run->lane = ln;
    run->active = run->in_handler = true;
    l->active++;
    struct tg_hctx *h = &run->pub.h;
    if (it->fn) { /* a job: the run is over for the queue once its handler returned */
        tg__hctx_reset(h);
        it->fn(h, it->fn_arg);
        if (it->fn_done)
            it->fn_done(it->fn_arg, true);
        it->fn_done = NULL;
        h->job = NULL; /* its info belonged to the run just finished */
    } else {
        tg__dispatch_process(l->d, h, it->json, it->len);
    }
    run->in_handler = false;
    run_next_op(run); /* finishes the run when nothing was queued */
}

static void on_kick(tg__timer *t, uint64_t now)
{
    (void)now;
    struct tg__loop *l = t->user;
    notice_stop(l);
    while (l->broken) {
        struct lrun *run = l->broken;
        l->broken = run->bnext;
        run->broken = false;
        struct lop *op = run->inflight;
        op_finished(run, op, TG_ERR_FLOOD,
                    "the async handle is full (tg_async_options.max_pending)", NULL, 0);
    }
    if (l->getme)
        return; /* routing waits for the username */
    for (int n = 0; n < KICK_BATCH; n++) {
        struct litem *it;
        struct lane *ln = NULL;
        if (l->ready && (n % 2 == 0 || !l->unordered)) {
            ln = l->ready;
            l->ready = ln->rnext;
            if (!l->ready)
                l->ready_tail = NULL;
            ln->ready = false;
            it = ln->head;
            ln->head = it->next;
            if (!ln->head)
                ln->tail = NULL;
            ln->busy = true;
        } else if (l->unordered) {
            it = l->unordered;
            l->unordered = it->next;
            if (!l->unordered)
                l->unordered_tail = NULL;
        } else {
            break;
        }
        l->queued--;
        run_item(l, it, ln);
    }
    if (l->ready || l->unordered)
        kick(l);
    if (l->held && l->poller && l->queued <= l->d->o.queue_capacity / 2) {
        l->held = false;
        tg__async_poll_hold(l->poller, false);
    }
    check_stopped(l);
}

static void on_check(tg__timer *t, uint64_t now)
{
    (void)now;
    struct tg__loop *l = t->user;
    notice_stop(l);
    check_stopped(l);
    if (!l->told)
        arm(l, &l->check, CHECK_NS);
}

static void on_jobs_timer(tg__timer *t, uint64_t now)
{
    (void)now;
    struct tg__loop *l = t->user;
    if (!l->jobs)
        return;
    uint64_t ms = l->jobs_pass(l->jobs);
    if (ms > JOBS_MAX_MS)
        ms = JOBS_MAX_MS;
    if (l->jobs && !l->told)
        arm(l, &l->jobs_timer, ms * 1000000u);
}

/* ---- the username (getMe, without blocking) ---- */

static void on_getme(tg_async *a, const tg_async_result *r, void *user)
{
    (void)a;
    struct getme *g = user;
    struct tg__loop *l = g->l;
    tg__free(g);
    if (!l)
        return;
    l->getme = NULL;
    bool ok = false;
    if (r->status == TG_OK) {
        tg__jdoc doc;
        tg__jerr je;
        char name[128];
        tg__jdoc_init(&doc, NULL);
        if (tg__json_parse(&doc, r->json, r->json_len, &je) == 0 &&
            doc.toks[0].type == TG__J_OBJECT) {
            uint32_t tk = tg__json_obj_get(&doc, 0, "username");
            ok = tk != UINT32_MAX && doc.toks[tk].type == TG__J_STRING &&
                 tg__json_str_copy(&doc, tk, name, sizeof name) >= 0 &&
                 tg_router_set_username(l->d->router, name) == TG_OK;
        }
        tg__jdoc_cleanup(&doc);
    }
    if (!ok)
        tg__dispatcher_log(l->d, TG__LOG_WARN,
                           "dispatcher: getMe failed (%s): commands with an @mention are taken "
                           "as addressed to this bot",
                           r->status == TG_OK ? "no username" : tg_ctx_errmsg(r->ctx));
    kick(l);
}

/* ---- the dispatcher's entry points ---- */

int tg__loop_new(tg_dispatcher *d, char *err, size_t errcap)
{
    tg_async *a = d->o.async;
    if (d->bot && d->bot != a->bot) {
        snprintf(err, errcap, "dispatcher: the async handle (.async) belongs to another bot");
        return -1;
    }
    d->bot = a->bot;
    struct tg__loop *l = tg__calloc(1, sizeof *l);
    if (!l)
        return -1;
    l->d = d;
    l->a = a;
    l->thread = pthread_self();
    tg__jdoc_init(&l->doc, NULL);
    tg__timer_init(&l->kick, on_kick, l);
    tg__timer_init(&l->check, on_check, l);
    tg__timer_init(&l->jobs_timer, on_jobs_timer, l);
    d->loop = l;
    if (!d->router->username && !d->o.no_get_me) {
        struct getme *g = tg__calloc(1, sizeof *g);
        if (!g)
            return -1;
        g->l = l;
        l->getme = g;
        if (tg_async_call_raw(a, "getMe", NULL, 0, on_getme, g) == 0) {
            tg__free(g);
            l->getme = NULL;
        }
    }
    arm(l, &l->check, CHECK_NS);
    return 0;
}

/* from_poller: the loop's own long poll, which is held back instead of refused (the
 * updates of a getUpdates answer are already taken off Telegram's queue). */
static tg_status feed(struct tg__loop *l, const char *json, size_t len, tg_feed_done_fn done,
                      void *user, bool from_poller, char *err, size_t errcap)
{
    if (!on_loop_thread(l)) {
        snprintf(err, errcap, "update: in loop mode, feed on the loop thread only");
        return TG_ERR_INVALID;
    }
    notice_stop(l);
    if (l->stopping || l->closing) {
        snprintf(err, errcap, "update: the dispatcher is stopping");
        return TG_ERR_CANCELLED;
    }
    if (l->queued >= l->d->o.queue_capacity && !from_poller) {
        snprintf(err, errcap, "update: queue full");
        return TG_ERR_FLOOD;
    }
    tg__event_key k;
    int prc = tg__event_key_parse(&l->doc, json, len, &k, err, errcap);
    if (prc != 0)
        return prc == -2 ? TG_ERR_NOMEM : TG_ERR_DECODE;
    struct litem *it = tg__malloc(sizeof *it + len + 1);
    if (!it) {
        snprintf(err, errcap, "update %lld: out of memory", (long long)k.update_id);
        return TG_ERR_NOMEM;
    }
    *it = (struct litem){.key = k.key,
                         .ordered = k.ordered,
                         .update_id = k.update_id,
                         .done = done,
                         .user = user,
                         .len = len};
    memcpy(it->json, json, len);
    it->json[len] = '\0';
    if (enqueue(l, it) != 0) {
        tg__free(it);
        snprintf(err, errcap, "update %lld: out of memory", (long long)k.update_id);
        return TG_ERR_NOMEM;
    }
    atomic_fetch_add(&l->d->st.received, 1);
    return TG_OK;
}

tg_status tg__loop_feed(struct tg__loop *l, const char *json, size_t len, tg_feed_done_fn done,
                        void *user, char *err, size_t errcap)
{
    return feed(l, json, len, done, user, false, err, errcap);
}

int tg__loop_submit_fn(struct tg__loop *l, int64_t key, bool ordered, tg__work_fn fn,
                       tg__work_done_fn done, void *arg)
{
    if (l->stopping || l->closing)
        return -ECANCELED;
    struct litem *it = tg__calloc(1, sizeof *it);
    if (!it)
        return -ENOMEM;
    it->key = key;
    it->ordered = ordered;
    it->fn = fn;
    it->fn_done = done;
    it->fn_arg = arg;
    if (enqueue(l, it) != 0) {
        tg__free(it);
        return -ENOMEM;
    }
    return 0;
}

static void on_poll_update(tg_async *a, const tg_update *u, void *user)
{
    (void)a;
    struct tg__loop *l = user;
    char err[256];
    tg_status st = feed(l, u->raw.json, u->raw.len, NULL, NULL, true, err, sizeof err);
    if (st != TG_OK && st != TG_ERR_CANCELLED) {
        atomic_fetch_add(&l->d->st.rejected, 1);
        tg__dispatcher_log(l->d, TG__LOG_WARN, "async polling: %s", err);
    }
    if (!l->held && l->poller && l->queued >= l->d->o.queue_capacity) {
        l->held = true; /* the next getUpdates waits for room */
        tg__async_poll_hold(l->poller, true);
    }
}

tg_status tg_dispatcher_poll_async(tg_dispatcher *d, const tg_async_poll_options *opts)
{
    if (!d || !d->loop || d->loop->poller || d->loop->stopping) {
        if (d)
            tg__dispatcher_seterr(d, "poll_async: %s",
                                  !d->loop ? "the dispatcher is not in loop mode (.async)"
                                           : "polling already, or stopping");
        return TG_ERR_INVALID;
    }
    struct tg__loop *l = d->loop;
    l->poller = tg_async_poll_start(l->a, opts, on_poll_update, l);
    return l->poller ? TG_OK : TG_ERR_NOMEM;
}

void tg__loop_set_jobs(struct tg__loop *l, struct tg_jobs *q, uint64_t (*pass)(struct tg_jobs *))
{
    l->jobs = q;
    l->jobs_pass = pass;
    if (q)
        arm(l, &l->jobs_timer, 0);
    else if (tg__timer_armed(&l->jobs_timer))
        tg__timer_cancel(&l->a->timers, &l->jobs_timer);
}

void tg__loop_jobs_wake(struct tg__loop *l)
{
    if (l->jobs && !l->told && on_loop_thread(l))
        arm(l, &l->jobs_timer, 0);
}

static void drop_from(struct tg__loop *l, struct litem **head, struct litem **tail,
                      tg__work_done_fn fn_done)
{
    struct litem *keep = NULL, *keep_tail = NULL;
    for (struct litem *it = *head, *next; it; it = next) {
        next = it->next;
        if (it->fn && it->fn_done == fn_done) {
            l->queued--;
            item_finished(l, it, false);
            continue;
        }
        it->next = NULL;
        if (keep_tail)
            keep_tail->next = it;
        else
            keep = it;
        keep_tail = it;
    }
    *head = keep;
    *tail = keep_tail;
}

void tg__loop_drop_fns(struct tg__loop *l, tg__work_done_fn fn_done)
{
    drop_from(l, &l->unordered, &l->unordered_tail, fn_done);
    for (size_t i = 0; i < l->nmap; i++)
        for (struct lane *ln = l->map[i]; ln; ln = ln->hnext)
            drop_from(l, &ln->head, &ln->tail, fn_done);
    /* lanes left empty stay until their next item or the free; ready ones with nothing are
     * skipped by the kick */
    struct lane **pp = &l->ready;
    l->ready_tail = NULL;
    while (*pp) {
        if (!(*pp)->head) {
            (*pp)->ready = false;
            *pp = (*pp)->rnext;
        } else {
            l->ready_tail = *pp;
            pp = &(*pp)->rnext;
        }
    }
}

void tg__loop_free(struct tg__loop *l)
{
    if (!l)
        return;
    tg_async *a = l->a;
    tg_dispatcher *d = l->d;
    if (l->poller)
        tg_async_poll_stop(l->poller);
    l->poller = NULL;
    l->closing = true;
    tg__timer_cancel(&a->timers, &l->kick);
    tg__timer_cancel(&a->timers, &l->check);
    tg__timer_cancel(&a->timers, &l->jobs_timer);
    tg__async_sync_timer(a);
    if (l->getme)
        l->getme->l = NULL; /* its completion frees it */
    /* what never ran */
    for (struct litem *it = l->unordered, *next; it; it = next) {
        next = it->next;
        item_finished(l, it, false);
    }
    for (size_t i = 0; i < l->nmap; i++)
        for (struct lane *ln = l->map[i], *next; ln; ln = next) {
            next = ln->hnext;
            for (struct litem *it = ln->head, *inext; it; it = inext) {
                inext = it->next;
                item_finished(l, it, false);
            }
            tg__free(ln);
        }
    for (struct lane *ln = l->free_lanes, *next; ln; ln = next) {
        next = ln->hnext;
        tg__free(ln);
    }
    /* runs waiting for calls: continuations hear of the cancellation, calls in flight are
     * orphaned and cancelled */
    for (struct lrun *run = l->all_runs, *next; run; run = next) {
        next = run->all_next;
        struct tg_hctx *h = &run->pub.h;
        if (run->active) {
            run->refusing = true;
            if (run->inflight) {
                struct lop *op = run->inflight;
                if (op->fn)
                    op->fn(h, TG_ERR_CANCELLED, NULL, 0, op->user);
                op->run = NULL;
                if (!run->broken && op->id)
                    tg_async_cancel(a, op->id);
                else
                    tg__free(op);
            }
            while (run->ops) {
                struct lop *op = run->ops;
                run->ops = op->next;
                if (op->fn)
                    op->fn(h, TG_ERR_CANCELLED, NULL, 0, op->user);
                tg__free(op);
            }
            if (run->item)
                item_finished(l, run->item, true);
        }
        tg_ctx_free(h->ctx);
        tg__hctx_cleanup(h);
        tg__free(run);
    }
    tg__jdoc_cleanup(&l->doc);
    tg__free(l->map);
    d->loop = NULL;
    tg__free(l);
}
