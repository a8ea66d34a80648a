/*
 * dispatcher: the worker pool in front of a router. See tgbot/dispatch.h.
 *
 * feed() tokenizes the update on the calling thread (a webhook connection, the poller) to
 * learn its chat, copies the bytes into one allocation and queues it under the chat id. A
 * worker tokenizes it again into its own context, builds the tg_event, runs conversation
 * pre-routing (cancel command, timeouts) and the router, then resets its ctx arena. Feeding
 * threads borrow tokenizer documents from a small locked freelist, so a warm feed allocates
 * only the queued copy.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bot/dispatch/dispatch_int.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "core/sized.h"
#include "core/log.h"
#include "tgbot/client.h"

struct feed_item {
    tg__witem w;
    tg_dispatcher *d;
    int64_t update_id;
    tg_feed_done_fn done;
    void *user;
    struct tg__reply *reply;
    tg__work_fn fn; /* a function item (jobs) instead of an update */
    tg__work_done_fn fn_done;
    void *fn_arg;
    size_t len;
    char json[];
};

static _Thread_local char new_err[256];

static void set_err(tg_dispatcher *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void set_err(tg_dispatcher *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d ? d->err : new_err, sizeof new_err, fmt, ap);
    va_end(ap);
}

const char *tg_dispatcher_errmsg(const tg_dispatcher *d)
{
    return d ? d->err : new_err;
}

