/*
 * Per-secret limits ([limits.LABEL]) end to end: the engine in-process on 127.0.0.1 with a
 * fake DC and a recording fronting host (tests/support). A client over a limit must be
 * fronted (the fronting host sees its exact bytes), never closed or answered.
 */
#include "tgtest.h"

#include "core/alloc.h"
#include "core/str.h"
#include "proxy/engine/limits.h"
#include "proxy/config/quotafile.h"
#include "proxy_client.h"
#include "proxy_expect.h"
#include "proxy_harness.h"

#include <errno.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

static struct stats stats_of(struct pharness *h)
{
    struct stats st;
    server_stats(h->srv, &st);
    return st;
}

static void echo_ok_from(struct pharness *h, enum pcli_mode mode, const char *src_ip)
{
    struct pcli c;
    struct pcli_opts o = pharness_client(h, mode);
    o.src_ip = src_ip;
    assert_int_equal(pcli_connect(&c, h->port, &o), 0);
    assert_int_equal(pcli_echo(&c, 7, 5000, 0), 0);
    pcli_close(&c);
}

static void echo_ok(struct pharness *h, enum pcli_mode mode)
{
    echo_ok_from(h, mode, NULL);
}

/* An expired secret: a valid FakeTLS hello and a valid dd header are both fronted. */
static void test_expired_secret_fronted(void **state)
{
    (void)state;
    struct pharness h;
    int64_t now = (int64_t)time(NULL);
    struct pharness_opts o = {.ee = true, .dd = true, .limits.expires = now - 60};
    assert_int_equal(pharness_start(&h, &o), 0);
    uint8_t hello[600];
    size_t n = pcli_hello(hello, sizeof hello, h.key, PHARNESS_DOMAIN, now);
    pexpect_fronted(h.front, h.port, NULL, hello, n, 0);

    struct pcli c; /* dd: the 64-byte header goes to the site as it came */
    struct pcli_opts co = pharness_client(&h, PCLI_DD);
    assert_int_equal(pcli_connect(&c, h.port, &co), 0);
    assert_int_equal(pfront_wait(h.front, 1, 64, 10000), 0);
    pcli_close(&c);

    struct stats st = stats_of(&h);
    assert_int_equal(st.limit_expired, 2);
    assert_int_equal(st.handshake_ok, 0);
    assert_int_equal(fakedc_counters(h.dc).headers_ok, 0);
    pharness_stop(&h);
}

/* A secret expiring later works as usual. */
static void test_unexpired_secret_served(void **state)
{
    (void)state;
    struct pharness h;
    struct pharness_opts o = {.ee = true, .dd = true, .limits.expires = (int64_t)time(NULL) + 3600};
    assert_int_equal(pharness_start(&h, &o), 0);
    echo_ok(&h, PCLI_TLS);
    echo_ok(&h, PCLI_DD);
    assert_int_equal(stats_of(&h).limit_expired, 0);
    assert_int_equal(pfront_count(h.front), 0);
    pharness_stop(&h);
}

static bool closed_at_least(struct pharness *h, uint64_t n)
{
    return pharness_wait_stat(h->srv, PHARNESS_STAT(closed), n, 10000);
}

/* max-connections = 2: a third client is fronted while two are open; once one closes, a
   new client is served again. */
static void test_max_connections(void **state)
{
    (void)state;
    struct pharness h;
    struct pharness_opts o = {.limits.max_connections = 2};
    assert_int_equal(pharness_start(&h, &o), 0);
    struct pcli a, b;
    struct pcli_opts co = pharness_client(&h, PCLI_TLS);
    assert_int_equal(pcli_connect(&a, h.port, &co), 0);
    assert_int_equal(pcli_echo(&a, 1, 1000, 0), 0);
    assert_int_equal(pcli_connect(&b, h.port, &co), 0);
    assert_int_equal(pcli_echo(&b, 2, 1000, 0), 0);

    uint8_t hello[600];
    size_t n = pcli_hello(hello, sizeof hello, h.key, PHARNESS_DOMAIN, (int64_t)time(NULL));
    pexpect_fronted(h.front, h.port, NULL, hello, n, 0);
    assert_int_equal(stats_of(&h).limit_connections, 1);
    uint8_t ping[100], pong[100]; /* the open two are untouched: a still echoes */
    memset(ping, 0x42, sizeof ping);
    assert_int_equal(pcli_send(&a, ping, sizeof ping), 0);
    assert_int_equal(pcli_recv_all(&a, pong, sizeof pong), 0);
    assert_memory_equal(ping, pong, sizeof ping);

    pcli_close(&a);
    assert_true(closed_at_least(&h, 2)); /* the fronted one and a */
    struct pcli c;
    assert_int_equal(pcli_connect(&c, h.port, &co), 0);
    assert_int_equal(pcli_echo(&c, 4, 1000, 0), 0);
    pcli_close(&c);
    pcli_close(&b);
    assert_int_equal(stats_of(&h).limit_connections, 1);
    assert_int_equal(pfront_count(h.front), 1);
    pharness_stop(&h);
}

