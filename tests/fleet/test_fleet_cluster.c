/*
 * The fleet on a Redis Cluster: 3 masters on 127.0.0.1 (redis-server --cluster-enabled yes,
 * joined by redis-cli --cluster create), the fleet configured with one node's address only.
 * Publishing, leases, heartbeats, claims and acknowledgements must follow MOVED to the node
 * of each key's slot; the hash tags must keep each partition's stream and lease together
 * (else the scripts would fail with CROSSSLOT); the partitions must end up spread over the
 * masters; and 2 workers must handle 2,000 updates from 50 chats once each, in order, and
 * acknowledge every one. The test waits for that state (handlers done, acknowledgements
 * counted, streams empty with nothing pending), never for a time, so a loaded machine only
 * makes it slower.
 */
#include "tgtest.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "fleet_fx.h"
#include "redis_server.h"
#include "tgbot/tgbot.h"

#define NODES    3
#define PARTS    8
#define CHATS    50
#define PER_CHAT 40
#define TOTAL    (CHATS * PER_CHAT)

static tgtest_redis node[NODES];

struct sink {
    pthread_mutex_t mu;
    struct fx_rec recs[TOTAL * 2];
    size_t n;
};

static struct sink sink = {.mu = PTHREAD_MUTEX_INITIALIZER};

static tg_status on_message(tg_hctx *h, void *user)
{
    (void)user;
    uint64_t t0 = tg__now_ns();
    const tg_event *ev = tg_hctx_event(h);
    long seq = fx_seq_of(ev->text);
    pthread_mutex_lock(&sink.mu);
    if (sink.n < TOTAL * 2)
        sink.recs[sink.n++] = (struct fx_rec){ev->chat_id, seq, seq - 1, t0, tg__now_ns()};
    pthread_mutex_unlock(&sink.mu);
    return TG_OK;
}

/* redis-cli --cluster create over the nodes, then wait for cluster_state:ok on each. */
static int create_cluster(void)
{
    char addr[NODES][32];
    for (int i = 0; i < NODES; i++)
        snprintf(addr[i], sizeof addr[i], "127.0.0.1:%u", node[i].port);
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        execlp("redis-cli", "redis-cli", "--cluster", "create", addr[0], addr[1], addr[2],
               "--cluster-replicas", "0", "--cluster-yes", (char *)NULL);
        _exit(127);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return -1;
    for (int i = 0; i < 200; i++) { /* ~10 s */
        int ok = 0;
        for (int k = 0; k < NODES; k++)
            ok += fx_redis_int(node[k].port, "EVAL %s 0",
                               "return string.find(redis.call('CLUSTER','INFO'),"
                               "'cluster_state:ok') and 1 or 0") == 1;
        if (ok == NODES)
            return 0;
        tg__sleep_ms(50);
    }
    return -1;
}

static int setup(void **state)
{
    (void)state;
    for (int i = 0; i < NODES; i++)
        if (tgtest_redis_start_cluster_node(&node[i]) != 0)
            return -1;
    return create_cluster();
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < NODES; i++)
        tgtest_redis_stop(&node[i]);
    return 0;
}

static tg_fleet *fleet_on(unsigned n, const char *id)
{
    tg_fleet *f = tg_fleet_new(&(tg_fleet_options){.redis_port = node[n].port,
                                                   .redis_timeout_ms = 1000,
                                                   .partitions = PARTS,
                                                   .lease_ms = 800,
                                                   .worker_id = id});
    assert_non_null(f);
    return f;
}

static void wk_start(struct fx_worker *w, unsigned n, const char *id)
{
    assert_true(fx_worker_start(w, fleet_on(n, id), NULL, on_message, NULL));
}

static size_t sink_count(void)
{
    pthread_mutex_lock(&sink.mu);
    size_t n = sink.n;
    pthread_mutex_unlock(&sink.mu);
    return n;
}

/* Entries of partition i still in its stream plus those pending, asked of the node that
 * holds it (the others answer MOVED); -1 when no node answers a number. */
