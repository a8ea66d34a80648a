/*
 * [dcs] host names through the engine: resolved by resolver threads off the event loop,
 * cached per worker, waited for under the DC connect timeout, and a clear "dns" end when a
 * name gives no address. "localhost" resolves through /etc/hosts (no network); names that
 * must fail or hang go through a stand-in resolver (upstream_set_resolver) so no test
 * sends a DNS query anywhere.
 */
#include "tgtest.h"

#include "core/log.h"
#include "logcap.h"
#include "proxy/engine/upstream.h"
#include "proxy_client.h"
#include "proxy_harness.h"

#include <netdb.h>
#include <pthread.h>
#include <time.h>

#define SLOW_NAME "nonexistent.invalid"

/* ---- a resolver that holds SLOW_NAME until released, then says it does not exist ---- */

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls;     /* lookups of SLOW_NAME started */
    bool released; /* let them answer */
} gate = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static int gated_gai(const char *host, const char *port, const struct addrinfo *hints,
                     struct addrinfo **res)
{
    if (strcmp(host, SLOW_NAME) != 0)
        return getaddrinfo(host, port, hints, res);
    pthread_mutex_lock(&gate.mu);
    gate.calls++;
    pthread_cond_broadcast(&gate.cv);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 30; /* bounded even if a test forgets to release */
    while (!gate.released && pthread_cond_timedwait(&gate.cv, &gate.mu, &until) == 0) {
    }
    pthread_mutex_unlock(&gate.mu);
    *res = NULL;
    return EAI_NONAME;
}

static bool gate_wait_calls(int n)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&gate.mu);
    while (gate.calls < n && pthread_cond_timedwait(&gate.cv, &gate.mu, &until) == 0) {
    }
    bool ok = gate.calls >= n;
    pthread_mutex_unlock(&gate.mu);
    return ok;
}

static void gate_release(void)
{
    pthread_mutex_lock(&gate.mu);
    gate.released = true;
    pthread_cond_broadcast(&gate.cv);
    pthread_mutex_unlock(&gate.mu);
}

static int setup(void **state)
{
    (void)state;
    gate.calls = 0;
    gate.released = false;
    logcap_start();
    tg__log_default()->user = NULL;
    upstream_set_resolver(gated_gai);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    upstream_set_resolver(NULL);
    tg__log_default()->sink = NULL;
    return 0;
}

static struct pharness_opts slow_dc_opts(uint32_t tcp_ms)
{
    return (struct pharness_opts){.ee = true,
                                  .dd = true,
                                  .workers = 1, /* both connections on the same event loop */
                                  .tcp_ms = tcp_ms,
                                  .log_level = TG__LOG_INFO,
                                  .extra_dc = 4,
                                  .extra_dc_addr = SLOW_NAME ":443"};
}

/* ---- tests ---- */

static void test_localhost_in_dcs(void **state)
{
    (void)state;
    struct pharness h;
    assert_int_equal(pharness_start(&h, &(struct pharness_opts){.ee = true,
                                                                .dd = true,
                                                                .dc_host = "localhost"}),
                     0);
    const enum pcli_mode modes[] = {PCLI_TLS, PCLI_DD, PCLI_TLS};
    for (size_t i = 0; i < 3; i++) { /* the first waits for the lookup, the rest use the cache */
        struct pcli c;
        struct pcli_opts o = pharness_client(&h, modes[i]);
        assert_int_equal(pcli_connect(&c, h.port, &o), 0);
        assert_int_equal(pcli_echo(&c, (uint32_t)i, 100000, 0), 0);
        pcli_close(&c);
    }
    assert_int_equal(fakedc_counters(h.dc).headers_ok, 3);
    pharness_stop(&h);
}

/* A lookup that hangs holds only its own connection: another one, on the same worker,
   relays meanwhile. When the name fails, the waiting connection ends with reason dns and a
   warning names the DC and the host. The next connection to that DC ends the same way. */
static void test_failing_name_does_not_block_others(void **state)
{
    (void)state;
    struct pharness h;
    struct pharness_opts ho = slow_dc_opts(0);
    assert_int_equal(pharness_start(&h, &ho), 0);
    struct pcli slow;
    struct pcli_opts o = pharness_client(&h, PCLI_TLS);
    o.dc = 4;
    assert_int_equal(pcli_connect(&slow, h.port, &o), 0);
    assert_true(gate_wait_calls(1)); /* the lookup is under way, and stays so */

    struct pcli fast;
    struct pcli_opts fo = pharness_client(&h, PCLI_DD);
    assert_int_equal(pcli_connect(&fast, h.port, &fo), 0);
    assert_int_equal(pcli_echo(&fast, 9, 200000, 0), 0);
    pcli_close(&fast);
    assert_int_equal(fakedc_counters(h.dc).headers_ok, 1);

    gate_release();
    uint8_t b;
    assert_true(pcli_recv(&slow, &b, 1) <= 0);
    pcli_close(&slow);
    assert_true(logcap_wait("reason=dns dc=4"));
    assert_true(logcap_has("dc 4: " SLOW_NAME ": no address"));

    assert_int_equal(pcli_connect(&slow, h.port, &o), 0);
    assert_true(pcli_recv(&slow, &b, 1) <= 0);
    pcli_close(&slow);
    assert_int_equal(fakedc_counters(h.dc).headers_ok, 1); /* nothing reached a DC */
    pharness_stop(&h);
}

/* A lookup slower than the DC connect timeout ends its connection (reason dns) without
   waiting for the answer. */
static void test_lookup_bounded_by_connect_timeout(void **state)
{
    (void)state;
    struct pharness h;
    struct pharness_opts ho = slow_dc_opts(200);
    assert_int_equal(pharness_start(&h, &ho), 0);
    struct pcli slow;
    struct pcli_opts o = pharness_client(&h, PCLI_DD);
    o.dc = -4; /* a media id uses the entry of +4 */
    assert_int_equal(pcli_connect(&slow, h.port, &o), 0);
    uint8_t b;
    assert_true(pcli_recv(&slow, &b, 1) <= 0); /* closed while the lookup still hangs */
    pcli_close(&slow);
    assert_true(logcap_wait("reason=dns dc=-4"));
    assert_true(logcap_has("lookup still running"));
    gate_release(); /* lets the resolver thread finish, so the worker can stop */
    pharness_stop(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_localhost_in_dcs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failing_name_does_not_block_others, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lookup_bounded_by_connect_timeout, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
