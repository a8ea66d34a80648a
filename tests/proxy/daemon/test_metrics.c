/*
 * Metrics export: the Prometheus page scraped during real relays (engine in-process, fake
 * DC, fronting stand-in) and parsed by an independent strict parser (python3
 * prometheus_client, tests/proxy/prom_scrape.py); statsd datagrams caught by a UDP socket.
 * Every number is compared with what the test itself did.
 */
#include "tgtest.h"

#include "proxy_client.h"
#include "proxy_expect.h"
#include "proxy_harness.h"
#include "proxy_proc.h"
#include "proxy_util.h"
#include "slowloris.h"
#include "proxy/daemon/metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SCRAPE_MAX 65536

/* Scrape the page with prom_scrape.py (which also holds every family to its row in
   docs/tgproxy.md); its canonical lines (with a leading "\n") in out. */
static void scrape_prefixed(const struct pharness *h, const char *prefix, char *out, size_t cap)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 %s/tests/proxy/prom_scrape.py http://127.0.0.1:%u/ %s "
             "%s/docs/tgproxy.md",
             TGKIT_SOURCE_DIR, (unsigned)server_metrics_port(h->srv), prefix, TGKIT_SOURCE_DIR);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    out[0] = '\n';
    size_t n = 1 + fread(out + 1, 1, cap - 2, p);
    out[n] = '\0';
    assert_int_equal(pclose(p), 0);
}

static void scrape(const struct pharness *h, char *out, size_t cap)
{
    scrape_prefixed(h, "tgproxy", out, cap);
}

/* A scrape into a fresh buffer (SCRAPE_MAX bytes) the caller frees. */
static char *scrape_page_prefixed(const struct pharness *h, const char *prefix)
{
    char *page = malloc(SCRAPE_MAX);
    assert_non_null(page);
    scrape_prefixed(h, prefix, page, SCRAPE_MAX);
    return page;
}

static char *scrape_page(const struct pharness *h)
{
    char *page = malloc(SCRAPE_MAX);
    assert_non_null(page);
    scrape(h, page, SCRAPE_MAX);
    return page;
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
    assert_true(pharness_wait_stat(h->srv, PHARNESS_STAT(handshake_bad), want, 10000));
    if (!close_first)
        close(fd);
}

/* A connection that fails the handshake and is fronted. */
static void fronted_once(const struct pharness *h)
{
    static const char http[] = "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n";
    pexpect_fronted(h->front, h->port, NULL, http, sizeof http - 1, PEXPECT_NEXT);
}

