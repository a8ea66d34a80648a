/*
 * fleet_int: the tg_fleet handle shared by the files of src/bot/fleet/ and by the receivers
 * in src/bot/updates/ (webhook and long polling publish through it).
 *
 * Files: fleet.c (handle, publish, idempotency, stats), worker.c (membership, leases,
 * partition readers, acknowledgements), flood.c (fleet-wide GCRA), poll.c (long polling as
 * ingress under a fleet-wide lease), rconn.c (the Redis client).
 *
 * Key layout (P = the prefix, "tgbot:" by default; i = partition):
 *   {Pp<i>}:stream   the partition's stream; consumer group "workers"; entries {u: <json>}
 *   {Pp<i>}:lease    owner worker id, PX lease_ms
 *   Pworkers         sorted set: worker id -> expiry (Redis TIME, ms)
 *   Pdone:<scope>:<update_id>            idempotency marks, PX ttl
 *   {Pflood}:g, {Pflood}:c:<chat>, {Pflood}:gc:<chat>   flood-control TATs (us)
 *   {Ppoll}:lease, {Ppoll}:offset        the long-polling lease and the next offset
 */
#ifndef TGKIT_BOT_FLEET_INT_H
#define TGKIT_BOT_FLEET_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "bot/fleet/rconn.h"
#include "bot/json/json.h"
#include "tgbot/fleet.h"

#define TG__FLEET_GROUP   "workers"
#define TG__FLEET_NPUB    4   /* publisher connections (webhook threads share them) */
#define TG__FLEET_KEY_MAX 192 /* bytes of a key, NUL included */

struct tg__pubconn {
    pthread_mutex_t mu;
    tg__rconn *rc;
    tg__jdoc doc;
};

struct tg_fleet {
    struct tg__rcfg rcfg;
    char *prefix;
    unsigned nparts;
    uint32_t lease_ms;
    uint32_t batch;
    char worker_id[72];
    struct tg__pubconn pub[TG__FLEET_NPUB];
    atomic_uint next_pub;
    pthread_mutex_t misc_mu; /* guards misc (idempotency, flood) */
    tg__rconn *misc;
    atomic_bool running;             /* a worker loop runs */
    atomic_bool flood_down;          /* the last flood check could not reach Redis */
    atomic_ullong flood_retry_at_ms; /* flood checks stay local until then */
    struct {
        atomic_ullong published, publish_failed, handled, ack_failed, claimed, acquired, released,
            lost, flood_checks, flood_fallbacks;
        atomic_uint owned, members;
    } st;
};

/* Publish with the error text in err (thread-safe). See tg_fleet_publish. */
tg_status tg__fleet_publish(tg_fleet *f, const char *json, size_t len, char *err, size_t errcap);
/* The partition's keys ("{Pp3}:stream", ...) into buf. */
void tg__fleet_key(const tg_fleet *f, unsigned part, const char *suffix, char *buf, size_t cap);
/* "<int64>" into buf; returns buf. */
const char *tg__fleet_i64(int64_t v, char *buf, size_t cap);

/* poll.c: tg_run_polling with opts->fleet set (d has a bot). */
struct tg_polling_options;
tg_status tg__fleet_run_polling(struct tg_dispatcher *d, const struct tg_polling_options *o);

/* Scripts (worker.c), created once. */
extern struct tg__rscript tg__fleet_lease_script, tg__fleet_renew_script, tg__fleet_release_script,
    tg__fleet_heartbeat_script, tg__fleet_ack_script;
void tg__fleet_scripts_init(void);

#endif
