/*
 * bench/proxy/memory: resident memory of the proxy process.
 *
 *   client     the way a real client behaves (issue 11): each connection completes the
 *              FakeTLS handshake, sends its first frame (the ECHO command and 128 bytes),
 *              receives the DC's reply (the same 128 bytes, verified), then stays silent.
 *              RSS at 0, 1000, 5000 and 9000 connections, 3 s and 15 s after the last one
 *              went silent, with the proxy's default configuration (anti-replay table
 *              included); the plain relay with the same clients is the floor. Per
 *              connection = (RSS - RSS at 0) / connections; fixed = what appeared with the
 *              first 1000 beyond 1000 x the slope from 1000 to the last step.
 *   idle       RSS at 0, 1000, 5000 and 9000 idle relayed connections (FakeTLS, DC leg up,
 *              nothing in flight), KB per connection; the plain relay at the same counts is
 *              the floor. The hard fd limit here is 20000 and each connection costs the load
 *              generator two (client + fake DC side), hence 9000.
 *   idle, middle-proxy  the same idle series for dd clients through tgproxy in direct mode
 *              (proxy_dd) and in middle-proxy mode (proxy_dd_mp: every secret tagged, the
 *              middle proxy a tgproxy-fakemp in front of its own fake DC, two connections
 *              per worker), side by side: RSS per idle client and the proxy's descriptors
 *              per client (direct: client + DC socket; middle-proxy: the client's alone,
 *              which is what the kernel saves: a TCP socket and its buffers per client).
 *   active     RSS with 1000 connections whose downloads are stalled (clients not reading):
 *              every connection has bytes in flight.
 *   slow       peak RSS while 100 clients download at about 1 MB/s each (verified, nothing
 *              dropped); the goal is under 20 MB.
 *
 *   client, burst  the same series with many clients opening connections at once (1000 by
 *              default), as a load harness does: the handshakes in flight together set how
 *              much buffer and handshake state the proxy holds at the peak, and this says
 *              whether it goes back once the clients idle (issue 30: a harness measured 1.06 KB
 *              where the paced series measured 0.74). Its summary lines end in _burst.
 *
 * Environment: TGKIT_BENCH_IDLE_MAX (default 9000) caps the client and idle series;
 * TGKIT_BENCH_MEM_PAR (default 1) clients open the paced client series' connections at
 * once, TGKIT_BENCH_MEM_BURST (default 1000, at most 4096) the burst series';
 * TGKIT_BENCH_MEM=client runs the two client series alone (about 3 minutes; the rest about 1;
 * the burst series runs in a fresh process of its own, TGKIT_BENCH_MEM=client_burst alone);
 * TGKIT_BENCH_MEM=idle_mp runs the middle-proxy idle series alone.
 */
#include "bench.h"

#include "core/clock.h"
#include "proxy/engine/conn.h"
#include "proxy_harness.h"
#include "proxy_load.h"
#include "proxy_proc.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* Clients opening connections at once: the paced series' TGKIT_BENCH_MEM_PAR (default 1: one
   after another) and the burst series' TGKIT_BENCH_MEM_BURST (default 1000); client t opens
   conns[nconns + t], conns[nconns + t + par], ... below n. */
static int par_clients = 1, burst_clients = 1000;

struct rt_job {
    uint16_t port;
    struct pcli_opts o;
    int from, to, step, failed;
};

static void *rt_main(void *arg)
{
    struct rt_job *j = arg;
    for (int i = j->from; i < j->to && !j->failed; i += j->step)
        if (pcli_connect(&conns[i], j->port, &j->o) != 0 ||
            pcli_echo(&conns[i], (uint32_t)i, 128, 0) != 0) {
            fprintf(stderr, "memory: connection %d failed\n", i);
            j->failed = 1;
        }
    return NULL;
}

/* Open connections until there are n, each with one verified round trip, then silent. */
static int open_rt_to(int n, uint16_t port, struct pcli_opts o, int par)
{
    enum { PAR_MAX = 4096 };
    int failed = 0;
    par = par < PAR_MAX ? par : PAR_MAX;
    if (par > n - nconns)
        par = n - nconns > 0 ? n - nconns : 1;
    struct rt_job *jobs = calloc((size_t)par, sizeof *jobs);
    pthread_t *th = calloc((size_t)par, sizeof *th);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256u << 10); /* hundreds of clients at once */
    int started = 0;
    for (int t = 0; jobs && th && t < par; t++, started++) {
        jobs[t] = (struct rt_job){.port = port, .o = o, .from = nconns + t, .to = n, .step = par};
        if (pthread_create(&th[t], &attr, rt_main, &jobs[t]) != 0)
            break;
    }
    pthread_attr_destroy(&attr);
    for (int t = 0; t < started; t++) {
        pthread_join(th[t], NULL);
        failed |= jobs[t].failed;
    }
    failed |= !jobs || !th || started < par;
    free(jobs);
    free(th);
    nconns = n > nconns ? n : nconns;
    return failed ? -1 : 0;
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