static void dlog(tg_dispatcher *d, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void dlog(tg_dispatcher *d, int level, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (d->bot)
        tg_bot_log(d->bot, level + 1, "%s", line); /* TG_LOG_* are the core levels + 1 */
    else
        tg__log(NULL, level, "%s", line);
}

tg_status tg__dispatch_process(tg_dispatcher *d, struct tg_hctx *h, const char *json, size_t len)
{
    tg__hctx_reset(h);
    char err[256];
    const char *user = d->router->username;
    int prc = tg__event_parse(&h->ev, &h->doc, &h->arena, json, len, user, err, sizeof err);
    if (prc != 0) {
        dlog(d, TG__LOG_WARN, "dispatch: %s", err);
        atomic_fetch_add(&d->st.failed, 1);
        return prc == -2 ? TG_ERR_NOMEM : TG_ERR_DECODE;
    }
    tg_status st = TG_OK;
    bool handled = true;
    tg__cbdata_resolve(h);
    st = tg__router_run(d->router, h, &handled);
    tg_status wst = tg__session_flush(h); /* after every handler and middleware */
    if (wst != TG_OK && st == TG_OK) {
        st = wst;
        if (d->router->on_error)
            d->router->on_error(h, st, h->err, d->router->error_user);
    }
    atomic_fetch_add(&d->st.handled, 1);
    if (!handled)
        atomic_fetch_add(&d->st.unhandled, 1);
    if (st != TG_OK) {
        atomic_fetch_add(&d->st.failed, 1);
        if (!d->router->on_error)
            dlog(d, TG__LOG_WARN, "update %lld (%s): %s", (long long)h->ev.update_id,
                 h->ev.kind_name, h->err);
    }
    if (h->ctx)
        tg_ctx_reset(h->ctx);
    return st;
}

static void worker_run(void *user, unsigned worker, tg__witem *it)
{
    tg_dispatcher *d = user;
    struct feed_item *fi = (struct feed_item *)it;
    struct tg_hctx *h = &d->hctx[worker];
    if (fi->fn) {
        tg__hctx_reset(h);
        fi->fn(h, fi->fn_arg);
        if (h->ctx)
            tg_ctx_reset(h->ctx);
        return;
    }
    h->reply = fi->reply;
    tg__dispatch_process(d, h, fi->json, fi->len);
    h->reply = NULL;
}

static void worker_done(void *user, tg__witem *it, bool cancelled)
{
    tg_dispatcher *d = user;
    struct feed_item *fi = (struct feed_item *)it;
    if (fi->fn) {
        if (fi->fn_done)
            fi->fn_done(fi->fn_arg, !cancelled);
        tg__free(fi);
        return;
    }
    if (cancelled)
        atomic_fetch_add(&d->st.dropped, 1);
    if (fi->done)
        fi->done(fi->user, fi->update_id, !cancelled);
    if (fi->reply) {
        pthread_mutex_lock(&fi->reply->mu);
        fi->reply->done = true;
        pthread_cond_broadcast(&fi->reply->cv);
        pthread_mutex_unlock(&fi->reply->mu);
        tg__reply_release(fi->reply);
    }
    tg__free(fi);
}

static tg__jdoc *doc_get(tg_dispatcher *d)
{
    tg__jdoc *doc = NULL;
    pthread_mutex_lock(&d->docs_mu);
    if (d->ndocs)
        doc = d->docs[--d->ndocs];
    pthread_mutex_unlock(&d->docs_mu);
    if (!doc && (doc = tg__malloc(sizeof *doc)) != NULL)
        tg__jdoc_init(doc, NULL);
    return doc;
}

static void doc_put(tg_dispatcher *d, tg__jdoc *doc)
{
    pthread_mutex_lock(&d->docs_mu);
    if (d->ndocs == d->docs_cap) {
        size_t ncap = d->docs_cap ? d->docs_cap * 2 : 8;
        tg__jdoc **nd = tg__realloc(d->docs, ncap * sizeof(tg__jdoc *));
        if (nd) {
            d->docs = nd;
            d->docs_cap = ncap;
        }
    }
    if (d->ndocs < d->docs_cap) {
        d->docs[d->ndocs++] = doc;
        doc = NULL;
    }
    pthread_mutex_unlock(&d->docs_mu);
    if (doc) {
        tg__jdoc_cleanup(doc);
        tg__free(doc);
    }
}

static tg_status reject(tg_dispatcher *d, tg_status st)
{
    atomic_fetch_add(&d->st.rejected, 1);
    return st;
}

tg_status tg__dispatcher_feed(tg_dispatcher *d, const char *json, size_t len, int64_t wait_ms,
                              tg_feed_done_fn done, void *user, struct tg__reply *reply, char *err,
                              size_t errcap)
{
    if (d->loop)
        return tg__loop_feed(d->loop, json, len, done, user, err, errcap);
    tg__event_key k;
    tg__jdoc *doc = doc_get(d);
    if (!doc) {
        snprintf(err, errcap, "update: out of memory");
        return reject(d, TG_ERR_NOMEM);
    }
    int prc = tg__event_key_parse(doc, json, len, &k, err, errcap);
    doc_put(d, doc);
    if (prc != 0)
        return reject(d, prc == -2 ? TG_ERR_NOMEM : TG_ERR_DECODE);
    struct feed_item *fi = tg__malloc(sizeof *fi + len + 1);
    if (!fi) {
        snprintf(err, errcap, "update %lld: out of memory", (long long)k.update_id);
        return reject(d, TG_ERR_NOMEM);
    }
    *fi = (struct feed_item){.w = {.key = k.key, .ordered = k.ordered},
                             .d = d,
                             .update_id = k.update_id,
                             .done = done,
                             .user = user,
                             .reply = reply,
                             .len = len};
    memcpy(fi->json, json, len);
    fi->json[len] = '\0';
    if (reply) { /* the queued item holds a reference until done */
        pthread_mutex_lock(&reply->mu);
        reply->refs++;
        pthread_mutex_unlock(&reply->mu);
    }
    int rc = tg__workers_submit(d->pool, &fi->w, wait_ms);
    if (rc != 0) {
        if (reply)
            tg__reply_release(reply);
        tg__free(fi);
        snprintf(err, errcap, "update %lld: %s", (long long)k.update_id,
                 rc == -EAGAIN ? "queue full" : "dispatcher is stopping");
        return reject(d, rc == -EAGAIN ? TG_ERR_FLOOD : TG_ERR_CANCELLED);
    }
    atomic_fetch_add(&d->st.received, 1);
    return TG_OK;
}

int tg__dispatcher_submit_fn(tg_dispatcher *d, int64_t key, bool ordered, tg__work_fn fn,
                             tg__work_done_fn done, void *arg, int64_t wait_ms)
{
    if (d->loop)
        return tg__loop_submit_fn(d->loop, key, ordered, fn, done, arg);
    struct feed_item *fi = tg__calloc(1, sizeof *fi);
    if (!fi)
        return -ENOMEM;
    fi->w = (tg__witem){.key = key, .ordered = ordered};
    fi->d = d;
    fi->fn = fn;
    fi->fn_done = done;
    fi->fn_arg = arg;
    int rc = tg__workers_submit(d->pool, &fi->w, wait_ms);
    if (rc != 0)
        tg__free(fi);
    return rc;
}

tg_status tg_dispatcher_feed(tg_dispatcher *d, const char *json, size_t len, int64_t wait_ms,
                             tg_feed_done_fn done, void *user)
{
    if (!d || !json)
        return TG_ERR_INVALID;
    char err[256];
    tg_status st = tg__dispatcher_feed(d, json, len, wait_ms, done, user, NULL, err, sizeof err);
    if (st != TG_OK)
        set_err(d, "%s", err);
    return st;
}

/* The blocking calls have no place on a loop thread. */
static tg_status loop_refuses(tg_dispatcher *d, const char *what)
{
    set_err(d, "%s: blocks, and the dispatcher is in loop mode (.async)", what);
    return TG_ERR_INVALID;
}

tg_status tg_dispatcher_run_one(tg_dispatcher *d, const char *json, size_t len)
{
    if (!d || !json)
        return TG_ERR_INVALID;
    if (d->loop)
        return loop_refuses(d, "run_one");
    atomic_fetch_add(&d->st.received, 1);
    return tg__dispatch_process(d, &d->hctx[0], json, len);
}

tg_status tg_dispatcher_wait_idle(tg_dispatcher *d, uint64_t timeout_ms)
{
    if (d->loop)
        return loop_refuses(d, "wait_idle");
    return tg__workers_wait_idle(d->pool, tg__now_ms() + timeout_ms) == 0 ? TG_OK : TG_ERR_TIMEOUT;
}

tg_status tg_dispatcher_drain(tg_dispatcher *d, uint64_t timeout_ms)
{
    if (!d)
        return TG_ERR_INVALID;
    if (d->loop)
        return loop_refuses(d, "drain");
    return tg__workers_drain(d->pool, tg__now_ms() + timeout_ms) == 0 ? TG_OK : TG_ERR_TIMEOUT;
}

void tg_dispatcher_get_stats_sized(tg_dispatcher *d, tg_dispatcher_stats *out, size_t out_size)
{
    tg_dispatcher_stats st = {
        .received = atomic_load(&d->st.received),
        .handled = atomic_load(&d->st.handled),
        .failed = atomic_load(&d->st.failed),
        .unhandled = atomic_load(&d->st.unhandled),
        .dropped = atomic_load(&d->st.dropped),
        .rejected = atomic_load(&d->st.rejected),
    };
    tg__sized_out(out, out_size, &st, sizeof st);
}

/* ---- stopping ---- */

void tg_dispatcher_stop(tg_dispatcher *d)
{
    if (!d)
        return;
    if (d->loop) { /* nothing reads the pipe; once the flag is up, the loop may free d */
        atomic_store(&d->stop, true);
        return;
    }
    atomic_store(&d->stop, true);
    if (d->stop_pipe[1] >= 0) {
        ssize_t n = write(d->stop_pipe[1], "x", 1);
        (void)n; /* a full pipe already wakes the reader */
    }
}

bool tg_dispatcher_stopping(const tg_dispatcher *d)
{
    return d && atomic_load(&((tg_dispatcher *)d)->stop);
}

static tg_dispatcher *volatile signal_target;

static void on_signal(int sig)
{
    (void)sig;
    tg_dispatcher_stop(signal_target);
}

tg_status tg_dispatcher_stop_on_signals(tg_dispatcher *d)
{
    if (!d)
        return TG_ERR_INVALID;
    signal_target = d;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0) {
        set_err(d, "sigaction: %s", strerror(errno));
        return TG_ERR_INVALID;
    }
    return TG_OK;
}

