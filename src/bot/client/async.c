/*
 * async.c: the asynchronous client's handle and calls (tgbot/async.h; insides in
 * async_int.h).
 *
 * A call is prepared exactly as a blocking one (tg__method_prepare / tg__raw_prepare: the
 * same checks, encoder and error texts, into the slot's warm ctx), its request rendered once
 * into the slot's wire buffer (so retries resend the same bytes and the caller's params need
 * not outlive the submit), then: flood-control slot (a timer instead of a sleep) -> FIFO
 * queue -> a connection (async_conn.c) -> the same envelope and retry decision as
 * tg__call_exec (call.c, retry.c), the retry wait again a timer -> decode -> completion.
 *
 * Completions go on a list and are drained from the loop (tg_async_on_fd / on_timer / run),
 * so submit and cancel never call back into the program; a zero-delay timer (kick) makes a
 * foreign loop come back for them.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "bot/client/async_int.h"
#include "bot/codec/method.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "core/sized.h"

#define DEFAULT_CONNS   8
#define DEFAULT_PENDING 1000000
#define WIRE_KEEP       (1u << 20) /* a slot's wire buffer beyond this is freed after use */

/* ---- the loop glue ---- */

static void ep_watch(void *user, int fd, int events);

void tg__async_watch(tg_async *a, int fd, int events)
{
    a->loop.watch(a->loop.user, fd, events);
}

/* Tell a foreign loop when to call tg_async_on_timer, if that changed. */
void tg__async_sync_timer(tg_async *a)
{
    if (!a->loop.timer)
        return;
    uint64_t next = tg__timers_next_deadline(&a->timers);
    if (next == a->timer_asked)
        return;
    a->timer_asked = next;
    int ms = tg__timers_timeout_ms(&a->timers, tg__timers_now(&a->timers));
    a->loop.timer(a->loop.user, ms);
}

static void on_kick(tg__timer *t, uint64_t now)
{
    (void)t;
    (void)now;
}

static void kick(tg_async *a)
{
    if (!tg__timer_armed(&a->kick))
        tg__timer_add(&a->timers, &a->kick, 0);
}

/* ---- the handle ---- */

static void call_free(struct tg__acall *c)
{
    tg_ctx_free(c->ctx);
    tg__buf_cleanup(&c->wire);
    tg__free(c);
}

TG_API tg_async *tg_async_new_sized(tg_bot *bot, const tg_async_options *optp, size_t opts_size)
{
    tg_async_options copy, *opts = &copy;
    if (!bot || !tg__sized_in(&copy, sizeof copy, optp, opts_size))
        return NULL;
    tg_async *a = tg__calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->bot = bot;
    a->epfd = -1;
    if (tg__lean_pool_make(bot, &a->pool) != NULL) {
        tg__free(a);
        return NULL;
    }
    tg__lean_body_init(&a->body);
    tg__timers_init(&a->timers, NULL, NULL);
    tg__timer_init(&a->kick, on_kick, a);
    a->timer_asked = UINT64_MAX;
    a->max_conns = opts->max_connections ? opts->max_connections : DEFAULT_CONNS;
    a->max_pending = opts->max_pending ? opts->max_pending : DEFAULT_PENDING;
    if (opts->loop) {
        a->loop = *opts->loop;
    } else {
        a->own_loop = true;
        a->epfd = epoll_create1(EPOLL_CLOEXEC);
        a->loop = (tg_async_loop){.watch = ep_watch, .user = a};
        if (a->epfd < 0) {
            tg__lean_pool_destroy(a->pool);
            tg__free(a);
            return NULL;
        }
    }
    if (!a->loop.watch) {
        tg__lean_pool_destroy(a->pool);
        tg__free(a);
        return NULL;
    }
    return a;
}

TG_API void tg_async_free(tg_async *a)
{
    if (!a)
        return;
    tg_async_shutdown(a);
    tg__aconn_close_idle(a);
    for (uint32_t i = 0; i < a->nslots; i++)
        call_free(a->slots[i]);
    tg__free(a->slots);
    tg__free(a->byfd);
    if (a->ai)
        freeaddrinfo(a->ai);
    tg__lean_body_cleanup(&a->body);
    tg__lean_pool_destroy(a->pool);
    if (a->epfd >= 0)
        close(a->epfd);
    tg__free(a);
}