static long idle_fds; /* the last idle series' proxy descriptors per connection, x1000 */

/* Kernel memory of one idle TCP socket held by a process that polls it: the slab objects
   (tcp_sock, its inode, file, dentry, epoll item) at this kernel's sizes, from
   /proc/slabinfo (root only; 0 when unreadable). Socket buffers come on top while bytes
   are in flight; an idle socket holds none. */
static double socket_kernel_bytes(void)
{
    static const char *const names[] = {"TCP", "sock_inode_cache", "filp", "dentry",
                                        "eventpoll_epi"};
    FILE *f = fopen("/proc/slabinfo", "r");
    char line[512];
    double sum = 0;
    while (f && fgets(line, sizeof line, f)) {
        char name[64];
        long active, num, objsize;
        if (sscanf(line, "%63s %ld %ld %ld", name, &active, &num, &objsize) != 4)
            continue;
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (strcmp(name, names[i]) == 0)
                sum += (double)objsize;
    }
    if (f)
        fclose(f);
    return sum;
}

static void idle_series(const char *who, struct pproc *p, uint16_t port, struct pcli_opts o,
                        struct fakedc *dc, int max, uint64_t settle_ms, double *per_conn_out)
{
    long fds0 = pproc_fd_count(p->pid);
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
        if (steps[i])
            idle_fds = (pproc_fd_count(p->pid) - fds0) * 1000 / steps[i];
    }
    close_all();
}

static int start(struct pharness *h, uint32_t antireplay_entries);

struct rt_series {
    long rss0, rss[2][4]; /* [3 s, 15 s][step] */
    int nsteps;
};

static void client_series(const char *who, struct pproc *p, uint16_t port, struct pcli_opts o,
                          int max, int par, struct rt_series *out)
{
    static const int steps[] = {0, 1000, 5000, 9000};
    static const uint64_t quiet_ms[2] = {3000, 15000};
    memset(out, 0, sizeof *out);
    for (int i = 0; i < 4 && steps[i] <= max; i++) {
        if (open_rt_to(steps[i], port, o, par) < 0)
            break;
        uint64_t t0 = tg__now_ms();
        for (int q = 0; q < 2; q++) {
            uint64_t due = t0 + quiet_ms[q], now = tg__now_ms();
            if (i > 0 && due > now)
                tg__sleep_ms(due - now);
            struct pproc_report r;
            pproc_report(p, &r);
            out->rss[q][i] = r.rss_kb;
        }
        if (i == 0)
            out->rss0 = out->rss[0][0];
        out->nsteps = i + 1;
        for (int q = 0; q < 2 && i > 0; q++) {
            char name[64];
            snprintf(name, sizeof name, "proxy_rss_client_%s_%d_%ds", who, steps[i],
                     (int)(quiet_ms[q] / 1000));
            pload_line(name, "rss_kb=%ld rss0_kb=%ld kb_per_conn=%.2f", out->rss[q][i], out->rss0,
                       (double)(out->rss[q][i] - out->rss0) / steps[i]);
        }
    }
    close_all();
}

/* The proxy's figures beside the relay's: per connection at the last step, the slope from
   1000 on, and the fixed cost that appeared with the first 1000. */
static void client_summary(const char *scenario, int par, const struct rt_series *px,
                           const struct rt_series *rl)
{
    static const int steps[] = {0, 1000, 5000, 9000};
    int last = px->nsteps < rl->nsteps ? px->nsteps - 1 : rl->nsteps - 1;
    if (last < 1)
        return;
    for (int q = 0; q < 2; q++) {
        double per = (double)(px->rss[q][last] - px->rss0) / steps[last];
        double floor = (double)(rl->rss[q][last] - rl->rss0) / steps[last];
        double slope =
            last > 1 ? (double)(px->rss[q][last] - px->rss[q][1]) / (steps[last] - steps[1]) : per;
        double fixed_mb = ((double)(px->rss[q][1] - px->rss0) - 1000 * slope) / 1024;
        char name[64];
        snprintf(name, sizeof name, "proxy_rss_client%s_per_conn_%ds", scenario, q ? 15 : 3);
        pload_line(name,
                   "conns=%d at_once=%d kb_per_conn=%.2f floor=relay floor_kb=%.2f ratio=%.1f "
                   "slope_kb=%.2f fixed_first_1000_mb=%.1f goal_kb=0.5 goal_fixed_mb=2",
                   steps[last], par, per, floor, floor > 0 ? per / floor : 0, slope, fixed_mb);
    }
}

/* The real client's series: relay floor, then tgproxy as configured by default, par clients
   opening connections at once. scenario names it in the summary ("" paced, "_burst"). */
