/*
 * seen: recent client addresses per secret label. See seen.h.
 *
 * A slot's table (allocated at its first address) holds up to SEEN_ADDRS entries on a list
 * from the most recently noted to the least (prev/next indices), and an open-addressing index
 * of SEEN_BUCKETS buckets (linear probing, at most half full) from an address to its entry.
 * A note is one probe sequence and a move to the list's head instead of a scan of every entry
 * (256 memcmps per authenticated handshake at the cap); the entry replaced at the cap is the
 * list's tail, and deleting it from the index shifts the following buckets back, so no
 * tombstones build up. The index hashes with a random key per table set: the addresses are the
 * clients', and a client choosing them must not choose long probe sequences.
 *
 * Invariants, per slot with a table: n entries, distinct addresses, each on the list once
 * (head .. tail) and in exactly one bucket, reached from its home bucket home[e] without
 * passing an empty one; n <= SEEN_ADDRS < SEEN_BUCKETS.
 */
#include "proxy/engine/seen.h"

#include "core/alloc.h"
#include "proxy/wire/crypto.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define SEEN_BUCKETS 512 /* power of two, twice SEEN_ADDRS: probe sequences stay short */
#define NIL          UINT16_MAX

struct seen_tab {
    struct seen_addr a[SEEN_ADDRS];
    uint16_t prev[SEEN_ADDRS], next[SEEN_ADDRS]; /* the list; NIL at its ends */
    uint16_t home[SEEN_ADDRS];                   /* each entry's home bucket */
    uint16_t bucket[SEEN_BUCKETS];               /* entry index + 1; 0 = empty */
    uint16_t head, tail, n;
};

struct seen_slot {
    pthread_mutex_t mu;
    struct seen_tab *t; /* NULL until the first address */
    int64_t last;       /* atomic */
};

struct seen {
    uint64_t key[2]; /* the index's hash key */
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
    if (crypto_random(s->key, sizeof s->key) != 0) { /* no kernel randomness: still distinct */
        s->key[0] = (uint64_t)(uintptr_t)s * 0x9e3779b97f4a7c15ull;
        s->key[1] = ~s->key[0];
    }
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
        tg__free(s->slot[i].t);
    }
    tg__free(s);
}

/* The home bucket of a 16-byte address: both halves mixed with the key, then multiplied
   (the high bits carry every input bit). */
static uint16_t home_of(const struct seen *s, const uint8_t *addr)
{
    uint64_t lo, hi;
    memcpy(&lo, addr, 8);
    memcpy(&hi, addr + 8, 8);
    uint64_t h = (lo ^ s->key[0]) * 0xff51afd7ed558ccdull;
    h = (h ^ (h >> 29) ^ hi ^ s->key[1]) * 0xc4ceb9fe1a85ec53ull;
    return (uint16_t)((h >> 40) & (SEEN_BUCKETS - 1));
}

static void unlink_entry(struct seen_tab *t, uint16_t e)
{
    uint16_t p = t->prev[e], q = t->next[e];
    if (p != NIL)
        t->next[p] = q;
    else
        t->head = q;
    if (q != NIL)
        t->prev[q] = p;
    else
        t->tail = p;
}

static void push_head(struct seen_tab *t, uint16_t e)
{
    t->prev[e] = NIL;
    t->next[e] = t->head;
    if (t->head != NIL)
        t->prev[t->head] = e;
    t->head = e;
    if (t->tail == NIL)
        t->tail = e;
}

/* Take entry e out of the index: empty its bucket, then move back every following entry of
   the run that its home allows (one whose home lies cyclically in (hole, j] must stay). */
static void index_delete(struct seen_tab *t, uint16_t e)
{
    const uint16_t mask = SEEN_BUCKETS - 1;
    uint16_t hole = t->home[e];
    for (unsigned p = 0; p < SEEN_BUCKETS && t->bucket[hole] != e + 1; p++)
        hole = (uint16_t)((hole + 1) & mask);
    if (t->bucket[hole] != e + 1)
        return; /* not indexed: cannot happen while the invariants hold */
    uint16_t j = hole;
    for (unsigned p = 0; p < SEEN_BUCKETS; p++) {
        j = (uint16_t)((j + 1) & mask);
        if (!t->bucket[j])
            break;
        uint16_t k = t->home[t->bucket[j] - 1];
        bool stays = hole <= j ? hole < k && k <= j : hole < k || k <= j;
        if (!stays) {
            t->bucket[hole] = t->bucket[j];
            hole = j;
        }
    }
    t->bucket[hole] = 0;
}

static struct seen_tab *tab_new(void)
{
    struct seen_tab *t = tg__malloc(sizeof *t);
    if (!t)
        return NULL;
    memset(t->bucket, 0, sizeof t->bucket);
    t->head = t->tail = NIL;
    t->n = 0;
    return t;
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
    const uint16_t mask = SEEN_BUCKETS - 1, home = home_of(s, addr);
    pthread_mutex_lock(&sl->mu);
    struct seen_tab *t = sl->t ? sl->t : (sl->t = tab_new());
    if (!t)
        goto out;
    uint16_t b = home;
    unsigned p = 0;
    for (; p < SEEN_BUCKETS && t->bucket[b]; p++, b = (uint16_t)((b + 1) & mask))
        if (memcmp(t->a[t->bucket[b] - 1].addr, addr, 16) == 0)
            break;
    uint16_t e;
    if (p < SEEN_BUCKETS && t->bucket[b]) { /* known: now the most recent */
        e = (uint16_t)(t->bucket[b] - 1);
        if (e != t->head) {
            unlink_entry(t, e);
            push_head(t, e);
        }
        t->a[e].at = now_s;
        goto out;
    }
    if (t->n < SEEN_ADDRS) {
        e = t->n++;
    } else { /* full: the least recently noted address makes room */
        e = t->tail;
        unlink_entry(t, e);
        index_delete(t, e);
        for (b = home, p = 0; p < SEEN_BUCKETS && t->bucket[b]; p++) /* the shift moved holes */
            b = (uint16_t)((b + 1) & mask);
    }
    memcpy(t->a[e].addr, addr, 16);
    t->a[e].at = now_s;
    t->home[e] = home;
    t->bucket[b] = (uint16_t)(e + 1); /* empty: the index is never more than half full */
    push_head(t, e);
out:
    pthread_mutex_unlock(&sl->mu);
}

size_t seen_get(struct seen *s, uint32_t slot, int64_t now_s, uint32_t window_s,
                struct seen_addr *out, size_t max, int64_t *last)
{
    *last = 0;
    if (!s || slot >= s->nslots)
        return 0;
    struct seen_slot *sl = &s->slot[slot];
    *last = __atomic_load_n(&sl->last, __ATOMIC_RELAXED);
    size_t n = 0;
    int64_t after = now_s - (int64_t)window_s;
    pthread_mutex_lock(&sl->mu);
    const struct seen_tab *t = sl->t;
    /* the whole list, not up to the first old entry: a wall clock set back leaves later
       notes with earlier times ahead of entries still inside the window */
    for (uint16_t e = t ? t->head : NIL, k = 0; e != NIL && k < SEEN_ADDRS; e = t->next[e], k++)
        if (t->a[e].at > after) {
            if (out && n < max)
                out[n] = t->a[e];
            n++;
        }
    pthread_mutex_unlock(&sl->mu);
    return n;
}
