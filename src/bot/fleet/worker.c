/*
 * worker: a fleet worker. See tgbot/fleet.h and docs/fleet.md ("Workers").
 *
 * The manager (the thread calling tg_fleet_run_worker) ticks every lease_ms / 4: it
 * heartbeats in the members set (which also drops members whose heartbeat expired), decides
 * which partitions this worker should own (members sorted by id; partition i belongs to
 * member i % n), renews the leases it holds, gives back those it should not hold and
 * acquires those it should. Leases are the safety, the assignment only the liveness: two
 * workers with different views of the members can both want a partition, but only one holds
 * its lease.
 *
 * Each owned partition has a reader thread: it claims the partition's pending entries
 * (XAUTOCLAIM from id 0: whatever an earlier owner read and did not acknowledge), feeds them
 * to the dispatcher in id order, then reads new entries (XREADGROUP >). A command that fails
 * may have run on Redis with only its answer lost (entries now pending in our name that >
 * never returns), so after a failure the reader claims again, from the entry after the last
 * one it took, before it reads on. Every entry fed counts as in flight until the
 * dispatcher's done callback, which acknowledges it (XACK and XDEL in one script) once its
 * handler finished. A reader feeds only while its lease is valid by the local clock (renewed
 * at t0 means valid until t0 + lease_ms - margin), and when asked to stop it stops feeding,
 * waits for its entries in flight and only then releases the lease, so the next owner never
 * overlaps with it.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bot/dispatch/dispatch_int.h"
#include "bot/fleet/fleet_int.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "core/sized.h"

#define MAX_MEMBERS 256
#define MAX_RETRY   1024 /* failed acknowledgements kept per partition for a retry */

struct tg__rscript tg__fleet_lease_script, tg__fleet_renew_script, tg__fleet_release_script,
    tg__fleet_heartbeat_script, tg__fleet_ack_script;

/* Acquire: 1 taken, 2 already ours (renewed), 0 held by another. */
static const char lease_lua[] = "local cur = redis.call('GET', KEYS[1])\n"
                                "if cur == ARGV[1] then\n"
                                "  redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 2\n"
                                "end\n"
                                "if cur then return 0 end\n"
                                "redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])\n"
                                "return 1\n";
static const char renew_lua[] = "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
                                "  return redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
                                "end\n"
                                "return 0\n";
static const char release_lua[] = "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
                                  "  return redis.call('DEL', KEYS[1])\n"
                                  "end\n"
                                  "return 0\n";
/* ARGV: id, ttl ms, "1" join / "0" leave. Returns the live members. Server time, so the
 * clocks of the workers' machines do not matter. */
static const char heartbeat_lua[] =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)\n"
    "if ARGV[3] == '1' then\n"
    "  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])\n"
    "else\n"
    "  redis.call('ZREM', KEYS[1], ARGV[1])\n"
    "end\n"
    "return redis.call('ZRANGE', KEYS[1], 0, -1)\n";
static const char ack_lua[] = "redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])\n"
                              "return redis.call('XDEL', KEYS[1], ARGV[2])\n";

static pthread_once_t scripts_once = PTHREAD_ONCE_INIT;

static void scripts_make(void)
{
    tg__rscript_init(&tg__fleet_lease_script, lease_lua);
    tg__rscript_init(&tg__fleet_renew_script, renew_lua);
    tg__rscript_init(&tg__fleet_release_script, release_lua);
    tg__rscript_init(&tg__fleet_heartbeat_script, heartbeat_lua);
    tg__rscript_init(&tg__fleet_ack_script, ack_lua);
}

void tg__fleet_scripts_init(void)
{
    pthread_once(&scripts_once, scripts_make);
}

struct worker;

struct part {
    struct worker *w;
    unsigned idx;
    char stream[TG__FLEET_KEY_MAX];
    char lease[TG__FLEET_KEY_MAX];
    bool running; /* manager's view: a reader thread exists (joined when exited) */
    pthread_t th;
    atomic_bool stop, lost, exited;
    atomic_ullong valid_until; /* tg__now_ms clock */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned inflight;
    char fed[TG__STREAM_ID_MAX]; /* reader's: the last entry it took ("" = none yet) */
    pthread_mutex_t ack_mu;      /* guards ack, retry, nretry */
    tg__rconn *ack;
    char (*retry)[TG__STREAM_ID_MAX];
    unsigned nretry;
};