/* Values print as integers when whole, else shortest-exact; each reads back to itself. */
static void test_value_format(void **state)
{
    (void)state;
    static const struct {
        double v;
        const char *want;
    } cases[] = {
        {0, "0"},
        {-0.0, "0"},
        {7, "7"},
        {-3, "-3"},
        {1e6, "1000000"},
        {1e15, "1000000000000000"},
        {9007199254740993.0, "9007199254740992"},
        {0.007, "0.007"},
        {0.1 + 0.2, "0.30000000000000004"},
        {1.5e-7, "1.5e-07"},
        {2.5, "2.5"},
        {18446744073709551615.0, "1.8446744073709552e+19"},
        {5e-324, "5e-324"},
        {NAN, "NaN"},
        {INFINITY, "+Inf"},
        {-INFINITY, "-Inf"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[32];
        int n = metrics_format_value(cases[i].v, out, sizeof out);
        if (n <= 0 || (size_t)n >= sizeof out || strcmp(out, cases[i].want) != 0)
            fail_msg("%.17g printed as \"%s\", want \"%s\"", cases[i].v, out, cases[i].want);
        if (isfinite(cases[i].v) && strtod(out, NULL) != cases[i].v)
            fail_msg("\"%s\" does not read back as %.17g", out, cases[i].v);
    }
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
    assert_null(strstr(page, "secret=default"));   /* labels only, and only the configured ones */
    assert_null(strstr(page, "telegram_traffic")); /* mtg's names only with names = "mtg" */

    fronted_once(&h);
    fronted_once(&h);
    for (int i = 0; i < NTLS + NDD; i++)
        pcli_close(&c[i]);
    assert_true(pharness_wait_idle(h.srv, 10000));
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
    /* a FakeTLS client records its hello and its obfs2 header, a dd client its header; all
       within the window, so each is an entry now */
    assert_true(sample(page, "tgproxy_antireplay_inserts_total{}") == 2 * NTLS + NDD);
    assert_true(sample(page, "tgproxy_antireplay_entries{}") == 2 * NTLS + NDD);
    free(page);
    pharness_stop(&h);
}

/* names = "mtg" with metric-prefix = "mtg", as an mtg file plus that one key gives: mtg's
   families hold the same numbers as tgproxy's own, beside them, under mtg's names (each
   counter with and without _total); a dashboard's queries find data. */
static void test_mtg_names(void **state)
{
    (void)state;
    struct pharness h;
    assert_int_equal(
        pharness_prepare(&h, &(struct pharness_opts){.ee = true, .dd = true, .prometheus = true}),
        0);
    h.cfg.prometheus.mtg_names = true;
    snprintf(h.cfg.prometheus.prefix, sizeof h.cfg.prometheus.prefix, "mtg");
    assert_int_equal(server_start(&h.cfg, &h.srv), 0);
    h.port = server_port(h.srv, 0);
    enum { NTLS = 2, NDD = 1 };
    struct pcli c[NTLS + NDD];
    for (int i = 0; i < NTLS + NDD; i++) {
        struct pcli_opts o = pharness_client(&h, i < NTLS ? PCLI_TLS : PCLI_DD);
        assert_int_equal(pcli_connect(&c[i], h.port, &o), 0);
        assert_int_equal(pcli_echo(&c[i], (uint32_t)i, 20000, 0), 0);
    }
    /* and one fronted connection, held open: it has read the site's banner */
    static const char http[] = "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n";
    int front = psock_connect(h.port, 10000);
    assert_true(front >= 0);
    assert_int_equal(psock_write_all(front, http, sizeof http - 1), 0);
    char banner[sizeof PFRONT_BANNER - 1];
    assert_int_equal(psock_read_all(front, banner, sizeof banner), 0);
    char *page = scrape_page_prefixed(&h, "mtg"); /* three relays open, one fronted */
    assert_true(sample(page, "mtg_client_connections{}") == NTLS + NDD + 1);
    assert_true(sample(page, "mtg_telegram_connections{}") == NTLS + NDD);
    assert_true(sample(page, "mtg_domain_fronting_connections{}") == 1);
    assert_true(sample(page, "mtg_client_connections_active{}") == NTLS + NDD + 1); /* ours */
    assert_true(sample(page, "mtg_fronted_connections_active{}") == 1);
    free(page);
    close(front);

    fronted_once(&h);
    fronted_once(&h);
    for (int i = 0; i < NTLS + NDD; i++)
        pcli_close(&c[i]);
    assert_true(pharness_wait_idle(h.srv, 10000));
    page = scrape_page_prefixed(&h, "mtg");
    assert_true(sample(page, "mtg_client_connections{}") == 0);
    assert_true(sample(page, "mtg_telegram_connections{}") == 0);
    assert_true(sample(page, "mtg_domain_fronting_connections{}") == 0);
    double ours_down =
        sample(page, "mtg_secret_traffic_bytes_total{direction=to_client,secret=tls}") +
        sample(page, "mtg_secret_traffic_bytes_total{direction=to_client,secret=dd}");
    double ours_up =
        sample(page, "mtg_secret_traffic_bytes_total{direction=to_upstream,secret=tls}") +
        sample(page, "mtg_secret_traffic_bytes_total{direction=to_upstream,secret=dd}");
    assert_true(ours_down >= (NTLS + NDD) * 20000.0);
    /* prom_scrape's parser reads a bare counter name as name_total, as OpenMetrics does */
    assert_true(sample(page, "mtg_telegram_traffic_total{direction=to_client}") == ours_down);
    assert_true(sample(page, "mtg_telegram_traffic_total{direction=from_client}") == ours_up);
    double all_up = sample(page, "mtg_traffic_bytes_total{direction=to_upstream}");
    double all_down = sample(page, "mtg_traffic_bytes_total{direction=to_client}");
    double front_up = sample(page, "mtg_domain_fronting_traffic_total{direction=from_client}");
    double front_down = sample(page, "mtg_domain_fronting_traffic_total{direction=to_client}");
    assert_true(front_up > 0 && front_down >= 3.0 * (sizeof PFRONT_BANNER - 1));
    assert_true(front_up + ours_up == all_up); /* every relayed byte is one or the other */
    assert_true(front_down + ours_down == all_down);
    assert_true(sample(page, "mtg_domain_fronting_total{}") == 3);
    assert_true(sample(page, "mtg_fronted_connections_total{}") == 3);
    assert_true(sample(page, "mtg_concurrency_limited_total{}") == 0);
    assert_true(sample(page, "mtg_replay_attacks_total{}") == 0);
    assert_true(sample(page, "mtg_ip_blocklisted_total{ip_list=blocklist}") == 0);
    assert_true(sample(page, "mtg_iplist_size{ip_list=allowlist}") == 0);
    free(page);

    /* The page itself: mtg's classic spelling (no _total) and OpenMetrics' one, each a
       counter family of its own with HELP and TYPE. */
    tg__buf b;
    tg__buf_init(&b, 1u << 20);
    assert_int_equal(metrics_render(h.srv, "mtg", &b), 0);
    const char *text = tg__buf_cstr(&b);
    char want[128];
    snprintf(want, sizeof want, "\nmtg_telegram_traffic{direction=\"to_client\"} %.0f\n",
             ours_down);
    assert_non_null(strstr(text, want));
    snprintf(want, sizeof want, "\nmtg_telegram_traffic_total{direction=\"to_client\"} %.0f\n",
             ours_down);
    assert_non_null(strstr(text, want));
    assert_non_null(strstr(text, "\n# TYPE mtg_telegram_traffic counter\n"));
    assert_non_null(strstr(text, "\n# TYPE mtg_telegram_traffic_total counter\n"));
    assert_non_null(
        strstr(text, "\n# TYPE mtg_client_connections gauge\nmtg_client_connections 0\n"));
    assert_null(strstr(text, "mtg_client_connections_total_total"));
    tg__buf_cleanup(&b);
    pharness_stop(&h);
}

struct active_arg {
    struct server *srv;
    uint64_t want;
};

static bool active_is(void *arg)
{
    struct active_arg *a = arg;
    struct stats st;
    server_stats(a->srv, &st);
    return st.active == a->want;
}

/* The page answers while the process holds more than FD_SETSIZE (1024) descriptors: 540
   half-open clients (one byte of an obfuscated2 header, then silence) are 1080 here, both ends of
   each in this process, so the scrape's socket is numbered above 1024, which select()
   cannot watch (libmicrohttpd then drops the connection: no answer). */
static void test_scrape_past_fd_setsize(void **state)
{
    (void)state;
    enum { NHALF = 540 };
    tgtest_nofile_at_least(4096);
    struct pharness h;
    /* dd alone, no fronting host: each client holds its one socket, the proxy waits for
       the rest of its 64-byte header */
    assert_int_equal(pharness_start(&h, &(struct pharness_opts){.dd = true,
                                                                .no_front = true,
                                                                .prometheus = true,
                                                                .handshake_ms = 120000}),
                     0);
    static int fd[NHALF];
    for (int i = 0; i < NHALF; i++) {
        fd[i] = psock_connect(h.port, 5000);
        assert_true(fd[i] >= 0);
        assert_int_equal(psock_write_all(fd[i], "\xef", 1), 0);
    }
    struct active_arg a = {h.srv, NHALF};
    assert_true(tgtest_wait_until(active_is, &a, 10000));
    int probe = dup(0);
    assert_true(probe > 1024); /* the next socket too */
    close(probe);
    char *page = scrape_page(&h);
    double active = sample(page, "tgproxy_client_connections_active{}");
    if (active != NHALF)
        fail_msg("%g connections active, want %d", active, NHALF);
    free(page);
    for (int i = 0; i < NHALF; i++)
        close(fd[i]);
    pharness_stop(&h);
}

/* Slow scrapers cannot hold the page: 9 addresses trickle a request on 8 connections each
   (72, more than the 64 the page once served in all), a 9th from each is closed at accept
   (8 per address), and a scrape from 127.0.0.1 is answered while all 72 are held. */
static void test_slow_scrapers(void **state)
{
    (void)state;
    tgtest_nofile_at_least(8192); /* the page's share: 1/32 of the limit, here its cap of 256 */
    struct pharness h;
    assert_int_equal(pharness_start(&h, &(struct pharness_opts){.prometheus = true}), 0);
    uint16_t port = server_metrics_port(h.srv);
    static struct slow s;
    memset(&s, 0, sizeof s);
    for (int i = 2; i <= 10; i++) {
        char ip[16];
        snprintf(ip, sizeof ip, "127.0.0.%d", i);
        slow_open(&s, ip, port, 8);
        if (!slow_refused(ip, port))
            fail_msg("a 9th connection from %s was kept", ip);
    }
    char *page = scrape_page(&h);
    assert_true(sample(page, "tgproxy_client_connections_active{}") == 0);
    free(page);
    assert_int_equal(slow_round(&s, 0), 0); /* the 72 were still held */
    slow_close(&s);
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
    assert_true(pharness_wait_stat(h.srv, PHARNESS_STAT(handshake_bad), ++k, 10000));
    bad_handshake(&h, hello, n, false, ++k); /* replay */
    /* a valid hello answered, then bytes that are no TLS record */
    n = pcli_hello(hello, sizeof hello, h.key, PHARNESS_DOMAIN, now);
    fd = psock_connect(h.port, 10000);
    assert_int_equal(psock_write_all(fd, hello, n), 0);
    assert_int_equal(psock_read_all(fd, hdr, sizeof hdr), 0);
    assert_int_equal(psock_write_all(fd, http, sizeof http - 1), 0);
    assert_true(pharness_wait_stat(h.srv, PHARNESS_STAT(handshake_bad), ++k, 10000));
    close(fd);
    struct pcli c;
    struct pcli_opts o = pharness_client(&h, PCLI_TLS);
    assert_int_equal(pcli_connect(&c, h.port, &o), 0);
    assert_int_equal(pcli_echo(&c, 1, 1000, 0), 0); /* one ok, relayed */
    pcli_close(&c);
    assert_true(pharness_wait_idle(h.srv, 10000));

    char *page = scrape_page(&h);
    static const struct {
        const char *outcome;
        double n;
    } want[] = {{"bad_digest", 1}, {"stale", 1},  {"wrong_sni", 1}, {"not_tls", 1},
                {"bad_obfs2", 1},  {"closed", 2}, {"replay", 1},    {"bad_flight", 1}};
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
    /* the replay added no entry: every recorded handshake is one */
    assert_true(sample(page, "tgproxy_antireplay_entries{}") ==
                sample(page, "tgproxy_antireplay_inserts_total{}"));
    free(page);
    pharness_stop(&h);
}

/* A secret at its max-connections: the next client is fronted, and the page counts the
   hit for the limit, for the secret's label and as the handshake's outcome. */
static void test_limit_hits(void **state)
{
    (void)state;
    struct pharness h;
    assert_int_equal(pharness_start(&h, &(struct pharness_opts){.ee = true,
                                                                .dd = true,
                                                                .prometheus = true,
                                                                .limits = {.max_connections = 1}}),
                     0);
    struct pcli held;
    struct pcli_opts o = pharness_client(&h, PCLI_DD);
    assert_int_equal(pcli_connect(&held, h.port, &o), 0);
    assert_int_equal(pcli_echo(&held, 1, 1000, 0), 0); /* relayed, and stays open */
    struct pcli c;
    assert_int_equal(pcli_connect(&c, h.port, &o), 0); /* the proxy fronts it */
    assert_true(pharness_wait_stat(h.srv, PHARNESS_STAT(hs_limit), 1, 10000));
    pcli_close(&c);
    pcli_close(&held);
    assert_true(pharness_wait_idle(h.srv, 10000));
    char *page = scrape_page(&h);
    assert_true(sample(page, "tgproxy_limits_hit_total{limit=max_connections}") == 1);
    assert_true(sample(page, "tgproxy_secret_limits_hit_total{secret=dd}") == 1);
    assert_true(sample(page, "tgproxy_secret_limits_hit_total{secret=tls}") == 0);
    assert_true(sample(page, "tgproxy_handshakes_total{outcome=limit}") == 1);
    assert_true(sample(page, "tgproxy_secret_connections_total{secret=dd}") == 1);
    free(page);
    pharness_stop(&h);
}

/* A port on 127.0.0.1 that refuses connections, held (psock_refusing) until the next call
   or the end of the process, so no other test on the machine can take it meanwhile. */
static uint16_t closed_port(void)
{
    static int held = -1;
    uint16_t port = 0;
    if (held >= 0)
        close(held);
    held = psock_refusing(&port);
    assert_true(held >= 0);
    return port;
}

/* n FakeTLS clients to DC dc, each echoing 1000 bytes through the fake DC. */
static void relays_to(struct pharness *h, int16_t dc, int n)
{
    for (int i = 0; i < n; i++) {
        struct pcli c;
        struct pcli_opts o = pharness_client(h, PCLI_TLS);
        o.dc = dc;
        assert_int_equal(pcli_connect(&c, h->port, &o), 0);
        assert_int_equal(pcli_echo(&c, (uint32_t)i, 1000, 0), 0);
        pcli_close(&c);
    }
}

/* One client to DC dc whose connect fails: wait until the engine counted failure want. */
static void failed_dc_connect(struct pharness *h, int16_t dc, uint64_t want)
{
    struct pcli c;
    struct pcli_opts o = pharness_client(h, PCLI_TLS);
    o.dc = dc;
    assert_int_equal(pcli_connect(&c, h->port, &o), 0); /* the proxy closes it afterwards */
    assert_true(pharness_wait_stat(h->srv, PHARNESS_STAT(dc_connect_fail), want, 10000));
    pcli_close(&c);
}

/* DC dc's connect-time histogram on the page: buckets in increasing le, cumulative, +Inf
   equal to _count (prom_scrape.py checks the same, independently). Returns _count. */
static double dc_histogram(const char *page, const char *dc)
{
    static const char *const le[] = {"0.001", "0.002", "0.005", "0.01", "0.025", "0.05", "0.1",
                                     "0.25",  "0.5",   "1",     "2.5",  "5",     "10",   "+Inf"};
    char key[128];
    double prev = 0;
    for (size_t i = 0; i < sizeof le / sizeof le[0]; i++) {
        snprintf(key, sizeof key, "tgproxy_dc_connect_duration_seconds_bucket{dc=%s,le=%s}", dc,
                 le[i]);
        double v = sample(page, key);
        if (v < prev)
            fail_msg("%s = %g, below the bucket before (%g)", key, v, prev);
        prev = v;
    }
    snprintf(key, sizeof key, "tgproxy_dc_connect_duration_seconds_count{dc=%s}", dc);
    assert_true(sample(page, key) == prev);
    snprintf(key, sizeof key, "tgproxy_dc_connect_duration_seconds_sum{dc=%s}", dc);
    double sum = sample(page, key);
    assert_true(sum >= 0 && sum <= prev * 10); /* none took longer than the connect timeout */
    return prev;
}

/* Sum of every dc_connect_failures_total sample; the one for dc and reason in *one. */
static double dc_failures(const char *page, const char *dc, const char *reason, double *one)
{
    double total = 0;
    char key[128];
    snprintf(key, sizeof key, "\ntgproxy_dc_connect_failures_total{dc=%s,reason=%s} ", dc, reason);
    *one = -1;
    for (const char *p = strstr(page, "\ntgproxy_dc_connect_failures_total{"); p;
         p = strstr(p + 1, "\ntgproxy_dc_connect_failures_total{")) {
        double v = strtod(strchr(p + 1, ' ') + 1, NULL);
        total += v;
        if (strncmp(p, key, strlen(key)) == 0)
            *one = v;
    }
    return total;
}

/* A proxy whose DC 5 refuses (a closed port), through SOCKS5 upstream proxy_url if not
   NULL: n2 relays to DC 2, n4 to DC -4, one connect to DC 5 that fails; then the page
   (malloc'ed, the caller frees it and stops h). */
static char *dc_run(struct pharness *h, const char *proxy_url, int n2, int n4)
{
    char addr[32];
    snprintf(addr, sizeof addr, "127.0.0.1:%u", (unsigned)closed_port());
    assert_int_equal(pharness_start(h, &(struct pharness_opts){.prometheus = true,
                                                               .extra_dc = 5,
                                                               .extra_dc_addr = addr,
                                                               .proxies = {proxy_url}}),
                     0);
    relays_to(h, 2, n2);
    relays_to(h, -4, n4);
    failed_dc_connect(h, 5, 1);
    assert_true(pharness_wait_idle(h->srv, 10000));
    return scrape_page(h);
}

/* Real relays to DCs 2 and -4 (a media DC: counted under 4) and a DC whose address refuses:
   the histograms count every connect under its DC, the refusal is a failure of DC 5 for
   reason "refused", and nothing else moved. */
static void test_dc_connect_metrics(void **state)
{
    (void)state;
    struct pharness h;
    char *page = dc_run(&h, NULL, 3, 2);
    assert_true(dc_histogram(page, "2") == 3);
    assert_true(dc_histogram(page, "4") == 2);
    static const char *const none[] = {"1", "3", "5", "203", "other"};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++)
        assert_true(dc_histogram(page, none[i]) == 0);
    assert_null(strstr(page, "dc=10001")); /* the test DCs only with test-dcs */
    assert_null(strstr(page, "dc=-4"));
    double refused = 0;
    assert_true(dc_failures(page, "5", "refused", &refused) == 1);
    assert_true(refused == 1);
    assert_true(sample(page, "tgproxy_connection_ends_total{reason=dc_fail}") == 1);
    free(page);
    pharness_stop(&h);
}