/* max-unique-ips = 2: clients from 127.0.0.2 and 127.0.0.3 are served, one from 127.0.0.4
   (a third address within the window) is fronted, and the first two are still served. */
static void test_max_unique_ips(void **state)
{
    (void)state;
    struct pharness h;
    struct pharness_opts o = {.ee = true, .dd = true, .limits.max_unique_ips = 2};
    assert_int_equal(pharness_start(&h, &o), 0);
    echo_ok_from(&h, PCLI_TLS, "127.0.0.2");
    echo_ok_from(&h, PCLI_DD, "127.0.0.3");
    echo_ok_from(&h, PCLI_TLS, "127.0.0.3");
    uint8_t hello[600];
    size_t n = pcli_hello(hello, sizeof hello, h.key, PHARNESS_DOMAIN, (int64_t)time(NULL));
    pexpect_fronted(h.front, h.port, "127.0.0.4", hello, n, 0);
    assert_int_equal(stats_of(&h).limit_unique_ips, 1);
    echo_ok_from(&h, PCLI_TLS, "127.0.0.2");
    echo_ok_from(&h, PCLI_TLS, "127.0.0.3");
    /* limits are per secret: "dd" has seen only 127.0.0.3, so 127.0.0.4 is its second */
    echo_ok_from(&h, PCLI_DD, "127.0.0.4");
    struct stats st = stats_of(&h);
    assert_int_equal(st.limit_unique_ips, 1);
    assert_int_equal(pfront_count(h.front), 1);
    pharness_stop(&h);
}

/* quota = 100000 bytes: a relay that goes past it is ended at the next fold (within a
   second), and the next handshake of the secret is fronted. */
static void test_quota(void **state)
{
    (void)state;
    struct pharness h;
    struct pharness_opts o = {.limits.quota = 100000};
    assert_int_equal(pharness_start(&h, &o), 0);
    struct pcli a;
    struct pcli_opts co = pharness_client(&h, PCLI_TLS);
    assert_int_equal(pcli_connect(&a, h.port, &co), 0);
    assert_int_equal(pcli_echo(&a, 1, 40000, 0), 0); /* ~80 KB both ways: under */
    uint8_t buf[30000];
    memset(buf, 0x17, sizeof buf);
    (void)pcli_send(&a, buf, sizeof buf); /* ~60 KB more: over; may race the fold */
    ssize_t r;
    while ((r = pcli_recv(&a, buf, sizeof buf)) > 0) /* bounded: the 10 s socket timeout */
        ;
    assert_true(r == 0 || r == -ECONNRESET); /* ended by the proxy, not timed out */
    pcli_close(&a);
    assert_true(closed_at_least(&h, 1));
    uint8_t hello[600];
    size_t n = pcli_hello(hello, sizeof hello, h.key, PHARNESS_DOMAIN, (int64_t)time(NULL));
    pexpect_fronted(h.front, h.port, NULL, hello, n, 0);
    struct stats st = stats_of(&h);
    assert_int_equal(st.limit_quota, 2); /* the relay ended, the handshake fronted */
    assert_true(st.bytes_up + st.bytes_down >= 100000);
    pharness_stop(&h);
}

/* Limits state for one secret with these limits (limits_new copies what it needs). */
static struct limits *one_secret(struct config_limits lim)
{
    struct config cfg;
    config_init(&cfg);
    struct secret sec = {.kind = SECRET_DD};
    char err[128];
    assert_int_equal(config_add_secret(&cfg, "s", &sec, err, sizeof err), 0);
    cfg.secrets[0].limits = lim;
    struct limits *l = limits_new(&cfg, NULL);
    config_cleanup(&cfg);
    assert_non_null(l);
    return l;
}

/* The address window, driven with explicit times (no waiting): an address counts while it
   has a connection open and for the window after its last open or close. */