TG_API void tg_async_set_retry_policy(tg_async *a, const tg_retry_policy *policy)
{
    if (!a)
        return;
    a->has_policy = policy != NULL;
    if (policy)
        tg__retry_resolve(policy, &a->policy);
}

TG_API void tg_async_set_timeout(tg_async *a, uint32_t timeout_ms)
{
    if (a)
        a->timeout_ms = timeout_ms;
}

TG_API size_t tg_async_pending(const tg_async *a)
{
    return a ? a->pending : 0;
}

TG_API void tg_async_get_stats_sized(const tg_async *a, tg_async_stats *out, size_t out_size)
{
    if (a)
        tg__sized_out(out, out_size, &a->stats, sizeof a->stats);
}

/* ---- lists ---- */

static void list_push(struct tg__acall **head, struct tg__acall **tail, struct tg__acall *c)
{
    c->next = NULL;
    c->prev = *tail;
    if (*tail)
        (*tail)->next = c;
    else
        *head = c;
    *tail = c;
}

static void list_unlink(struct tg__acall **head, struct tg__acall **tail, struct tg__acall *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        *head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        *tail = c->prev;
    c->next = c->prev = NULL;
}

/* ---- completion ---- */

/* The one way a call ends: onto the done list (once), drained from the loop. */
static void acall_complete(struct tg__acall *c, tg_status st)
{
    tg_async *a = c->a;
    tg__timer_cancel(&a->timers, &c->timer);
    if (c->state == AC_QUEUED)
        list_unlink(&a->queue, &a->queue_tail, c);
    c->st = st;
    c->state = AC_DONE;
    list_push(&a->done, &a->done_tail, c);
    kick(a);
}

static void acall_release(struct tg__acall *c)
{
    tg_async *a = c->a;
    if (c->ctx)
        tg_ctx_reset(c->ctx);
    if (c->wire.cap > WIRE_KEEP)
        tg__buf_cleanup(&c->wire);
    c->state = AC_FREE;
    c->out = NULL;
    c->json = NULL;
    c->next = a->free_calls;
    a->free_calls = c;
    a->pending--;
    a->stats.completed++;
}

static void drain(tg_async *a)
{
    if (a->draining)
        return;
    a->draining = true;
    while (a->done) {
        struct tg__acall *c = a->done;
        list_unlink(&a->done, &a->done_tail, c);
        tg_async_result r = {
            .id = c->id,
            .status = c->st,
            .method = c->ctx->method,
            .ctx = c->ctx,
            .result = c->st == TG_OK ? c->out : NULL,
            .json = c->st == TG_OK ? c->json : NULL,
            .json_len = c->st == TG_OK ? c->json_len : 0,
        };
        a->in_cb = c;
        if (c->tramp)
            c->tramp(a, &r, c->fn, c->user);
        else if (c->fn)
            ((tg_async_fn)c->fn)(a, &r, c->user);
        a->in_cb = NULL;
        acall_release(c);
    }
    a->draining = false;
}

TG_API tg_ctx *tg_async_keep(tg_async *a, const tg_async_result *r)
{
    if (!a || !r || !a->in_cb || a->in_cb->id != r->id || !a->in_cb->ctx)
        return NULL;
    tg_ctx *ctx = a->in_cb->ctx;
    a->in_cb->ctx = NULL; /* the slot makes a new one when it is used again */
    return ctx;
}

/* ---- submission ---- */