/* The same through Debian's microsocks as the [network] proxies upstream (a SOCKS5 server
   that is not ours): connects count once negotiated, and the upstream's failure reply for
   the refusing DC is "upstream_refused". */
static void test_dc_connect_metrics_socks5(void **state)
{
    (void)state;
    struct pproc ms;
    int started = pproc_microsocks_start(&ms, NULL, NULL);
    if (started == -ENOENT)
        fail_msg("/usr/bin/microsocks is missing: it is in the Makefile's PKGS_BUILD (make deps)");
    assert_int_equal(started, 0);
    char url[64];
    snprintf(url, sizeof url, "socks5://127.0.0.1:%u", (unsigned)ms.port);
    struct pharness h;
    char *page = dc_run(&h, url, 2, 1);
    assert_true(dc_histogram(page, "2") == 2);
    assert_true(dc_histogram(page, "4") == 1);
    assert_true(dc_histogram(page, "5") == 0);
    double n = 0;
    assert_true(dc_failures(page, "5", "upstream_refused", &n) == 1);
    assert_true(n == 1);
    free(page);
    pharness_stop(&h);
    pproc_stop(&ms);
}

/* Read datagrams on fd until each line of want[0..n) has been seen (at most 2 s per
   datagram, at most 200 datagrams: 20 s of 100 ms flushes). */
