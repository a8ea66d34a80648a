/*
 * mpsource: where middle-proxy mode gets Telegram's documents (docs/tgproxy.md, "Middle-proxy
 * mode"): the proxy secret, the IPv4 and IPv6 middle-proxy lists, and optionally this
 * server's public address, and the thread that keeps them up to date.
 *
 * Each document has a source ([middle-proxy] proxy-secret, proxy-config, proxy-config-v6,
 * public-ip-url): an https:// URL (libcurl, peer verified, size and time capped by
 * [network.timeout] http) or a local file path. Every update-each (jittered by up to a tenth
 * either way; 60 s while a needed document has no copy at all) each source is fetched or
 * re-read and checked (a secret of 32..256 bytes, a list that mpconf_parse accepts, an IP
 * literal). A source that fails keeps the last good copy, with a warning naming the source
 * and why, and a count (mpsource_stats). A good download that differs from the stored copy is
 * written to state-dir (core/atomicfile, mode 0600): proxy-secret, proxy-config,
 * proxy-config-v6, public-ip. At start, before any network, a URL source begins with its
 * stored copy, so a restart without network still has the documents.
 *
 * Publication: the documents in use are one immutable, reference-counted struct mpdocs with
 * a sequence number, swapped under a mutex when a refresh or a reload changed one of them,
 * after which the changed() callback runs (server.c wakes the workers, which rebuild their
 * pools from it: engine/worker.c). Nothing ever blocks a worker on the network.
 *
 * Ownership: mpsource_new copies what it needs from cfg. mpsource_docs returns a reference
 * the caller drops with mpdocs_unref. Thread-safety: every function may be called from any
 * thread; changed() runs on the updater thread or on mpsource_apply's caller, never with a
 * lock held. Secrets: the proxy secret is never logged.
 */
#ifndef TGPROXY_MPSOURCE_H
#define TGPROXY_MPSOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/config/config.h"
#include "proxy/wire/mpconf.h"

#define MPSOURCE_MAX_BYTES ((size_t)1 << 20) /* largest document accepted */
#define MPSOURCE_RETRY_S   60 /* refresh interval while a needed document has no copy */

enum mpsource_kind { MPSRC_SECRET = 0, MPSRC_CONFIG, MPSRC_CONFIG6, MPSRC_IP, MPSRC_N };

/* The documents in use, immutable once published. */
struct mpdocs {
    uint32_t refs; /* atomic */
    uint64_t seq;  /* 1, 2, ... per publication */
    uint8_t secret[256];
    size_t secret_len; /* 0 = no proxy secret yet */
    struct mpconf v4, v6;
    bool has_v4, has_v6;
    bool has_ip4, has_ip6; /* the public address public-ip-url answered */
    uint8_t ip4[4], ip6[16];
};

struct mpsource_stats {
    bool used[MPSRC_N];         /* the source is configured */
    double ok_time[MPSRC_N];    /* Unix seconds of the copy in use (0 = none) */
    uint64_t failures[MPSRC_N]; /* fetches or reads that failed, or did not parse */
    uint64_t updates[MPSRC_N];  /* new copies taken into use (start included) */
};

struct mpsource;

/* The metric label / stored file name of a kind: "proxy-secret", "proxy-config",
   "proxy-config-v6", "public-ip". */
const char *mpsource_name(enum mpsource_kind k);

/*
 * Start: seed each document from its file or, for a URL, from its stored copy, then start
 * the updater thread, which refreshes at once. cfg must have [middle-proxy]. 0 with *out, or
 * -ENOMEM / -EAGAIN (err filled).
 */
int mpsource_new(const struct config *cfg, void (*changed)(void *), void *ud,
                 struct mpsource **out, char *err, size_t errlen);
/* Stop the updater (a download in flight is abandoned) and free. NULL-safe. */
void mpsource_free(struct mpsource *src);

/* A reload: take the new sources and interval; the documents cfg's loader read from files
   are taken at once; changed sources are refreshed now. */
void mpsource_apply(struct mpsource *src, const struct config *cfg);

/* The documents in use (a reference), or NULL before any. */
struct mpdocs *mpsource_docs(struct mpsource *src);
void mpdocs_unref(struct mpdocs *d);
/* Sequence number of the documents in use (0 = none). */
uint64_t mpsource_seq(struct mpsource *src);
/* Zeros for a NULL src. */
void mpsource_stats(struct mpsource *src, struct mpsource_stats *out);

/*
 * The middle proxies to use, by prefer-ip, from both lists together (duplicates once): for
 * each DC its IPv4 middle proxies, or its IPv6 ones when it has no IPv4 one; only-ipv4:
 * IPv4 ones alone, only-ipv6: IPv6 ones alone. Pure.
 */
void mpdocs_merge(const struct mpdocs *d, enum config_prefer_ip prefer, struct mpconf *out);

/* ---- one fetch, shared with doctor ---- */

struct mpsource_body {
    uint8_t *data; /* tg__malloc'ed; NUL-terminated beyond len */
    size_t len;
    long status;      /* HTTP status; 0 for a file */
    int64_t date;     /* the answer's Date header (Unix seconds), 0 = none */
    double elapsed_s; /* request to answer */
};

/* Fetch a URL (GET, https only) or read a file. 0, or -1 with err ("why", without the
   source's name). http_ms: connect and longest stall. */
int mpsource_fetch(const char *source, uint32_t http_ms, struct mpsource_body *out, char *err,
                   size_t errlen);
void mpsource_body_free(struct mpsource_body *b);

/* Check a document: 0, or -1 with err. Pure. */
int mpsource_check_secret(const uint8_t *p, size_t n, char *err, size_t errlen);
/* An IP literal, blanks around it allowed: family AF_INET (ip[0..4)) or AF_INET6. */
int mpsource_parse_ip(const uint8_t *p, size_t n, int *family, uint8_t ip[16], char *err,
                      size_t errlen);

/* Is ip (AF_INET: 4 bytes, AF_INET6: 16) an address the Internet cannot reach back: RFC 1918,
   shared (100.64/10), link-local, unique local (fc00::/7)? Loopback is not (tests, a
   middle proxy on the same host). Pure. */
bool mpsource_ip_private(int family, const uint8_t *ip);

#endif
