/*
 * tgbot/updates.h: receiving updates: long polling (getUpdates) and the webhook server.
 *
 * Both feed the same tg_dispatcher (tgbot/dispatch.h), so switching between them is one
 * line:
 *
 *     tg_run_polling(d, NULL);                       // development, behind NAT
 *     tg_run_webhook(d, &(tg_webhook_options){...}); // production, behind a public URL
 *
 * Both run until tg_dispatcher_stop(d) (e.g. from tg_dispatcher_stop_on_signals()), then let
 * queued updates finish within drain_ms.
 *
 * Delivery is at least once. Long polling confirms an offset to Telegram only below the
 * lowest update whose handler has not finished, so a crash or a kill redelivers every
 * unfinished update to the next instance (handlers should tolerate seeing an update twice
 * after a crash). The webhook server answers 200 once an update is queued; Telegram retries
 * non-2xx answers.
 *
 * Thread-safety: run one receiver per dispatcher. tg_webhook_port() may be called from any
 * thread while the server runs.
 */
#ifndef TGBOT_UPDATES_H
#define TGBOT_UPDATES_H

#include "tgbot/common.h"
#include "tgbot/dispatch.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- long polling ---- */

typedef struct tg_polling_options {
    uint32_t timeout_s; /* long-poll wait per getUpdates; 0 = 30 (the bot's timeout_ms
                           must be larger: tg_bot_options.timeout_ms 0 = 60 s is) */
    uint32_t limit;     /* updates per call, 1..100; 0 = 100 */
    const char *const *allowed_updates; /* NULL-terminated kinds; NULL = Telegram's choice */
    uint32_t backoff_min_ms;            /* first wait after a failed call; 0 = 500 */
    uint32_t backoff_max_ms;            /* doubling stops here; 0 = 30000 */
    uint32_t drain_ms;                  /* at stop, time for queued updates to finish; 0 = 10000 */
    bool delete_webhook;                /* call deleteWebhook first (a set webhook makes getUpdates
                                           fail with 409 Conflict) */
    /* Be the ingress of a fleet (tgbot/fleet.h): publish updates to its streams instead of
     * running them, and poll only while holding the fleet's polling lease, so any number of
     * processes may run this and exactly one polls. NULL = run updates on d. */
    struct tg_fleet *fleet;
} tg_polling_options;

/*
 * Poll getUpdates and feed d until tg_dispatcher_stop(d). d must have a bot. opts may be
 * NULL. Failed calls are retried with exponential backoff (a stop ends a wait at once); 409
 * Conflict (another instance polls with this token, or a webhook is set) is logged as such
 * and retried likewise. Logged once per state change: a warning when calls start failing or
 * fail differently, an info line when they work again (each failure at debug level).
 * Returns TG_OK after a clean stop (every finished update confirmed), TG_ERR_TIMEOUT when
 * the drain deadline dropped updates (they will be redelivered), TG_ERR_API when Telegram
 * answers 401 or 404 (a wrong or revoked token: retrying cannot help), or TG_ERR_INVALID.
 * In every case the dispatcher has been drained on return.
 * Details of the last failure in tg_dispatcher_errmsg(d).
 */
TG_API tg_status tg_run_polling_sized(tg_dispatcher *d, const tg_polling_options *opts,
                                      size_t opts_size);
#define tg_run_polling(d, ...) tg_run_polling_sized((d), (__VA_ARGS__), sizeof(tg_polling_options))

/* ---- webhook ---- */

