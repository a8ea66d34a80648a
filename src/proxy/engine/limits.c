/*
 * limits: per-secret limits state shared by every worker (see limits.h).
 *
 * Connection counts are one relaxed atomic per secret. Unique client IPs are a small table
 * per secret (max-unique-ips entries) under that secret's mutex, scanned linearly: it is
 * touched once per admitted handshake and once per close, never on the relay path.
 * The counted state (struct limit_state) is shared by label between the generations of a
 * reload (limits_new's prev); the settings (struct limit_slot) are each generation's own.
 */
#include "proxy/engine/limits.h"

#include "core/alloc.h"
#include "core/str.h"

#include <pthread.h>
#include <string.h>

struct limit_ip {
    uint8_t addr[16]; /* IPv4 as ::ffff:a.b.c.d */
    uint32_t open;    /* admitted connections from addr still open */
    int64_t last_s;   /* wall time of the last admission or close from addr */
    bool used;
};

/* What a secret's limits count, shared by every generation that has its label (so a reload
   neither forgets open connections nor resets a quota). */
struct limit_state {
    uint32_t refs;      /* atomic: generations holding it */
    uint32_t conns;     /* atomic: admitted connections still open */
    uint64_t used;      /* atomic: bytes charged in this period */
    int64_t period_end; /* under mu: when used goes back to 0 (reset_s != 0); 0 = not started */
    pthread_mutex_t mu; /* guards ips, ips_cap and period_end */
    struct limit_ip *ips;
    uint32_t ips_cap; /* entries in ips: the largest max-unique-ips any generation gave */
};

/* One secret's limits in one generation: its settings, and the state it shares. */
struct limit_slot {
    char label[CONFIG_LABEL_MAX];
    uint32_t max_conns; /* 0 = unlimited */
    int64_t expires;    /* 0 = never */
    uint32_t max_ips;   /* 0 = unlimited; else st->ips has at least max_ips entries */
    uint32_t ip_window_s;
    uint64_t quota;   /* bytes per period; 0 = unlimited */
    uint32_t reset_s; /* period; 0 = never resets */
    struct limit_state *st;
};

struct limits {
    size_t n;
    struct limit_slot *slot;
};

const char *limits_verdict_name(enum limits_verdict v)
{
    switch (v) {
    case LIMITS_OK:
        return "admitted";
    case LIMITS_EXPIRED:
        return "secret expired";
    case LIMITS_CONNECTIONS:
        return "max-connections reached";
    case LIMITS_UNIQUE_IPS:
        return "max-unique-ips reached";
    case LIMITS_QUOTA:
        return "quota used up";
    }
    return "?";
}

static void state_unref(struct limit_state *st)
{
    if (!st || __atomic_sub_fetch(&st->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    pthread_mutex_destroy(&st->mu);
    tg__free(st->ips);
    tg__free(st);
}

/* The state for label: prev's (shared) when prev has the label, else a fresh one. Grows the
   address table to max_ips. NULL on allocation failure. */
static struct limit_state *state_for(const struct limits *prev, size_t at, const char *label,
                                     uint32_t max_ips)
{
    struct limit_state *st = NULL;
    /* the same place in the previous generation first: a reload seldom reorders secrets,
       and 1,000 of them would otherwise cost a million label compares */
    if (prev && at < prev->n && strcmp(prev->slot[at].label, label) == 0)
        st = prev->slot[at].st;
    for (size_t i = 0; prev && i < prev->n && !st; i++)
        if (strcmp(prev->slot[i].label, label) == 0)
            st = prev->slot[i].st;
    if (st) {
        __atomic_add_fetch(&st->refs, 1, __ATOMIC_RELAXED);
    } else {
        if (!(st = tg__calloc(1, sizeof *st)))
            return NULL;
        st->refs = 1;
        pthread_mutex_init(&st->mu, NULL);
    }
    pthread_mutex_lock(&st->mu);
    if (max_ips > st->ips_cap) { /* entries keep their index: open connections name them */
        struct limit_ip *ips = tg__realloc(st->ips, max_ips * sizeof *ips);
        if (ips) {
            memset(ips + st->ips_cap, 0, (max_ips - st->ips_cap) * sizeof *ips);
            st->ips = ips;
            st->ips_cap = max_ips;
        }
    }
    bool ok = st->ips_cap >= max_ips;
    pthread_mutex_unlock(&st->mu);
    if (!ok) {
        state_unref(st);
        return NULL;
    }
    return st;
}

struct limits *limits_new(const struct config *cfg, const struct limits *prev)
{
    struct limits *l = tg__calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->slot = tg__calloc(cfg->nsecrets ? cfg->nsecrets : 1, sizeof *l->slot);
    if (!l->slot) {
        tg__free(l);
        return NULL;
    }
    for (size_t i = 0; i < cfg->nsecrets; i++, l->n++) {
        const struct config_limits *c = &cfg->secrets[i].limits;
        struct limit_slot *s = &l->slot[i];
        tg__strlcpy(s->label, cfg->secrets[i].label, sizeof s->label);
        s->max_conns = c->max_connections;
        s->expires = c->expires;
        s->max_ips = c->max_unique_ips;
        s->ip_window_s = c->unique_ips_window_s ? c->unique_ips_window_s : 3600;
        s->quota = c->quota;
        s->reset_s = c->quota_reset_s;
        if (!(s->st = state_for(prev, i, s->label, s->max_ips))) {
            limits_free(l);
            return NULL;
        }
    }
    return l;
}

void limits_free(struct limits *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        state_unref(l->slot[i].st);
    tg__free(l->slot);
    tg__free(l);
}

/* The entry for addr, else a free or lapsed one taken for it; UINT32_MAX when every entry
   is another address still counted (open, or seen within the window). Under s->mu. */
static uint32_t ip_take(struct limit_slot *s, const uint8_t addr[16], int64_t now_s)
{
    uint32_t spare = UINT32_MAX;
    for (uint32_t i = 0; i < s->max_ips; i++) {
        struct limit_ip *e = &s->st->ips[i];
        if (e->used && memcmp(e->addr, addr, 16) == 0)
            return i;
        bool lapsed = !e->used || (e->open == 0 && now_s - e->last_s >= (int64_t)s->ip_window_s);
        if (lapsed && spare == UINT32_MAX)
            spare = i;
    }
    if (spare != UINT32_MAX) {
        struct limit_ip *e = &s->st->ips[spare];
        memcpy(e->addr, addr, 16);
        e->open = 0;
        e->used = true;
    }
    return spare;
}

bool limits_any_quota(const struct limits *l)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->slot[i].quota)
            return true;
    return false;
}

