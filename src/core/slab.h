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
 * a bit per object saying which are in use, its places in the pool's lists) sits in its
 * first bytes, the objects follow. A get takes from the first slab with room (the one a put
 * last gave room to), a put goes back to its own slab; a slab whose objects are all free goes
 * back to the system, except one kept empty so a pool hovering at a slab's boundary does not
 * map and unmap.
 *
 * Walk: tg__slab_each visits every object in use, so a caller needs no list of its own
 * through the objects (tgproxy's connections: 16 bytes each, issue 30).
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
    struct tg__slab_page *busy;  /* every slab with an object in use (and, during a walk,
                                    the ones it emptied) */
    size_t obj_size;             /* rounded up to 8 */
    size_t per_slab;             /* objects per slab */
    size_t hdr_bytes;            /* the header with its bits, rounded up to 16 */
    size_t in_use, slabs;
    uint64_t maps;
    uint32_t walks;   /* tg__slab_each calls running (nested ones count) */
    uint32_t drained; /* slabs emptied during a walk, released when the last one ends */
} tg__slab;

/* The start of every slab's header (slab.c): the pool the slab belongs to. */
struct tg__slab_hdr {
    struct tg__slab *owner;
};

/* obj_size 1 .. TG__SLAB_BYTES / 4. Maps nothing yet. */
void tg__slab_init(tg__slab *s, size_t obj_size);
/* Unmaps every slab. NULL-safe. */
void tg__slab_cleanup(tg__slab *s);
/* An object of obj_size bytes (contents undefined, 8-byte aligned), or NULL (no memory). */
void *tg__slab_get(tg__slab *s);
/* Give an object back; NULL is a no-op. */
void tg__slab_put(tg__slab *s, void *obj);
/* Call fn(obj, arg) for every object in use, slab by slab in address order within a slab.
   fn may put any object (obj too) and get new ones: an object put before the walk reaches it
   is not visited, one got during the walk may or may not be. No slab is unmapped while a
   walk runs (an emptied one is released when the outermost walk ends), so fn may close
   whatever it likes. */
void tg__slab_each(tg__slab *s, void (*fn)(void *obj, void *arg), void *arg);
/* The first object in use in tg__slab_each's order, or NULL when none is. */
void *tg__slab_first(const tg__slab *s);
/* The pool obj (an object in use) came from, read from its slab's header: an owner need not
   be stored in each object (tgproxy's connections: conn_w). */
static inline tg__slab *tg__slab_owner(const void *obj)
{
    uintptr_t slab = (uintptr_t)obj & ~(uintptr_t)(TG__SLAB_BYTES - 1);
    return ((const struct tg__slab_hdr *)slab)->owner;
}

#endif
