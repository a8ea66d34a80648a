/*
 * Integration tests of SOCKS5 upstream chaining ([network] proxies, src/proxy/engine/chain.c): the
 * engine in-process, DC connections through tests/support/socks5_server (ours: wrong
 * password, refused CONNECT, a server that hangs mid-negotiation, failover and round-robin)
 * and through Debian's microsocks (not ours), started on 127.0.0.1 on a free port.
 */
#include "tgtest.h"

#include "proxy_client.h"
#include "proxy_harness.h"
#include "proxy_proc.h"
#include "socks5_server.h"

#include "core/log.h"
#include "proxy/wire/value.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

/* Log lines of the engine, captured to check what a failure says (and never says). */
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_text[16384];

static void log_capture(void *user, int level, const char *msg)
{
    (void)user;
    (void)level;
    pthread_mutex_lock(&log_mu);
    size_t used = strlen(log_text);
    snprintf(log_text + used, sizeof log_text - used, "%s\n", msg);
    pthread_mutex_unlock(&log_mu);
}

/* Start capturing (before any engine thread runs). */
static void log_start(void)
{
    log_text[0] = '\0';
    tg__log_default()->sink = log_capture;
}

/* Stop capturing (after the engine stopped); whether the text has needle. */
static bool log_has(const char *needle)
{
    pthread_mutex_lock(&log_mu);
    bool has = strstr(log_text, needle) != NULL;
    pthread_mutex_unlock(&log_mu);
    return has;
}

static void log_stop(void)
{
    tg__log_default()->sink = NULL;
}

static void url_of(char *out, size_t cap, const char *userinfo, uint16_t port)
{
    snprintf(out, cap, "socks5://%s%s127.0.0.1:%u", userinfo ? userinfo : "", userinfo ? "@" : "",
             (unsigned)port);
}

/* A test SOCKS5 server in mode m, and its URL (no user info) in url. */
static socks5_server *start_socks(socks5_mode m, char *url, size_t cap)
{
    socks5_server *s = socks5_server_start(m);
    assert_non_null(s);
    url_of(url, cap, NULL, socks5_server_port(s));
    return s;
}

/* One client through the proxy to the fake DC: echo n bytes. 0 or -1. */
static int echo_once(struct pharness *h, uint64_t n)
{
    struct pcli c;
    struct pcli_opts o = pharness_client(h, PCLI_TLS);
    o.timeout_ms = 10000;
    if (pcli_connect(&c, h->port, &o) != 0)
        return -1;
    int rc = pcli_echo(&c, 11, n, 0);
    pcli_close(&c);
    return rc == 0 ? 0 : -1;
}

static void test_chain_no_auth(void **state)
{
    (void)state;
    char url[128];
    socks5_server *s = start_socks(SOCKS5_NORMAL, url, sizeof url);
    struct pharness h;
    assert_int_equal(pharness_start(&h, &(struct pharness_opts){.proxies = {url}}), 0);
    assert_int_equal(echo_once(&h, 200000), 0);
    socks5_record r;
    assert_int_equal(socks5_server_nrecords(s), 1);
    assert_true(socks5_server_record(s, 0, &r));
    assert_int_equal(r.cmd, SOCKS5_CMD_CONNECT);
    assert_int_equal(r.atyp, SOCKS5_ATYP_IPV4);
    assert_string_equal(r.host, "127.0.0.1");
    assert_int_equal(r.port, h.dc_port);
    assert_int_equal(r.reply, SOCKS5_REP_OK);
    assert_true(r.bytes_up >= 200000 && r.bytes_down >= 200000);
    assert_int_equal(fakedc_counters(h.dc).headers_ok, 1);
    /* The fronting connection goes direct: a probe reaches the site, not the upstream. */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                             .sin_port = htons(h.port)};
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    static const char probe[] = "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n";
    assert_int_equal(send(fd, probe, sizeof probe - 1, MSG_NOSIGNAL), (ssize_t)sizeof probe - 1);
    assert_int_equal(pfront_wait(h.front, 0, sizeof probe - 1, 10000), 0);
    close(fd);
    assert_int_equal(socks5_server_connections(s), 1);
    pharness_stop(&h);
    socks5_server_stop(s);
}

