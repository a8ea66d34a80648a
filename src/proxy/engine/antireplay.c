/*
 * antireplay: striped, set-associative, time-expiring set of fingerprints (see antireplay.h).
 *
 * Invariants: a key may sit in either of two sets, the low bits of two 64-bit words of its
 * fingerprint (words_of), so the table can be rebuilt at another size from the entries
 * alone; a set's stripe is the low bits of the same word (nstripes <= the smallest nsets),
 * so it never changes. table and nsets change only under the resize lock held for
 * writing; lookups hold it for reading, then their two stripes in index order.
 */
#include "proxy/engine/antireplay.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "core/alloc.h"
#include "proxy/wire/crypto.h"

#define MAX_STRIPES  1024
#define INDEX_KEY    16  /* bytes of the per-cache random hash key */
#define WARN_EVERY_S 60  /* at most one early-eviction warning per minute */
#define FIRST_SETS   512 /* 4096 entries, 48 KiB: the table grows from here to the load */
#define FP_WORDS     2   /* a 64-bit fingerprint */
#define FP_BYTES     (4 * FP_WORDS)

/* 12 bytes, 4-byte aligned: 8 ways make a 96-byte set (antireplay.h: why 64 bits do) */
struct entry {
    uint32_t fp[FP_WORDS];
    uint32_t stamp; /* (insertion second + 1); 0 = empty */
};
_Static_assert(sizeof(struct entry) == 12, "an anti-replay entry is 12 bytes (antireplay.h)");

struct antireplay {
    struct entry *table; /* nsets * ANTIREPLAY_WAYS */
    size_t nsets;        /* power of two, <= max_sets */
    size_t max_sets;     /* from max_entries */
    size_t nstripes;     /* power of two, <= the first nsets */
    pthread_mutex_t *locks;
    pthread_rwlock_t resize; /* write: doubling the table; read: every lookup */
    uint32_t window_s;
    uint8_t index_key[INDEX_KEY]; /* random, never leaves the process */
    _Atomic uint64_t inserts, replays, early_evictions;
    _Atomic uint64_t warned_at; /* (second of the last due warning) + 1; 0 = never */
    _Atomic uint64_t *ring;     /* window_s buckets: (stamp << 32) | live entries with it */
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
    ar->max_sets = nsets;
    ar->nsets = nsets < FIRST_SETS ? nsets : FIRST_SETS;
    ar->nstripes = ar->nsets < MAX_STRIPES ? ar->nsets : MAX_STRIPES;
    ar->window_s = window_s;
    /* the first table (48 KiB) and the stripes' locks (20 KiB) untouched until handshakes
       write them (tg__calloc_table): nothing resident at zero connections (issue 30) */
    ar->table = tg__calloc_table(ar->nsets * ANTIREPLAY_WAYS, sizeof(struct entry));
    ar->locks = tg__calloc_table(ar->nstripes, sizeof(pthread_mutex_t));
    ar->ring = tg__calloc(window_s, sizeof(*ar->ring));
    if (!ar->table || !ar->locks || !ar->ring ||
        crypto_random(ar->index_key, sizeof ar->index_key) != 0)
        goto fail;
    for (size_t i = 0; !tg__zeroed_mutex_ok() && i < ar->nstripes; i++)
        pthread_mutex_init(&ar->locks[i], NULL);
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra); /* a doubling must not wait behind a stream of lookups */
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&ar->resize, &ra);
    pthread_rwlockattr_destroy(&ra);
    return ar;
fail:
    tg__free_table(ar->table, ar->nsets * ANTIREPLAY_WAYS, sizeof(struct entry));
    tg__free_table(ar->locks, ar->nstripes, sizeof(pthread_mutex_t));
    tg__free(ar->ring);
    tg__free(ar);
    return NULL;
}

