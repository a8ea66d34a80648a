/*
 * pool: per-thread freelist of fixed-size buffers. See pool.h.
 * Invariant: st.free equals the length of freelist; st.in_use counts buffers handed out.
 */
#include "core/pool.h"

#include "core/alloc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define POOL_MAGIC 0x706f6f6cu /* "pool" */

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
        tg__free(b);
        p->st.free--;
    }
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
        p->freelist = *(void **)b;
        p->st.free--;
    } else {
        b = tg__malloc(p->block_size);
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
    p->st.in_use--;
    if (p->st.free >= p->max_free) {
        tg__free(buf);
        return;
    }
    *(void **)buf = p->freelist;
    p->freelist = buf;
    p->st.free++;
}
