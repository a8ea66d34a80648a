/*
 * fleet: what several tgproxy processes share through one Redis server ([fleet] redis):
 * the anti-replay set and the per-secret [limits] (connections, unique IPs, quotas).
 *
 * Shape. One struct fleet per process (conn_shared) holds the configuration, this
 * process's member id and the scripts; one struct fleet_worker per worker thread holds a
 * hiredis asynchronous connection driven by that worker's own epoll loop (a small adapter
 * over loop.h: hiredis asks for read/write interest, the loop calls back). Commands of one
 * worker are pipelined on its connection and answered in order; a handshake never blocks
 * the loop. Why not a Redis thread per worker with a queue and an eventfd back: the loop
 * already is an event loop, a second thread would add a hop, a lock and a wake-up per check,
 * and the connection's lifetime would belong to two threads.
 *
 * A check. conn.c asks fleet_check() once a handshake has validated locally (the local
 * replay cache said "new", the local limits admitted it). The answer comes exactly once
 * through the callback, from the loop: FLEET_OK (Redis agrees), FLEET_REPLAY, one of the
 * limit verdicts, or FLEET_LOCAL (no answer within [fleet] timeout, Redis down or erring:
 * decide on local state, i.e. accept; counted in stats fleet_fallbacks). fleet_check may
 * also answer FLEET_LOCAL at once (returned, no callback) when Redis is known to be away.
 * A connection that ends while its check is in flight calls fleet_cancel(): the late reply
 * then finds no owner (the pending slot outlives the connection) and only fixes Redis's
 * counts. The bound is a timer per pending check in the worker's loop.
 *
 * Keys (P = key-prefix): `Pr:<kind><key bytes>` anti-replay (SET NX EX window); for a secret
 * with limits (its label's, so they follow the label across reloads), `P{L}:c` (hash member ->
 * connections held), `P{L}:ip` (sorted set of client addresses, score = when they stop counting),
 * `P{L}:q:<period>` (bytes relayed), where L is the secret's label; `Pmembers` (sorted set: worker
 * member ids, score = lease end, Redis's clock). A member's counts stop counting once its lease
 * ([fleet] lease, renewed three times a lease) ends, so a crashed process's connections do
 * not hold slots.
 *
 * Outage. A worker whose connection fails falls back at once, reconnects with backoff
 * (250 ms doubling to 5 s) and, once its first command is answered, writes its held
 * connection counts again (absolute values) before any new check. The first worker to see
 * an outage logs a warning (once per outage per process); the recovery is logged when all
 * workers are back. A connection that stops answering (FLEET_STALL_MS with commands
 * outstanding) is dropped and reconnected like a failed one.
 *
 * Ownership: fleet_new borrows cfg (it must outlive the fleet); fleet_worker_new borrows the
 * loop and the stats of its worker. Thread-safety: a fleet_worker is used by its worker
 * thread only; the struct fleet is read-only once workers run except for its atomics.
 */
#ifndef TGPROXY_FLEET_H
#define TGPROXY_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/config/config.h"
#include "proxy/engine/loop.h"
#include "proxy/engine/stats.h"

#define FLEET_STALL_MS       2000 /* commands outstanding this long: the connection is dead */
#define FLEET_CONNECT_MS     2000 /* a connect (and its first answer) may take this long */
#define FLEET_BACKOFF_MIN_MS 250
#define FLEET_BACKOFF_MAX_MS 5000
#define FLEET_MAX_PENDING    1024       /* checks in flight per worker; beyond, decided locally */
#define FLEET_NONE           UINT32_MAX /* no ticket */

enum fleet_verdict {
    FLEET_OK = 0,      /* Redis agrees: a new hello, under every fleet limit */
    FLEET_REPLAY,      /* another process (or this one) saw this hello within the window */
    FLEET_CONNECTIONS, /* the secret's max-connections are open across the fleet */
    FLEET_UNIQUE_IPS,  /* a new address over the secret's max-unique-ips across the fleet */
    FLEET_QUOTA,       /* the secret's quota is used up across the fleet */
    FLEET_LOCAL,       /* no answer in time (or Redis away): decide on local state */
    FLEET_PENDING,     /* fleet_check only: asked; the callback will answer */
};

