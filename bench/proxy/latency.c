/*
 * bench/proxy/latency: 64-byte round trips on one established connection, p50 and p99, for
 * direct (into the fake DC), the plain relay (floor) and tgproxy (FakeTLS and dd clients),
 * and tgproxy with the doppelganger shaper on (FakeTLS, built-in profile, max-delay 20 ms:
 * a ping's echo is one record, so it may wait for its drawn gap; the cost of shaping
 * interactive traffic).
 * Middle-proxy mode (proxy_tls_mp, proxy_dd_mp): a second tgproxy with every secret
 * tagged, whose middle proxy is tgproxy-fakemp in front of its own fake DC; the client frames
 * its 64 bytes as one packet. Then the slow-readers scenario: SLOW clients of the same
 * middle-proxy pool each download SLOW_MB MiB and read it at about 1 MB/s (tgproxy holds
 * what they have not read: there is no flow control per client on a middle-proxy
 * connection), and the round trips of one more client are measured meanwhile
 * (proxy_rtt64_dd_mp_beside_slow), next to proxy_dd_mp without them; the peak of what
 * tgproxy held for them (middle_proxy_client_buffer_peak_bytes) and the readers' verdict
 * are on the row.
 * Each round trip is verified (the fake DC echoes). Reported next to the relay as a
 * difference in microseconds (the goal: within 15 us of the plain relay).
 *
 * Environment: TGKIT_BENCH_RTT (default 20000) round trips per path.
 */
#include "bench.h"

#include "core/clock.h"
#include "proxy_harness.h"
#include "proxy_load.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SLOW = 20, SLOW_MB = 4 };

struct slow {
    uint16_t port;
    struct pcli_opts o;
    uint32_t seed;
    int rc;
    volatile int *stop;
};

/* A client that downloads SLOW_MB MiB and reads it at about 1 MB/s, verifying it. */
static void *slow_main(void *arg)
{
    struct slow *s = arg;
    struct pcli c;
    uint8_t cmd[FAKEDC_CMD_LEN], buf[16384];
    uint64_t total = (uint64_t)SLOW_MB << 20;
    s->rc = pcli_connect(&c, s->port, &s->o);
    fakedc_cmd(cmd, "SRCE", s->seed, total);
    if (s->rc == 0)
        s->rc = pcli_send(&c, cmd, sizeof cmd);
    uint64_t t0 = tg__now_ms();
    for (uint64_t got = 0; s->rc == 0 && got < total && !*s->stop;) {
        ssize_t k = pcli_recv(&c, buf, sizeof buf);
        if (k <= 0 || pstream_check(s->seed, got, buf, (size_t)k) >= 0) {
            s->rc = -1;
            break;
        }
        got += (uint64_t)k;
        uint64_t due = t0 + got / 1000, now = tg__now_ms(); /* 1000 bytes per ms */
        if (due > now)
            tg__sleep_ms(due - now);
    }
    pcli_close(&c);
    return NULL;
}

/* Round trips of one client while SLOW slow readers share its middle-proxy pool. */
static void beside_slow(struct pharness *hmp, int n, double alone50, double alone99)
{
    static struct slow s[SLOW];
    pthread_t th[SLOW];
    volatile int stop = 0;
    struct pcli_opts o = pharness_client(hmp, PCLI_DD);
    o.framed = true;
    struct pproc_report r0, r1;
    pproc_report(&hmp->proc, &r0);
    for (int i = 0; i < SLOW; i++) {
        s[i] = (struct slow){.port = hmp->port, .o = o, .seed = 700u + (uint32_t)i, .stop = &stop};
        pthread_create(&th[i], NULL, slow_main, &s[i]);
    }
    tg__sleep_ms(300); /* their downloads are under way: tgproxy holds what they do not read */
    double p50 = 0, p99 = 0;
    int rc = pload_rtt(hmp->port, &o, n, 0, &p50, &p99);
    pproc_report(&hmp->proc, &r1);
    int failed = 0;
    for (int i = 0; i < SLOW; i++) {
        pthread_join(th[i], NULL);
        failed += s[i].rc != 0;
    }
    pload_line("proxy_rtt64_dd_mp_beside_slow",
               "p50_us=%.1f p99_us=%.1f failures=%d slow_readers=%d slow_mb_each=%d "
               "slow_failures=%d held_peak_kb=%llu rss_growth_kb=%ld floor=proxy_dd_mp "
               "p50_delta_us=%.1f p99_delta_us=%.1f",
               p50, p99, rc != 0, SLOW, SLOW_MB, failed,
               (unsigned long long)(r1.st.mp_held_peak / 1024), r1.rss_kb - r0.rss_kb,
               p50 - alone50, p99 - alone99);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    setenv("TGKIT_COMMIT", tg__bench_commit(), 0);
    const char *env = getenv("TGKIT_BENCH_RTT");
    int n = env && atoi(env) > 0 ? atoi(env) : 20000;
    struct pharness h, hd, hmp;
    struct pproc relay;
    if (pharness_start(&h, &(struct pharness_opts){.ee = true, .dd = true, .fork_server = true}) <
            0 ||
        pharness_start(&hmp,
                       &(struct pharness_opts){
                           .ee = true, .dd = true, .fork_server = true, .midproxy = true}) < 0 ||
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
        {"proxy_tls_mp", hmp.port, pharness_client(&hmp, PCLI_TLS)},
        {"proxy_dd_mp", hmp.port, pharness_client(&hmp, PCLI_DD)},
    };
    paths[5].o.framed = paths[6].o.framed = true;
    double mp50 = 0, mp99 = 0;
    double relay50 = 0, relay99 = 0;
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        double p50 = 0, p99 = 0;
        int rc = pload_rtt(paths[i].port, &paths[i].o, n, 0, &p50, &p99);
        if (i == 1) {
            relay50 = p50;
            relay99 = p99;
        }
        if (i == 6) {
            mp50 = p50;
            mp99 = p99;
        }
        char name[64];
        snprintf(name, sizeof name, "proxy_rtt64_%s", paths[i].name);
        pload_line(name,
                   "p50_us=%.1f p99_us=%.1f failures=%d floor=relay p50_delta_us=%.1f "
                   "p99_delta_us=%.1f",
                   p50, p99, rc != 0, i >= 1 ? p50 - relay50 : 0, i >= 1 ? p99 - relay99 : 0);
    }
    beside_slow(&hmp, n / 4 > 1000 ? n / 4 : 1000, mp50, mp99);
    pproc_stop(&relay);
    pharness_stop(&hmp);
    pharness_stop(&hd);
    pharness_stop(&h);
    return 0;
}
