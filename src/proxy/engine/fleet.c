/*
 * fleet: Redis-backed anti-replay and limits for a fleet of tgproxy processes (fleet.h).
 *
 * Invariants: fw->ac is non-NULL exactly while hiredis holds a context for this worker
 * (ev_cleanup, which hiredis calls when it frees one, clears it); a pending slot is busy
 * from the command that uses it until hiredis calls its callback (a reply, or NULL when the
 * context goes away), whatever happened to its owner meanwhile; fw->slot[i].held is the
 * number of fleet connection slots this worker's connections of label slot i hold, and
 * Redis's field for this member equals it once every command sent so far has run.
 */
#include "proxy/engine/fleet.h"

#include "core/alloc.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/rbound.h"
#include "core/str.h"
#include "proxy/engine/antireplay.h"
#include "proxy/engine/generation.h"

#include <errno.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#define FLEET_TICK_MS  250  /* reconnects, stalls, heartbeats, quota flushes */
#define QUOTA_FLUSH_MS 1000 /* relayed bytes are sent to Redis this often */
#define KEY_MAX        FLEET_KEY_MAX

/* Every answer the proxy asks for is an integer, a status, nil or a short string (a script's
 * SHA-1, an error text): a server sending more is refused before we allocate for it. */
static const struct tg__rlimits fleet_reply_limits = {.max_elements = 16,
                                                      .max_depth = 2,
                                                      .max_bulk = 64 << 10,
                                                      .max_line = 16 << 10,
                                                      .max_reply = 256 << 10};

/*
 * The admission of a handshake, atomic in Redis. KEYS: 1 anti-replay key, 2 the secret's
 * connection hash, 3 the members, 4 the secret's address set, 5 its quota key. ARGV: 1 check
 * the replay key (0/1), 2 replay window (s), 3 member id, 4 max-connections, 5 max-unique-ips,
 * 6 client address ("" = unknown), 7 unique-ips-window (ms), 8 quota (bytes), 9 lease (ms).
 * Returns 0 admitted (a connection slot taken for the member when max-connections is set),
 * 1 replay, 2 max-connections, 3 max-unique-ips, 4 quota. Time is Redis's own.
 */
static const char admit_lua[] =
    "if ARGV[1] == '1' and not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[2]) then\n"
    "  return 1\n"
    "end\n"
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "local quota = tonumber(ARGV[8])\n"
    "if quota > 0 and tonumber(redis.call('GET', KEYS[5]) or '0') >= quota then return 4 end\n"
    "local maxc = tonumber(ARGV[4])\n"
    "if maxc > 0 then\n"
    "  redis.call('ZADD', KEYS[3], now + tonumber(ARGV[9]), ARGV[3])\n"
    "  local f = redis.call('HGETALL', KEYS[2])\n"
    "  local n = 0\n"
    "  for i = 1, #f, 2 do\n"
    "    local s = redis.call('ZSCORE', KEYS[3], f[i])\n"
    "    if s and tonumber(s) > now then n = n + tonumber(f[i + 1])\n"
    "    else redis.call('HDEL', KEYS[2], f[i]) end\n"
    "  end\n"
    "  if n >= maxc then return 2 end\n"
    "end\n"
    "local maxi = tonumber(ARGV[5])\n"
    "if maxi > 0 and ARGV[6] ~= '' then\n"
    "  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)\n"
    "  if not redis.call('ZSCORE', KEYS[4], ARGV[6]) and redis.call('ZCARD', KEYS[4]) >= maxi "
    "then\n"
    "    return 3\n"
    "  end\n"
    "  redis.call('ZADD', KEYS[4], now + tonumber(ARGV[7]), ARGV[6])\n"
    "  redis.call('PEXPIRE', KEYS[4], ARGV[7])\n"
    "end\n"
    "if maxc > 0 then redis.call('HINCRBY', KEYS[2], ARGV[3], 1) end\n"
    "return 0\n";

/* A member's heartbeat. KEYS: 1 the members. ARGV: 1 member id, 2 lease (ms). Members whose
   lease ended are dropped (their hash fields stop counting at once, see admit_lua). */
static const char beat_lua[] =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)\n"
    "redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])\n"
    "return 0\n";

struct fleet {
    const struct config *cfg;
    char where[CONFIG_HOST_MAX + 16]; /* "127.0.0.1:6379" or "unix:/path", for logs */
    char proc[17];                    /* this process's random id (hex) */
    char admit_sha[41], beat_sha[41];
    uint32_t nworkers, nup; /* atomics */
    uint32_t next_id;       /* atomic: numbers the workers' member ids */
    int outage;             /* atomic: an outage was warned and has not ended */
    uint32_t qreset[GEN_LABELS_MAX]; /* atomics: per label slot, quota resets (fleet_quota_reset) */
};

