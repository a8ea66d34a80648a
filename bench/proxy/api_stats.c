/*
 * bench/proxy/api_stats: what one control API stats call costs the proxy with 1,000 secrets
 * (issue 25 goal: under 1 ms of CPU), beside the floor of the cheapest API call measured in
 * the same run.
 *
 * tgproxy runs in a child process (its CPU is read from the child's CPU clock, its
 * allocations from the child's malloc counter) with [api] and 1,000 ee secrets sharing one
 * domain, no traffic. One client (libcurl, one keep-alive connection, as the panel's) makes
 * TGKIT_BENCH_CALLS (default 300) calls of each kind, interleaved in 5 rounds:
 *   health        GET /v1/health: the HTTP and envelope floor
 *   list_1000     GET /v1/secrets: every secret with its stats (what the panel refreshes)
 *   stats_one     GET /v1/secrets/s500/stats: one secret's stats with its client addresses
 * Each line gives the proxy's CPU and allocations per call, the client's wall time per call
 * and the ratio to the health floor.
 */
#include "bench.h"

#include "api_scrape.h"
#include "core/clock.h"
#include "proxy_harness.h"
#include "proxy_load.h"
#include "wait.h"

#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NSECRETS 1000
#define ROUNDS   5

struct sink {
    size_t len;
};

static size_t on_body(char *p, size_t size, size_t n, void *user)
{
    (void)p;
    ((struct sink *)user)->len += size * n;
    return size * n;
}

struct kind {
    const char *name, *path;
    uint64_t cpu_ns, allocs, wall_ns, calls, bytes;
};

static bool api_up(void *arg)
{
    return api_scrape_once(arg, "/v1/health") == 0;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    setenv("TGKIT_COMMIT", tg__bench_commit(), 0);
    const char *env = getenv("TGKIT_BENCH_CALLS");
    unsigned long calls = env ? strtoul(env, NULL, 10) : 0;
    if (calls < ROUNDS || calls > 1000000)
        calls = 300;
    struct pharness h;
    if (pharness_start(&h, &(struct pharness_opts){.ee = true,
                                                   .fork_server = true,
                                                   .api = true,
                                                   .more_secrets = NSECRETS - 1}) < 0) {
        fprintf(stderr, "api_stats: cannot start the proxy\n");
        return 1;
    }
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%u", (unsigned)h.api_port);
    if (!tgtest_wait_until(api_up, base, 10000)) {
        fprintf(stderr, "api_stats: the API never answered at %s\n", base);
        return 1;
    }
    struct kind k[] = {{"proxy_api_health", "/v1/health", 0, 0, 0, 0, 0},
                       {"proxy_api_list_1000", "/v1/secrets", 0, 0, 0, 0, 0},
                       {"proxy_api_stats_one", "/v1/secrets/s500/stats", 0, 0, 0, 0, 0}};
    struct sink sink = {0};
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    int failures = 0;
    for (int r = 0; r < ROUNDS; r++)
        for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
            char url[128];
            snprintf(url, sizeof url, "%s%s", base, k[i].path);
            curl_easy_setopt(c, CURLOPT_URL, url);
            curl_easy_perform(c); /* warm: the connection and the proxy's buffers */
            struct pproc_report r0, r1;
            pproc_report(&h.proc, &r0);
            uint64_t t0 = tg__now_ns();
            sink.len = 0;
            for (unsigned long n = 0; n < calls / ROUNDS; n++) {
                long status = 0;
                if (curl_easy_perform(c) != CURLE_OK ||
                    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK ||
                    status != 200)
                    failures++;
            }
            k[i].wall_ns += tg__now_ns() - t0;
            pproc_report(&h.proc, &r1);
            k[i].cpu_ns += r1.cpu_ns - r0.cpu_ns;
            k[i].allocs += r1.allocs - r0.allocs;
            k[i].calls += calls / ROUNDS;
            k[i].bytes += sink.len;
        }
    curl_easy_cleanup(c);
    double floor_us = (double)k[0].cpu_ns / 1e3 / (double)k[0].calls;
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        double us = (double)k[i].cpu_ns / 1e3 / (double)k[i].calls;
        pload_line(k[i].name,
                   "secrets=%d cpu_us_per_call=%.1f allocs_per_call=%.1f wall_us_per_call=%.1f "
                   "bytes_per_call=%.0f failures=%d floor=proxy_api_health ratio=%.2f%s",
                   NSECRETS, us, (double)k[i].allocs / (double)k[i].calls,
                   (double)k[i].wall_ns / 1e3 / (double)k[i].calls,
                   (double)k[i].bytes / (double)k[i].calls, failures,
                   floor_us > 0 ? us / floor_us : 1,
                   i == 1 ? (us < 1000 ? " goal=under_1ms_cpu:met" : " goal=under_1ms_cpu:MISSED")
                          : "");
    }
    pharness_stop(&h);
    return failures ? 1 : 0;
}
