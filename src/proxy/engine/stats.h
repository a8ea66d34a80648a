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
    X(acl_blocked, "connections closed unread: the client address is in [defense.blocklist]")    \
    X(acl_not_allowed, "connections closed unread: the address is not in [defense.allowlist]")   \
    X(active, "gauge: connections open on this worker")                                            \
    X(handshake_ok, "client handshakes authenticated")                                             \
    X(handshake_bad, "client handshakes that failed validation")                                   \
    X(handshake_timeout, "connections past the handshake deadline")                                \
    X(limit_expired, "handshakes fronted: the secret's `expires` time has passed")                 \
    X(limit_connections, "handshakes fronted: the secret's max-connections were open")             \
    X(limit_unique_ips, "handshakes fronted: a new client IP over the secret's max-unique-ips")    \
    X(limit_quota, "handshakes fronted or relays ended: the secret's quota was used up")           \
    X(fronted, "connections relayed to the fronting host")                                         \
    X(front_active, "gauge: connections relaying to the fronting host now")                        \
    X(front_early, "fronting connections opened while a handshake was still undecided")          \
    X(front_self, "connections not fronted: every fronting address is this proxy's own listener") \
    X(dc_connect_fail, "DC connects that failed on every address")                                 \
    X(idle_timeout, "connections closed for idleness")                                             \
    X(parked, "times an idle relay parked its cipher contexts")                                    \
    X(relay_events, "socket events handled by relays")                                             \
    X(bytes_up, "bytes relayed client to upstream")                                                \
    X(bytes_down, "bytes relayed upstream to client")                                              \
    X(front_bytes_up, "of bytes_up, those a fronted connection relayed to the fronting host")      \
    X(front_bytes_down, "of bytes_down, those the fronting host sent a fronted connection")        \
    X(closed, "connections closed")                                                                \
    X(bufs, "gauge: I/O buffers held by connections")                                              \
    X(bufs_peak, "most I/O buffers held at once (per worker; summed over workers)")             \
    X(bulk_reads, "relay reads into bulk (64 KiB) buffers")                                       \
    X(bulk_peak, "most bulk buffers held at once (per worker; summed over workers)")             \
    X(replay_early_evictions, "anti-replay entries evicted before their window ended")         \
    X(bulk, "gauge: bulk buffers held by connections")                                           \
    X(shaped_records, "records toward FakeTLS clients timed by the doppelganger shaper")          \
    X(shape_delay_ms, "milliseconds the doppelganger shaper held records back, summed")          \
    X(scan_capped, "hellos many keys could sign, checked against their address's last key "    \
                   "only: the worker's scan budget was spent (keyscan.h)")                      \
    STATS_HS_LIST(X)                                                                               \
    X(fleet_checks, "handshakes [fleet] Redis answered within its timeout")                        \
    X(fleet_fallbacks, "[fleet] checks decided on local state: Redis away, erring or too slow")    \
    X(fleet_replays, "hellos [fleet] Redis had seen (replays across the fleet, fronted)")          \
    X(fleet_up, "gauge: 1 while this worker's [fleet] Redis connection is up")                     \
    X(mp_ready, "middle-proxy connections that completed their handshake")                         \
    X(mp_fail_connect, "middle-proxy connections that failed: connect or socket")                  \
    X(mp_fail_keys, "middle-proxy handshakes failed: no valid encrypted frame (wrong secret "      \
                    "or public address)")                                                          \
    X(mp_fail_refused, "middle-proxy handshakes failed: RPC_HANDSHAKE_ERROR")                      \
    X(mp_fail_protocol, "middle-proxy connections failed: bad nonce, frame, sequence, message")    \
    X(mp_frames_up, "RPC frames sent to middle proxies")                                           \
    X(mp_frames_down, "RPC frames received from middle proxies")                                   \
    X(mp_clients, "gauge: clients multiplexed over middle proxies now")                            \
    X(mp_fallbacks, "tagged clients sent direct: no middle-proxy connection of their DC up")       \
    X(mp_slow_closed, "middle-proxy clients closed: more than client-buffer behind")               \
    X(mp_quickacks, "quick acks relayed from middle proxies")                                      \
    X(mp_held, "gauge: bytes of middle-proxy answers waiting for slow clients")                    \
    X(mp_held_peak, "the most mp_held has been")                                                   \
    STATS_END_LIST(X)