static bool statsd_wait(int fd, const char *const *want, size_t n)
{
    char d[2048];
    bool seen[4] = {false};
    size_t left = n;
    for (int i = 0; i < 200 && left; i++) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 2000) <= 0)
            return false;
        ssize_t got = recv(fd, d + 1, sizeof d - 2, 0);
        if (got <= 0)
            return false;
        d[0] = '\n'; /* lines start after a newline, the first one too */
        d[got + 1] = '\0';
        for (size_t k = 0; k < n; k++)
            if (!seen[k] && strstr(d, want[k])) {
                seen[k] = true;
                left--;
            }
    }
    return left == 0;
}

static int udp_listener(uint16_t *port)
{
    int fd = psock_udp_bind(port);
    assert_true(fd >= 0);
    return fd;
}

/* One dd relay (to DC 2) of 4321 bytes each way; then the three lines of want arrive:
   the connection, the bytes, and the DC connect-time histogram's count. */
/* Start h pushing to statsd on port every 100 ms in tag format tags, then one dd relay
   (to DC 2) of 4321 bytes each way, closed. */
static void statsd_relay(struct pharness *h, uint16_t port, int tags)
{
    assert_int_equal(pharness_start(h, &(struct pharness_opts){.dd = true,
                                                               .statsd_port = port,
                                                               .statsd_flush_ms = 100,
                                                               .statsd_tags = tags}),
                     0);
    struct pcli c;
    struct pcli_opts o = pharness_client(h, PCLI_DD);
    assert_int_equal(pcli_connect(&c, h->port, &o), 0);
    assert_int_equal(pcli_echo(&c, 3, 4321, 0), 0);
    pcli_close(&c);
    assert_true(pharness_wait_idle(h->srv, 10000));
}

