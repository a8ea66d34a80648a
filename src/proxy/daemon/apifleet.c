/*
 * apifleet: the API's state and stats in the fleet's Redis. See apifleet.h.
 * Invariant: l->c is NULL or a connected context with l->rb attached; any failure drops it.
 */
#include "proxy/daemon/apifleet.h"

#include "core/alloc.h"
#include "core/clock.h"
#include "proxy/engine/fleet.h"
#include "proxy/wire/crypto.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define KEY_MAX (CONFIG_PREFIX_MAX + 96)

/* KEYS[1] the state hash. ARGV: 1 the revision the change was based on, 2 the new revision,
   3 the state's text. 1 written, 0 the stored revision is another. */
static const char cas_lua[] = "local r = redis.call('HGET', KEYS[1], 'rev') or '0'\n"
                              "if r ~= ARGV[1] then return 0 end\n"
                              "redis.call('HSET', KEYS[1], 'rev', ARGV[2], 'json', ARGV[3])\n"
                              "return 1\n";

/* KEYS[1] the instances. ARGV: 1 an instance id to mark live now ("" = none), 2 staleness (ms).
   The live instances. */
static const char live_lua[] =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))\n"
    "if ARGV[1] ~= '' then redis.call('ZADD', KEYS[1], now, ARGV[1]) end\n"
    "return redis.call('ZRANGE', KEYS[1], 0, -1)\n";

void apifleet_link_init(struct apifleet_link *l, const struct config *cfg)
{
    memset(l, 0, sizeof *l);
    l->cfg = cfg;
}

static void drop(struct apifleet_link *l)
{
    if (l->c)
        redisFree(l->c);
    l->c = NULL;
    l->retry_ms = tg__now_ms() + APIFLEET_RETRY_MS;
}

void apifleet_link_cleanup(struct apifleet_link *l)
{
    if (l->c)
        redisFree(l->c);
    l->c = NULL;
}

static void where(const struct apifleet_link *l, char *out, size_t cap)
{
    const struct config *cfg = l->cfg;
    if (cfg->fleet.unix_socket)
        snprintf(out, cap, "unix:%s", cfg->fleet.host);
    else
        snprintf(out, cap, strchr(cfg->fleet.host, ':') ? "[%s]:%u" : "%s:%u", cfg->fleet.host,
                 (unsigned)cfg->fleet.port);
}

static int fail(struct apifleet_link *l, const char *what, const char *why)
{
    char w[CONFIG_HOST_MAX + 16];
    where(l, w, sizeof w);
    snprintf(l->err, sizeof l->err, "[fleet] redis %s: %s: %s", w, what, why);
    drop(l);
    return -1;
}

/* A reply to check: NULL (the connection failed) or an error reply drop the link. */
static redisReply *checked(struct apifleet_link *l, redisReply *r, const char *what)
{
    if (!r) {
        fail(l, what, tg__rbound_errstr(&l->rb, l->c && l->c->errstr[0] ? l->c->errstr : "?"));
        return NULL;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        char why[200];
        snprintf(why, sizeof why, "%.*s", (int)(r->len > 160 ? 160 : r->len), r->str);
        freeReplyObject(r);
        fail(l, what, why);
        return NULL;
    }
    return r;
}

static redisReply *run(struct apifleet_link *l, const char *what, int argc, const char **argv,
                       const size_t *lens)
{
    return checked(l, tg__rbound_argv(&l->rb, l->c, argc, argv, lens), what);
}

static bool ensure(struct apifleet_link *l)
{
    if (l->c)
        return true;
    if (tg__now_ms() < l->retry_ms) {
        if (!l->err[0])
            snprintf(l->err, sizeof l->err, "[fleet] redis: not connected");
        return false;
    }
    const struct config *cfg = l->cfg;
    struct timeval tv = {.tv_sec = APIFLEET_TIMEOUT_MS / 1000,
                         .tv_usec = (APIFLEET_TIMEOUT_MS % 1000) * 1000};
    tg__rbound_init(&l->rb, NULL);
    l->c = cfg->fleet.unix_socket ? redisConnectUnixWithTimeout(cfg->fleet.host, tv)
                                  : redisConnectWithTimeout(cfg->fleet.host, cfg->fleet.port, tv);
    if (!l->c || l->c->err)
        return fail(l, "connect", l->c ? l->c->errstr : "out of memory"), false;
    tg__rbound_attach(&l->rb, l->c);
    redisSetTimeout(l->c, tv);
    if (cfg->fleet.password[0]) {
        const char *a3[] = {"AUTH", cfg->fleet.user, cfg->fleet.password};
        const char *a2[] = {"AUTH", cfg->fleet.password};
        redisReply *r = cfg->fleet.user[0] ? run(l, "AUTH", 3, a3, NULL) : run(l, "AUTH", 2, a2, NULL);
        if (!r)
            return false;
        freeReplyObject(r);
    }
    l->err[0] = '\0';
    return true;
}

