/*
 * bench fleet: updates per second through ingress -> Redis -> 1, 2 and 4 workers, and the
 * latency each update sees from publish to its handler (p50, p99), next to the floor: the
 * single-process dispatcher fed directly (tg_dispatcher_feed -> handler), in the same run.
 *
 * Each scenario runs twice. Throughput: 20,000 updates from 200 chats (message updates),
 * published as fast as 2 ingress threads can with tg_fleet_publish (the webhook server's publish
 * step: XADD, answered before the next; the HTTP side is bench_bot_webhook's) while the workers
 * run. Workers are separate tg_fleet + tg_dispatcher pairs (2 handler threads each) in this
 * process, each with its own Redis connections, exactly as separate processes would be; 16
 * partitions, a local redis-server without persistence started by the benchmark. Handlers are
 * no-ops that take the time. ns_per_op is wall time per update over the whole run (1e9 / updates
 * per second), allocs_per_op the malloc-family calls per update of everything in this process
 * (hiredis, the dispatcher, the publishers). Latency: 2,000 updates paced one per 500 us from one
 * thread, so queues stay short and the figure is what the path adds, not queueing; the
 * fleet's "added" latency is its p50 minus the floor's (p99s are printed side by side: on a
 * shared machine they measure the scheduler more than the path).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "core/allochook.h"
#include "core/clock.h"
#include "redis_server.h"
#include "tgbot/tgbot.h"

#define CHATS   200
#define TOTAL   20000
#define PUBS    2
#define MAXW    4
#define HANDLER 2
#define PACED   2000
#define PACE_NS 500000

static uint64_t pub_ns[TOTAL + 1]; /* publish (or feed) time of each update id */
static uint64_t lat_ns[TOTAL + 1]; /* handler start - publish */
static atomic_int handled;

static tg_status on_update(tg_hctx *h, void *user)
{
    (void)user;
    int64_t id = tg_hctx_event(h)->update_id;
    if (id >= 1 && id <= TOTAL)
        lat_ns[id] = tg__now_ns() - pub_ns[id];
    atomic_fetch_add(&handled, 1);
    return TG_OK;
}

