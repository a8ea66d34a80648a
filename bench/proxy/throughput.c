/*
 * bench/proxy/throughput: MB/s through 1 and 100 connections each way, CPU seconds per GB of
 * the process in the middle, and allocations on the relay path once warm; each without a
 * bound on the bytes in flight and with at most 1 MiB in flight per connection (names end
 * in _win1m: uploads stay within 1 MiB of what the fake DC acknowledged, downloads grant
 * the DC 1 MiB of credit beyond what arrived).
 *
 * Paths, measured in the same run with the same load generator and fake DC:
 *   direct      load generator straight into the fake DC (the harness ceiling)
 *   relay       a plain epoll TCP relay without crypto, in a child process (the floor)
 *   proxy_tls   tgproxy (FakeTLS client leg, fast mode) in a child process
 *   proxy_dd    tgproxy (dd client leg, fast mode)
 *   proxy_dd_mp / proxy_tls_mp  tgproxy in middle-proxy mode (every secret tagged), its own
 *               instance whose middle proxy is tgproxy-fakemp in front of its own fake DC;
 *               the clients frame their bytes as real ones do (padded intermediate, one
 *               packet per 64 KiB chunk). cpu_s_per_gb is tgproxy's alone, as for the others
 *               (the fake middle proxy's is mp_cpu_s_per_gb); compare with proxy_dd and
 *               proxy_tls just above
 *   proxy_tls_doppel  tgproxy (FakeTLS, fast mode) with the doppelganger shaper on (built-in
 *               profile), a fourth instance with its own fake DC: the shaper's cost on
 *               bulk transfers, next to proxy_tls without it
 *   proxy_tls_nofast  tgproxy (FakeTLS, fast-mode = false: downloads re-encrypted), a
 *               second instance with its own fake DC
 *   proxy_tls_chain   tgproxy (FakeTLS, fast mode) whose DC connections go through a SOCKS5
 *               upstream ([network] proxies: Debian's microsocks, user/pass), a third
 *               instance with its own fake DC; cpu_s_per_gb is tgproxy's alone, and
 *               socks_cpu_s_per_gb the upstream's (skipped when microsocks is missing)
 *   proxy_tls_mss1460 / proxy_tls_mss256  tgproxy (FakeTLS, fast mode) with [defense]
 *               mss-clamp = 1460 (an Ethernet-sized MSS: loopback's own is ~65 kB, so this
 *               is the honest "unclamped" figure for a real network) and = 256 (the clamp
 *               that cuts a ClientHello), each its own instance with its own fake DC; the
 *               clamp applies to both directions. proxy_tls and proxy_dd run unclamped
 *               (mss-clamp = false) whatever the default.
 *   proxy_tls_api / proxy_dd_api  (TGKIT_BENCH_API=1) tgproxy with [api], its own instance
 *               with its own fake DC, whose API a panel-like client scrapes every 100 ms
 *               during the run (GET /v1/secrets and /v1/info, tests/support/api_scrape.c);
 *               each follows the same row without the API and gives api_cpu_ratio and
 *               api_rate_ratio against it (issue 25: the API never slows the data path)
 * plus AES-256-CTR alone (decrypt + encrypt per byte, one core) as the crypto floor.
 * Every transfer is verified end to end by the fake DC (uploads) or the client (downloads).
 *
 * Every row is compared with the direct and relay rows of the same kind, connection count
 * and window, measured just before it.
 *
 * Environment: TGKIT_BENCH_MB (default 256) = megabytes per run; the 100-connection runs
 * move the same total. TGKIT_BENCH_METRICS=1 turns the first proxy's Prometheus page on
 * (metrics.h; no scrapes), to compare its rows with a run without it (metrics_overhead.c
 * measures that difference properly: interleaved rounds, with scrapes). TGKIT_BENCH_API=1 adds
 * the _api rows (above). TGKIT_BENCH_PATHS =
 * a comma-separated list of path names runs only those (direct and relay, the floors,
 * always run), e.g. TGKIT_BENCH_PATHS=proxy_tls,proxy_tls_mss1460,proxy_tls_mss256.
 */