static struct tg__acall *acall_new(tg_async *a)
{
    if (a->pending >= a->max_pending)
        return NULL;
    struct tg__acall *c = a->free_calls;
    if (c) {
        a->free_calls = c->next;
    } else {
        if (a->nslots == a->slot_cap) {
            uint32_t cap = a->slot_cap ? a->slot_cap * 2 : 64;
            struct tg__acall **s = tg__realloc(a->slots, cap * sizeof *s);
            if (!s)
                return NULL;
            a->slots = s;
            a->slot_cap = cap;
        }
        c = tg__calloc(1, sizeof *c);
        if (!c)
            return NULL;
        c->a = a;
        c->slot = a->nslots;
        tg__buf_init(&c->wire, 0);
        a->slots[a->nslots++] = c;
    }
    if (!c->ctx && !(c->ctx = tg_ctx_new(a->bot))) {
        c->next = a->free_calls;
        a->free_calls = c;
        return NULL;
    }
    c->gen++;
    c->id = (uint64_t)c->gen << 32 | (uint64_t)(c->slot + 1);
    c->state = AC_NEW;
    c->reconnected = false;
    c->m = NULL;
    c->out = NULL;
    c->json = NULL;
    c->body = NULL;
    c->body_len = 0;
    c->conn = NULL;
    c->next = c->prev = NULL;
    c->attempt = 0;
    c->t0_ms = tg__now_ms();
    c->timeout_ms = a->next_timeout_ms ? a->next_timeout_ms
                    : a->timeout_ms  ? a->timeout_ms
                                     : a->bot->timeout_ms;
    c->policy = a->has_policy ? a->policy : a->bot->retry;
    a->pending++;
    a->stats.submitted++;
    return c;
}

static struct tg__acall *lookup(tg_async *a, uint64_t id)
{
    uint64_t slot = (id & 0xffffffffu) - 1;
    if (!a || (id & 0xffffffffu) == 0 || slot >= a->nslots)
        return NULL;
    struct tg__acall *c = a->slots[slot];
    return c->id == id && c->state != AC_FREE && c->state != AC_DONE ? c : NULL;
}

/* Render the request once: the head, and over TLS the JSON body after it (one SSL_write);
 * a multipart body whole (its files read now). */
static tg_status build_wire(struct tg__acall *c)
{
    tg_async *a = c->a;
    tg_ctx *ctx = c->ctx;
    tg_bot *bot = a->bot;
    tg_status st = tg__ctx_url(ctx, bot->api_prefix, bot->api_prefix_len, c->req.method);
    if (st != TG_OK)
        return st;
    tg__buf *w = &c->wire;
    const char *path = tg__buf_cstr(&ctx->url) + a->pool->origin_len;
    bool form = c->req.nfields + c->req.nfiles > 0;
    int rc = 0;
    tg__buf_reset(w);
    rc |= tg__buf_puts(w, "POST ");
    rc |= tg__buf_puts(w, path);
    rc |= tg__buf_append(w, " HTTP/1.1\r\nHost: ", 17);
    rc |= tg__buf_puts(w, a->pool->authority);
    rc |= tg__buf_append(w, "\r\nUser-Agent: ", 14);
    rc |= tg__buf_puts(w, bot->user_agent);
    rc |= tg__buf_append(w, "\r\n", 2);
    c->body = NULL;
    c->body_len = 0;
    if (rc == 0 && form) {
        tg_http_request hr = {.post = true,
                              .fields = c->req.fields,
                              .nfields = c->req.nfields,
                              .files = c->req.files,
                              .nfiles = c->req.nfiles};
        tg_http_result res = {0};
        struct lean_io io = {.res = &res, .capture = w};
        bool chunked = false;
        if (tg__lean_form_head(&io, &a->body, &hr, w, &chunked) != 0 ||
            tg__buf_append(w, "\r\n", 2) != 0 ||
            tg__lean_form_send(&io, &a->body, &hr, chunked) != 0) {
            enum tg__outcome out;
            if (res.status == TG_OK)
                res.status = TG_ERR_NOMEM;
            return tg__ctx_transport_error(ctx, &res, &out);
        }
        return TG_OK;
    }
    rc |= tg__buf_puts(w, "Content-Type: application/json\r\nContent-Length: ");
    rc |= tg__lean_put_u64(w, c->req.body_len);
    rc |= tg__buf_append(w, "\r\n\r\n", 4);
    if (a->pool->tls)
        rc |= tg__buf_append(w, c->req.body, c->req.body_len);
    else {
        c->body = c->req.body;
        c->body_len = c->req.body_len;
    }
    if (rc != 0)
        return tg__ctx_fail(ctx, TG_ERR_NOMEM, "no memory for the request");
    return TG_OK;
}

static void on_call_timer(tg__timer *t, uint64_t now);

static void enqueue(struct tg__acall *c)
{
    c->state = AC_QUEUED;
    list_push(&c->a->queue, &c->a->queue_tail, c);
    tg__async_pump(c->a);
}