void antireplay_free(struct antireplay *ar)
{
    if (!ar)
        return;
    for (size_t i = 0; !tg__zeroed_mutex_ok() && i < ar->nstripes; i++)
        pthread_mutex_destroy(&ar->locks[i]);
    pthread_rwlock_destroy(&ar->resize);
    tg__free_table(ar->locks, ar->nstripes, sizeof(pthread_mutex_t));
    tg__free_table(ar->table, ar->nsets * ANTIREPLAY_WAYS, sizeof(struct entry));
    tg__free(ar->ring);
    crypto_wipe(ar, sizeof *ar);
    tg__free(ar);
}

/* Fingerprint of a key: SHA-256 of the cache's random key, the kind and the key, so which
   keys share a set cannot be worked out offline (a chosen set of hellos could otherwise
   push a chosen entry out); it also picks the key's two sets (words_of). If hashing fails
   (OpenSSL broken), fall back to the raw bytes so a replay is still caught for short keys;
   never crash. */
static void fingerprint(const struct antireplay *ar, enum antireplay_kind kind, const void *key,
                        size_t len, uint32_t fp[FP_WORDS])
{
    uint8_t k = (uint8_t)kind, h[32] = {0};
    struct crypto_part parts[3] = {{ar->index_key, sizeof ar->index_key}, {&k, 1}, {key, len}};
    if (crypto_sha256(parts, 3, h) != 0)
        memcpy(h, key, len < sizeof h ? len : sizeof h);
    memcpy(fp, h, FP_BYTES);
}

static bool live(const struct antireplay *ar, const struct entry *e, uint32_t now1)
{
    return e->stamp != 0 && now1 - e->stamp < ar->window_s;
}

/* The two hash words of a fingerprint: its 64 bits, and the same rotated by 32. Their low
   bits (the set and stripe numbers, at most 31 bits: max_entries <= 2^34) are independent
   bits of the hash, and both can be recomputed from an entry. */
static void words_of(const uint32_t fp[FP_WORDS], uint64_t w[2])
{
    memcpy(&w[0], fp, 8);
    w[1] = (w[0] >> 32) | (w[0] << 32);
}

/* Look in one set (lock held). Returns the live matching entry or NULL. */
static struct entry *find(struct antireplay *ar, struct entry *set, const uint32_t fp[FP_WORDS],
                          uint32_t now1)
{
    for (int i = 0; i < ANTIREPLAY_WAYS; i++)
        if (live(ar, &set[i], now1) && memcmp(set[i].fp, fp, FP_BYTES) == 0)
            return &set[i];
    return NULL;
}

/* A free (empty or expired) slot in the less loaded of a key's two sets ("two choices":
   the fullest set stays near the average, so the table fills before a set overflows);
   NULL when both are full of live entries. */
static struct entry *free_slot(const struct antireplay *ar, struct entry *a, struct entry *b,
                               uint32_t now1)
{
    struct entry *fa = NULL, *fb = NULL;
    int la = 0, lb = 0;
    for (int i = 0; i < ANTIREPLAY_WAYS; i++) {
        if (live(ar, &a[i], now1))
            la++;
        else if (!fa)
            fa = &a[i];
        if (live(ar, &b[i], now1))
            lb++;
        else if (!fb)
            fb = &b[i];
    }
    return fa && (!fb || la <= lb) ? fa : fb;
}

/* The oldest live entry of the two sets, to evict when the table may not grow. */
static struct entry *oldest(struct entry *a, struct entry *b, uint32_t now1)
{
    struct entry *old = &a[0];
    for (int i = 0; i < 2 * ANTIREPLAY_WAYS; i++) {
        struct entry *e = i < ANTIREPLAY_WAYS ? &a[i] : &b[i - ANTIREPLAY_WAYS];
        if (now1 - e->stamp > now1 - old->stamp)
            old = e;
    }
    return old;
}

/* The live entries placed in a new table of n sets, or NULL: out of memory (*oom) or an
   entry that finds both its sets full (the caller tries twice the size). */
