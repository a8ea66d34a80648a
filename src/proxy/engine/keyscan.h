/*
 * keyscan: what checking a FakeTLS ClientHello against many ee secrets may cost the proxy
 * (issue 21, item 14).
 *
 * A hello is checked against the keys its SNI admits (wire/faketls.c): one HMAC-SHA256 over
 * the whole hello per key. The SNI usually names one secret's domain, so one HMAC; but a
 * hello without SNI (some iOS and macOS releases send none) admits every key, and so does
 * one naming a domain many secrets share. HMAC keys the first block of its inner hash, so
 * no pass over the hello can be shared between keys (precomputed ipad/opad states would
 * save two compression blocks per key, not the pass over 0.5-16 KiB): with 256 secrets
 * such a hello costs 256 passes, 12x to 280x a hello with one secret. Two things keep it
 * near one HMAC once more than two keys are candidates:
 *
 *  - hints: the client address that authenticated such a hello, with the key it used, in a
 *    table all workers share. A hello from a hinted address is checked against that key
 *    first, and alone when it accepts. The table is lossy (a slot keeps the last address
 *    hashed to it): a lost or wrong hint costs one HMAC, then the budget decides, as for a
 *    new client. A hint names the key by its id (keyscan_key_id: a hash of the key and its
 *    domain, the same in every generation), not by its place in a generation's key list,
 *    so hints outlive reloads: the control API reloads at every change, and a generation's
 *    keys may come in another order. Finding the hinted key is one integer compare per key
 *    (no HMAC); with 1,000 secrets sharing a domain a remembered client costs one HMAC
 *    across any number of reloads (bench/proxy/junkhello: the *_reloads rows).
 *  - a scan budget per worker: a hello whose address has no hint, or whose hint does not
 *    accept it, is checked against every candidate while the worker's allowance of HMAC
 *    input lasts (KEYSCAN_RATE bytes a second, as much in reserve, charged the scan's worst
 *    case); beyond it no key is checked, the hello fails as a bad digest and is fronted. A
 *    genuine client then retries, and is found once the allowance refills (1/30 s for one
 *    256-key scan of a 517-byte hello). A hinted client is tried before the budget is
 *    charged and costs none of it, so a flood of junk hellos costs at most that allowance
 *    a second beyond parsing and never fronts a client the table remembers; a hello whose
 *    SNI names its secret's own domain is never affected.
 *
 * Ownership: struct keyscan_hints and struct keyscan_budget are caller storage, zeroed to
 * start. Thread-safety: keyscan_hint_get / _put may run on any thread at once (relaxed
 * atomics on whole slots); a keyscan_budget belongs to one thread.
 */
#ifndef TGPROXY_KEYSCAN_H
#define TGPROXY_KEYSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/wire/faketls.h"

#define KEYSCAN_HINT_SLOTS 4096
#define KEYSCAN_RATE       ((uint64_t)4 << 20) /* bytes of HMAC input a second, per worker */

struct keyscan_hints {
    uint64_t slot[KEYSCAN_HINT_SLOTS]; /* address tag(32) | key id(32) */
};

/* The id of an ee key with its domain (faketls_key.id): never 0. */
uint32_t keyscan_key_id(const uint8_t key[16], const char *domain, size_t domain_len);
/* The key id last put for ip (16 bytes, IPv4 mapped), or 0. */
uint32_t keyscan_hint_get(const struct keyscan_hints *t, const uint8_t ip[16]);
/* Remember that ip authenticated with the key of id (0: ignored). */
void keyscan_hint_put(struct keyscan_hints *t, const uint8_t ip[16], uint32_t id);

struct keyscan_budget {
    uint64_t tokens;  /* bytes of HMAC input still allowed */
    uint64_t last_ms; /* when tokens were last refilled */
    bool started;
};

/* May a scan hashing up to bytes run at now_ms (a monotonic clock)? true: charged. */
bool keyscan_budget_take(struct keyscan_budget *b, uint64_t now_ms, uint64_t bytes);

/* faketls_validate of hello h from client ip, which ncand keys could sign
   (faketls_candidates), keys[i].id set. Beyond two candidates: the address's hint is
   tried alone first (one HMAC, no budget); else every candidate is checked if b can pay for
   it (charged), or none (*capped set: a bad digest, fronted); an accepted key becomes the
   address's hint, so its next hello costs one HMAC. pol is the caller's policy (hint and
   hint_only are set here). */
enum faketls_verdict keyscan_validate(struct keyscan_hints *t, struct keyscan_budget *b,
                                      const uint8_t ip[16], uint64_t now_ms,
                                      const struct faketls_hello *h, const struct faketls_key *keys,
                                      size_t n, size_t ncand, struct faketls_policy *pol,
                                      struct faketls_match *out, bool *capped);

#endif
