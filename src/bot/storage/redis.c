/*
 * redis: storage in Redis through hiredis, so several bot processes (or machines) share
 * conversations and sessions.
 *
 * One connection guarded by a mutex: conversation traffic is one small GET and at most one
 * SET per update, far below what a single connection carries. After any failure the
 * connection is dropped and the next call reconnects (and re-authenticates). Values are
 * binary-safe (%b); expiry uses SET ... PX. Replies are read under core/rbound.h's bounds:
 * a server answering with a huge aggregate or bulk is refused before we allocate for it.
 *
 * The password is a secret: it is copied, wiped on free and never put in an error message.
 */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include "bot/storage/storage.h"
#include "core/alloc.h"
#include "core/rbound.h"
#include "core/log.h"
#include "core/sized.h"

struct redisstore {
    tg_storage base;
    pthread_mutex_t mu;
    redisContext *c;
    struct tg__rbound rb; /* what one reply may hold (core/rbound.h): attached at connect */
    char *host;
    char *password;
    char *prefix;
    uint16_t port;
    int db;
    uint32_t timeout_ms;
    char err[256];
};

static void drop(struct redisstore *r)
{
    if (r->c)
        redisFree(r->c);
    r->c = NULL;
}

/* Run a command whose reply must not be an error; NULL (and r->err) on failure. */
static redisReply *run(struct redisstore *r, const char *what, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = tg__rbound_vcmd(&r->rb, r->c, fmt, ap);
    va_end(ap);
    if (!rep) {
        snprintf(r->err, sizeof r->err, "redis %s:%u: %s: %s", r->host, r->port, what,
                 r->c->errstr[0] ? r->c->errstr : "connection lost");
        if (tg__rbound_why(&r->rb))
            tg__log(NULL, TG__LOG_WARN, "conversation storage: %s; reconnecting", r->err);
        drop(r);
        tg__storage_seterr("%s", r->err);
        return NULL;
    }
    if (rep->type == REDIS_REPLY_ERROR) {
        snprintf(r->err, sizeof r->err, "redis %s:%u: %s: %.*s", r->host, r->port, what,
                 (int)(rep->len > 160 ? 160 : rep->len), rep->str);
        tg__storage_seterr("%s", r->err);
        freeReplyObject(rep);
        return NULL;
    }
    return rep;
}

static bool connect_now(struct redisstore *r)
{
    struct timeval tv = {.tv_sec = r->timeout_ms / 1000,
                         .tv_usec = (suseconds_t)(r->timeout_ms % 1000) * 1000};
    tg__rbound_init(&r->rb, NULL);
    r->c = redisConnectWithTimeout(r->host, r->port, tv);
    if (!r->c || r->c->err) {
        snprintf(r->err, sizeof r->err, "redis %s:%u: connect: %s", r->host, r->port,
                 r->c ? r->c->errstr : "out of memory");
        tg__storage_seterr("%s", r->err);
        drop(r);
        return false;
    }
    tg__rbound_attach(&r->rb, r->c);
    redisSetTimeout(r->c, tv);
    redisReply *rep = NULL;
    if (r->password && !(rep = run(r, "AUTH", "AUTH %s", r->password)))
        goto fail;
    freeReplyObject(rep);
    rep = NULL;
    if (r->db && !(rep = run(r, "SELECT", "SELECT %d", r->db)))
        goto fail;
    freeReplyObject(rep);
    return true;
fail:
    drop(r);
    return false;
}

/* TG_ERR_TOO_BIG when the last command's reply crossed a bound (core/rbound.h), else st. */
static tg_status refused_or(const struct redisstore *r, tg_status st)
{
    return tg__rbound_why(&r->rb) ? TG_ERR_TOO_BIG : st;
}

static bool ensure(struct redisstore *r)
{
    return r->c || connect_now(r);
}