static void test_unique_ips_window(void **state)
{
    (void)state;
    struct limits *l =
        one_secret((struct config_limits){.max_unique_ips = 1, .unique_ips_window_s = 10});
    uint8_t a[16] = {[10] = 0xff, [11] = 0xff, [12] = 127, [15] = 2}, b[16];
    memcpy(b, a, 16);
    b[15] = 3;
    uint32_t sa, sa2, sb;
    assert_int_equal(limits_admit(l, 0, a, 100, &sa), LIMITS_OK);
    assert_int_equal(limits_admit(l, 0, b, 5000, &sb), LIMITS_UNIQUE_IPS); /* a is open */
    assert_int_equal(limits_admit(l, 0, a, 5000, &sa2), LIMITS_OK);        /* same address */
    limits_release(l, 0, sa, 5001);
    limits_release(l, 0, sa2, 5005);
    assert_int_equal(limits_admit(l, 0, b, 5014, &sb), LIMITS_UNIQUE_IPS); /* a: 9 s ago */
    assert_int_equal(limits_admit(l, 0, b, 5015, &sb), LIMITS_OK);         /* a lapsed */
    assert_int_equal(limits_admit(l, 0, a, 5016, &sa), LIMITS_UNIQUE_IPS);
    assert_int_equal(limits_admit(l, 0, NULL, 5016, &sa), LIMITS_OK); /* unknown address */
    assert_int_equal(sa, LIMITS_NO_IP);
    limits_release(l, 0, sa, 5017);
    limits_release(l, 0, sb, 5017);
    limits_free(l);
}

/* A quota with a reset period, driven with explicit times. */
static void test_quota_reset_unit(void **state)
{
    (void)state;
    struct limits *l = one_secret((struct config_limits){.quota = 100, .quota_reset_s = 10});
    assert_true(limits_any_quota(l));
    uint32_t s1;
    assert_int_equal(limits_admit(l, 0, NULL, 1000, &s1), LIMITS_OK); /* period ends 1010 */
    assert_false(limits_charge(l, 0, 99, 1001));
    assert_true(limits_charge(l, 0, 1, 1002));
    limits_release(l, 0, s1, 1002);
    assert_int_equal(limits_admit(l, 0, NULL, 1009, &s1), LIMITS_QUOTA);
    assert_int_equal(limits_admit(l, 0, NULL, 1010, &s1), LIMITS_OK); /* a new period */
    assert_false(limits_charge(l, 0, 50, 1011));
    assert_true(limits_charge(l, 0, 500, 1012));
    limits_release(l, 0, s1, 1012);
    assert_int_equal(limits_admit(l, 0, NULL, 1045, &s1), LIMITS_OK); /* periods skipped */
    limits_release(l, 0, s1, 1045);
    assert_false(limits_charge(l, 7, 1000, 1045)); /* no such secret: no quota */
    limits_free(l);
    l = one_secret((struct config_limits){.quota = 10}); /* no reset: spent for good */
    assert_true(limits_charge(l, 0, 10, 1));
    assert_int_equal(limits_admit(l, 0, NULL, 1000000, &s1), LIMITS_QUOTA);
    limits_free(l);
    l = one_secret((struct config_limits){.max_connections = 5});
    assert_false(limits_any_quota(l));
    limits_free(l);
}

/* expires and max-connections with explicit times; indexes past the table are unlimited. */
static void test_admit_unit(void **state)
{
    (void)state;
    struct limits *l = one_secret((struct config_limits){.max_connections = 1, .expires = 1000});
    uint32_t s1, s2;
    assert_int_equal(limits_admit(l, 0, NULL, 999, &s1), LIMITS_OK);
    assert_int_equal(limits_admit(l, 0, NULL, 999, &s2), LIMITS_CONNECTIONS);
    limits_release(l, 0, s1, 999);
    assert_int_equal(limits_admit(l, 0, NULL, 999, &s1), LIMITS_OK);
    limits_release(l, 0, s1, 999);
    assert_int_equal(limits_admit(l, 0, NULL, 1000, &s1), LIMITS_EXPIRED);
    assert_int_equal(limits_admit(l, 7, NULL, 1000, &s1), LIMITS_OK);
    assert_string_equal(limits_verdict_name(LIMITS_UNIQUE_IPS), "max-unique-ips reached");
    limits_free(l);
}

/* Two generations (a reload): state follows the label, not the position, and the new
   settings apply while connections admitted under the old ones are still counted. */
