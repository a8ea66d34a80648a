/*
 * bench/proxy/breakdown: where a handshake's cost goes, for the plain epoll relay (the
 * floor), a dd client and a FakeTLS client, in the scenario of issue 30's harness: each
 * client connects, completes its handshake and ONE 64-byte round trip through to the fake
 * DC, then stays connected and silent. The connections are closed only after the figures
 * were taken (the close is measured apart).
 *
 * Each path has a child process of its own (relay, proxy for dd, proxy for FakeTLS; the
 * proxies with the default configuration but the harness's secrets), so its figures are
 * that path's alone. Modes (TGKIT_BENCH_BREAKDOWN):
 *
 *   time      (default) per handshake: the child's CPU (its CPU clock), its allocations
 *             (malloc-family calls, proxy only), and the client's wall clock for connect +
 *             handshake and for the first round trip (medians, p90); then the close of all
 *             the connections, per connection. TGKIT_BENCH_ROUNDS (default 5, at most 64)
 *             interleaved rounds; best_round_cpu_us and best_ratio_to_relay compare the
 *             rounds with the least CPU, which the machine's other load inflates least.
 *   strace    the child's system calls by kind, per handshake: `strace -c -f -p CHILD` is
 *             attached to every thread of the child while the clients run (the close is
 *             left out), its summary parsed. Needs strace.
 *   callgrind only runs the clients; run the benchmark under
 *             `valgrind --tool=callgrind --callgrind-out-file=DIR/cg.%p` (the children
 *             follow the fork) and read each child's file with callgrind_annotate: the
 *             lines `breakdown_child` name each child's pid and handshake count.
 *             bench/proxy/breakdown.sh does all three and prints the table.
 *
 * Environment: TGKIT_BENCH_HS (default 400) handshakes per path, one client thread (the
 * handshakes one after another, as the critical path is measured); TGKIT_BENCH_MSS_CLAMP
 * ("off" or a segment size) sets [defense] mss-clamp on the dd and tls paths' loopback
 * listeners (unset: the default configuration's, which does not clamp a loopback
 * listener); the tls_clamp256 path always has it at 256 (the answer then leaves in 256-byte
 * segments, and one above ten of them waits for the client's ACK, the initial congestion
 * window); TGKIT_BENCH_WORKERS the proxies' worker threads (default the harness's 2; the
 * relay floor is always one thread).
 */
#include "bench.h"

#include "core/clock.h"
#include "proxy_harness.h"
#include "proxy_load.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* tls: the default configuration, whose mss-clamp leaves this loopback listener alone (a
   client on this host, e.g. behind a local front); tls_clamp256: the clamp applied as it is
   to every connection from another host (mss-clamp-loopback = true), so the answer leaves
   in 256-byte segments: the figure for remote clients. */
enum { P_RELAY, P_DD, P_TLS, P_TLS_CLAMP, NPATHS };
static const char *const path_names[NPATHS] = {"relay", "dd", "tls", "tls_clamp256"};

struct path {
    struct pproc *proc;
    uint16_t port;
    struct pcli_opts o;
    struct pharness h; /* proxies only */
    struct pproc relay;
};

static struct pcli *conns;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* n handshakes + one round trip each, left open in conns[]; wall clock per stage. */
static int open_n(struct path *p, int n, double *hs_us, double *rt_us)
{
    for (int i = 0; i < n; i++) {
        uint64_t t0 = tg__now_ns();
        if (pcli_connect(&conns[i], p->port, &p->o) != 0)
            return -1;
        uint64_t t1 = tg__now_ns();
        if (pcli_echo(&conns[i], (uint32_t)i, 64, 0) != 0)
            return -1;
        uint64_t t2 = tg__now_ns();
        if (hs_us)
            hs_us[i] = (double)(t1 - t0) / 1e3;
        if (rt_us)
            rt_us[i] = (double)(t2 - t1) / 1e3;
    }
    return 0;
}

static void close_n(int n)
{
    for (int i = 0; i < n; i++)
        pcli_close(&conns[i]);
}

/* Until the child has no client connection left: the proxy's active gauge, or for the
   relay the fake DC's open count back at dc_open0 (bounded). */
static void settle(struct path *p, struct fakedc *dc, uint64_t dc_open0)
{
    for (int i = 0; i < 5000; i++) {
        struct pproc_report r = {0};
        if (p->proc->cmd >= 0) {
            pproc_report(p->proc, &r);
            if (r.st.active == 0)
                break;
        } else if (fakedc_counters(dc).open <= dc_open0) {
            break;
        }
        tg__sleep_ms(1);
    }
    tg__sleep_ms(20);
}

