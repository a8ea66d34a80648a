/*
 * The fleet as separate processes against one real redis-server (append-only, so a killed
 * and restarted server keeps what it acknowledged):
 *
 *   this process = Telegram: 20,000 updates from 200 chats (100 each, sequence numbers in
 *   the text), POSTed to the ingress, each chat's next one only after the previous got 200,
 *   retried on 503 or no answer, as Telegram does;
 *   1 ingress process (the webhook server with a fleet) and 3 worker processes, each
 *   re-executing this binary.
 *
 * Mid-run: one worker is killed with SIGKILL, later started again, a fourth worker joins,
 * and redis-server is killed (SIGKILL) and restarted. Every handler keeps its chat's last
 * seq in Redis (state that follows the chat from worker to worker) and appends a record
 * (chat, seq, the seq that state held, start and end on CLOCK_MONOTONIC) to its process's
 * file with one write(), so a killed worker keeps what it did. At the end the records must
 * show: every update handled, in order per chat, never two handlers of a chat at once, the
 * chat state continuous across workers. Updates handled twice are counted and printed.
 * The checker is shown to fail on the run's own records with two updates of one chat swapped,
 * and on broken records (order swapped, one lost, two overlapping) in a test of its own.
 */
#include "tgtest.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "fleet_fx.h"
#include "redis_server.h"
#include "tgbot/tgbot.h"

#define CHATS      200
#define PER_CHAT   100
#define TOTAL      (CHATS * PER_CHAT)
#define CHAT_BASE  5000
#define PARTITIONS 16
/* A handler caught by the Redis restart waits (retrying its storage) until Redis is back.
 * If the outage outlasts the partition's lease in Redis (lease_ms after the last renewal,
 * which is at most lease_ms / 4 old), another worker may take the partition and run that
 * entry alongside it: the documented limit "handlers must finish well within lease_ms". A
 * restart of the append-only server under load took ~1.1 s, which a 1 s lease did not cover;
 * 4 s leave ~3 s. (A killed worker's partitions wait up to this long: a little test time.) */
#define LEASE_MS  4000
#define MAX_PROCS 8

/* ---- child processes ---- */

static int rec_fd = -1;
static tg_storage *store;

/* A storage call retried while Redis is away (bounded: ~20 s), as a handler that must not
 * lose its effect would do. */
static bool get_prev(int64_t chat, long *prev)
{
    char key[48], b[24];
    size_t len = 0;
    bool found = false;
    snprintf(key, sizeof key, "seq:%lld", (long long)chat);
    for (int i = 0; i < 400; i++) {
        if (tg_storage_get(store, key, b, sizeof b - 1, &len, &found) == TG_OK) {
            b[found ? len : 0] = '\0';
            *prev = atol(b);
            return true;
        }
        tg__sleep_ms(50);
    }
    return false;
}

static bool set_seq(int64_t chat, long v)
{
    char key[48], b[24];
    snprintf(key, sizeof key, "seq:%lld", (long long)chat);
    int n = snprintf(b, sizeof b, "%ld", v);
    for (int i = 0; i < 400; i++) {
        if (tg_storage_set(store, key, b, (size_t)n, 0) == TG_OK)
            return true;
        tg__sleep_ms(50);
    }
    return false;
}

/* Record (chat, seq, the seq the chat's state held, start, end); the state is the chat's
 * last seq in Redis, shared by every worker the chat ever visits. */
static tg_status on_message(tg_hctx *h, void *user)
{
    (void)user;
    uint64_t t0 = tg__now_ns();
    const tg_event *ev = tg_hctx_event(h);
    long seq = fx_seq_of(ev->text), prev = 0;
    if (!get_prev(ev->chat_id, &prev) || !set_seq(ev->chat_id, seq > prev ? seq : prev))
        return tg_hctx_fail(h, TG_ERR_TRANSPORT, "redis stayed away");
    char b[160];
    int n = snprintf(b, sizeof b, "%lld %ld %ld %llu %llu\n", (long long)ev->chat_id, seq, prev,
                     (unsigned long long)t0, (unsigned long long)tg__now_ns());
    return write(rec_fd, b, (size_t)n) == n ? TG_OK : TG_ERR_IO;
}