static void test_state_follows_label(void **state)
{
    (void)state;
    struct config c1, c2;
    config_init(&c1);
    config_init(&c2);
    struct secret sec = {.kind = SECRET_DD};
    char err[128];
    assert_int_equal(config_add_secret(&c1, "x", &sec, err, sizeof err), 0);
    assert_int_equal(config_add_secret(&c1, "q", &sec, err, sizeof err), 0);
    c1.secrets[0].limits.max_connections = 2;
    c1.secrets[1].limits.quota = 1000;
    assert_int_equal(config_add_secret(&c2, "new", &sec, err, sizeof err), 0);
    assert_int_equal(config_add_secret(&c2, "q", &sec, err, sizeof err), 0);
    assert_int_equal(config_add_secret(&c2, "x", &sec, err, sizeof err), 0);
    c2.secrets[1].limits.quota = 1500;
    c2.secrets[2].limits.max_connections = 1;
    struct limits *l1 = limits_new(&c1, NULL);
    assert_non_null(l1);
    uint32_t s1, s2;
    assert_int_equal(limits_admit(l1, 0, NULL, 100, &s1), LIMITS_OK);
    assert_false(limits_charge(l1, 1, 900, 100));
    struct limits *l2 = limits_new(&c2, l1);
    assert_non_null(l2);
    /* "x" is secret 2 now: its open connection counts against the new max of 1 */
    assert_int_equal(limits_admit(l2, 2, NULL, 101, &s2), LIMITS_CONNECTIONS);
    limits_release(l1, 0, s1, 102); /* the old connection ends under its generation */
    limits_free(l1);
    assert_int_equal(limits_admit(l2, 2, NULL, 103, &s2), LIMITS_OK);
    limits_release(l2, 2, s2, 104);
    /* "q" keeps its 900 bytes, against the new quota of 1500 */
    assert_false(limits_charge(l2, 1, 500, 105));
    assert_true(limits_charge(l2, 1, 100, 106));
    assert_int_equal(limits_admit(l2, 0, NULL, 107, &s2), LIMITS_OK); /* "new": fresh */
    limits_release(l2, 0, s2, 108);
    limits_free(l2);
    config_cleanup(&c1);
    config_cleanup(&c2);
}

/* [limits] state-file: quota use survives a restart (written at stop, read at start); a
   file that does not parse is a warning and every quota starts from zero. */
static void start_engine(struct pharness *h)
{
    assert_int_equal(server_start(&h->cfg, &h->srv), 0);
    h->port = server_port(h->srv, 0);
}

static void relay_bytes(struct pharness *h, uint64_t n)
{
    struct pcli c;
    struct pcli_opts co = pharness_client(h, PCLI_TLS);
    assert_int_equal(pcli_connect(&c, h->port, &co), 0);
    assert_int_equal(pcli_echo(&c, 3, n, 0), 0);
    pcli_close(&c);
}

