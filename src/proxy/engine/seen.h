/*
 * seen: per secret label, the client addresses that authenticated with it lately and when
 * it was last used, for the per-secret stats (the control API's /stats, the Prometheus
 * page's secret_unique_ips and secret_last_seen_seconds).
 *
 * Each label slot (generation.h) keeps up to SEEN_ADDRS addresses with the time each last
 * authenticated; a new address past that replaces the one noted longest ago, so the count of
 * unique addresses within a window is exact up to SEEN_ADDRS and "at least SEEN_ADDRS"
 * beyond. An address is noted once per authenticated handshake: a mutex per slot, one probe
 * of a hashed index and a move to the front of a recency list (tens of nanoseconds whatever
 * the number of addresses; bench/proxy/seen.c), nothing on the data path. Addresses are attacker input: they are kept
 * as 16 bytes and shown only to the operator (the API), never on the metrics page.
 *
 * Ownership: seen_new / seen_free. Thread-safety: every call from any thread.
 */
#ifndef TGPROXY_SEEN_H
#define TGPROXY_SEEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SEEN_ADDRS 256 /* addresses kept per secret label */

struct seen;

struct seen_addr {
    uint8_t addr[16]; /* IPv4 mapped */
    int64_t at;       /* Unix seconds of its last authenticated handshake */
};

/* For nslots label slots. NULL on ENOMEM. */
struct seen *seen_new(uint32_t nslots);
void seen_free(struct seen *s); /* NULL-safe */

/* addr (16 bytes, IPv4 mapped; NULL = unknown: only the time) authenticated with the secret
   of slot at now_s. Out-of-range slots and a failed allocation are ignored. */
void seen_note(struct seen *s, uint32_t slot, const uint8_t *addr, int64_t now_s);

/* Slot's addresses seen after now_s - window_s: how many (at most SEEN_ADDRS); up to max of
   them into out, the most recently noted first (NULL = count only); *last = the last
   handshake (0 = never). */
size_t seen_get(struct seen *s, uint32_t slot, int64_t now_s, uint32_t window_s,
                struct seen_addr *out, size_t max, int64_t *last);

#endif
