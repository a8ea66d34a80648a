/*
 * admission: whether a validated hello may go on: the local anti-replay cache, the
 * secret's [limits] and, with [fleet], the check against the fleet's Redis. One verdict:
 *   ADMIT_OK       go on (the connection holds its limits slot until it closes)
 *   ADMIT_PENDING  the fleet is asked; conn_admitted() (conn.c) gets its answer, once,
 *                  unless admit_cancel or the close comes first
 *   ADMIT_REFUSED  front the client like any failed handshake (*reason: the
 *                  handshakes_total outcome, hs_replay or hs_limit)
 * and what an admitted connection owes back: its quota's bytes, once a second and at
 * close (the worker's quota tick), its limits and fleet slots at close.
 *
 * A connection's admission state is struct conn_admit (c->adm), a worker's is struct
 * admit_worker (w->admit); only admission.c writes them. conn.c alone changes a
 * connection's state (conn_enter): admission returns verdicts, it moves nothing.
 * Thread-safety: the worker thread of the connection.
 */
#ifndef TGPROXY_ADMISSION_H
#define TGPROXY_ADMISSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/engine/antireplay.h"
#include "proxy/engine/loop.h"

struct conn;
struct conn_worker;
struct gen;

enum admit_verdict { ADMIT_OK, ADMIT_PENDING, ADMIT_REFUSED };

/* A connection's admission (admission.c's own). */
struct conn_admit {
    uint64_t quota_folded; /* bytes_up + bytes_down already charged to the quota */
    uint32_t limit_ip;     /* limits_admit's address entry (LIMITS_NO_IP = none) */
    bool limit_held;       /* admitted by limits_admit: release at close */
    bool fleet_held;       /* holds a [fleet] connection slot: fleet_release at close */
};
/* The [fleet] check in flight: handshake-time, in the connection's struct conn_hs. */
struct conn_admit_check {
    uint32_t fleet_ticket; /* PENDING: the check in flight (FLEET_NONE = none) */
    uint8_t kind;          /* PENDING: the hello's enum antireplay_kind */
};

/* A worker's quota tick (admission.c's own). */
struct admit_worker {
    struct loop_tq tq;      /* CONN_QUOTA_FOLD_MS */
    struct loop_timer tick; /* in tq while some secret has a quota */
};

/* At accept: nothing held, nothing asked. */
void admit_conn_init(struct conn_admit *a, struct conn_admit_check *k);
/*
 * The hello authenticated with secret index secret (c->secret is set to it unless the
 * hello is a replay) and whose replay key is key[0..n) of kind: the verdict. Counts the
 * refusals (limits, per secret) and logs them at debug level.
 */
enum admit_verdict admit_hello(struct conn *c, uint32_t secret, enum antireplay_kind kind,
                               const uint8_t *key, size_t n, size_t *reason);
/* Whether key[0..n) of kind was seen before (the local cache only): the client's flight
   inside a FakeTLS connection, after the hello was admitted. */
bool admit_replayed(struct conn *c, enum antireplay_kind kind, const uint8_t *key, size_t n);
/* PENDING and the handshake deadline came first: forget the question, give the local
   limits slot back (the connection is fronted). */
void admit_cancel(struct conn *c);
/* At close: charge the last bytes, release the slots, cancel a question in flight. */
void admit_release(struct conn *c);

void admit_worker_init(struct conn_worker *w);
/* The worker takes generation g: the tick runs while some secret of g has a quota. */
void admit_worker_adopt(struct conn_worker *w, const struct gen *g);

/* conn.c's: the fleet's answer to a PENDING hello (ADMIT_OK, or ADMIT_REFUSED with its
   handshakes_total outcome). */
void conn_admitted(struct conn *c, enum admit_verdict v, size_t reason);

#endif