#include "bench.h"

#include "api_scrape.h"
#include "core/clock.h"
#include "proxy/wire/crypto.h"
#include "proxy_harness.h"
#include "proxy_load.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct path {
    const char *name;
    uint16_t port;
    enum pcli_mode mode;
    struct pproc *proc; /* process in the middle, NULL for direct */
    struct pharness *h; /* its fake DC and client keys */
    struct pproc *also; /* a second process on the path (the SOCKS5 upstream), or NULL */
    bool framed;        /* clients frame their packets (middle-proxy mode) */
    struct api_scrape *scrape; /* scraped during its runs (the _api rows), or NULL */
};

/* The last row without the API, for the _api row that follows it. */
static double prev_mbps, prev_cpu;

static double aes_floor_s_per_gb(void)
{
    uint8_t key[32] = {1}, iv[16] = {2};
    struct crypto_ctr a = {0}, b = {0};
    crypto_ctr_init(&a, key, iv);
    crypto_ctr_init(&b, key, iv);
    static uint8_t buf[16384];
    uint64_t total = 1ull << 30, t0 = tg__thread_cpu_ns();
    for (uint64_t done = 0; done < total; done += sizeof buf) {
        crypto_ctr_apply(&a, buf, sizeof buf);
        crypto_ctr_apply(&b, buf, sizeof buf);
    }
    double s = (double)(tg__thread_cpu_ns() - t0) / 1e9;
    tg__bench_sink(buf[0]);
    crypto_ctr_cleanup(&a);
    crypto_ctr_cleanup(&b);
    return s;
}

struct sample_arg {
    struct pproc *proc;
    struct pproc_report *rep;
    struct fakedc *dc;
    uint64_t want_headers; /* the proxy has finished every DC handshake at this count */
};

/* Called with every client connected: wait for the proxy's DC legs, then sample. */
static void sample(void *arg)
{
    struct sample_arg *a = arg;
    for (int i = 0; i < 10000 && fakedc_counters(a->dc).headers_ok < a->want_headers; i++)
        tg__sleep_ms(1);
    if (a->proc)
        pproc_report(a->proc, a->rep);
}

#define WINDOW (1u << 20) /* bytes in flight per connection in the bounded variant */

/* One scenario; floors[0] = direct MB/s, floors[1] = relay CPU s/GB (filled by those runs).
   window 0 = unbounded. */
