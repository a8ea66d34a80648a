/*
 * antireplay: striped, set-associative, time-expiring set of fingerprints (see antireplay.h).
 */
#include "proxy/antireplay.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "core/alloc.h"
#include "proxy/crypto.h"

#define MAX_STRIPES  1024
#define INDEX_KEY    16 /* bytes of the per-cache random hash key */
#define WARN_EVERY_S 60 /* at most one early-eviction warning per minute */

struct entry {
    uint32_t fp[3];
    uint32_t stamp; /* (insertion second + 1); 0 = empty */
};

struct antireplay {
    struct entry *table; /* nsets * ANTIREPLAY_WAYS */
    size_t nsets;        /* power of two */
    size_t nstripes;     /* power of two, <= nsets */
    pthread_mutex_t *locks;
    uint32_t window_s;
    uint8_t index_key[INDEX_KEY]; /* random, never leaves the process */
    _Atomic uint64_t inserts, replays, early_evictions;
    _Atomic uint64_t warned_at; /* (second of the last due warning) + 1; 0 = never */
};

struct antireplay *antireplay_new(size_t max_entries, uint32_t window_s)
{
    if (max_entries == 0 || window_s == 0 || max_entries > ((size_t)1 << 34))
        return NULL;
    size_t nsets = 1;
    while (nsets * ANTIREPLAY_WAYS < max_entries)
        nsets <<= 1;
    struct antireplay *ar = tg__calloc(1, sizeof(*ar));
    if (!ar)
        return NULL;
    ar->nsets = nsets;
    ar->nstripes = nsets < MAX_STRIPES ? nsets : MAX_STRIPES;
    ar->window_s = window_s;
    ar->table = tg__calloc(nsets * ANTIREPLAY_WAYS, sizeof(struct entry));
    ar->locks = tg__calloc(ar->nstripes, sizeof(pthread_mutex_t));
    if (!ar->table || !ar->locks || crypto_random(ar->index_key, sizeof ar->index_key) != 0)
        goto fail;
    for (size_t i = 0; i < ar->nstripes; i++)
        pthread_mutex_init(&ar->locks[i], NULL);
    return ar;
fail:
    tg__free(ar->table);
    tg__free(ar->locks);
    tg__free(ar);
    return NULL;
}

void antireplay_free(struct antireplay *ar)
{
    if (!ar)
        return;
    for (size_t i = 0; i < ar->nstripes; i++)
        pthread_mutex_destroy(&ar->locks[i]);
    tg__free(ar->locks);
    tg__free(ar->table);
    crypto_wipe(ar, sizeof *ar);
    tg__free(ar);
}

/* Fingerprint and set of a key: SHA-256 of the cache's random key, the kind and the key, so
   which keys share a set cannot be worked out offline (a chosen set of hellos could
   otherwise push a chosen entry out). If hashing fails (OpenSSL broken), fall back to the
   raw bytes so a replay is still caught for short keys; never crash. */
static void fingerprint(const struct antireplay *ar, enum antireplay_kind kind, const void *key,
                        size_t len, uint32_t fp[3], size_t *set)
{
    uint8_t k = (uint8_t)kind, h[32] = {0};
    struct crypto_part parts[3] = {{ar->index_key, sizeof ar->index_key}, {&k, 1}, {key, len}};
    if (crypto_sha256(parts, 3, h) != 0)
        memcpy(h, key, len < sizeof h ? len : sizeof h);
    uint64_t idx;
    memcpy(&idx, h, sizeof idx);
    memcpy(fp, h + 8, 12);
    *set = (size_t)(idx & (ar->nsets - 1));
}

static bool live(const struct antireplay *ar, const struct entry *e, uint32_t now1)
{
    return e->stamp != 0 && now1 - e->stamp < ar->window_s;
}

/* Look in one set (lock held). Returns the live matching entry or NULL. */
static struct entry *find(struct antireplay *ar, struct entry *set, const uint32_t fp[3],
                          uint32_t now1)
{
    for (int i = 0; i < ANTIREPLAY_WAYS; i++)
        if (live(ar, &set[i], now1) && memcmp(set[i].fp, fp, 12) == 0)
            return &set[i];
    return NULL;
}

