/*
 * bench/proxy/memory: resident memory of the proxy process.
 *
 *   idle       RSS at 0, 1000, 5000 and 9000 idle relayed connections (FakeTLS, DC leg up,
 *              nothing in flight), KB per connection; the plain relay at the same counts is
 *              the floor. The hard fd limit here is 20000 and each connection costs the load
 *              generator two (client + fake DC side), hence 9000.
 *   active     RSS with 1000 connections whose downloads are stalled (clients not reading):
 *              every connection has bytes in flight.
 *   slow       peak RSS while 100 clients download at about 1 MB/s each (verified, nothing
 *              dropped); the goal is under 20 MB.
 *
 * Environment: TGKIT_BENCH_IDLE_MAX (default 9000) caps the idle series.
 */
#include "bench.h"

#include "core/clock.h"
#include "proxy/conn.h"
#include "proxy_harness.h"
#include "proxy_load.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static struct pcli *conns;
static int nconns;

/* Open connections until there are n; each says IDLE (or SRCE bytes) to the fake DC. */
static int open_to(int n, uint16_t port, struct pcli_opts o, const char *verb, uint64_t bytes)
{
    for (; nconns < n; nconns++) {
        uint8_t cmd[FAKEDC_CMD_LEN];
        fakedc_cmd(cmd, verb, 1, bytes);
        if (pcli_connect(&conns[nconns], port, &o) != 0 ||
            pcli_send(&conns[nconns], cmd, sizeof cmd) != 0) {
            fprintf(stderr, "memory: connection %d failed\n", nconns);
            return -1;
        }
    }
    return 0;
}

static void close_all(void)
{
    for (int i = 0; i < nconns; i++)
        pcli_close(&conns[i]);
    nconns = 0;
}

/* Wait until the fake DC has n open connections (every DC leg is up). */
static void wait_dc(struct fakedc *dc, uint64_t n)
{
    for (int i = 0; i < 20000 && fakedc_counters(dc).open < n; i++)
        tg__sleep_ms(1);
    tg__sleep_ms(200); /* let the proxy settle its buffers */
}

static void idle_series(const char *who, struct pproc *p, uint16_t port, struct pcli_opts o,
                        struct fakedc *dc, int max, uint64_t settle_ms, double *per_conn_out)
{
    static const int steps[] = {0, 1000, 5000, 9000};
    long rss0 = 0, prev = 0;
    uint64_t dc0 = fakedc_counters(dc).open;
    for (size_t i = 0; i < sizeof steps / sizeof steps[0] && steps[i] <= max; i++) {
        if (open_to(steps[i], port, o, "IDLE", 0) < 0)
            break;
        wait_dc(dc, dc0 + (uint64_t)steps[i]);
        tg__sleep_ms(settle_ms); /* the proxy parks the ciphers of quiet relays */
        struct pproc_report r;
        pproc_report(p, &r);
        if (i == 0)
            rss0 = r.rss_kb;
        double per = steps[i] ? (double)(r.rss_kb - rss0) / steps[i] : 0;
        if (i >= 2) /* slope past the first step, which also warms pools and caches */
            per = (double)(r.rss_kb - prev) / (steps[i] - steps[i - 1]);
        prev = r.rss_kb;
        char name[64];
        snprintf(name, sizeof name, "proxy_rss_idle_%s_%d", who, steps[i]);
        pload_line(name, "rss_kb=%ld kb_per_conn=%.2f", r.rss_kb, per);
        (void)rss0;
        if (per_conn_out && steps[i])
            *per_conn_out = per;
    }
    close_all();
}

struct slow {
    uint16_t port;
    struct pcli_opts o;
    uint64_t bytes;
    uint32_t seed;
    int rc;
};

static void *slow_main(void *arg)
{
    struct slow *s = arg;
    struct pcli c;
    uint8_t cmd[FAKEDC_CMD_LEN], buf[16384];
    s->rc = pcli_connect(&c, s->port, &s->o);
    fakedc_cmd(cmd, "SRCE", s->seed, s->bytes);
    if (s->rc == 0)
        s->rc = pcli_send(&c, cmd, sizeof cmd);
    uint64_t t0 = tg__now_ms();
    for (uint64_t got = 0; s->rc == 0 && got < s->bytes;) {
        ssize_t k = pcli_recv(&c, buf, sizeof buf);
        if (k <= 0 || pstream_check(s->seed, got, buf, (size_t)k) >= 0) {
            s->rc = -1;
            break;
        }
        got += (uint64_t)k;
        uint64_t due = t0 + got / 1000; /* 1 MB/s = 1000 bytes per ms */
        uint64_t now = tg__now_ms();
        if (due > now)
            tg__sleep_ms(due - now);
    }
    pcli_close(&c);
    return NULL;
}

