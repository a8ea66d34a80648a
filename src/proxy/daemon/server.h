/*
 * server: tgproxy's engine entry point: worker threads, listeners, shutdown.
 *
 * N workers (config `workers`, 0 = online CPUs), each with its own epoll loop (loop.h) and
 * its own SO_REUSEPORT socket per bind-to address (IPv4 and IPv6; IPv6 sockets are
 * V6ONLY), so the kernel spreads connections and a connection never changes thread.
 * Shared between workers: the read-only config, the active-connection counter (the global
 * `concurrency` limit, enforced at accept) and the anti-replay cache.
 *
 * server_run() serves until SIGINT or SIGTERM and returns 0; server_start()/server_stop()
 * give tests and benchmarks the same engine in-process (bind-to port 0 picks a free port,
 * the same one for every worker; server_port() reports it).
 *
 * Reload: server_reload / SIGHUP publish a new configuration generation (generation.h) that new
 * connections take; established ones keep theirs. server_config() stays the starting config
 * (what a reload cannot change: listeners, workers, buffers, anti-replay, [stats.*]).
 *
 * Ownership: cfg is borrowed and must outlive the server. Thread-safety: server_* calls are
 * made by one controlling thread; server_stats() may run while workers serve.
 */
#ifndef TGPROXY_SERVER_H
#define TGPROXY_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "proxy/config/config.h"
#include "proxy/engine/stats.h"

struct acl;
struct gen;
struct server;

/*
 * Serve cfg until SIGINT/SIGTERM (which it blocks in the calling thread and waits for, with
 * SIGHUP). SIGHUP re-reads the file at path (server_reload_file); path NULL (simple-run)
 * logs that there is nothing to re-read. The first SIGINT/SIGTERM drains: accepting stops,
 * open connections run on for up to drain-timeout (of the current config), then the rest
 * are closed; a second SIGINT/SIGTERM closes them at once. Returns 0 after a shutdown
 * (drained or not), or -errno when it cannot start (bind, threads, memory; a message is
 * logged at error level).
 */
int server_run(const struct config *cfg, const char *path);

/*
 * Reload: make cfg (validated here; moved into the server on success, *cfg left empty) the
 * configuration of new connections. Secrets, [limits.LABEL], [dcs], fronting, timeouts,
 * log level and the rest apply to connections accepted from now on; open connections keep
 * theirs. bind-to must name the running listeners (else -EINVAL: a reload never adds or
 * removes listeners); workers, concurrency, buffer-size, bulk-budget, anti-replay and
 * [stats.*] keep their running values, with a warning each. Returns 0, -EINVAL (err says
 * why; nothing changed) or -ENOMEM. Controlling thread only; counted for the metrics.
 */
int server_reload(struct server *s, struct config *cfg, char *err, size_t errlen);
/* Add every text form of cfg's secrets (secret_scrub_forms) to the default logger's scrub
   list; a secret that cannot be added is logged by label. At start and after each reload;
   controlling thread (the logger takes one adder at a time). */
void server_scrub_secrets(const struct config *cfg);
/* Load path (with the [api] state file merged, apistore.h) and server_reload it, logging the
   outcome (a refusal names file:line); holds the reload lock. Any thread. */
int server_reload_file(struct server *s, const char *path);
/* The same with the reload lock already held; origin ("SIGHUP", "api") goes in the log and
   the API's reload history; err gets the refusal. */
int server_reload_file_locked(struct server *s, const char *path, const char *origin, char *err,
                              size_t errlen);
/* The reload lock: SIGHUP reloads and the API's read-modify-write of its state file take it,
   so they never interleave. Not recursive. */
void server_reload_lock(struct server *s);
void server_reload_unlock(struct server *s);
/* The current generation with a reference (gen_unref it). Any thread. */
struct gen *server_gen(struct server *s);
/* Whether server_drain ran. Any thread. */
bool server_draining(const struct server *s);
/* Reloads applied and refused, whether the last one was applied (true before any) and
   when the configuration last changed (the last applied reload, else the start; Unix
   seconds). Any thread. */
void server_reload_counts(const struct server *s, uint64_t *ok, uint64_t *failed, bool *last_ok,
                          double *last_ok_time);