static void run_path(const struct path *p, int conns, enum pload_kind kind, uint64_t window,
                     uint64_t total, double floors[2])
{
    struct pharness *h = p->h;
    struct pcli_opts o = pharness_client(h, p->mode);
    o.timeout_ms = 60000;
    o.framed = p->framed;
    uint64_t per = total / (uint64_t)conns;
    if (p->framed)
        per &= ~(uint64_t)3; /* whole packets */
    struct pproc_report r0 = {0}, r1 = {0}, s0 = {0}, s1 = {0};
    /* warm-up at the same concurrency, so pools have grown before allocations count */
    if (p->proc)
        pload_run(conns, p->port, &o, PLOAD_ECHO, 65536);
    struct sample_arg arg = {p->proc, &r0, h->dc,
                             fakedc_counters(h->dc).headers_ok + (uint64_t)conns};
    if (p->also)
        pproc_report(p->also, &s0);
    uint64_t scrapes0 = p->scrape ? api_scrape_rounds(p->scrape, NULL) : 0, bad = 0;
    if (p->scrape)
        api_scrape_set(p->scrape, true);
    struct pload_result r = pload_run_window(conns, p->port, &o, kind, per, window, sample, &arg);
    if (p->scrape)
        api_scrape_set(p->scrape, false);
    if (p->proc)
        pproc_report(p->proc, &r1);
    if (p->also)
        pproc_report(p->also, &s1);
    double mb = (double)total / 1e6, mbps = r.failures ? 0 : mb / r.seconds;
    double cpu_s_gb = p->proc ? (double)(r1.cpu_ns - r0.cpu_ns) / 1e9 / ((double)total / 1e9) : 0;
    double allocs_mb = p->proc && r1.allocs ? (double)(r1.allocs - r0.allocs) / mb : -1;
    char name[96];
    snprintf(name, sizeof name, "proxy_tput_%s_%s_%dconn%s", p->name,
             kind == PLOAD_UP ? "up" : "down", conns, window ? "_win1m" : "");
    pload_line(name,
               "mb_per_s=%.1f cpu_s_per_gb=%.3f allocs_per_mb=%.2f failures=%d floor=direct "
               "ratio=%.2f cpu_floor=relay cpu_ratio=%.2f",
               mbps, cpu_s_gb, allocs_mb, r.failures, floors[0] > 0 ? mbps / floors[0] : 1,
               floors[1] > 0 ? cpu_s_gb / floors[1] : 1);
    if (p->also)
        pload_line(name, "%s_cpu_s_per_gb=%.3f (the %s's own CPU)", p->framed ? "mp" : "socks",
                   (double)(s1.cpu_ns - s0.cpu_ns) / 1e9 / ((double)total / 1e9),
                   p->framed ? "fake middle proxy" : "SOCKS5 upstream");
    if (p->scrape)
        pload_line(name, "api_scrapes=%llu api_bad=%llu api_cpu_ratio=%.2f api_rate_ratio=%.2f "
                   "(against the row just before, the same without the API)",
                   (unsigned long long)(api_scrape_rounds(p->scrape, &bad) - scrapes0),
                   (unsigned long long)bad, prev_cpu > 0 ? cpu_s_gb / prev_cpu : 0,
                   prev_mbps > 0 ? mbps / prev_mbps : 0);
    else if (p->proc) {
        prev_mbps = mbps;
        prev_cpu = cpu_s_gb;
    }
    if (!p->proc)
        floors[0] = mbps;
    else if (!strcmp(p->name, "relay"))
        floors[1] = cpu_s_gb;
}

