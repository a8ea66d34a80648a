/*
 * doppel_fetch: the doppelganger's scout. It fetches the [defense.doppelganger] urls over
 * HTTPS (libcurl on OpenSSL), watches the TLS records the site sends back and keeps the
 * learned profile (doppel.h) that the workers' shapers copy.
 *
 * Seeing records: libcurl hands us its SSL_CTX before connecting (CURLOPT_SSL_CTX_FUNCTION);
 * OpenSSL's message callback there reports every record header it reads, so the scout
 * notes the length field and the time (CLOCK_MONOTONIC, microseconds) of each application
 * record once the handshake is over. The certificate and host name are verified as libcurl
 * does by default (CA bundle from SSL_CERT_FILE / SSL_CERT_DIR when set, as `doctor`).
 * Every fetch is bounded: DOPPEL_FETCH_MAX_MS in all, DOPPEL_FETCH_MAX_BYTES of body,
 * https only (redirects too, at most 3), and it stops at once when the scout is stopped.
 * With [network] dns the url's host name is resolved through it (doh.h) and libcurl is
 * given the addresses (CURLOPT_RESOLVE), so the scout never asks the system resolver; a
 * name that does not resolve fails the fetch (no fallback that would leak the lookup).
 *
 * Raids: a thread of its own (never a worker's loop) fetches every url repeats-per-raid
 * times, right after start and then every raid-each, refits the profile from the raid's
 * records (at most DOPPEL_MAX_SAMPLES) and publishes it.
 *
 * Publication: the live profile sits under a mutex with a generation counter. A worker
 * compares the counter (one atomic load per read toward a FakeTLS client) and, when it
 * moved, copies the profile under the mutex into its own state: the worker's copy is an
 * immutable snapshot for that worker, and nothing is ever freed while another thread may
 * read it, so there is nothing to reclaim (a raid every few hours; the copy is ~130 bytes).
 *
 * Ownership: doppel_live_new/_free. Thread-safety: every doppel_live_* function may be
 * called from any thread, except _free (once, after the workers stopped reading).
 */
#ifndef TGPROXY_DOPPEL_FETCH_H
#define TGPROXY_DOPPEL_FETCH_H

#include <stddef.h>
#include <stdint.h>

#include "proxy/config/config.h"
#include "proxy/wire/doppel.h"

#define DOPPEL_FETCH_MAX_MS    20000     /* one fetch, connect to last byte */
#define DOPPEL_FETCH_MAX_BYTES (8 << 20) /* body bytes read per fetch */

/* The clock records are stamped with: microseconds that never go back. */
typedef uint64_t (*doppel_clock_fn)(void *ud);

struct doh;

struct doppel_fetch_opts {
    uint32_t connect_ms; /* TCP + TLS connect; 0 = 10000 */
    struct doh *doh;     /* [network] dns resolver for the url's host name; NULL = system */
    enum config_prefer_ip prefer; /* address family order for doh */
    doppel_clock_fn clock;        /* NULL = CLOCK_MONOTONIC (tests inject a virtual one) */
    void *clock_ud;
    const int *stop; /* read atomically; nonzero aborts the fetch; may be NULL */
};

/*
 * Fetch url once and append its application records to out[*n..cap) (records beyond cap
 * are not kept). Returns 0 when the exchange completed or was cut by the size or time bound
 * with records seen; -EIO (err says why: never more of the url than its scheme and host)
 * when it failed before any record arrived; -ECANCELED when stopped.
 */
int doppel_fetch(const char *url, const struct doppel_fetch_opts *o, struct doppel_sample *out,
                 size_t cap, size_t *n, char *err, size_t errlen);

struct doppel_live;

/*
 * The live profile for one configuration: the built-in one at first; when cfg has urls, a
 * raid thread starts (first raid at once). cfg and doh (the [network] dns resolver, or
 * NULL) are borrowed and must outlive the handle. NULL on failure (no memory, no thread).
 */
struct doppel_live *doppel_live_new(const struct config *cfg, struct doh *doh);
/* Stop the raid thread (a fetch under way is aborted) and free. NULL-safe. */
void doppel_live_free(struct doppel_live *l);

/* The generation of the live profile (1 = built-in; +1 per publication). */
uint64_t doppel_live_gen(const struct doppel_live *l);
/* Copy the live profile into *out; returns its generation. */
uint64_t doppel_live_get(struct doppel_live *l, struct doppel_profile *out);
/* Replace the live profile with a copy of *p (a raid's result; tests). */
void doppel_live_publish(struct doppel_live *l, const struct doppel_profile *p);
/* Raids finished, and fetches that failed, so far. */
void doppel_live_counts(const struct doppel_live *l, uint64_t *raids, uint64_t *failed);

#endif
