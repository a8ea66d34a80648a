/*
 * stats: per-thread counters of the proxy engine, declared once in an X-macro list.
 *
 * Each worker owns one struct stats and is its only writer (stats_add is a relaxed
 * load + store, no lock prefix, no shared cache line); any thread may read a snapshot with
 * stats_sum(), which loads every field relaxed. The list yields the struct fields, the names
 * for logs and the help text a metrics exporter needs (STATS_FOREACH).
 *
 * Thread-safety: as above; counters are monotonic except the gauges marked in their help.
 */
#ifndef TGPROXY_STATS_H
#define TGPROXY_STATS_H

#include <stddef.h>
#include <stdint.h>

/* X(name, help) */
#define STATS_LIST(X)                                                                              \
    X(accepted, "connections accepted")                                                            \
    X(rejected_limit, "connections closed at accept: concurrency limit (a race between workers)")  \
    X(limit_pauses, "times accepting paused at the concurrency limit")                              \
    X(active, "gauge: connections open on this worker")                                            \
    X(handshake_ok, "client handshakes authenticated")                                             \
    X(handshake_bad, "client handshakes that failed validation")                                   \
    X(handshake_timeout, "connections past the handshake deadline")                                \
    X(limit_expired, "handshakes fronted: the secret's `expires` time has passed")                 \
    X(limit_connections, "handshakes fronted: the secret's max-connections were open")             \
    X(limit_unique_ips, "handshakes fronted: a new client IP over the secret's max-unique-ips")    \
    X(fronted, "connections relayed to the fronting host")                                         \
    X(front_early, "fronting connections opened while a handshake was still undecided")          \
    X(front_self, "connections not fronted: every fronting address is this proxy's own listener") \
    X(dc_connect_fail, "DC connects that failed on every address")                                 \
    X(idle_timeout, "connections closed for idleness")                                             \
    X(parked, "times an idle relay parked its cipher contexts")                                    \
    X(relay_events, "socket events handled by relays")                                             \
    X(bytes_up, "bytes relayed client to upstream")                                                \
    X(bytes_down, "bytes relayed upstream to client")                                              \
    X(closed, "connections closed")                                                                \
    X(bufs, "gauge: I/O buffers held by connections")                                              \
    X(bufs_peak, "most I/O buffers held at once (per worker; summed over workers)")             \
    X(bulk_reads, "relay reads into bulk (64 KiB) buffers")                                       \
    X(bulk_peak, "most bulk buffers held at once (per worker; summed over workers)")             \
    X(replay_early_evictions, "anti-replay entries evicted before their window ended")

struct stats {
#define STATS_FIELD(name, help) uint64_t name;
    STATS_LIST(STATS_FIELD)
#undef STATS_FIELD
};

#define stats_add(st, field, n)                                                                    \
    __atomic_store_n(&(st)->field, __atomic_load_n(&(st)->field, __ATOMIC_RELAXED) + (n),          \
                     __ATOMIC_RELAXED)
#define stats_sub(st, field, n)                                                                    \
    __atomic_store_n(&(st)->field, __atomic_load_n(&(st)->field, __ATOMIC_RELAXED) - (n),          \
                     __ATOMIC_RELAXED)

/* Add every field of src (read relaxed, any thread) into dst (caller's snapshot). */
void stats_sum(struct stats *dst, const struct stats *src);

/* Name and help of field i (0 <= i < STATS_COUNT); fields in list order. */
#define STATS_COUNT (sizeof(struct stats) / sizeof(uint64_t))
const char *stats_name(size_t i);
const char *stats_help(size_t i);
static inline uint64_t stats_value(const struct stats *st, size_t i)
{
    return ((const uint64_t *)(const void *)st)[i];
}

#endif