/* Flood control, then the queue. */
static void acall_start(struct tg__acall *c)
{
    tg_async *a = c->a;
    tg_bot *bot = a->bot;
    int64_t key;
    tg__timer_init(&c->timer, on_call_timer, c);
    if (bot->flood.opt.enabled && tg__flood_applies(c->req.method) &&
        tg__call_chat_key(c->ctx, &c->req, &key)) {
        int64_t now = (int64_t)(tg__now_ns() / 1000);
        int64_t at = tg__flood_reserve(&bot->flood, key, key < 0, now);
        if (at < 0) {
            acall_complete(c, tg__ctx_fail(c->ctx, TG_ERR_FLOOD,
                                           "flood control: no slot for chat %lld %s",
                                           (long long)key,
                                           bot->flood.opt.fail_fast ? "right now (fail-fast)"
                                                                    : "within max_wait_ms"));
            return;
        }
        if (at > now) {
            c->ctx->stats.flood_wait_ms += (uint64_t)(at - now + 999) / 1000;
            a->stats.flood_waits++;
            c->state = AC_FLOOD;
            tg__timer_add(&a->timers, &c->timer, (uint64_t)at * 1000u);
            return;
        }
    }
    enqueue(c);
}

/* Common end of submission: prepared (st) -> rendered -> started, or completed failing. */
static uint64_t submit(struct tg__acall *c, tg_status st)
{
    tg_async *a = c->a;
    uint64_t id = c->id;
    if (st == TG_OK && a->shut)
        st = tg__ctx_fail(c->ctx, TG_ERR_CANCELLED, "the async handle is shut down");
    if (st == TG_OK)
        st = build_wire(c);
    if (st != TG_OK)
        acall_complete(c, st);
    else
        acall_start(c);
    tg__async_sync_timer(a);
    return id;
}

/* Storage for a typed result, the way tg__codec_decode_result's out receives it. */
size_t tg__async_out_size(const tg__method *m)
{
    const tg__field *f = m->result_desc;
    switch (m->result_kind) {
    case TG__R_ARRAY:
        return sizeof(tg__array_out);
    case TG__R_VALUE:
        if (f && f->kind == TG__K_UNION && f->sub)
            return ((const tg__type *)f->sub)->size;
        return 16; /* a pointer, int64_t, double or bool */
    case TG__R_OR_TRUE:
        return sizeof(void *);
    default:
        return 0;
    }
}

uint64_t tg__async_call(tg_async *a, const tg__method *m, const void *params,
                        tg__async_tramp tramp, void (*fn)(void), void *user)
{
    if (!a)
        return 0;
    struct tg__acall *c = acall_new(a);
    if (!c)
        return 0;
    c->m = m;
    c->tramp = tramp;
    c->fn = fn;
    c->user = user;
    tg_status st = tg__method_prepare(c->ctx, m, params, &c->req);
    size_t n = st == TG_OK ? tg__async_out_size(m) : 0;
    if (n && !(c->out = tg__arena_alloc(&c->ctx->arena, n)))
        st = tg__ctx_fail(c->ctx, TG_ERR_NOMEM, "no memory for the result");
    if (c->out)
        memset(c->out, 0, n);
    return submit(c, st);
}

TG_API uint64_t tg_async_call_raw(tg_async *a, const char *method, const char *json_params,
                                  size_t len, tg_async_fn done, void *user)
{
    if (!a)
        return 0;
    struct tg__acall *c = acall_new(a);
    if (!c)
        return 0;
    c->tramp = NULL;
    c->fn = (void (*)(void))done;
    c->user = user;
    tg_ctx *ctx = c->ctx;
    tg_status st = tg__raw_prepare(ctx, method, &json_params, &len);
    if (st == TG_OK) { /* copied: the caller's JSON need not outlive this call */
        tg__buf_reset(&ctx->req);
        if (tg__buf_append(&ctx->req, json_params, len) != 0)
            st = tg__ctx_fail(ctx, TG_ERR_NOMEM, "no memory for the params");
        c->req = (struct tg__call_req){
            .method = ctx->method, .body = ctx->req.data, .body_len = ctx->req.len};
    }
    return submit(c, st);
}

/* ---- attempts ---- */

