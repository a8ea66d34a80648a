/*
 * bench/proxy/metrics_overhead: relay CPU per GB with the metrics on and off (issue 12: the
 * difference must be noise), beside the plain-relay floor measured in the same run.
 *
 * Three processes in the middle, each with its own fake DC and the same load generator:
 *   off    tgproxy without [stats.prometheus]
 *   on     tgproxy with [stats.prometheus], scraped during its runs by a Prometheus-like
 *          client (libcurl, keep-alive, Prometheus's Accept and User-Agent headers) every
 *          TGKIT_BENCH_SCRAPE_MS (default 100 ms: 150 times Prometheus's default 15 s
 *          interval, so the page's cost shows if it has one); each page is checked (200 and
 *          the connection counter present)
 *   relay  a plain epoll TCP relay without crypto (the floor)
 * Both tgproxy instances run the same config otherwise: FakeTLS secret, fast mode, 2
 * workers. A run moves TGKIT_BENCH_MB MiB (default 128) down and as much up through
 * TGKIT_BENCH_CONNS connections (default 8); CPU is the middle process's user + system
 * time from the moment every connection is up to the last byte. TGKIT_BENCH_ROUNDS rounds
 * (default 7) run the three paths interleaved, the order rotating each round, so drift of
 * the machine (other processes, frequency) spreads over all three.
 *
 * Lines: one per run (proxy_metrics_overhead_run), then per path the median, minimum and
 * maximum of CPU s/GB and the spread ((max - min) / median), and the ratios: on / off of the
 * medians, the median of the per-round on / off ratios (pairs taken in the same round), and
 * each against the relay floor. "noise" says whether on / off lies within off's own spread.
 * Last, the page's own cost, which the ratio can only bound on a busy machine: the "on"
 * proxy's CPU over 200 back-to-back scrapes with no traffic, per scrape, as a share of one
 * core at Prometheus's 15 s interval and as the megabytes the relay moves for the same CPU.
 */
#include "bench.h"

#include "core/clock.h"
#include "proxy_harness.h"
#include "curlbody.h"
#include "proxy_load.h"

#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_ROUNDS 51

enum { P_RELAY, P_OFF, P_ON, NPATHS };
static const char *const path_names[NPATHS] = {"relay", "off", "on"};

/* ---- the scraper: a Prometheus-like client on its own thread ---- */

struct scraper {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char url[64];
    unsigned every_ms;
    bool active, stop;
    uint64_t scrapes, bad, bytes;
    struct curlbody body; /* the last page */
};

/* One scrape as Prometheus makes it; true when the page answered 200 with the counters. */
static bool scrape_once(struct scraper *s, CURL *c)
{
    s->body.len = 0;
    curl_easy_setopt(c, CURLOPT_URL, s->url);
    CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    s->bytes += s->body.len;
    return rc == CURLE_OK && code == 200 && s->body.p &&
           strstr(s->body.p, "\ntgproxy_client_connections_total ");
}

/* A keep-alive handle that asks as Prometheus does; *hdr is freed by the caller after it. */
static CURL *scraper_handle(struct scraper *s, struct curl_slist **hdr)
{
    CURL *c = curl_easy_init();
    *hdr = curl_slist_append(NULL, "Accept: application/openmetrics-text;version=1.0.0;q=0.5,"
                                   "text/plain;version=0.0.4;q=0.3,*/*;q=0.1");
    *hdr = curl_slist_append(*hdr, "X-Prometheus-Scrape-Timeout-Seconds: 10");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, *hdr);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "Prometheus/2.45.0");
    curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "gzip");
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, curlbody_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &s->body);
    return c;
}

static void *scraper_main(void *arg)
{
    struct scraper *s = arg;
    struct curl_slist *hdr = NULL;
    CURL *c = scraper_handle(s, &hdr);
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        if (!s->active) {
            pthread_cond_wait(&s->cv, &s->mu);
            continue;
        }
        pthread_mutex_unlock(&s->mu);
        bool ok = scrape_once(s, c);
        tg__sleep_ms(s->every_ms);
        pthread_mutex_lock(&s->mu);
        s->scrapes++;
        s->bad += !ok;
    }
    pthread_mutex_unlock(&s->mu);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(c);
    return NULL;
}