struct fleet;
struct fleet_worker;

/* Which secret a check or a count is for. Limits follow the label, not the position in
   the file, so that they hold across reloads (generation.h). */
struct fleet_secret {
    uint32_t slot;                   /* the label's slot (generation.h); GEN_NO_SLOT = no limits */
    const char *label;               /* stable for the process's life (gen_labels_name) */
    const struct config_limits *lim; /* borrowed for the call */
};

/* What a handshake asks. */
struct fleet_query {
    uint8_t kind;            /* enum antireplay_kind of key */
    const uint8_t *key;      /* anti-replay key, or NULL: no anti-replay check */
    size_t key_len;          /* at most 64 */
    struct fleet_secret sec; /* the secret the hello named */
    const uint8_t *addr;     /* client address (16 bytes, IPv4 mapped), or NULL when unknown */
};

/* The answer; owner is fleet_check's. Called from the worker's loop, never from inside
   fleet_check. When it says FLEET_OK or FLEET_LOCAL for a secret with max-connections, the
   owner holds a fleet slot: fleet_release() exactly once when it closes (with the same
   limits). */
typedef void (*fleet_done_fn)(void *owner, enum fleet_verdict v);

/* The process's fleet for cfg (cfg->fleet.enabled). NULL on ENOMEM or no random bytes. */
struct fleet *fleet_new(const struct config *cfg);
void fleet_free(struct fleet *f); /* NULL-safe; every fleet_worker is freed first */

/* A worker's connection, started at once (its loop runs it). NULL on ENOMEM or when the
   loop has no room for its timer queues. */
struct fleet_worker *fleet_worker_new(struct fleet *f, struct loop *l, struct stats *st);
/* Drop the connection (pending owners are not called back) and free. NULL-safe. */
void fleet_worker_free(struct fleet_worker *fw);

/* Whether a handshake of this secret needs Redis at all (anti-replay on, or limits set). */
bool fleet_wanted(const struct fleet_worker *fw, const struct fleet_secret *s, bool replay);

/* Ask q (copied). Returns FLEET_PENDING with *ticket set (the callback follows), or
   FLEET_LOCAL at once (counted as a fallback; the caller then holds a slot as above), or
   FLEET_OK when there is nothing to ask. */
enum fleet_verdict fleet_check(struct fleet_worker *fw, const struct fleet_query *q, void *owner,
                               fleet_done_fn cb, uint32_t *ticket);
/* The owner of ticket is going away: its callback will not be called. */
void fleet_cancel(struct fleet_worker *fw, uint32_t ticket);
/* Give back the fleet slot of a connection of secret (see fleet_done_fn). */
void fleet_release(struct fleet_worker *fw, const struct fleet_secret *s);
/* Charge relayed bytes to secret's fleet quota (added up, sent once a second by the
   worker). True when the fleet says the quota of the current period is used up. */
bool fleet_charge(struct fleet_worker *fw, const struct fleet_secret *s, uint64_t bytes);

/* The Redis key of label's quota count in the current period of reset_s (above: `P{L}:q:N`)
   into out: its length, 0 if it does not fit. */
#define FLEET_KEY_MAX (CONFIG_PREFIX_MAX + CONFIG_LABEL_MAX + 96)
size_t fleet_quota_key(const struct config *cfg, const char *label, uint32_t reset_s,
                       char out[FLEET_KEY_MAX]);
/* The quota of label slot was reset (its Redis key deleted by the control API): every
   worker forgets that Redis said it is used up, at its next charge. Any thread. */
void fleet_quota_reset(struct fleet *f, uint32_t slot);

/* "fleet: ..." name for a verdict, static. */
const char *fleet_verdict_name(enum fleet_verdict v);

#endif