/* Bind, start the workers and return at once. 0 or -errno (nothing left running). */
int server_start(const struct config *cfg, struct server **out);
/* Port actually bound for bind-to entry i (0 if out of range). */
uint16_t server_port(const struct server *s, size_t i);
/* Sum of every worker's counters (relaxed snapshot). */
void server_stats(const struct server *s, struct stats *out);
/* Read-side views for the metrics exporters (metrics.h, statsd.h); any thread, never
   blocking a worker (relaxed loads of counters each worker writes alone). */
size_t server_workers(const struct server *s);
const struct config *server_config(const struct server *s);
/* Worker k's counters (0 <= k < server_workers). */
void server_worker_stats(const struct server *s, size_t k, struct stats *out);
/* Per-secret counters are kept by label, so they continue across reloads: every label seen
   since start has a slot i < server_secret_count (a removed secret's counters stay). */
size_t server_secret_count(const struct server *s);
const char *server_secret_label(const struct server *s, size_t i);
/* Slot i's counters summed over workers. */
void server_secret_stats(const struct server *s, size_t i, struct stats_secret *out);
/* [fleet]: the control API reset label slot's quota (fleet.h fleet_quota_reset). */
void server_fleet_quota_reset(struct server *s, uint32_t slot);
/* Slot i's client addresses that authenticated within window_s (seen.h: at most SEEN_ADDRS;
   up to max of them, newest first, into out, NULL = count only) and its last handshake
   (*last, Unix seconds, 0 = never). window_s 0 = 3600, as unique-ips-window. */
struct seen_addr;
size_t server_secret_seen(const struct server *s, size_t i, uint32_t window_s,
                          struct seen_addr *out, size_t max, int64_t *last);
/* DC slot's connect counters (stats.h stats_dc) summed over workers (slot < STATS_DC_SLOTS). */
void server_dc_stats(const struct server *s, size_t slot, struct stats_dc *out);
/* Anti-replay cache: handshakes recorded, replays found, entries it has room for now
   (all 0 when anti-replay is off). */
void server_replay_counts(const struct server *s, uint64_t *inserts, uint64_t *replays,
                          uint64_t *capacity);
/* Anti-replay entries live now (recorded within the window; 0 when anti-replay is off).
   Lock-free, for a scrape. */
uint64_t server_replay_live(const struct server *s);
/* Wall-clock time server_start ran, in Unix seconds. */
double server_start_time(const struct server *s);
/* The access lists (acl.h: acl_refresh, acl_apply for a reload, acl_stats), or NULL when
   neither [defense.allowlist] nor [defense.blocklist] is enabled. Owned by s. */
/* [middle-proxy] documents' source (mpsource.h), or NULL. Any thread. */
struct mpsource *server_mpsource(const struct server *s);
struct acl *server_acl(const struct server *s);
/* The learned FakeTLS answers ([defense.tls-front], tlsfront.h), or NULL when off. Owned by s. */
struct tlsfront *server_tlsfront(const struct server *s);
/* Port the Prometheus page listens on (0 = off). */
uint16_t server_metrics_port(const struct server *s);
/* Port the [api] control API listens on (0 = off). */
uint16_t server_api_port(const struct server *s);

/* Drain: every worker closes its listeners (new connections are refused); open connections
   run on until they end or server_stop. Any time after server_start, controlling thread. */
void server_drain(struct server *s);
/* Close the open connections of label accepted under a generation older than the current
   one (a reload just left the label out or changed its key): each worker closes its own
   (END_REVOKED) when woken. Any thread, after the reload that revoked it. */
void server_revoke(struct server *s, const char *label);
/* Client connections open now, over every worker (relaxed read; any thread). */
uint32_t server_active(const struct server *s);

/* Stop accepting, close every connection, join the workers and free s. NULL-safe. */
void server_stop(struct server *s);

/* Open files cfg needs with nworkers workers (0 = as many as server_start would run):
   two per connection up to `concurrency`, the listeners and a few per worker, some slack.
   server_start raises the soft limit to the hard one and warns below this; doctor checks it. */
uint64_t server_fds_needed(const struct config *cfg, size_t nworkers);

#endif