/* ---- lifecycle ---- */

/* Learn the bot's username (for /cmd@botname) with getMe. */
static bool fetch_username(tg_dispatcher *d, tg_ctx *ctx)
{
    const char *res;
    size_t len;
    if (tg_call_raw(ctx, "getMe", NULL, 0, &res, &len) != TG_OK) {
        set_err(NULL, "dispatcher: getMe failed: %s", tg_ctx_errmsg(ctx));
        return false;
    }
    tg__jdoc doc;
    tg__jerr je;
    tg__jdoc_init(&doc, NULL);
    bool ok = false;
    char name[128];
    if (tg__json_parse(&doc, res, len, &je) == 0 && doc.toks[0].type == TG__J_OBJECT) {
        uint32_t t = tg__json_obj_get(&doc, 0, "username");
        ok = t != UINT32_MAX && doc.toks[t].type == TG__J_STRING &&
             tg__json_str_copy(&doc, t, name, sizeof name) >= 0 &&
             tg_router_set_username(d->router, name) == TG_OK;
    }
    tg__jdoc_cleanup(&doc);
    tg_ctx_reset(ctx);
    if (!ok)
        set_err(NULL, "dispatcher: getMe returned no username");
    return ok;
}

static bool copy_options(tg_dispatcher *d, const tg_dispatcher_options *opts)
{
    if (opts)
        d->o = *opts;
    if (!d->o.workers)
        d->o.workers = 4;
    if (!d->o.queue_capacity)
        d->o.queue_capacity = 1024;
    if (!d->o.conv_max_bytes)
        d->o.conv_max_bytes = 16384;
    if (!d->o.arena_max_bytes)
        d->o.arena_max_bytes = (size_t)16 << 20;
    if (!d->o.session_max_bytes)
        d->o.session_max_bytes = 16384;
    if (!d->o.callback_ttl_ms)
        d->o.callback_ttl_ms = 48ull * 3600 * 1000;
    if (!d->o.callback_max_entries)
        d->o.callback_max_entries = 100000;
    if (!d->o.callback_max_bytes)
        d->o.callback_max_bytes = 16384;
    d->conv_prefix = tg__strdup(d->o.conv_prefix ? d->o.conv_prefix : "conv:");
    d->session_prefix = tg__strdup(d->o.session_prefix ? d->o.session_prefix : "sess:");
    d->o.session_prefix = NULL;
    d->cancel_command = d->o.cancel_command ? tg__strdup(d->o.cancel_command) : NULL;
    d->o.conv_prefix = NULL;
    d->o.cancel_command = NULL;
    if (d->o.storage) {
        d->storage = d->o.storage;
    } else {
        d->storage = tg_storage_memory_new();
        d->own_storage = true;
    }
    return d->conv_prefix && d->session_prefix && d->storage &&
           (!opts || !opts->cancel_command || d->cancel_command);
}

