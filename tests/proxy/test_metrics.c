/*
 * Metrics export: the Prometheus page scraped during real relays (engine in-process, fake
 * DC, fronting stand-in) and parsed by an independent strict parser (python3
 * prometheus_client, tests/proxy/prom_scrape.py); statsd datagrams caught by a UDP socket.
 * Every number is compared with what the test itself did.
 */
#include "tgtest.h"

#include "proxy_client.h"
#include "proxy_harness.h"
#include "proxy_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SCRAPE_MAX 65536

/* Scrape the page with prom_scrape.py; its canonical lines (with a leading "\n") in out. */
static void scrape(const struct pharness *h, char *out, size_t cap)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 %s/tests/proxy/prom_scrape.py http://127.0.0.1:%u/ tgproxy",
             TGKIT_SOURCE_DIR, (unsigned)server_metrics_port(h->srv));
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    out[0] = '\n';
    size_t n = 1 + fread(out + 1, 1, cap - 2, p);
    out[n] = '\0';
    assert_int_equal(pclose(p), 0);
}

/* Value of the sample "name{labels}" (labels sorted, as prom_scrape prints); fails if absent. */
static double sample(const char *page, const char *key)
{
    char pat[256];
    snprintf(pat, sizeof pat, "\n%s ", key);
    const char *at = strstr(page, pat);
    if (!at)
        fail_msg("no sample %s in the scrape", key);
    return strtod(at + strlen(pat), NULL);
}

static bool no_active(void *arg)
{
    struct stats st;
    server_stats(arg, &st);
    return st.active == 0;
}

static bool wait_idle(struct server *s)
{
    for (int t = 0; t < 10000; t += 5) {
        if (no_active(s))
            return true;
        struct timespec ts = {.tv_nsec = 5000000L};
        nanosleep(&ts, NULL);
    }
    return no_active(s);
}

/* Wait (bounded: 10 s) until the engine's counter at field index i reaches want. */
static bool wait_stat(struct server *s, size_t i, uint64_t want)
{
    struct stats st;
    for (int t = 0; t < 2000; t++) {
        server_stats(s, &st);
        if (stats_value(&st, i) >= want)
            return true;
        struct timespec ts = {.tv_nsec = 5000000L};
        nanosleep(&ts, NULL);
    }
    return false;
}
#define STAT_INDEX(field) (offsetof(struct stats, field) / sizeof(uint64_t))

/* Send n bytes as a new client, then wait until the engine has counted the handshake as
   failed number want (the client may close first: close_first). */
static void bad_handshake(struct pharness *h, const void *p, size_t n, bool close_first,
                          uint64_t want)
{
    int fd = psock_connect(h->port, 10000);
    assert_true(fd >= 0);
    assert_int_equal(psock_write_all(fd, p, n), 0);
    if (close_first)
        close(fd);
    assert_true(wait_stat(h->srv, STAT_INDEX(handshake_bad), want));
    if (!close_first)
        close(fd);
}

/* A connection that fails the handshake and is fronted: read the stand-in's banner. */
static void fronted_once(const struct pharness *h)
{
    static const char http[] = "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n";
    int fd = psock_connect(h->port, 10000);
    assert_true(fd >= 0);
    assert_int_equal(psock_write_all(fd, http, sizeof http - 1), 0);
    char banner[sizeof PFRONT_BANNER - 1];
    assert_int_equal(psock_read_all(fd, banner, sizeof banner), 0);
    close(fd);
}

