/*
 * memory: the default store, a locked chained hash table in process memory (nothing
 * survives the process). Expired entries are dropped when looked up and when the table
 * grows, so memory is bounded by the live entries plus those expired since the last growth.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "tgbot/storage.h"

#include "core/alloc.h"
#include "core/clock.h"

struct entry {
    struct entry *next;
    uint64_t hash;
    uint64_t expires_ms; /* tg__now_ms() clock; 0 = never */
    size_t len;
    char *key;
    unsigned char *val;
};

struct memstore {
    tg_storage base;
    pthread_mutex_t mu;
    struct entry **buckets;
    size_t nbuckets; /* power of two */
    size_t count;
};

static uint64_t hash_key(const char *k)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a 64 offset basis */
    for (; *k; k++)
        h = (h ^ (unsigned char)*k) * 1099511628211ull;
    return h;
}

static void entry_free(struct entry *e)
{
    if (!e)
        return;
    tg__free(e->key);
    tg__free(e->val);
    tg__free(e);
}

static bool expired(const struct entry *e, uint64_t now)
{
    return e->expires_ms && e->expires_ms <= now;
}

/* Find key; unlinks and frees it when expired. Called with the lock held. */
static struct entry **find(struct memstore *m, const char *key, uint64_t h)
{
    struct entry **pp = &m->buckets[h & (m->nbuckets - 1)];
    uint64_t now = tg__now_ms();
    while (*pp) {
        struct entry *e = *pp;
        if (e->hash == h && strcmp(e->key, key) == 0) {
            if (!expired(e, now))
                return pp;
            *pp = e->next;
            m->count--;
            entry_free(e);
            return NULL;
        }
        pp = &e->next;
    }
    return NULL;
}

static void grow(struct memstore *m)
{
    size_t n = m->nbuckets * 2;
    struct entry **nb = tg__calloc(n, sizeof(struct entry *));
    if (!nb)
        return; /* keep the longer chains; still correct */
    uint64_t now = tg__now_ms();
    for (size_t i = 0; i < m->nbuckets; i++) {
        struct entry *e = m->buckets[i];
        while (e) {
            struct entry *next = e->next;
            if (expired(e, now)) {
                m->count--;
                entry_free(e);
            } else {
                e->next = nb[e->hash & (n - 1)];
                nb[e->hash & (n - 1)] = e;
            }
            e = next;
        }
    }
    tg__free(m->buckets);
    m->buckets = nb;
    m->nbuckets = n;
}

static tg_status mem_get(tg_storage *s, const char *key, void *buf, size_t cap, size_t *len,
                         bool *found)
{
    struct memstore *m = (struct memstore *)s;
    tg_status st = TG_OK;
    pthread_mutex_lock(&m->mu);
    struct entry **pp = find(m, key, hash_key(key));
    *found = pp != NULL;
    *len = pp ? (*pp)->len : 0;
    if (pp && (*pp)->len > cap)
        st = TG_ERR_TOO_BIG;
    else if (pp && (*pp)->len)
        memcpy(buf, (*pp)->val, (*pp)->len);
    pthread_mutex_unlock(&m->mu);
    return st;
}

static tg_status mem_set(tg_storage *s, const char *key, const void *val, size_t len,
                         uint64_t ttl_ms)
{
    struct memstore *m = (struct memstore *)s;
    struct entry *e = tg__calloc(1, sizeof *e);
    if (!e)
        return TG_ERR_NOMEM;
    e->hash = hash_key(key);
    e->key = tg__strdup(key);
    e->val = tg__memdup(val, len ? len : 1);
    e->len = len;
    e->expires_ms = ttl_ms ? tg__now_ms() + ttl_ms : 0;
    if (!e->key || !e->val) {
        entry_free(e);
        return TG_ERR_NOMEM;
    }
    pthread_mutex_lock(&m->mu);
    struct entry **pp = find(m, key, e->hash);
    if (pp) { /* replace in place */
        struct entry *old = *pp;
        e->next = old->next;
        *pp = e;
        entry_free(old);
    } else {
        if (m->count >= m->nbuckets)
            grow(m);
        struct entry **b = &m->buckets[e->hash & (m->nbuckets - 1)];
        e->next = *b;
        *b = e;
        m->count++;
    }
    pthread_mutex_unlock(&m->mu);
    return TG_OK;
}

static tg_status mem_del(tg_storage *s, const char *key)
{
    struct memstore *m = (struct memstore *)s;
    pthread_mutex_lock(&m->mu);
    struct entry **pp = find(m, key, hash_key(key));
    if (pp) {
        struct entry *e = *pp;
        *pp = e->next;
        m->count--;
        entry_free(e);
    }
    pthread_mutex_unlock(&m->mu);
    return TG_OK;
}

/* fn runs under the lock: it must not call the store (tg_storage_ops says so). */
static tg_status mem_scan(tg_storage *s, const char *prefix, tg_storage_scan_fn fn, void *user)
{
    struct memstore *m = (struct memstore *)s;
    size_t pl = strlen(prefix);
    uint64_t now = tg__now_ms();
    pthread_mutex_lock(&m->mu);
    bool go = true;
    for (size_t i = 0; go && i < m->nbuckets; i++)
        for (struct entry *e = m->buckets[i]; go && e; e = e->next)
            if (!expired(e, now) && strncmp(e->key, prefix, pl) == 0)
                go = fn(user, e->key, e->val, e->len);
    pthread_mutex_unlock(&m->mu);
    return TG_OK;
}

static void mem_free(tg_storage *s)
{
    struct memstore *m = (struct memstore *)s;
    for (size_t i = 0; i < m->nbuckets; i++) {
        struct entry *e = m->buckets[i];
        while (e) {
            struct entry *next = e->next;
            entry_free(e);
            e = next;
        }
    }
    pthread_mutex_destroy(&m->mu);
    tg__free(m->buckets);
    tg__free(m);
}

static const tg_storage_ops mem_ops = {
    .get = mem_get, .set = mem_set, .del = mem_del, .free = mem_free, .scan = mem_scan};

tg_storage *tg_storage_memory_new(void)
{
    struct memstore *m = tg__calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->base.ops = &mem_ops;
    m->nbuckets = 64;
    m->buckets = tg__calloc(m->nbuckets, sizeof(struct entry *));
    if (!m->buckets || pthread_mutex_init(&m->mu, NULL) != 0) {
        tg__free(m->buckets);
        tg__free(m);
        return NULL;
    }
    return &m->base;
}