struct worker {
    tg_fleet *f;
    tg_dispatcher *d;
    struct part *parts;
    tg__rconn *mgr;
    uint32_t tick_ms, block_ms, margin_ms;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a reader exited */
    bool warned;
};

struct entry {
    struct part *p;
    char id[TG__STREAM_ID_MAX];
};

/* ---- acknowledgements (dispatcher threads) ---- */

/* XACK + XDEL of one entry; p->ack_mu held. */
static bool ack_now(struct part *p, const char *id)
{
    const char *keys[] = {p->stream};
    const char *args[] = {TG__FLEET_GROUP, id};
    redisReply *r = tg__rconn_eval(p->ack, &tg__fleet_ack_script, 1, keys, 2, args, NULL);
    bool ok = r && r->type == REDIS_REPLY_INTEGER;
    if (r && !ok)
        tg__rconn_fail(p->ack, r, "acknowledge");
    else if (r)
        freeReplyObject(r);
    return ok;
}

/* Acknowledge after the handler; a failed one is kept and retried by the reader, so an
 * entry runs again only when the partition moves before Redis takes the retry. */
static void ack(struct part *p, const char *id)
{
    tg_fleet *f = p->w->f;
    pthread_mutex_lock(&p->ack_mu);
    bool ok = ack_now(p, id);
    if (!ok && p->nretry == 0)
        tg__dispatcher_log(p->w->d, TG__LOG_WARN,
                           "fleet: acknowledging entry %s of partition %u failed (retrying): %s",
                           id, p->idx, tg__rconn_err(p->ack));
    if (!ok && p->nretry < MAX_RETRY)
        memcpy(p->retry[p->nretry++], id, sizeof p->retry[0]);
    pthread_mutex_unlock(&p->ack_mu);
    atomic_fetch_add(ok ? &f->st.handled : &f->st.ack_failed, 1);
}

/* Retry failed acknowledgements, oldest first; stop at the first that fails again. */
static void flush_retries(struct part *p)
{
    pthread_mutex_lock(&p->ack_mu);
    unsigned done = 0;
    while (done < p->nretry && ack_now(p, p->retry[done]))
        done++;
    memmove(p->retry, p->retry + done, (p->nretry - done) * sizeof p->retry[0]);
    p->nretry -= done;
    pthread_mutex_unlock(&p->ack_mu);
    atomic_fetch_add(&p->w->f->st.handled, done);
}

static void on_done(void *user, int64_t update_id, bool handled)
{
    struct entry *e = user;
    struct part *p = e->p;
    (void)update_id;
    if (handled) /* dropped at shutdown: stays pending, the next owner runs it */
        ack(p, e->id);
    pthread_mutex_lock(&p->mu);
    p->inflight--;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    tg__free(e);
}

/* ---- reader thread ---- */

static bool keep_going(struct part *p)
{
    return !atomic_load(&p->stop) && tg__now_ms() < atomic_load(&p->valid_until);
}

/* The CLOCK_REALTIME time ms from now (what pthread_cond_timedwait takes). */
static struct timespec after_ms(uint32_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)(ms % 1000) * 1000000;
    ts.tv_sec += ms / 1000 + ts.tv_nsec / 1000000000;
    ts.tv_nsec %= 1000000000;
    return ts;
}

/* Wait on cv at most ms (a signal ends it early). */
static void timed_wait(pthread_mutex_t *mu, pthread_cond_t *cv, uint32_t ms)
{
    struct timespec ts = after_ms(ms);
    pthread_mutex_lock(mu);
    pthread_cond_timedwait(cv, mu, &ts);
    pthread_mutex_unlock(mu);
}

/* Entry id is fed (or dropped for good): a claim after an error resumes after it. 0. */
static int took(struct part *p, const char *id)
{
    snprintf(p->fed, sizeof p->fed, "%s", id);
    return 0;
}