/* TGKIT_BENCH_MSS_CLAMP: the proxies' [defense] mss-clamp ("off" or a segment size); the
   default configuration's when unset. */
static int32_t mss_clamp(void)
{
    const char *e = getenv("TGKIT_BENCH_MSS_CLAMP");
    if (!e || !*e)
        return 0;
    return strcmp(e, "off") == 0 || strcmp(e, "false") == 0 ? -1 : (int32_t)atoi(e);
}

/* TGKIT_BENCH_WORKERS: the proxies' worker threads (the harness's 2 when unset; the relay
   floor is one thread whatever this says). */
static unsigned workers(void)
{
    const char *e = getenv("TGKIT_BENCH_WORKERS");
    long v = e && *e ? strtol(e, NULL, 10) : 0;
    return v > 0 && v <= 256 ? (unsigned)v : 0;
}

static int start_paths(struct path *ps, struct fakedc **dc_out)
{
    for (int k = P_DD; k <= P_TLS_CLAMP; k++) {
        bool tls = k == P_TLS || k == P_TLS_CLAMP;
        struct pharness_opts o = {.ee = tls,
                                  .dd = k == P_DD,
                                  .fork_server = true,
                                  .mss_clamp = k == P_TLS_CLAMP ? 256 : mss_clamp(),
                                  .workers = workers()};
        if (pharness_start(&ps[k].h, &o) < 0)
            return -1;
        ps[k].proc = &ps[k].h.proc;
        ps[k].port = ps[k].h.port;
        ps[k].o = pharness_client(&ps[k].h, tls ? PCLI_TLS : PCLI_DD);
    }
    /* the relay forwards to the dd proxy's fake DC */
    *dc_out = ps[P_DD].h.dc;
    if (pproc_relay_start(&ps[P_RELAY].relay, ps[P_DD].h.dc_port) < 0)
        return -1;
    ps[P_RELAY].proc = &ps[P_RELAY].relay;
    ps[P_RELAY].port = ps[P_RELAY].relay.port;
    ps[P_RELAY].o = (struct pcli_opts){.mode = PCLI_DIRECT, .dc = 2, .timeout_ms = 30000};
    for (int k = P_DD; k <= P_TLS_CLAMP; k++)
        ps[k].o.timeout_ms = 30000;
    return 0;
}

static struct fakedc *path_dc(struct path *ps, int k)
{
    return k == P_RELAY ? ps[P_DD].h.dc : ps[k].h.dc;
}

/* ---- time ---- */

/* nrounds interleaved rounds of n / nrounds handshakes per path, so a change in the shared
   machine's load moves the three alike; the ratios are the medians of the rounds'. The
   best round's CPU per handshake (best_round_cpu_us) is the figure least moved by the
   load: other work only ever adds to a round. */
enum { ROUNDS_MAX = 64 };
static int nrounds = 5; /* TGKIT_BENCH_ROUNDS */

struct time_acc {
    double cpu_us, close_us, allocs, close_allocs;
    double ratio[ROUNDS_MAX];
    double best_us; /* the round with the least CPU per handshake */
    double *hs, *rt;
    int n;
};