typedef struct tg_webhook_options {
    const char *host;         /* listen address; NULL = "0.0.0.0" */
    int port;                 /* 0 = 8443; -1 = any free port (see tg_webhook_port) */
    const char *path;         /* only this path is served (else 404); NULL = "/" */
    const char *secret_token; /* expected X-Telegram-Bot-Api-Secret-Token (1-256 of
                                 [A-Za-z0-9_-]); NULL = not checked (not recommended) */
    const char *cert_file;    /* PEM certificate and key: HTTPS (self-signed works); both */
    const char *key_file;     /* NULL = plain HTTP (behind a TLS-terminating proxy) */
    size_t max_body_bytes;    /* larger requests get 413; 0 = 1 MiB */
    unsigned threads;         /* server threads; 0 = 2 */
    uint32_t queue_wait_ms;   /* how long a request may wait for queue room before 503;
                                 0 = answer 503 at once */
    uint32_t drain_ms;        /* tg_run_webhook: time for queued updates at stop; 0 = 10000 */
    /* For tg_webhook_set(): */
    const char *url;          /* public HTTPS URL Telegram posts to */
    bool upload_certificate;  /* send cert_file with setWebhook (self-signed certificates) */
    const char *ip_address;   /* fixed IP Telegram should use; NULL = DNS */
    uint32_t max_connections; /* 1-100; 0 = Telegram's default (40) */
    const char *const *allowed_updates; /* NULL-terminated; NULL = Telegram's choice */
    bool drop_pending_updates;
    /* > 0: each request waits up to this long for its handler, which may then answer in the
     * response body with tg_hctx_respond(); 0 = answer as soon as the update is queued. */
    uint32_t reply_wait_ms;
    /* Be the ingress of a fleet (tgbot/fleet.h): publish each update to its stream and
     * answer 200 only once Redis has it, 503 when Redis is unreachable (Telegram retries).
     * d then only serves for tg_run_webhook's stop; reply_wait_ms must be 0. NULL = feed d. */
    struct tg_fleet *fleet;
    /* Slow and crowding clients (docs/framework.md, "Webhook limits"). A request, headers
     * and body, must have arrived within request_timeout_ms of its connection's accept (or
     * of the end of the connection's previous request), however steadily it trickles in;
     * the handler's own time does not count. 0 = 10000. A connection that sends nothing
     * for 30 s is closed too. */
    uint32_t request_timeout_ms;
    /* Connections served at once; 0 = half the open-files soft limit (RLIMIT_NOFILE),
     * 16..65536: 512 under the common soft limit of 1024. Past it accepting pauses: new
     * connections wait in the listen queue until one ends. */
    unsigned max_server_connections;
    /* Connections at once from one address; 0 = 128 (Telegram opens up to max_connections,
     * at most 100; behind a reverse proxy every connection comes from the proxy's address,
     * so keep this above the proxy's own upstream limit). */
    unsigned max_connections_per_ip;
} tg_webhook_options;

typedef struct tg_webhook tg_webhook;

/*
 * Start serving in background threads. d may be NULL when opts->fleet is set. Requests are
 * answered:
 *   404 wrong path, 405 not POST, 401 wrong or missing secret token (compared in constant
 *   time), 415 not application/json, 413 body over max_body_bytes, 400 not a JSON Update
 *   (the body says where), 503 queue full (Telegram retries later), 200 queued.
 * opts is copied. NULL on failure (bad option, unreadable certificate, port in use):
 * tg_webhook_errmsg() says why.
 */
TG_API tg_webhook *tg_webhook_start_sized(tg_dispatcher *d, const tg_webhook_options *opts,
                                          size_t opts_size);
#define tg_webhook_start(d, ...)                                                                   \
    tg_webhook_start_sized((d), (__VA_ARGS__), sizeof(tg_webhook_options))
/* The port actually listened on. */
TG_API uint16_t tg_webhook_port(const tg_webhook *w);
/* Stop listening (requests in progress finish) and free. Does not drain d. NULL-safe. */
TG_API void tg_webhook_stop(tg_webhook *w);
/* Why the last tg_webhook_start on this thread failed ("" otherwise). */
TG_API const char *tg_webhook_errmsg(void);

typedef struct tg_webhook_stats {
    uint64_t accepted;  /* 200 */
    uint64_t rejected;  /* 4xx */
    uint64_t busy;      /* 503 */
    uint64_t timed_out; /* connections closed because a request missed request_timeout_ms */
} tg_webhook_stats;

TG_API void tg_webhook_get_stats_sized(tg_webhook *w, tg_webhook_stats *out, size_t out_size);
#define tg_webhook_get_stats(w, out)                                                               \
    tg_webhook_get_stats_sized((w), (out), sizeof(tg_webhook_stats))

/* Start, serve until tg_dispatcher_stop(d), stop, drain. TG_OK, TG_ERR_TIMEOUT (drain
 * dropped updates) or TG_ERR_INVALID / TG_ERR_TRANSPORT (could not start; see
 * tg_dispatcher_errmsg(d)). */
TG_API tg_status tg_run_webhook_sized(tg_dispatcher *d, const tg_webhook_options *opts,
                                      size_t opts_size);
#define tg_run_webhook(d, ...) tg_run_webhook_sized((d), (__VA_ARGS__), sizeof(tg_webhook_options))

/* setWebhook with the options' url, secret_token, certificate, ip_address, max_connections,
 * allowed_updates and drop_pending_updates. */
TG_API tg_status tg_webhook_set_sized(tg_ctx *ctx, const tg_webhook_options *opts,
                                      size_t opts_size);
#define tg_webhook_set(ctx, ...)                                                                   \
    tg_webhook_set_sized((ctx), (__VA_ARGS__), sizeof(tg_webhook_options))
/* deleteWebhook (back to getUpdates). */
TG_API tg_status tg_webhook_delete(tg_ctx *ctx, bool drop_pending_updates);

#ifdef __cplusplus
}
#endif

#endif
