/*
 * rconn: a Redis client for one thread at a time, on hiredis, that follows a Redis Cluster.
 *
 * It starts with the configured node. A MOVED answer teaches it the slot's owner (and marks
 * the connection as cluster mode); ASK is followed once with ASKING. Every command names the
 * key that decides its slot, and every multi-key command of the fleet uses keys with one hash
 * tag, so no command ever spans slots. A command that fails on the wire drops that node's
 * connection; the next command reconnects (AUTH, SELECT). Scripts run by EVALSHA, falling
 * back to EVAL when the server does not know them (after a restart).
 *
 * Thread-safety: none; give each thread its own rconn, or lock around one.
 */
#ifndef TGKIT_BOT_FLEET_RCONN_H
#define TGKIT_BOT_FLEET_RCONN_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bot/fleet/reply.h"

#define TG__RCONN_MAX_NODES 32

/* Where Redis is; owned by the fleet, borrowed by every rconn. */
struct tg__rcfg {
    char *host;
    uint16_t port;
    char *password; /* a secret: never in an error text */
    int db;
    uint32_t timeout_ms;
};

struct tg__rscript {
    const char *src;
    char sha[41]; /* hex SHA-1 of src, filled by tg__rscript_init */
};

typedef struct tg__rconn tg__rconn;

tg__rconn *tg__rconn_new(const struct tg__rcfg *cfg); /* NULL on out of memory */
void tg__rconn_free(tg__rconn *c);                    /* NULL-safe */
/* Connect to the first node now (to fail early). 0 or -1 with tg__rconn_err(). */
int tg__rconn_ping(tg__rconn *c);
/*
 * Run a command. key decides the node (NULL = the first node). Returns the reply (the caller
 * frees it with freeReplyObject), which may be an error reply the caller must inspect, or
 * NULL when the command could not be run (connection failed, too many redirections);
 * tg__rconn_err() says why.
 */
redisReply *tg__rconn_cmd(tg__rconn *c, const char *key, int argc, const char **argv,
                          const size_t *lens);
/* EVALSHA script (EVAL when unknown) with keys[0..nkeys) and args (lens NULL = strlen). */
redisReply *tg__rconn_eval(tg__rconn *c, const struct tg__rscript *s, int nkeys, const char **keys,
                           int nargs, const char **args, const size_t *lens);
const char *tg__rconn_err(const tg__rconn *c);
/* Copy an error reply's text into the rconn's error and free the reply; returns NULL. */
redisReply *tg__rconn_fail(tg__rconn *c, redisReply *r, const char *what);
bool tg__rconn_cluster(const tg__rconn *c);

void tg__rscript_init(struct tg__rscript *s, const char *src);
/* true when r is an error reply starting with prefix ("NOGROUP", "BUSYGROUP", ...). */
bool tg__reply_is_err(const redisReply *r, const char *prefix);

#endif