static void statsd_case(int tags, const char *const want[3])
{
    uint16_t port = 0;
    int fd = udp_listener(&port);
    struct pharness h;
    statsd_relay(&h, port, tags);
    assert_true(statsd_wait(fd, want, 3));
    pharness_stop(&h);
    close(fd);
}

static void test_statsd_datadog(void **state)
{
    (void)state;
    static const char *const want[3] = {
        "\ntgproxy.secret_connections_total:1|c|#secret:dd\n",
        "\ntgproxy.secret_traffic_bytes_total:4321|c|#secret:dd,direction:to_client\n",
        "\ntgproxy.dc_connect_duration_seconds_count:1|c|#dc:2\n"};
    statsd_case(CONFIG_TAGS_DATADOG, want);
}

static void test_statsd_influxdb(void **state)
{
    (void)state;
    static const char *const want[3] = {
        "\ntgproxy.secret_connections_total,secret=dd:1|c\n",
        "\ntgproxy.secret_traffic_bytes_total,secret=dd,direction=to_client:4321|c\n",
        "\ntgproxy.dc_connect_duration_seconds_count,dc=2:1|c\n"};
    statsd_case(CONFIG_TAGS_INFLUXDB, want);
}

static void test_statsd_graphite(void **state)
{
    (void)state;
    static const char *const want[3] = {
        "\ntgproxy.secret_connections_total;secret=dd:1|c\n",
        "\ntgproxy.secret_traffic_bytes_total;secret=dd;direction=to_client:4321|c\n",
        "\ntgproxy.dc_connect_duration_seconds_count;dc=2:1|c\n"};
    statsd_case(CONFIG_TAGS_GRAPHITE, want);
}