/* A check in flight; the slot stays busy until hiredis answers its command. */
struct fleet_pending {
    struct loop_timer timer; /* the bound, while the owner waits */
    struct fleet_worker *fw;
    void *owner; /* NULL once answered or cancelled */
    fleet_done_fn cb;
    uint32_t slot; /* the secret's label slot */
    uint32_t next_free;
    bool busy;
    bool limited;    /* the command is admit_lua (else SET NX) */
    bool counts;     /* the command takes a connection slot in Redis when it admits */
    bool held_local; /* the owner was answered FLEET_LOCAL and holds a slot anyway */
};

enum aux_kind { AUX_PLAIN = 0, AUX_READY = 1, AUX_QUOTA = 2 };

/* What a worker keeps per secret label (generation.h slots, stable for the process's life). */
struct fleet_slot {
    const char *label; /* NULL until first used; the registry's copy (gen_labels_name) */
    uint32_t held;     /* fleet connection slots this worker's connections hold */
    bool counts;       /* max-connections was set at the last check: resyncs write held */
    uint64_t quota;    /* the quota and period at the last charge */
    uint32_t reset_s;
    uint64_t qdelta; /* bytes charged and not yet sent to Redis */
    int64_t qspent;  /* the period Redis said is used up; -1 = none */
    uint32_t qreset; /* the fleet's qreset[] this slot has applied */
};

struct fleet_worker {
    struct fleet *f;
    struct loop *loop;
    struct stats *st;
    redisAsyncContext *ac;
    struct tg__rbound rb; /* what one reply may hold; attached to each new ac */
    struct loop_io io;
    unsigned mask;
    bool up, was_up, closing, reset;
    uint64_t conn_ms, progress_ms, retry_ms, backoff_ms, beat_ms, flush_ms;
    uint32_t outstanding; /* commands sent and not yet answered */
    struct loop_tq tq_bound, tq_tick;
    struct loop_timer tick;
    struct fleet_pending pend[FLEET_MAX_PENDING];
    uint32_t free_head;
    struct fleet_slot *slot; /* GEN_LABELS_MAX: per secret label */
    char member[40];
    tg__ratelimit rl;
};

const char *fleet_verdict_name(enum fleet_verdict v)
{
    switch (v) {
    case FLEET_OK:
        return "admitted by the fleet";
    case FLEET_REPLAY:
        return "replayed (seen by the fleet)";
    case FLEET_CONNECTIONS:
        return "fleet max-connections reached";
    case FLEET_UNIQUE_IPS:
        return "fleet max-unique-ips reached";
    case FLEET_QUOTA:
        return "fleet quota used up";
    case FLEET_LOCAL:
        return "decided locally";
    case FLEET_PENDING:
        return "pending";
    }
    return "?";
}