static void mode_time(struct path *ps, int n)
{
    int per = n / nrounds > 0 ? n / nrounds : 1;
    struct time_acc acc[NPATHS] = {0};
    for (int k = 0; k < NPATHS; k++) {
        acc[k].hs = calloc((size_t)per * nrounds, sizeof(double));
        acc[k].rt = calloc((size_t)per * nrounds, sizeof(double));
    }
    for (int round = 0; round < nrounds; round++) {
        double cpu[NPATHS];
        for (int k = 0; k < NPATHS; k++) {
            struct path *p = &ps[k];
            struct time_acc *a = &acc[k];
            struct fakedc *dc = path_dc(ps, k);
            uint64_t open0 = fakedc_counters(dc).open;
            struct pproc_report r0 = {0}, r1 = {0}, r2 = {0};
            pproc_report(p->proc, &r0);
            if (open_n(p, per, a->hs + a->n, a->rt + a->n) != 0) {
                fprintf(stderr, "breakdown: %s: a handshake failed\n", path_names[k]);
                exit(1);
            }
            tg__sleep_ms(50); /* the child's last events */
            pproc_report(p->proc, &r1);
            close_n(per);
            settle(p, dc, open0);
            pproc_report(p->proc, &r2);
            a->n += per;
            cpu[k] = (double)(r1.cpu_ns - r0.cpu_ns) / 1e3;
            a->cpu_us += cpu[k];
            if (round == 0 || cpu[k] / per < a->best_us)
                a->best_us = cpu[k] / per;
            a->close_us += (double)(r2.cpu_ns - r1.cpu_ns) / 1e3;
            a->allocs += (double)(r1.allocs - r0.allocs);
            a->close_allocs += (double)(r2.allocs - r1.allocs);
        }
        for (int k = 0; k < NPATHS; k++)
            acc[k].ratio[round] = cpu[P_RELAY] > 0 ? cpu[k] / cpu[P_RELAY] : 1;
    }
    for (int k = 0; k < NPATHS; k++) {
        struct time_acc *a = &acc[k];
        size_t m = (size_t)a->n;
        qsort(a->hs, m, sizeof(double), cmp_double);
        qsort(a->rt, m, sizeof(double), cmp_double);
        qsort(a->ratio, nrounds, sizeof(double), cmp_double);
        char name[64];
        snprintf(name, sizeof name, "breakdown_time_%s", path_names[k]);
        pload_line(name,
                   "cpu_us_per_handshake=%.1f ratio_to_relay=%.2f ratio_range=%.2f-%.2f "
                   "allocs_per_handshake=%.1f connect_handshake_us_p50=%.1f p90=%.1f "
                   "round_trip_us_p50=%.1f p90=%.1f close_cpu_us_per_conn=%.1f "
                   "close_allocs_per_conn=%.1f best_round_cpu_us=%.1f best_ratio_to_relay=%.2f",
                   a->cpu_us / a->n, a->ratio[nrounds / 2], a->ratio[0], a->ratio[nrounds - 1],
                   k == P_RELAY ? -1.0 : a->allocs / a->n, pload_quantile(a->hs, m, 0.5),
                   pload_quantile(a->hs, m, 0.9), pload_quantile(a->rt, m, 0.5),
                   pload_quantile(a->rt, m, 0.9), a->close_us / a->n,
                   k == P_RELAY ? -1.0 : a->close_allocs / a->n, a->best_us,
                   acc[P_RELAY].best_us > 0 ? a->best_us / acc[P_RELAY].best_us : 1);
        free(a->hs);
        free(a->rt);
    }
}

/* ---- strace ---- */

/* Every thread of pid traced (TracerPid set), bounded. */
static bool all_traced(pid_t pid)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    for (int tries = 0; tries < 5000; tries++) {
        DIR *d = opendir(dir);
        if (!d)
            return false;
        bool all = true;
        int seen = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            char path[600], line[128];
            snprintf(path, sizeof path, "%.63s/%.255s/status", dir, e->d_name);
            FILE *f = fopen(path, "r");
            long tracer = 0;
            while (f && fgets(line, sizeof line, f))
                sscanf(line, "TracerPid: %ld", &tracer);
            if (f)
                fclose(f);
            seen++;
            all = all && tracer != 0;
        }
        closedir(d);
        if (all && seen > 0)
            return true;
        tg__sleep_ms(1);
    }
    return false;
}