static long long left_in(unsigned i)
{
    char key[64];
    snprintf(key, sizeof key, "{tgbot:p%u}:stream", i);
    for (int k = 0; k < NODES; k++) {
        long long v = fx_redis_int(node[k].port, "EVAL %s 1 %s",
                                   "return redis.call('XLEN', KEYS[1]) + "
                                   "redis.call('XPENDING', KEYS[1], 'workers')[1]",
                                   key);
        if (v >= 0)
            return v;
    }
    return -1;
}

/* Entries left in every stream (-1 if one could not be asked). */
static long long left_total(void)
{
    long long sum = 0;
    for (unsigned i = 0; i < PARTS; i++) {
        long long v = left_in(i);
        if (v < 0)
            return -1;
        sum += v;
    }
    return sum;
}

static uint64_t handled(const struct fx_worker *w, uint64_t *ack_failed)
{
    tg_fleet_stats s;
    tg_fleet_get_stats(w->f, &s);
    if (ack_failed)
        *ack_failed += s.ack_failed;
    return s.handled;
}

/* Until the work is done: every update recorded by a handler, every entry acknowledged
 * (the workers' handled counters, bumped after Redis answered the XACK), every stream empty
 * with nothing pending. Bounded (~60 s); on timeout, say where it stood. */
static void wait_all_done(const struct fx_worker *a, const struct fx_worker *b)
{
    uint64_t acked = 0, ack_failed = 0;
    long long left = -1;
    size_t recs = 0;
    for (int i = 0; i < 3000; i++) {
        ack_failed = 0;
        recs = sink_count();
        acked = handled(a, &ack_failed) + handled(b, &ack_failed);
        if (recs >= TOTAL && acked >= TOTAL && (left = left_total()) == 0)
            return;
        tg__sleep_ms(20);
    }
    struct fx_check c;
    fx_check_records(sink.recs, sink.n, 7000, CHATS, PER_CHAT, &c);
    fail_msg("not done after ~60 s: %zu handler records, %llu acknowledged (%llu at a failed "
             "first try), %lld entries left in the streams; missing %ld: %s",
             recs, (unsigned long long)acked, (unsigned long long)ack_failed, left, c.missing,
             c.lost);
}

static void test_fleet_on_three_masters(void **state)
{
    (void)state;
    struct fx_worker a, b;
    wk_start(&a, 1, "a"); /* each knows a different node only */
    wk_start(&b, 2, "b");
    tg_fleet *in = fleet_on(0, "ingress");
    char body[512];
    for (long s = 1; s <= PER_CHAT; s++)
        for (long c = 0; c < CHATS; c++) {
            size_t n = fx_update(body, sizeof body, (s - 1) * CHATS + c + 1, 7000 + c, s);
            assert_int_equal(tg_fleet_publish(in, body, n), TG_OK);
        }
    wait_all_done(&a, &b);
    int holding = 0; /* masters holding at least one partition stream */
    for (int k = 0; k < NODES; k++)
        holding += fx_redis_int(node[k].port, "EVAL %s 0",
                                "return #redis.call('KEYS','{tgbot:p*}:stream')") > 0;
    tg_fleet_stats sa, sb;
    tg_fleet_get_stats(a.f, &sa);
    tg_fleet_get_stats(b.f, &sb);
    assert_int_equal(fx_worker_stop(&a), TG_OK);
    assert_int_equal(fx_worker_stop(&b), TG_OK);
    tg_fleet_free(in);
    struct fx_check c;
    fx_check_records(sink.recs, sink.n, 7000, CHATS, PER_CHAT, &c);
    if (c.missing || c.order || c.overlap || c.dups)
        fail_msg("missing %ld order %ld overlap %ld dups %ld: %s; never handled: %s", c.missing,
                 c.order, c.overlap, c.dups, c.first, c.lost[0] ? c.lost : "none");
    assert_int_equal(sa.handled + sb.handled, TOTAL);
    assert_true(holding >= 2);
}

int main(void)
{
    if (!tgtest_redis_available()) {
        fprintf(stderr, "redis-server not installed (make deps)\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fleet_on_three_masters, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