static void test_prometheus_during_relays(void **state)
{
    (void)state;
    struct pharness h;
    assert_int_equal(
        pharness_start(&h, &(struct pharness_opts){.ee = true, .dd = true, .prometheus = true}), 0);
    assert_true(server_metrics_port(h.srv) != 0);
    enum { NTLS = 3, NDD = 2 };
    struct pcli c[NTLS + NDD];
    uint64_t tls_bytes = 0, dd_bytes = 0;
    for (int i = 0; i < NTLS + NDD; i++) {
        struct pcli_opts o = pharness_client(&h, i < NTLS ? PCLI_TLS : PCLI_DD);
        uint64_t n = 10000 + 1000 * (uint64_t)i;
        assert_int_equal(pcli_connect(&c[i], h.port, &o), 0);
        assert_int_equal(pcli_echo(&c[i], (uint32_t)i, n, 0), 0);
        *(i < NTLS ? &tls_bytes : &dd_bytes) += n;
    }
    char *page = malloc(SCRAPE_MAX);
    assert_non_null(page);
    scrape(&h, page, SCRAPE_MAX); /* five relays open */
    assert_true(sample(page, "tgproxy_client_connections_active{}") == NTLS + NDD);
    assert_true(sample(page, "tgproxy_secret_connections_active{secret=tls}") == NTLS);
    assert_true(sample(page, "tgproxy_secret_connections_active{secret=dd}") == NDD);
    assert_true(sample(page, "tgproxy_handshakes_total{outcome=ok}") == NTLS + NDD);
    assert_true(sample(page, "tgproxy_worker_connections_active{worker=0}") +
                    sample(page, "tgproxy_worker_connections_active{worker=1}") ==
                NTLS + NDD);
    assert_true(sample(page, "tgproxy_build_info{version=" TGKIT_VERSION_STRING "}") == 1);
    assert_true(sample(page, "tgproxy_start_time_seconds{}") > 1.7e9);
    assert_null(strstr(page, "secret=default")); /* labels only, and only the configured ones */

    fronted_once(&h);
    fronted_once(&h);
    for (int i = 0; i < NTLS + NDD; i++)
        pcli_close(&c[i]);
    assert_true(wait_idle(h.srv));
    scrape(&h, page, SCRAPE_MAX);
    assert_true(sample(page, "tgproxy_client_connections_total{}") == NTLS + NDD + 2);
    assert_true(sample(page, "tgproxy_client_connections_active{}") == 0);
    assert_true(sample(page, "tgproxy_fronted_connections_total{}") == 2);
    assert_true(sample(page, "tgproxy_secret_connections_total{secret=tls}") == NTLS);
    assert_true(sample(page, "tgproxy_secret_connections_total{secret=dd}") == NDD);
    assert_true(sample(page, "tgproxy_secret_connections_active{secret=tls}") == 0);
    /* dd: an unframed stream, so the echo comes back byte for byte */
    assert_true(sample(page, "tgproxy_secret_traffic_bytes_total{direction=to_client,secret=dd}") ==
                (double)dd_bytes);
    double up = sample(page, "tgproxy_secret_traffic_bytes_total{direction=to_upstream,secret=dd}");
    /* up: the echo command and the transport's frame headers ride along (bounded) */
    assert_true(up >= (double)(dd_bytes + NDD * FAKEDC_CMD_LEN) &&
                up <= (double)dd_bytes * 1.05 + 1000);
    /* FakeTLS adds record headers both ways: at least the payload, at most 1% more */
    double tdown =
        sample(page, "tgproxy_secret_traffic_bytes_total{direction=to_client,secret=tls}");
    assert_true(tdown >= (double)tls_bytes && tdown <= (double)tls_bytes * 1.01 + 1000);
    assert_true(sample(page, "tgproxy_connection_ends_total{reason=eof}") +
                    sample(page, "tgproxy_connection_ends_total{reason=reset}") ==
                NTLS + NDD + 2);
    assert_true(sample(page, "tgproxy_antireplay_inserts_total{}") >= NTLS + NDD);
    free(page);
    pharness_stop(&h);
}

/* Real bad handshakes, one of each kind the engine tells apart, then a scrape: each is
   counted under its own outcome, and "bad" as a whole is gone. */
static void test_handshake_outcomes(void **state)
{
    (void)state;
    struct pharness h;
    assert_int_equal(
        pharness_start(&h, &(struct pharness_opts){.ee = true, .dd = true, .prometheus = true}), 0);
    uint8_t hello[600], wrong[16], obfs[64];
    memset(wrong, 0x5a, sizeof wrong);
    memset(obfs, 0x42, sizeof obfs); /* a possible obfs2 header, under no dd secret */
    int64_t now = (int64_t)time(NULL);
    uint64_t k = 0;
    size_t n = pcli_hello(hello, sizeof hello, wrong, PHARNESS_DOMAIN, now);
    bad_handshake(&h, hello, n, false, ++k); /* bad digest: another secret */
    n = pcli_hello(hello, sizeof hello, h.key, PHARNESS_DOMAIN, now - 3600);
    bad_handshake(&h, hello, n, false, ++k); /* stale */
    n = pcli_hello(hello, sizeof hello, h.key, "other.example.org", now);
    bad_handshake(&h, hello, n, false, ++k); /* wrong SNI */
    static const char http[] = "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n";
    bad_handshake(&h, http, sizeof http - 1, false, ++k); /* not TLS */
    bad_handshake(&h, obfs, sizeof obfs, false, ++k);     /* obfs2 header, unknown secret */
    bad_handshake(&h, "\x16\x03\x01", 3, true, ++k);      /* closed mid-hello */
    /* a valid hello is answered once; the same bytes again are a replay */
    n = pcli_hello(hello, sizeof hello, h.key, PHARNESS_DOMAIN, now);
    int fd = psock_connect(h.port, 10000);
    uint8_t hdr[5];
    assert_int_equal(psock_write_all(fd, hello, n), 0);
    assert_int_equal(psock_read_all(fd, hdr, sizeof hdr), 0);
    assert_int_equal(hdr[0], 0x16); /* the ServerHello */
    close(fd);                      /* closed before its first record: closed too */
    assert_true(wait_stat(h.srv, STAT_INDEX(handshake_bad), ++k));
    bad_handshake(&h, hello, n, false, ++k); /* replay */
    struct pcli c;
    struct pcli_opts o = pharness_client(&h, PCLI_TLS);
    assert_int_equal(pcli_connect(&c, h.port, &o), 0);
    assert_int_equal(pcli_echo(&c, 1, 1000, 0), 0); /* one ok, relayed */
    pcli_close(&c);
    assert_true(wait_idle(h.srv));

    char *page = malloc(SCRAPE_MAX);
    assert_non_null(page);
    scrape(&h, page, SCRAPE_MAX);
    static const struct {
        const char *outcome;
        double n;
    } want[] = {{"bad_digest", 1}, {"stale", 1},  {"wrong_sni", 1}, {"not_tls", 1},
                {"bad_obfs2", 1},  {"closed", 2}, {"replay", 1}};
    double bad = 0;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char key[96];
        snprintf(key, sizeof key, "tgproxy_handshakes_total{outcome=%s}", want[i].outcome);
        if (sample(page, key) != want[i].n)
            fail_msg("%s = %g, want %g", key, sample(page, key), want[i].n);
        bad += sample(page, key);
    }
    assert_true(bad == (double)k);
    assert_true(sample(page, "tgproxy_handshakes_total{outcome=ok}") == 1);
    assert_true(sample(page, "tgproxy_handshakes_total{outcome=bad_hello}") == 0);
    assert_true(sample(page, "tgproxy_handshakes_total{outcome=limit}") == 0);
    assert_true(sample(page, "tgproxy_handshakes_total{outcome=timeout}") == 0);
    assert_null(strstr(page, "outcome=bad}"));
    assert_true(sample(page, "tgproxy_antireplay_hits_total{}") == 1);
    free(page);
    pharness_stop(&h);
}

