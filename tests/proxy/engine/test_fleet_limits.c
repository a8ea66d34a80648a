/*
 * test_fleet_limits: [limits.LABEL] counted across two tgproxy processes on one Redis
 * ([fleet]). Each process alone is under every limit, so only the fleet-wide count can
 * refuse: max-connections = 2 with one relay open at A and one at B fronts a third client
 * at either, and serves one again once a relay closed; max-unique-ips = 1 with a client
 * from 127.0.0.1 at A fronts one from 127.0.0.2 at B; a quota used up through A fronts new
 * clients at B; a process killed while it holds a slot stops holding it once its lease ends.
 * A check that fell back to local state (Redis slower than [fleet] timeout)
 * may admit: such a try is counted and repeated, a bounded number of times.
 */
#include "tgtest.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proxy_fleet.h"
#include "proxy_util.h"

static struct pfleet F;

/* After each test, also a failed one: nothing it started outlives it. */
static int stop(void **state)
{
    (void)state;
    pfleet_stop(&F);
    return 0;
}

static void start_lease(const struct config_limits *lim, uint32_t lease_ms)
{
    struct pharness_opts o = {.workers = 2, .limits = *lim};
    struct pfleet_opts fo = {.timeout_ms = 1000, .lease_ms = lease_ms};
    assert_int_equal(pfleet_start(&F, &o, &fo), 0);
    assert_int_equal(pfleet_wait_up(&F, true, 10000), 0);
}

static void start(const struct config_limits *lim)
{
    start_lease(lim, 0);
}

static uint64_t fallbacks(void)
{
    struct stats a, b;
    assert_int_equal(pfleet_stats(&F, &a, &b), 0);
    return a.fleet_fallbacks + b.fleet_fallbacks;
}

/* A new hello at port from src: 0 fronted, 1 answered. Retries while answers come from
   fallbacks; fails on an answer without one. */
static int hello_verdict(uint16_t port, const char *src, int want)
{
    for (int attempt = 0; attempt < 5; attempt++) {
        uint8_t hello[600];
        size_t n = pcli_hello(hello, sizeof hello, F.h.key, PHARNESS_DOMAIN, (int64_t)time(NULL));
        uint64_t fb = fallbacks();
        int r = pfleet_hello(port, src, hello, n);
        if (r == want || r < 0 || fallbacks() == fb)
            return r;
    }
    return -1;
}

static void relay(struct pcli *c, uint16_t port, uint32_t seed, const char *src, uint64_t n)
{
    struct pcli_opts o = pharness_client(&F.h, PCLI_TLS);
    o.src_ip = src;
    assert_int_equal(pcli_connect(c, port, &o), 0);
    assert_int_equal(pcli_echo(c, seed, n, 0), 0);
}

/* A new client at port is served again (a whole relay), polled: bounded, about 10 s. */
static bool served(void *port)
{
    struct pcli c;
    struct pcli_opts o = pharness_client(&F.h, PCLI_TLS);
    o.timeout_ms = 2000;
    bool ok = pcli_connect(&c, *(uint16_t *)port, &o) == 0 && pcli_echo(&c, 3, 4096, 0) == 0;
    pcli_close(&c);
    return ok;
}

static bool served_again(uint16_t port)
{
    return tgtest_wait_until(served, &port, 10000);
}

/* A new hello to B is refused (fronted): pfleet_hello's 0. */
static bool b_refuses(void *unused)
{
    (void)unused;
    uint8_t hello[600];
    size_t n = pcli_hello(hello, sizeof hello, F.h.key, PHARNESS_DOMAIN, (int64_t)time(NULL));
    return pfleet_hello(F.port_b, NULL, hello, n) == 0;
}

static void test_max_connections_fleet_wide(void **state)
{
    (void)state;
    start(&(struct config_limits){.max_connections = 2});
    struct pcli a, b;
    relay(&a, F.port_a, 1, NULL, 4096);
    relay(&b, F.port_b, 2, NULL, 4096);
    assert_int_equal(hello_verdict(F.port_a, NULL, 0), 0); /* the third, at either proxy */
    assert_int_equal(hello_verdict(F.port_b, NULL, 0), 0);
    struct stats sa, sb;
    assert_int_equal(pfleet_stats(&F, &sa, &sb), 0);
    assert_true(sa.limit_connections >= 1 && sb.limit_connections >= 1);
    pcli_close(&a);
    /* A's release reaches Redis after A saw the close: poll, bounded */
    assert_true(served_again(F.port_b));
    pcli_close(&b);
    pfleet_stop(&F);
}

/* max-connections = 1 held by a relay at B; B is killed (SIGKILL: no release, no goodbye).
   Its slot stops counting once its lease (2 s here) ends without a heartbeat, and A serves
   a client again; without the lease the slot would be held for ever. */
static void test_crashed_process_slot_expires(void **state)
{
    (void)state;
    start_lease(&(struct config_limits){.max_connections = 1}, 2000);
    struct pcli b;
    relay(&b, F.port_b, 1, NULL, 4096);
    assert_int_equal(hello_verdict(F.port_a, NULL, 0), 0);
    kill(F.pid_b, SIGKILL);
    waitpid(F.pid_b, NULL, 0);
    F.pid_b = 0;
    pcli_close(&b);
    assert_true(served_again(F.port_a));
    pfleet_stop(&F);
}

static void test_unique_ips_fleet_wide(void **state)
{
    (void)state;
    start(&(struct config_limits){.max_unique_ips = 1, .unique_ips_window_s = 60});
    struct pcli a;
    relay(&a, F.port_a, 1, "127.0.0.1", 4096);
    assert_int_equal(hello_verdict(F.port_b, "127.0.0.2", 0), 0);
    assert_int_equal(hello_verdict(F.port_b, "127.0.0.1", 1), 1); /* the counted address */
    struct stats sa, sb;
    assert_int_equal(pfleet_stats(&F, &sa, &sb), 0);
    assert_true(sb.limit_unique_ips >= 1);
    pcli_close(&a);
    pfleet_stop(&F);
}

static void test_quota_fleet_wide(void **state)
{
    (void)state;
    start(&(struct config_limits){.quota = 64 * 1024});
    struct pcli a;
    relay(&a, F.port_a, 1, NULL, 128 * 1024); /* 256 KiB both ways > quota, through A */
    /* A folds and sends its bytes once a second; B then refuses new clients: poll, bounded */
    assert_true(tgtest_wait_until(b_refuses, NULL, 5000));
    struct stats sa, sb;
    assert_int_equal(pfleet_stats(&F, &sa, &sb), 0);
    assert_true(sb.limit_quota >= 1);
    pcli_close(&a);
    pfleet_stop(&F);
}

int main(void)
{
    if (!tgtest_redis_available()) {
        fprintf(stderr, "redis-server not installed (make deps)\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_max_connections_fleet_wide, stop),
        cmocka_unit_test_teardown(test_crashed_process_slot_expires, stop),
        cmocka_unit_test_teardown(test_unique_ips_fleet_wide, stop),
        cmocka_unit_test_teardown(test_quota_fleet_wide, stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