void tg__async_pump(tg_async *a)
{
    /* not re-entered: a connection failing at once inside would recurse per queued call */
    if (a->pumping)
        return;
    a->pumping = true;
    while (a->queue) {
        struct tg__aconn *k = tg__aconn_take_idle(a);
        if (!k && a->nconns >= a->max_conns)
            break;
        struct tg__acall *c = a->queue;
        list_unlink(&a->queue, &a->queue_tail, c);
        c->state = AC_ACTIVE;
        c->attempt++;
        tg_ctx *ctx = c->ctx;
        tg__buf_reset(&ctx->resp);
        ctx->too_big = ctx->sink_oom = false;
        ctx->http_status = 0;
        ctx->stats.requests++;
        a->stats.requests++;
        if (c->timeout_ms)
            tg__timer_add_in(&a->timers, &c->timer, (uint64_t)c->timeout_ms * 1000000u);
        if (k)
            tg__aconn_start(k, c);
        else
            tg__aconn_open(a, c);
    }
    a->pumping = false;
}

static void on_call_timer(tg__timer *t, uint64_t now)
{
    struct tg__acall *c = t->user;
    (void)now;
    switch (c->state) {
    case AC_FLOOD:
    case AC_RETRY:
        enqueue(c);
        break;
    case AC_ACTIVE: /* the attempt's deadline */
        if (c->conn)
            tg__aconn_abort(c->conn, LEAN_E_TIMEOUT, false,
                            "no progress before the request timeout");
        break;
    default:
        break;
    }
}

static tg_status finish_ok(struct tg__acall *c)
{
    if (c->m)
        return tg__method_decode(c->ctx, c->m, c->out);
    return tg__raw_result(c->ctx, &c->json, &c->json_len);
}

void tg__acall_attempt_done(struct tg__acall *c, const tg_http_result *res)
{
    tg_async *a = c->a;
    tg_ctx *ctx = c->ctx;
    enum tg__outcome out;
    tg_status st;
    tg__timer_cancel(&a->timers, &c->timer);
    c->conn = NULL;
    ctx->stats.connects += res->connects;
    if (ctx->too_big && ctx->sink_oom) {
        out = TG__OUT_FATAL;
        st = tg__ctx_fail(ctx, TG_ERR_NOMEM, "no memory for the answer");
    } else if (ctx->too_big) {
        out = TG__OUT_FATAL;
        st = tg__ctx_fail(ctx, TG_ERR_TOO_BIG, "the answer exceeds max_response_bytes (%zu)",
                          a->bot->max_response_bytes);
    } else if (res->status != TG_OK) {
        st = tg__ctx_transport_error(ctx, res, &out);
    } else {
        ctx->http_status = res->http_status;
        st = tg__call_envelope(ctx, c->req.keep_source, &out);
    }
    if (out == TG__OUT_OK) {
        if (c->attempt > 1)
            tg__ctx_clear_error(ctx);
        acall_complete(c, finish_ok(c));
        return;
    }
    ctx->err.attempts = c->attempt;
    int64_t wait = a->shut ? -1
                           : tg__retry_wait_ms(&c->policy, out, c->attempt,
                                               tg__now_ms() - c->t0_ms, ctx->err.retry_after,
                                               tg__ctx_random(ctx));
    if (wait < 0) {
        acall_complete(c, st);
        return;
    }
    tg__log(&a->bot->log, TG__LOG_WARN, "%s (attempt %u); retrying in %lld ms",
            tg__buf_cstr(&ctx->errmsg), c->attempt, (long long)wait);
    ctx->stats.retries++;
    a->stats.retries++;
    c->state = AC_RETRY;
    tg__timer_add_in(&a->timers, &c->timer, (uint64_t)wait * 1000000u);
}

/* ---- cancellation and shutdown ---- */

static void acall_cancel(struct tg__acall *c, const char *why)
{
    tg_async *a = c->a;
    if (c->state == AC_ACTIVE && c->conn)
        tg__aconn_abort(c->conn, LEAN_E_ABORTED, true, why);
    c->conn = NULL;
    tg_status st = tg__ctx_fail(c->ctx, TG_ERR_CANCELLED, "%s", why);
    c->ctx->err.attempts = c->attempt;
    (void)a;
    acall_complete(c, st);
}

