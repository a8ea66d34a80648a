/*
 * bench/proxy/latency: 64-byte round trips on one established connection, p50 and p99, for
 * direct (into the fake DC), the plain relay (floor) and tgproxy (FakeTLS and dd clients),
 * and tgproxy with the doppelganger shaper on (FakeTLS, built-in profile, max-delay 20 ms:
 * a ping's echo is one record, so it may wait for its drawn gap; the cost of shaping
 * interactive traffic).
 * Each round trip is verified (the fake DC echoes). Reported next to the relay as a
 * difference in microseconds (the goal: within 15 us of the plain relay).
 *
 * Environment: TGKIT_BENCH_RTT (default 20000) round trips per path.
 */
#include "bench.h"

#include "core/clock.h"
#include "proxy_harness.h"
#include "proxy_load.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    setenv("TGKIT_COMMIT", tg__bench_commit(), 0);
    const char *env = getenv("TGKIT_BENCH_RTT");
    int n = env && atoi(env) > 0 ? atoi(env) : 20000;
    struct pharness h, hd;
    struct pproc relay;
    if (pharness_start(&h, &(struct pharness_opts){.ee = true, .dd = true, .fork_server = true}) <
            0 ||
        pharness_start(&hd, &(struct pharness_opts){.doppel = true, .fork_server = true}) < 0 ||
        pproc_relay_start(&relay, h.dc_port) < 0) {
        fprintf(stderr, "latency: cannot start the proxy or the relay\n");
        return 1;
    }
    struct pcli_opts direct = {.mode = PCLI_DIRECT, .dc = 2, .timeout_ms = 10000};
    struct {
        const char *name;
        uint16_t port;
        struct pcli_opts o;
    } paths[] = {
        {"direct", h.dc_port, direct},
        {"relay", relay.port, direct},
        {"proxy_tls", h.port, pharness_client(&h, PCLI_TLS)},
        {"proxy_dd", h.port, pharness_client(&h, PCLI_DD)},
        {"proxy_tls_doppel", hd.port, pharness_client(&hd, PCLI_TLS)},
    };
    double relay50 = 0, relay99 = 0;
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        double p50 = 0, p99 = 0;
        int rc = pload_rtt(paths[i].port, &paths[i].o, n, 0, &p50, &p99);
        if (i == 1) {
            relay50 = p50;
            relay99 = p99;
        }
        char name[64];
        snprintf(name, sizeof name, "proxy_rtt64_%s", paths[i].name);
        pload_line(name,
                   "p50_us=%.1f p99_us=%.1f failures=%d floor=relay p50_delta_us=%.1f "
                   "p99_delta_us=%.1f",
                   p50, p99, rc != 0, i >= 1 ? p50 - relay50 : 0, i >= 1 ? p99 - relay99 : 0);
    }
    pproc_stop(&relay);
    pharness_stop(&hd);
    pharness_stop(&h);
    return 0;
}
