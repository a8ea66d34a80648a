/*
 * statsd: push tgproxy's metrics (metrics.h) to a statsd server over UDP ([stats.statsd]).
 *
 * A thread wakes every flush-interval (default 10 s), walks the metric table and sends one
 * line per sample, packed into datagrams of at most STATSD_DATAGRAM bytes: counters as the
 * increase since the previous flush (`|c`, skipped when zero), gauges as their value (`|g`).
 * A counter's previous value is kept by its name and labels, so a reload that adds secret
 * labels (new series in the middle of the walk) leaves every other series' increase exact.
 * Names are "<metric-prefix>.<family>"; labels ride as tags in the chosen tag-format:
 *   datadog   name:1|c|#secret:a,direction:to_client
 *   influxdb  name,secret=a,direction=to_client:1|c
 *   graphite  name;secret=a;direction=to_client:1|c
 * A final flush runs at stop. Send errors (nobody listening) are counted, not logged per
 * datagram: statsd is fire-and-forget.
 *
 * Ownership: created by statsd_start, freed by statsd_stop; borrows the server.
 * Thread-safety: start/stop from the controlling thread.
 */
#ifndef TGPROXY_STATSD_H
#define TGPROXY_STATSD_H

#include <stdint.h>

#define STATSD_DATAGRAM 1432 /* bytes: fits an IPv6 packet on a 1500-byte link */

struct server;
struct statsd;

/* Open the socket and start the flushing thread. 0 or -errno (logged). */
int statsd_start(const struct server *s, struct statsd **out);
/* Flush once more, stop the thread and free. NULL-safe. */
void statsd_stop(struct statsd *sd);

#endif