static void scraper_set(struct scraper *s, bool active, bool stop)
{
    pthread_mutex_lock(&s->mu);
    s->active = active;
    s->stop = stop;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static uint64_t scraper_count(struct scraper *s, uint64_t *bad)
{
    pthread_mutex_lock(&s->mu);
    uint64_t n = s->scrapes;
    *bad = s->bad;
    pthread_mutex_unlock(&s->mu);
    return n;
}

#define SCRAPE_COST_N 200 /* back-to-back scrapes of the idle proxy */

/* The page's own cost: the "on" proxy's CPU over SCRAPE_COST_N back-to-back scrapes while no
   byte moves, per scrape, in microseconds (the thread is stopped). -1 if a scrape failed. */
static double scrape_cost_us(struct scraper *s, struct pproc *p)
{
    struct curl_slist *hdr = NULL;
    CURL *c = scraper_handle(s, &hdr);
    struct pproc_report r0 = {0}, r1 = {0};
    bool ok = scrape_once(s, c); /* connected, first page rendered */
    pproc_report(p, &r0);
    for (int i = 0; ok && i < SCRAPE_COST_N; i++)
        ok = scrape_once(s, c);
    pproc_report(p, &r1);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(c);
    return ok ? (double)(r1.cpu_ns - r0.cpu_ns) / 1e3 / SCRAPE_COST_N : -1;
}

/* ---- the runs ---- */

struct mid {
    struct pproc *proc;
    struct pharness *h; /* its fake DC and client key */
    uint16_t port;
    enum pcli_mode mode;
};

struct ready_arg {
    struct mid *m;
    uint64_t want_headers;
    struct pproc_report *rep;
};

/* Every client is connected: wait for the DC legs, then sample the middle's CPU. */
static void on_ready(void *arg)
{
    struct ready_arg *a = arg;
    for (int i = 0; i < 10000 && fakedc_counters(a->m->h->dc).headers_ok < a->want_headers; i++)
        tg__sleep_ms(1);
    pproc_report(a->m->proc, a->rep);
}

/* One run: total bytes down then up through conns connections; CPU s/GB of the middle, or
   -1 when a transfer failed. */
static double run_once(struct mid *m, int conns, uint64_t total, double *mbps)
{
    struct pcli_opts o = pharness_client(m->h, m->mode);
    o.timeout_ms = 60000;
    double cpu_ns = 0, secs = 0;
    static const enum pload_kind kinds[] = {PLOAD_DOWN, PLOAD_UP};
    for (size_t k = 0; k < 2; k++) {
        struct pproc_report r0 = {0}, r1 = {0};
        struct ready_arg a = {m, fakedc_counters(m->h->dc).headers_ok + (uint64_t)conns, &r0};
        struct pload_result r = pload_run_window(conns, m->port, &o, kinds[k],
                                                 total / (uint64_t)conns, 0, on_ready, &a);
        pproc_report(m->proc, &r1);
        if (r.failures)
            return -1;
        cpu_ns += (double)(r1.cpu_ns - r0.cpu_ns);
        secs += r.seconds;
    }
    *mbps = 2 * (double)total / 1e6 / secs;
    return cpu_ns / 1e9 / (2 * (double)total / 1e9);
}

static double median_of(const double *v, size_t n)
{
    double tmp[MAX_ROUNDS];
    memcpy(tmp, v, n * sizeof *v);
    return pload_quantile(tmp, n, 0.5);
}

static void min_max(const double *v, size_t n, double *lo, double *hi)
{
    *lo = *hi = v[0];
    for (size_t i = 1; i < n; i++) {
        *lo = v[i] < *lo ? v[i] : *lo;
        *hi = v[i] > *hi ? v[i] : *hi;
    }
}

static unsigned env_uint(const char *name, unsigned def, unsigned max)
{
    const char *e = getenv(name);
    unsigned long v = e ? strtoul(e, NULL, 10) : 0;
    return v > 0 && v <= max ? (unsigned)v : def;
}

/* The "on" proxy: the harness's config with the page on a free port we know (the child
   cannot tell us the port it picked). 0 or -1. */
static int start_on(struct pharness *h, char *url, size_t cap)
{
    uint16_t port = 0;
    int fd = psock_listen(&port, 1);
    if (fd < 0)
        return -1;
    close(fd); /* free again; the child binds it at once */
    char addr[32];
    int n = snprintf(addr, sizeof addr, "127.0.0.1:%u", (unsigned)port);
    snprintf(url, cap, "http://%s/", addr);
    if (pharness_prepare(h, &(struct pharness_opts){.prometheus = true}) < 0 ||
        value_hostport_parse(addr, (size_t)n, &h->cfg.prometheus.bind, NULL, 0) != 0 ||
        pproc_proxy_start(&h->proc, &h->cfg) < 0)
        return -1;
    h->port = h->proc.port;
    return 0;
}

static void report(double v[NPATHS][MAX_ROUNDS], const double *pair, size_t rounds,
                   uint64_t scrapes, double on_s)
{
    double med[NPATHS], lo, hi;
    for (int p = 0; p < NPATHS; p++) {
        med[p] = median_of(v[p], rounds);
        min_max(v[p], rounds, &lo, &hi);
        pload_line("proxy_metrics_overhead",
                   "path=%s cpu_s_per_gb_median=%.4f min=%.4f max=%.4f spread=%.3f rounds=%zu "
                   "floor=relay ratio=%.3f",
                   path_names[p], med[p], lo, hi, med[p] > 0 ? (hi - lo) / med[p] : 0, rounds,
                   med[P_RELAY] > 0 ? med[p] / med[P_RELAY] : 0);
    }
    min_max(v[P_OFF], rounds, &lo, &hi);
    double ratio = med[P_OFF] > 0 ? med[P_ON] / med[P_OFF] : 0;
    double noise = med[P_OFF] > 0 ? (hi - lo) / med[P_OFF] : 0;
    pload_line("proxy_metrics_overhead_ratio",
               "on_over_off=%.4f paired_median=%.4f off_spread=%.3f noise=%s scrapes=%llu "
               "scrapes_per_s=%.1f",
               ratio, median_of(pair, rounds), noise,
               ratio > 0 && ratio - 1 <= noise && 1 - ratio <= noise ? "yes" : "no",
               (unsigned long long)scrapes, on_s > 0 ? (double)scrapes / on_s : 0);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    setenv("TGKIT_COMMIT", tg__bench_commit(), 0);
    uint64_t total = (uint64_t)env_uint("TGKIT_BENCH_MB", 128, 1u << 16) << 20;
    int conns = (int)env_uint("TGKIT_BENCH_CONNS", 8, 1000);
    size_t rounds = env_uint("TGKIT_BENCH_ROUNDS", 7, MAX_ROUNDS);
    struct scraper sc = {.every_ms = env_uint("TGKIT_BENCH_SCRAPE_MS", 100, 60000)};
    struct pharness hoff, hon;
    struct pproc relay;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (pharness_start(&hoff, &(struct pharness_opts){.fork_server = true}) < 0 ||
        start_on(&hon, sc.url, sizeof sc.url) < 0 || pproc_relay_start(&relay, hoff.dc_port) < 0) {
        fprintf(stderr, "metrics_overhead: cannot start the proxies or the relay\n");
        return 1;
    }
    pthread_mutex_init(&sc.mu, NULL);
    pthread_cond_init(&sc.cv, NULL);
    pthread_create(&sc.th, NULL, scraper_main, &sc);
    struct mid mids[NPATHS] = {
        [P_RELAY] = {&relay, &hoff, relay.port, PCLI_DIRECT},
        [P_OFF] = {&hoff.proc, &hoff, hoff.port, PCLI_TLS},
        [P_ON] = {&hon.proc, &hon, hon.port, PCLI_TLS},
    };
    double warm = 0;
    for (int p = 0; p < NPATHS; p++) /* warm-up: pools grow, pages fault in */
        run_once(&mids[p], conns, total / 4, &warm);
    double v[NPATHS][MAX_ROUNDS], pair[MAX_ROUNDS], on_s = 0;
    int rc = 0;
    uint64_t before_bad = 0, before = scraper_count(&sc, &before_bad);
    for (size_t r = 0; r < rounds && rc == 0; r++) {
        for (int k = 0; k < NPATHS && rc == 0; k++) {
            int p = (int)((r + (size_t)k) % NPATHS); /* the order rotates each round */
            double mbps = 0, t0 = (double)tg__now_ns() / 1e9;
            scraper_set(&sc, p == P_ON, false);
            v[p][r] = run_once(&mids[p], conns, total, &mbps);
            scraper_set(&sc, false, false);
            on_s += p == P_ON ? (double)tg__now_ns() / 1e9 - t0 : 0;
            if (v[p][r] < 0)
                rc = 1;
            pload_line("proxy_metrics_overhead_run",
                       "round=%zu path=%s cpu_s_per_gb=%.4f mb_per_s=%.1f conns=%d mb=%llu", r,
                       path_names[p], v[p][r], mbps, conns, (unsigned long long)(total >> 20));
        }
        pair[r] = v[P_OFF][r] > 0 ? v[P_ON][r] / v[P_OFF][r] : 0;
    }
    uint64_t bad = 0, scrapes = scraper_count(&sc, &bad) - before;
    scraper_set(&sc, false, true);
    pthread_join(sc.th, NULL);
    double per_scrape = scrape_cost_us(&sc, &hon.proc);
    if (rc == 0 && bad == before_bad && per_scrape >= 0) {
        report(v, pair, rounds, scrapes, on_s);
        /* at Prometheus's default 15 s interval, the page costs per_scrape / 15 s of CPU */
        pload_line("proxy_metrics_scrape_cost",
                   "cpu_us_per_scrape=%.1f page_bytes=%zu scrapes=%d core_share_at_15s=%.2e "
                   "relay_mb_same_cpu=%.3f",
                   per_scrape, sc.body.len, SCRAPE_COST_N, per_scrape / 15e6,
                   per_scrape / 1e3 / median_of(v[P_ON], rounds));
    } else
        fprintf(stderr, "metrics_overhead: %s\n", rc ? "a transfer failed" : "a scrape failed");
    free(sc.body.p);
    pproc_stop(&relay);
    pharness_stop(&hon);
    pharness_stop(&hoff);
    curl_global_cleanup();
    return rc || bad != before_bad;
}