static tg_status rs_get(tg_storage *s, const char *key, void *buf, size_t cap, size_t *len,
                        bool *found)
{
    struct redisstore *r = (struct redisstore *)s;
    tg_status st = TG_ERR_TRANSPORT;
    *found = false;
    *len = 0;
    pthread_mutex_lock(&r->mu);
    redisReply *rep = ensure(r) ? run(r, "GET", "GET %s%s", r->prefix, key) : NULL;
    if (!rep) {
        st = refused_or(r, TG_ERR_TRANSPORT);
        goto out;
    }
    st = TG_OK;
    if (rep->type == REDIS_REPLY_STRING) {
        *found = true;
        *len = rep->len;
        if (rep->len > cap)
            st = TG_ERR_TOO_BIG;
        else if (rep->len)
            memcpy(buf, rep->str, rep->len);
    } else if (rep->type != REDIS_REPLY_NIL) {
        snprintf(r->err, sizeof r->err, "redis GET: unexpected reply type %d", rep->type);
        st = TG_ERR_DECODE;
    }
    freeReplyObject(rep);
out:
    pthread_mutex_unlock(&r->mu);
    return st;
}

static tg_status rs_set(tg_storage *s, const char *key, const void *val, size_t len,
                        uint64_t ttl_ms)
{
    struct redisstore *r = (struct redisstore *)s;
    redisReply *rep = NULL;
    pthread_mutex_lock(&r->mu);
    if (ensure(r)) {
        if (ttl_ms)
            rep = run(r, "SET", "SET %s%s %b PX %llu", r->prefix, key, val, len,
                      (unsigned long long)ttl_ms);
        else
            rep = run(r, "SET", "SET %s%s %b", r->prefix, key, val, len);
    }
    tg_status st = rep ? TG_OK : refused_or(r, TG_ERR_TRANSPORT);
    pthread_mutex_unlock(&r->mu);
    freeReplyObject(rep);
    return st;
}

static tg_status rs_del(tg_storage *s, const char *key)
{
    struct redisstore *r = (struct redisstore *)s;
    pthread_mutex_lock(&r->mu);
    redisReply *rep = ensure(r) ? run(r, "DEL", "DEL %s%s", r->prefix, key) : NULL;
    tg_status st = rep ? TG_OK : refused_or(r, TG_ERR_TRANSPORT);
    pthread_mutex_unlock(&r->mu);
    freeReplyObject(rep);
    return st;
}

/* prefix* as a SCAN MATCH pattern: glob characters escaped. */
static char *match_pattern(const struct redisstore *r, const char *prefix)
{
    size_t n = strlen(r->prefix) + 2 * strlen(prefix) + 2;
    char *p = tg__malloc(n), *o = p;
    if (!p)
        return NULL;
    for (int part = 0; part < 2; part++)
        for (const char *s = part ? prefix : r->prefix; *s; s++) {
            if (strchr("*?[]\\", *s))
                *o++ = '\\';
            *o++ = *s;
        }
    *o++ = '*';
    *o = '\0';
    return p;
}

/* One SCAN batch's keys fetched with MGET and handed to fn; false when fn stopped. */
static bool scan_batch(struct redisstore *r, const redisReply *keys, tg_storage_scan_fn fn,
                       void *user, tg_status *st)
{
    if (keys->elements == 0)
        return true;
    size_t pl = strlen(r->prefix);
    for (size_t i = 0; i < keys->elements; i++)
        if (keys->element[i]->type != REDIS_REPLY_STRING || keys->element[i]->len < pl) {
            snprintf(r->err, sizeof r->err, "redis %s:%u: SCAN: a key that is not one of ours",
                     r->host, r->port);
            tg__storage_seterr("%s", r->err);
            *st = TG_ERR_DECODE;
            return false;
        }
    const char **argv = tg__malloc((keys->elements + 1) * sizeof *argv);
    size_t *argl = tg__malloc((keys->elements + 1) * sizeof *argl);
    bool go = argv && argl;
    *st = go ? TG_OK : TG_ERR_NOMEM;
    if (go) {
        argv[0] = "MGET";
        argl[0] = 4;
        for (size_t i = 0; i < keys->elements; i++) {
            argv[i + 1] = keys->element[i]->str;
            argl[i + 1] = keys->element[i]->len;
        }
    }
    redisReply *vals =
        go ? tg__rbound_argv(&r->rb, r->c, (int)keys->elements + 1, argv, argl) : NULL;
    if (go && (!vals || vals->type != REDIS_REPLY_ARRAY || vals->elements != keys->elements)) {
        snprintf(r->err, sizeof r->err, "redis %s:%u: MGET: %s", r->host, r->port,
                 vals ? "unexpected reply" : r->c->errstr);
        tg__storage_seterr("%s", r->err);
        if (!vals) {
            if (tg__rbound_why(&r->rb))
                tg__log(NULL, TG__LOG_WARN, "conversation storage: %s; reconnecting", r->err);
            drop(r);
        }
        *st = vals ? TG_ERR_TRANSPORT : refused_or(r, TG_ERR_TRANSPORT);
        go = false;
    }
    for (size_t i = 0; go && i < keys->elements; i++)
        if (vals->element[i]->type == REDIS_REPLY_STRING) /* NIL: expired since SCAN */
            go = fn(user, keys->element[i]->str + pl, vals->element[i]->str, vals->element[i]->len);
    freeReplyObject(vals);
    tg__free(argv);
    tg__free(argl);
    return go && *st == TG_OK;
}