/* A config for h's server with h's secrets plus one more label, on bind-to `listen`. */
static void reload_cfg(const struct pharness *h, struct config *cfg, const char *listen)
{
    char err[CONFIG_ERR_MAX];
    assert_int_equal(pharness_reload_base(h, cfg), 0);
    cfg->nlisten = 0; /* then this listener instead */
    assert_int_equal(config_add_listen(cfg, listen, strlen(listen), err, sizeof err), 0);
    assert_int_equal(config_add_secret(cfg, "added", &h->cfg.secrets[0].secret, err, sizeof err),
                     0);
}

/* Reload rows: a refused reload, then an applied one that adds a label; the per-secret
   series of the old labels continue. */
static void test_reload_metrics(void **state)
{
    (void)state;
    struct pharness h;
    assert_int_equal(pharness_start(&h, &(struct pharness_opts){.ee = true, .prometheus = true}),
                     0);
    struct pcli c;
    struct pcli_opts o = pharness_client(&h, PCLI_TLS);
    assert_int_equal(pcli_connect(&c, h.port, &o), 0);
    assert_int_equal(pcli_echo(&c, 1, 1000, 0), 0);
    pcli_close(&c);
    char *page = malloc(SCRAPE_MAX);
    assert_non_null(page);
    scrape(&h, page, SCRAPE_MAX);
    assert_true(sample(page, "tgproxy_config_reloads_total{result=ok}") == 0);
    assert_true(sample(page, "tgproxy_config_reloads_total{result=failed}") == 0);
    assert_true(sample(page, "tgproxy_config_last_reload_successful{}") == 1);
    double started = sample(page, "tgproxy_config_last_reload_success_timestamp_seconds{}");
    assert_true(started == sample(page, "tgproxy_start_time_seconds{}"));

    struct config cfg;
    char err[CONFIG_ERR_MAX];
    reload_cfg(&h, &cfg, "127.0.0.1:1"); /* another listener: refused */
    assert_int_equal(server_reload(h.srv, &cfg, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "bind-to"));
    config_cleanup(&cfg);
    scrape(&h, page, SCRAPE_MAX);
    assert_true(sample(page, "tgproxy_config_reloads_total{result=failed}") == 1);
    assert_true(sample(page, "tgproxy_config_last_reload_successful{}") == 0);
    assert_null(strstr(page, "secret=added"));

    reload_cfg(&h, &cfg, h.cfg.listen[0].text);
    assert_int_equal(server_reload(h.srv, &cfg, err, sizeof err), 0);
    assert_int_equal(cfg.nsecrets, 0); /* moved into the server */
    config_cleanup(&cfg);
    scrape(&h, page, SCRAPE_MAX);
    assert_true(sample(page, "tgproxy_config_reloads_total{result=ok}") == 1);
    assert_true(sample(page, "tgproxy_config_last_reload_successful{}") == 1);
    assert_true(sample(page, "tgproxy_config_last_reload_success_timestamp_seconds{}") >= started);
    assert_true(sample(page, "tgproxy_secret_connections_total{secret=tls}") == 1);
    assert_true(sample(page, "tgproxy_secret_connections_total{secret=added}") == 0);
    free(page);
    pharness_stop(&h);
}

