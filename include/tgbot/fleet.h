/*
 * tgbot/fleet.h: one bot on many processes and machines, with Redis as the engine.
 *
 *   ingress (webhook or long polling)  --XADD-->  N Redis streams  --XREADGROUP-->  workers
 *
 * Ingress processes publish every update to one of N streams ("partitions"), chosen by the
 * update's order key (its chat, or its user where there is no chat), so all updates of a chat
 * go through one stream. Worker processes own partitions through leases in Redis (one owner
 * at a time; leases expire and are renewed; partitions are rebalanced when workers join or
 * leave) and run the entries of a partition through their tg_dispatcher, which keeps a chat's
 * updates in order. An entry is acknowledged (XACK) after its handler finished; the pending
 * entries of a worker that died are claimed (XAUTOCLAIM) by the partition's next owner and
 * run again, first, in order. Delivery is at least once: an update runs twice only when its
 * handler finished and the acknowledgement was lost (tg_fleet_mark_processed helps handlers
 * whose effects must happen once).
 *
 * A single-process bot becomes a fleet by configuration:
 *
 *     tg_fleet *fleet = tg_fleet_new(&(tg_fleet_options){.redis_host = "10.0.0.5"});
 *     // on the ingress machines:
 *     tg_run_webhook(d, &(tg_webhook_options){..., .fleet = fleet});
 *     // on the worker machines (same router, same handlers as before):
 *     tg_fleet_share_flood(fleet, bot);
 *     tg_fleet_run_worker(fleet, d, NULL);
 *
 * Redis may be one server or a Redis Cluster: every key of a partition carries the hash tag
 * "{<prefix>p<i>}", so a stream and its lease live in one slot, and MOVED/ASK redirections are
 * followed. docs/fleet.md has the key layout, the guarantees and their limits.
 *
 * Thread-safety: a tg_fleet is shared by any number of threads (its connections are pooled
 * and locked internally). Run at most one tg_fleet_run_worker per fleet at a time.
 */
#ifndef TGBOT_FLEET_H
#define TGBOT_FLEET_H

#include "tgbot/common.h"
#include "tgbot/dispatch.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_bot tg_bot;
typedef struct tg_fleet tg_fleet;

/* Grows only at the end (docs/abi.md); zero means the default in every field. */
typedef struct tg_fleet_options {
    const char *redis_host;     /* any node of a cluster; NULL = "127.0.0.1" */
    uint16_t redis_port;        /* 0 = 6379 */
    const char *redis_password; /* AUTH; NULL = none (a secret: copied, wiped, never logged) */
    int redis_db;               /* SELECT; 0 = default (a cluster has only 0) */
    uint32_t redis_timeout_ms;  /* connect and command timeout; 0 = 2000 */
    const char *prefix;         /* every key starts with it or with "{<prefix>"; NULL = "tgbot:" */
    unsigned partitions;        /* streams; 1..1024; 0 = 16. Every process of a fleet must agree:
                                   changing it reorders chats whose updates are still queued */
    uint32_t lease_ms;          /* a partition's lease; a dead worker's partitions move after at
                                   most this long; handlers must finish well within it; 0 = 10000 */
    uint32_t batch;             /* entries read per XREADGROUP; 0 = 64 */
    const char *worker_id;      /* this process's name in the fleet (copied; 1..64 of
                                   [A-Za-z0-9_.:-]); NULL = "<hostname>-<pid>-<random>".
                                   Unique among live processes: two with one id would hold
                                   the same leases at once */
} tg_fleet_options;

/*
 * A fleet handle: connects to Redis at once (so a wrong address fails here) and checks the
 * options. opts is copied (the password is wiped on free). NULL on failure;
 * tg_fleet_errmsg() says why, without the password.
 */
TG_API tg_fleet *tg_fleet_new_sized(const tg_fleet_options *opts, size_t opts_size);
#define tg_fleet_new(...) tg_fleet_new_sized((__VA_ARGS__), sizeof(tg_fleet_options))
/* Free. Every worker loop, webhook and poller using the fleet must have stopped. NULL-safe. */
TG_API void tg_fleet_free(tg_fleet *f);
/* Why the last tg_fleet_new or tg_fleet_publish on this thread failed ("" otherwise). */
TG_API const char *tg_fleet_errmsg(void);
/* This process's worker id (valid until tg_fleet_free). */
TG_API const char *tg_fleet_worker_id(const tg_fleet *f);

