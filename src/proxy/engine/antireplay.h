/*
 * antireplay: the bounded "seen recently" set of handshakes (brief 5.1, section 9 #11/#12).
 *
 * Keys: the first 16 bytes of a FakeTLS client random (ANTIREPLAY_TLS) and bytes 8..56 of
 * an obfs2 header (ANTIREPLAY_OBFS2). Each key is reduced to a 64-bit fingerprint, which
 * also names its two sets, by SHA-256 (index key || kind byte || key), where the index key
 * is 16 random bytes drawn per cache (per process): nobody outside can tell which handshakes
 * share a set, so authenticated hellos chosen offline cannot crowd a chosen entry out of
 * its set, nor aim a collision at one. Entries expire window_s seconds after insertion.
 *
 * False "seen" (issue 30 took the fingerprint from 96 to 64 bits, 16 to 12 bytes an entry):
 * a lookup compares with the live entries of its two sets, at most 2 x ANTIREPLAY_WAYS. An
 * entry sits in a set because log2(sets) bits of one of its two hash words equal the set
 * number, so it matches a fresh key by chance with probability 2^-(64 - log2(sets)); per
 * lookup that is at most 16 x sets / 2^64 = 2 x capacity / 2^64. With the default bound
 * (1,048,576 entries) at most 2^-43 (1.1e-13) per handshake: at 1,000 handshakes a second
 * day and night, one expected every ~280 years; at the largest bound (2^26 entries) 2^-37,
 * one in ~4 years at that rate. What one costs: a legitimate handshake taken for a replay
 * (fronted like any replay; the client's next attempt has a new random). A replay is never
 * missed because of the shorter fingerprint.
 *
 * Layout: a set-associative table, ANTIREPLAY_WAYS entries per set, 12 bytes per entry
 * (fingerprint + insertion time), number of sets a power of two. A key may go to either of
 * two sets chosen by its fingerprint, and goes to the less loaded one. When both are full
 * of live entries the table doubles while it is below its maximum; at the maximum, an
 * insert replaces an expired entry if there is one, else the oldest of the two sets
 * (counted as an early eviction: the per-set approximation of "oldest first"; the operator
 * should raise max_entries).
 *
 * Memory: sized to the load, since a hash table touches its pages at random: it starts at
 * 4096 entries (48 KiB; fewer if max_entries is smaller) and doubles when a key finds both
 * its sets full, which two choices put off until the table is mostly full, up to
 * max_entries rounded up to ways x power-of-two sets (at most 2x max_entries); e.g. the
 * default 1,048,576 entries use at most 12 MiB, 18,000 live entries 384 KiB.
 * It never shrinks. Plus one mutex per stripe (<= 1024 stripes, fixed at creation) and 8
 * bytes per second of the window for the live-entry count (2.4 KiB for 300 s).
 * Doubling holds a resize lock (taken for reading by every lookup) while it copies the
 * live entries (at most 12 MiB, once per doubling).
 *
 * Thread-safety: one cache is shared by all worker threads. Sets are guarded by striped
 * mutexes (set i uses stripe i mod stripes; a lookup takes its two sets' stripes in order),
 * so threads contend only when they hit the same stripe; statistics are relaxed atomics.
 * Time is passed in (monotonic seconds) so tests can drive it.
 */
#ifndef TGPROXY_ANTIREPLAY_H
#define TGPROXY_ANTIREPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ANTIREPLAY_WAYS 8

enum antireplay_kind { ANTIREPLAY_TLS = 1, ANTIREPLAY_OBFS2 = 2 };

struct antireplay;

struct antireplay_stats {
    size_t capacity;          /* entries now */
    size_t max_capacity;      /* entries the table may grow to */
    size_t bytes;             /* memory held by the table and the locks */
    uint64_t inserts;         /* keys added */
    uint64_t replays;         /* lookups that found a live entry */
    uint64_t early_evictions; /* live entries dropped because their set was full */
};

/* max_entries >= 1 (rounded up as described), window_s >= 1. NULL on ENOMEM, bad args or
   no random bytes for the index key. */
struct antireplay *antireplay_new(size_t max_entries, uint32_t window_s);
/* NULL-safe. No other thread may use the cache any more. */
void antireplay_free(struct antireplay *ar);

/* Is a live entry for key present? (no insertion) */
bool antireplay_seen(struct antireplay *ar, enum antireplay_kind kind, const void *key, size_t len,
                     uint64_t now_s);
/* Add-if-absent, atomically: returns true if key was already live (a replay; nothing
   changes), false if it has now been inserted. */
bool antireplay_add(struct antireplay *ar, enum antireplay_kind kind, const void *key, size_t len,
                    uint64_t now_s);

/* antireplay_add that also says whether the insertion dropped a live entry (a full set:
   an early eviction, also counted in the stats). *early_evicted is always set. */
bool antireplay_insert(struct antireplay *ar, enum antireplay_kind kind, const void *key,
                       size_t len, uint64_t now_s, bool *early_evicted);

/* Should the caller warn about early evictions now? True at most once a minute across all
   threads, and only once there has been one; *total = early evictions so far. */
bool antireplay_warn_due(struct antireplay *ar, uint64_t now_s, uint64_t *total);

/* Counters and sizes; takes no lock (relaxed reads), so any thread may call it while
   workers insert. */
void antireplay_get_stats(struct antireplay *ar, struct antireplay_stats *out);

/* Live entries at now_s (monotonic seconds, the clock inserts are given): handshakes
   recorded within the last window_s seconds less those evicted early. Kept per insertion
   second in window_s relaxed atomic buckets (8 bytes each), so it takes no lock and costs
   window_s loads; exact unless the times callers pass differ by a whole window. 0 for NULL. */
uint64_t antireplay_live(struct antireplay *ar, uint64_t now_s);

#endif