static void sha1_hex(const char *src, char out[41])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    out[0] = '\0';
    if (EVP_Digest(src, strlen(src), md, &n, EVP_sha1(), NULL) != 1 || n != 20)
        return;
    for (unsigned i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

struct fleet *fleet_new(const struct config *cfg)
{
    struct fleet *f = tg__calloc(1, sizeof *f);
    uint8_t rnd[8];
    if (!f || getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        goto fail;
    f->cfg = cfg;
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(f->proc + 2 * i, 3, "%02x", rnd[i]);
    if (cfg->fleet.unix_socket)
        snprintf(f->where, sizeof f->where, "unix:%s", cfg->fleet.host);
    else
        snprintf(f->where, sizeof f->where, strchr(cfg->fleet.host, ':') ? "[%s]:%u" : "%s:%u",
                 cfg->fleet.host, (unsigned)cfg->fleet.port);
    sha1_hex(admit_lua, f->admit_sha);
    sha1_hex(beat_lua, f->beat_sha);
    if (!f->admit_sha[0] || !f->beat_sha[0])
        goto fail;
    return f;
fail:
    fleet_free(f);
    return NULL;
}

void fleet_free(struct fleet *f)
{
    if (!f)
        return;
    tg__free(f);
}

/* ---- keys ---- */

static size_t key_label(const struct fleet *f, char *out, const char *label, const char *what)
{
    int n = snprintf(out, KEY_MAX, "%s{%s}:%s", f->cfg->fleet.prefix, label, what);
    return n > 0 && n < KEY_MAX ? (size_t)n : 0;
}

/* The period now falls in: Unix time / reset (aligned for every process), 0 = never resets. */
static int64_t quota_period(uint32_t reset_s)
{
    return reset_s ? tg__wall_s() / reset_s : 0;
}

size_t fleet_quota_key(const struct config *cfg, const char *label, uint32_t reset_s,
                       char out[FLEET_KEY_MAX])
{
    int n = snprintf(out, FLEET_KEY_MAX, "%s{%s}:q:%" PRId64, cfg->fleet.prefix, label,
                     quota_period(reset_s));
    return n > 0 && n < FLEET_KEY_MAX ? (size_t)n : 0;
}

static size_t key_quota(const struct fleet *f, char *out, const char *label, uint32_t reset_s)
{
    return fleet_quota_key(f->cfg, label, reset_s, out);
}

void fleet_quota_reset(struct fleet *f, uint32_t slot)
{
    if (f && slot < GEN_LABELS_MAX)
        __atomic_add_fetch(&f->qreset[slot], 1, __ATOMIC_RELEASE);
}

static bool limited(const struct config_limits *l)
{
    return l->max_connections || l->max_unique_ips || l->quota;
}

/* ---- the loop adapter: hiredis asks for interest, the loop calls back ---- */

static void on_io(struct loop *l, struct loop_io *io, unsigned events);
static void reset_conn(struct fleet_worker *fw, const char *why);

static void ev_update(struct fleet_worker *fw)
{
    if (!fw->ac)
        return;
    if (fw->io.fd < 0) {
        if (loop_io_add(fw->loop, &fw->io, fw->ac->c.fd, fw->mask, on_io) < 0)
            fw->reset = true; /* the tick drops the connection */
        return;
    }
    if (loop_io_set(fw->loop, &fw->io, fw->mask) < 0)
        fw->reset = true;
}

static void ev_add_read(void *p)
{
    struct fleet_worker *fw = p;
    fw->mask |= LOOP_READ;
    ev_update(fw);
}

static void ev_del_read(void *p)
{
    struct fleet_worker *fw = p;
    fw->mask &= ~(unsigned)LOOP_READ;
    ev_update(fw);
}

static void ev_add_write(void *p)
{
    struct fleet_worker *fw = p;
    fw->mask |= LOOP_WRITE;
    ev_update(fw);
}

static void ev_del_write(void *p)
{
    struct fleet_worker *fw = p;
    fw->mask &= ~(unsigned)LOOP_WRITE;
    ev_update(fw);
}

static void mark_down(struct fleet_worker *fw, const char *why);

/* Why the connection went: the bound a reply crossed (hiredis itself says "Out of memory"
 * for those, or nothing), else fallback. buf: 160 bytes. */
static const char *down_why(const struct fleet_worker *fw, char *buf, const char *fallback)
{
    if (!tg__rbound_why(&fw->rb))
        return fallback;
    snprintf(buf, 160, "reply refused: %s", tg__rbound_errstr(&fw->rb, "?"));
    return buf;
}

/* hiredis frees the context (after answering every pending callback with NULL). */
static void ev_cleanup(void *p)
{
    struct fleet_worker *fw = p;
    char why[160];
    loop_io_del(fw->loop, &fw->io);
    fw->mask = 0;
    fw->ac = NULL;
    fw->outstanding = 0;
    mark_down(fw, down_why(fw, why, "connection closed"));
}

static void on_io(struct loop *l, struct loop_io *io, unsigned events)
{
    (void)l;
    struct fleet_worker *fw =
        (struct fleet_worker *)(void *)((char *)io - offsetof(struct fleet_worker, io));
    if (fw->ac && (events & (LOOP_READ | LOOP_ERROR))) {
        redisAsyncHandleRead(fw->ac);
        char why[160];
        if (fw->ac && tg__rbound_check_pending(&fw->rb, &fw->ac->c) != 0)
            reset_conn(fw, down_why(fw, why, "?")); /* the loop called us, not hiredis */
    }
    if (fw->ac && (events & LOOP_WRITE))
        redisAsyncHandleWrite(fw->ac);
}

/* ---- up and down ---- */

static void mark_down(struct fleet_worker *fw, const char *why)
{
    struct fleet *f = fw->f;
    uint64_t now = fw->loop->now_ms;
    if (fw->up) {
        fw->up = false;
        stats_sub(fw->st, fleet_up, 1);
        __atomic_sub_fetch(&f->nup, 1, __ATOMIC_RELAXED);
    }
    if (fw->closing)
        return;
    if (!__atomic_exchange_n(&f->outage, 1, __ATOMIC_ACQ_REL))
        tg__log(NULL, TG__LOG_WARN,
                "fleet: redis %s: %s; handshakes are checked on local state only (anti-replay "
                "and limits of this process) until it is back",
                f->where, why);
    if (fw->retry_ms <= now) {
        fw->retry_ms = now + fw->backoff_ms;
        fw->backoff_ms =
            fw->backoff_ms * 2 > FLEET_BACKOFF_MAX_MS ? FLEET_BACKOFF_MAX_MS : fw->backoff_ms * 2;
    }
}

static void mark_up(struct fleet_worker *fw)
{
    struct fleet *f = fw->f;
    if (fw->up)
        return;
    fw->up = fw->was_up = true;
    fw->backoff_ms = FLEET_BACKOFF_MIN_MS;
    stats_add(fw->st, fleet_up, 1);
    uint32_t n = __atomic_add_fetch(&f->nup, 1, __ATOMIC_RELAXED);
    if (n >= __atomic_load_n(&f->nworkers, __ATOMIC_RELAXED) &&
        __atomic_exchange_n(&f->outage, 0, __ATOMIC_ACQ_REL))
        tg__log(NULL, TG__LOG_INFO, "fleet: redis %s is back; checks are shared again", f->where);
}

/* ---- commands ---- */

static void on_aux(redisAsyncContext *ac, void *r, void *priv);

/* Send argv; cb/priv as hiredis takes them. 0, or -1 when there is no connection. */
static int send_cmd(struct fleet_worker *fw, redisCallbackFn *cb, void *priv, int argc,
                    const char **argv, const size_t *lens)
{
    if (!fw->ac || redisAsyncCommandArgv(fw->ac, cb, priv, argc, argv, lens) != REDIS_OK)
        return -1;
    if (fw->outstanding++ == 0)
        fw->progress_ms = fw->loop->now_ms;
    return 0;
}

static void *aux_priv(enum aux_kind k, uint32_t slot)
{
    return (void *)(uintptr_t)(((uintptr_t)slot << 2) | (uintptr_t)k);
}

static void send_aux(struct fleet_worker *fw, enum aux_kind k, uint32_t slot, int argc,
                     const char **argv, const size_t *lens)
{
    (void)send_cmd(fw, on_aux, aux_priv(k, slot), argc, argv, lens);
}

static void send_beat(struct fleet_worker *fw)
{
    char key[KEY_MAX], lease[24];
    snprintf(key, sizeof key, "%smembers", fw->f->cfg->fleet.prefix);
    snprintf(lease, sizeof lease, "%u", (unsigned)fw->f->cfg->fleet.lease_ms);
    const char *argv[] = {"EVALSHA", fw->f->beat_sha, "1", key, fw->member, lease};
    send_aux(fw, AUX_PLAIN, 0, 6, argv, NULL);
    fw->beat_ms = fw->loop->now_ms + fw->f->cfg->fleet.lease_ms / 3; /* three beats a lease */
}

/* Write this member's held connection counts as they are (after a reconnect). */
static void send_resync(struct fleet_worker *fw)
{
    for (uint32_t i = 0; i < GEN_LABELS_MAX; i++) {
        const struct fleet_slot *sl = &fw->slot[i];
        if (!sl->label || !(sl->counts || sl->held))
            continue;
        char key[KEY_MAX], num[16];
        key_label(fw->f, key, sl->label, "c");
        snprintf(num, sizeof num, "%u", sl->held);
        const char *argv[] = {"HSET", key, fw->member, num};
        send_aux(fw, AUX_PLAIN, i, 4, argv, NULL);
    }
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    struct fleet_worker *fw = ac->ev.data;
    if (status != REDIS_OK && fw && !fw->closing)
        mark_down(fw, ac->errstr[0] ? ac->errstr : "connect failed");
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    struct fleet_worker *fw = ac->ev.data;
    if (!fw || fw->closing)
        return;
    char why[160];
    mark_down(fw, down_why(fw, why, status == REDIS_OK ? "disconnected" : ac->errstr));
}

/* Open the connection and queue what a fresh one needs before any check: AUTH, scripts,
   the member's counts. The answer to the first command marks the worker up. */
static void start_connect(struct fleet_worker *fw)
{
    const struct config *cfg = fw->f->cfg;
    redisAsyncContext *ac = cfg->fleet.unix_socket
                                ? redisAsyncConnectUnix(cfg->fleet.host)
                                : redisAsyncConnect(cfg->fleet.host, cfg->fleet.port);
    fw->conn_ms = fw->loop->now_ms;
    fw->retry_ms = 0;
    if (!ac || ac->err) {
        mark_down(fw, ac && ac->errstr[0] ? ac->errstr : "out of memory");
        if (ac)
            redisAsyncFree(ac);
        return;
    }
    fw->ac = ac;
    tg__rbound_init(&fw->rb, &fleet_reply_limits);
    tg__rbound_attach_async(&fw->rb, ac);
    fw->io.fd = -1;
    ac->ev.data = fw;
    ac->ev.addRead = ev_add_read;
    ac->ev.delRead = ev_del_read;
    ac->ev.addWrite = ev_add_write;
    ac->ev.delWrite = ev_del_write;
    ac->ev.cleanup = ev_cleanup;
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    if (cfg->fleet.password[0]) {
        const char *a3[] = {"AUTH", cfg->fleet.user, cfg->fleet.password};
        const char *a2[] = {"AUTH", cfg->fleet.password};
        if (cfg->fleet.user[0])
            send_aux(fw, AUX_READY, 0, 3, a3, NULL);
        else
            send_aux(fw, AUX_READY, 0, 2, a2, NULL);
    } else {
        const char *argv[] = {"PING"};
        send_aux(fw, AUX_READY, 0, 1, argv, NULL);
    }
    const char *la[] = {"SCRIPT", "LOAD", admit_lua};
    const char *lb[] = {"SCRIPT", "LOAD", beat_lua};
    send_aux(fw, AUX_PLAIN, 0, 3, la, NULL);
    send_aux(fw, AUX_PLAIN, 0, 3, lb, NULL);
    send_beat(fw);
    send_resync(fw);
}

/* Drop the connection (from the tick, never inside a hiredis callback). */
static void reset_conn(struct fleet_worker *fw, const char *why)
{
    fw->reset = false;
    if (fw->ac) {
        mark_down(fw, why);
        redisAsyncFree(fw->ac); /* pending callbacks run with NULL; ev_cleanup clears ac */
    }
}

static bool reply_err(const redisReply *r)
{
    return !r || r->type == REDIS_REPLY_ERROR;
}

static void log_reply_err(struct fleet_worker *fw, const char *what, const redisReply *r)
{
    if (r && r->type == REDIS_REPLY_ERROR && tg__ratelimit_allow(&fw->rl, fw->loop->now_ms))
        tg__log(NULL, TG__LOG_WARN, "fleet: redis %s: %s: %.*s", fw->f->where, what,
                (int)(r->len > 200 ? 200 : r->len), r->str);
}

static void on_aux(redisAsyncContext *ac, void *rp, void *priv)
{
    struct fleet_worker *fw = ac->ev.data;
    const redisReply *r = rp;
    uintptr_t v = (uintptr_t)priv;
    enum aux_kind k = (enum aux_kind)(v & 3);
    uint32_t slot = (uint32_t)(v >> 2);
    if (!fw || fw->closing)
        return;
    if (fw->outstanding)
        fw->outstanding--;
    fw->progress_ms = fw->loop->now_ms;
    if (!r)
        return;
    if (reply_err(r)) {
        log_reply_err(fw, k == AUX_READY ? "first command (AUTH or PING)" : "command", r);
        if (k == AUX_READY)
            fw->reset = true;
        return;
    }
    if (k == AUX_READY)
        mark_up(fw);
    else if (k == AUX_QUOTA && r->type == REDIS_REPLY_INTEGER && slot < GEN_LABELS_MAX &&
             fw->slot[slot].quota) /* Redis's count decides, either way (a reset lowers it) */
        fw->slot[slot].qspent = (uint64_t)r->integer >= fw->slot[slot].quota
                                    ? quota_period(fw->slot[slot].reset_s)
                                    : -1;
}

/* ---- checks ---- */

static void pending_put(struct fleet_worker *fw, struct fleet_pending *p)
{
    loop_timer_stop(&p->timer);
    p->busy = false;
    p->owner = NULL;
    p->next_free = fw->free_head;
    fw->free_head = (uint32_t)(p - fw->pend);
}

/* Tell the owner (at most once) and count what the answer means for held slots. */
static void answer(struct fleet_worker *fw, struct fleet_pending *p, enum fleet_verdict v)
{
    void *owner = p->owner;
    fleet_done_fn cb = p->cb;
    loop_timer_stop(&p->timer);
    if (!owner)
        return;
    p->owner = NULL;
    if (v == FLEET_LOCAL) {
        stats_add(fw->st, fleet_fallbacks, 1);
        p->held_local = p->counts;
    } else {
        stats_add(fw->st, fleet_checks, 1);
        if (v == FLEET_REPLAY)
            stats_add(fw->st, fleet_replays, 1);
    }
    if ((v == FLEET_OK || v == FLEET_LOCAL) && p->counts)
        fw->slot[p->slot].held++;
    cb(owner, v);
}

/* Redis took a slot for a check whose owner holds none (cancelled), or did not take one for
   an owner that holds one (answered locally): make Redis's count follow ours. */
static void fix_count(struct fleet_worker *fw, uint32_t slot, int delta)
{
    char key[KEY_MAX];
    key_label(fw->f, key, fw->slot[slot].label, "c");
    const char *argv[] = {"HINCRBY", key, fw->member, delta > 0 ? "1" : "-1"};
    send_aux(fw, AUX_PLAIN, slot, 4, argv, NULL);
}

static enum fleet_verdict verdict_of(const redisReply *r, bool script)
{
    if (!script) /* SET NX: OK when new, nil when the key was there */
        return r->type == REDIS_REPLY_NIL ? FLEET_REPLAY : FLEET_OK;
    if (r->type != REDIS_REPLY_INTEGER || r->integer < 0 || r->integer > 4)
        return FLEET_LOCAL;
    static const enum fleet_verdict v[] = {FLEET_OK, FLEET_REPLAY, FLEET_CONNECTIONS,
                                           FLEET_UNIQUE_IPS, FLEET_QUOTA};
    return v[r->integer];
}

static void on_check(redisAsyncContext *ac, void *rp, void *priv)
{
    (void)ac;
    struct fleet_pending *p = priv;
    struct fleet_worker *fw = p->fw;
    const redisReply *r = rp;
    if (fw->outstanding)
        fw->outstanding--;
    fw->progress_ms = fw->loop->now_ms;
    if (fw->closing) {
        pending_put(fw, p);
        return;
    }
    enum fleet_verdict v = reply_err(r) ? FLEET_LOCAL : verdict_of(r, p->limited);
    if (r && r->type == REDIS_REPLY_ERROR) {
        log_reply_err(fw, "check", r);
        if (strncmp(r->str, "NOSCRIPT", 8) == 0)
            fw->reset = true; /* scripts flushed: the reconnect loads them again */
    }
    /* Redis took a slot only for an admitting script; NULL (the connection went away) is
       left to the resync after the reconnect */
    bool took = p->counts && v == FLEET_OK;
    bool holds = p->owner ? p->counts && (v == FLEET_OK || v == FLEET_LOCAL) : p->held_local;
    if (r && p->counts && took != holds)
        fix_count(fw, p->slot, holds ? +1 : -1);
    answer(fw, p, v);
    pending_put(fw, p);
}

static void on_bound(struct loop *l, struct loop_timer *t)
{
    (void)l;
    struct fleet_pending *p = (struct fleet_pending *)(void *)t;
    answer(p->fw, p, FLEET_LOCAL); /* the slot stays busy until Redis answers */
}

/* Secrets without a label slot (the registry was full) are not limited fleet-wide. */
static bool limited_sec(const struct fleet_secret *s)
{
    return s->slot < GEN_LABELS_MAX && s->label && limited(s->lim);
}

bool fleet_wanted(const struct fleet_worker *fw, const struct fleet_secret *s, bool replay)
{
    return fw && (replay || limited_sec(s));
}

/* The command for q into argv (keys built in the caller's buffers). */
static int build_admit(struct fleet_worker *fw, const struct fleet_query *q, char keys[5][KEY_MAX],
                       size_t klen[5], char args[9][48], const char **argv, size_t *lens)
{
    const struct config_limits *lim = q->sec.lim;
    klen[1] = key_label(fw->f, keys[1], q->sec.label, "c");
    snprintf(keys[2], KEY_MAX, "%smembers", fw->f->cfg->fleet.prefix);
    klen[2] = strlen(keys[2]);
    klen[3] = key_label(fw->f, keys[3], q->sec.label, "ip");
    klen[4] = key_quota(fw->f, keys[4], q->sec.label, lim->quota_reset_s);
    snprintf(args[0], 48, "%d", q->key ? 1 : 0);
    snprintf(args[1], 48, "%u", (unsigned)fw->f->cfg->antireplay.window_s);
    snprintf(args[3], 48, "%u", (unsigned)lim->max_connections);
    snprintf(args[4], 48, "%u", (unsigned)lim->max_unique_ips);
    snprintf(args[6], 48, "%llu",
             (unsigned long long)(lim->unique_ips_window_s ? lim->unique_ips_window_s : 3600) *
                 1000ULL);
    snprintf(args[7], 48, "%llu", (unsigned long long)lim->quota);
    snprintf(args[8], 48, "%u", (unsigned)fw->f->cfg->fleet.lease_ms);
    int n = 0;
    argv[n] = "EVALSHA", lens[n++] = 7;
    argv[n] = fw->f->admit_sha, lens[n++] = 40;
    argv[n] = "5", lens[n++] = 1;
    for (int i = 0; i < 5; i++)
        argv[n] = keys[i], lens[n++] = klen[i];
    for (int i = 0; i < 9; i++) {
        if (i == 2)
            argv[n] = fw->member, lens[n++] = strlen(fw->member);
        else if (i == 5)
            argv[n] = q->addr && lim->max_unique_ips ? (const char *)q->addr : "",
            lens[n++] = q->addr && lim->max_unique_ips ? 16 : 0;
        else
            argv[n] = args[i], lens[n++] = strlen(args[i]);
    }
    return n;
}

static size_t replay_key(const struct fleet *f, const struct fleet_query *q, char *out)
{
    size_t pl = strlen(f->cfg->fleet.prefix), kl = q->key_len > 64 ? 64 : q->key_len;
    memcpy(out, f->cfg->fleet.prefix, pl);
    memcpy(out + pl, "r:", 2);
    out[pl + 2] = q->kind == ANTIREPLAY_TLS ? 't' : 'o';
    memcpy(out + pl + 3, q->key, kl);
    return pl + 3 + kl;
}

enum fleet_verdict fleet_check(struct fleet_worker *fw, const struct fleet_query *q, void *owner,
                               fleet_done_fn cb, uint32_t *ticket)
{
    *ticket = FLEET_NONE;
    bool lim = limited_sec(&q->sec), counts = lim && q->sec.lim->max_connections;
    if (lim) {
        fw->slot[q->sec.slot].label = q->sec.label;
        fw->slot[q->sec.slot].counts = counts;
    }
    if (!q->key && !lim)
        return FLEET_OK;
    if (!fw->up || fw->free_head == FLEET_NONE) {
        stats_add(fw->st, fleet_fallbacks, 1);
        if (counts)
            fw->slot[q->sec.slot].held++;
        return FLEET_LOCAL;
    }
    struct fleet_pending *p = &fw->pend[fw->free_head];
    char keys[5][KEY_MAX], args[9][48], window[16];
    size_t klen[5] = {0}, lens[20];
    const char *argv[20];
    int argc;
    klen[0] = q->key ? replay_key(fw->f, q, keys[0]) : 0;
    if (lim) {
        argc = build_admit(fw, q, keys, klen, args, argv, lens);
    } else {
        snprintf(window, sizeof window, "%u", (unsigned)fw->f->cfg->antireplay.window_s);
        const char *a[] = {"SET", keys[0], "1", "NX", "EX", window};
        argc = 6;
        for (int i = 0; i < argc; i++)
            argv[i] = a[i], lens[i] = i == 1 ? klen[0] : strlen(a[i]);
    }
    if (send_cmd(fw, on_check, p, argc, argv, lens) != 0) {
        stats_add(fw->st, fleet_fallbacks, 1);
        if (counts)
            fw->slot[q->sec.slot].held++;
        return FLEET_LOCAL;
    }
    fw->free_head = p->next_free;
    p->busy = true;
    p->owner = owner;
    p->cb = cb;
    p->slot = lim ? q->sec.slot : 0;
    p->limited = lim;
    p->counts = counts;
    p->held_local = false;
    loop_timer_start(fw->loop, &fw->tq_bound, &p->timer, on_bound);
    *ticket = (uint32_t)(p - fw->pend);
    return FLEET_PENDING;
}

void fleet_cancel(struct fleet_worker *fw, uint32_t ticket)
{
    if (!fw || ticket >= FLEET_MAX_PENDING)
        return;
    struct fleet_pending *p = &fw->pend[ticket];
    loop_timer_stop(&p->timer);
    p->owner = NULL;
}

void fleet_release(struct fleet_worker *fw, const struct fleet_secret *s)
{
    if (!fw || !limited_sec(s) || !fw->slot[s->slot].held)
        return;
    fw->slot[s->slot].held--;
    fix_count(fw, s->slot, -1); /* without a connection the resync after it repairs this */
}

bool fleet_charge(struct fleet_worker *fw, const struct fleet_secret *s, uint64_t bytes)
{
    if (!fw || !limited_sec(s) || !s->lim->quota)
        return false;
    struct fleet_slot *sl = &fw->slot[s->slot];
    uint32_t resets = __atomic_load_n(&fw->f->qreset[s->slot], __ATOMIC_ACQUIRE);
    if (resets != sl->qreset) { /* the control API reset the quota: Redis's count is gone */
        sl->qreset = resets;
        sl->qspent = -1;
    }
    sl->label = s->label;
    sl->quota = s->lim->quota;
    sl->reset_s = s->lim->quota_reset_s;
    sl->qdelta += bytes;
    return sl->qspent >= 0 && sl->qspent == quota_period(sl->reset_s);
}

/* Send the bytes relayed since the last flush to each quota key; the answer says whether
   the quota is used up (on_aux). */
static void flush_quota(struct fleet_worker *fw)
{
    for (uint32_t i = 0; i < GEN_LABELS_MAX; i++) {
        struct fleet_slot *sl = &fw->slot[i];
        if (!sl->qdelta)
            continue;
        char key[KEY_MAX], num[24], ttl[24];
        key_quota(fw->f, key, sl->label, sl->reset_s);
        snprintf(num, sizeof num, "%llu", (unsigned long long)sl->qdelta);
        const char *incr[] = {"INCRBY", key, num};
        send_aux(fw, AUX_QUOTA, i, 3, incr, NULL);
        if (sl->reset_s) {
            snprintf(ttl, sizeof ttl, "%llu", 2ULL * sl->reset_s);
            const char *exp[] = {"EXPIRE", key, ttl};
            send_aux(fw, AUX_PLAIN, i, 3, exp, NULL);
        }
        sl->qdelta = 0;
    }
    fw->flush_ms = fw->loop->now_ms + QUOTA_FLUSH_MS;
}

/* ---- the worker's housekeeping ---- */

static void on_tick(struct loop *l, struct loop_timer *t)
{
    struct fleet_worker *fw =
        (struct fleet_worker *)(void *)((char *)t - offsetof(struct fleet_worker, tick));
    uint64_t now = l->now_ms;
    if (fw->reset)
        reset_conn(fw, "the server refused the connection's first command");
    else if (fw->ac && !fw->up && now - fw->conn_ms >= FLEET_CONNECT_MS)
        reset_conn(fw, "no answer to connect");
    else if (fw->ac && fw->outstanding && now - fw->progress_ms >= FLEET_STALL_MS)
        reset_conn(fw, "no answer for 2 s");
    if (!fw->ac && now >= fw->retry_ms)
        start_connect(fw);
    if (fw->up && now >= fw->beat_ms)
        send_beat(fw);
    if (now >= fw->flush_ms) {
        if (fw->up)
            flush_quota(fw);
        else
            fw->flush_ms = now + QUOTA_FLUSH_MS; /* kept and sent once Redis is back */
    }
    loop_timer_start(l, &fw->tq_tick, &fw->tick, on_tick);
}

struct fleet_worker *fleet_worker_new(struct fleet *f, struct loop *l, struct stats *st)
{
    struct fleet_worker *fw = tg__calloc(1, sizeof *fw);
    if (!fw)
        return NULL;
    fw->f = f;
    fw->loop = l;
    fw->st = st;
    fw->io.fd = -1;
    fw->backoff_ms = FLEET_BACKOFF_MIN_MS;
    snprintf(fw->member, sizeof fw->member, "%s.%u", f->proc,
             (unsigned)__atomic_fetch_add(&f->next_id, 1, __ATOMIC_RELAXED));
    tg__ratelimit_init(&fw->rl, 1, 5);
    fw->slot = tg__calloc(GEN_LABELS_MAX, sizeof *fw->slot);
    if (!fw->slot || loop_tq_add(l, &fw->tq_bound, f->cfg->fleet.timeout_ms) < 0 ||
        loop_tq_add(l, &fw->tq_tick, FLEET_TICK_MS) < 0) {
        tg__free(fw->slot);
        tg__free(fw);
        return NULL;
    }
    for (size_t i = 0; i < GEN_LABELS_MAX; i++)
        fw->slot[i].qspent = -1;
    for (uint32_t i = 0; i < FLEET_MAX_PENDING; i++) {
        fw->pend[i].fw = fw;
        fw->pend[i].next_free = i + 1 < FLEET_MAX_PENDING ? i + 1 : FLEET_NONE;
    }
    __atomic_add_fetch(&f->nworkers, 1, __ATOMIC_RELAXED);
    start_connect(fw);
    loop_timer_start(l, &fw->tq_tick, &fw->tick, on_tick);
    return fw;
}

void fleet_worker_free(struct fleet_worker *fw)
{
    if (!fw)
        return;
    fw->closing = true;
    loop_timer_stop(&fw->tick);
    if (fw->up) {
        fw->up = false;
        stats_sub(fw->st, fleet_up, 1);
        __atomic_sub_fetch(&fw->f->nup, 1, __ATOMIC_RELAXED);
    }
    __atomic_sub_fetch(&fw->f->nworkers, 1, __ATOMIC_RELAXED);
    if (fw->ac)
        redisAsyncFree(fw->ac);
    for (uint32_t i = 0; i < FLEET_MAX_PENDING; i++)
        loop_timer_stop(&fw->pend[i].timer);
    tg__free(fw->slot);
    tg__free(fw);
}