/* Feed one stream entry ([id, [field, value, ...]]). 0, or -1 to stop feeding. */
static int feed_entry(struct part *p, const redisReply *ent)
{
    const char *id, *json;
    size_t len;
    int shape = tg__stream_entry(ent, &id, &json, &len);
    if (shape < 0)
        return 0; /* an entry deleted while pending: nothing to run */
    if (shape > 0) {
        tg__dispatcher_log(p->w->d, TG__LOG_WARN,
                           "fleet: entry %s of partition %u has no update; "
                           "dropped",
                           id, p->idx);
        ack(p, id);
        return took(p, id);
    }
    struct entry *e = tg__malloc(sizeof *e);
    if (!e)
        return -1;
    e->p = p;
    snprintf(e->id, sizeof e->id, "%s", id);
    pthread_mutex_lock(&p->mu);
    p->inflight++;
    pthread_mutex_unlock(&p->mu);
    char err[256];
    tg_status st = tg__dispatcher_feed(p->w->d, json, len, -1, on_done, e, NULL, err, sizeof err);
    if (st == TG_OK)
        return took(p, id);
    on_done(e, 0, false);
    if (st != TG_ERR_DECODE)
        return -1; /* stopping or out of memory: it stays pending */
    tg__dispatcher_log(p->w->d, TG__LOG_WARN, "fleet: entry %s of partition %u dropped: %s", id,
                       p->idx, err);
    ack(p, id);
    return took(p, id);
}

/* Feed an array of entries while the lease holds. 0 or -1. */
static int feed_entries(struct part *p, const redisReply *arr, uint64_t *count)
{
    for (size_t i = 0; arr && arr->type == REDIS_REPLY_ARRAY && i < arr->elements; i++) {
        if (!keep_going(p) || feed_entry(p, arr->element[i]) != 0)
            return -1;
        if (count)
            (*count)++;
    }
    return 0;
}

/* The group exists (created at id 0, so entries published before any worker count). */
static int ensure_group(struct part *p, tg__rconn *rc)
{
    const char *argv[] = {"XGROUP", "CREATE", p->stream, TG__FLEET_GROUP, "0", "MKSTREAM"};
    redisReply *r = tg__rconn_cmd(rc, p->stream, 6, argv, NULL);
    bool ok = r && (r->type == REDIS_REPLY_STATUS || tg__reply_is_err(r, "BUSYGROUP"));
    if (r && !ok)
        tg__rconn_fail(rc, r, "XGROUP CREATE");
    else if (r)
        freeReplyObject(r);
    return ok ? 0 : -1;
}

/* Take over every pending entry of the partition after the last one this reader took (all
 * of them for a new reader), in id order. 0 or -1. */
static int claim_pending(struct part *p, tg__rconn *rc)
{
    char cursor[TG__STREAM_ID_MAX] = "0-0", next[TG__STREAM_ID_MAX], count[16];
    if (p->fed[0] && tg__stream_id_next(p->fed, cursor) != 0)
        memcpy(cursor, "0-0", 4);
    snprintf(count, sizeof count, "%u", p->w->f->batch);
    for (int round = 0; round < 100000; round++) {
        const char *argv[] = {"XAUTOCLAIM", p->stream, TG__FLEET_GROUP, p->w->f->worker_id,
                              "0",          cursor,    "COUNT",         count};
        redisReply *r = tg__rconn_cmd(rc, p->stream, 8, argv, NULL);
        const redisReply *entries;
        if (tg__xautoclaim(r, next, &entries) != 0) {
            if (r)
                tg__rconn_fail(rc, r, "XAUTOCLAIM");
            return -1;
        }
        uint64_t n = 0;
        int frc = feed_entries(p, entries, &n);
        atomic_fetch_add(&p->w->f->st.claimed, n);
        memcpy(cursor, next, sizeof cursor);
        freeReplyObject(r);
        if (frc != 0)
            return -1;
        if (strcmp(cursor, "0-0") == 0)
            return 0;
    }
    return 0;
}

/* One XREADGROUP. 0 (fed or nothing new), -1 error, -2 the group is gone. */
static int read_batch(struct part *p, tg__rconn *rc)
{
    char count[16], block[16];
    snprintf(count, sizeof count, "%u", p->w->f->batch);
    snprintf(block, sizeof block, "%u", p->w->block_ms);
    const char *argv[] = {"XREADGROUP", "GROUP", TG__FLEET_GROUP, p->w->f->worker_id, "COUNT",
                          count,        "BLOCK", block,           "STREAMS",          p->stream,
                          ">"};
    redisReply *r = tg__rconn_cmd(rc, p->stream, 11, argv, NULL);
    if (!r)
        return -1;
    int rc2 = 0;
    const redisReply *entries = tg__xread_entries(r);
    if (tg__reply_is_err(r, "NOGROUP"))
        rc2 = -2;
    else if (entries)
        rc2 = feed_entries(p, entries, NULL);
    else if (r->type != REDIS_REPLY_NIL)
        return tg__rconn_fail(rc, r, "XREADGROUP"), -1;
    freeReplyObject(r);
    return rc2;
}

