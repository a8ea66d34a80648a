/*
 * apifleet: the control API's secrets shared by a fleet ([api] with [fleet]), kept in the
 * fleet's Redis beside its anti-replay set and limits (docs/api.md "Fleets").
 *
 * Keys (P = [fleet] key-prefix):
 *   - `Papi:state`, a hash: `rev` (the fleet's revision of the API state) and `json` (the
 *     state file's text, apistore_format: it holds the secrets' keys, as the state file
 *     does). Written only by a compare-and-set script: the write names the revision it was
 *     based on, and is refused when another instance changed the state meanwhile.
 *   - `Papi:insts`, a sorted set: the instances publishing stats, scored by when they last
 *     did (Redis's clock); entries older than APIFLEET_STALE_MS are dropped by readers.
 *   - `Papi:stats:ID`, a hash per instance: label -> that instance's stats object of the
 *     label (the JSON text /v1/secrets/{label}/stats answers, plus "ips": the hashes of its
 *     client addresses in the window, for a fleet-wide count of distinct ones), expiring
 *     after APIFLEET_STALE_MS unless published again.
 *   - `Papi:qresets`, a hash: label -> how many times reset-quota was called for it; an
 *     instance that sees a number change forgets its own count of the label's quota.
 *
 * A link is one blocking hiredis connection (core/rbound.h bounds every reply), made on
 * first use and dropped on any error; after a failure it does not try again for
 * APIFLEET_RETRY_MS, so an API call during an outage is answered at once.
 *
 * Ownership: struct apifleet_link is caller storage; cfg is borrowed. Thread-safety: a link
 * is used by one thread at a time.
 */
#ifndef TGPROXY_APIFLEET_H
#define TGPROXY_APIFLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/rbound.h"
#include "proxy/config/config.h"
#include "proxy/daemon/apistore.h"

#define APIFLEET_TIMEOUT_MS 1000 /* connect and each command */
#define APIFLEET_RETRY_MS   1000 /* after a failure, no new connect before this */
#define APIFLEET_STALE_MS   5000 /* an instance's stats count this long after it published */

struct apifleet_link {
    const struct config *cfg;
    redisContext *c;
    struct tg__rbound rb;
    uint64_t retry_ms; /* monotonic: no connect before */
    char err[CONFIG_ERR_MAX + CONFIG_HOST_MAX + 64]; /* the last failure ("[fleet] redis ...") */
};

void apifleet_link_init(struct apifleet_link *l, const struct config *cfg);
void apifleet_link_cleanup(struct apifleet_link *l);

/* The fleet's revision (0: nothing stored yet), or -1 (l->err says why). */
int64_t apifleet_revision(struct apifleet_link *l);
/* The fleet's state into st (initialised here). 1 read, 0 nothing stored (st empty), -1
   unreachable or unreadable (l->err). */
int apifleet_pull(struct apifleet_link *l, struct apistore *st);
/* Store st (its revision is the new one) if the fleet is still at revision expect. 1 written,
   0 refused (another instance wrote first), -1 unreachable (l->err). */
int apifleet_push(struct apifleet_link *l, uint64_t expect, const struct apistore *st);

/* Publish this instance's stats: n labels, vals[i] the JSON text of labels[i]. 0 or -1. */
int apifleet_publish(struct apifleet_link *l, const char *inst, const char *const *labels,
                     const tg__buf *vals, size_t n);
/* The other live instances' stats of label (label NULL: of every label): calls fn once per
   (instance, label, JSON text) found. The number of other live instances, or -1. */
typedef void (*apifleet_stat_fn)(void *user, const char *label, const char *json, size_t len);
int apifleet_read(struct apifleet_link *l, const char *self, const char *label,
                  apifleet_stat_fn fn, void *user);

/* reset-quota: delete label's fleet quota count (fleet.h fleet_quota_key) and count the
   reset in `Papi:qresets`. The new count, or -1 (l->err). */
int64_t apifleet_quota_reset(struct apifleet_link *l, const char *label, uint32_t reset_s);
/* Every label's count of resets: fn once per label. 0 or -1 (l->err). */
typedef void (*apifleet_reset_fn)(void *user, const char *label, uint64_t resets);
int apifleet_quota_resets(struct apifleet_link *l, apifleet_reset_fn fn, void *user);

#endif
