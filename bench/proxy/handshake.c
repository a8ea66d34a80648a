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
 *   proxy_tls_mp / proxy_dd_mp  the same clients (framing their packets) through a second
 *               tgproxy in middle-proxy mode (every secret tagged; the middle proxy is
 *               tgproxy-fakemp in front of its own fake DC): no DC connect, one attach to
 *               the pool and a RPC_CLOSE_CONN at the end instead
 * The proxy and the relay run in child processes: CPU per handshake is theirs alone, read
 * from the child's CPU clock (clock_getcpuclockid, nanoseconds); allocations per handshake
 * come from the child's malloc counter. Relay, FakeTLS and dd run in five interleaved
 * rounds, and the CPU ratios to the relay are the medians of the rounds' ratios. A last row
 * times the handshake computation alone in-process (hello parse + validate + answer +
 * obfs2 parse + DC header), the crypto part of the proxy's cost, and two more the
 * ServerHello key share alone, ours against a genuine OpenSSL X25519 key pair. Then
 * proxy_handshake_compute_learned: the same computation with the answer learned from a site
 * ([defense.tls-front], issue 23: tlsprofile_answer from a gnutls-serv-like profile, written
 * in the site's two segments) against today's answer (one write), each answer written to a
 * socketpair and drained as the engine's send would be, interleaved rounds.
 *
 * [fleet] (issue 16): the same FakeTLS handshakes through two more proxy children whose
 * checks go to a local redis-server started by the benchmark (no persistence): one with
 * the anti-replay check only (SET NX per hello), one whose secret also has limits (the
 * admission script per hello, EVALSHA), in the same interleaved rounds; their rates, CPU
 * and allocations per handshake against the proxy without [fleet], and Redis's own CPU per
 * handshake. Skipped (a line says so) when redis-server is not installed.
 *
 * [api] (issue 25, TGKIT_BENCH_API=1): the same FakeTLS handshakes through one more proxy
 * child with [api], whose API a panel-like client scrapes every 100 ms while its handshakes
 * run (GET /v1/secrets and /v1/info, tests/support/api_scrape.c), in the same rounds:
 * proxy_hs_api_vs_without gives its CPU per handshake and rate against the proxy without.
 *
 * proxy_hs_proxy_tls_learned: FakeTLS handshakes through a proxy child that answers with
 * the learned answer ([defense.tls-front], its profile from a state file), in the same
 * rounds; proxy_hs_learned_vs_today is its CPU per handshake over proxy_tls's (median of
 * the rounds' ratios; goal <= 1.10).
 *
 * The proxies run the default configuration on a loopback listener, which [defense]
 * mss-clamp leaves alone (only this host's processes reach it); bench_proxy_breakdown's
 * tls_clamp256 path gives the FakeTLS figure with the clamp, as remote clients' connections
 * have it.
 *
 * Environment: TGKIT_BENCH_HS (default 4000) handshakes per path, over 2 client threads.
 */
#include "bench.h"

#include "api_scrape.h"
#include "core/allochook.h"
#include "core/clock.h"
#include "proxy/wire/crypto.h"
#include "proxy/wire/faketls.h"
#include "proxy/wire/keyshare.h"
#include "proxy/wire/obfs2.h"
#include "proxy/wire/tlsprofile.h"
#include "proxy_harness.h"
#include "proxy_load.h"
#include "redis_server.h"

#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
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

struct hs_res {
    double secs, cpu_us; /* wall seconds; CPU of proc in us (0 without proc) */
    uint64_t allocs;     /* malloc calls in proc (0 when not counted) */
    int n, failed;
};

/* total handshakes to port over THREADS client threads; proc's CPU and allocations. */
static struct hs_res measure(uint16_t port, struct pcli_opts o, struct pproc *proc, int total)
{
    struct hs_job jobs[THREADS];
    pthread_t th[THREADS];
    struct pproc_report r0 = {0}, r1 = {0};
    struct hs_res res = {.n = total / THREADS * THREADS};
    if (proc)
        pproc_report(proc, &r0);
    uint64_t t0 = tg__now_ns();
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (struct hs_job){.port = port, .o = o, .n = total / THREADS};
        pthread_create(&th[i], NULL, hs_main, &jobs[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        res.failed += jobs[i].failed;
    }
    res.secs = (double)(tg__now_ns() - t0) / 1e9;
    tg__sleep_ms(50); /* let the middle process finish its closes before sampling */
    if (proc) {
        pproc_report(proc, &r1);
        res.cpu_us = (double)(r1.cpu_ns - r0.cpu_ns) / 1e3;
        res.allocs = r1.allocs - r0.allocs;
    }
    return res;
}

static void add_res(struct hs_res *sum, const struct hs_res *r)
{
    sum->secs += r->secs;
    sum->cpu_us += r->cpu_us;
    sum->allocs += r->allocs;
    sum->n += r->n;
    sum->failed += r->failed;
}

/* One line for a path; returns handshakes per second. */
static double report(const char *name, const struct hs_res *r, bool counted, double floor_rate)
{
    double rate = r->n / r->secs;
    pload_line(name,
               "handshakes_per_s=%.0f cpu_us_per_handshake=%.1f allocs_per_handshake=%.1f "
               "failures=%d floor=direct ratio=%.2f",
               rate, r->cpu_us / r->n, counted && r->allocs ? (double)r->allocs / r->n : -1,
               r->failed, floor_rate > 0 ? rate / floor_rate : 1);
    return rate;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- in-process: the handshake's computation alone ---- */

struct crypto_ctx {
    uint8_t key[16];
    uint8_t hello[600];
    size_t hello_len;
    uint8_t flight[64];
    struct faketls_key fk;
    uint8_t answer[TLSPROFILE_ANSWER_MAX];
    const struct tlsprofile *site; /* the learned answer for this profile, or NULL (today's) */
    int sp[2];  /* with write: answers are written to sp[0] and drained from sp[1] */
    bool write; /* the learned-answer rows: the answer's sends are part of its cost */
};

/* Write the answer as the engine does (tlsanswer.c: one send per segment), then drain it. */
static void answer_out(struct crypto_ctx *x, size_t n, const size_t *cuts, size_t ncuts)
{
    size_t at = 0;
    for (size_t i = 0; i <= ncuts; i++) {
        size_t end = i < ncuts ? cuts[i] : n;
        if (send(x->sp[0], x->answer + at, end - at, MSG_NOSIGNAL) != (ssize_t)(end - at))
            abort();
        at = end;
    }
    static uint8_t sink[TLSPROFILE_ANSWER_MAX];
    for (size_t got = 0; got < n;) {
        ssize_t k = recv(x->sp[1], sink, sizeof sink, 0);
        if (k <= 0)
            abort();
        got += (size_t)k;
    }
}

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
    size_t cuts[TLSPROFILE_MAX_CUTS], ncuts = 0;
    int n = x->site ? tlsprofile_answer(x->site, &h, x->key, x->answer, sizeof x->answer, cuts,
                                        &ncuts)
                    : faketls_server_hello(&h, x->key, &a, x->answer, sizeof x->answer);
    if (n > 0 && x->write)
        answer_out(x, (size_t)n, cuts, ncuts);
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

/* gnutls-serv's profile as test_server_tlsfront learns it: key_share (51/36) then
   supported_versions (43/2), 2901 encrypted bytes on the wire, a segment after the CCS. */
static void gnutls_profile(struct tlsprofile *p)
{
    *p = (struct tlsprofile){.legacy_version = 0x0303, .cipher = 0x1301, .sid_echo = true,
                             .ccs = true, .next = 2, .group = 0x001d, .key_len = 32,
                             .selected = 0x0304, .nenc_min = 5, .nenc_max = 5, .nlens = 1,
                             .lens = {2901}, .ncuts = 1, .cuts = {133}};
    p->ext[0] = (struct tlsflight_ext){51, 36};
    p->ext[1] = (struct tlsflight_ext){43, 2};
    snprintf(p->domain, sizeof p->domain, "%s", PHARNESS_DOMAIN);
    snprintf(p->pattern, sizeof p->pattern, "SH+CCS|AD+AD+AD+AD+AD");
}

/* A FakeTLS proxy child answering with the learned answer: [defense.tls-front] on, its
   state file holding gnutls_profile (the refresh then probes the stand-in front, fails,
   and keeps it), everything else as the main child. */
static int learned_child(struct pharness *h, char *state, size_t cap)
{
    if (pharness_prepare(h, &(struct pharness_opts){.ee = true}) < 0)
        return -1;
    snprintf(state, cap, "/tmp/tgkit-bench-tlsfront-XXXXXX");
    int fd = mkstemp(state);
    struct tlsprofile p;
    gnutls_profile(&p);
    char text[2048];
    size_t n = tlsprofile_format(&p, 1, text, sizeof text);
    if (fd < 0 || n == 0 || write(fd, text, n) != (ssize_t)n)
        return -1;
    close(fd);
    h->cfg.tls_front.enabled = true;
    snprintf(h->cfg.tls_front.state_file, sizeof h->cfg.tls_front.state_file, "%s", state);
    if (pproc_proxy_start(&h->proc, &h->cfg) < 0)
        return -1;
    h->port = h->proc.port;
    return 0;
}

static void crypto_floor(double proxy_cpu_us)
{
    struct crypto_ctx *x = calloc(1, sizeof *x);
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, x->sp) != 0)
        abort();
    int big = 1 << 20;
    setsockopt(x->sp[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
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
    /* issue 23: the learned answer (gnutls-serv's profile in test_server_tlsfront: 51/36 then
       43/2, 2901 encrypted bytes on the wire, a segment after the CCS) against today's, in
       5 interleaved rounds, median of the ratios */
    struct tlsprofile site;
    gnutls_profile(&site);
    double ratios[5], learned_us = 0, today_us = 0;
    x->write = true;
    for (int r = 0; r < 5; r++) {
        double t[2];
        for (int k = 0; k < 2; k++) {
            x->site = k ? &site : NULL;
            uint64_t c0 = tg__thread_cpu_ns();
            for (int i = 0; i < n; i++)
                crypto_once(x);
            t[k] = (double)(tg__thread_cpu_ns() - c0) / 1e3 / n;
        }
        ratios[r] = t[1] / t[0];
        today_us += t[0] / 5;
        learned_us += t[1] / 5;
    }
    qsort(ratios, 5, sizeof ratios[0], cmp_double);
    pload_line("proxy_handshake_compute_learned",
               "cpu_us_per_op=%.1f floor=today cpu_us_floor=%.1f ratio=%.2f (median of 5 "
               "interleaved rounds; goal <= 1.10)",
               learned_us, today_us, ratios[2]);
    close(x->sp[0]);
    close(x->sp[1]);
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
               "ns_per_op=%.0f allocs_per_op=%.1f floor=openssl_x25519_keygen ratio=%.2f", ks_ns,
               counted ? ks_allocs : -1, ks_ns / evp_ns);
}

/* A proxy child like h's, with [fleet] on redis r (limits: a max-connections no run
   reaches, so every hello runs the admission script). */
static int fleet_child(struct pharness *h, const tgtest_redis *r, bool limits)
{
    struct pharness_opts o = {.ee = true, .limits.max_connections = limits ? 1000000 : 0};
    if (pharness_prepare(h, &o) < 0)
        return -1;
    h->cfg.fleet.enabled = true;
    snprintf(h->cfg.fleet.host, sizeof h->cfg.fleet.host, "127.0.0.1");
    h->cfg.fleet.port = r->port;
    h->cfg.fleet.timeout_ms = 1000; /* a slow round must not turn into local decisions */
    if (pproc_proxy_start(&h->proc, &h->cfg) < 0)
        return -1;
    h->port = h->proc.port;
    return 0;
}

struct fleet_bench {
    bool on;
    tgtest_redis redis;
    struct pproc rp; /* the redis-server, for its CPU */
    struct pharness set, script;
    struct hs_res r_set, r_script;
    uint64_t redis_ns;
};

static void fleet_setup(struct fleet_bench *f)
{
    memset(f, 0, sizeof *f);
    if (!tgtest_redis_available() || tgtest_redis_start(&f->redis) != 0 ||
        fleet_child(&f->set, &f->redis, false) < 0 ||
        fleet_child(&f->script, &f->redis, true) < 0) {
        pload_line("proxy_hs_fleet", "skipped=redis-server-unavailable");
        return;
    }
    f->rp = (struct pproc){.pid = f->redis.pid, .cmd = -1, .resp = -1};
    f->on = true;
    for (int i = 0; i < 2; i++) { /* warm-up: connections up, scripts loaded */
        struct pharness *h = i ? &f->script : &f->set;
        measure(h->port, pharness_client(h, PCLI_TLS), &h->proc, 200);
    }
}

/* One round of both [fleet] children, Redis's CPU counted over it. */
static void fleet_round(struct fleet_bench *f, int n)
{
    if (!f->on)
        return;
    struct pproc_report a = {0}, b = {0};
    pproc_report(&f->rp, &a);
    struct hs_res x = measure(f->set.port, pharness_client(&f->set, PCLI_TLS), &f->set.proc, n);
    struct hs_res y =
        measure(f->script.port, pharness_client(&f->script, PCLI_TLS), &f->script.proc, n);
    pproc_report(&f->rp, &b);
    f->redis_ns += b.cpu_ns - a.cpu_ns;
    add_res(&f->r_set, &x);
    add_res(&f->r_script, &y);
}

static void fleet_report(struct fleet_bench *f, const struct hs_res *local, double floor)
{
    if (!f->on)
        return;
    double set = report("proxy_hs_proxy_tls_fleet", &f->r_set, true, floor);
    double script = report("proxy_hs_proxy_tls_fleet_limits", &f->r_script, true, floor);
    double rate = local->n / local->secs;
    pload_line("proxy_hs_fleet_vs_local",
               "local_per_s=%.0f fleet_per_s=%.0f fleet_ratio=%.2f fleet_limits_per_s=%.0f "
               "fleet_limits_ratio=%.2f local_cpu_us=%.1f fleet_cpu_us=%.1f "
               "fleet_limits_cpu_us=%.1f local_allocs=%.1f fleet_allocs=%.1f "
               "fleet_limits_allocs=%.1f redis_cpu_us_per_handshake=%.1f",
               rate, set, set / rate, script, script / rate, local->cpu_us / local->n,
               f->r_set.cpu_us / f->r_set.n, f->r_script.cpu_us / f->r_script.n,
               (double)local->allocs / local->n, (double)f->r_set.allocs / f->r_set.n,
               (double)f->r_script.allocs / f->r_script.n,
               (double)f->redis_ns / 1e3 / (f->r_set.n + f->r_script.n));
    pharness_stop(&f->set);
    pharness_stop(&f->script);
    tgtest_redis_stop(&f->redis);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    setenv("TGKIT_COMMIT", tg__bench_commit(), 0);
    const char *env = getenv("TGKIT_BENCH_HS");
    int total = env && atoi(env) > 0 ? atoi(env) : 4000;
    struct pharness h, hmp;
    struct pproc relay;
    if (pharness_start(&h, &(struct pharness_opts){.ee = true, .dd = true, .fork_server = true}) <
            0 ||
        pharness_start(&hmp,
                       &(struct pharness_opts){
                           .ee = true, .dd = true, .fork_server = true, .midproxy = true}) < 0 ||
        pproc_relay_start(&relay, h.dc_port) < 0) {
        fprintf(stderr, "handshake: cannot start the proxy or the relay\n");
        return 1;
    }
    const char *aenv = getenv("TGKIT_BENCH_API");
    bool with_api = aenv && strcmp(aenv, "1") == 0;
    struct pharness ha = {0};
    if (with_api && pharness_start(&ha, &(struct pharness_opts){
                                            .ee = true, .fork_server = true, .api = true}) < 0) {
        fprintf(stderr, "handshake: cannot start the proxy with [api]\n");
        return 1;
    }
    struct pharness hl;
    char state[64];
    if (learned_child(&hl, state, sizeof state) < 0) {
        fprintf(stderr, "handshake: cannot start the learned-answer proxy\n");
        return 1;
    }
    struct fleet_bench fb;
    fleet_setup(&fb); /* forks before this process runs client threads */
    static struct api_scrape scr;
    if (with_api && api_scrape_start(&scr, ha.api_port, 100) < 0)
        return 1;
    struct pcli_opts direct = {.mode = PCLI_DIRECT, .dc = 2, .timeout_ms = 10000};
    /* warm-up: pools, allocator, OpenSSL's lazily fetched algorithms */
    struct hs_res warm = measure(h.port, pharness_client(&h, PCLI_TLS), &h.proc, 200);
    report("proxy_hs_warmup", &warm, true, 0);
    struct hs_res dr = measure(h.dc_port, direct, NULL, total);
    double floor = report("proxy_hs_direct", &dr, false, 0);
    /* relay, FakeTLS and dd in turns (ROUNDS of total / ROUNDS each), so a change in the
       machine's load during the run moves all three alike; the ratio is per round */
    enum { ROUNDS = 5 };
    struct hs_res rl = {0}, tls = {0}, dd = {0}, tls_mp = {0}, dd_mp = {0}, tls_api = {0},
                  lt = {0};
    if (with_api) {
        struct hs_res wa = measure(ha.port, pharness_client(&ha, PCLI_TLS), &ha.proc, 200);
        report("proxy_hs_warmup_api", &wa, true, 0);
    }
    double tls_ratio[ROUNDS], dd_ratio[ROUNDS], learned_ratio[ROUNDS];
    struct pcli_opts otm = pharness_client(&hmp, PCLI_TLS), odm = pharness_client(&hmp, PCLI_DD);
    otm.framed = odm.framed = true;
    struct hs_res wm = measure(hmp.port, otm, &hmp.proc, 200);
    report("proxy_hs_warmup_mp", &wm, true, 0);
    (void)measure(hl.port, pharness_client(&hl, PCLI_TLS), &hl.proc, 200); /* warm-up */
    for (int k = 0; k < ROUNDS; k++) {
        struct hs_res a = measure(relay.port, direct, &relay, total / ROUNDS);
        struct hs_res b = measure(h.port, pharness_client(&h, PCLI_TLS), &h.proc, total / ROUNDS);
        struct hs_res c = measure(h.port, pharness_client(&h, PCLI_DD), &h.proc, total / ROUNDS);
        tls_ratio[k] = a.cpu_us > 0 ? (b.cpu_us / b.n) / (a.cpu_us / a.n) : 0;
        dd_ratio[k] = a.cpu_us > 0 ? (c.cpu_us / c.n) / (a.cpu_us / a.n) : 0;
        add_res(&rl, &a);
        add_res(&tls, &b);
        add_res(&dd, &c);
        struct hs_res d = measure(hmp.port, otm, &hmp.proc, total / ROUNDS);
        struct hs_res e = measure(hmp.port, odm, &hmp.proc, total / ROUNDS);
        add_res(&tls_mp, &d);
        add_res(&dd_mp, &e);
        struct hs_res l = measure(hl.port, pharness_client(&hl, PCLI_TLS), &hl.proc, total / ROUNDS);
        learned_ratio[k] = b.cpu_us > 0 ? (l.cpu_us / l.n) / (b.cpu_us / b.n) : 0;
        add_res(&lt, &l);
        fleet_round(&fb, total / ROUNDS);
        if (with_api) {
            api_scrape_set(&scr, true);
            struct hs_res f =
                measure(ha.port, pharness_client(&ha, PCLI_TLS), &ha.proc, total / ROUNDS);
            api_scrape_set(&scr, false);
            add_res(&tls_api, &f);
        }
    }
    report("proxy_hs_relay", &rl, false, floor);
    report("proxy_hs_proxy_tls", &tls, true, floor);
    report("proxy_hs_proxy_dd", &dd, true, floor);
    report("proxy_hs_proxy_tls_mp", &tls_mp, true, floor);
    report("proxy_hs_proxy_dd_mp", &dd_mp, true, floor);
    report("proxy_hs_proxy_tls_learned", &lt, true, floor);
    qsort(learned_ratio, ROUNDS, sizeof learned_ratio[0], cmp_double);
    pload_line("proxy_hs_learned_vs_today",
               "today_cpu_us=%.1f learned_cpu_us=%.1f ratio=%.2f ratio_range=%.2f-%.2f rounds=%d "
               "goal_ratio=1.10",
               tls.cpu_us / tls.n, lt.cpu_us / lt.n, learned_ratio[ROUNDS / 2], learned_ratio[0],
               learned_ratio[ROUNDS - 1], ROUNDS);
    pharness_stop(&hl);
    unlink(state);
    qsort(tls_ratio, ROUNDS, sizeof tls_ratio[0], cmp_double);
    qsort(dd_ratio, ROUNDS, sizeof dd_ratio[0], cmp_double);
    double relay_cpu = rl.cpu_us / rl.n, tls_cpu = tls.cpu_us / tls.n, dd_cpu = dd.cpu_us / dd.n;
    /* CPU against the plain relay doing the same TCP work (accept, connect, 64 bytes each
       way, close): what the proxy adds per connection; ratio = median over the rounds */
    pload_line("proxy_hs_cpu_vs_relay",
               "relay_us=%.1f tls_us=%.1f tls_extra_us=%.1f tls_ratio=%.2f dd_us=%.1f "
               "dd_extra_us=%.1f dd_ratio=%.2f rounds=%d tls_ratio_range=%.2f-%.2f goal_ratio=1.5",
               relay_cpu, tls_cpu, tls_cpu - relay_cpu, tls_ratio[ROUNDS / 2], dd_cpu,
               dd_cpu - relay_cpu, dd_ratio[ROUNDS / 2], ROUNDS, tls_ratio[0],
               tls_ratio[ROUNDS - 1]);
    /* middle-proxy mode beside direct mode, the same clients in the same rounds */
    double tls_mp_cpu = tls_mp.cpu_us / tls_mp.n, dd_mp_cpu = dd_mp.cpu_us / dd_mp.n;
    pload_line("proxy_hs_mp_vs_direct",
               "tls_us=%.1f tls_mp_us=%.1f tls_ratio=%.2f dd_us=%.1f dd_mp_us=%.1f dd_ratio=%.2f "
               "floor=proxy_direct_mode",
               tls_cpu, tls_mp_cpu, tls_cpu > 0 ? tls_mp_cpu / tls_cpu : 0, dd_cpu, dd_mp_cpu,
               dd_cpu > 0 ? dd_mp_cpu / dd_cpu : 0);
    if (with_api) {
        uint64_t bad = 0, scrapes = api_scrape_rounds(&scr, &bad);
        double api_cpu = tls_api.cpu_us / tls_api.n;
        report("proxy_hs_proxy_tls_api", &tls_api, true, floor);
        pload_line("proxy_hs_api_vs_without",
                   "tls_us=%.1f tls_api_us=%.1f cpu_ratio=%.2f rate_ratio=%.2f scrapes=%llu "
                   "bad_scrapes=%llu every_ms=100 floor=proxy_tls_without_api",
                   tls_cpu, api_cpu, tls_cpu > 0 ? api_cpu / tls_cpu : 0,
                   tls.secs > 0 && tls_api.secs > 0
                       ? (tls_api.n / tls_api.secs) / (tls.n / tls.secs)
                       : 0,
                   (unsigned long long)scrapes, (unsigned long long)bad);
        api_scrape_stop(&scr);
        pharness_stop(&ha);
    }
    fleet_report(&fb, &tls, floor);
    crypto_floor(tls_cpu);
    keyshare_rows();
    pproc_stop(&relay);
    pharness_stop(&hmp);
    pharness_stop(&h);
    return 0;
}
