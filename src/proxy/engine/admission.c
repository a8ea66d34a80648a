/*
 * admission: replay, limits and fleet checks of a validated hello. See admission.h.
 * Invariants: c->hs->chk.fleet_ticket != FLEET_NONE only while the connection waits in
 * CONN_CHECK;
 * a->limit_held means limits_admit counted the connection and nothing gave it back yet.
 */
#include "proxy/engine/admission.h"

#include "core/clock.h"
#include "core/log.h"
#include "proxy/engine/conn_int.h"
#include "proxy/engine/conn_pp.h"
#include "proxy/engine/fleet.h"
#include "proxy/engine/limits.h"

#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

static void on_fleet(void *owner, enum fleet_verdict v);

void admit_conn_init(struct conn_admit *a, struct conn_admit_check *k)
{
    memset(a, 0, sizeof *a);
    memset(k, 0, sizeof *k);
    k->fleet_ticket = FLEET_NONE;
}

/* c's secret as the fleet knows it: by label (its slot keeps the counts across reloads). */
static struct fleet_secret fleet_sec(const struct conn *c)
{
    const struct gen *g = c->gen;
    uint32_t slot = c->secret < g->cfg->nsecrets ? g->slot[c->secret] : GEN_NO_SLOT;
    return (struct fleet_secret){
        .slot = slot,
        .label = slot != GEN_NO_SLOT ? gen_labels_name(&conn_w(c)->sh->labels, slot) : NULL,
        .lim = c->secret < g->cfg->nsecrets ? &g->cfg->secrets[c->secret].limits : NULL};
}

/* Charge c's bytes relayed since the last fold to its secret's quota; true when the quota
   is used up. */
static bool quota_fold(struct conn *c)
{
    uint64_t total = c->bytes_up + c->bytes_down, delta = total - c->adm.quota_folded;
    c->adm.quota_folded = total;
    struct fleet_secret fs = fleet_sec(c);
    bool fleet_spent = fleet_charge(conn_w(c)->fleet, &fs, delta);
    return limits_charge(c->gen->limits, c->secret, delta, tg__wall_s()) || fleet_spent;
}

/* One of the [limits] of c's secret refused or ended c: counted for the secret too (which
   limit, in the worker's totals). */
static void secret_limit_hit(struct conn *c)
{
    uint32_t slot = c->secret < c->gen->cfg->nsecrets ? c->gen->slot[c->secret] : GEN_NO_SLOT;
    if (slot < conn_w(c)->nsec)
        stats_add(&conn_w(c)->sec[slot], limits_hit, 1);
}

static void fold_one(void *obj, void *arg)
{
    struct conn *c = obj;
    struct conn_worker *w = arg;
    if (c->adm.limit_held && quota_fold(c)) {
        stats_add(&w->stats, limit_quota, 1);
        secret_limit_hit(c);
        conn_close(c, END_QUOTA);
    }
}

/* Once a second while some secret has a quota: fold every relay's bytes (one atomic add per
   connection and second, none per read) and end the relays of secrets whose quota is spent. */
static void on_limits_tick(struct loop *l, struct loop_timer *t)
{
    struct conn_worker *w =
        (struct conn_worker *)(void *)((char *)t - offsetof(struct conn_worker, admit.tick));
    tg__slab_each(&w->conn_slab, fold_one, w);
    loop_timer_start(l, &w->admit.tq, &w->admit.tick, on_limits_tick);
}

bool admit_replayed(struct conn *c, enum antireplay_kind kind, const uint8_t *key, size_t n)
{
    struct antireplay *ar = conn_w(c)->sh->replay;
    uint64_t now_s = conn_w(c)->loop.now_ms / 1000, total = 0;
    bool early = false;
    if (!ar)
        return false;
    bool seen = antireplay_insert(ar, kind, key, n, now_s, &early);
    if (early) {
        stats_add(&conn_w(c)->stats, replay_early_evictions, 1);
        if (antireplay_warn_due(ar, now_s, &total))
            tg__log(NULL, TG__LOG_WARN,
                    "anti-replay: cache full, %llu handshake(s) forgotten so far before their "
                    "window ended (replays of them would pass); raise [defense.anti-replay] "
                    "max-entries",
                    (unsigned long long)total);
    }
    return seen;
}

/* The secret's [limits]: true when one refuses c (counted and logged). */
static bool over_limit(struct conn *c)
{
    struct limits *l = c->gen->limits;
    uint8_t ip[16];
    bool known = limits_by_addr(l, c->secret) && conn_pp_client_ip(&c->hs->pp, c->cfd, ip);
    enum limits_verdict v =
        limits_admit(l, c->secret, known ? ip : NULL, tg__wall_s(), &c->adm.limit_ip);
    switch (v) {
    case LIMITS_OK:
        c->adm.limit_held = true;
        return false;
    case LIMITS_EXPIRED:
        stats_add(&conn_w(c)->stats, limit_expired, 1);
        break;
    case LIMITS_CONNECTIONS:
        stats_add(&conn_w(c)->stats, limit_connections, 1);
        break;
    case LIMITS_UNIQUE_IPS:
        stats_add(&conn_w(c)->stats, limit_unique_ips, 1);
        break;
    case LIMITS_QUOTA:
        stats_add(&conn_w(c)->stats, limit_quota, 1);
        break;
    }
    secret_limit_hit(c);
    conn_hs_debug(c, "limits", limits_verdict_name(v));
    return true;
}