static size_t make_update(char *buf, size_t cap, int64_t id)
{
    int64_t chat = 1000 + (id - 1) % CHATS;
    int n = snprintf(buf, cap,
                     "{\"update_id\":%lld,\"message\":{\"message_id\":%lld,\"date\":1700000000,"
                     "\"chat\":{\"id\":%lld,\"type\":\"private\",\"first_name\":\"Ann\"},"
                     "\"from\":{\"id\":%lld,\"is_bot\":false,\"first_name\":\"Ann\","
                     "\"language_code\":\"en\"},\"text\":\"hello there\"}}",
                     (long long)id, (long long)id, (long long)chat, (long long)chat);
    return (size_t)n;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void wait_handled(int n)
{
    for (int i = 0; i < 60000 && atomic_load(&handled) < n; i++) /* bounded: 60 s */
        tg__sleep_ms(1);
}

/* Wait for updates 1..n and return the p50 and p99 of their latency (us). */
static void percentiles(int n, double *p50, double *p99)
{
    static uint64_t sorted[TOTAL];
    wait_handled(n);
    memcpy(sorted, lat_ns + 1, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_u64);
    *p50 = (double)sorted[n / 2] / 1e3;
    *p99 = (double)sorted[n * 99 / 100] / 1e3;
}

static double floor_p50, floor_p99;

/* Report a throughput run and the paced latency run that follows it (latency figures). */
static void report(const char *name, uint64_t wall_ns, uint64_t allocs, double p50, double p99,
                   tg__bench_result *out, const tg__bench_result *floor)
{
    *out =
        (tg__bench_result){.ns_per_op = (double)wall_ns / TOTAL,
                           .allocs_per_op = tg__allochook_active() ? (double)allocs / TOTAL : -1.0,
                           .iters = TOTAL,
                           .runs = 1};
    snprintf(out->name, sizeof out->name, "%s", name);
    tg__bench_report(out, floor);
    printf("bench=%s updates_per_s=%.0f latency_p50_us=%.1f latency_p99_us=%.1f "
           "added_p50_us=%.1f floor_p99_us=%.1f commit=%s\n",
           name, 1e9 * TOTAL / (double)wall_ns, p50, p99, floor ? p50 - floor_p50 : 0.0, floor_p99,
           tg__bench_commit());
}

/* Publish (or feed) updates 1..PACED one per PACE_NS from this thread. */
static void paced(tg_fleet *in, tg_dispatcher *d)
{
    char buf[512];
    atomic_store(&handled, 0);
    uint64_t next = tg__now_ns();
    for (int64_t id = 1; id <= PACED; id++) {
        uint64_t now = tg__now_ns();
        if (now < next) /* sleep, not spin: the machine is shared */
            nanosleep(&(struct timespec){.tv_nsec = (long)(next - now)}, NULL);
        next += PACE_NS;
        size_t n = make_update(buf, sizeof buf, id);
        pub_ns[id] = tg__now_ns();
        if (in ? tg_fleet_publish(in, buf, n) != TG_OK
               : tg_dispatcher_feed(d, buf, n, -1, NULL, NULL) != TG_OK) {
            fprintf(stderr, "bench fleet: paced run: publish failed\n");
            exit(1);
        }
    }
}

/* ---- floor: one process, fed directly ---- */

static void floor_run(tg_router *r, tg__bench_result *out)
{
    tg_dispatcher *d = tg_dispatcher_new(
        NULL, r, &(tg_dispatcher_options){.workers = HANDLER, .queue_capacity = 4096});
    char buf[512];
    atomic_store(&handled, 0);
    uint64_t a0 = tg__allochook_allocs(), t0 = tg__now_ns();
    for (int64_t id = 1; id <= TOTAL; id++) {
        size_t n = make_update(buf, sizeof buf, id);
        pub_ns[id] = tg__now_ns();
        tg_dispatcher_feed(d, buf, n, -1, NULL, NULL);
    }
    wait_handled(TOTAL);
    uint64_t wall = tg__now_ns() - t0, allocs = tg__allochook_allocs() - a0;
    paced(NULL, d);
    percentiles(PACED, &floor_p50, &floor_p99);
    report("fleet_floor_local_dispatcher", wall, allocs, floor_p50, floor_p99, out, NULL);
    tg_dispatcher_free(d);
}

/* ---- the fleet ---- */

struct worker {
    tg_fleet *f;
    tg_dispatcher *d;
    pthread_t th;
};

struct pub {
    tg_fleet *f;
    int index;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    tg_fleet_run_worker(w->f, w->d, NULL);
    return NULL;
}

static void *pub_main(void *arg)
{
    struct pub *p = arg;
    char buf[512];
    for (int64_t id = 1 + p->index; id <= TOTAL; id += PUBS) {
        size_t n = make_update(buf, sizeof buf, id);
        pub_ns[id] = tg__now_ns();
        if (tg_fleet_publish(p->f, buf, n) != TG_OK) {
            fprintf(stderr, "bench fleet: %s\n", tg_fleet_errmsg());
            exit(1);
        }
    }
    return NULL;
}

static tg_fleet *fleet(uint16_t port, const char *prefix)
{
    tg_fleet *f = tg_fleet_new(&(tg_fleet_options){
        .redis_port = port, .prefix = prefix, .partitions = 16, .lease_ms = 2000});
    if (!f) {
        fprintf(stderr, "bench fleet: %s\n", tg_fleet_errmsg());
        exit(1);
    }
    return f;
}

/* Until every worker holds exactly its share (no partition still moving). */
static void wait_owned(struct worker *w, int nw)
{
    for (int i = 0; i < 10000; i++) { /* bounded: 10 s */
        int settled = 0;
        for (int k = 0; k < nw; k++) {
            tg_fleet_stats s;
            tg_fleet_get_stats(w[k].f, &s);
            settled += s.members == (unsigned)nw && s.owned == 16u / (unsigned)nw;
        }
        if (settled == nw)
            return;
        tg__sleep_ms(1);
    }
}

static void fleet_run(uint16_t port, tg_router *r, int nw, const tg__bench_result *floor)
{
    char prefix[32], name[64];
    snprintf(prefix, sizeof prefix, "bench%d:", nw); /* fresh streams per scenario */
    struct worker w[MAXW];
    for (int i = 0; i < nw; i++) {
        w[i].f = fleet(port, prefix);
        w[i].d = tg_dispatcher_new(NULL, r, &(tg_dispatcher_options){.workers = HANDLER});
        pthread_create(&w[i].th, NULL, worker_main, &w[i]);
    }
    wait_owned(w, nw);
    tg_fleet *in = fleet(port, prefix);
    struct pub p[PUBS];
    pthread_t pt[PUBS];
    atomic_store(&handled, 0);
    uint64_t a0 = tg__allochook_allocs(), t0 = tg__now_ns();
    for (int i = 0; i < PUBS; i++) {
        p[i] = (struct pub){.f = in, .index = i};
        pthread_create(&pt[i], NULL, pub_main, &p[i]);
    }
    for (int i = 0; i < PUBS; i++)
        pthread_join(pt[i], NULL);
    wait_handled(TOTAL);
    uint64_t wall = tg__now_ns() - t0, allocs = tg__allochook_allocs() - a0;
    double p50, p99;
    paced(in, NULL);
    percentiles(PACED, &p50, &p99);
    snprintf(name, sizeof name, "fleet_%dworker%s", nw, nw > 1 ? "s" : "");
    tg__bench_result res;
    report(name, wall, allocs, p50, p99, &res, floor);
    for (int i = 0; i < nw; i++) {
        tg_dispatcher_stop(w[i].d);
        pthread_join(w[i].th, NULL);
        tg_dispatcher_free(w[i].d);
        tg_fleet_free(w[i].f);
    }
    tg_fleet_free(in);
}

int main(void)
{
    tgtest_redis redis;
    if (!tgtest_redis_available() || tgtest_redis_start(&redis) != 0) {
        fprintf(stderr, "bench fleet: cannot start redis-server\n");
        return 1;
    }
    tg_router *r = tg_router_new();
    tg_router_on_kind(r, TG_UPDATE_MESSAGE, on_update, NULL);
    tg__bench_result floor;
    floor_run(r, &floor);
    int counts[] = {1, 2, 4};
    for (int i = 0; i < 3; i++)
        fleet_run(redis.port, r, counts[i], &floor);
    tg__bench_table();
    tg_router_free(r);
    tgtest_redis_stop(&redis);
    return 0;
}
