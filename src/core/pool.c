/*
 * pool: per-thread freelist of fixed-size buffers. See pool.h.
 * Invariant: st.free equals the length of freelist; st.in_use counts buffers handed out.
 *
 * Item check (TGKIT_CHECKS: Debug and sanitizer builds): every buffer has a hidden header
 * in front of it saying whose it is and whether it is handed out or free; a put of a buffer
 * that is already free (a double put), or that another pool handed out, aborts with a
 * message, and so does a get that finds a cached buffer no longer marked free (its header
 * was overwritten). Release builds have no header.
 */
#include "core/pool.h"

#include "core/alloc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define POOL_MAGIC 0x706f6f6cu /* "pool" */

#if TGKIT_CHECKS
#define ITEM_LIVE 0x6c697665u /* "live": handed out */
#define ITEM_FREE 0x66726565u /* "free": in the freelist */
struct item_hdr {
    const tg__pool *pool;
    uint32_t state;
    uint32_t pad;
} __attribute__((aligned(16)));
#define HDR(b) ((struct item_hdr *)(void *)(b)-1)

static void item_fail(const tg__pool *p, const void *b, const char *what)
{
    fprintf(stderr, "tg__pool: item %p of pool %p: %s\n", b, (const void *)p, what);
    abort();
}

/* b comes from p and is in state want; then it is in state next. */
static void item_move(const tg__pool *p, void *b, uint32_t want, uint32_t next)
{
    struct item_hdr *h = HDR(b);
    if (h->pool != p)
        item_fail(p, b, "not this pool's item");
    if (h->state != want)
        item_fail(p, b,
                  want == ITEM_LIVE ? (h->state == ITEM_FREE ? "put twice (already free)"
                                                             : "put but not handed out")
                                    : "cached item not marked free (header overwritten)");
    h->state = next;
}

static void *item_alloc(const tg__pool *p)
{
    struct item_hdr *h = tg__malloc(sizeof *h + p->block_size);
    if (!h)
        return NULL;
    h->pool = p;
    h->state = ITEM_LIVE;
    return h + 1;
}

static void item_free(void *b)
{
    if (b)
        tg__free(HDR(b));
}
#else
#define item_move(p, b, want, next) ((void)0)
#define item_alloc(p)               tg__malloc((p)->block_size)
#define item_free(b)                tg__free(b)
#endif

#ifndef NDEBUG
static void check(const tg__pool *p)
{
    if (p->magic != POOL_MAGIC || p->owner != (unsigned long)pthread_self()) {
        fprintf(stderr, "tg__pool: used before init or from a foreign thread\n");
        abort();
    }
}
#else
#define check(p) ((void)0)
#endif

void tg__pool_init(tg__pool *p, size_t block_size, size_t max_free)
{
    p->freelist = NULL;
    p->block_size = block_size < sizeof(void *) ? sizeof(void *) : block_size;
    p->max_free = max_free ? max_free : SIZE_MAX;
    p->st = (tg__pool_stats){0};
#ifndef NDEBUG
    p->owner = (unsigned long)pthread_self();
    p->magic = POOL_MAGIC;
#endif
}

void tg__pool_trim(tg__pool *p, size_t keep)
{
    check(p);
    while (p->st.free > keep && p->freelist) {
        void *b = p->freelist;
        p->freelist = *(void **)b;
        item_free(b);
        p->st.free--;
    }
}

size_t tg__pool_decay(tg__pool *p, size_t floor)
{
    check(p);
    size_t unused = p->st.free_low < p->st.free ? p->st.free_low : p->st.free;
    size_t room = p->st.free > floor ? p->st.free - floor : 0;
    size_t n = unused < room ? unused : room;
    tg__pool_trim(p, p->st.free - n);
    p->st.decayed += n;
    p->st.free_low = p->st.free;
    return n * p->block_size;
}

void tg__pool_cleanup(tg__pool *p)
{
    if (!p)
        return;
    tg__pool_trim(p, 0);
#ifndef NDEBUG
    if (p->st.in_use) {
        fprintf(stderr, "tg__pool: cleanup with %zu buffers still in use\n", p->st.in_use);
        abort();
    }
    p->magic = 0;
#endif
}

void *tg__pool_get(tg__pool *p)
{
    check(p);
    void *b = p->freelist;
    if (b) {
        item_move(p, b, ITEM_FREE, ITEM_LIVE);
        p->freelist = *(void **)b;
        if (--p->st.free < p->st.free_low)
            p->st.free_low = p->st.free;
    } else {
        b = item_alloc(p);
        if (!b)
            return NULL;
        p->st.allocs++;
    }
    if (++p->st.in_use > p->st.high_water)
        p->st.high_water = p->st.in_use;
    return b;
}

void tg__pool_put(tg__pool *p, void *buf)
{
    if (!buf)
        return;
    check(p);
    item_move(p, buf, ITEM_LIVE, ITEM_FREE);
    p->st.in_use--;
    if (p->st.free >= p->max_free) {
        item_free(buf);
        return;
    }
    *(void **)buf = p->freelist;
    p->freelist = buf;
    p->st.free++;
}
