/*
 * tlsfront: the learned FakeTLS answer's service (issue 23, [defense.tls-front]). It keeps
 * one profile (wire/tlsprofile.h) per SNI domain the ee secrets name, learned from the
 * fronting site, and publishes them to the workers.
 *
 * Refreshes: a thread of its own (never a worker's loop) probes, right after start and then
 * every `refresh` (jittered by up to +-10 % so a fleet does not probe in step), each domain's
 * fronting target `connections` times with tlsscout_probe (a Telegram-like ClientHello naming
 * the domain), builds a profile from the flights and publishes it. The target is
 * [domain-fronting] host:port when set, else the domain itself at that port, resolved
 * through [network] dns when configured (never the system resolver then) and in prefer-ip
 * order. With [domain-fronting] proxy-protocol each probe sends a PROXY v2 header first, as
 * fronted connections do: a site that expects one refuses a connection without it. A refresh that gets no flight, or flights no profile can be built from, keeps the
 * domain's last good profile: logged at warn level with the reason, counted per domain. A
 * reload (tlsfront_update) refreshes every domain at once: domains come and go with the
 * secrets.
 *
 * Storage: every publication is written to the state file (atomicfile: the old file or the
 * new one, never a mix) and the file is read at start, so a restart answers with the stored
 * profiles before the site has been asked. A stored file that does not parse is logged and
 * ignored (the next refresh writes a good one). The state file is [defense.tls-front]
 * state-file, or $STATE_DIRECTORY/tls-front under systemd, else none.
 *
 * Publication: the published profiles are an immutable, reference-counted set with a
 * sequence number (as engine/generation.h publishes configurations). A worker compares the
 * sequence with its own (one atomic load per FakeTLS answer) and only when it moved takes a
 * reference to the new set under the mutex and drops its old one; the last reference frees
 * a set. Nothing a worker reads is ever changed or freed under it.
 *
 * Ownership: tlsfront_new/_free; the set references the workers hold are theirs to drop
 * (tlsfront_set_unref) before tlsfront_free. Thread-safety: every function may be called
 * from any thread, except _free (once, after the workers stopped).
 */
#ifndef TGPROXY_TLSFRONT_H
#define TGPROXY_TLSFRONT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/config/config.h"
#include "proxy/wire/tlsprofile.h"

#define TLSFRONT_MAX_DOMAINS 64 /* SNI domains profiled (distinct ee secret domains) */

struct doh;
struct tlsfront;

/* A published set of profiles: read-only, shared by reference count. */
struct tlsfront_set {
    uint32_t refs; /* atomic */
    uint64_t seq;
    size_t n;
    struct tlsprofile p[]; /* n entries */
};

/* Where a domain's answer comes from now. */
enum tlsfront_shape {
    TLSFRONT_DEFAULT = 0, /* no profile: today's fixed answer */
    TLSFRONT_STORED,      /* the profile read from the state file at start */
    TLSFRONT_LEARNED,     /* a profile this process learned */
};

/* One domain's state, for metrics and doctor. */
struct tlsfront_status {
    char domain[TLSPROFILE_DOMAIN_MAX];
    enum tlsfront_shape shape;
    int64_t learned_s;       /* the profile's refresh time (wall seconds); 0 = none */
    uint64_t refreshes;      /* refreshes that produced a profile */
    uint64_t failures;       /* refreshes that failed (the last good profile kept) */
    unsigned diff;           /* tlsprofile_diff of the profile in use */
    char pattern[TLSPROFILE_PATTERN];
    char last_error[192];    /* the last failure's reason, "" = none */
};

/*
 * The service for cfg (copied from: cfg may go away after). doh: [network] dns, borrowed
 * (must outlive the service), or NULL. NULL without error (err "") when the feature is off
 * (enabled = false); NULL with err set when no thread or memory. Without ee secrets it
 * idles until a reload brings some.
 */
struct tlsfront *tlsfront_new(const struct config *cfg, struct doh *doh, char *err,
                              size_t errlen);
/* Stop the refresh thread (a probe under way ends within its timeout) and free. NULL-safe. */
void tlsfront_free(struct tlsfront *t);

/* A reload: take cfg's domains and fronting target, and refresh every domain now. */
void tlsfront_update(struct tlsfront *t, const struct config *cfg);

/* The sequence of the published set (1 = the first). */
uint64_t tlsfront_seq(const struct tlsfront *t);
/* The published set with a reference (never NULL once tlsfront_new succeeded). */
struct tlsfront_set *tlsfront_acquire(struct tlsfront *t);
/* Drop a reference; the last frees the set. NULL-safe. */
void tlsfront_set_unref(struct tlsfront_set *s);
/* The profile for domain[0..len) (ASCII case-insensitive), or NULL. */
const struct tlsprofile *tlsfront_set_find(const struct tlsfront_set *s, const char *domain,
                                           size_t len);

/* The state of every domain into out[0..cap); returns how many domains there are. */
size_t tlsfront_status(struct tlsfront *t, struct tlsfront_status *out, size_t cap);
/* Refreshes finished so far (all domains, successful or not): tests wait on it. */
uint64_t tlsfront_rounds(const struct tlsfront *t);
/* The state file in use ("" = none) into out. */
void tlsfront_state_file(const struct config *cfg, char *out, size_t cap);

/* Domain name of a shape for metrics: "default", "stored", "learned". */
const char *tlsfront_shape_name(enum tlsfront_shape s);

#endif