/* Failed client handshakes by reason: X(name, help); the field is hs_<name>, the metric
   handshakes_total{outcome="<name>"}. Each failed handshake adds handshake_bad and exactly
   one of these (conn.c hs_failed), so they sum to handshake_bad. */
#define STATS_HS_LIST(X)                                                                           \
    X(hs_bad_digest, "handshakes failed: the ClientHello digest matches no secret")                \
    X(hs_stale, "handshakes failed: ClientHello timestamp outside tolerate-time-skewness")         \
    X(hs_wrong_sni, "handshakes failed: the SNI names no secret's domain")                         \
    X(hs_replay, "handshakes failed: replayed ClientHello or obfs2 header (anti-replay)")          \
    X(hs_not_tls, "handshakes failed: first bytes start no accepted handshake")                    \
    X(hs_bad_hello, "handshakes failed: malformed or oversized ClientHello, no TLS 1.3 cipher")    \
    X(hs_bad_obfs2, "handshakes failed: no dd/classic secret decrypts the obfs2 header")           \
    X(hs_bad_flight, "handshakes failed: FakeTLS flight not TLS records, or no obfs2 header")      \
    X(hs_limit, "handshakes failed: the secret is over a [limits.LABEL] limit")                    \
    X(hs_closed, "handshakes failed: the client closed before completing it")                      \
    X(hs_error, "handshakes failed: a failure on the proxy's side (OpenSSL)")

/* Connection end reasons, in enum conn_end order from END_EOF (conn.c checks the order):
   X(name, help); the field is end_<name>, the metric label reason="<name>". */
#define STATS_END_LIST(X)                                                                          \
    X(end_eof, "connections ended: both sides finished")                                          \
    X(end_reset, "connections ended: socket error or reset")                                      \
    X(end_handshake_timeout, "connections ended: handshake deadline with nothing to front")      \
    X(end_handshake_bad, "connections ended: bad client flight after the ServerHello")           \
    X(end_idle, "connections ended: idle timeout")                                                \
    X(end_dc_fail, "connections ended: no DC address answered or the DC is unknown")             \
    X(end_front_fail, "connections ended: the fronting host could not be reached")               \
    X(end_nomem, "connections ended: out of memory")                                              \
    X(end_shutdown, "connections ended: proxy shutdown")                                          \
    X(end_proto, "connections ended: bad TLS record or alert from the client")                   \
    X(end_dns, "connections ended: the DC's host names gave no address")                         \
    X(end_quota, "connections ended: the secret's quota was used up")                             \
    X(end_acl, "connections ended: the PROXY header's client address is refused by an access list") \
    X(end_revoked, "connections ended: their secret was disabled, rotated or deleted")

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

/* Per-secret counters of one worker (index = label slot), same rules as above:
   X(name, help). Written only for handshakes that named that secret (its key matched). */
#define STATS_SECRET_LIST(X)                                                                       \
    X(conns, "connections authenticated")                                                          \
    X(active, "gauge: authenticated connections open")                                             \
    X(bytes_up, "bytes relayed client to DC (as read, conn_int.h conn_count_bytes)")              \
    X(bytes_down, "bytes relayed DC to client (as read)")                                          \
    X(limits_hit, "handshakes fronted or relays ended by one of the secret's [limits]")          \
    X(hs_stale, "handshakes of the secret refused: ClientHello timestamp outside the skew")      \
    X(hs_replay, "handshakes of the secret refused: replayed hello or obfs2 header")             \
    X(hs_limit, "handshakes of the secret refused: over one of its [limits]")                    \
    X(hs_other, "handshakes of the secret failed later: bad flight, client closed, proxy error")

struct stats_secret {
#define STATS_FIELD(name, help) uint64_t name;
    STATS_SECRET_LIST(STATS_FIELD)
#undef STATS_FIELD
};

