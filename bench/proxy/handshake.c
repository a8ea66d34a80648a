/*
 * bench/proxy/handshake: handshakes per second and the proxy's CPU per handshake.
 *
 * One "handshake" = TCP connect, the full client handshake (FakeTLS ClientHello, ServerHello
 * check, obfs2 header; or just the header), one 64-byte round trip through to the fake DC
 * and back (verified), close. Measured through:
 *   direct      straight into the fake DC (harness ceiling)
 *   relay       the plain epoll relay (floor for the proxy's per-connection cost)
 *   proxy_tls   tgproxy with a FakeTLS client
 *   proxy_dd    tgproxy with a dd client
 * The proxy and the relay run in child processes: CPU per handshake is theirs alone, read
 * from /proc; allocations per handshake come from the child's malloc counter. A last row
 * times the handshake computation alone in-process (hello parse + validate + answer +
 * obfs2 parse + DC header), the crypto part of the proxy's cost, and two more the
 * ServerHello key share alone, ours against a genuine OpenSSL X25519 key pair.
 *
 * Environment: TGKIT_BENCH_HS (default 4000) handshakes per path, over 2 client threads.
 */
#include "bench.h"

#include "core/allochook.h"
#include "core/clock.h"
#include "proxy/crypto.h"
#include "proxy/faketls.h"
#include "proxy/keyshare.h"
#include "proxy/obfs2.h"
#include "proxy_harness.h"
#include "proxy_load.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define THREADS 2

struct hs_job {
    uint16_t port;
    struct pcli_opts o;
    int n, failed;
};

static void *hs_main(void *arg)
{
    struct hs_job *j = arg;
    for (int i = 0; i < j->n; i++) {
        struct pcli c;
        if (pcli_connect(&c, j->port, &j->o) != 0 || pcli_echo(&c, (uint32_t)i, 64, 0) != 0)
            j->failed++;
        pcli_close(&c);
    }
    return NULL;
}

/* Returns handshakes per second; *cpu_us and *allocs per handshake of proc (if any). */
static double run(const char *name, uint16_t port, struct pcli_opts o, struct pproc *proc,
                  int total, double floor_rate, double *cpu_out)
{
    struct hs_job jobs[THREADS];
    pthread_t th[THREADS];
    struct pproc_report r0 = {0}, r1 = {0};
    if (proc)
        pproc_report(proc, &r0);
    uint64_t t0 = tg__now_ns();
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (struct hs_job){.port = port, .o = o, .n = total / THREADS};
        pthread_create(&th[i], NULL, hs_main, &jobs[i]);
    }
    int failed = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        failed += jobs[i].failed;
    }
    double secs = (double)(tg__now_ns() - t0) / 1e9;
    tg__sleep_ms(50); /* let the middle process finish its closes before sampling */
    if (proc)
        pproc_report(proc, &r1);
    double rate = total / secs;
    double cpu_us = proc ? (double)(r1.cpu_ns - r0.cpu_ns) / 1e3 / total : 0;
    double allocs = proc && r1.allocs ? (double)(r1.allocs - r0.allocs) / total : -1;
    pload_line(name,
               "handshakes_per_s=%.0f cpu_us_per_handshake=%.1f allocs_per_handshake=%.1f "
               "failures=%d floor=direct ratio=%.2f",
               rate, cpu_us, allocs, failed, floor_rate > 0 ? rate / floor_rate : 1);
    if (cpu_out)
        *cpu_out = cpu_us;
    return rate;
}

/* ---- in-process: the handshake's computation alone ---- */

struct crypto_ctx {
    uint8_t key[16];
    uint8_t hello[600];
    size_t hello_len;
    uint8_t flight[64];
    struct faketls_key fk;
    uint8_t answer[FAKETLS_SERVER_HELLO_MAX];
};

static void crypto_once(void *arg)
{
    struct crypto_ctx *x = arg;
    struct faketls_hello h;
    const char *why;
    struct faketls_match m;
    struct faketls_policy pol = {.now = (int64_t)time(NULL), .past_s = 120, .future_s = 120};
    if (faketls_parse_hello(x->hello, x->hello_len, &h, &why) != FAKETLS_OK ||
        faketls_validate(&h, &x->fk, 1, &pol, &m) != FAKETLS_ACCEPT)
        abort();
    struct faketls_answer a = {.cipher = h.cipher};
    int n = faketls_server_hello(&h, x->key, &a, x->answer, sizeof x->answer);
    struct obfs2_candidate cand = {.tags = OBFS2_ALLOW_PADDED};
    memcpy(cand.key, x->key, 16);
    struct crypto_ctr c2p = {0}, p2dc = {0};
    struct obfs2_client oc;
    uint8_t wire[64];
    if (n < 0 || obfs2_parse_client(x->flight, 64, &cand, 1, &c2p, &oc) != OBFS2_OK ||
        obfs2_dc_header(oc.tag, oc.dc, &oc.keys, NULL, NULL, wire, NULL, &p2dc, NULL) != 0)
        abort();
    crypto_ctr_cleanup(&c2p);
    crypto_ctr_cleanup(&p2dc);
    tg__bench_sink(wire[0]);
}

