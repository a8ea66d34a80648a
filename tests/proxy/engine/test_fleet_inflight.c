/*
 * test_fleet_inflight: connections whose [fleet] check is still in flight when they end or
 * when the bound expires. Redis is frozen (SIGSTOP) so checks stay unanswered; [fleet]
 * timeout is 100 ms and the secret has max-connections (each check is the admission
 * script, which takes a slot in Redis). Clients that reset while their check waits are
 * closed at once (the late reply must find no connection: ASan would see a use after free)
 * and the slots Redis takes for them are given back; clients that wait are answered after
 * the bound on local state (counted as fallbacks) and hold their slot. Redis is thawed well
 * before the proxy's 2 s stall limit; once every client is gone, the proxy's count in Redis
 * is back to 0, read from Redis itself. Every wait is a bounded poll.
 */
#include "tgtest.h"

#include <hiredis/hiredis.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
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

/* Sum of every member's count for the secret "tls" (the key layout of docs/tgproxy.md). */
static long long redis_count(void)
{
    redisContext *r = redisConnect("127.0.0.1", F.redis.port);
    long long sum = -1;
    redisReply *rep = r && !r->err ? redisCommand(r, "HVALS tgproxy:{tls}:c") : NULL;
    if (rep && rep->type == REDIS_REPLY_ARRAY) {
        sum = 0;
        for (size_t i = 0; i < rep->elements; i++)
            sum += strtoll(rep->element[i]->str, NULL, 10);
    }
    if (rep)
        freeReplyObject(rep);
    if (r)
        redisFree(r);
    return sum;
}

/* A connection that sent a valid hello (its check is now in flight). */
static int hello_sent(void)
{
    uint8_t hello[600];
    size_t n = pcli_hello(hello, sizeof hello, F.h.key, PHARNESS_DOMAIN, (int64_t)time(NULL));
    int fd = psock_connect(F.port_a, 10000);
    assert_true(fd >= 0);
    assert_int_equal(psock_write_all(fd, hello, n), 0);
    return fd;
}

static void sleep_ms(long ms)
{
    nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000}, NULL);
}

static void test_checks_in_flight(void **state)
{
    (void)state;
    struct pharness_opts o = {.workers = 2, .limits.max_connections = 100};
    assert_int_equal(pfleet_start(&F, &o, &(struct pfleet_opts){.timeout_ms = 100}), 0);
    assert_int_equal(pfleet_wait_up(&F, true, 10000), 0);
    struct stats a0, b0, a1;
    assert_int_equal(pfleet_stats(&F, &a0, &b0), 0);
    kill(F.redis.pid, SIGSTOP);
    enum { RESET = 6, WAIT = 3 };
    for (int i = 0; i < RESET; i++) { /* reset while the check waits */
        int fd = hello_sent();
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        close(fd);
    }
    int wait_fd[WAIT];
    for (int i = 0; i < WAIT; i++)
        wait_fd[i] = hello_sent();
    for (int i = 0; i < WAIT; i++) { /* answered after the bound, on local state */
        uint8_t first[5];
        assert_int_equal(psock_read_all(wait_fd[i], first, sizeof first), 0);
        assert_int_equal(first[0], 0x16);
    }
    server_stats(F.h.srv, &a1);
    assert_true(a1.fleet_fallbacks >= a0.fleet_fallbacks + WAIT);
    kill(F.redis.pid, SIGCONT);
    for (int i = 0; i < WAIT; i++)
        close(wait_fd[i]);
    long long n = -1;
    for (int i = 0; i < 250 && n != 0; i++) { /* bounded: about 5 s */
        sleep_ms(20);
        n = redis_count();
    }
    assert_int_equal(n, 0);
    assert_int_equal(pfleet_wait_up(&F, true, 10000), 0); /* never judged stalled */
    struct pcli c; /* and the proxy serves as before, its slot counted in Redis */
    struct pcli_opts co = pharness_client(&F.h, PCLI_TLS);
    assert_int_equal(pcli_connect(&c, F.port_a, &co), 0);
    assert_int_equal(pcli_echo(&c, 5, 4096, 0), 0);
    for (int i = 0; i < 250 && (n = redis_count()) != 1; i++)
        sleep_ms(20);
    assert_int_equal(n, 1);
    pcli_close(&c);
    pfleet_stop(&F);
}

int main(void)
{
    if (!tgtest_redis_available()) {
        fprintf(stderr, "redis-server not installed (make deps)\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_checks_in_flight, stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
