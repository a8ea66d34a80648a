/*
 * test_fleet_outage: two tgproxy processes (A in this process, B the built daemon) on one
 * redis-server, Redis killed mid-run.
 * Relays open before the kill keep moving bytes; new handshakes at both proxies are served
 * on local state, counted as fallbacks; the up gauge drops to 0 and one warning names the
 * outage (in A's log, in this process, and in B's, the daemon's). Redis is started again:
 * both proxies reconnect (the gauge is 1 again on both metrics pages, the recovery is
 * logged once each) and a hello replayed from A to B is fronted again. Every wait is a
 * bounded poll.
 */
#include "tgtest.h"

#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/log.h"
#include "proxy/daemon/metrics.h"
#include "proxy_fleet.h"
#include "proxy_util.h"

static struct pfleet F;

/* After each test, also a failed one: nothing it started outlives it. */
static tg__logger saved_log;
static bool log_hooked;

static int stop(void **state)
{
    (void)state;
    pfleet_stop(&F);
    if (log_hooked) {
        tg__log_default()->sink = saved_log.sink;
        tg__log_default()->user = saved_log.user;
        log_hooked = false;
    }
    return 0;
}

struct seen {
    pthread_mutex_t mu;
    int down, back;
};
static struct seen seen = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void sink(void *user, int level, const char *msg)
{
    struct seen *s = user;
    pthread_mutex_lock(&s->mu);
    if (level >= TG__LOG_WARN && strstr(msg, "fleet: redis") && strstr(msg, "local state"))
        s->down++;
    if (strstr(msg, "fleet: redis") && strstr(msg, "is back; checks are shared again"))
        s->back++;
    pthread_mutex_unlock(&s->mu);
}

static int counts(int *down, int *back)
{
    pthread_mutex_lock(&seen.mu);
    *down = seen.down;
    *back = seen.back;
    pthread_mutex_unlock(&seen.mu);
    return 0;
}

/* The value of an unlabelled sample in A's metrics page, or -1. */
static double metric(const char *name)
{
    tg__buf b;
    tg__buf_init(&b, 1u << 20);
    double v = -1;
    if (metrics_render(F.h.srv, "tgproxy", &b) == 0 && tg__buf_putc(&b, '\0') == 0) {
        char key[128];
        snprintf(key, sizeof key, "\ntgproxy_%s ", name);
        const char *p = strstr(b.data, key);
        if (p)
            v = strtod(p + strlen(key), NULL);
    }
    tg__buf_cleanup(&b);
    return v;
}

/* Lines of B's log (the daemon's stderr) that contain what. */
static int log_lines_b(const char *what)
{
    char path[96], line[1024];
    snprintf(path, sizeof path, "%s/b.log", F.dir);
    FILE *fp = fopen(path, "r");
    int n = 0;
    while (fp && fgets(line, sizeof line, fp))
        n += strstr(line, what) != NULL;
    if (fp)
        fclose(fp);
    return n;
}

/* A relay with the fake DC in ECHO mode moves n more bytes both ways, unchanged. */
static void echo_more(struct pcli *c, uint8_t fill)
{
    uint8_t out[8192], in[8192];
    memset(out, fill, sizeof out);
    assert_int_equal(pcli_send(c, out, sizeof out), 0);
    assert_int_equal(pcli_recv_all(c, in, sizeof in), 0);
    assert_memory_equal(in, out, sizeof out);
}

static void relay_ok(struct pcli *c, uint32_t seed)
{
    assert_int_equal(pcli_echo(c, seed, 64 * 1024, 0), 0); /* the DC echoes from now on */
}

static void test_redis_killed_mid_run(void **state)
{
    (void)state;
    saved_log = *tg__log_default();
    log_hooked = true;
    tg__log_default()->sink = sink;
    tg__log_default()->user = &seen;
    assert_int_equal(pfleet_start(&F,
                                  &(struct pharness_opts){.workers = 2, .log_level = TG__LOG_INFO},
                                  &(struct pfleet_opts){.timeout_ms = 1000}),
                     0);
    assert_int_equal(pfleet_wait_up(&F, true, 10000), 0);
    assert_true(metric("fleet_redis_up") == 1);
    struct pcli live[2];
    uint16_t ports[2] = {F.port_a, F.port_b};
    struct pcli_opts o = pharness_client(&F.h, PCLI_TLS);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pcli_connect(&live[i], ports[i], &o), 0);
        relay_ok(&live[i], 1u + (uint32_t)i);
    }
    struct stats a0, b0, a1, b1;
    assert_int_equal(pfleet_stats(&F, &a0, &b0), 0);

    tgtest_redis_kill(&F.redis);
    assert_int_equal(pfleet_wait_up(&F, false, 10000), 0);
    assert_true(metric("fleet_redis_up") == 0);
    for (int i = 0; i < 2; i++) {
        echo_more(&live[i], (uint8_t)(10 + i)); /* live relays go on */
        struct pcli c;                          /* and new clients are served */
        assert_int_equal(pcli_connect(&c, ports[i], &o), 0);
        relay_ok(&c, 20u + (uint32_t)i);
        pcli_close(&c);
    }
    assert_int_equal(pfleet_stats(&F, &a1, &b1), 0);
    assert_true(a1.fleet_fallbacks > a0.fleet_fallbacks);
    assert_true(b1.fleet_fallbacks > b0.fleet_fallbacks);
    assert_true(metric("fleet_redis_fallbacks_total") >= (double)a1.fleet_fallbacks);
    int down, back;
    counts(&down, &back);
    assert_int_equal(down, 1); /* A warned once for the outage, whatever its workers saw */
    assert_true(pfleet_metric_b(&F, "fleet_redis_up ") == 0);

    assert_int_equal(tgtest_redis_restart(&F.redis), 0);
    assert_int_equal(pfleet_wait_up(&F, true, 20000), 0);
    assert_true(metric("fleet_redis_up") == 1);
    counts(&down, &back);
    assert_int_equal(down, 1);
    assert_int_equal(back, 1);
    assert_int_equal(log_lines_b("local state only"), 1); /* and B, in its own log */
    assert_int_equal(log_lines_b("is back; checks are shared again"), 1);
    uint8_t hello[PFLEET_HELLO_MAX];
    size_t n = 0;
    int r = 0;
    for (int attempt = 0; attempt < 5 && r == 0; attempt++)
        r = pfleet_cross_replay(&F, hello, &n);
    assert_int_equal(r, 1); /* shared again */
    for (int i = 0; i < 2; i++) {
        echo_more(&live[i], (uint8_t)(30 + i));
        pcli_close(&live[i]);
    }
}

int main(void)
{
    if (!tgtest_redis_available()) {
        fprintf(stderr, "redis-server not installed (make deps)\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_redis_killed_mid_run, stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