/* Counter sums from statsd datagrams: each line c|c|#tags" adds delta to the
   series "name|#tags". */
struct csums {
    char key[64][160];
    double sum[64];
    size_t n;
};

static void csums_add(struct csums *cs, const char *d)
{
    for (const char *l = d; *l;) {
        size_t len = strcspn(l, "\n");
        const char *colon = memchr(l, ':', len), *bar = memchr(l, '|', len);
        if (colon && bar && bar[1] == 'c') {
            char key[160];
            snprintf(key, sizeof key, "%.*s%.*s", (int)(colon - l), l,
                     (int)(len - (size_t)(bar + 2 - l)), bar + 2);
            size_t i = 0;
            while (i < cs->n && strcmp(cs->key[i], key) != 0)
                i++;
            assert_true(i < 64);
            if (i == cs->n)
                snprintf(cs->key[cs->n++], sizeof cs->key[0], "%s", key);
            cs->sum[i] += strtod(colon + 1, NULL);
        }
        l += len + (l[len] == '\n');
    }
}

static double csum(const struct csums *cs, const char *key)
{
    for (size_t i = 0; i < cs->n; i++)
        if (strcmp(cs->key[i], key) == 0)
            return cs->sum[i];
    return 0;
}

/* Datagrams on fd into cs until one holds line (at most 200 of 2 s each); true if seen. */
static bool csums_until(struct csums *cs, int fd, const char *line)
{
    char d[2048];
    for (int i = 0; i < 200; i++) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 2000) != 1)
            return false;
        ssize_t got = recv(fd, d, sizeof d - 1, 0);
        if (got <= 0)
            return false;
        d[got] = '\0';
        csums_add(cs, d);
        if (strstr(d, line))
            return true;
    }
    return false;
}

