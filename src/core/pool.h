/*
 * pool: a freelist of fixed-size buffers for one thread.
 *
 * tgproxy gives each worker thread one pool of I/O buffers; a connection takes a buffer only
 * while bytes are in flight and returns it as soon as it drains, so an idle connection holds
 * none. Returned buffers go on a LIFO freelist (cache-warm reuse); beyond max_free cached
 * buffers, returned ones go back to the system (the low watermark that stops a past burst
 * from pinning memory forever).
 *
 * Stats: in_use, free, high_water (most in use at once), and allocs (calls that reached
 * malloc), so a benchmark can prove the hot path is allocation-free once warm.
 *
 * Decay: max_free bounds the cache, but a burst still leaves up to max_free buffers cached
 * (and resident) long after it. tg__pool_decay(), called periodically by the owner, frees
 * the cached buffers no get took during the last period (free_low: the fewest cached since
 * the previous call), down to a floor, so a past burst's high-water mark goes back to the
 * system within two periods while a steady load keeps what it reuses.
 *
 * Ownership: caller-owned struct. Every buffer taken must be returned to the same pool before
 * tg__pool_cleanup(). Thread-safety: none by design (one pool per thread, no locks); debug
 * builds record the owning thread and abort on cross-thread use. Debug and sanitizer builds
 * (TGKIT_CHECKS) also mark each buffer handed out or free and abort on a double put or a
 * put into the wrong pool (pool.c).
 */
#ifndef TGKIT_CORE_POOL_H
#define TGKIT_CORE_POOL_H

#include <stddef.h>
#include <stdint.h>

typedef struct tg__pool_stats {
    size_t in_use;
    size_t free;
    size_t high_water;
    size_t free_low; /* fewest cached since the last tg__pool_decay (or init) */
    uint64_t allocs;
    uint64_t decayed; /* buffers tg__pool_decay freed */
} tg__pool_stats;

typedef struct tg__pool {
    void *freelist;
    size_t block_size; /* bytes per buffer */
    size_t max_free;   /* buffers kept cached at most */
    tg__pool_stats st;
#ifndef NDEBUG
    unsigned long owner; /* thread that called init */
    uint32_t magic;
#endif
} tg__pool;

/* block_size >= sizeof(void *); max_free 0 = keep everything returned. Allocates nothing. */
void tg__pool_init(tg__pool *p, size_t block_size, size_t max_free);
/* Frees cached buffers. Buffers still in use are the caller's bug (debug builds abort). */
void tg__pool_cleanup(tg__pool *p);
/* A buffer of block_size bytes (contents undefined), or NULL when out of memory. */
void *tg__pool_get(tg__pool *p);
/* Give a buffer back; NULL is a no-op. */
void tg__pool_put(tg__pool *p, void *buf);
/* Release cached buffers down to keep. */
void tg__pool_trim(tg__pool *p, size_t keep);
/* Free the cached buffers unused since the last call (at most free_low of them), keeping at
   least floor cached; then start a new period. Returns the bytes freed. */
size_t tg__pool_decay(tg__pool *p, size_t floor);
static inline tg__pool_stats tg__pool_stats_get(const tg__pool *p)
{
    return p->st;
}

#endif
