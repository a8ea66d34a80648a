/*
 * tgbot/async.h: asynchronous Bot API calls for event-driven programs.
 *
 * A tg_async handle submits calls that return at once and completes each of them with
 * exactly one callback, on the loop thread, when Telegram has answered (or the call failed,
 * was cancelled, or the handle shut down). Thousands of calls can be in flight on one thread.
 * It speaks HTTP/1.1 keep-alive over non-blocking sockets and OpenSSL's non-blocking TLS
 * (the lean transport's protocol, whatever transport the bot's blocking calls use), keeps a
 * bounded pool of connections per handle and queues calls first come, first served when all
 * are busy. One request per connection at a time: HTTP/1.1 pipelining is never used (a
 * connection lost with several requests on it leaves unknowable which of them Telegram acted
 * on, so a sendMessage could post twice or be lost; parallel connections give the same
 * throughput without that).
 *
 * Errors are the blocking API's: r->status, and in r->ctx the same tg_ctx_error() /
 * tg_ctx_errmsg() details (API error code and description, retry_after, transport code...).
 * Retries, 429 waits and the bot's flood control (tg_bot_options.flood) run on timers, never
 * blocking the loop. Typed calls, one per Bot API method, are generated in tgbot/api.h:
 *     tg_async_send_message(a, &params, on_sent, user);
 * with on_sent(tg_async *a, const tg_async_result *r, tg_message *result, void *user).
 *
 * ---- the loop contract ----
 * Either let the handle run its own epoll loop (tg_async_run, tg_async_run_once), or plug it
 * into yours (opts.loop), in the style of curl_multi_socket and hiredis's adapters:
 *   - loop->watch(user, fd, events) asks you to watch fd for TG_ASYNC_READ / TG_ASYNC_WRITE
 *     (both may be set); events 0 = stop watching it (it is about to be closed). Each call
 *     replaces what was asked for that fd before. When the fd is ready, call
 *     tg_async_on_fd(a, fd, what_happened) (TG_ASYNC_READ/WRITE; TG_ASYNC_ERROR for an error
 *     or hang-up is treated as both).
 *   - loop->timer(user, timeout_ms) asks you to call tg_async_on_timer(a) once, timeout_ms
 *     from now (0 = as soon as possible); -1 = no timer wanted. Each call replaces the
 *     previous request.
 * Callbacks run inside tg_async_on_fd / tg_async_on_timer / tg_async_run*; the submit,
 * cancel and option functions never call them (a call refused at submission still completes
 * through the loop), so a callback never runs inside your own call into the handle except
 * tg_async_shutdown() and tg_async_free(), which complete everything pending right away.
 * Ready-made adapters (header-only, hiredis style): tgbot/async_uv.h (libuv) and
 * tgbot/async_event.h (libevent 2).
 *
 * ---- threads ----
 * A tg_async belongs to one thread, the loop thread: every function here is called on it
 * (callbacks run on it too). Use one handle per loop thread; they may share one tg_bot with
 * each other and with blocking tg_ctx users on other threads. tg_bot_shutdown() from another
 * thread is noticed at the handle's next event or timer (then everything completes with
 * TG_ERR_CANCELLED); tg_async_shutdown() on the loop thread acts at once.
 *
 * ---- lifetimes ----
 * Parameters and raw JSON are copied at submission (files to upload are read then, into
 * memory: uploads through the async client cost their size in memory until sent).
 * A result (r->result, r->json) lives in r->ctx's arena until the callback returns; to keep
 * it longer, call tg_async_keep(a, r) in the callback: the ctx and everything decoded in it
 * are then yours (tg_ctx_free it when done), and the handle makes a fresh ctx for the slot.
 */
#ifndef TGBOT_ASYNC_H
#define TGBOT_ASYNC_H

#include "tgbot/client.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_async tg_async;
typedef struct tg_async_result tg_async_result;

enum {
    TG_ASYNC_READ = 1,
    TG_ASYNC_WRITE = 2,
    TG_ASYNC_ERROR = 4, /* only in tg_async_on_fd: error or hang-up (acts as READ|WRITE) */
};