static struct entry *rebuild(const struct antireplay *ar, size_t n, uint32_t now1, bool *oom)
{
    struct entry *t = tg__calloc_table(n * ANTIREPLAY_WAYS, sizeof(struct entry));
    *oom = t == NULL;
    for (size_t i = 0; t && i < ar->nsets * ANTIREPLAY_WAYS; i++) {
        const struct entry *e = &ar->table[i];
        if (!live(ar, e, now1))
            continue;
        uint64_t w[2];
        words_of(e->fp, w);
        struct entry *slot = free_slot(ar, &t[(w[0] & (n - 1)) * ANTIREPLAY_WAYS],
                                       &t[(w[1] & (n - 1)) * ANTIREPLAY_WAYS], now1);
        if (!slot) {
            tg__free_table(t, n * ANTIREPLAY_WAYS, sizeof(struct entry));
            return NULL;
        }
        *slot = *e;
    }
    return t;
}

/* Grow the table, keeping the live entries (resize lock held for writing). When it cannot
   (out of memory, or no size up to the maximum fits), the table stays as it is from then
   on and inserts evict as at full size. */
static void grow(struct antireplay *ar, uint32_t now1)
{
    bool oom = false;
    for (size_t n = ar->nsets * 2; n <= ar->max_sets && !oom; n *= 2) {
        struct entry *t = rebuild(ar, n, now1, &oom);
        if (t) {
            crypto_wipe(ar->table, ar->nsets * ANTIREPLAY_WAYS * sizeof(struct entry));
            tg__free_table(ar->table, ar->nsets * ANTIREPLAY_WAYS, sizeof(struct entry));
            ar->table = t;
            __atomic_store_n(&ar->nsets, n, __ATOMIC_RELAXED); /* a scrape reads it unlocked */
            return;
        }
    }
    __atomic_store_n(&ar->max_sets, ar->nsets, __ATOMIC_RELAXED);
}

/* Take the resize lock for writing and grow unless another thread already did. */
static void grow_locked(struct antireplay *ar, size_t seen_nsets, uint32_t now1)
{
    pthread_rwlock_wrlock(&ar->resize);
    if (ar->nsets == seen_nsets && ar->nsets < ar->max_sets)
        grow(ar, now1);
    pthread_rwlock_unlock(&ar->resize);
}

/* The live-entry count by insertion second: bucket stamp % window_s holds the count of
   live entries stamped `stamp` (the window's seconds fall in distinct buckets; a bucket
   still tagged with an older second is expired and restarts at the new one). Relaxed
   atomics, so a scrape reads it without any lock. delta is +1 (insert) or -1 (a live
   entry evicted early); a bucket already reused for a later second is left alone (the
   entry it would count is out of the window by then). */
static void ring_add(struct antireplay *ar, uint32_t stamp, int delta)
{
    _Atomic uint64_t *b = &ar->ring[stamp % ar->window_s];
    uint64_t v = atomic_load_explicit(b, memory_order_relaxed), nv;
    do {
        uint32_t tag = (uint32_t)(v >> 32), n = (uint32_t)v;
        if (tag == stamp && (delta > 0 || n > 0))
            nv = ((uint64_t)stamp << 32) | (uint32_t)(n + (uint32_t)delta);
        else if (delta > 0 && (tag == 0 || (int32_t)(stamp - tag) > 0))
            nv = ((uint64_t)stamp << 32) | 1u;
        else
            return;
    } while (!atomic_compare_exchange_weak_explicit(b, &v, nv, memory_order_relaxed,
                                                    memory_order_relaxed));
}

/* Search (and insert into) a key's two sets, their stripes held. Returns whether it was
   live; *e = the slot written, NULL when nothing was (a hit, a lookup, or both sets full
   below the maximum size: the caller grows the table). */