static void key(const struct apifleet_link *l, char *out, const char *what)
{
    snprintf(out, KEY_MAX, "%sapi:%s", l->cfg->fleet.prefix, what);
}

int64_t apifleet_revision(struct apifleet_link *l)
{
    if (!ensure(l))
        return -1;
    char k[KEY_MAX];
    key(l, k, "state");
    const char *argv[] = {"HGET", k, "rev"};
    redisReply *r = run(l, "HGET rev", 3, argv, NULL);
    if (!r)
        return -1;
    int64_t rev = 0;
    if (r->type == REDIS_REPLY_STRING) {
        char *end;
        unsigned long long v = strtoull(r->str, &end, 10);
        rev = *end == '\0' && v <= INT64_MAX ? (int64_t)v : -2;
    } else if (r->type != REDIS_REPLY_NIL) {
        rev = -2;
    }
    freeReplyObject(r);
    if (rev == -2)
        return fail(l, "HGET rev", "not a revision number");
    return rev;
}

int apifleet_pull(struct apifleet_link *l, struct apistore *st)
{
    apistore_init(st);
    if (!ensure(l))
        return -1;
    char k[KEY_MAX];
    key(l, k, "state");
    const char *argv[] = {"HMGET", k, "rev", "json"};
    redisReply *r = run(l, "HMGET state", 4, argv, NULL);
    if (!r)
        return -1;
    int rc = 0;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        rc = -2;
    } else if (r->element[0]->type == REDIS_REPLY_STRING &&
               r->element[1]->type == REDIS_REPLY_STRING) {
        char err[CONFIG_ERR_MAX], name[KEY_MAX + 8];
        snprintf(name, sizeof name, "redis %s", k);
        rc = apistore_parse(st, name, r->element[1]->str, r->element[1]->len, err, sizeof err) == 0
                 ? 1
                 : -3;
        if (rc == 1)
            st->revision = strtoull(r->element[0]->str, NULL, 10); /* the hash's, authoritative */
        else
            snprintf(l->err, sizeof l->err, "%s", err);
        crypto_wipe(r->element[1]->str, r->element[1]->len);
    }
    freeReplyObject(r);
    if (rc == -2)
        return fail(l, "HMGET state", "unexpected reply");
    return rc == -3 ? -1 : rc;
}

int apifleet_push(struct apifleet_link *l, uint64_t expect, const struct apistore *st)
{
    if (!ensure(l))
        return -1;
    tg__buf b;
    tg__buf_init(&b, (size_t)16 << 20);
    if (apistore_format(st, &b) != 0) {
        tg__buf_cleanup(&b);
        snprintf(l->err, sizeof l->err, "out of memory");
        return -1;
    }
    char k[KEY_MAX], ex[24], nw[24];
    key(l, k, "state");
    snprintf(ex, sizeof ex, "%" PRIu64, expect);
    snprintf(nw, sizeof nw, "%" PRIu64, st->revision);
    const char *argv[] = {"EVAL", cas_lua, "1", k, ex, nw, b.data};
    size_t lens[] = {4, strlen(cas_lua), 1, strlen(k), strlen(ex), strlen(nw), b.len};
    redisReply *r = run(l, "EVAL state", 7, argv, lens);
    crypto_wipe(b.data, b.len);
    tg__buf_cleanup(&b);
    if (!r)
        return -1;
    int rc = r->type == REDIS_REPLY_INTEGER ? (r->integer == 1) : -1;
    freeReplyObject(r);
    if (rc < 0)
        return fail(l, "EVAL state", "unexpected reply");
    return rc;
}

/* The live instances (marking inst live when not NULL): a reply array of ids, or NULL. */
static redisReply *live(struct apifleet_link *l, const char *inst)
{
    char k[KEY_MAX], stale[16];
    key(l, k, "insts");
    snprintf(stale, sizeof stale, "%u", APIFLEET_STALE_MS);
    const char *argv[] = {"EVAL", live_lua, "1", k, inst ? inst : "", stale};
    redisReply *r = run(l, "EVAL insts", 6, argv, NULL);
    if (r && r->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(r);
        fail(l, "EVAL insts", "unexpected reply");
        return NULL;
    }
    return r;
}