static void wait_inflight(struct part *p)
{
    pthread_mutex_lock(&p->mu);
    while (p->inflight)
        pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

static void release(struct part *p, tg__rconn *rc)
{
    const char *keys[] = {p->lease};
    const char *args[] = {p->w->f->worker_id};
    redisReply *r = tg__rconn_eval(rc, &tg__fleet_release_script, 1, keys, 1, args, NULL);
    if (r)
        freeReplyObject(r);
    atomic_fetch_add(&p->w->f->st.released, 1);
}

static void warn_once(struct part *p, tg__rconn *rc, bool *warned)
{
    if (!*warned)
        tg__dispatcher_log(p->w->d, TG__LOG_WARN, "fleet: partition %u: %s; retrying", p->idx,
                           tg__rconn_err(rc));
    *warned = true;
}

/* At most batch entries of a partition in flight: what a takeover may run twice, and what a
 * stop waits for, stays small. */
static void wait_room(struct part *p)
{
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < 10000 && p->inflight >= p->w->f->batch && keep_going(p); i++) {
        struct timespec ts = after_ms(50);
        pthread_cond_timedwait(&p->cv, &p->mu, &ts);
    }
    pthread_mutex_unlock(&p->mu);
}

static void reader_loop(struct part *p, tg__rconn *rc)
{
    bool setup = true, warned = false;
    while (keep_going(p)) {
        flush_retries(p);
        wait_room(p);
        int r = setup ? ensure_group(p, rc) : read_batch(p, rc);
        if (r == 0 && setup)
            r = claim_pending(p, rc);
        if (r == 0) {
            setup = false;
            warned = false;
            continue;
        }
        /* The group is gone (-2), or a command failed (-1): Redis may have run it and lost
         * only its answer, so entries it gave us may sit pending in our name. Set up again:
         * the claim takes them back, from the entry after the last one taken. */
        setup = true;
        if (r == -2)
            continue;
        if (keep_going(p)) {
            warn_once(p, rc, &warned);
            timed_wait(&p->mu, &p->cv, 100);
        }
    }
}

static void *reader_main(void *arg)
{
    struct part *p = arg;
    tg__rconn *rc = tg__rconn_new(&p->w->f->rcfg);
    p->ack = tg__rconn_new(&p->w->f->rcfg);
    p->fed[0] = '\0';
    if (rc && p->ack)
        reader_loop(p, rc);
    wait_inflight(p);
    if (p->ack)
        flush_retries(p);
    if (rc && !atomic_load(&p->lost))
        release(p, rc);
    tg__rconn_free(rc);
    tg__rconn_free(p->ack);
    p->ack = NULL;
    pthread_mutex_lock(&p->w->mu);
    atomic_store(&p->exited, true);
    pthread_cond_broadcast(&p->w->cv);
    pthread_mutex_unlock(&p->w->mu);
    return NULL;
}

/* ---- manager ---- */

/* Run a lease script on p; returns its integer, or -1 when Redis did not answer. */
static long long lease_op(struct worker *w, struct part *p, const struct tg__rscript *s)
{
    char ms[16];
    snprintf(ms, sizeof ms, "%u", w->f->lease_ms);
    const char *keys[] = {p->lease};
    const char *args[] = {w->f->worker_id, ms};
    redisReply *r = tg__rconn_eval(w->mgr, s, 1, keys, 2, args, NULL);
    long long v = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r && v < 0)
        tg__rconn_fail(w->mgr, r, "lease");
    else if (r)
        freeReplyObject(r);
    return v;
}

