/*
 * proxy_load: the load generator of the proxy benchmarks on top of proxy_client: many
 * connections opened first, then released together to upload, download or echo a verified
 * stream, timed from release to the last byte. Also percentiles and the benchmark line
 * printer shared by the benchmarks in bench/proxy.
 *
 * Thread-safety: pload_run creates and joins its own threads; call from one thread.
 */
#ifndef TGKIT_TEST_PROXY_LOAD_H
#define TGKIT_TEST_PROXY_LOAD_H

#include <stddef.h>
#include <stdint.h>

#include "proxy_client.h"

enum pload_kind { PLOAD_UP, PLOAD_DOWN, PLOAD_ECHO };

struct pload_result {
    double seconds; /* release to last transfer done */
    int failures;   /* connections that failed to connect or to verify */
};

/* n connections to port with opts, each moving bytes_each bytes of kind. */
struct pload_result pload_run(int n, uint16_t port, const struct pcli_opts *opts,
                              enum pload_kind kind, uint64_t bytes_each);

/* Same, calling ready(arg) once every connection is established, just before release (so
   a benchmark can sample counters that should cover only the transfer). */
struct pload_result pload_run_ready(int n, uint16_t port, const struct pcli_opts *opts,
                                    enum pload_kind kind, uint64_t bytes_each,
                                    void (*ready)(void *), void *arg);

/* Same, with at most window bytes in flight per connection for PLOAD_UP and PLOAD_DOWN
   (pcli_sink_window / pcli_source_window); window 0 = unbounded (pload_run_ready). */
struct pload_result pload_run_window(int n, uint16_t port, const struct pcli_opts *opts,
                                     enum pload_kind kind, uint64_t bytes_each, uint64_t window,
                                     void (*ready)(void *), void *arg);

/* 64-byte round trips through port (fake DC echo, each verified), pause_us apart (0 = back
   to back), after a few warm-up ones: p50 and p99 in microseconds. 0, or -1 when a round
   trip failed or came back wrong. */
int pload_rtt(uint16_t port, const struct pcli_opts *opts, int n, unsigned pause_us, double *p50,
              double *p99);

/* q-quantile (0..1) of v[0..n) (sorts v). */
double pload_quantile(double *v, size_t n, double q);

/* One machine-parsable line: "bench=<name> <fields> commit=<id>". */
void pload_line(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
