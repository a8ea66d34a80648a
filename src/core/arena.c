/*
 * arena: slow path and helpers. See arena.h for the contract.
 * Invariant: chunks form a list from head; every chunk after cur is unused since the last
 * reset (its used field is stale and is zeroed when cur moves onto it).
 */
#include "core/arena.h"

#include "core/alloc.h"

#include <string.h>

void tg__arena_init(tg__arena *a, size_t chunk_size, size_t max_bytes)
{
    memset(a, 0, sizeof *a);
    a->chunk_size = chunk_size ? chunk_size : TG__ARENA_DEFAULT_CHUNK;
    a->max_bytes = max_bytes;
}

void tg__arena_cleanup(tg__arena *a)
{
    if (!a)
        return;
    struct tg__arena_chunk *c = a->head;
    while (c) {
        struct tg__arena_chunk *next = c->next;
        tg__free(c);
        c = next;
    }
    a->head = a->cur = NULL;
    a->reserved = a->used = 0;
}

void tg__arena_reset(tg__arena *a)
{
    a->cur = a->head;
    if (a->head)
        a->head->used = 0;
    a->used = 0;
}

void tg__arena_poison(tg__arena *a, unsigned char byte)
{
    /* Chunks after cur are unused since the last reset (see the invariant above). */
    for (struct tg__arena_chunk *c = a->head; c; c = c->next) {
        memset(c->data, byte, c->used);
        if (c == a->cur)
            break;
    }
}

static int fits(const struct tg__arena_chunk *c, size_t size, size_t align, size_t *off)
{
    uintptr_t base = (uintptr_t)c->data;
    size_t o = (size_t)(((base + c->used + (align - 1)) & ~(uintptr_t)(align - 1)) - base);
    if (o < c->used || o > c->size || size > c->size - o)
        return 0;
    *off = o;
    return 1;
}

static void *take(tg__arena *a, struct tg__arena_chunk *c, size_t off, size_t size)
{
    a->used += size + (off - c->used);
    c->used = off + size;
    a->cur = c;
    return c->data + off;
}

void *tg__arena_alloc_slow(tg__arena *a, size_t size, size_t align)
{
    if (align == 0 || (align & (align - 1)) != 0 || align > 4096)
        return NULL;
    size_t off;
    /* Reuse the next kept chunk if it is big enough (the common case after a reset). */
    if (a->cur && a->cur->next) {
        struct tg__arena_chunk *n = a->cur->next;
        n->used = 0;
        if (fits(n, size, align, &off))
            return take(a, n, off, size);
    }
    size_t need = size + (align > alignof(max_align_t) ? align : 0);
    if (need < size)
        return NULL;
    size_t data = need > a->chunk_size ? need : a->chunk_size;
    if (data > SIZE_MAX - sizeof(struct tg__arena_chunk))
        return NULL;
    if (a->max_bytes && (data > a->max_bytes || a->reserved > a->max_bytes - data))
        return NULL;
    struct tg__arena_chunk *c = tg__malloc(sizeof *c + data);
    if (!c)
        return NULL;
    c->size = data;
    c->used = 0;
    if (a->cur) {
        c->next = a->cur->next; /* keep the skipped chunk for a later request */
        a->cur->next = c;
    } else {
        c->next = a->head;
        a->head = c;
    }
    a->reserved += data;
    if (!fits(c, size, align, &off))
        return NULL; /* unreachable: need covers size and alignment */
    return take(a, c, off, size);
}

void *tg__arena_zalloc(tg__arena *a, size_t size)
{
    void *p = tg__arena_alloc(a, size);
    if (p)
        memset(p, 0, size);
    return p;
}

char *tg__arena_strndup(tg__arena *a, const char *s, size_t n)
{
    if (n == SIZE_MAX)
        return NULL;
    char *d = tg__arena_alloc_align(a, n + 1, 1);
    if (!d)
        return NULL;
    if (n)
        memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *tg__arena_strdup(tg__arena *a, const char *s)
{
    return s ? tg__arena_strndup(a, s, strlen(s)) : NULL;
}

void *tg__arena_memdup(tg__arena *a, const void *p, size_t n)
{
    void *d = tg__arena_alloc(a, n ? n : 1);
    if (d && n)
        memcpy(d, p, n);
    return d;
}