static void start_reader(struct worker *w, struct part *p, uint64_t t0)
{
    atomic_store(&p->stop, false);
    atomic_store(&p->lost, false);
    atomic_store(&p->exited, false);
    atomic_store(&p->valid_until, t0 + w->f->lease_ms - w->margin_ms);
    if (pthread_create(&p->th, NULL, reader_main, p) != 0) {
        lease_op(w, p, &tg__fleet_release_script);
        return;
    }
    p->running = true;
    atomic_fetch_add(&w->f->st.acquired, 1);
    atomic_fetch_add(&w->f->st.owned, 1);
}

static void reap(struct worker *w, struct part *p)
{
    if (!p->running || !atomic_load(&p->exited))
        return;
    pthread_join(p->th, NULL);
    p->running = false;
    atomic_fetch_sub(&w->f->st.owned, 1);
}

/* Renew, give back or acquire partition p. */
static void tend(struct worker *w, struct part *p, bool desired)
{
    reap(w, p);
    uint64_t t0 = tg__now_ms();
    if (p->running && !atomic_load(&p->stop)) {
        long long v = lease_op(w, p, &tg__fleet_renew_script);
        if (v == 1) {
            atomic_store(&p->valid_until, t0 + w->f->lease_ms - w->margin_ms);
        } else if (v == 0) {
            tg__dispatcher_log(w->d, TG__LOG_WARN, "fleet: lost the lease of partition %u", p->idx);
            atomic_store(&p->lost, true);
            atomic_store(&p->stop, true);
            atomic_fetch_add(&w->f->st.lost, 1);
        }
        if (v >= 0 && !desired)
            atomic_store(&p->stop, true); /* the reader drains, then releases */
    } else if (p->running) {
        if (lease_op(w, p, &tg__fleet_renew_script) == 1) /* still draining: keep it */
            atomic_store(&p->valid_until, t0 + w->f->lease_ms - w->margin_ms);
    } else if (desired) {
        long long v = lease_op(w, p, &tg__fleet_lease_script);
        if (v == 1 || v == 2)
            start_reader(w, p, t0);
    }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Heartbeat; fills members (sorted, pointing into *rep). Count, or -1. */
static int heartbeat(struct worker *w, bool join, redisReply **rep, const char **members)
{
    char ttl[16], key[TG__FLEET_KEY_MAX];
    snprintf(ttl, sizeof ttl, "%u", w->f->lease_ms);
    snprintf(key, sizeof key, "%sworkers", w->f->prefix);
    const char *keys[] = {key};
    const char *args[] = {w->f->worker_id, ttl, join ? "1" : "0"};
    redisReply *r = tg__rconn_eval(w->mgr, &tg__fleet_heartbeat_script, 1, keys, 3, args, NULL);
    *rep = r;
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        if (r)
            tg__rconn_fail(w->mgr, r, "heartbeat");
        *rep = NULL;
        return -1;
    }
    int n = 0;
    for (size_t i = 0; i < r->elements && n < MAX_MEMBERS; i++)
        if (r->element[i]->type == REDIS_REPLY_STRING)
            members[n++] = r->element[i]->str;
    qsort(members, (size_t)n, sizeof *members, cmp_str);
    return n;
}

static void tick(struct worker *w)
{
    redisReply *rep;
    const char *members[MAX_MEMBERS];
    int n = heartbeat(w, true, &rep, members);
    if (n < 0) {
        if (!w->warned)
            tg__dispatcher_log(w->d, TG__LOG_WARN, "fleet: heartbeat failed: %s; retrying",
                               tg__rconn_err(w->mgr));
        w->warned = true;
        for (unsigned i = 0; i < w->f->nparts; i++)
            reap(w, &w->parts[i]);
        return;
    }
    w->warned = false;
    atomic_store(&w->f->st.members, (unsigned)n);
    for (unsigned i = 0; i < w->f->nparts; i++) {
        bool desired = n > 0 && strcmp(members[i % (unsigned)n], w->f->worker_id) == 0;
        tend(w, &w->parts[i], desired);
    }
    freeReplyObject(rep);
}

/* ---- lifecycle ---- */

static bool any_running(struct worker *w)
{
    for (unsigned i = 0; i < w->f->nparts; i++) {
        reap(w, &w->parts[i]);
        if (w->parts[i].running)
            return true;
    }
    return false;
}

/* Stop every reader: they drain within drain_ms (leases kept alive meanwhile), then the
 * dispatcher drops what is left (it stays pending) and the readers release their leases. */
