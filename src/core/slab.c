/*
 * slab: fixed-size objects on page-aligned slabs of their own. See slab.h.
 *
 * Invariants: s->avail lists exactly the slabs with a free or not yet carved object and at
 * least one in use; s->busy lists the slabs with at least one in use, and while a walk runs
 * also those it emptied (s->drained of them, on no other list); s->empty (if any) has none
 * in use and is on no list; a slab's objects are carved in order (carved of per_slab so far),
 * so a fresh slab touches its pages only as they are needed; used counts the objects handed
 * out, and live[] has exactly their bits set.
 */
#include "core/slab.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SLAB_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define SLAB_ASAN 1
#endif
#ifdef SLAB_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n)   ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n)   ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define SLAB_MAGIC 0x736c6162u /* "slab" */
enum { L_AVAIL, L_BUSY };      /* a slab's two lists */

struct tg__slab_page {
    struct tg__slab_hdr h; /* first: tg__slab_owner reads it */
    void *free;            /* freelist of returned objects (link in their first word) */
    struct tg__slab_page *prev[2], *next[2]; /* in owner->avail (L_AVAIL), owner->busy */
    uint32_t used, carved;
    uint32_t magic;
    uint64_t live[]; /* bit i: object i is in use (per_slab bits) */
};

/* The header of a slab of n objects: the fixed part and n bits, so objects stay aligned. */
static size_t hdr_bytes(size_t n)
{
    return (offsetof(struct tg__slab_page, live) + (n + 63) / 64 * 8 + 15) & ~(size_t)15;
}

static void slab_fail(const tg__slab *s, const void *obj, const char *what)
{
    fprintf(stderr, "tg__slab: object %p of pool %p: %s\n", obj, (const void *)s, what);
    abort();
}

void tg__slab_init(tg__slab *s, size_t obj_size)
{
    *s = (tg__slab){0};
    obj_size = obj_size < 16 ? 16 : obj_size;
    s->obj_size = (obj_size + 7) & ~(size_t)7;
    size_t n = (TG__SLAB_BYTES - offsetof(struct tg__slab_page, live)) / s->obj_size;
    while (hdr_bytes(n) + n * s->obj_size > TG__SLAB_BYTES)
        n--;
    s->per_slab = n;
    s->hdr_bytes = hdr_bytes(n);
}

static struct tg__slab_page *slab_map(tg__slab *s)
{
    /* twice the size, then the unaligned head and tail go back: aligned to its size */
    size_t n = 2 * TG__SLAB_BYTES;
    char *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    char *a = (char *)(((uintptr_t)m + TG__SLAB_BYTES - 1) & ~(uintptr_t)(TG__SLAB_BYTES - 1));
    if (a > m)
        munmap(m, (size_t)(a - m));
    if (a + TG__SLAB_BYTES < m + n)
        munmap(a + TG__SLAB_BYTES, (size_t)(m + n - (a + TG__SLAB_BYTES)));
    struct tg__slab_page *p = (struct tg__slab_page *)(void *)a;
    *p = (struct tg__slab_page){.h.owner = s, .magic = SLAB_MAGIC};
    memset(p->live, 0, s->hdr_bytes - offsetof(struct tg__slab_page, live));
    POISON(a + s->hdr_bytes, TG__SLAB_BYTES - s->hdr_bytes);
    s->slabs++;
    s->maps++;
    return p;
}

static void slab_unmap(tg__slab *s, struct tg__slab_page *p)
{
    UNPOISON(p, TG__SLAB_BYTES);
    p->magic = 0;
    munmap(p, TG__SLAB_BYTES);
    s->slabs--;
}

static void list_push(struct tg__slab_page **head, struct tg__slab_page *p, int k)
{
    p->prev[k] = NULL;
    p->next[k] = *head;
    if (*head)
        (*head)->prev[k] = p;
    *head = p;
}

static void list_remove(struct tg__slab_page **head, struct tg__slab_page *p, int k)
{
    if (p->prev[k])
        p->prev[k]->next[k] = p->next[k];
    else
        *head = p->next[k];
    if (p->next[k])
        p->next[k]->prev[k] = p->prev[k];
    p->prev[k] = p->next[k] = NULL;
}

static void avail_push(tg__slab *s, struct tg__slab_page *p)
{
    list_push(&s->avail, p, L_AVAIL);
}

static void avail_remove(tg__slab *s, struct tg__slab_page *p)
{
    list_remove(&s->avail, p, L_AVAIL);
}