/* What a completion callback is told. Valid during the callback only. */
struct tg_async_result {
    uint64_t id;        /* what the submit function returned */
    tg_status status;   /* TG_OK or the error, as the blocking call would return it */
    const char *method; /* "sendMessage" */
    tg_ctx *ctx;        /* details: tg_ctx_error(ctx), tg_ctx_errmsg(ctx), tg_ctx_get_stats;
                           its arena holds the result */
    const void *result; /* typed calls on TG_OK: the decoded value, stored the way the
                           blocking call's out parameter receives it (sendMessage: a
                           tg_message *; arrays: see the generated callbacks); else NULL */
    const char *json;   /* raw calls on TG_OK: the "result" JSON, NUL-terminated; else NULL */
    size_t json_len;
};

/* A completion: called exactly once per submitted call, on the loop thread. It may submit,
 * cancel (itself excluded: it is already complete) and shut the handle down; it must not
 * free the handle. */
typedef void (*tg_async_fn)(tg_async *a, const tg_async_result *r, void *user);

typedef struct tg_async_loop {
    void (*watch)(void *user, int fd, int events);
    void (*timer)(void *user, int64_t timeout_ms);
    void *user;
} tg_async_loop;

/* Zero in every field = the default next to it; (tg_async_options){0} or NULL is valid. */
typedef struct tg_async_options {
    uint32_t max_connections; /* connections open at once (busy + idle); 0 = 8 */
    const tg_async_loop *loop; /* NULL = the built-in epoll loop; the struct is copied */
    uint32_t max_pending;      /* calls accepted at once (in flight, queued, waiting);
                                  beyond it submissions fail with 0; 0 = 1,000,000 */
} tg_async_options;

/*
 * A handle over bot (which must outlive it). NULL on failure: the bot has a proxy (not
 * supported here), its base URL is not usable, epoll or memory failed. The bot's retry
 * policy, flood control, timeouts, user agent, CA settings and logger apply.
 */
TG_API tg_async *tg_async_new_sized(tg_bot *bot, const tg_async_options *opts, size_t opts_size);
/* The call to write: passes the size of tg_async_options as this header declares it
 * (docs/abi.md, "Structs that grow"). */
#define tg_async_new(bot, ...) tg_async_new_sized((bot), (__VA_ARGS__), sizeof(tg_async_options))
/* Shut down (see below), then free. Not from inside a callback. NULL is a no-op. */
TG_API void tg_async_free(tg_async *a);
/* Complete every pending call now with TG_ERR_CANCELLED, each callback exactly once; calls
 * submitted afterwards complete the same way (through the loop). Idempotent. */
TG_API void tg_async_shutdown(tg_async *a);

/* The retry policy of calls submitted from now on (copied); NULL = the bot's again. */
TG_API void tg_async_set_retry_policy(tg_async *a, const tg_retry_policy *policy);
/* Per-attempt timeout of calls submitted from now on (0 = the bot's timeout_ms). */
TG_API void tg_async_set_timeout(tg_async *a, uint32_t timeout_ms);

/*
 * Call any method by name with its parameters as a JSON object (copied; NULL/"" = none), as
 * tg_call_raw does. Returns the call's id (never 0), or 0 when the handle cannot take it
 * (max_pending reached, out of memory): then done is not called. Every other failure —
 * invalid parameters included — is reported through done.
 */
TG_API uint64_t tg_async_call_raw(tg_async *a, const char *method, const char *json_params,
                                  size_t len, tg_async_fn done, void *user);

/* Cancel one call: it completes with TG_ERR_CANCELLED (through the loop). A request already
 * on the wire may still take effect at Telegram. Returns false when id is not pending. */
TG_API bool tg_async_cancel(tg_async *a, uint64_t id);
/* Cancel every pending call; returns how many. */
TG_API size_t tg_async_cancel_all(tg_async *a);
/* Calls submitted and not completed yet. */
TG_API size_t tg_async_pending(const tg_async *a);

/* In a callback: take r->ctx (and the result in its arena) for yourself; free it with
 * tg_ctx_free(). Returns NULL outside a callback. */
TG_API tg_ctx *tg_async_keep(tg_async *a, const tg_async_result *r);