/* TGKIT_BENCH_PATHS names this path, or is unset. */
static bool wanted(const char *name)
{
    const char *list = getenv("TGKIT_BENCH_PATHS");
    if (!list || !*list)
        return true;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t k = e ? (size_t)(e - p) : strlen(p);
        if (k == n && memcmp(p, name, n) == 0)
            return true;
        p += k + (e ? 1 : 0);
    }
    return false;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    setenv("TGKIT_COMMIT", tg__bench_commit(), 0);
    const char *env = getenv("TGKIT_BENCH_MB");
    unsigned long parsed = env ? strtoul(env, NULL, 10) : 0;
    uint64_t mb = parsed > 0 && parsed < (1ul << 20) ? (uint64_t)parsed : 256;
    uint64_t total = mb << 20;

    struct pharness h, hn, hd, hm1, hm2, hmp, hc = {0};
    struct pproc relay, socks;
    const char *menv = getenv("TGKIT_BENCH_METRICS");
    bool metrics = menv && strcmp(menv, "1") == 0;
    if (pharness_start(&h, &(struct pharness_opts){.ee = true,
                                                   .dd = true,
                                                   .fork_server = true,
                                                   .prometheus = metrics,
                                                   .mss_clamp = -1}) < 0 ||
        pharness_start(&hn, &(struct pharness_opts){.no_fast_mode = true,
                                                    .fork_server = true,
                                                    .mss_clamp = -1}) < 0 ||
        pharness_start(
            &hd, &(struct pharness_opts){.doppel = true, .fork_server = true, .mss_clamp = -1}) <
            0 ||
        pharness_start(&hm1, &(struct pharness_opts){.fork_server = true, .mss_clamp = 1460}) < 0 ||
        pharness_start(&hm2, &(struct pharness_opts){.fork_server = true, .mss_clamp = 256}) < 0 ||
        pharness_start(&hmp, &(struct pharness_opts){.ee = true,
                                                     .dd = true,
                                                     .fork_server = true,
                                                     .mss_clamp = -1,
                                                     .midproxy = true}) < 0 ||
        pproc_relay_start(&relay, h.dc_port) < 0) {
        fprintf(stderr, "throughput: cannot start the proxy or the relay\n");
        return 1;
    }
    const char *aenv = getenv("TGKIT_BENCH_API");
    bool with_api = aenv && strcmp(aenv, "1") == 0;
    struct pharness ha = {0};
    static struct api_scrape scr;
    if (with_api && (pharness_start(&ha, &(struct pharness_opts){.ee = true,
                                                                .dd = true,
                                                                .fork_server = true,
                                                                .api = true,
                                                                .mss_clamp = -1}) < 0 ||
                     api_scrape_start(&scr, ha.api_port, 100) < 0)) {
        fprintf(stderr, "throughput: cannot start the proxy with [api]\n");
        return 1;
    }
    bool chain = pproc_microsocks_start(&socks, "bench", "bench-pass") == 0;
    char url[96];
    snprintf(url, sizeof url, "socks5://bench:bench-pass@127.0.0.1:%u", (unsigned)socks.port);
    if (chain &&
        pharness_start(&hc, &(struct pharness_opts){
                                .fork_server = true, .proxies = {url}, .mss_clamp = -1}) < 0) {
        fprintf(stderr, "throughput: cannot start the chained proxy\n");
        return 1;
    }
    struct path paths[] = {
        {"direct", h.dc_port, PCLI_DIRECT, NULL, &h, NULL, false, NULL},
        {"relay", relay.port, PCLI_DIRECT, &relay, &h, NULL, false, NULL},
        {"proxy_tls", h.port, PCLI_TLS, &h.proc, &h, NULL, false, NULL},
        {"proxy_tls_api", ha.port, PCLI_TLS, &ha.proc, &ha, NULL, false, &scr},
        {"proxy_dd", h.port, PCLI_DD, &h.proc, &h, NULL, false, NULL},
        {"proxy_dd_api", ha.port, PCLI_DD, &ha.proc, &ha, NULL, false, &scr},
        {"proxy_dd_mp", hmp.port, PCLI_DD, &hmp.proc, &hmp, &hmp.mp, true, NULL},
        {"proxy_tls_mp", hmp.port, PCLI_TLS, &hmp.proc, &hmp, &hmp.mp, true, NULL},
        {"proxy_tls_doppel", hd.port, PCLI_TLS, &hd.proc, &hd, NULL, false, NULL},
        {"proxy_tls_nofast", hn.port, PCLI_TLS, &hn.proc, &hn, NULL, false, NULL},
        {"proxy_tls_mss1460", hm1.port, PCLI_TLS, &hm1.proc, &hm1, NULL, false, NULL},
        {"proxy_tls_mss256", hm2.port, PCLI_TLS, &hm2.proc, &hm2, NULL, false, NULL},
        {"proxy_tls_chain", hc.port, PCLI_TLS, &hc.proc, &hc, &socks, false, NULL},
    };
    size_t npaths = sizeof paths / sizeof paths[0] - (chain ? 0 : 1);

    static const int conns[] = {1, 100};
    static const enum pload_kind kinds[] = {PLOAD_UP, PLOAD_DOWN};
    static const uint64_t windows[] = {0, WINDOW};
    for (size_t k = 0; k < 2; k++)
        for (size_t c = 0; c < 2; c++)
            for (size_t b = 0; b < 2; b++) {
                double floors[2] = {0, 0};
                for (size_t i = 0; i < npaths; i++)
                    if (i < 2 || (wanted(paths[i].name) && (with_api || !paths[i].scrape)))
                        run_path(&paths[i], conns[c], kinds[k], windows[b], total, floors);
            }
    double aes = aes_floor_s_per_gb();
    pload_line("proxy_aes_ctr_floor", "cpu_s_per_gb=%.3f gb_per_s=%.2f (decrypt+encrypt, one core)",
               aes, 1 / aes);
    pproc_stop(&relay);
    if (chain) {
        pharness_stop(&hc);
        pproc_stop(&socks);
    }
    if (with_api) {
        api_scrape_stop(&scr);
        pharness_stop(&ha);
    }
    pharness_stop(&hmp);
    pharness_stop(&hm2);
    pharness_stop(&hm1);
    pharness_stop(&hd);
    pharness_stop(&hn);
    pharness_stop(&h);
    return 0;
}