/* Per-DC counters of one worker, same rules as above: DC connects that succeeded, by how
   long they took (a histogram), and those that failed, by the reason of their last attempt.
   Slots: DC 1..5, 203, the test DCs 10001..10003, then every other id; a media DC (-N)
   counts under N (stats_dc_slot). */
#define STATS_DC_NLE 13 /* histogram bounds (stats.c): 1 ms .. 10 s */
/* X(name, help), in enum upstream_why order from UPSTREAM_WHY_REFUSED (conn.c checks it). */
#define STATS_DC_FAIL_LIST(X)                                                                      \
    X(refused, "the DC (or the SOCKS5 upstream) refused the TCP connect")                          \
    X(timeout, "no answer within [network.timeout] tcp (connect, lookup or SOCKS5)")               \
    X(unreachable, "no route to the DC (or to the SOCKS5 upstream)")                               \
    X(dns, "the DC's [dcs] host names gave no address")                                            \
    X(no_address, "nothing to try: an unknown DC, or prefer-ip left no address")                   \
    X(upstream_refused, "the SOCKS5 upstream answered CONNECT with a failure")                     \
    X(upstream_error, "the SOCKS5 negotiation failed otherwise (auth, protocol, closed)")          \
    X(error, "a failure on the proxy's side (no socket)")
enum { STATS_DC_IDS = 9, STATS_DC_OTHER = STATS_DC_IDS, STATS_DC_SLOTS = STATS_DC_IDS + 1 };
#define STATS_DC_FAIL_COUNT 8

struct stats_dc {
    uint64_t le[STATS_DC_NLE + 1]; /* connects that took at most le_ms[i] (and more than the
                                      bound before); le[STATS_DC_NLE]: longer than every bound */
    uint64_t sum_ms;               /* their total time */
    uint64_t fail[STATS_DC_FAIL_COUNT];
    uint64_t mp_up; /* gauge: middle-proxy connections of this DC ready (midproxy.c) */
};

/* Slot of DC id dc ([-]N; STATS_DC_OTHER for an id without a slot of its own). */
size_t stats_dc_slot(int32_t dc);
/* One DC connect: ms it took (ok), or the reason index it failed for (0-based in
   STATS_DC_FAIL_LIST). Worker thread only (the slot's single writer). */
void stats_dc_ok(struct stats_dc *d, uint64_t ms);
void stats_dc_fail(struct stats_dc *d, size_t reason);
/* DC id of slot (0 for STATS_DC_OTHER); bound i in ms (UINT64_MAX past the last); name of
   failure reason i ("" past the last). */
int32_t stats_dc_id(size_t slot);
uint64_t stats_dc_le_ms(size_t i);
const char *stats_dc_fail_name(size_t i);
/* Add src (read relaxed, any thread) into dst. */
void stats_dc_sum(struct stats_dc *dst, const struct stats_dc *src);

/* Index of the end_* field for conn_end value e (END_EOF = 1 .. ). */
#define STATS_END_INDEX(e) (offsetof(struct stats, end_eof) / sizeof(uint64_t) + (size_t)(e) - 1)
/* Add n to field i (by index, as stats_value reads it). */
#define stats_add_at(st, i, n)                                                                     \
    __atomic_store_n(&((uint64_t *)(void *)(st))[i],                                               \
                     __atomic_load_n(&((uint64_t *)(void *)(st))[i], __ATOMIC_RELAXED) + (n),     \
                     __ATOMIC_RELAXED)

/* Add every field of src (read relaxed, any thread) into dst (caller's snapshot). */
void stats_sum(struct stats *dst, const struct stats *src);
void stats_secret_sum(struct stats_secret *dst, const struct stats_secret *src);

/* Name and help of field i (0 <= i < STATS_COUNT); fields in list order. */
#define STATS_COUNT (sizeof(struct stats) / sizeof(uint64_t))
const char *stats_name(size_t i);
const char *stats_help(size_t i);
static inline uint64_t stats_value(const struct stats *st, size_t i)
{
    return ((const uint64_t *)(const void *)st)[i];
}

#endif
