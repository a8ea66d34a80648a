/*
 * test_fleet_replay: two tgproxy processes (A in this process, B the built daemon) share one real
 * redis-server through [fleet]. A valid FakeTLS hello answered by A and replayed byte for
 * byte to B is fronted by B: the fronting host receives exactly those bytes and B counts a
 * fleet replay; a fresh hello is answered by B, and a whole relay runs through each proxy.
 * The fleet check may fall back to local state when Redis is slower than [fleet] timeout
 * (then the replay is rightly answered): such an attempt is counted and retried with a new
 * hello, a bounded number of times; a replay answered without a fallback fails the test.
 */
#include "tgtest.h"

#include <openssl/evp.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "proxy_fleet.h"
#include "proxy_util.h"

static struct pfleet F;

static int setup(void **state)
{
    (void)state;
    /* 1 s, the longest [fleet] timeout: a loaded CI machine still answers in time */
    return pfleet_start(&F, &(struct pharness_opts){.workers = 2, .ee = true, .dd = true},
                        &(struct pfleet_opts){.timeout_ms = 1000}) == 0 &&
                   pfleet_wait_up(&F, true, 10000) == 0
               ? 0
               : -1;
}

static int teardown(void **state)
{
    (void)state;
    pfleet_stop(&F);
    return 0;
}

/* The fronting connection whose recorded bytes start with hello; -1 when none does. */
static long front_conn_with(const uint8_t *hello, size_t n)
{
    uint8_t got[600];
    for (size_t i = 0; i < pfront_count(F.h.front); i++) {
        if (pfront_wait(F.h.front, i, n, 5000) != 0)
            continue;
        if (pfront_bytes(F.h.front, i, got, sizeof got) >= (long)n && memcmp(got, hello, n) == 0)
            return (long)i;
    }
    return -1;
}

static void test_replay_across_processes_is_fronted(void **state)
{
    (void)state;
    uint8_t hello[PFLEET_HELLO_MAX];
    size_t n = 0;
    int r = 0;
    for (int attempt = 0; attempt < 5 && r == 0; attempt++)
        r = pfleet_cross_replay(&F, hello, &n);
    assert_int_equal(r, 1);
    assert_true(front_conn_with(hello, n) >= 0); /* the site got the hello as sent */
}

static void test_new_hellos_and_relays_still_served(void **state)
{
    (void)state;
    uint8_t hello[600];
    size_t n = pcli_hello(hello, sizeof hello, F.h.key, PHARNESS_DOMAIN, (int64_t)time(NULL));
    assert_int_equal(pfleet_hello(F.port_b, NULL, hello, n), 1);
    uint16_t ports[2] = {F.port_a, F.port_b};
    for (int i = 0; i < 2; i++) {
        struct pcli c;
        struct pcli_opts o = pharness_client(&F.h, PCLI_TLS);
        assert_int_equal(pcli_connect(&c, ports[i], &o), 0);
        assert_int_equal(pcli_echo(&c, 7u + (uint32_t)i, 256 * 1024, 0), 0);
        pcli_close(&c);
    }
    struct stats a, b;
    assert_int_equal(pfleet_stats(&F, &a, &b), 0);
    assert_true(a.fleet_checks > 0 && b.fleet_checks > 0);
}

/* A replay within one process is still refused by the local cache first (no Redis call). */
static void test_local_cache_in_front(void **state)
{
    (void)state;
    uint8_t hello[600];
    size_t n = pcli_hello(hello, sizeof hello, F.h.key, PHARNESS_DOMAIN, (int64_t)time(NULL));
    struct stats a0, b0, a1, b1;
    assert_int_equal(pfleet_hello(F.port_a, NULL, hello, n), 1);
    assert_int_equal(pfleet_stats(&F, &a0, &b0), 0);
    assert_int_equal(pfleet_hello(F.port_a, NULL, hello, n), 0);
    assert_int_equal(pfleet_stats(&F, &a1, &b1), 0);
    assert_int_equal(a1.fleet_checks + a1.fleet_fallbacks, a0.fleet_checks + a0.fleet_fallbacks);
    assert_int_equal(a1.fleet_replays, a0.fleet_replays);
}