TG_API bool tg_async_cancel(tg_async *a, uint64_t id)
{
    struct tg__acall *c = lookup(a, id);
    if (!c)
        return false;
    acall_cancel(c, "cancelled (tg_async_cancel)");
    tg__async_sync_timer(a);
    return true;
}

static size_t cancel_all(tg_async *a, const char *why)
{
    size_t n = 0;
    for (uint32_t i = 0; i < a->nslots; i++) {
        struct tg__acall *c = a->slots[i];
        if (c->state != AC_FREE && c->state != AC_DONE && c->state != AC_NEW) {
            acall_cancel(c, why);
            n++;
        }
    }
    return n;
}

TG_API size_t tg_async_cancel_all(tg_async *a)
{
    if (!a)
        return 0;
    size_t n = cancel_all(a, "cancelled (tg_async_cancel_all)");
    tg__async_sync_timer(a);
    return n;
}

TG_API void tg_async_shutdown(tg_async *a)
{
    if (!a)
        return;
    if (!a->shut) {
        a->shut = true;
        cancel_all(a, "the async handle was shut down");
        tg__aconn_close_idle(a);
    }
    drain(a); /* a no-op inside a callback: the running drain goes on */
    tg__async_sync_timer(a);
}

static void check_bot_shutdown(tg_async *a)
{
    if (!a->shut && tg_bot_is_shut_down(a->bot))
        tg_async_shutdown(a);
}

/* ---- entry points from a loop ---- */

TG_API void tg_async_on_fd(tg_async *a, int fd, int events)
{
    if (!a)
        return;
    check_bot_shutdown(a);
    tg__aconn_event(a, fd, events);
    tg__timers_run_due(&a->timers, tg__timers_now(&a->timers));
    drain(a);
    tg__async_sync_timer(a);
}

TG_API void tg_async_on_timer(tg_async *a)
{
    if (!a)
        return;
    a->timer_asked = UINT64_MAX; /* the loop's one-shot timer has fired */
    check_bot_shutdown(a);
    tg__timers_run_due(&a->timers, tg__timers_now(&a->timers));
    drain(a);
    tg__async_sync_timer(a);
}

/* ---- the built-in epoll loop ---- */

static void ep_watch(void *user, int fd, int events)
{
    tg_async *a = user;
    struct epoll_event ev = {.events = (events & TG_ASYNC_READ ? EPOLLIN : 0u) |
                                       (events & TG_ASYNC_WRITE ? EPOLLOUT : 0u),
                             .data.fd = fd};
    if (events == 0) {
        epoll_ctl(a->epfd, EPOLL_CTL_DEL, fd, NULL);
        return;
    }
    if (epoll_ctl(a->epfd, EPOLL_CTL_MOD, fd, &ev) != 0 && errno == ENOENT)
        epoll_ctl(a->epfd, EPOLL_CTL_ADD, fd, &ev);
}

TG_API int tg_async_run_once(tg_async *a, int timeout_ms)
{
    if (!a || !a->own_loop)
        return -1;
    struct epoll_event evs[64];
    check_bot_shutdown(a);
    int t = tg__timers_timeout_ms(&a->timers, tg__timers_now(&a->timers));
    if (timeout_ms >= 0 && (t < 0 || timeout_ms < t))
        t = timeout_ms;
    int n = epoll_wait(a->epfd, evs, 64, t);
    if (n < 0 && errno != EINTR)
        return -1;
    for (int i = 0; i < n; i++) {
        uint32_t e = evs[i].events;
        int what = (e & EPOLLIN ? TG_ASYNC_READ : 0) | (e & EPOLLOUT ? TG_ASYNC_WRITE : 0) |
                   (e & (EPOLLERR | EPOLLHUP) ? TG_ASYNC_ERROR : 0);
        tg__aconn_event(a, evs[i].data.fd, what);
    }
    tg__timers_run_due(&a->timers, tg__timers_now(&a->timers));
    drain(a);
    return n < 0 ? 0 : n;
}

TG_API int tg_async_run(tg_async *a)
{
    if (!a || !a->own_loop)
        return -1;
    a->stopped = false;
    while (!a->stopped && a->pending > 0)
        if (tg_async_run_once(a, -1) < 0)
            return -1;
    return 0;
}

TG_API void tg_async_stop(tg_async *a)
{
    if (a)
        a->stopped = true;
}
