/*
 * relay: moving bytes between the client and the upstream (DC or fronting host) once both
 * sockets are up.
 *
 * Each direction has at most one pool buffer, taken when a read returns bytes and given back
 * as soon as they are all written, so an idle connection holds none and memory per
 * connection is bounded by two buffers. A direction whose last read filled its buffer (a
 * bulk flow) takes a bulk buffer (four 16 KiB records) for the next read while the worker
 * holds fewer than its budget (4 MiB of them); otherwise a regular one: busy flows make a
 * quarter of the syscalls, and memory stays bounded however many connections are busy. Backpressure: while a direction has unwritten bytes
 * its source is not read (its READ interest is off) and the destination waits for WRITE; the
 * kernel's socket buffers absorb the rest. Nothing is ever dropped.
 *
 * Transforms, in place, one pass per direction:
 *   up   (client -> DC)   TLS records unwrapped (FakeTLS), client cipher decrypt, DC cipher
 *                         encrypt;
 *   down (DC -> client)   DC cipher decrypt + client cipher encrypt, or nothing in fast mode;
 *                         wrapped in ApplicationData records of at most 16384 payload
 *                         bytes: one readv fills as many record slots as the buffer holds,
 *                         leaving a 5-byte gap before each payload for its header (no copy;
 *                         a 64 KiB buffer moves four records per read and per send).
 *                         With dynamic record sizing the slots start smaller (40 x 1450,
 *                         20 x 4096) and start small again after a second with nothing sent.
 *                         With [defense.doppelganger] the slot sizes and the times records
 *                         leave follow the shaper (shape.h): records it holds back stay in
 *                         the buffer (the DC is not read meanwhile) until its tick.
 *   fronting: bytes pass unchanged both ways.
 * Half-close: EOF from one side is forwarded as shutdown(SHUT_WR) once that direction has
 * drained; the connection ends when both directions have.
 *
 * Thread-safety: worker thread only. No allocation on this path once the pool is warm.
 */
#ifndef TGPROXY_RELAY_H
#define TGPROXY_RELAY_H

#include <stddef.h>
#include <sys/types.h>

#include "proxy/engine/conn_int.h"

#define RELAY_TLS_HEADROOM    5     /* bytes reserved before a record's payload */
#define RELAY_TLS_MAX_PAYLOAD 16384 /* proxy -> client record payload (brief 4.9) */
#define RELAY_MAX_SLOTS       64    /* records one read toward a FakeTLS client may fill */

/* Begin relaying: both sockets registered, any queued upstream bytes flushed. */
void relay_start(struct conn *c);

/* Loop callbacks for the client and upstream sockets while relaying. */
void relay_on_client(struct loop *l, struct loop_io *io, unsigned events);
void relay_on_upstream(struct loop *l, struct loop_io *io, unsigned events);

/* The payload limit of the next record toward a FakeTLS client, by dynamic record sizing
   (counted as sent now): for a data path that frames its own records (mprelay.c). */
size_t relay_record_next(struct conn *c);

/* Give back both directions' buffers (connection teardown). */
void relay_release(struct conn *c);

#endif