/* Read datagrams on fd until each of the two lines has been seen (at most 2 s per datagram,
   at most 200 datagrams: 20 s of 100 ms flushes). */
static bool statsd_wait(int fd, const char *a, const char *b)
{
    char d[2048];
    bool seen_a = false, seen_b = false;
    for (int i = 0; i < 200 && !(seen_a && seen_b); i++) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 2000) <= 0)
            return false;
        ssize_t n = recv(fd, d + 1, sizeof d - 2, 0);
        if (n <= 0)
            return false;
        d[0] = '\n'; /* lines start after a newline, the first one too */
        d[n + 1] = '\0';
        seen_a = seen_a || strstr(d, a);
        seen_b = seen_b || strstr(d, b);
    }
    return seen_a && seen_b;
}

static int udp_listener(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* One dd relay of 4321 bytes each way; then the lines want_conns and want_bytes arrive. */
static void statsd_case(int tags, const char *want_conns, const char *want_bytes)
{
    uint16_t port = 0;
    int fd = udp_listener(&port);
    struct pharness h;
    assert_int_equal(pharness_start(&h, &(struct pharness_opts){.dd = true,
                                                                .statsd_port = port,
                                                                .statsd_flush_ms = 100,
                                                                .statsd_tags = tags}),
                     0);
    struct pcli c;
    struct pcli_opts o = pharness_client(&h, PCLI_DD);
    assert_int_equal(pcli_connect(&c, h.port, &o), 0);
    assert_int_equal(pcli_echo(&c, 3, 4321, 0), 0);
    pcli_close(&c);
    assert_true(wait_idle(h.srv));
    assert_true(statsd_wait(fd, want_conns, want_bytes));
    pharness_stop(&h);
    close(fd);
}

static void test_statsd_datadog(void **state)
{
    (void)state;
    statsd_case(CONFIG_TAGS_DATADOG, "\ntgproxy.secret_connections_total:1|c|#secret:dd\n",
                "\ntgproxy.secret_traffic_bytes_total:4321|c|#secret:dd,direction:to_client\n");
}

static void test_statsd_influxdb(void **state)
{
    (void)state;
    statsd_case(CONFIG_TAGS_INFLUXDB, "\ntgproxy.secret_connections_total,secret=dd:1|c\n",
                "\ntgproxy.secret_traffic_bytes_total,secret=dd,direction=to_client:4321|c\n");
}

static void test_statsd_graphite(void **state)
{
    (void)state;
    statsd_case(CONFIG_TAGS_GRAPHITE, "\ntgproxy.secret_connections_total;secret=dd:1|c\n",
                "\ntgproxy.secret_traffic_bytes_total;secret=dd;direction=to_client:4321|c\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prometheus_during_relays), cmocka_unit_test(test_handshake_outcomes),
        cmocka_unit_test(test_statsd_datadog),           cmocka_unit_test(test_statsd_influxdb),
        cmocka_unit_test(test_statsd_graphite),
    };
    return cmocka_run_group_tests(tests, 0, 0);
}