/* statsd across a reload that adds a label (which moves every sample after the per-secret
   ones in the walk): every counter's differences, summed from the first flush to the last
   one at stop, are exactly what the engine counted; none is sent twice or taken from
   another series. */
static void test_statsd_across_reload(void **state)
{
    (void)state;
    uint16_t port = 0;
    int fd = udp_listener(&port);
    struct pharness h;
    statsd_relay(&h, port, CONFIG_TAGS_DATADOG);
    struct csums *cs = calloc(1, sizeof *cs);
    assert_non_null(cs);
    assert_true(
        csums_until(cs, fd, "secret_traffic_bytes_total:4321|c|#secret:dd,direction:to_client"));
    struct config cfg;
    char err[CONFIG_ERR_MAX];
    reload_cfg(&h, &cfg, h.cfg.listen[0].text);
    cfg.statsd = h.cfg.statsd;
    assert_int_equal(server_reload(h.srv, &cfg, err, sizeof err), 0);
    config_cleanup(&cfg);
    assert_true(csums_until(cs, fd, "config_reloads_total:1|c|#result:ok"));
    assert_true(csums_until(cs, fd, "tgproxy.start_time_seconds:")); /* one whole flush more */
    pharness_stop(&h); /* the last flush is in fd's queue when this returns (loopback) */
    char d[2048];
    for (ssize_t got; (got = recv(fd, d, sizeof d - 1, MSG_DONTWAIT)) > 0;) {
        d[got] = '\0';
        csums_add(cs, d);
    }
    close(fd);
    for (size_t i = 0; i < cs->n; i++)
        if (cs->sum[i] < 0)
            fail_msg("%s summed to %g", cs->key[i], cs->sum[i]);
    assert_true(csum(cs, "tgproxy.secret_traffic_bytes_total|#secret:dd,direction:to_client") ==
                4321);
    assert_true(csum(cs, "tgproxy.secret_connections_total|#secret:dd") == 1);
    assert_true(csum(cs, "tgproxy.handshakes_total|#outcome:ok") == 1);
    assert_true(csum(cs, "tgproxy.config_reloads_total|#result:ok") == 1);
    assert_true(csum(cs, "tgproxy.connection_ends_total|#reason:eof") +
                    csum(cs, "tgproxy.connection_ends_total|#reason:reset") ==
                1);
    free(cs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_value_format),
        cmocka_unit_test(test_prometheus_during_relays),
        cmocka_unit_test(test_scrape_past_fd_setsize),
        cmocka_unit_test(test_slow_scrapers),
        cmocka_unit_test(test_mtg_names),
        cmocka_unit_test(test_reload_metrics),
        cmocka_unit_test(test_handshake_outcomes),
        cmocka_unit_test(test_limit_hits),
        cmocka_unit_test(test_dc_connect_metrics),
        cmocka_unit_test(test_dc_connect_metrics_socks5),
        cmocka_unit_test(test_statsd_datadog),
        cmocka_unit_test(test_statsd_influxdb),
        cmocka_unit_test(test_statsd_graphite),
        cmocka_unit_test(test_statsd_across_reload),
    };
    return cmocka_run_group_tests(tests, 0, 0);
}