static void test_chain_auth_and_wrong_password(void **state)
{
    (void)state;
    socks5_server *s = socks5_server_start(SOCKS5_NORMAL);
    assert_non_null(s);
    socks5_server_require_auth(s, "us@r", "pa:ss");
    char good[160], bad[160];
    url_of(good, sizeof good, "us%40r:pa%3Ass", socks5_server_port(s));
    url_of(bad, sizeof bad, "us%40r:wrong", socks5_server_port(s));
    struct pharness h;
    assert_int_equal(pharness_start(&h, &(struct pharness_opts){.proxies = {good}}), 0);
    assert_int_equal(echo_once(&h, 50000), 0);
    assert_int_equal(socks5_server_auth_failures(s), 0);
    pharness_stop(&h);

    log_start();
    assert_int_equal(pharness_start(&h, &(struct pharness_opts){.proxies = {bad}}), 0);
    assert_int_equal(echo_once(&h, 1000), -1);
    assert_int_equal(socks5_server_auth_failures(s), 1);
    assert_int_equal(fakedc_counters(h.dc).accepted, 0);
    pharness_stop(&h);
    log_stop();
    assert_true(log_has("refused the user name or password"));
    assert_false(log_has("wrong"));
    assert_false(log_has("us%40r") || log_has("us@r"));
    socks5_server_stop(s);
}