/* p has no object in use any more (and no walk runs): keep it as the empty one or unmap. */
static void slab_release(tg__slab *s, struct tg__slab_page *p)
{
    list_remove(&s->busy, p, L_BUSY);
    if (!s->empty)
        s->empty = p;
    else
        slab_unmap(s, p);
}

static size_t obj_index(const tg__slab *s, const struct tg__slab_page *p, const void *obj)
{
    return (size_t)((const char *)obj - (const char *)p - s->hdr_bytes) / s->obj_size;
}

void *tg__slab_get(tg__slab *s)
{
    struct tg__slab_page *p = s->avail;
    if (!p) {
        if ((p = s->empty))
            s->empty = NULL;
        else if (!(p = slab_map(s)))
            return NULL;
        avail_push(s, p);
        list_push(&s->busy, p, L_BUSY);
    }
    char *obj;
    if (p->free) {
        obj = p->free;
        UNPOISON(obj, s->obj_size);
        p->free = *(void **)(void *)obj;
    } else {
        obj = (char *)p + s->hdr_bytes + (size_t)p->carved++ * s->obj_size;
        UNPOISON(obj, s->obj_size);
    }
    size_t i = obj_index(s, p, obj);
    p->live[i / 64] |= (uint64_t)1 << (i % 64);
    if (++p->used == s->per_slab)
        avail_remove(s, p);
    s->in_use++;
    return obj;
}

void tg__slab_put(tg__slab *s, void *obj)
{
    if (!obj)
        return;
    struct tg__slab_page *p =
        (struct tg__slab_page *)(void *)((uintptr_t)obj & ~(uintptr_t)(TG__SLAB_BYTES - 1));
    size_t i = obj_index(s, p, obj);
#if TGKIT_CHECKS
    size_t off = (size_t)((char *)obj - (char *)p);
    if (p->magic != SLAB_MAGIC || p->h.owner != s || off < s->hdr_bytes ||
        (off - s->hdr_bytes) % s->obj_size || i >= p->carved)
        slab_fail(s, obj, "not an object of this pool");
    if (!(p->live[i / 64] >> (i % 64) & 1))
        slab_fail(s, obj, "put twice (already free)");
#else
    (void)slab_fail;
#endif
    p->live[i / 64] &= ~((uint64_t)1 << (i % 64));
    *(void **)obj = p->free;
    POISON((char *)obj + sizeof(void *), s->obj_size - sizeof(void *));
    p->free = obj;
    if (p->used-- == s->per_slab)
        avail_push(s, p); /* it was full: it has room again */
    s->in_use--;
    if (p->used)
        return;
    avail_remove(s, p);
    if (s->walks)
        s->drained++; /* a walk may stand in it or go on from it: released when it ends */
    else
        slab_release(s, p);
}

void tg__slab_each(tg__slab *s, void (*fn)(void *obj, void *arg), void *arg)
{
    s->walks++;
    /* a slab got during the walk goes to the list's head, before this one: not visited */
    for (struct tg__slab_page *p = s->busy; p; p = p->next[L_BUSY]) {
        char *base = (char *)p + s->hdr_bytes;
        for (size_t i = 0; i < p->carved; i++)
            if (p->live[i / 64] >> (i % 64) & 1)
                fn(base + i * s->obj_size, arg);
    }
    if (--s->walks || !s->drained)
        return;
    for (struct tg__slab_page *p = s->busy, *next; p && s->drained; p = next) {
        next = p->next[L_BUSY];
        if (!p->used) {
            s->drained--;
            slab_release(s, p);
        }
    }
}

void *tg__slab_first(const tg__slab *s)
{
    for (const struct tg__slab_page *p = s->busy; p; p = p->next[L_BUSY])
        for (size_t i = 0; i < p->carved; i++)
            if (p->live[i / 64] >> (i % 64) & 1)
                return (char *)p + s->hdr_bytes + i * s->obj_size;
    return NULL;
}

void tg__slab_cleanup(tg__slab *s)
{
    if (!s)
        return;
#if TGKIT_CHECKS
    if (s->in_use) {
        fprintf(stderr, "tg__slab: cleanup with %zu objects still in use\n", s->in_use);
        abort();
    }
#endif
    while (s->busy) {
        struct tg__slab_page *p = s->busy;
        list_remove(&s->busy, p, L_BUSY);
        slab_unmap(s, p);
    }
    s->avail = NULL;
    if (s->empty)
        slab_unmap(s, s->empty);
    s->empty = NULL;
}