static tg_fleet_options fleet_opts(uint16_t port)
{
    return (tg_fleet_options){.redis_port = port,
                              .redis_timeout_ms = 1000,
                              .partitions = PARTITIONS,
                              .lease_ms = LEASE_MS};
}

static int worker_main(uint16_t port, const char *path)
{
    rec_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    tg_fleet_options fo = fleet_opts(port);
    tg_fleet *f = NULL;
    tg_storage *st = NULL;
    /* A worker may start while redis-server restarts: wait for it (about 10 s at most). */
    for (int i = 0; i < 200 && rec_fd >= 0 && (!f || !st); i++) {
        if (!f)
            f = tg_fleet_new(&fo);
        if (!st)
            st = tg_storage_redis_new(&(tg_redis_options){.port = port, .timeout_ms = 1000});
        if (!f || !st)
            tg__sleep_ms(50);
    }
    tg_router *r = tg_router_new();
    store = st;
    if (!f || !st || !r || tg_router_on_kind(r, TG_UPDATE_MESSAGE, on_message, NULL) != TG_OK)
        return 2;
    tg_dispatcher *d =
        tg_dispatcher_new(NULL, r, &(tg_dispatcher_options){.workers = 4, .storage = st});
    if (!d || tg_dispatcher_stop_on_signals(d) != TG_OK)
        return 2;
    tg_status rc = tg_fleet_run_worker(f, d, NULL);
    tg_fleet_stats s;
    tg_fleet_get_stats(f, &s);
    char line[160];
    int n = snprintf(line, sizeof line, "claimed %llu acquired %llu released %llu lost %llu\n",
                     (unsigned long long)s.claimed, (unsigned long long)s.acquired,
                     (unsigned long long)s.released, (unsigned long long)s.lost);
    char spath[160];
    snprintf(spath, sizeof spath, "%s.stats", path);
    int sfd = open(spath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (sfd < 0 || write(sfd, line, (size_t)n) != n)
        rc = TG_ERR_IO;
    if (sfd >= 0)
        close(sfd);
    tg_dispatcher_free(d);
    tg_router_free(r);
    tg_storage_free(st);
    tg_fleet_free(f);
    close(rec_fd);
    return rc == TG_OK ? 0 : 3;
}

static int ingress_main(uint16_t port)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    tg_fleet_options fo = fleet_opts(port);
    tg_fleet *f = tg_fleet_new(&fo);
    tg_webhook *w =
        f ? tg_webhook_start(
                NULL,
                &(tg_webhook_options){.host = "127.0.0.1", .port = -1, .threads = 4, .fleet = f})
          : NULL;
    if (!w)
        return 2;
    printf("%u\n", tg_webhook_port(w));
    fflush(stdout);
    int sig;
    sigwait(&set, &sig);
    tg_webhook_stop(w);
    tg_fleet_free(f);
    return 0;
}

/* ---- the test (Telegram's side) ---- */

static tgtest_redis redis;
static char dir[64];
static char url[64];
static atomic_long sent;
static atomic_long retries;
static uint64_t redis_away_ms; /* how long the restart kept Redis away */

static pid_t children[MAX_PROCS];
static const char *const names[] = {"w1", "w2", "w2b", "w3", "w4"}; /* record files */

static void remember(pid_t pid)
{
    for (int i = 0; i < MAX_PROCS; i++)
        if (children[i] <= 0) {
            children[i] = pid;
            return;
        }
}

static void forget(pid_t pid)
{
    for (int i = 0; i < MAX_PROCS; i++)
        if (children[i] == pid)
            children[i] = 0;
}

