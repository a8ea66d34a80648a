/*
 * limits: per-secret limits ([limits.LABEL]) checked when a client's handshake has named its
 * secret, before anything is written to the client.
 *
 * A client over a limit is treated as a failed handshake (fronted), so it cannot tell a
 * proxy is there. Kinds: the secret expired (`expires`), or it already has
 * `max-connections` open connections.
 *
 * Ownership: limits_new copies what it needs from cfg (borrowed only during the call);
 * limits_free releases it. Thread-safety: limits_admit and limits_release may be called from
 * any worker at once (one relaxed atomic per secret with a connection limit, touched once at
 * the handshake and once at close, never on the relay path).
 */
#ifndef TGPROXY_LIMITS_H
#define TGPROXY_LIMITS_H

#include <stddef.h>
#include <stdint.h>

#include "proxy/config.h"

enum limits_verdict {
    LIMITS_OK = 0,      /* admitted; a slot is held until limits_release */
    LIMITS_EXPIRED,     /* the secret's `expires` time has passed */
    LIMITS_CONNECTIONS, /* `max-connections` are already open */
};

struct limits;

/* One state per secret of cfg (same indexes). Returns NULL on allocation failure. */
struct limits *limits_new(const struct config *cfg);

/* NULL-safe. No admitted connection may still be open. */
void limits_free(struct limits *l);

/*
 * Admit a client of secret index `secret` at wall time now_s (Unix seconds). On LIMITS_OK
 * the caller holds a slot and must call limits_release(l, secret) exactly once at close;
 * on any other verdict nothing is held.
 */
enum limits_verdict limits_admit(struct limits *l, size_t secret, int64_t now_s);

/* Give back the slot an admitted connection held. */
void limits_release(struct limits *l, size_t secret);

#endif
