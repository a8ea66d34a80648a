/*
 * bench: calibrated timing, allocation counting and reporting for bench/ programs.
 * See bench.h. Medians, not means: one scheduler hiccup must not move a figure.
 */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/allochook.h"
#include "core/clock.h"

#define MAX_ROWS 64

struct row {
    tg__bench_result r;
    char floor[64];
    double ratio;
};

static struct row rows[MAX_ROWS];
static size_t nrows;
static volatile uint64_t sink;

void tg__bench_sink(uint64_t v)
{
    sink += v;
}

static double env_double(const char *name, double def)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    char *end;
    double v = strtod(s, &end);
    return (*end == '\0' && v > 0) ? v : def;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Wall time by default; TGKIT_BENCH_CLOCK=cpu measures this thread's CPU time instead,
 * steadier on a loaded machine for benchmarks that never wait on another thread. */
static uint64_t now(void)
{
    static int use_cpu = -1;
    if (use_cpu < 0) {
        const char *c = getenv("TGKIT_BENCH_CLOCK");
        use_cpu = c && strcmp(c, "cpu") == 0;
    }
    return use_cpu ? tg__thread_cpu_ns() : tg__now_ns();
}

/* Elapsed ns for iters calls; allocation calls made meanwhile into *allocs. */
static uint64_t timed(tg__bench_fn fn, void *ctx, uint64_t iters, uint64_t *allocs)
{
    uint64_t a0 = tg__allochook_allocs();
    uint64_t t0 = now();
    for (uint64_t i = 0; i < iters; i++)
        fn(ctx);
    uint64_t t1 = now();
    *allocs = tg__allochook_allocs() - a0;
    return t1 - t0;
}

/* Iterations that take about target_s: double from 1 until 10 ms, then scale. */
static uint64_t calibrate(tg__bench_fn fn, void *ctx, double target_s)
{
    uint64_t iters = 1, allocs;
    for (int step = 0; step < 40; step++) {
        uint64_t ns = timed(fn, ctx, iters, &allocs);
        if (ns >= (uint64_t)10 * 1000 * 1000) { /* 10 ms */
            double per = (double)ns / (double)iters;
            double want = target_s * 1e9 / per;
            return want < 1 ? 1 : (uint64_t)want;
        }
        iters *= 2;
    }
    return iters;
}

int tg__bench_run(const char *name, tg__bench_fn fn, void *ctx, tg__bench_result *out)
{
    enum { MAX_RUNS = 31 };
    double target = env_double("TGKIT_BENCH_SECONDS", 0.3);
    int runs = (int)env_double("TGKIT_BENCH_RUNS", 5);
    if (runs < 1)
        runs = 1;
    if (runs > MAX_RUNS)
        runs = MAX_RUNS;
    double ns[MAX_RUNS] = {0}, al[MAX_RUNS] = {0};
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", name);
    fn(ctx); /* warm up */
    uint64_t iters = calibrate(fn, ctx, target);
    for (int r = 0; r < runs; r++) {
        uint64_t allocs;
        uint64_t t = timed(fn, ctx, iters, &allocs);
        ns[r] = (double)t / (double)iters;
        al[r] = (double)allocs / (double)iters;
    }
    out->ns_per_op = median(ns, runs);
    out->allocs_per_op = tg__allochook_active() ? median(al, runs) : -1.0;
    out->iters = iters;
    out->runs = runs;
    return 0;
}

const char *tg__bench_commit(void)
{
    static char commit[64];
    if (commit[0])
        return commit;
    const char *env = getenv("TGKIT_COMMIT");
    if (env && *env) {
        snprintf(commit, sizeof commit, "%s", env);
        return commit;
    }
    /* __FILE__ is bench/support/bench.c under the source tree (CMake passes full paths). */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", __FILE__);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "git -C '%s' rev-parse --short HEAD 2>/dev/null", dir);
    FILE *p = popen(cmd, "r");
    if (p) {
        if (!fgets(commit, sizeof commit, p))
            commit[0] = '\0';
        pclose(p);
        commit[strcspn(commit, "\r\n")] = '\0';
    }
    if (!commit[0])
        snprintf(commit, sizeof commit, "unknown");
    return commit;
}

static void fmt_allocs(double a, char *out, size_t cap)
{
    if (a < 0)
        snprintf(out, cap, "na");
    else
        snprintf(out, cap, "%.2f", a);
}

void tg__bench_report(const tg__bench_result *r, const tg__bench_result *floor)
{
    double ratio = floor && floor->ns_per_op > 0 ? r->ns_per_op / floor->ns_per_op : 1.0;
    char al[32];
    fmt_allocs(r->allocs_per_op, al, sizeof al);
    printf("bench=%s ns_per_op=%.1f allocs_per_op=%s floor=%s ratio=%.2f commit=%s\n", r->name,
           r->ns_per_op, al, floor ? floor->name : "none", ratio, tg__bench_commit());
    fflush(stdout);
    if (nrows < MAX_ROWS) {
        rows[nrows].r = *r;
        snprintf(rows[nrows].floor, sizeof rows[nrows].floor, "%s", floor ? floor->name : "-");
        rows[nrows].ratio = ratio;
        nrows++;
    }
}

void tg__bench_table(void)
{
    printf("\n%-32s %12s %12s  %-28s %7s\n", "benchmark", "ns/op", "allocs/op", "floor", "ratio");
    for (size_t i = 0; i < nrows; i++) {
        char al[32];
        fmt_allocs(rows[i].r.allocs_per_op, al, sizeof al);
        printf("%-32s %12.1f %12s  %-28s %7.2f\n", rows[i].r.name, rows[i].r.ns_per_op, al,
               rows[i].floor, rows[i].ratio);
    }
    printf("(median of %d runs; commit %s)\n", nrows ? rows[0].r.runs : 0, tg__bench_commit());
}

char *tg__bench_read_data(const char *dir, const char *rel, size_t *len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = tg__malloc((size_t)n + 1)) != NULL && fread(buf, 1, (size_t)n, f) == (size_t)n) {
        fclose(f);
        buf[n] = '\0';
        if (len)
            *len = (size_t)n;
        return buf;
    }
    if (f)
        fclose(f);
    tg__free(buf);
    fprintf(stderr, "bench: cannot read fixture %s\n", path);
    exit(1);
}