/* After a failed assertion: no process of this test may outlive it. */
static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < MAX_PROCS; i++)
        if (children[i] > 0) {
            kill(children[i], SIGKILL);
            waitpid(children[i], NULL, 0);
            children[i] = 0;
        }
    tgtest_redis_stop(&redis);
    for (int i = 0; dir[0] && i < 5; i++) {
        char path[160];
        snprintf(path, sizeof path, "%s/%s.rec", dir, names[i]);
        unlink(path);
        snprintf(path, sizeof path, "%s/%s.rec.stats", dir, names[i]);
        unlink(path);
    }
    if (dir[0])
        rmdir(dir);
    dir[0] = '\0';
    return 0;
}

static pid_t spawn(const char *role, const char *arg, int *out_fd)
{
    int p[2] = {-1, -1};
    if (out_fd && pipe(p) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        char port[16];
        snprintf(port, sizeof port, "%u", redis.port);
        if (out_fd) {
            dup2(p[1], 1);
            close(p[0]);
        }
        execl("/proc/self/exe", "test_fleet_procs", role, port, arg, (char *)NULL);
        _exit(127);
    }
    if (out_fd) {
        close(p[1]);
        *out_fd = p[0];
    }
    remember(pid);
    return pid;
}

static pid_t spawn_worker(const char *name)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s.rec", dir, name);
    return spawn("--worker", path, NULL);
}

static pid_t spawn_ingress(void)
{
    int fd = -1;
    pid_t pid = spawn("--ingress", "-", &fd);
    char buf[16] = {0};
    ssize_t n = pid > 0 ? read(fd, buf, sizeof buf - 1) : -1;
    close(fd);
    assert_true(n > 0);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", atoi(buf));
    return pid;
}

/* Post until 200, like Telegram (bounded: about 60 s of 503s or silence). */
static void deliver(const char *body, size_t len)
{
    for (int attempt = 0; attempt < 3000; attempt++) {
        long st = fx_post(url, body, len);
        if (st == 200)
            return;
        assert_true(st == 503 || st == -1);
        atomic_fetch_add(&retries, 1);
        tg__sleep_ms(20);
    }
    fail_msg("the ingress never took an update");
}

static void *sender(void *arg)
{
    long half = (long)(intptr_t)arg;
    char body[512];
    for (long s = 1; s <= PER_CHAT; s++)
        for (long c = half; c < CHATS; c += 2) {
            size_t n = fx_update(body, sizeof body, (s - 1) * CHATS + c + 1, CHAT_BASE + c, s);
            deliver(body, n);
            atomic_fetch_add(&sent, 1);
        }
    fx_post_cleanup();
    return NULL;
}

static size_t per_worker[5]; /* records per file at the last read */

/* Read every record file of dir into *out (malloc'ed). */
static size_t read_records(struct fx_rec **out)
{
    size_t n = 0, cap = TOTAL * 2;
    struct fx_rec *r = malloc(cap * sizeof *r);
    for (size_t i = 0; r && i < sizeof names / sizeof *names; i++) {
        char path[128];
        snprintf(path, sizeof path, "%s/%s.rec", dir, names[i]);
        FILE *fp = fopen(path, "r");
        size_t before = n;
        struct fx_rec x;
        long long chat;
        unsigned long long t0, t1;
        while (fp && n < cap &&
               fscanf(fp, "%lld %ld %ld %llu %llu", &chat, &x.seq, &x.prev, &t0, &t1) == 5) {
            x.chat = chat;
            x.t0_ns = t0;
            x.t1_ns = t1;
            r[n++] = x;
        }
        if (fp)
            fclose(fp);
        per_worker[i] = n - before;
    }
    *out = r;
    return n;
}

/* What the workers that stopped cleanly say (the killed one says nothing). */
static void print_worker_stats(void)
{
    for (size_t i = 0; i < 5; i++) {
        char path[160], line[160] = "";
        snprintf(path, sizeof path, "%s/%s.rec.stats", dir, names[i]);
        FILE *fp = fopen(path, "r");
        if (fp && fgets(line, sizeof line, fp))
            printf("fleet: %s: %s", names[i], line);
        if (fp)
            fclose(fp);
    }
}

static long distinct_handled(void)
{
    struct fx_rec *r;
    size_t n = read_records(&r);
    struct fx_check c;
    fx_check_records(r, n, CHAT_BASE, CHATS, PER_CHAT, &c);
    free(r);
    return TOTAL - c.missing;
}