/* Whether an admitted c holds a fleet connection slot (its secret has max-connections). */
static void fleet_admitted(struct conn *c)
{
    struct fleet_secret fs = fleet_sec(c);
    c->adm.fleet_held = fs.slot != GEN_NO_SLOT && fs.lim && fs.lim->max_connections;
}

/* Ask the fleet about c's hello (replay key key[0..n) of kind). True when the answer is
   pending; false when c goes on at once (no fleet, or decided locally: Redis is away). */
static bool fleet_ask(struct conn *c, enum antireplay_kind kind, const uint8_t *key, size_t n)
{
    struct conn_worker *w = conn_w(c);
    bool replay = w->sh->replay != NULL;
    uint8_t ip[16];
    struct fleet_query q = {
        .kind = (uint8_t)kind, .key = replay ? key : NULL, .key_len = n, .sec = fleet_sec(c)};
    if (!fleet_wanted(w->fleet, &q.sec, replay))
        return false;
    /* only now: the address costs two system calls (getpeername, getsockname) */
    q.addr = conn_pp_client_ip(&c->hs->pp, c->cfd, ip) ? ip : NULL;
    enum fleet_verdict v = fleet_check(w->fleet, &q, c, on_fleet, &c->hs->chk.fleet_ticket);
    if (v != FLEET_PENDING) {
        fleet_admitted(c); /* FLEET_LOCAL: accepted on local state */
        return false;
    }
    c->hs->chk.kind = (uint8_t)kind; /* conn.c parses the hello again by it */
    return true;
}

/* A connection fronted after the local limits admitted it holds no slot any more, and
   its address does not count locally (the fleet's count is the one that refused it). */
static void limit_give_back(struct conn *c)
{
    if (c->adm.limit_held)
        limits_cancel(c->gen->limits, c->secret, c->adm.limit_ip);
    c->adm.limit_held = false;
}

/* The fleet refused a hello the local checks admitted: count it and give back the local
   slot (conn.c fronts it like any failed handshake). */
static void fleet_refused(struct conn *c, enum fleet_verdict v)
{
    struct conn_worker *w = conn_w(c);
    if (v == FLEET_CONNECTIONS)
        stats_add(&w->stats, limit_connections, 1);
    else if (v == FLEET_UNIQUE_IPS)
        stats_add(&w->stats, limit_unique_ips, 1);
    else if (v == FLEET_QUOTA)
        stats_add(&w->stats, limit_quota, 1);
    if (v != FLEET_REPLAY)
        secret_limit_hit(c);
    limit_give_back(c);
    conn_hs_debug(c, "client hello", fleet_verdict_name(v));
}

static void on_fleet(void *owner, enum fleet_verdict v)
{
    struct conn *c = owner;
    c->hs->chk.fleet_ticket = FLEET_NONE;
    if (v != FLEET_OK && v != FLEET_LOCAL) {
        fleet_refused(c, v);
        conn_admitted(c, ADMIT_REFUSED,
                      v == FLEET_REPLAY ? HS_REASON(hs_replay) : HS_REASON(hs_limit));
        return;
    }
    fleet_admitted(c);
    conn_admitted(c, ADMIT_OK, 0);
}

enum admit_verdict admit_hello(struct conn *c, uint32_t secret, enum antireplay_kind kind,
                               const uint8_t *key, size_t n, size_t *reason)
{
    if (admit_replayed(c, kind, key, n)) {
        *reason = HS_REASON(hs_replay);
        return ADMIT_REFUSED;
    }
    c->secret = secret;
    if (over_limit(c)) {
        *reason = HS_REASON(hs_limit);
        return ADMIT_REFUSED;
    }
    return fleet_ask(c, kind, key, n) ? ADMIT_PENDING : ADMIT_OK;
}

void admit_cancel(struct conn *c)
{
    fleet_cancel(conn_w(c)->fleet, c->hs->chk.fleet_ticket);
    c->hs->chk.fleet_ticket = FLEET_NONE;
    limit_give_back(c);
}

void admit_release(struct conn *c)
{
    struct conn_worker *w = conn_w(c);
    if (c->adm.limit_held)
        quota_fold(c);
    if (c->adm.limit_held)
        limits_release(c->gen->limits, c->secret, c->adm.limit_ip, tg__wall_s());
    if (c->hs && c->hs->chk.fleet_ticket != FLEET_NONE) /* none once relaying */
        fleet_cancel(w->fleet, c->hs->chk.fleet_ticket);
    if (c->adm.fleet_held) {
        struct fleet_secret fs = fleet_sec(c);
        fleet_release(w->fleet, &fs);
    }
}

void admit_worker_init(struct conn_worker *w)
{
    loop_tq_add(&w->loop, &w->admit.tq, CONN_QUOTA_FOLD_MS);
}

void admit_worker_adopt(struct conn_worker *w, const struct gen *g)
{
    if (limits_any_quota(g->limits) && !loop_timer_active(&w->admit.tick))
        loop_timer_start(&w->loop, &w->admit.tq, &w->admit.tick, on_limits_tick);
}
