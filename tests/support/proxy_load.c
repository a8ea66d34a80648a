/* proxy_load: parallel verified transfers and bench lines. See proxy_load.h. */
#include "proxy_load.h"

#include "core/clock.h"
#include "proxy_fakedc.h"
#include "proxy_util.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct worker {
    struct pcli c;
    const struct pcli_opts *o;
    uint16_t port;
    enum pload_kind kind;
    uint64_t bytes;
    uint64_t window; /* 0 = unbounded */
    uint32_t seed;
    int rc;
    pthread_barrier_t *go;
};

static void *run_one(void *arg)
{
    struct worker *w = arg;
    w->rc = pcli_connect(&w->c, w->port, w->o);
    pthread_barrier_wait(&w->go[0]);
    pthread_barrier_wait(&w->go[1]);
    if (w->rc == 0) {
        if (w->kind == PLOAD_UP && w->window)
            w->rc = pcli_sink_window(&w->c, w->seed, w->bytes, w->window);
        else if (w->kind == PLOAD_UP)
            w->rc = pcli_sink(&w->c, w->seed, w->bytes, 0);
        else if (w->kind == PLOAD_DOWN && w->window)
            w->rc = pcli_source_window(&w->c, w->seed, w->bytes, w->window);
        else if (w->kind == PLOAD_DOWN)
            w->rc = pcli_source(&w->c, w->seed, w->bytes);
        else
            w->rc = pcli_echo(&w->c, w->seed, w->bytes, 0);
    }
    pcli_close(&w->c);
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct pload_result pload_run(int n, uint16_t port, const struct pcli_opts *opts,
                              enum pload_kind kind, uint64_t bytes_each)
{
    return pload_run_ready(n, port, opts, kind, bytes_each, NULL, NULL);
}

struct pload_result pload_run_ready(int n, uint16_t port, const struct pcli_opts *opts,
                                    enum pload_kind kind, uint64_t bytes_each,
                                    void (*ready)(void *), void *arg)
{
    return pload_run_window(n, port, opts, kind, bytes_each, 0, ready, arg);
}

struct pload_result pload_run_window(int n, uint16_t port, const struct pcli_opts *opts,
                                     enum pload_kind kind, uint64_t bytes_each, uint64_t window,
                                     void (*ready)(void *), void *arg)
{
    struct pload_result r = {0};
    struct worker *w = calloc((size_t)n, sizeof *w);
    pthread_t *th = calloc((size_t)n, sizeof *th);
    pthread_barrier_t go[2];
    if (!w || !th) {
        free(w), free(th);
        r.failures = n;
        return r;
    }
    pthread_barrier_init(&go[0], NULL, (unsigned)n + 1);
    pthread_barrier_init(&go[1], NULL, (unsigned)n + 1);
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, (size_t)256 * 1024);
    for (int i = 0; i < n; i++) {
        w[i] = (struct worker){.o = opts,
                               .port = port,
                               .kind = kind,
                               .bytes = bytes_each,
                               .window = window,
                               .seed = (uint32_t)i * 7919u,
                               .go = go};
        pthread_create(&th[i], &a, run_one, &w[i]);
    }
    pthread_attr_destroy(&a);
    pthread_barrier_wait(&go[0]); /* all connected */
    if (ready)
        ready(arg);
    double t0 = now_s();
    pthread_barrier_wait(&go[1]);
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        if (w[i].rc != 0) {
            if (r.failures++ == 0)
                fprintf(stderr, "pload: connection %d: %s\n", i, strerror(-w[i].rc));
        }
    }
    r.seconds = now_s() - t0;
    pthread_barrier_destroy(&go[0]);
    pthread_barrier_destroy(&go[1]);
    free(w);
    free(th);
    return r;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double pload_quantile(double *v, size_t n, double q)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof *v, cmp);
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

void pload_line(const char *name, const char *fmt, ...)
{
    const char *commit = getenv("TGKIT_COMMIT");
    printf("bench=%s ", name);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf(" commit=%s\n", commit && *commit ? commit : "unknown");
    fflush(stdout);
}

int pload_rtt(uint16_t port, const struct pcli_opts *opts, int n, unsigned pause_us, double *p50,
              double *p99)
{
    struct pcli c;
    uint8_t cmd[FAKEDC_CMD_LEN], out[64], back[64];
    int warm = n / 10 < 100 ? n / 10 : 100; /* the first ones warm caches and the DC leg */
    double *v = malloc(sizeof *v * (size_t)n);
    int rc = v ? pcli_connect(&c, port, opts) : -1;
    fakedc_cmd(cmd, "ECHO", 0, 0);
    if (rc == 0)
        rc = pcli_send(&c, cmd, sizeof cmd);
    for (int i = 0; rc == 0 && i < n + warm; i++) {
        if (pause_us)
            nanosleep(&(struct timespec){.tv_nsec = (long)pause_us * 1000}, NULL);
        pstream_fill(9, (uint64_t)i * 64, out, sizeof out);
        uint64_t t0 = tg__now_ns();
        rc = pcli_send(&c, out, sizeof out);
        if (rc == 0)
            rc = pcli_recv_all(&c, back, sizeof back);
        if (rc == 0 && memcmp(out, back, sizeof out) != 0)
            rc = -1;
        if (i >= warm)
            v[i - warm] = (double)(tg__now_ns() - t0) / 1e3;
    }
    if (rc == 0) {
        *p50 = pload_quantile(v, (size_t)n, 0.50);
        *p99 = pload_quantile(v, (size_t)n, 0.99);
    }
    if (v)
        pcli_close(&c);
    free(v);
    return rc;
}
