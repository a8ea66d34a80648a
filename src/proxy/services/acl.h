/*
 * acl: the access lists ([defense.allowlist], [defense.blocklist]) a client address is
 * checked against at accept, and the thread that keeps them up to date.
 *
 * Each list is the union of its sources: local files and https:// URLs in FireHOL netset
 * format (netset.h). A client passes when the allowlist is off or holds its address, and
 * the blocklist is off or does not hold it (mtg's rule: both apply, allowlist first).
 *
 * Publication without a lock on the hot path: a list is a finished, read-only netset behind
 * an atomic pointer. A writer (start, the updater thread, acl_refresh, acl_apply) builds a
 * whole new netset off to the side, swaps the pointer, then waits until no reader can still
 * hold the old one and frees it. Readers are the worker threads, one slot each: acl_check
 * raises its slot's busy flag, loads the pointers, searches and lowers the flag (sequentially
 * consistent store and load against the writer's exchange and scan: a reader either sees the
 * new pointer or is seen busy, so a freed list is never read). The writer's wait lasts at
 * most one lookup per reader.
 *
 * Updates: every update-each, each list re-reads its files and re-downloads its URLs
 * (libcurl multi, download-concurrency transfers at once, HTTPS only, peer verified, size
 * and time capped: [network.timeout] http, as at start, bounds the connect and any stall,
 * and a download ends after ACL_FETCH_MS or http, whichever is longer). A source that fails
 * (download error, HTTP status other than 200, a bad line) keeps its previous ranges and is logged
 * with the reason (for a file, file:line), so one bad source never empties a list. At start and in
 * acl_refresh/acl_apply a bad file is an error instead, and nothing changes.
 *
 * Ownership: acl_new copies what it needs from cfg (cfg may go away after); acl_free stops
 * the updater and frees everything. Thread-safety: acl_check from the reader threads, each
 * with its own index; everything else from any thread (writers serialise on a mutex). The
 * updater holds that mutex only to copy the sources and to publish, never during file reads
 * or downloads, so acl_apply (a reload) never waits for the network; an update whose sources
 * changed meanwhile (acl_apply, acl_refresh) is dropped, so the newer config always wins.
 */
#ifndef TGPROXY_ACL_H
#define TGPROXY_ACL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "proxy/config/config.h"

#define ACL_MAX_BYTES ((size_t)64 << 20) /* largest list file or download, bytes */
#define ACL_FETCH_MS  120000             /* one download, start to end, unless http is longer */
#define ACL_HTTP_MS   10000 /* [network.timeout] http's default: connect, and the longest stall */

struct acl;

enum acl_list_kind { ACL_ALLOW = 0, ACL_BLOCK = 1 };

enum acl_verdict {
    ACL_PASS = 0,
    ACL_NOT_ALLOWED, /* the allowlist is on and does not hold the address */
    ACL_BLOCKED,     /* the blocklist holds the address */
};

/* What one list looks like now (acl_stats). */
struct acl_list_stats {
    bool enabled;
    uint64_t ranges;         /* merged ranges published now */
    uint64_t updates_ok;     /* list builds published (start, updates, refresh, apply) */
    uint64_t updates_failed; /* sources that failed to load or download (old ranges kept) */
};

/*
 * Build the lists cfg enables, reading their files now; URLs are downloaded by the updater
 * thread, which starts at once (until then a list holds only its files' ranges: a blocklist
 * lets those clients in, an allowlist keeps them out). nreaders: reader slots (workers).
 * Returns 0 with *out NULL when no list is enabled; 0 with *out set; -EINVAL when a file
 * cannot be read or has a bad line (err: "path:LINE: why" or "path: why"); -ENOMEM.
 */
int acl_new(const struct config *cfg, size_t nreaders, struct acl **out, char *err, size_t errlen);
/* Stop the updater (an ongoing download is abandoned) and free everything. NULL-safe. */
void acl_free(struct acl *acl);

/* A reader thread's slot (a worker's), kept beside the thread's other state: acl.c's own,
   set once by acl_worker_init; the thread passes aw->reader to acl_check. */
struct acl_worker {
    size_t reader;
};
void acl_worker_init(struct acl_worker *aw, size_t reader);

/* The hot path: the verdict for a client address. reader < nreaders, one thread per reader
   at a time. acl NULL = ACL_PASS. No allocation, no lock, O(log ranges). */
enum acl_verdict acl_check(struct acl *acl, size_t reader, const struct sockaddr *sa);

/*
 * Rebuild every enabled list now, from the calling thread: files re-read (a bad one is an
 * error, and then no list changes), URLs re-downloaded (a failed one keeps its previous
 * ranges, with a warning). 0, -EINVAL (err filled) or -ENOMEM.
 */
int acl_refresh(struct acl *acl, char *err, size_t errlen);

/*
 * For a config reload: take cfg's [defense.*list] settings (sources, update-each,
 * download-concurrency) and rebuild as acl_refresh does; on error nothing changes. A list
 * cfg disables is dropped; a list it enables that was off is built (acl_new must have been
 * given a config with at least one list, or pass the whole job to acl_new instead).
 */
int acl_apply(struct acl *acl, const struct config *cfg, char *err, size_t errlen);

/* What acl_probe found in one list. */
struct acl_probe {
    size_t files, urls; /* sources read, sources downloaded */
    uint64_t ranges;    /* merged ranges of them all */
};

/*
 * For `tgproxy doctor`: load every source of one list now, from the calling thread, as the
 * proxy would (files read and parsed; URLs downloaded with the same rules: HTTPS only, peer
 * and host name verified, 64 MiB cap, http_ms bounding the connect and any stall, 0 = the
 * default), without logging or serving anything. Returns 0 with *out filled; -EINVAL with err
 * naming the first source that failed ("path:LINE: \"entry\": why", "path: cannot open: ...",
 * "URL: HTTP status 404, expected 200", "URL: download failed: why"; a URL's user info shown
 * as ***); -ENOMEM. c is borrowed for the call. Thread-safety: any thread.
 */
int acl_probe(const struct config_iplist *c, uint32_t http_ms, struct acl_probe *out, char *err,
              size_t errlen);

/* Counters and sizes for metrics; any thread. acl NULL = every list off. */
void acl_stats(const struct acl *acl, enum acl_list_kind k, struct acl_list_stats *out);

/* "allowlist" / "blocklist", static. */
const char *acl_list_name(enum acl_list_kind k);

#endif