/*
 * Publish one update (raw JSON, copied into the stream) to its partition: the ingress step.
 * Returns TG_OK once Redis has the entry (XADD answered), TG_ERR_DECODE when json is not an
 * Update (nothing published), TG_ERR_TRANSPORT when Redis is unreachable or refused (answer
 * 503 to Telegram so it retries), TG_ERR_NOMEM. Any thread.
 * The webhook server and long polling call this for you when their options name a fleet.
 */
TG_API tg_status tg_fleet_publish(tg_fleet *f, const char *json, size_t len);
/* The partition an update with this order key goes to (chat id, else user id). */
TG_API unsigned tg_fleet_partition(const tg_fleet *f, int64_t order_key);

/* Grows only at the end. */
typedef struct tg_fleet_worker_options {
    uint32_t drain_ms; /* at stop, time for updates already handed to d; 0 = 10000 */
} tg_fleet_worker_options;

/*
 * Be a worker of the fleet until tg_dispatcher_stop(d): join the fleet, take partitions,
 * run their entries through d (its router, conversations, worker threads), acknowledge them,
 * and give partitions back when workers join or leave. d is borrowed; do not feed it from
 * elsewhere meanwhile. opts may be NULL. At stop: stop reading, let d finish what it has
 * (drain_ms), release the leases so other workers take over at once, leave the fleet.
 * Redis outages are survived: the loop retries, and partitions whose lease could not be
 * renewed are given up until Redis answers again.
 * Returns TG_OK after a clean stop, TG_ERR_TIMEOUT when the drain dropped updates (they stay
 * pending and are redelivered), TG_ERR_INVALID (NULL argument, unknown options, or already
 * running), TG_ERR_NOMEM.
 */
TG_API tg_status tg_fleet_run_worker_sized(tg_fleet *f, tg_dispatcher *d,
                                           const tg_fleet_worker_options *opts, size_t opts_size);
#define tg_fleet_run_worker(f, d, ...)                                                             \
    tg_fleet_run_worker_sized((f), (d), (__VA_ARGS__), sizeof(tg_fleet_worker_options))

/*
 * Fleet-wide flood control: from now on the flood-control limits of bot (tg_bot_options.flood:
 * global, per chat, per group) are kept across every process that shares them through this
 * fleet's Redis, one atomic script (GCRA) per message. While Redis is unreachable, the bot
 * falls back to its local buckets, logs once per outage and counts the checks in
 * tg_fleet_stats.flood_fallbacks. Call before bot makes calls; f must outlive bot's calls
 * (tg_fleet_share_flood(NULL, bot) detaches). TG_ERR_INVALID when bot has flood control off.
 */
TG_API tg_status tg_fleet_share_flood(tg_fleet *f, tg_bot *bot);

/*
 * Idempotency helper: a processed-update set with a TTL, shared by the fleet.
 * tg_fleet_is_processed: *yes = whether mark_processed was called for (scope, update_id)
 * within ttl. tg_fleet_mark_processed: record it for ttl_ms (0 = 24 h). scope (NULL = "")
 * names the effect, so one update can have several ("reply", "charge"). A handler whose
 * effect must happen once checks first and marks after the effect. TG_OK or
 * TG_ERR_TRANSPORT. Any thread.
 */
TG_API tg_status tg_fleet_is_processed(tg_fleet *f, const char *scope, int64_t update_id,
                                       bool *yes);
TG_API tg_status tg_fleet_mark_processed(tg_fleet *f, const char *scope, int64_t update_id,
                                         uint64_t ttl_ms);

/* Grows only at the end; the library writes no more than the caller's size. */
typedef struct tg_fleet_stats {
    uint64_t published;       /* XADD succeeded */
    uint64_t publish_failed;  /* Redis unreachable or refused (503 at the webhook) */
    uint64_t handled;         /* entries whose handler finished and that were acknowledged */
    uint64_t ack_failed;      /* acknowledgements lost (the entry will run again) */
    uint64_t claimed;         /* pending entries taken over from an earlier owner */
    uint64_t acquired;        /* partitions taken */
    uint64_t released;        /* partitions given back (rebalance, stop) */
    uint64_t lost;            /* partitions whose lease ran out or was taken */
    uint32_t owned;           /* partitions held right now */
    uint32_t members;         /* live workers in the last heartbeat */
    uint64_t flood_checks;    /* fleet-wide flood checks answered by Redis */
    uint64_t flood_fallbacks; /* flood checks done locally because Redis was unreachable */
} tg_fleet_stats;

TG_API void tg_fleet_get_stats_sized(tg_fleet *f, tg_fleet_stats *out, size_t out_size);
#define tg_fleet_get_stats(f, out) tg_fleet_get_stats_sized((f), (out), sizeof(tg_fleet_stats))

#ifdef __cplusplus
}
#endif

#endif