static tg_status rs_scan(tg_storage *s, const char *prefix, tg_storage_scan_fn fn, void *user)
{
    struct redisstore *r = (struct redisstore *)s;
    char *pat = match_pattern(r, prefix);
    if (!pat)
        return TG_ERR_NOMEM;
    tg_status st = TG_OK;
    char cursor[32] = "0";
    pthread_mutex_lock(&r->mu);
    if (!ensure(r))
        st = TG_ERR_TRANSPORT;
    /* SCAN may return a key twice: a caller that cares (the job queue) keys its own map. */
    for (int guard = 0; st == TG_OK && guard < 1000000; guard++) {
        redisReply *rep = run(r, "SCAN", "SCAN %s MATCH %s COUNT 512", cursor, pat);
        if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
            rep->element[0]->type != REDIS_REPLY_STRING ||
            rep->element[1]->type != REDIS_REPLY_ARRAY) {
            st = rep ? TG_ERR_DECODE : refused_or(r, TG_ERR_TRANSPORT);
            freeReplyObject(rep);
            break;
        }
        snprintf(cursor, sizeof cursor, "%s", rep->element[0]->str);
        bool go = scan_batch(r, rep->element[1], fn, user, &st);
        freeReplyObject(rep);
        if (!go || strcmp(cursor, "0") == 0)
            break;
    }
    pthread_mutex_unlock(&r->mu);
    tg__free(pat);
    return st;
}

static void rs_free(tg_storage *s)
{
    struct redisstore *r = (struct redisstore *)s;
    drop(r);
    if (r->password) {
        explicit_bzero(r->password, strlen(r->password));
        tg__free(r->password);
    }
    tg__free(r->host);
    tg__free(r->prefix);
    pthread_mutex_destroy(&r->mu);
    tg__free(r);
}

static const tg_storage_ops redis_ops = {
    .get = rs_get, .set = rs_set, .del = rs_del, .free = rs_free, .scan = rs_scan};

tg_storage *tg_storage_redis_new_sized(const tg_redis_options *opts, size_t opts_size)
{
    tg_redis_options copy;
    const tg_redis_options *o = &copy;
    if (!tg__sized_in(&copy, sizeof copy, opts, opts_size)) {
        tg__storage_seterr("redis: options: " TG__SIZED_ERRMSG);
        return NULL;
    }
    struct redisstore *r = tg__calloc(1, sizeof *r);
    if (!r) {
        tg__storage_seterr("redis: out of memory");
        return NULL;
    }
    r->base.ops = &redis_ops;
    r->host = tg__strdup(o->host ? o->host : "127.0.0.1");
    r->prefix = tg__strdup(o->prefix ? o->prefix : "tgbot:");
    r->password = o->password ? tg__strdup(o->password) : NULL;
    r->port = o->port ? o->port : 6379;
    r->db = o->db;
    r->timeout_ms = o->timeout_ms ? o->timeout_ms : 2000;
    pthread_mutex_init(&r->mu, NULL);
    if (!r->host || !r->prefix || (o->password && !r->password)) {
        tg__storage_seterr("redis: out of memory");
        rs_free(&r->base);
        return NULL;
    }
    if (!connect_now(r)) {
        tg__storage_seterr("%s", r->err);
        rs_free(&r->base);
        return NULL;
    }
    return &r->base;
}
