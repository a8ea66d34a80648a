/*
 * limits: per-secret limits ([limits.LABEL]) checked when a client's handshake has named its
 * secret, before anything is written to the client.
 *
 * A client over a limit is treated as a failed handshake (fronted), so it cannot tell a
 * proxy is there. Kinds: the secret expired (`expires`), it already has `max-connections`
 * open connections, or the client's IP would be one more than `max-unique-ips` distinct
 * addresses counted for the secret (an address counts while it has an open connection and
 * for `unique-ips-window` after its last connection opened or closed), or the secret's
 * `quota` of relayed bytes is used up for the current `quota-reset` period. Workers charge
 * relayed bytes with limits_charge once a second and at close (not per read).
 *
 * Reloads: each configuration generation has its own struct limits (its settings), but what
 * is counted (open connections, client addresses, quota use and period) belongs to the
 * secret's label and is shared with the generation before it (limits_new's prev), so a
 * reload neither resets a quota nor forgets connections still open under the old settings.
 *
 * Ownership: limits_new copies what it needs from cfg (borrowed only during the call);
 * limits_free releases it (the counted state goes with the last generation holding it).
 * Thread-safety: limits_admit and limits_release may be called from any worker at once (a relaxed
 * atomic per secret, plus a per-secret mutex for secrets with max-unique-ips; touched once at the
 * handshake and once at close, never on the relay path).
 */
#ifndef TGPROXY_LIMITS_H
#define TGPROXY_LIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/config/config.h"

enum limits_verdict {
    LIMITS_OK = 0,      /* admitted; a slot is held until limits_release */
    LIMITS_EXPIRED,     /* the secret's `expires` time has passed */
    LIMITS_CONNECTIONS, /* `max-connections` are already open */
    LIMITS_UNIQUE_IPS,  /* a new address over `max-unique-ips` within the window */
    LIMITS_QUOTA,       /* `quota` bytes were relayed in this `quota-reset` period */
};

#define LIMITS_NO_IP UINT32_MAX /* ip_slot of a connection not counted by address */

struct limits;

/* "secret expired", "max-connections reached", ... for logs; static. */
const char *limits_verdict_name(enum limits_verdict v);

/* One state per secret of cfg (same indexes), sharing the counted state of each label prev
   also has (prev may be NULL; it stays valid and may still be used meanwhile). Returns
   NULL on allocation failure. */
struct limits *limits_new(const struct config *cfg, const struct limits *prev);

/* NULL-safe. No admitted connection may still be open. */
void limits_free(struct limits *l);

/* Whether any secret has a quota (workers then fold relayed bytes once a second). */
bool limits_any_quota(const struct limits *l);

/*
 * Charge bytes relayed for secret (both directions, folded by a worker, not per read) at
 * wall time now_s. Returns true when the secret's quota is used up for this period (its
 * relays should end). No-op returning false for a secret without a quota.
 */
bool limits_charge(struct limits *l, size_t secret, uint64_t bytes, int64_t now_s);

/* Secret's quota use for the state file: false when it has no quota; else *used (bytes in
   the current period) and *period_end (Unix seconds; 0 = not started or never resets). */
bool limits_quota_get(const struct limits *l, size_t secret, uint64_t *used, int64_t *period_end);
/* Restore what the state file said at start (before any connection). No-op without a quota;
   a period_end the secret's settings cannot have (no quota-reset) is ignored. */
void limits_quota_set(struct limits *l, size_t secret, uint64_t used, int64_t period_end);

/* Whether limits_admit for this secret uses the client's address (max-unique-ips set). */
bool limits_by_addr(const struct limits *l, size_t secret);

/*
 * Admit a client of secret index `secret` from address addr (16 bytes, IPv4 mapped as
 * ::ffff:a.b.c.d; NULL = unknown, not counted by address) at wall time now_s (Unix
 * seconds). On LIMITS_OK the caller holds a slot, *ip_slot says which address entry, and
 * must call limits_release(l, secret, *ip_slot, now) exactly once at close; on any other
 * verdict nothing is held.
 */
enum limits_verdict limits_admit(struct limits *l, size_t secret, const uint8_t addr[16],
                                 int64_t now_s, uint32_t *ip_slot);

/* Give back the slot an admitted connection held; now_s starts its address's window. */
void limits_release(struct limits *l, size_t secret, uint32_t ip_slot, int64_t now_s);
/* Undo an admission that did not go on (the [fleet] check refused the client): as
   limits_release, but an address left without open connections stops counting at once
   (its window is not started; an earlier window of that address is forgotten too). */
void limits_cancel(struct limits *l, size_t secret, uint32_t ip_slot);

#endif