/* Whether s's quota is used up at now_s, starting a new period first when one is due. */
static bool quota_spent(struct limit_slot *s, int64_t now_s)
{
    if (!s->quota)
        return false;
    struct limit_state *st = s->st;
    if (s->reset_s) {
        pthread_mutex_lock(&st->mu);
        if (st->period_end == 0) {
            st->period_end = now_s + s->reset_s;
        } else if (now_s >= st->period_end) {
            st->period_end += ((now_s - st->period_end) / s->reset_s + 1) * (int64_t)s->reset_s;
            __atomic_store_n(&st->used, 0, __ATOMIC_RELAXED);
        }
        pthread_mutex_unlock(&st->mu);
    }
    return __atomic_load_n(&st->used, __ATOMIC_RELAXED) >= s->quota;
}

bool limits_charge(struct limits *l, size_t secret, uint64_t bytes, int64_t now_s)
{
    if (secret >= l->n || !l->slot[secret].quota)
        return false;
    struct limit_slot *s = &l->slot[secret];
    if (bytes)
        __atomic_add_fetch(&s->st->used, bytes, __ATOMIC_RELAXED);
    return quota_spent(s, now_s);
}

bool limits_quota_get(const struct limits *l, size_t secret, uint64_t *used, int64_t *period_end)
{
    if (secret >= l->n || !l->slot[secret].quota)
        return false;
    struct limit_state *st = l->slot[secret].st;
    pthread_mutex_lock(&st->mu);
    *period_end = st->period_end;
    *used = __atomic_load_n(&st->used, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&st->mu);
    return true;
}

void limits_quota_set(struct limits *l, size_t secret, uint64_t used, int64_t period_end)
{
    if (secret >= l->n || !l->slot[secret].quota)
        return;
    struct limit_state *st = l->slot[secret].st;
    pthread_mutex_lock(&st->mu);
    st->period_end = l->slot[secret].reset_s ? period_end : 0;
    __atomic_store_n(&st->used, used, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&st->mu);
}

bool limits_by_addr(const struct limits *l, size_t secret)
{
    return secret < l->n && l->slot[secret].max_ips != 0;
}

enum limits_verdict limits_admit(struct limits *l, size_t secret, const uint8_t addr[16],
                                 int64_t now_s, uint32_t *ip_slot)
{
    *ip_slot = LIMITS_NO_IP;
    if (secret >= l->n)
        return LIMITS_OK;
    struct limit_slot *s = &l->slot[secret];
    if (s->expires && now_s >= s->expires)
        return LIMITS_EXPIRED;
    if (quota_spent(s, now_s))
        return LIMITS_QUOTA;
    struct limit_state *st = s->st;
    uint32_t n = __atomic_add_fetch(&st->conns, 1, __ATOMIC_RELAXED);
    if (s->max_conns && n > s->max_conns) {
        __atomic_sub_fetch(&st->conns, 1, __ATOMIC_RELAXED);
        return LIMITS_CONNECTIONS;
    }
    if (!s->max_ips || !addr)
        return LIMITS_OK;
    pthread_mutex_lock(&st->mu);
    uint32_t i = ip_take(s, addr, now_s);
    if (i != LIMITS_NO_IP) {
        st->ips[i].open++;
        st->ips[i].last_s = now_s;
    }
    pthread_mutex_unlock(&st->mu);
    if (i == LIMITS_NO_IP) {
        __atomic_sub_fetch(&st->conns, 1, __ATOMIC_RELAXED);
        return LIMITS_UNIQUE_IPS;
    }
    *ip_slot = i;
    return LIMITS_OK;
}

/* Give back an admission's slot; its address either starts its window at now_s, or, when
   forget and it has no connection left, stops counting at once. */
static void give_back(struct limits *l, size_t secret, uint32_t ip_slot, int64_t now_s, bool forget)
{
    if (secret >= l->n)
        return;
    struct limit_state *st = l->slot[secret].st;
    __atomic_sub_fetch(&st->conns, 1, __ATOMIC_RELAXED);
    if (ip_slot == LIMITS_NO_IP)
        return;
    pthread_mutex_lock(&st->mu);
    if (ip_slot < st->ips_cap) {
        struct limit_ip *e = &st->ips[ip_slot];
        e->last_s = now_s;
        if (--e->open == 0 && forget)
            e->used = false;
    }
    pthread_mutex_unlock(&st->mu);
}

void limits_release(struct limits *l, size_t secret, uint32_t ip_slot, int64_t now_s)
{
    give_back(l, secret, ip_slot, now_s, false);
}

void limits_cancel(struct limits *l, size_t secret, uint32_t ip_slot)
{
    give_back(l, secret, ip_slot, 0, true);
}
