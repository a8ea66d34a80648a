/*
 * slab: fixed-size objects on page-aligned slabs of their own. See slab.h.
 *
 * Invariants: s->avail lists exactly the slabs with a free or not yet carved object and at
 * least one in use; s->empty (if any) has none in use and is on no list; a slab's objects
 * are carved in order (carved of per_slab so far), so a fresh slab touches its pages only
 * as they are needed; used counts the objects handed out.
 */
#include "core/slab.h"

#include <stdio.h>
#include <stdlib.h>
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

#define SLAB_MAGIC 0x736c6162u             /* "slab" */
#define FREE_MARK  0x65657266626c7300ull   /* in a free object's second word (checks) */
#define HDR_BYTES  64                      /* the header, rounded so objects stay aligned */

struct tg__slab_page {
    void *free; /* freelist of returned objects (link in their first word) */
    tg__slab *owner;
    struct tg__slab_page *prev, *next; /* in owner->avail */
    uint32_t used, carved;
    uint32_t magic;
};
_Static_assert(sizeof(struct tg__slab_page) <= HDR_BYTES, "slab header fits its room");

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
    s->per_slab = (TG__SLAB_BYTES - HDR_BYTES) / s->obj_size;
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
    *p = (struct tg__slab_page){.owner = s, .magic = SLAB_MAGIC};
    POISON(a + HDR_BYTES, TG__SLAB_BYTES - HDR_BYTES);
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

static void avail_push(tg__slab *s, struct tg__slab_page *p)
{
    p->prev = NULL;
    p->next = s->avail;
    if (s->avail)
        s->avail->prev = p;
    s->avail = p;
}

static void avail_remove(tg__slab *s, struct tg__slab_page *p)
{
    if (p->prev)
        p->prev->next = p->next;
    else
        s->avail = p->next;
    if (p->next)
        p->next->prev = p->prev;
    p->prev = p->next = NULL;
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
    }
    char *obj;
    if (p->free) {
        obj = p->free;
        UNPOISON(obj, s->obj_size);
        p->free = *(void **)(void *)obj;
    } else {
        obj = (char *)p + HDR_BYTES + (size_t)p->carved++ * s->obj_size;
        UNPOISON(obj, s->obj_size);
    }
    ((uint64_t *)(void *)obj)[1] = 0; /* no longer marked free */
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
#if TGKIT_CHECKS
    size_t off = (size_t)((char *)obj - (char *)p);
    if (p->magic != SLAB_MAGIC || p->owner != s || off < HDR_BYTES ||
        (off - HDR_BYTES) % s->obj_size || (off - HDR_BYTES) / s->obj_size >= p->carved)
        slab_fail(s, obj, "not an object of this pool");
    if (((uint64_t *)obj)[1] == FREE_MARK)
        slab_fail(s, obj, "put twice (already free)");
#else
    (void)slab_fail;
#endif
    *(void **)obj = p->free;
    ((uint64_t *)obj)[1] = FREE_MARK;
    POISON((char *)obj + 16, s->obj_size - 16);
    p->free = obj;
    if (p->used-- == s->per_slab)
        avail_push(s, p); /* it was full: it has room again */
    s->in_use--;
    if (p->used)
        return;
    avail_remove(s, p);
    if (!s->empty)
        s->empty = p;
    else
        slab_unmap(s, p);
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
    while (s->avail) {
        struct tg__slab_page *p = s->avail;
        avail_remove(s, p);
        slab_unmap(s, p);
    }
    if (s->empty)
        slab_unmap(s, s->empty);
    s->empty = NULL;
}