static void crypto_floor(double proxy_cpu_us)
{
    struct crypto_ctx *x = calloc(1, sizeof *x);
    memset(x->key, 0x42, 16);
    x->hello_len = pcli_hello(x->hello, sizeof x->hello, x->key, "example.com", time(NULL));
    x->fk = (struct faketls_key){.domain = "example.com", .domain_len = 11};
    memcpy(x->fk.key, x->key, 16);
    struct pctr enc, dec;
    pobfs_client_header(x->flight, x->key, PTAG_PADDED, 2, &enc, &dec);
    pctr_cleanup(&enc);
    pctr_cleanup(&dec);
    /* thread CPU time, not wall time: the figure compares with the proxy's CPU per
       handshake, and this machine may be shared */
    crypto_once(x);
    int n = 2000;
    uint64_t a0 = tg__allochook_allocs(), t0 = tg__thread_cpu_ns();
    for (int i = 0; i < n; i++)
        crypto_once(x);
    double us = (double)(tg__thread_cpu_ns() - t0) / 1e3 / n;
    double allocs = tg__allochook_active() ? (double)(tg__allochook_allocs() - a0) / n : -1;
    pload_line("proxy_handshake_compute",
               "cpu_us_per_op=%.1f allocs_per_op=%.1f share_of_proxy_cpu=%.2f", us, allocs,
               proxy_cpu_us > 0 ? us / proxy_cpu_us : 0);
    free(x);
}

/* The ServerHello key share: ours (a random subgroup point, keyshare.h) against a genuine
   OpenSSL X25519 key pair, the floor it replaces. */
static void keyshare_rows(void)
{
    enum { N = 2000 };
    uint8_t pub[32];
    uint64_t a0 = tg__allochook_allocs(), t0 = tg__thread_cpu_ns();
    for (int i = 0; i < N; i++)
        if (crypto_x25519_random_public(pub) != 0)
            abort();
    double evp_ns = (double)(tg__thread_cpu_ns() - t0) / N;
    double evp_allocs = (double)(tg__allochook_allocs() - a0) / N;
    a0 = tg__allochook_allocs();
    t0 = tg__thread_cpu_ns();
    for (int i = 0; i < N; i++)
        if (keyshare_random(pub) != 0)
            abort();
    double ks_ns = (double)(tg__thread_cpu_ns() - t0) / N;
    double ks_allocs = (double)(tg__allochook_allocs() - a0) / N;
    tg__bench_sink(pub[0]);
    bool counted = tg__allochook_active();
    pload_line("proxy_keyshare_openssl_x25519", "ns_per_op=%.0f allocs_per_op=%.1f", evp_ns,
               counted ? evp_allocs : -1);
    pload_line("proxy_keyshare_subgroup_point",
               "ns_per_op=%.0f allocs_per_op=%.1f floor=openssl_x25519_keygen ratio=%.2f",
               ks_ns, counted ? ks_allocs : -1, ks_ns / evp_ns);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    setenv("TGKIT_COMMIT", tg__bench_commit(), 0);
    const char *env = getenv("TGKIT_BENCH_HS");
    int total = env && atoi(env) > 0 ? atoi(env) : 4000;
    struct pharness h;
    struct pproc relay;
    if (pharness_start(&h, &(struct pharness_opts){.ee = true, .dd = true, .fork_server = true}) <
            0 ||
        pproc_relay_start(&relay, h.dc_port) < 0) {
        fprintf(stderr, "handshake: cannot start the proxy or the relay\n");
        return 1;
    }
    struct pcli_opts direct = {.mode = PCLI_DIRECT, .dc = 2, .timeout_ms = 10000};
    /* warm-up: pools, allocator, OpenSSL's lazily fetched algorithms */
    run("proxy_hs_warmup", h.port, pharness_client(&h, PCLI_TLS), &h.proc, 200, 0, NULL);
    double floor = run("proxy_hs_direct", h.dc_port, direct, NULL, total, 0, NULL);
    double relay_cpu = 0, tls_cpu = 0, dd_cpu = 0;
    run("proxy_hs_relay", relay.port, direct, &relay, total, floor, &relay_cpu);
    run("proxy_hs_proxy_tls", h.port, pharness_client(&h, PCLI_TLS), &h.proc, total, floor,
        &tls_cpu);
    run("proxy_hs_proxy_dd", h.port, pharness_client(&h, PCLI_DD), &h.proc, total, floor, &dd_cpu);
    /* CPU against the plain relay doing the same TCP work (accept, connect, 64 bytes each
       way, close): what the proxy adds per connection */
    pload_line("proxy_hs_cpu_vs_relay",
               "relay_us=%.1f tls_us=%.1f tls_extra_us=%.1f tls_ratio=%.2f dd_us=%.1f "
               "dd_extra_us=%.1f dd_ratio=%.2f",
               relay_cpu, tls_cpu, tls_cpu - relay_cpu, relay_cpu > 0 ? tls_cpu / relay_cpu : 0,
               dd_cpu, dd_cpu - relay_cpu, relay_cpu > 0 ? dd_cpu / relay_cpu : 0);
    crypto_floor(tls_cpu);
    keyshare_rows();
    pproc_stop(&relay);
    pharness_stop(&h);
    return 0;
}