static bool make_workers(tg_dispatcher *d)
{
    d->nworkers = d->o.workers;
    d->hctx = tg__calloc(d->nworkers, sizeof *d->hctx);
    if (!d->hctx)
        return false;
    for (unsigned i = 0; i < d->nworkers; i++) {
        if (tg__hctx_init(&d->hctx[i], d, i, d->o.arena_max_bytes) != 0)
            return false;
        if (d->bot && !(d->hctx[i].ctx = tg_ctx_new(d->bot)))
            return false;
    }
    if (d->bot && !d->router->username && !d->o.no_get_me && !fetch_username(d, d->hctx[0].ctx))
        return false;
    tg__workers_options wo = {.workers = d->nworkers,
                              .capacity = d->o.queue_capacity,
                              .run = worker_run,
                              .done = worker_done,
                              .user = d};
    return tg__workers_new(&d->pool, &wo) == 0;
}

tg_dispatcher *tg_dispatcher_new_sized(tg_bot *bot, tg_router *router,
                                       const tg_dispatcher_options *opts, size_t opts_size)
{
    tg_dispatcher_options copy;
    new_err[0] = '\0';
    if (!tg__sized_in(&copy, sizeof copy, opts, opts_size)) {
        set_err(NULL, "dispatcher: options: %s", TG__SIZED_ERRMSG);
        return NULL;
    }
    opts = &copy;
    if (!router) {
        set_err(NULL, "dispatcher: router is NULL");
        return NULL;
    }
    tg_dispatcher *d = tg__calloc(1, sizeof *d);
    if (!d) {
        set_err(NULL, "dispatcher: out of memory");
        return NULL;
    }
    d->bot = bot;
    d->router = router;
    d->stop_pipe[0] = d->stop_pipe[1] = -1;
    pthread_mutex_init(&d->docs_mu, NULL);
    bool ok = tg__cbindex_init(&d->cb) == 0 && copy_options(d, opts) &&
              pipe2(d->stop_pipe, O_CLOEXEC | O_NONBLOCK) == 0;
    char lerr[256] = "";
    if (ok && d->o.async) {
        ok = tg__loop_new(d, lerr, sizeof lerr) == 0;
        if (!ok && lerr[0])
            set_err(NULL, "%s", lerr);
    }
    else if (ok && !make_workers(d))
        ok = false;
    if (!ok) {
        if (!new_err[0])
            set_err(NULL, "dispatcher: out of memory or no file descriptors");
        tg_dispatcher_free(d);
        return NULL;
    }
    return d;
}

void tg_dispatcher_free(tg_dispatcher *d)
{
    if (!d)
        return;
    tg__loop_free(d->loop);
    if (d->pool)
        tg__workers_drain(d->pool, tg__now_ms() + 10000);
    tg__workers_free(d->pool);
    for (unsigned i = 0; d->hctx && i < d->nworkers; i++) {
        tg_ctx_free(d->hctx[i].ctx);
        tg__hctx_cleanup(&d->hctx[i]);
    }
    tg__free(d->hctx);
    for (size_t i = 0; i < d->ndocs; i++) {
        tg__jdoc_cleanup(d->docs[i]);
        tg__free(d->docs[i]);
    }
    tg__free(d->docs);
    pthread_mutex_destroy(&d->docs_mu);
    if (d->own_storage)
        tg_storage_free(d->storage);
    for (int i = 0; i < 2; i++)
        if (d->stop_pipe[i] >= 0)
            close(d->stop_pipe[i]);
    if (signal_target == d)
        signal_target = NULL;
    tg__cbindex_cleanup(&d->cb);
    tg__free(d->conv_prefix);
    tg__free(d->session_prefix);
    tg__free(d->cancel_command);
    tg__free(d);
}

int tg__dispatcher_stop_fd(const tg_dispatcher *d)
{
    return d->stop_pipe[0];
}

void tg__dispatcher_log(tg_dispatcher *d, int level, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    dlog(d, level, "%s", line);
}

void tg__dispatcher_seterr(tg_dispatcher *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->err, sizeof d->err, fmt, ap);
    va_end(ap);
}