static void phase_client(int max, int par, const char *scenario)
{
    struct pharness h;
    struct pproc relay;
    if (start(&h, 0) < 0)
        return;
    if (pproc_relay_start(&relay, h.dc_port) < 0) {
        pharness_stop(&h);
        return;
    }
    struct rt_series rl, px;
    struct pcli_opts direct = {.mode = PCLI_DIRECT, .dc = 2, .timeout_ms = 10000};
    char who[2][32];
    snprintf(who[0], sizeof who[0], "relay%s", scenario);
    snprintf(who[1], sizeof who[1], "proxy_tls%s", scenario);
    client_series(who[0], &relay, relay.port, direct, max, par, &rl);
    client_series(who[1], &h.proc, h.port, pharness_client(&h, PCLI_TLS), max, par, &px);
    client_summary(scenario, par, &px, &rl);
    pproc_stop(&relay);
    pharness_stop(&h);
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
    /* the child was forked from this process, so its RSS starts with what it shares with
       us (large after the idle series); the readers' cost is the growth over that */
    struct pproc_report r0;
    pproc_report(p, &r0);
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
    pload_line("proxy_rss_slow_readers_100",
               "peak_rss_kb=%ld base_rss_kb=%ld growth_kb=%ld failures=%d goal_kb=20480", peak,
               r0.rss_kb, peak - r0.rss_kb, failed);
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

/* Idle dd clients through direct mode and middle-proxy mode, each its own process. */
static void phase_idle_mp(int max)
{
    struct pharness hd, hm;
    struct pharness_opts o = {.dd = true,
                              .fork_server = true,
                              .concurrency = 20000,
                              .workers = 2,
                              .antireplay_entries = 16384};
    if (pharness_start(&hd, &o) < 0)
        return;
    o.midproxy = true;
    if (pharness_start(&hm, &o) < 0) {
        pharness_stop(&hd);
        return;
    }
    double direct_per = 0, mp_per = 0;
    struct pcli_opts od = pharness_client(&hd, PCLI_DD), om = pharness_client(&hm, PCLI_DD);
    om.framed = true;
    idle_series("proxy_dd", &hd.proc, hd.port, od, hd.dc, max, CONN_PARK_MS + 1000, &direct_per);
    long direct_fds = idle_fds;
    idle_series("proxy_dd_mp", &hm.proc, hm.port, om, hm.dc, max, CONN_PARK_MS + 1000, &mp_per);
    double sk = socket_kernel_bytes() / 1024, mp_fds = (double)idle_fds / 1000,
           d_fds = (double)direct_fds / 1000;
    pload_line("proxy_rss_idle_per_conn_mp",
               "kb_per_conn=%.2f floor=proxy_dd floor_kb=%.2f delta_kb=%.2f ratio=%.2f "
               "fds_per_conn=%.2f floor_fds_per_conn=%.2f (slope between the last two steps)",
               mp_per, direct_per, mp_per - direct_per, direct_per > 0 ? mp_per / direct_per : 0,
               mp_fds, d_fds);
    pload_line("proxy_mem_idle_per_conn_mp_with_kernel",
               "kb_per_conn=%.2f floor=proxy_dd floor_kb=%.2f ratio=%.2f socket_kernel_kb=%.2f "
               "(RSS per connection + descriptors per connection x one idle socket's slab "
               "objects)",
               mp_per + mp_fds * sk, direct_per + d_fds * sk,
               direct_per + d_fds * sk > 0 ? (mp_per + mp_fds * sk) / (direct_per + d_fds * sk) : 0,
               sk);
    pharness_stop(&hm);
    pharness_stop(&hd);
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

/* The burst series in a fresh process of this program: the proxy is forked from it, and
   after the paced series this process's own pages (clients, their threads) would be the
   child's too, shared at fork and dropped as it runs, so its RSS at zero would mislead. */
static void run_burst_fresh(void)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TGKIT_BENCH_MEM", "client_burst", 1);
        execl("/proc/self/exe", "bench_proxy_memory", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fprintf(stderr, "memory: the burst series failed\n");
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
    const char *par = getenv("TGKIT_BENCH_MEM_PAR");
    par_clients = par && atoi(par) > 0 ? atoi(par) : 1;
    const char *burst = getenv("TGKIT_BENCH_MEM_BURST");
    burst_clients = burst && atoi(burst) > 0 ? atoi(burst) : 1000;
    const char *only = getenv("TGKIT_BENCH_MEM");
    if (only && strcmp(only, "idle_mp") == 0) {
        phase_idle_mp(max);
        free(conns);
        return 0;
    }
    if (only && strcmp(only, "client_burst") == 0) {
        phase_client(max, burst_clients, "_burst");
        free(conns);
        return 0;
    }
    phase_client(max, par_clients, "");
    run_burst_fresh();
    if (only && strcmp(only, "client") == 0) {
        free(conns);
        return 0;
    }
    phase_idle(max);
    phase_idle_mp(max);
    phase_active();
    struct pharness h;
    if (start(&h, 0) == 0) { /* a fresh process: peak RSS is the slow readers' alone */
        slow_readers(&h.proc, h.port, pharness_client(&h, PCLI_TLS));
        pharness_stop(&h);
    }
    free(conns);
    return 0;
}
