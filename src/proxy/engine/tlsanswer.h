/*
 * tlsanswer: writing the FakeTLS answer to an accepted ClientHello (issue 23). With a
 * learned profile for the secret's SNI domain ([defense.tls-front], services/tlsfront.h)
 * the answer copies the site's ServerHello shape, draws its encrypted length from the
 * site's and is written in the site's segments (tlsprofile_answer: one send per segment,
 * on the listener's TCP_NODELAY socket); without one it is today's fixed answer in one send
 * (faketls_server_hello).
 *
 * Each worker holds a reference to the published profile set (tlsfront_acquire) and moves
 * to a new one when the service's sequence moved: one atomic load per answer, the lock only
 * when a refresh published.
 *
 * Ownership: the worker's struct tlsanswer_worker (zeroed at start; tlsanswer_worker_cleanup
 * drops its reference). Thread-safety: a worker's own struct, on its thread.
 */
#ifndef TGPROXY_TLSANSWER_H
#define TGPROXY_TLSANSWER_H

#include <stddef.h>
#include <stdint.h>

#include "proxy/wire/faketls.h"
#include "proxy/wire/tlsprofile.h"

struct tlsfront;
struct tlsfront_set;

/* Bytes of the worker's scratch buffer: the largest answer of either kind. */
#define TLSANSWER_SCRATCH                                                                          \
    (TLSPROFILE_ANSWER_MAX > FAKETLS_SERVER_HELLO_MAX ? TLSPROFILE_ANSWER_MAX                      \
                                                      : FAKETLS_SERVER_HELLO_MAX)

struct tlsanswer_worker {
    struct tlsfront_set *set; /* a reference, or NULL */
    uint64_t seq;             /* set->seq */
    uint64_t learned, fixed;  /* answers written with a profile / without */
};

/*
 * Answer hello h, accepted with key k, on socket fd: build into scratch (TLSANSWER_SCRATCH
 * bytes) and send. live may be NULL (the feature is off). 0, or -errno (building failed,
 * or the socket did not take the whole answer).
 */
int tlsanswer_send(struct tlsanswer_worker *tw, struct tlsfront *live, const struct faketls_key *k,
                   const struct faketls_hello *h, int fd, uint8_t *scratch);

void tlsanswer_worker_cleanup(struct tlsanswer_worker *tw);

#endif