static void wait_sent(long n)
{
    for (int i = 0; i < 6000 && atomic_load(&sent) < n; i++) /* up to ~60 s */
        tg__sleep_ms(10);
}

/* Until the record file of worker name holds at least n records (bounded: ~20 s). */
static void wait_records(const char *name, long n)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s.rec", dir, name);
    long lines = 0;
    for (int i = 0; i < 2000 && lines < n; i++) {
        FILE *fp = fopen(path, "r");
        lines = 0;
        for (int ch; fp && (ch = getc(fp)) != EOF;)
            lines += ch == '\n';
        if (fp)
            fclose(fp);
        if (lines < n)
            tg__sleep_ms(10);
    }
    if (lines < n)
        fail_msg("worker %s handled %ld updates in ~20 s, expected at least %ld", name, lines, n);
}

static void stop_proc(pid_t pid)
{
    int status = -1;
    kill(pid, SIGTERM);
    waitpid(pid, &status, 0);
    forget(pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void kill_proc(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    forget(pid);
}

static void run_scenario(pid_t *w)
{
    pthread_t th[2];
    for (long i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, sender, (void *)(intptr_t)i), 0);
    wait_sent(TOTAL / 5);
    wait_records("w2", 50); /* it owns partitions by now (leases are taken once a tick) */
    kill_proc(w[1]);        /* w2 dies holding partitions and entries in flight */
    wait_sent(TOTAL * 7 / 20);
    w[1] = spawn_worker("w2b"); /* and comes back as a new member */
    wait_sent(TOTAL / 2);
    w[3] = spawn_worker("w4"); /* a fourth joins: partitions rebalance */
    wait_sent(TOTAL * 13 / 20);
    uint64_t t_kill = tg__now_ms();
    assert_int_equal(tgtest_redis_restart(&redis), 0); /* SIGKILL, then start again */
    redis_away_ms = tg__now_ms() - t_kill;
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    long got = 0;
    for (int i = 0; i < 600 && (got = distinct_handled()) < TOTAL; i++) /* up to ~60 s */
        tg__sleep_ms(100);
    printf("fleet: %ld of %d updates handled after sending ended\n", got, TOTAL);
}

/* The same records with seq 1 and 2 of one chat made to run the other way round: the check
 * that passed must now fail. */
static void break_order_on_purpose(struct fx_rec *r, size_t n)
{
    size_t one = n, two = n;
    for (size_t i = 0; i < n; i++) {
        if (r[i].chat == CHAT_BASE && r[i].seq == 1 && one == n)
            one = i;
        if (r[i].chat == CHAT_BASE && r[i].seq == 2 && two == n)
            two = i;
    }
    assert_true(one < n && two < n);
    struct fx_rec t = r[one];
    r[one].t0_ns = r[two].t0_ns, r[one].t1_ns = r[two].t1_ns;
    r[two].t0_ns = t.t0_ns, r[two].t1_ns = t.t1_ns;
    struct fx_check c;
    fx_check_records(r, n, CHAT_BASE, CHATS, PER_CHAT, &c);
    assert_true(c.order > 0);
}

static void test_ingress_three_workers_kills_and_restarts(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/tgtest-fleet-XXXXXX");
    assert_non_null(mkdtemp(dir));
    assert_int_equal(tgtest_redis_start_durable(&redis), 0);
    uint64_t t0 = tg__now_ms();
    pid_t ingress = spawn_ingress();
    pid_t w[4] = {spawn_worker("w1"), spawn_worker("w2"), spawn_worker("w3"), 0};
    run_scenario(w);
    for (int i = 0; i < 4; i++)
        stop_proc(w[i]);
    stop_proc(ingress);
    struct fx_rec *r;
    size_t n = read_records(&r);
    struct fx_check c;
    fx_check_records(r, n, CHAT_BASE, CHATS, PER_CHAT, &c);
    printf("fleet: %zu records, %d updates, handled twice %ld, webhook retries %ld, %.1f s\n", n,
           TOTAL, c.dups, atomic_load(&retries), (double)(tg__now_ms() - t0) / 1000.0);
    printf("fleet: handled by w1 %zu, w2 (killed) %zu, w2 restarted %zu, w3 %zu, w4 %zu\n",
           per_worker[0], per_worker[1], per_worker[2], per_worker[3], per_worker[4]);
    print_worker_stats();
    printf("fleet: the redis-server restart kept it away %llu ms (leases %d ms)\n",
           (unsigned long long)redis_away_ms, LEASE_MS);
    if (c.missing || c.order || c.overlap || c.conv)
        fail_msg("missing %ld, out of order %ld, overlapping %ld, conversation %ld: %s; never "
                 "handled: %s",
                 c.missing, c.order, c.overlap, c.conv, c.first, c.lost[0] ? c.lost : "none");
    for (int p = 0; p < PARTITIONS; p++) { /* everything acknowledged and deleted */
        long long left = fx_redis_int(redis.port, "XLEN {tgbot:p%d}:stream", p);
        if (left != 0)
            fail_msg("partition %d: %lld entries left in its stream after the workers stopped", p,
                     left);
    }
    break_order_on_purpose(r, n);
    free(r);
}

/* The checker must see broken runs: records of one chat, then each way to break them. */
static void test_checker_fails_on_broken_order(void **state)
{
    (void)state;
    struct fx_rec r[PER_CHAT];
    struct fx_check c;
    for (long s = 1; s <= PER_CHAT; s++)
        r[s - 1] = (struct fx_rec){CHAT_BASE, s, s - 1, (uint64_t)s * 100, (uint64_t)s * 100 + 50};
    fx_check_records(r, PER_CHAT, CHAT_BASE, 1, PER_CHAT, &c);
    assert_true(!c.missing && !c.order && !c.overlap && !c.conv && !c.dups);
    /* seq 40 and 41 run the other way round (their conversation values swapped along) */
    fx_check_records(r, PER_CHAT, CHAT_BASE, 1, PER_CHAT, &c);
    r[39].t0_ns = 4150, r[39].t1_ns = 4190, r[40].t0_ns = 4000, r[40].t1_ns = 4050;
    fx_check_records(r, PER_CHAT, CHAT_BASE, 1, PER_CHAT, &c);
    assert_true(c.order > 0);
    assert_non_null(strstr(c.first, "out of order"));
    /* seq 77 lost */
    for (long s = 1; s <= PER_CHAT; s++)
        r[s - 1] = (struct fx_rec){CHAT_BASE, s, s - 1, (uint64_t)s * 100, (uint64_t)s * 100 + 50};
    r[76].seq = 76;
    fx_check_records(r, PER_CHAT, CHAT_BASE, 1, PER_CHAT, &c);
    assert_int_equal(c.missing, 1);
    assert_int_equal(c.dups, 1);
    /* seq 10 still running when seq 11 starts */
    for (long s = 1; s <= PER_CHAT; s++)
        r[s - 1] = (struct fx_rec){CHAT_BASE, s, s - 1, (uint64_t)s * 100, (uint64_t)s * 100 + 50};
    r[9].t1_ns = 1120;
    fx_check_records(r, PER_CHAT, CHAT_BASE, 1, PER_CHAT, &c);
    assert_int_equal(c.overlap, 1);
    /* the conversation did not follow */
    r[9].t1_ns = 1050;
    r[60].prev = 3;
    fx_check_records(r, PER_CHAT, CHAT_BASE, 1, PER_CHAT, &c);
    assert_int_equal(c.conv, 1);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--worker") == 0)
        return worker_main((uint16_t)atoi(argv[2]), argv[3]);
    if (argc == 4 && strcmp(argv[1], "--ingress") == 0)
        return ingress_main((uint16_t)atoi(argv[2]));
    if (!tgtest_redis_available()) {
        fprintf(stderr, "redis-server not installed (make deps)\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checker_fails_on_broken_order),
        cmocka_unit_test_teardown(test_ingress_three_workers_kills_and_restarts, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