/* For loop adapters (tgbot/async_uv.h, tgbot/async_event.h, your own): make *table, an
 * array of pointers indexed by fd, long enough to hold index fd (new entries NULL).
 * 0, or -1 when out of memory (the table is unchanged). */
static inline int tg_async_fd_table_reserve(void ***table, size_t *n, int fd)
{
    if (fd < 0)
        return -1;
    if ((size_t)fd < *n)
        return 0;
    size_t cap = *n ? *n : 64;
    while (cap <= (size_t)fd)
        cap *= 2;
    void **t = (void **)realloc(*table, cap * sizeof *t);
    if (!t)
        return -1;
    memset(t + *n, 0, (cap - *n) * sizeof *t);
    *table = t;
    *n = cap;
    return 0;
}

/* ---- your loop (opts.loop) ---- */
TG_API void tg_async_on_fd(tg_async *a, int fd, int events);
TG_API void tg_async_on_timer(tg_async *a);

/* ---- the built-in loop (no opts.loop) ---- */
/* Run until nothing is pending or tg_async_stop(). Returns 0, or -1 if epoll failed. */
TG_API int tg_async_run(tg_async *a);
/* Wait up to timeout_ms (-1 = until something happens) for events, process them and every
 * due timer. Returns the number of events handled, or -1. */
TG_API int tg_async_run_once(tg_async *a, int timeout_ms);
/* Make tg_async_run return after the current iteration (from a callback). */
TG_API void tg_async_stop(tg_async *a);

/* ---- updates on the loop: long polling as an async source ---- */

/*
 * getUpdates in a loop on the handle: each update is given to on_update on the loop thread,
 * in order, decoded (u, valid during the call; u->raw holds its JSON, e.g. for
 * tg_dispatcher_feed) — so a whole bot can run single-threaded in the program's loop, its
 * handlers answering with tg_async_* calls. Offsets are confirmed as Telegram expects (the
 * next getUpdates asks from the last update_id + 1). A failed poll is retried after 1 s,
 * doubling up to 30 s (the handle's retry policy runs first); a 409 Conflict (another
 * poller or a webhook) is logged and retried the same way. Logged once per state change: a
 * warning when polls start failing or fail differently, an info line when they work again
 * (each failure between at debug level). One connection of the handle's pool is held by the
 * long poll.
 */
typedef struct tg_async_poller tg_async_poller;
typedef struct tg_update tg_update;
typedef void (*tg_async_update_fn)(tg_async *a, const tg_update *u, void *user);

typedef struct tg_async_poll_options {
    uint32_t timeout_s; /* long-poll timeout; 0 = 30 */
    uint32_t limit;     /* updates per poll; 0 = 100 */
} tg_async_poll_options;

/* Start polling (the first request goes out at once). NULL on out of memory. */
TG_API tg_async_poller *tg_async_poll_start(tg_async *a, const tg_async_poll_options *opts,
                                            tg_async_update_fn on_update, void *user);
/* Stop and free: the poll in flight is cancelled, no more updates are delivered. Call it
 * once, before or after the handle is freed (a handle shut down ends its poller, whose
 * memory waits for this call), from the loop thread, callbacks included. Updates already
 * given to on_update are confirmed on Telegram's side only by a later getUpdates: a bot
 * that stops and starts again gets the last batch again. NULL-safe. */
TG_API void tg_async_poll_stop(tg_async_poller *p);

/* Counters (tests, benchmarks). */
typedef struct tg_async_stats {
    uint64_t submitted;
    uint64_t completed;
    uint64_t requests; /* HTTP requests, retries included */
    uint64_t connects; /* connections opened */
    uint64_t retries;
    uint64_t flood_waits; /* calls that waited for a flood-control slot */
    uint32_t connections; /* open now */
    uint32_t peak_connections;
} tg_async_stats;
/* Fill *out (at most out_size bytes: write tg_async_get_stats(a, &st)). */
TG_API void tg_async_get_stats_sized(const tg_async *a, tg_async_stats *out, size_t out_size);
#define tg_async_get_stats(a, out) tg_async_get_stats_sized((a), (out), sizeof(tg_async_stats))

#ifdef __cplusplus
}
#endif

#endif
