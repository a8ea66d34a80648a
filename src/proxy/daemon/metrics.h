/*
 * metrics: tgproxy's metric families and the Prometheus text page ([stats.prometheus]).
 *
 * Every exported family is declared once in METRICS_LIST (metrics.c): name (without the
 * prefix), type, help and where its samples come from (a struct stats field, the end-reason
 * list, the per-secret counters). metrics_collect() walks it over a fresh relaxed snapshot
 * of every worker's counters (server.h read views) and hands each sample to a callback, so
 * the Prometheus page and the statsd pusher (statsd.h) say the same thing. A scrape reads
 * counters each worker writes alone: it never takes a lock a worker waits on.
 *
 * Labels: secret="<label>" (the config label, never the secret), worker="<n>",
 * outcome/reason/direction for the split families. docs/tgproxy.md lists every family.
 *
 * The page is served by libmicrohttpd on its own thread at cfg->prometheus.bind, path
 * cfg->prometheus.path (GET or HEAD; other paths 404, other methods 405).
 *
 * Ownership: struct metrics is created by metrics_start and freed by metrics_stop; it
 * borrows the server, which must outlive it. Thread-safety: start/stop from the
 * controlling thread; metrics_collect from any thread.
 */
#ifndef TGPROXY_METRICS_H
#define TGPROXY_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

struct server;
struct metrics;

/* A histogram's samples are its family with a suffix: "_bucket" (label le, cumulative),
   "_sum" and "_count". */
enum metric_type { METRIC_COUNTER, METRIC_GAUGE, METRIC_HISTOGRAM };

/* One sample. label_key[i] / label_val[i] for i < nlabels; strings valid during the call. */
struct metric_sample {
    const char *family; /* e.g. "client_connections_total" (no prefix) */
    const char *suffix; /* a histogram's "_bucket", "_sum" or "_count"; else "" */
    const char *help;
    enum metric_type type;
    bool first; /* first sample of its family in this walk */
    size_t nlabels;
    const char *label_key[2];
    const char *label_val[2];
    double value;
};

typedef int (*metrics_emit_fn)(void *user, const struct metric_sample *m);

/* Walk every sample in a fixed order (the same for one config). Stops at and returns the
   first non-zero value emit returns, else 0. */
int metrics_collect(const struct server *s, metrics_emit_fn emit, void *user);

/* A sample value as the page and statsd print it: whole numbers as integers ("1000000",
   not "1e+06"), others in the shortest form that reads back exactly ("0.007"), NaN and
   infinities as Prometheus spells them ("NaN", "+Inf", "-Inf"). Returns snprintf's result
   (>= cap: truncated; 32 bytes always suffice). */
int metrics_format_value(double v, char *out, size_t cap);

/* mtg's families (names, labels, types), computed from the same counters, for
   [stats.prometheus] names = "mtg" (metrics_mtg.c; docs/tgproxy.md has the mapping). Same
   contract as metrics_collect. */
int metrics_collect_mtg(const struct server *s, metrics_emit_fn emit, void *user);

/* The Prometheus text exposition (format 0.0.4) of every sample into out, mtg's families
   after tgproxy's with names = "mtg". 0 or -ENOMEM. */
int metrics_render(const struct server *s, const char *prefix, tg__buf *out);

/* Start the page for s's config. 0, or -errno with a line logged (bind failures name the
   address). */
int metrics_start(const struct server *s, struct metrics **out);
/* Port the page listens on; 0 for NULL. */
uint16_t metrics_port(const struct metrics *m);
/* Stop serving and free. NULL-safe. */
void metrics_stop(struct metrics *m);

#endif
