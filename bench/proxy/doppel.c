/*
 * bench/proxy/doppel: what the doppelganger shaper costs, beside the plain-relay floor
 * measured in the same run.
 *
 * Three processes in the middle, each with its own fake DC:
 *   relay  a plain epoll TCP relay without crypto (the floor)
 *   off    tgproxy, FakeTLS client, fast mode, no [defense.doppelganger]
 *   on     the same with [defense.doppelganger] (built-in profile: mtg's Weibull gaps,
 *          dynamic record sizing less 0..99 bytes; max-delay 20 ms)
 * Each round measures every path, the order rotating each round so drift of the shared
 * machine spreads over all three (TGKIT_BENCH_ROUNDS rounds, default 5):
 *   down   one connection downloads TGKIT_BENCH_MB MiB (default 64), verified: MB/s, and
 *          the middle's allocations per MB;
 *   rtt    2000 back-to-back 64-byte round trips (each verified): p50 and p99 in us, and
 *          the middle's allocations per round trip (its connection's set-up included). The
 *          worst case for the shaper: a ping's echo is one record, due a drawn gap after
 *          the previous one, so it waits whenever the gap is longer than the round trip,
 *          within the delay budget (10 % of the time, 200 ms at the start);
 *   paced  200 round trips 20 ms apart (a chat, not a flood): p50 and p99.
 * Lines: per round and path (proxy_doppel_run, with the shaper's own counters for "on":
 * the milliseconds it held the download's records beside the download's duration, then
 * the records it timed and the milliseconds it held them over the whole round), then per
 * path the medians over the rounds and the ratios on / off and against the relay.
 */
#include "bench.h"

#include "core/clock.h"
#include "proxy_harness.h"
#include "proxy_load.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROUNDS 21

enum { P_RELAY, P_OFF, P_ON, NPATHS };
static const char *const path_names[NPATHS] = {"relay", "off", "on"};
enum { M_MBPS, M_ALLOCS, M_RTT50, M_RTT99, M_RTT_ALLOCS, M_PACED50, M_PACED99, NMEAS };

struct mid {
    uint16_t port;
    struct pcli_opts o;
    struct pproc *proc;
};

static unsigned env_uint(const char *name, unsigned def, unsigned max)
{
    const char *e = getenv(name);
    unsigned long v = e ? strtoul(e, NULL, 10) : 0;
    return v > 0 && v <= max ? (unsigned)v : def;
}

/* One round of one path into m[NMEAS]; 0, or -1 when a transfer or round trip failed. */
static int run_path(const struct mid *p, uint64_t total, double m[NMEAS], const char *name)
{
    struct pproc_report r0 = {0}, r1 = {0};
    pproc_report(p->proc, &r0);
    struct pload_result r = pload_run(1, p->port, &p->o, PLOAD_DOWN, total);
    pproc_report(p->proc, &r1);
    m[M_MBPS] = r.failures ? 0 : (double)total / 1e6 / r.seconds;
    m[M_ALLOCS] = r1.allocs ? (double)(r1.allocs - r0.allocs) / ((double)total / 1e6) : -1;
    int rc = r.failures ? -1 : 0;
    if (rc == 0)
        rc = pload_rtt(p->port, &p->o, 2000, 0, &m[M_RTT50], &m[M_RTT99]);
    struct pproc_report r15 = {0};
    pproc_report(p->proc, &r15); /* per round trip, the connection's set-up included */
    m[M_RTT_ALLOCS] = r15.allocs ? (double)(r15.allocs - r1.allocs) / 2100 : -1;
    if (rc == 0)
        rc = pload_rtt(p->port, &p->o, 200, 20000, &m[M_PACED50], &m[M_PACED99]);
    struct pproc_report r2 = {0};
    pproc_report(p->proc, &r2);
    pload_line("proxy_doppel_run",
               "path=%s mb_per_s=%.1f allocs_per_mb=%.2f rtt_p50_us=%.1f rtt_p99_us=%.1f "
               "allocs_per_rtt=%.3f paced_p50_us=%.1f paced_p99_us=%.1f down_ms=%.0f "
               "down_held_ms=%llu shaped_records=%llu shaper_held_ms=%llu failures=%d",
               name, m[M_MBPS], m[M_ALLOCS], m[M_RTT50], m[M_RTT99], m[M_RTT_ALLOCS], m[M_PACED50],
               m[M_PACED99], r.seconds * 1e3,
               (unsigned long long)(r1.st.shape_delay_ms - r0.st.shape_delay_ms),
               (unsigned long long)(r2.st.shaped_records - r0.st.shaped_records),
               (unsigned long long)(r2.st.shape_delay_ms - r0.st.shape_delay_ms), rc != 0);
    return rc;
}

