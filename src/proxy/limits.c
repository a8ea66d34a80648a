/*
 * limits: per-secret limits state shared by every worker (see limits.h).
 */
#include "proxy/limits.h"

#include "core/alloc.h"

struct limit_slot {
    uint32_t max_conns; /* 0 = unlimited */
    int64_t expires;    /* 0 = never */
    uint32_t conns;     /* atomic: admitted connections still open */
};

struct limits {
    size_t n;
    struct limit_slot *slot;
};

struct limits *limits_new(const struct config *cfg)
{
    struct limits *l = tg__calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->n = cfg->nsecrets;
    l->slot = tg__calloc(l->n ? l->n : 1, sizeof *l->slot);
    if (!l->slot) {
        tg__free(l);
        return NULL;
    }
    for (size_t i = 0; i < l->n; i++) {
        l->slot[i].max_conns = cfg->secrets[i].limits.max_connections;
        l->slot[i].expires = cfg->secrets[i].limits.expires;
    }
    return l;
}

void limits_free(struct limits *l)
{
    if (!l)
        return;
    tg__free(l->slot);
    tg__free(l);
}

enum limits_verdict limits_admit(struct limits *l, size_t secret, int64_t now_s)
{
    if (secret >= l->n)
        return LIMITS_OK;
    struct limit_slot *s = &l->slot[secret];
    if (s->expires && now_s >= s->expires)
        return LIMITS_EXPIRED;
    uint32_t n = __atomic_add_fetch(&s->conns, 1, __ATOMIC_RELAXED);
    if (s->max_conns && n > s->max_conns) {
        __atomic_sub_fetch(&s->conns, 1, __ATOMIC_RELAXED);
        return LIMITS_CONNECTIONS;
    }
    return LIMITS_OK;
}

void limits_release(struct limits *l, size_t secret)
{
    if (secret < l->n)
        __atomic_sub_fetch(&l->slot[secret].conns, 1, __ATOMIC_RELAXED);
}
