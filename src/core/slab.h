/*
 * slab: fixed-size objects carved from page-aligned slabs of their own, for one thread.
 *
 * tgproxy keeps one struct conn per connection for the connection's whole life, while the
 * buffers and handshake state it uses come and go. From malloc, a long-lived 424-byte
 * object gets a 16-byte header and lands between short-lived 17 KB buffers, so after a burst
 * of handshakes every freed buffer shares its first and last page with a live connection and
 * those pages stay resident (issue 30: 2.4 KB per connection right after 1,000 at once,
 * 0.7 KB at 9,000). A slab packs the objects densely on pages that hold nothing else.
 *
 * Layout: a slab is TG__SLAB_BYTES (64 KiB) from mmap, aligned to its size, so an object's
 * slab is its address rounded down. The slab's header (its freelist, how many are in use,
 * its place in the pool's list of slabs with room) sits in its first bytes, the objects
 * follow. A get takes from the first slab with room (the one a put last gave room to), a put
 * goes back to its own slab; a slab whose objects are all free goes back to the system,
 * except one kept empty so a pool hovering at a slab's boundary does not map and unmap.
 *
 * Stats: in_use, slabs (mapped now), maps (mmap calls so far).
 *
 * Checks: in AddressSanitizer builds free objects are poisoned (a use after put is reported);
 * in Debug and sanitizer builds (TGKIT_CHECKS) a put of an object that is already free, or
 * of an address that is no object of this pool, aborts with a message.
 *
 * Ownership: caller-owned struct; tg__slab_cleanup unmaps every slab (objects still in use
 * are the caller's bug; debug builds abort). Thread-safety: none (one pool per thread).
 */
#ifndef TGKIT_CORE_SLAB_H
#define TGKIT_CORE_SLAB_H

#include <stddef.h>
#include <stdint.h>

#define TG__SLAB_BYTES ((size_t)64 << 10)

struct tg__slab_page;

typedef struct tg__slab {
    struct tg__slab_page *avail; /* slabs with a free object, most recently given room first */
    struct tg__slab_page *empty; /* the one empty slab kept, or NULL */
    size_t obj_size;             /* rounded up to 16 */
    size_t per_slab;             /* objects per slab */
    size_t in_use, slabs;
    uint64_t maps;
} tg__slab;

/* obj_size 1 .. TG__SLAB_BYTES / 4. Maps nothing yet. */
void tg__slab_init(tg__slab *s, size_t obj_size);
/* Unmaps every slab. NULL-safe. */
void tg__slab_cleanup(tg__slab *s);
/* An object of obj_size bytes (contents undefined, 16-byte aligned), or NULL (no memory). */
void *tg__slab_get(tg__slab *s);
/* Give an object back; NULL is a no-op. */
void tg__slab_put(tg__slab *s, void *obj);

#endif