static double median_of(double v[MAX_ROUNDS][NPATHS][NMEAS], size_t rounds, int path, int meas)
{
    double tmp[MAX_ROUNDS];
    for (size_t i = 0; i < rounds; i++)
        tmp[i] = v[i][path][meas];
    return pload_quantile(tmp, rounds, 0.5);
}

static void report(double v[MAX_ROUNDS][NPATHS][NMEAS], size_t rounds)
{
    double med[NPATHS][NMEAS];
    for (int p = 0; p < NPATHS; p++)
        for (int k = 0; k < NMEAS; k++)
            med[p][k] = median_of(v, rounds, p, k);
    for (int p = 0; p < NPATHS; p++)
        pload_line("proxy_doppel",
                   "path=%s rounds=%zu mb_per_s=%.1f allocs_per_mb=%.2f rtt_p50_us=%.1f "
                   "rtt_p99_us=%.1f allocs_per_rtt=%.3f paced_p50_us=%.1f paced_p99_us=%.1f "
                   "floor=relay mb_ratio=%.2f rtt_p50_delta_us=%.1f paced_p50_delta_us=%.1f",
                   path_names[p], rounds, med[p][M_MBPS], med[p][M_ALLOCS], med[p][M_RTT50],
                   med[p][M_RTT99], med[p][M_RTT_ALLOCS], med[p][M_PACED50], med[p][M_PACED99],
                   med[p][M_MBPS] / med[P_RELAY][M_MBPS], med[p][M_RTT50] - med[P_RELAY][M_RTT50],
                   med[p][M_PACED50] - med[P_RELAY][M_PACED50]);
    pload_line("proxy_doppel_cost",
               "mb_ratio_on_off=%.2f rtt_p50_on_off=%.2f rtt_p99_on_off=%.2f "
               "paced_p50_on_off=%.2f paced_p99_on_off=%.2f (medians over %zu interleaved rounds)",
               med[P_ON][M_MBPS] / med[P_OFF][M_MBPS], med[P_ON][M_RTT50] / med[P_OFF][M_RTT50],
               med[P_ON][M_RTT99] / med[P_OFF][M_RTT99],
               med[P_ON][M_PACED50] / med[P_OFF][M_PACED50],
               med[P_ON][M_PACED99] / med[P_OFF][M_PACED99], rounds);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    setenv("TGKIT_COMMIT", tg__bench_commit(), 0);
    size_t rounds = env_uint("TGKIT_BENCH_ROUNDS", 5, MAX_ROUNDS);
    uint64_t total = (uint64_t)env_uint("TGKIT_BENCH_MB", 64, 1 << 16) << 20;
    struct pharness off, on;
    struct pproc relay;
    if (pharness_start(&off, &(struct pharness_opts){.ee = true, .fork_server = true}) < 0 ||
        pharness_start(
            &on, &(struct pharness_opts){.ee = true, .doppel = true, .fork_server = true}) < 0 ||
        pproc_relay_start(&relay, off.dc_port) < 0) {
        fprintf(stderr, "doppel: cannot start the proxies or the relay\n");
        return 1;
    }
    struct mid paths[NPATHS] = {
        {relay.port, {.mode = PCLI_DIRECT, .dc = 2, .timeout_ms = 60000}, &relay},
        {off.port, pharness_client(&off, PCLI_TLS), &off.proc},
        {on.port, pharness_client(&on, PCLI_TLS), &on.proc},
    };
    paths[P_OFF].o.timeout_ms = paths[P_ON].o.timeout_ms = 60000;
    static double v[MAX_ROUNDS][NPATHS][NMEAS];
    int failed = 0;
    for (size_t r = 0; r < rounds; r++)
        for (int k = 0; k < NPATHS; k++) {
            int p = (int)((r + (size_t)k) % NPATHS);
            failed |= run_path(&paths[p], total, v[r][p], path_names[p]);
        }
    report(v, rounds);
    pproc_stop(&relay);
    pharness_stop(&on);
    pharness_stop(&off);
    return failed ? 1 : 0;
}