static tg_status shut_down(struct worker *w, uint32_t drain_ms)
{
    for (unsigned i = 0; i < w->f->nparts; i++)
        atomic_store(&w->parts[i].stop, true);
    uint64_t deadline = tg__now_ms() + drain_ms;
    while (any_running(w) && tg__now_ms() < deadline) {
        for (unsigned i = 0; i < w->f->nparts; i++)
            tend(w, &w->parts[i], false);
        timed_wait(&w->mu, &w->cv, w->tick_ms); /* a reader's exit wakes it */
    }
    tg_status st = tg_dispatcher_drain(w->d, 0);
    for (unsigned i = 0; i < w->f->nparts; i++) {
        struct part *p = &w->parts[i];
        if (p->running) {
            pthread_join(p->th, NULL);
            p->running = false;
            atomic_fetch_sub(&w->f->st.owned, 1);
        }
    }
    redisReply *rep;
    const char *members[MAX_MEMBERS];
    if (heartbeat(w, false, &rep, members) >= 0)
        freeReplyObject(rep);
    return st;
}

static bool worker_init(struct worker *w, tg_fleet *f, tg_dispatcher *d)
{
    w->f = f;
    w->d = d;
    w->tick_ms = f->lease_ms / 4;
    w->margin_ms = f->lease_ms / 5;
    w->block_ms = f->lease_ms / 4 < 500 ? f->lease_ms / 4 : 500;
    if (w->block_ms * 2 > f->rcfg.timeout_ms)
        w->block_ms = f->rcfg.timeout_ms / 2;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->mgr = tg__rconn_new(&f->rcfg);
    w->parts = tg__calloc(f->nparts, sizeof *w->parts);
    if (!w->mgr || !w->parts)
        return false;
    for (unsigned i = 0; i < f->nparts; i++) {
        struct part *p = &w->parts[i];
        p->w = w;
        p->idx = i;
        tg__fleet_key(f, i, "stream", p->stream, sizeof p->stream);
        tg__fleet_key(f, i, "lease", p->lease, sizeof p->lease);
        pthread_mutex_init(&p->mu, NULL);
        pthread_cond_init(&p->cv, NULL);
        pthread_mutex_init(&p->ack_mu, NULL);
        if (!(p->retry = tg__calloc(MAX_RETRY, sizeof p->retry[0])))
            return false;
    }
    return true;
}

static void worker_cleanup(struct worker *w)
{
    for (unsigned i = 0; w->parts && i < w->f->nparts; i++) {
        pthread_mutex_destroy(&w->parts[i].mu);
        pthread_cond_destroy(&w->parts[i].cv);
        pthread_mutex_destroy(&w->parts[i].ack_mu);
        tg__free(w->parts[i].retry);
    }
    tg__free(w->parts);
    tg__rconn_free(w->mgr);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
}

tg_status tg_fleet_run_worker_sized(tg_fleet *f, tg_dispatcher *d,
                                    const tg_fleet_worker_options *opts, size_t opts_size)
{
    tg_fleet_worker_options o;
    if (!f || !d)
        return TG_ERR_INVALID;
    if (!tg__sized_in(&o, sizeof o, opts, opts_size)) {
        tg__dispatcher_seterr(d, "fleet worker: options: %s", TG__SIZED_ERRMSG);
        return TG_ERR_INVALID;
    }
    bool was = false;
    if (!atomic_compare_exchange_strong(&f->running, &was, true)) {
        tg__dispatcher_seterr(d, "fleet: a worker loop already runs on this fleet");
        return TG_ERR_INVALID;
    }
    uint32_t drain_ms = o.drain_ms ? o.drain_ms : 10000;
    struct worker w = {0};
    tg_status st = TG_ERR_NOMEM;
    if (worker_init(&w, f, d)) {
        tg__dispatcher_log(d, TG__LOG_INFO, "fleet: worker %s joins (%u partitions)", f->worker_id,
                           f->nparts);
        while (!tg_dispatcher_stopping(d)) {
            tick(&w);
            tg__wait_stop(d, (int)w.tick_ms);
        }
        st = shut_down(&w, drain_ms);
    }
    worker_cleanup(&w);
    atomic_store(&f->running, false);
    return st;
}