int apifleet_publish(struct apifleet_link *l, const char *inst, const char *const *labels,
                     const tg__buf *vals, size_t n)
{
    if (!ensure(l))
        return -1;
    char k[KEY_MAX + 64], ttl[16];
    snprintf(k, sizeof k, "%sapi:stats:%s", l->cfg->fleet.prefix, inst);
    snprintf(ttl, sizeof ttl, "%u", APIFLEET_STALE_MS);
    size_t argc = 2 + 2 * n;
    const char **argv = tg__malloc(argc * sizeof *argv);
    size_t *lens = tg__malloc(argc * sizeof *lens);
    if (!argv || !lens) {
        tg__free(argv);
        tg__free(lens);
        return -1;
    }
    argv[0] = "HSET", lens[0] = 4;
    argv[1] = k, lens[1] = strlen(k);
    for (size_t i = 0; i < n; i++) {
        argv[2 + 2 * i] = labels[i], lens[2 + 2 * i] = strlen(labels[i]);
        argv[3 + 2 * i] = vals[i].data ? vals[i].data : "", lens[3 + 2 * i] = vals[i].len;
    }
    int rc = 0;
    if (n) {
        const char *del[] = {"DEL", k}; /* labels gone since the last publish go too */
        redisReply *r = run(l, "DEL stats", 2, del, NULL);
        if (r)
            freeReplyObject(r);
        rc = r ? 0 : -1;
        if (rc == 0 && (r = run(l, "HSET stats", (int)argc, argv, lens)))
            freeReplyObject(r);
        rc = rc == 0 && r ? 0 : -1;
        const char *exp[] = {"PEXPIRE", k, ttl};
        if (rc == 0 && (r = run(l, "PEXPIRE stats", 3, exp, NULL)))
            freeReplyObject(r);
        rc = rc == 0 && r ? 0 : -1;
    }
    tg__free(argv);
    tg__free(lens);
    redisReply *lr = rc == 0 ? live(l, inst) : NULL;
    if (lr)
        freeReplyObject(lr);
    return lr ? 0 : -1;
}

int apifleet_read(struct apifleet_link *l, const char *self, const char *label,
                  apifleet_stat_fn fn, void *user)
{
    if (!ensure(l))
        return -1;
    redisReply *ids = live(l, NULL);
    if (!ids)
        return -1;
    int peers = 0;
    for (size_t i = 0; i < ids->elements; i++) {
        const redisReply *id = ids->element[i];
        if (id->type != REDIS_REPLY_STRING || strcmp(id->str, self) == 0)
            continue;
        char k[KEY_MAX + 64];
        snprintf(k, sizeof k, "%sapi:stats:%.*s", l->cfg->fleet.prefix, (int)id->len, id->str);
        const char *one[] = {"HGET", k, label};
        const char *all[] = {"HGETALL", k};
        redisReply *r = label ? run(l, "HGET stats", 3, one, NULL) : run(l, "HGETALL stats", 2, all, NULL);
        if (!r) {
            freeReplyObject(ids);
            return -1;
        }
        peers++;
        if (label && r->type == REDIS_REPLY_STRING)
            fn(user, label, r->str, r->len);
        for (size_t j = 0; !label && r->type == REDIS_REPLY_ARRAY && j + 1 < r->elements; j += 2)
            if (r->element[j]->type == REDIS_REPLY_STRING &&
                r->element[j + 1]->type == REDIS_REPLY_STRING)
                fn(user, r->element[j]->str, r->element[j + 1]->str, r->element[j + 1]->len);
        freeReplyObject(r);
    }
    freeReplyObject(ids);
    return peers;
}

int64_t apifleet_quota_reset(struct apifleet_link *l, const char *label, uint32_t reset_s)
{
    if (!ensure(l))
        return -1;
    char q[FLEET_KEY_MAX], k[KEY_MAX];
    if (!fleet_quota_key(l->cfg, label, reset_s, q))
        return fail(l, "DEL quota", "the key does not fit"), -1;
    key(l, k, "qresets");
    /* two commands, not a script: the keys hash to different cluster slots */
    const char *del[] = {"DEL", q};
    redisReply *r = run(l, "DEL quota", 2, del, NULL);
    if (!r)
        return -1;
    freeReplyObject(r);
    const char *inc[] = {"HINCRBY", k, label, "1"};
    if (!(r = run(l, "HINCRBY qresets", 4, inc, NULL)))
        return -1;
    int64_t n = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    if (n < 0)
        return fail(l, "HINCRBY qresets", "unexpected reply"), -1;
    return n;
}

int apifleet_quota_resets(struct apifleet_link *l, apifleet_reset_fn fn, void *user)
{
    if (!ensure(l))
        return -1;
    char k[KEY_MAX];
    key(l, k, "qresets");
    const char *argv[] = {"HGETALL", k};
    redisReply *r = run(l, "HGETALL qresets", 2, argv, NULL);
    if (!r)
        return -1;
    for (size_t j = 0; r->type == REDIS_REPLY_ARRAY && j + 1 < r->elements; j += 2) {
        const redisReply *lab = r->element[j], *n = r->element[j + 1];
        char *end;
        unsigned long long v = n->type == REDIS_REPLY_STRING ? strtoull(n->str, &end, 10) : 0;
        if (lab->type == REDIS_REPLY_STRING && lab->len < CONFIG_LABEL_MAX && v &&
            *end == '\0')
            fn(user, lab->str, (uint64_t)v);
    }
    freeReplyObject(r);
    return 0;
}