static void test_chain_refused_and_failover(void **state)
{
    (void)state;
    char u_no[128], u_yes[128];
    socks5_server *no = start_socks(SOCKS5_REFUSE_CONNECT, u_no, sizeof u_no);
    socks5_server *yes = start_socks(SOCKS5_NORMAL, u_yes, sizeof u_yes);
    struct pharness h;
    /* Only a refusing upstream: the connection ends, the DC never sees it. */
    assert_int_equal(pharness_start(&h, &(struct pharness_opts){.proxies = {u_no}}), 0);
    log_start();
    assert_int_equal(echo_once(&h, 1000), -1);
    socks5_record r;
    assert_true(socks5_server_record(no, 0, &r));
    assert_int_equal(r.reply, SOCKS5_REP_REFUSED);
    assert_int_equal(fakedc_counters(h.dc).accepted, 0);
    pharness_stop(&h);
    log_stop();
    assert_true(log_has("CONNECT failed: connection refused (reply 5)"));
    /* Refusing first, working second, one worker: round-robin starts alternate, and every
       connection fails over to the working one. */
    size_t before = socks5_server_nrecords(no);
    assert_int_equal(
        pharness_start(&h, &(struct pharness_opts){.workers = 1, .proxies = {u_no, u_yes}}), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(echo_once(&h, 5000), 0);
    assert_int_equal(socks5_server_nrecords(yes), 4);
    assert_int_equal(socks5_server_nrecords(no) - before, 2);
    assert_int_equal(fakedc_counters(h.dc).headers_ok, 4);
    pharness_stop(&h);
    socks5_server_stop(no);
    socks5_server_stop(yes);
}

static void test_chain_hang_bounded_by_tcp_timeout(void **state)
{
    (void)state;
    char u_hang[128], u_yes[128];
    socks5_server *hang = start_socks(SOCKS5_HANG_AFTER_REQUEST, u_hang, sizeof u_hang);
    socks5_server *yes = start_socks(SOCKS5_NORMAL, u_yes, sizeof u_yes);
    struct pharness h;
    assert_int_equal(
        pharness_start(
            &h, &(struct pharness_opts){.workers = 1, .tcp_ms = 300, .proxies = {u_hang, u_yes}}),
        0);
    /* The first connection starts at the hanging upstream: after tcp (300 ms) it moves on. */
    assert_int_equal(echo_once(&h, 5000), 0);
    assert_int_equal(socks5_server_nrecords(hang), 1);
    assert_int_equal(socks5_server_nrecords(yes), 1);
    pharness_stop(&h);
    /* Only the hanging one: the client's connection ends instead of waiting forever. */
    log_start();
    assert_int_equal(
        pharness_start(&h, &(struct pharness_opts){.tcp_ms = 300, .proxies = {u_hang}}), 0);
    assert_int_equal(echo_once(&h, 1000), -1);
    assert_int_equal(fakedc_counters(h.dc).accepted, 0);
    pharness_stop(&h);
    log_stop();
    assert_true(log_has("no SOCKS5 answer within [network.timeout] tcp"));
    socks5_server_stop(hang);
    socks5_server_stop(yes);
}

static void test_chain_microsocks(void **state)
{
    (void)state;
    struct pproc ms;
    int started = pproc_microsocks_start(&ms, "chain", "s3cret");
    if (started == -ENOENT)
        fail_msg("/usr/bin/microsocks is missing: it is in the Makefile's PKGS_BUILD (make deps)");
    assert_int_equal(started, 0);
    char good[128], bad[128];
    url_of(good, sizeof good, "chain:s3cret", ms.port);
    url_of(bad, sizeof bad, "chain:nope", ms.port);
    struct pharness h;
    int rc = pharness_start(&h, &(struct pharness_opts){.proxies = {good}});
    int ok = rc == 0 ? echo_once(&h, 300000) : -2;
    int hdrs = rc == 0 ? (int)fakedc_counters(h.dc).headers_ok : -1;
    pharness_stop(&h);
    rc = pharness_start(&h, &(struct pharness_opts){.proxies = {bad}});
    int refused = rc == 0 ? echo_once(&h, 1000) : -2;
    int accepted = rc == 0 ? (int)fakedc_counters(h.dc).accepted : -1;
    pharness_stop(&h);
    pproc_stop(&ms);
    assert_int_equal(ok, 0);
    assert_int_equal(hdrs, 1);
    assert_int_equal(refused, -1);
    assert_int_equal(accepted, 0);
}

/* IPv6 end to end: the DC listens on [::1] only, the upstream is microsocks on [::1], so the
   relay works only if tgproxy reaches the upstream over IPv6 and asks it for an IPv6
   CONNECT (RFC 1928 ATYP 4). */
static void test_chain_ipv6_microsocks(void **state)
{
    (void)state;
    struct pproc ms;
    int started = pproc_microsocks_start_on(&ms, "::1", "six", "s3cret");
    if (started == -ENOENT)
        fail_msg("/usr/bin/microsocks is missing: it is in the Makefile's PKGS_BUILD (make deps)");
    assert_int_equal(started, 0);
    uint16_t dc_port = 0;
    struct fakedc *dc = fakedc_start6(&dc_port);
    assert_non_null(dc);
    char url[128], dc_addr[64];
    snprintf(url, sizeof url, "socks5://six:s3cret@[::1]:%u", (unsigned)ms.port);
    snprintf(dc_addr, sizeof dc_addr, "[::1]:%u", (unsigned)dc_port);
    struct pharness h;
    int rc = pharness_prepare(&h, &(struct pharness_opts){.no_fakedc = true, .proxies = {url}});
    if (rc == 0) { /* [dcs] default = the IPv6 DC */
        struct value_hostport *hp = &h.cfg.dcs[0].addrs[0];
        rc = value_hostport_parse(dc_addr, strlen(dc_addr), hp, NULL, 0);
    }
    if (rc == 0 && (rc = server_start(&h.cfg, &h.srv)) == 0)
        h.port = server_port(h.srv, 0);
    int ok = rc == 0 ? echo_once(&h, 300000) : -2;
    pharness_stop(&h);
    pproc_stop(&ms);
    int hdrs = (int)fakedc_counters(dc).headers_ok;
    fakedc_stop(dc);
    assert_int_equal(rc, 0);
    assert_int_equal(ok, 0);
    assert_int_equal(hdrs, 1);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_no_auth),
        cmocka_unit_test(test_chain_auth_and_wrong_password),
        cmocka_unit_test(test_chain_refused_and_failover),
        cmocka_unit_test(test_chain_hang_bounded_by_tcp_timeout),
        cmocka_unit_test(test_chain_microsocks),
        cmocka_unit_test(test_chain_ipv6_microsocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
