/*
 * seen: recent client addresses per secret label. See seen.h.
 * Invariant: slot[i].a holds n entries with distinct addresses (allocated at first note).
 */
#include "proxy/engine/seen.h"

#include "core/alloc.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct seen_slot {
    pthread_mutex_t mu;
    struct seen_addr *a; /* SEEN_ADDRS entries, or NULL until the first address */
    uint32_t n;
    int64_t last; /* atomic */
};

struct seen {
    uint32_t nslots;
    struct seen_slot slot[];
};

/* Where a zeroed mutex is an initialised one (tg__zeroed_mutex_ok) the zeroed table needs
   no pass over its slots: a slot's pages stay untouched until its label is first noted,
   instead of every slot becoming resident at start (8192 of them, 512 KB; issue 30). */
struct seen *seen_new(uint32_t nslots)
{
    struct seen *s = tg__calloc(1, sizeof *s + (size_t)nslots * sizeof s->slot[0]);
    if (!s)
        return NULL;
    s->nslots = nslots;
    for (uint32_t i = 0; !tg__zeroed_mutex_ok() && i < nslots; i++)
        pthread_mutex_init(&s->slot[i].mu, NULL);
    return s;
}

void seen_free(struct seen *s)
{
    if (!s)
        return;
    bool zero_ok = tg__zeroed_mutex_ok();
    for (uint32_t i = 0; i < s->nslots; i++) {
        if (!zero_ok)
            pthread_mutex_destroy(&s->slot[i].mu);
        tg__free(s->slot[i].a);
    }
    tg__free(s);
}

void seen_note(struct seen *s, uint32_t slot, const uint8_t *addr, int64_t now_s)
{
    if (!s || slot >= s->nslots)
        return;
    struct seen_slot *sl = &s->slot[slot];
    if (__atomic_load_n(&sl->last, __ATOMIC_RELAXED) < now_s)
        __atomic_store_n(&sl->last, now_s, __ATOMIC_RELAXED); /* racing notes: a second apart */
    if (!addr)
        return;
    pthread_mutex_lock(&sl->mu);
    if (!sl->a)
        sl->a = tg__malloc(SEEN_ADDRS * sizeof *sl->a);
    uint32_t i = 0, oldest = 0;
    for (; sl->a && i < sl->n && memcmp(sl->a[i].addr, addr, 16) != 0; i++)
        if (sl->a[i].at < sl->a[oldest].at)
            oldest = i;
    if (sl->a && i == sl->n) { /* a new address: a free entry, or the oldest one's */
        i = sl->n < SEEN_ADDRS ? sl->n++ : oldest;
        memcpy(sl->a[i].addr, addr, 16);
    }
    if (sl->a)
        sl->a[i].at = now_s;
    pthread_mutex_unlock(&sl->mu);
}

static int newest_first(const void *x, const void *y)
{
    int64_t a = ((const struct seen_addr *)x)->at, b = ((const struct seen_addr *)y)->at;
    return a < b ? 1 : a > b ? -1 : memcmp(x, y, 16);
}

size_t seen_get(struct seen *s, uint32_t slot, int64_t now_s, uint32_t window_s,
                struct seen_addr *out, size_t max, int64_t *last)
{
    *last = 0;
    if (!s || slot >= s->nslots)
        return 0;
    struct seen_slot *sl = &s->slot[slot];
    *last = __atomic_load_n(&sl->last, __ATOMIC_RELAXED);
    size_t n = 0, k = 0;
    struct seen_addr tmp[SEEN_ADDRS];
    pthread_mutex_lock(&sl->mu);
    for (uint32_t i = 0; sl->a && i < sl->n; i++)
        if (sl->a[i].at > now_s - (int64_t)window_s) {
            n++;
            if (out && max)
                tmp[k++] = sl->a[i];
        }
    pthread_mutex_unlock(&sl->mu);
    if (out && k) {
        qsort(tmp, k, sizeof tmp[0], newest_first);
        memcpy(out, tmp, (k < max ? k : max) * sizeof tmp[0]);
    }
    return n;
}
