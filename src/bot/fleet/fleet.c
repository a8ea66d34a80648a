/*
 * fleet: the tg_fleet handle, the ingress step (publish one update to its partition's
 * stream), the idempotency helper and the counters. See tgbot/fleet.h and docs/fleet.md.
 *
 * Publishing borrows one of a few connections (round robin, each locked), tokenizes the
 * update with that connection's document to learn its order key, and XADDs it. The answer
 * of XADD is the proof the update is stored: only then does the webhook answer 200.
 */
#include <openssl/rand.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bot/dispatch/event.h"
#include "bot/fleet/fleet_int.h"
#include "core/alloc.h"
#include "core/sized.h"

#define DEF_PARTITIONS 16
#define MAX_PARTITIONS 1024
#define DEF_LEASE_MS   10000
#define DEF_BATCH      64
#define DEF_DONE_TTL   (24ull * 3600 * 1000)

static _Thread_local char fleet_err[256];

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(fleet_err, sizeof fleet_err, fmt, ap);
    va_end(ap);
}

const char *tg_fleet_errmsg(void)
{
    return fleet_err;
}

const char *tg__fleet_i64(int64_t v, char *buf, size_t cap)
{
    snprintf(buf, cap, "%lld", (long long)v);
    return buf;
}

void tg__fleet_key(const tg_fleet *f, unsigned part, const char *suffix, char *buf, size_t cap)
{
    snprintf(buf, cap, "{%sp%u}:%s", f->prefix, part, suffix);
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

unsigned tg_fleet_partition(const tg_fleet *f, int64_t order_key)
{
    return (unsigned)(mix64((uint64_t)order_key) % f->nparts);
}

static bool valid_id(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-", s[i]))
            return false;
    return true;
}

static void make_worker_id(tg_fleet *f)
{
    char host[40] = "host";
    unsigned char rnd[4] = {0};
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    for (char *p = host; *p; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-", *p))
            *p = '_';
    RAND_bytes(rnd, sizeof rnd);
    snprintf(f->worker_id, sizeof f->worker_id, "%s-%ld-%02x%02x%02x%02x", host, (long)getpid(),
             rnd[0], rnd[1], rnd[2], rnd[3]);
}

static bool copy_options(tg_fleet *f, const tg_fleet_options *o)
{
    f->rcfg.host = tg__strdup(o->redis_host ? o->redis_host : "127.0.0.1");
    f->rcfg.port = o->redis_port ? o->redis_port : 6379;
    f->rcfg.password = o->redis_password ? tg__strdup(o->redis_password) : NULL;
    f->rcfg.db = o->redis_db;
    f->rcfg.timeout_ms = o->redis_timeout_ms ? o->redis_timeout_ms : 2000;
    f->prefix = tg__strdup(o->prefix ? o->prefix : "tgbot:");
    f->nparts = o->partitions ? o->partitions : DEF_PARTITIONS;
    f->lease_ms = o->lease_ms ? o->lease_ms : DEF_LEASE_MS;
    f->batch = o->batch ? o->batch : DEF_BATCH;
    if (!f->rcfg.host || !f->prefix || (o->redis_password && !f->rcfg.password))
        return fail("fleet: out of memory"), false;
    if (f->nparts > MAX_PARTITIONS)
        return fail("fleet: partitions %u out of range 1..%d", f->nparts, MAX_PARTITIONS), false;
    if (strlen(f->prefix) > 64 || strpbrk(f->prefix, "{}"))
        return fail("fleet: prefix must be at most 64 bytes without '{' or '}'"), false;
    if (f->lease_ms < 100)
        return fail("fleet: lease_ms %u is below 100", f->lease_ms), false;
    if (f->batch > 1000)
        return fail("fleet: batch %u out of range 1..1000", f->batch), false;
    if (o->worker_id && !valid_id(o->worker_id))
        return fail("fleet: worker_id must be 1-64 of [A-Za-z0-9_.:-]"), false;
    if (o->worker_id)
        snprintf(f->worker_id, sizeof f->worker_id, "%s", o->worker_id);
    else
        make_worker_id(f);
    return true;
}

static bool make_conns(tg_fleet *f)
{
    pthread_mutex_init(&f->misc_mu, NULL);
    for (int i = 0; i < TG__FLEET_NPUB; i++) {
        pthread_mutex_init(&f->pub[i].mu, NULL);
        tg__jdoc_init(&f->pub[i].doc, NULL);
        if (!(f->pub[i].rc = tg__rconn_new(&f->rcfg)))
            return fail("fleet: out of memory"), false;
    }
    if (!(f->misc = tg__rconn_new(&f->rcfg)))
        return fail("fleet: out of memory"), false;
    if (tg__rconn_ping(f->misc) != 0)
        return fail("fleet: %s", tg__rconn_err(f->misc)), false;
    return true;
}

tg_fleet *tg_fleet_new_sized(const tg_fleet_options *opts, size_t opts_size)
{
    tg_fleet_options o;
    fleet_err[0] = '\0';
    if (!tg__sized_in(&o, sizeof o, opts, opts_size))
        return fail("fleet: options: " TG__SIZED_ERRMSG), NULL;
    tg__fleet_scripts_init();
    tg_fleet *f = tg__calloc(1, sizeof *f);
    if (!f)
        return fail("fleet: out of memory"), NULL;
    if (!copy_options(f, &o) || !make_conns(f)) {
        tg_fleet_free(f);
        return NULL;
    }
    return f;
}

void tg_fleet_free(tg_fleet *f)
{
    if (!f)
        return;
    for (int i = 0; i < TG__FLEET_NPUB; i++) {
        if (!f->pub[i].rc && !f->misc)
            break;
        tg__rconn_free(f->pub[i].rc);
        tg__jdoc_cleanup(&f->pub[i].doc);
        pthread_mutex_destroy(&f->pub[i].mu);
    }
    tg__rconn_free(f->misc);
    if (f->rcfg.password) {
        explicit_bzero(f->rcfg.password, strlen(f->rcfg.password));
        tg__free(f->rcfg.password);
    }
    tg__free(f->rcfg.host);
    tg__free(f->prefix);
    tg__free(f);
}

const char *tg_fleet_worker_id(const tg_fleet *f)
{
    return f->worker_id;
}

/* XADD the update to its stream on pc. */
static tg_status xadd(tg_fleet *f, struct tg__pubconn *pc, const tg__event_key *k, const char *json,
                      size_t len, char *err, size_t errcap)
{
    char key[TG__FLEET_KEY_MAX];
    unsigned part = tg_fleet_partition(f, k->ordered ? k->key : k->update_id);
    tg__fleet_key(f, part, "stream", key, sizeof key);
    const char *argv[] = {"XADD", key, "*", "u", json};
    size_t lens[] = {4, strlen(key), 1, 1, len};
    redisReply *r = tg__rconn_cmd(pc->rc, key, 5, argv, lens);
    if (r && r->type == REDIS_REPLY_STRING) {
        freeReplyObject(r);
        return TG_OK;
    }
    if (r)
        tg__rconn_fail(pc->rc, r, "XADD");
    snprintf(err, errcap, "update %lld: not published: %s", (long long)k->update_id,
             tg__rconn_err(pc->rc));
    return TG_ERR_TRANSPORT;
}

tg_status tg__fleet_publish(tg_fleet *f, const char *json, size_t len, char *err, size_t errcap)
{
    struct tg__pubconn *pc = &f->pub[atomic_fetch_add(&f->next_pub, 1) % TG__FLEET_NPUB];
    tg__event_key k;
    pthread_mutex_lock(&pc->mu);
    int prc = tg__event_key_parse(&pc->doc, json, len, &k, err, errcap);
    tg_status st = prc == -2 ? TG_ERR_NOMEM : TG_ERR_DECODE;
    if (prc == 0)
        st = xadd(f, pc, &k, json, len, err, errcap);
    pthread_mutex_unlock(&pc->mu);
    if (st == TG_OK)
        atomic_fetch_add(&f->st.published, 1);
    else if (st == TG_ERR_TRANSPORT)
        atomic_fetch_add(&f->st.publish_failed, 1);
    return st;
}

tg_status tg_fleet_publish(tg_fleet *f, const char *json, size_t len)
{
    if (!f || !json)
        return fail("fleet: publish: NULL argument"), TG_ERR_INVALID;
    char err[256];
    tg_status st = tg__fleet_publish(f, json, len, err, sizeof err);
    if (st != TG_OK)
        fail("fleet: %s", err);
    return st;
}

/* ---- idempotency ---- */

static void done_key(const tg_fleet *f, const char *scope, int64_t id, char *buf, size_t cap)
{
    snprintf(buf, cap, "%sdone:%.64s:%lld", f->prefix, scope ? scope : "", (long long)id);
}

tg_status tg_fleet_is_processed(tg_fleet *f, const char *scope, int64_t update_id, bool *yes)
{
    char key[TG__FLEET_KEY_MAX];
    *yes = false;
    done_key(f, scope, update_id, key, sizeof key);
    const char *argv[] = {"EXISTS", key};
    pthread_mutex_lock(&f->misc_mu);
    redisReply *r = tg__rconn_cmd(f->misc, key, 2, argv, NULL);
    tg_status st = r && r->type == REDIS_REPLY_INTEGER ? TG_OK : TG_ERR_TRANSPORT;
    if (st == TG_OK)
        *yes = r->integer > 0;
    else
        fail("fleet: EXISTS: %s", r ? r->str : tg__rconn_err(f->misc));
    pthread_mutex_unlock(&f->misc_mu);
    if (r)
        freeReplyObject(r);
    return st;
}

tg_status tg_fleet_mark_processed(tg_fleet *f, const char *scope, int64_t update_id,
                                  uint64_t ttl_ms)
{
    char key[TG__FLEET_KEY_MAX], ttl[24];
    done_key(f, scope, update_id, key, sizeof key);
    snprintf(ttl, sizeof ttl, "%llu", (unsigned long long)(ttl_ms ? ttl_ms : DEF_DONE_TTL));
    const char *argv[] = {"SET", key, "1", "PX", ttl};
    pthread_mutex_lock(&f->misc_mu);
    redisReply *r = tg__rconn_cmd(f->misc, key, 5, argv, NULL);
    tg_status st = r && r->type == REDIS_REPLY_STATUS ? TG_OK : TG_ERR_TRANSPORT;
    if (st != TG_OK)
        fail("fleet: SET: %s", r ? r->str : tg__rconn_err(f->misc));
    pthread_mutex_unlock(&f->misc_mu);
    if (r)
        freeReplyObject(r);
    return st;
}

void tg_fleet_get_stats_sized(tg_fleet *f, tg_fleet_stats *out, size_t out_size)
{
    tg_fleet_stats s = {
        .published = atomic_load(&f->st.published),
        .publish_failed = atomic_load(&f->st.publish_failed),
        .handled = atomic_load(&f->st.handled),
        .ack_failed = atomic_load(&f->st.ack_failed),
        .claimed = atomic_load(&f->st.claimed),
        .acquired = atomic_load(&f->st.acquired),
        .released = atomic_load(&f->st.released),
        .lost = atomic_load(&f->st.lost),
        .owned = atomic_load(&f->st.owned),
        .members = atomic_load(&f->st.members),
        .flood_checks = atomic_load(&f->st.flood_checks),
        .flood_fallbacks = atomic_load(&f->st.flood_fallbacks),
    };
    tg__sized_out(out, out_size, &s, sizeof s);
}