/* A dd client's 64-byte header plus an ECHO command and 16 bytes, on a new connection to
   port: 1 when the bytes come back through the fake DC (served), 0 when the fronting
   host's banner comes back (fronted), -1 otherwise. */
static int dd_try(uint16_t port, const uint8_t wire[64], const uint8_t key[32],
                  const uint8_t iv[16], const uint8_t rkey[32], const uint8_t riv[16])
{
    struct pctr enc, dec;
    uint8_t cmd[FAKEDC_CMD_LEN + 16], back[16];
    fakedc_cmd(cmd, "ECHO", 1, 0);
    memset(cmd + FAKEDC_CMD_LEN, 0x5a, 16);
    if (pctr_init(&enc, key, iv) != 0 || pctr_init(&dec, rkey, riv) != 0)
        return -1;
    uint8_t skip[64];
    pctr_apply(&enc, skip, sizeof skip); /* the header's own 64 bytes of keystream */
    pctr_apply(&enc, cmd, sizeof cmd);
    int fd = psock_connect(port, 10000), r = -1;
    if (fd >= 0 && psock_write_all(fd, wire, 64) == 0 &&
        psock_write_all(fd, cmd, sizeof cmd) == 0 && psock_read_all(fd, back, 5) == 0) {
        if (memcmp(back, PFRONT_BANNER, 5) == 0) {
            r = 0;
        } else if (psock_read_all(fd, back + 5, sizeof back - 5) == 0) {
            pctr_apply(&dec, back, sizeof back);
            r = back[0] == 0x5a && back[15] == 0x5a ? 1 : -1;
        }
    }
    if (fd >= 0)
        close(fd);
    pctr_cleanup(&enc);
    pctr_cleanup(&dec);
    return r;
}

/* The client -> proxy key and IV of an obfs2 header for a secret (brief 2.2: SHA-256 of
   bytes 8..40 and the secret; the IV is bytes 40..56). */
static void client_keyiv(const uint8_t wire[64], const uint8_t secret[16], uint8_t out[48])
{
    uint8_t in[48];
    unsigned n = 0;
    memcpy(in, wire + 8, 32);
    memcpy(in + 32, secret, 16);
    assert_int_equal(EVP_Digest(in, sizeof in, out, &n, EVP_sha256(), NULL), 1);
    memcpy(out + 32, wire + 40, 16);
}

/* The same across processes for a dd secret: the replay key is the obfs2 header's. */
static void test_dd_replay_across_processes_is_fronted(void **state)
{
    (void)state;
    int r = 0;
    for (int attempt = 0; attempt < 5 && r == 0; attempt++) {
        uint8_t wire[64], kiv[48], rkiv[48];
        struct pctr enc, dec;
        assert_int_equal(pobfs_client_header(wire, F.h.key, PTAG_PADDED, 2, &enc, &dec), 0);
        pctr_cleanup(&enc);
        pctr_cleanup(&dec);
        client_keyiv(wire, F.h.key, kiv);
        pobfs_reply_keyiv(wire, F.h.key, rkiv);
        struct stats a0, b0, a1, b1;
        assert_int_equal(pfleet_stats(&F, &a0, &b0), 0);
        assert_int_equal(dd_try(F.port_a, wire, kiv, kiv + 32, rkiv, rkiv + 32), 1);
        int got = dd_try(F.port_b, wire, kiv, kiv + 32, rkiv, rkiv + 32);
        assert_int_equal(pfleet_stats(&F, &a1, &b1), 0);
        if (got == 1) { /* served: only allowed when a check fell back */
            assert_true(a1.fleet_fallbacks > a0.fleet_fallbacks ||
                        b1.fleet_fallbacks > b0.fleet_fallbacks);
            continue;
        }
        assert_int_equal(got, 0);
        assert_int_equal(b1.fleet_replays, b0.fleet_replays + 1);
        r = 1;
    }
    assert_int_equal(r, 1);
}

int main(void)
{
    if (!tgtest_redis_available()) {
        fprintf(stderr, "redis-server not installed (make deps)\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_across_processes_is_fronted),
        cmocka_unit_test(test_new_hellos_and_relays_still_served),
        cmocka_unit_test(test_local_cache_in_front),
        cmocka_unit_test(test_dd_replay_across_processes_is_fronted),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