static bool probe(struct antireplay *ar, const uint32_t fp[FP_WORDS], const uint64_t w[2], uint32_t now1,
                  bool insert, bool *early, struct entry **e)
{
    struct entry *a = &ar->table[(w[0] & (ar->nsets - 1)) * ANTIREPLAY_WAYS];
    struct entry *b = &ar->table[(w[1] & (ar->nsets - 1)) * ANTIREPLAY_WAYS];
    *e = NULL;
    if (find(ar, a, fp, now1) || find(ar, b, fp, now1))
        return true;
    if (!insert)
        return false;
    *e = free_slot(ar, a, b, now1);
    if (!*e && ar->nsets >= ar->max_sets) {
        *e = oldest(a, b, now1);
        *early = true;
        ring_add(ar, (*e)->stamp, -1);
    }
    if (*e) {
        memcpy((*e)->fp, fp, FP_BYTES);
        (*e)->stamp = now1;
        ring_add(ar, now1, +1);
    }
    return false;
}

static bool lookup(struct antireplay *ar, enum antireplay_kind kind, const void *key, size_t len,
                   uint64_t now_s, bool insert, bool *early)
{
    uint32_t fp[FP_WORDS];
    uint64_t w[2];
    if (!ar || !key)
        return false;
    fingerprint(ar, kind, key, len, fp);
    words_of(fp, w);
    uint32_t now1 = (uint32_t)now_s + 1u;
    if (now1 == 0)
        now1 = 1;
    size_t s0 = w[0] & (ar->nstripes - 1), s1 = w[1] & (ar->nstripes - 1);
    pthread_mutex_t *first = &ar->locks[s0 < s1 ? s0 : s1], *second = &ar->locks[s0 < s1 ? s1 : s0];
    for (;;) {
        pthread_rwlock_rdlock(&ar->resize);
        pthread_mutex_lock(first);
        if (second != first)
            pthread_mutex_lock(second);
        size_t nsets = ar->nsets;
        struct entry *e;
        bool seen = probe(ar, fp, w, now1, insert, early, &e);
        if (second != first)
            pthread_mutex_unlock(second);
        pthread_mutex_unlock(first);
        pthread_rwlock_unlock(&ar->resize);
        if (!seen && insert && !e) {
            grow_locked(ar, nsets, now1); /* both sets were full of live entries */
            continue;
        }
        if (seen)
            atomic_fetch_add_explicit(&ar->replays, 1, memory_order_relaxed);
        else if (insert)
            atomic_fetch_add_explicit(&ar->inserts, 1, memory_order_relaxed);
        if (*early)
            atomic_fetch_add_explicit(&ar->early_evictions, 1, memory_order_relaxed);
        return seen;
    }
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
    /* no lock: a scrape must never hold up a lookup or a doubling */
    out->capacity = __atomic_load_n(&ar->nsets, __ATOMIC_RELAXED) * ANTIREPLAY_WAYS;
    out->max_capacity = __atomic_load_n(&ar->max_sets, __ATOMIC_RELAXED) * ANTIREPLAY_WAYS;
    out->bytes = sizeof(*ar) + out->capacity * sizeof(struct entry) +
                 ar->nstripes * sizeof(pthread_mutex_t) + ar->window_s * sizeof(*ar->ring);
    out->inserts = atomic_load_explicit(&ar->inserts, memory_order_relaxed);
    out->replays = atomic_load_explicit(&ar->replays, memory_order_relaxed);
    out->early_evictions = atomic_load_explicit(&ar->early_evictions, memory_order_relaxed);
}

uint64_t antireplay_live(struct antireplay *ar, uint64_t now_s)
{
    uint32_t now1 = (uint32_t)now_s + 1u;
    uint64_t n = 0;
    if (!ar)
        return 0;
    if (now1 == 0)
        now1 = 1;
    for (uint32_t i = 0; i < ar->window_s; i++) {
        uint64_t v = atomic_load_explicit(&ar->ring[i], memory_order_relaxed);
        uint32_t stamp = (uint32_t)(v >> 32);
        if (stamp != 0 && now1 - stamp < ar->window_s) /* as live() */
            n += (uint32_t)v;
    }
    return n;
}
