/*
 * arena: a chunked bump allocator with O(1) reset.
 *
 * Everything a decode produces (libtgbot) lives in an arena and dies together at
 * tg__arena_reset(). Chunks are kept across resets, so a warm arena serves a whole decode
 * with zero malloc calls. Requests larger than the chunk size get a chunk of their own,
 * which is also kept for reuse.
 *
 * Alignment: tg__arena_alloc() returns memory aligned for any object (alignof(max_align_t));
 * tg__arena_alloc_align() takes any power of two up to 4096.
 *
 * Accounting: used() is the bytes handed out since the last reset (alignment padding
 * included); reserved() is the bytes held in chunks. max_bytes (0 = unlimited) bounds
 * reserved(): an allocation that would need more returns NULL, so a hostile payload cannot
 * grow an arena without bound.
 *
 * Ownership: the caller owns the tg__arena struct (init/cleanup on caller storage).
 * Thread-safety: none; an arena is used by one thread at a time.
 */
#ifndef TGKIT_CORE_ARENA_H
#define TGKIT_CORE_ARENA_H

#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>

struct tg__arena_chunk {
    struct tg__arena_chunk *next;
    size_t size; /* bytes of data[] */
    size_t used; /* bytes of data[] handed out */
    alignas(max_align_t) unsigned char data[];
};

typedef struct tg__arena {
    struct tg__arena_chunk *head; /* first chunk; reset returns here */
    struct tg__arena_chunk *cur;  /* chunk being filled */
    size_t chunk_size;            /* default data size of a new chunk */
    size_t max_bytes;             /* cap on reserved; 0 = none */
    size_t reserved;              /* sum of chunk sizes */
    size_t used;                  /* bytes handed out since reset */
} tg__arena;

#define TG__ARENA_DEFAULT_CHUNK 16384 /* bytes */

/* chunk_size 0 = TG__ARENA_DEFAULT_CHUNK; max_bytes 0 = unlimited. Allocates nothing. */
void tg__arena_init(tg__arena *a, size_t chunk_size, size_t max_bytes);
/* Frees every chunk; the arena may be init'ed again. NULL-safe. */
void tg__arena_cleanup(tg__arena *a);
/* Forgets every allocation in O(1); chunks are kept for reuse. */
void tg__arena_reset(tg__arena *a);
/* Overwrite every byte handed out since the last reset with byte (debugging: call before
 * tg__arena_reset so stale pointers read garbage). O(used). */
void tg__arena_poison(tg__arena *a, unsigned char byte);

void *tg__arena_alloc_slow(tg__arena *a, size_t size, size_t align);

/* align must be a power of two. Returns NULL on overflow, cap or out-of-memory. */
static inline void *tg__arena_alloc_align(tg__arena *a, size_t size, size_t align)
{
    struct tg__arena_chunk *c = a->cur;
    if (c && align && (align & (align - 1)) == 0 && align <= 4096) {
        uintptr_t base = (uintptr_t)c->data;
        size_t off = (size_t)(((base + c->used + (align - 1)) & ~(uintptr_t)(align - 1)) - base);
        if (off >= c->used && off <= c->size && size <= c->size - off) {
            a->used += size + (off - c->used);
            c->used = off + size;
            return c->data + off;
        }
    }
    return tg__arena_alloc_slow(a, size, align);
}

static inline void *tg__arena_alloc(tg__arena *a, size_t size)
{
    return tg__arena_alloc_align(a, size, alignof(max_align_t));
}

void *tg__arena_zalloc(tg__arena *a, size_t size);
/* Copy of s[0..n) plus a NUL terminator. */
char *tg__arena_strndup(tg__arena *a, const char *s, size_t n);
char *tg__arena_strdup(tg__arena *a, const char *s);
void *tg__arena_memdup(tg__arena *a, const void *p, size_t n);

static inline size_t tg__arena_used(const tg__arena *a)
{
    return a->used;
}

static inline size_t tg__arena_reserved(const tg__arena *a)
{
    return a->reserved;
}

#endif