/* Slot to overwrite in a set without a match (lock held): dead first, else the oldest
   (*early: it was still live). */
static struct entry *victim(struct antireplay *ar, struct entry *set, uint32_t now1, bool *early)
{
    struct entry *old = &set[0];
    for (int i = 0; i < ANTIREPLAY_WAYS; i++) {
        if (!live(ar, &set[i], now1))
            return &set[i];
        if (now1 - set[i].stamp > now1 - old->stamp)
            old = &set[i];
    }
    *early = true;
    return old;
}

static bool lookup(struct antireplay *ar, enum antireplay_kind kind, const void *key, size_t len,
                   uint64_t now_s, bool insert, bool *early)
{
    uint32_t fp[3];
    size_t s;
    if (!ar || !key)
        return false;
    fingerprint(ar, kind, key, len, fp, &s);
    uint32_t now1 = (uint32_t)now_s + 1u;
    if (now1 == 0)
        now1 = 1;
    struct entry *set = &ar->table[s * ANTIREPLAY_WAYS];
    pthread_mutex_t *lock = &ar->locks[s & (ar->nstripes - 1)];
    pthread_mutex_lock(lock);
    bool seen = find(ar, set, fp, now1) != NULL;
    if (!seen && insert) {
        struct entry *e = victim(ar, set, now1, early);
        memcpy(e->fp, fp, 12);
        e->stamp = now1;
    }
    pthread_mutex_unlock(lock);
    if (seen)
        atomic_fetch_add_explicit(&ar->replays, 1, memory_order_relaxed);
    else if (insert)
        atomic_fetch_add_explicit(&ar->inserts, 1, memory_order_relaxed);
    if (*early)
        atomic_fetch_add_explicit(&ar->early_evictions, 1, memory_order_relaxed);
    return seen;
}

bool antireplay_seen(struct antireplay *ar, enum antireplay_kind kind, const void *key, size_t len,
                     uint64_t now_s)
{
    bool early = false;
    return lookup(ar, kind, key, len, now_s, false, &early);
}

bool antireplay_add(struct antireplay *ar, enum antireplay_kind kind, const void *key, size_t len,
                    uint64_t now_s)
{
    bool early = false;
    return lookup(ar, kind, key, len, now_s, true, &early);
}

bool antireplay_insert(struct antireplay *ar, enum antireplay_kind kind, const void *key,
                       size_t len, uint64_t now_s, bool *early_evicted)
{
    *early_evicted = false;
    return lookup(ar, kind, key, len, now_s, true, early_evicted);
}

bool antireplay_warn_due(struct antireplay *ar, uint64_t now_s, uint64_t *total)
{
    *total = ar ? atomic_load_explicit(&ar->early_evictions, memory_order_relaxed) : 0;
    if (!ar || *total == 0)
        return false;
    uint64_t last = atomic_load_explicit(&ar->warned_at, memory_order_relaxed);
    if (last != 0 && now_s + 1 - last < WARN_EVERY_S)
        return false;
    /* one thread wins the minute */
    return atomic_compare_exchange_strong_explicit(&ar->warned_at, &last, now_s + 1,
                                                   memory_order_relaxed, memory_order_relaxed);
}

void antireplay_get_stats(struct antireplay *ar, struct antireplay_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (!ar)
        return;
    out->capacity = ar->nsets * ANTIREPLAY_WAYS;
    out->bytes =
        sizeof(*ar) + out->capacity * sizeof(struct entry) + ar->nstripes * sizeof(pthread_mutex_t);
    out->inserts = atomic_load_explicit(&ar->inserts, memory_order_relaxed);
    out->replays = atomic_load_explicit(&ar->replays, memory_order_relaxed);
    out->early_evictions = atomic_load_explicit(&ar->early_evictions, memory_order_relaxed);
}