static void slow_readers(struct pproc *p, uint16_t port, struct pcli_opts o)
{
    enum { N = 100 };
    static struct slow s[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        s[i] = (struct slow){.port = port, .o = o, .bytes = 3u << 20, .seed = 500u + i};
        pthread_create(&th[i], NULL, slow_main, &s[i]);
    }
    long peak = 0;
    for (int t = 0; t < 100; t++) { /* sample for up to ~5 s while the downloads run */
        struct pproc_report r;
        pproc_report(p, &r);
        peak = r.rss_kb > peak ? r.rss_kb : peak;
        tg__sleep_ms(50);
    }
    int failed = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        failed += s[i].rc != 0;
    }
    pload_line("proxy_rss_slow_readers_100", "peak_rss_kb=%ld failures=%d goal_kb=20480", peak,
               failed);
}

static int start(struct pharness *h, uint32_t antireplay_entries)
{
    struct pharness_opts o = {.fork_server = true,
                              .concurrency = 20000,
                              .workers = 2,
                              .antireplay_entries = antireplay_entries};
    if (pharness_start(h, &o) < 0) {
        fprintf(stderr, "memory: cannot start the proxy\n");
        return -1;
    }
    return 0;
}

/* Idle series for the relay and the proxy. The anti-replay table is a fixed 16 B x entries
   (16 MiB by default) whose pages are touched by random inserts, so here it is kept small
   (16384 entries, 256 KiB) to measure what a connection itself costs. */
static void phase_idle(int max)
{
    struct pharness h;
    struct pproc relay;
    if (start(&h, 16384) < 0)
        return;
    if (pproc_relay_start(&relay, h.dc_port) < 0) {
        pharness_stop(&h);
        return;
    }
    struct pcli_opts direct = {.mode = PCLI_DIRECT, .dc = 2, .timeout_ms = 10000};
    double relay_per = 0, proxy_per = 0;
    idle_series("relay", &relay, relay.port, direct, h.dc, max, 0, &relay_per);
    idle_series("proxy_tls", &h.proc, h.port, pharness_client(&h, PCLI_TLS), h.dc, max,
                CONN_PARK_MS + 1000, &proxy_per);
    pload_line("proxy_rss_idle_per_conn",
               "kb_per_conn=%.2f floor=relay floor_kb=%.2f delta_kb=%.2f goal_kb=2 "
               "(slope between the last two steps)",
               proxy_per, relay_per, proxy_per - relay_per);
    pproc_stop(&relay);
    pharness_stop(&h);
}

static void phase_active(void)
{
    struct pharness h;
    if (start(&h, 0) < 0)
        return;
    struct pcli_opts tls = pharness_client(&h, PCLI_TLS);
    struct pproc_report r0;
    pproc_report(&h.proc, &r0);
    if (open_to(1000, h.port, tls, "SRCE", 64u << 20) == 0) {
        wait_dc(h.dc, 1000);
        tg__sleep_ms(1000); /* the DC pushes until every client's socket buffers are full */
        struct pproc_report r;
        pproc_report(&h.proc, &r);
        pload_line("proxy_rss_active_1000", "rss_kb=%ld base_rss_kb=%ld kb_per_conn=%.2f bufs=%llu",
                   r.rss_kb, r0.rss_kb, (double)(r.rss_kb - r0.rss_kb) / 1000,
                   (unsigned long long)r.st.bufs);
    }
    close_all();
    pharness_stop(&h);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    setenv("TGKIT_COMMIT", tg__bench_commit(), 0);
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max; /* the children inherit it */
    setrlimit(RLIMIT_NOFILE, &rl);
    const char *env = getenv("TGKIT_BENCH_IDLE_MAX");
    int max = env && atoi(env) > 0 ? atoi(env) : 9000;
    conns = calloc(10000, sizeof *conns);
    if (!conns)
        return 1;
    phase_idle(max);
    phase_active();
    struct pharness h;
    if (start(&h, 0) == 0) { /* a fresh process: peak RSS is the slow readers' alone */
        slow_readers(&h.proc, h.port, pharness_client(&h, PCLI_TLS));
        pharness_stop(&h);
    }
    free(conns);
    return 0;
}