static void mode_strace(struct path *ps, int n)
{
    char tmpl[] = "/tmp/tgkit-breakdown-XXXXXX";
    if (!mkdtemp(tmpl)) {
        perror("breakdown: mkdtemp");
        exit(1);
    }
    for (int k = 0; k < NPATHS; k++) {
        struct path *p = &ps[k];
        struct fakedc *dc = path_dc(ps, k);
        uint64_t open0 = fakedc_counters(dc).open;
        char out[128], pidarg[16];
        snprintf(out, sizeof out, "%s/%s.strace", tmpl, path_names[k]);
        snprintf(pidarg, sizeof pidarg, "%d", (int)p->proc->pid);
        char *argv[] = {"strace", "-c", "-f", "-qq", "-o", out, "-p", pidarg, NULL};
        pid_t st = fork();
        if (st == 0) {
            execvp(argv[0], argv);
            _exit(127);
        }
        if (st < 0 || !all_traced(p->proc->pid)) {
            fprintf(stderr, "breakdown: strace did not attach (is it installed?)\n");
            exit(1);
        }
        if (open_n(p, n, NULL, NULL) != 0) {
            fprintf(stderr, "breakdown: %s: a handshake failed\n", path_names[k]);
            exit(1);
        }
        tg__sleep_ms(100);
        kill(st, SIGINT);
        int status;
        waitpid(st, &status, 0);
        close_n(n);
        settle(p, dc, open0);
        FILE *f = fopen(out, "r");
        char line[256], rows[2048] = "";
        size_t used = 0;
        double total = 0;
        while (f && fgets(line, sizeof line, f)) {
            double pct, secs;
            long usecs, calls;
            char name[64];
            /* "% time seconds usecs/call calls [errors] syscall" */
            int got = sscanf(line, "%lf %lf %ld %ld %*d %63s", &pct, &secs, &usecs, &calls, name);
            if (got != 5)
                got = sscanf(line, "%lf %lf %ld %ld %63s", &pct, &secs, &usecs, &calls, name);
            if (got != 5 || strcmp(name, "total") == 0)
                continue;
            total += (double)calls / n;
            int w = snprintf(rows + used, sizeof rows - used, " %s=%.2f", name, (double)calls / n);
            if (w > 0 && (size_t)w < sizeof rows - used)
                used += (size_t)w;
        }
        if (f)
            fclose(f);
        char name[64];
        snprintf(name, sizeof name, "breakdown_syscalls_%s", path_names[k]);
        pload_line(name, "per_handshake_total=%.2f%s", total, rows);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpl);
    if (system(cmd) != 0)
        fprintf(stderr, "breakdown: cannot remove %s\n", tmpl);
}

/* ---- callgrind: the clients only; the script reads the children's files ---- */

static void mode_callgrind(struct path *ps, int n)
{
    for (int k = 0; k < NPATHS; k++) {
        struct path *p = &ps[k];
        struct fakedc *dc = path_dc(ps, k);
        uint64_t open0 = fakedc_counters(dc).open;
        if (open_n(p, n, NULL, NULL) != 0) {
            fprintf(stderr, "breakdown: %s: a handshake failed\n", path_names[k]);
            exit(1);
        }
        close_n(n);
        settle(p, dc, open0);
    }
    for (int k = 0; k < NPATHS; k++)
        pload_line("breakdown_child", "path=%s pid=%d handshakes=%d", path_names[k],
                   (int)ps[k].proc->pid, n);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    setenv("TGKIT_COMMIT", tg__bench_commit(), 0);
    const char *env = getenv("TGKIT_BENCH_HS");
    int n = env && atoi(env) > 0 ? atoi(env) : 400;
    if (n > 9000)
        n = 9000;
    const char *rounds = getenv("TGKIT_BENCH_ROUNDS");
    if (rounds && atoi(rounds) > 0)
        nrounds = atoi(rounds) < ROUNDS_MAX ? atoi(rounds) : ROUNDS_MAX;
    const char *mode = getenv("TGKIT_BENCH_BREAKDOWN");
    mode = mode && *mode ? mode : "time";
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    conns = calloc((size_t)n, sizeof *conns);
    static struct path ps[NPATHS];
    struct fakedc *dc = NULL;
    if (!conns || start_paths(ps, &dc) < 0) {
        fprintf(stderr, "breakdown: cannot start the children\n");
        return 1;
    }
    /* warm-up outside every figure (not under callgrind, whose children count from start):
       pools, the allocator, OpenSSL's lazily fetched algorithms */
    if (strcmp(mode, "callgrind") != 0)
        for (int k = 0; k < NPATHS; k++) {
            uint64_t open0 = fakedc_counters(path_dc(ps, k)).open;
            int w = n < 50 ? n : 50;
            if (open_n(&ps[k], w, NULL, NULL) != 0) {
                fprintf(stderr, "breakdown: %s: warm-up failed\n", path_names[k]);
                return 1;
            }
            close_n(w);
            settle(&ps[k], path_dc(ps, k), open0);
        }
    if (strcmp(mode, "strace") == 0)
        mode_strace(ps, n);
    else if (strcmp(mode, "callgrind") == 0)
        mode_callgrind(ps, n);
    else
        mode_time(ps, n);
    pproc_stop(&ps[P_RELAY].relay);
    for (int k = P_DD; k <= P_TLS_CLAMP; k++)
        pharness_stop(&ps[k].h);
    free(conns);
    (void)dc;
    return 0;
}