static void test_quota_state_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/tgproxy-quota-XXXXXX", path[64], err[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/quota", dir);
    struct pharness h;
    struct pharness_opts o = {.limits.quota = 150000, .limits.quota_reset_s = 3600};
    assert_int_equal(pharness_prepare(&h, &o), 0);
    tg__strlcpy(h.cfg.limits_state_file, path, sizeof h.cfg.limits_state_file);
    start_engine(&h);
    relay_bytes(&h, 40000); /* ~80 KB both ways: under */
    assert_true(closed_at_least(&h, 1));
    server_stop(h.srv); /* writes the file */
    struct quotafile_entry e[4];
    assert_int_equal(quotafile_load(path, e, 4, err, sizeof err), 1);
    assert_string_equal(e[0].label, "tls");
    assert_true(e[0].used >= 80000 && e[0].used < 150000);
    assert_true(e[0].period_end > (int64_t)time(NULL)); /* the hour started with the relay */

    /* a restart with a smaller quota: the ~80 KB already used are over it */
    for (size_t i = 0; i < h.cfg.nsecrets; i++)
        h.cfg.secrets[i].limits.quota = 70000;
    start_engine(&h);
    uint8_t hello[600];
    size_t n = pcli_hello(hello, sizeof hello, h.key, PHARNESS_DOMAIN, (int64_t)time(NULL));
    pexpect_fronted(h.front, h.port, NULL, hello, n, 0);
    assert_int_equal(stats_of(&h).limit_quota, 1);
    server_stop(h.srv);
    uint64_t used = e[0].used;
    assert_int_equal(quotafile_load(path, e, 4, err, sizeof err), 1);
    assert_true(e[0].used == used); /* kept as it was */

    FILE *f = fopen(path, "w"); /* damaged: start from zero, rewrite at stop */
    assert_non_null(f);
    fputs("# tgproxy quota state v1\ntls lots 0\n", f);
    fclose(f);
    start_engine(&h);
    relay_bytes(&h, 1000);
    assert_true(closed_at_least(&h, 1));
    server_stop(h.srv);
    assert_int_equal(quotafile_load(path, e, 4, err, sizeof err), 1);
    assert_true(e[0].used >= 2000 && e[0].used < 10000);
    char bad[80];
    snprintf(bad, sizeof bad, "%s.bad", path); /* the damaged file, kept aside */
    size_t blen = 0;
    char *btext = tgtest_read_file(bad, &blen);
    assert_non_null(btext);
    assert_non_null(strstr(btext, "tls lots 0"));
    free(btext);
    unlink(bad);

    /* a PERIOD_END more than one quota-reset ahead is damage too: restored as is, the
       80 KB would never reset */
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("# tgproxy quota state v1\ntls 80000 99999999999\n", f);
    fclose(f);
    start_engine(&h);
    relay_bytes(&h, 1000);
    assert_true(closed_at_least(&h, 1));
    pharness_stop(&h);
    assert_int_equal(quotafile_load(path, e, 4, err, sizeof err), 1);
    assert_true(e[0].used >= 2000 && e[0].used < 10000);
    assert_true(e[0].period_end <= (int64_t)time(NULL) + 3600);
    btext = tgtest_read_file(bad, &blen);
    assert_non_null(btext);
    assert_non_null(strstr(btext, "tls 80000 99999999999"));
    free(btext);
    unlink(bad);
    unlink(path);
    rmdir(dir);
}

/* A reload keeps what the limits counted: a connection open since before the reload still
   holds its max-connections slot under the new generation (lowered from 2 to 1). */
static void test_limits_across_reload(void **state)
{
    (void)state;
    struct pharness h;
    struct pharness_opts o = {.limits.max_connections = 2};
    assert_int_equal(pharness_start(&h, &o), 0);
    struct pcli a, c;
    struct pcli_opts co = pharness_client(&h, PCLI_TLS);
    assert_int_equal(pcli_connect(&a, h.port, &co), 0);
    assert_int_equal(pcli_echo(&a, 1, 1000, 0), 0);
    struct config cfg;
    char err[CONFIG_ERR_MAX];
    assert_int_equal(pharness_reload_base(&h, &cfg), 0);
    cfg.ndcs = h.cfg.ndcs; /* the same fake DC and site */
    cfg.fronting = h.cfg.fronting;
    struct config_dc *dcs = tg__calloc(cfg.ndcs, sizeof *dcs);
    assert_non_null(dcs);
    memcpy(dcs, h.cfg.dcs, cfg.ndcs * sizeof *dcs);
    cfg.dcs = dcs;
    for (size_t i = 0; i < cfg.nsecrets; i++)
        cfg.secrets[i].limits.max_connections = 1;
    assert_int_equal(server_reload(h.srv, &cfg, err, sizeof err), 0);
    config_cleanup(&cfg);
    uint8_t hello[600];
    size_t n = pcli_hello(hello, sizeof hello, h.key, PHARNESS_DOMAIN, (int64_t)time(NULL));
    pexpect_fronted(h.front, h.port, NULL, hello, n, 0); /* a is still counted */
    assert_int_equal(stats_of(&h).limit_connections, 1);
    pcli_close(&a);
    assert_true(closed_at_least(&h, 2));
    assert_int_equal(pcli_connect(&c, h.port, &co), 0); /* its slot is free again */
    assert_int_equal(pcli_echo(&c, 2, 1000, 0), 0);
    pcli_close(&c);
    pharness_stop(&h);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expired_secret_fronted),
        cmocka_unit_test(test_unexpired_secret_served),
        cmocka_unit_test(test_max_connections),
        cmocka_unit_test(test_max_unique_ips),
        cmocka_unit_test(test_unique_ips_window),
        cmocka_unit_test(test_admit_unit),
        cmocka_unit_test(test_quota),
        cmocka_unit_test(test_quota_reset_unit),
        cmocka_unit_test(test_state_follows_label),
        cmocka_unit_test(test_quota_state_file),
        cmocka_unit_test(test_limits_across_reload),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
