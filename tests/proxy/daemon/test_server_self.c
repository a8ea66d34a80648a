/*
 * Fronting never loops onto the proxy itself, and never refuses a site that is not the
 * proxy (issue 10): the self-address set (src/proxy/engine/selfaddr.c) from a synthetic interface
 * list, then the engine with wildcard, IPv6, dual-stack and specific listeners beside a
 * real site on another loopback address at the same port (SO_REUSEPORT), a fronting name
 * whose addresses include the proxy itself, prefer-ip for the fronting host, and a
 * v4-mapped address of the proxy refused without a chain of self-connections; the host's
 * own addresses (selfaddr_local).
 */
#include "tgtest.h"

#include "proxy/config/config.h"
#include "proxy/engine/selfaddr.h"
#include "proxy/daemon/server.h"
#include "proxy/engine/upstream.h"
#include "proxy_probe.h"
#include "proxy_util.h"
#include "proxy_site.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <openssl/rand.h>
#include <time.h>
#include <unistd.h>

/* ---- the set, from a synthetic interface list ---- */

static struct sockaddr_storage sa(const char *ip, uint16_t port)
{
    struct sockaddr_storage ss;
    socklen_t len;
    assert_int_equal(psock_addr_parse(ip, port, &ss, &len), 0);
    return ss;
}

/* lo 127.0.0.1 and ::1, eth0 192.0.2.2 and fd00::2, and an entry without an address. */
static struct ifaddrs *fake_ifaddrs(struct ifaddrs nodes[5], struct sockaddr_storage addrs[4])
{
    static const char *const ips[] = {"127.0.0.1", "::1", "192.0.2.2", "fd00::2"};
    memset(nodes, 0, 5 * sizeof nodes[0]);
    for (int i = 0; i < 4; i++) {
        addrs[i] = sa(ips[i], 0);
        nodes[i].ifa_addr = (struct sockaddr *)&addrs[i];
        nodes[i].ifa_next = &nodes[i + 1];
    }
    return nodes;
}

static bool has(const struct selfaddr *s, const char *ip, uint16_t port)
{
    struct sockaddr_storage ss = sa(ip, port);
    return selfaddr_has(s, (const struct sockaddr *)&ss);
}

static void build(struct selfaddr *s, const char *const *listen, size_t n)
{
    struct ifaddrs nodes[5];
    struct sockaddr_storage addrs[4], ls[4];
    for (size_t i = 0; i < n; i++)
        ls[i] = sa(listen[i], 443);
    assert_int_equal(selfaddr_build(s, ls, n, fake_ifaddrs(nodes, addrs)), 0);
}

static void test_set_wildcard_v4(void **state)
{
    (void)state;
    struct selfaddr s;
    static const char *const l[] = {"0.0.0.0"};
    build(&s, l, 1);
    assert_true(has(&s, "127.0.0.1", 443));
    assert_true(has(&s, "192.0.2.2", 443));
    assert_true(has(&s, "0.0.0.0", 443));
    assert_true(has(&s, "::ffff:127.0.0.1", 443)); /* v4-mapped: the IPv4 listener */
    assert_true(has(&s, "::ffff:192.0.2.2", 443));
    assert_false(has(&s, "127.0.0.2", 443)); /* not an address of the host */
    assert_false(has(&s, "198.51.100.7", 443));
    assert_false(has(&s, "127.0.0.1", 444));
    assert_false(has(&s, "::1", 443)); /* no IPv6 listener */
    selfaddr_cleanup(&s);
}

static void test_set_wildcard_v6_and_dual(void **state)
{
    (void)state;
    struct selfaddr s;
    static const char *const v6[] = {"::"};
    build(&s, v6, 1);
    assert_true(has(&s, "::1", 443));
    assert_true(has(&s, "fd00::2", 443));
    assert_false(has(&s, "fd00::3", 443));
    assert_false(has(&s, "127.0.0.1", 443)); /* IPv6 listeners are V6ONLY */
    assert_false(has(&s, "::ffff:127.0.0.1", 443));
    selfaddr_cleanup(&s);
    static const char *const dual[] = {"0.0.0.0", "::"};
    build(&s, dual, 2);
    assert_true(has(&s, "127.0.0.1", 443));
    assert_true(has(&s, "::1", 443));
    assert_true(has(&s, "::ffff:192.0.2.2", 443));
    assert_false(has(&s, "127.0.0.2", 443));
    assert_false(has(&s, "2001:db8::1", 443));
    selfaddr_cleanup(&s);
}

static void test_set_specific(void **state)
{
    (void)state;
    struct selfaddr s;
    static const char *const l[] = {"127.0.0.1"};
    build(&s, l, 1);
    assert_true(has(&s, "127.0.0.1", 443));
    assert_true(has(&s, "::ffff:127.0.0.1", 443));
    assert_false(has(&s, "192.0.2.2", 443)); /* the listener is not on that address */
    assert_false(has(&s, "127.0.0.2", 443));
    selfaddr_cleanup(&s);
    struct sockaddr_storage m = sa("::ffff:10.1.2.3", 80);
    socklen_t len = sizeof(struct sockaddr_in6);
    selfaddr_normalize(&m, &len);
    assert_int_equal(m.ss_family, AF_INET);
    assert_int_equal(len, sizeof(struct sockaddr_in));
    assert_int_equal(ntohs(((struct sockaddr_in *)(void *)&m)->sin_port), 80);
}

static bool local(const struct selfaddr *s, const char *ip)
{
    struct sockaddr_storage ss = sa(ip, 1234);
    return selfaddr_local(s, (const struct sockaddr *)&ss);
}

/* The host's own addresses, whatever the port and whatever the listeners: the interface
   list's, loopback and the unspecified address; nothing else (a DC there is connected to
   without waiting for epoll, upstream.c). */
static void test_set_local(void **state)
{
    (void)state;
    struct selfaddr s;
    static const char *const l[] = {"127.0.0.1"}; /* a specific listener: no wildcard */
    build(&s, l, 1);
    assert_true(local(&s, "192.0.2.2"));
    assert_true(local(&s, "fd00::2"));
    assert_true(local(&s, "::ffff:192.0.2.2"));
    assert_true(local(&s, "127.0.0.1"));
    assert_true(local(&s, "127.3.2.1")); /* all of 127/8 is this host's */
    assert_true(local(&s, "::1"));
    assert_true(local(&s, "::ffff:127.0.0.1"));
    assert_true(local(&s, "0.0.0.0"));
    assert_true(local(&s, "::"));
    assert_false(local(&s, "192.0.2.3"));
    assert_false(local(&s, "149.154.167.51")); /* a real DC */
    assert_false(local(&s, "2001:b28:f23d:f001::a"));
    assert_false(local(&s, "fd00::3"));
    assert_false(local(&s, "128.0.0.1"));
    selfaddr_cleanup(&s);
    /* without an interface list (getifaddrs failed): loopback still is */
    struct sockaddr_storage ls = sa("0.0.0.0", 443);
    assert_int_equal(selfaddr_build(&s, &ls, 1, NULL), 0);
    assert_true(local(&s, "127.0.0.1"));
    assert_true(local(&s, "::1"));
    assert_false(local(&s, "192.0.2.2"));
    selfaddr_cleanup(&s);
    assert_true(local(NULL, "127.0.0.1"));
    assert_false(local(NULL, "192.0.2.2"));
}

/* ---- the engine ---- */

#define PROBE "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"

struct rig {
    struct config cfg;
    struct server *srv;
    struct psite *site, *site2;
    uint16_t port;
};

static bool have_ipv6(void)
{
    uint16_t port = 0;
    struct psite *s = psite_start(&(struct psite_opts){.addr = "::1"}, &port);
    psite_stop(s);
    return s != NULL;
}

/* tgproxy on every listen address at port, one ee secret, fronting to front:port (an IP
   literal, or a name through the resolver hook), a short handshake deadline. */
static int rig_start(struct rig *r, const char *const *listen, size_t n, const char *front,
                     enum config_prefer_ip prefer)
{
    struct config *cfg = &r->cfg;
    config_init(cfg);
    cfg->tls_front.enabled = false; /* no probes to the stand-in front */
    char err[256], text[80];
    for (size_t i = 0; i < n; i++) {
        snprintf(text, sizeof text, strchr(listen[i], ':') ? "[%s]:%u" : "%s:%u", listen[i],
                 (unsigned)r->port);
        assert_int_equal(config_add_listen(cfg, text, strlen(text), err, sizeof err), 0);
    }
    struct secret sec = {.kind = SECRET_EE, .domain = "example.com", .domain_len = 11};
    assert_int_equal(RAND_bytes(sec.key, 16), 1);
    assert_int_equal(config_add_secret(cfg, "tls", &sec, err, sizeof err), 0);
    struct value_hostport hp;
    snprintf(text, sizeof text, strchr(front, ':') ? "[%s]:%u" : "%s:%u", front, (unsigned)r->port);
    assert_int_equal(value_hostport_parse(text, strlen(text), &hp, err, sizeof err), 0);
    memcpy(cfg->fronting.host, hp.host, sizeof hp.host);
    cfg->fronting.port = hp.port;
    cfg->fronting.resolved = hp.resolved;
    cfg->fronting.addr = hp.addr;
    cfg->fronting.addr_len = hp.addr_len;
    cfg->prefer_ip = prefer;
    cfg->timeout.handshake_ms = 1500;
    cfg->workers = 1;
    int rc = server_start(cfg, &r->srv);
    if (rc < 0)
        config_cleanup(cfg);
    return rc;
}

/* The site (and a second one at the same port) on a fresh port, then tgproxy on that port
   too. Another socket may hold the port on an address the site did not need (tests run
   in parallel): then all of it starts again on a new port, a bounded number of times. */
static void rig_up(struct rig *r, const char *site_ip, const char *site2_ip,
                   const char *const *listen, size_t n, const char *front,
                   enum config_prefer_ip prefer)
{
    for (int attempt = 0; attempt < 20; attempt++) {
        memset(r, 0, sizeof *r);
        r->site = psite_start(&(struct psite_opts){.addr = site_ip}, &r->port);
        assert_non_null(r->site);
        if (site2_ip)
            r->site2 =
                psite_start(&(struct psite_opts){.addr = site2_ip, .port = r->port}, &r->port);
        if ((!site2_ip || r->site2) && rig_start(r, listen, n, front, prefer) == 0)
            return;
        psite_stop(r->site);
        psite_stop(r->site2);
    }
    fail_msg("no port free on every address the test needs");
}

static void rig_stop(struct rig *r)
{
    server_stop(r->srv);
    psite_stop(r->site);
    psite_stop(r->site2);
    config_cleanup(&r->cfg);
    upstream_set_resolver(NULL);
}

/* A GET through the proxy at ip gets the site's answer at once, and a FIN. */
static void expect_site(struct rig *r, const char *ip)
{
    struct pprobe_result res;
    struct pprobe p = {.bytes = PROBE, .n = sizeof PROBE - 1, .wait_ms = 5000};
    assert_int_equal(pprobe_run(ip, r->port, &p, &res), 0);
    assert_int_equal(res.end, PPROBE_FIN);
    assert_int_equal(res.n, sizeof PSITE_HTTP_OK - 1);
    assert_memory_equal(res.bytes, PSITE_HTTP_OK, res.n);
    assert_true(res.end_ms < (long)r->cfg.timeout.handshake_ms); /* not after the deadline */
}

/* The site on site_ip (HTTP), then tgproxy beside it on the same port. */
static void site_then_proxy(struct rig *r, const char *site_ip, const char *const *listen, size_t n)
{
    rig_up(r, site_ip, NULL, listen, n, site_ip, CONFIG_PREFER_IPV6);
}

static void test_wildcard_v4_fronts_to_other_loopback(void **state)
{
    (void)state;
    struct rig r;
    static const char *const l[] = {"0.0.0.0"};
    site_then_proxy(&r, "127.0.0.2", l, 1);
    expect_site(&r, "127.0.0.1");
    struct stats st;
    server_stats(r.srv, &st);
    assert_int_equal(st.fronted, 1);
    assert_int_equal(st.front_self, 0);
    rig_stop(&r);
}

static void test_wildcard_v4_fronts_to_ipv6_loopback(void **state)
{
    (void)state;
    if (!have_ipv6())
        tgtest_skip("no IPv6 on loopback: cannot listen on ::1");
    struct rig r;
    static const char *const l[] = {"0.0.0.0"};
    site_then_proxy(&r, "::1", l, 1);
    expect_site(&r, "127.0.0.1");
    rig_stop(&r);
}

static void test_dual_stack_fronts(void **state)
{
    (void)state;
    if (!have_ipv6())
        tgtest_skip("no IPv6 on loopback: cannot listen on ::1");
    struct rig r;
    static const char *const l[] = {"0.0.0.0", "::"};
    site_then_proxy(&r, "127.0.0.2", l, 2);
    expect_site(&r, "127.0.0.1");
    expect_site(&r, "::1");
    rig_stop(&r);
}

static void test_specific_listener_fronts(void **state)
{
    (void)state;
    struct rig r;
    static const char *const l[] = {"127.0.0.1"};
    site_then_proxy(&r, "127.0.0.2", l, 1);
    expect_site(&r, "127.0.0.1");
    rig_stop(&r);
}

/* ---- a fronting name: every address decided on its own ---- */

static const char *fake_answer[2]; /* numeric addresses the name resolves to, in order */

static int fake_gai(const char *host, const char *port, const struct addrinfo *hints,
                    struct addrinfo **res)
{
    if (strcmp(host, "site.test") != 0)
        return getaddrinfo(host, port, hints, res);
    struct addrinfo h = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST};
    struct addrinfo *first = NULL, **tail = &first;
    for (int i = 0; i < 2 && fake_answer[i]; i++) {
        struct addrinfo *one = NULL;
        if (getaddrinfo(fake_answer[i], port, &h, &one) != 0)
            continue;
        *tail = one; /* glibc frees a chain node by node: chaining two answers is fine */
        while (*tail)
            tail = &(*tail)->ai_next;
    }
    *res = first;
    return first ? 0 : EAI_NONAME;
}

/* [::] listener; site.test resolves to ::1 (the proxy itself) and 127.0.0.2 (the site):
   the first is skipped, the second used. */
static void test_wildcard_v6_name_skips_self_address(void **state)
{
    (void)state;
    if (!have_ipv6())
        tgtest_skip("no IPv6 on loopback: cannot listen on ::1");
    struct rig r;
    fake_answer[0] = "::1";
    fake_answer[1] = "127.0.0.2";
    upstream_set_resolver(fake_gai);
    static const char *const l[] = {"::"};
    rig_up(&r, "127.0.0.2", NULL, l, 1, "site.test", CONFIG_PREFER_IPV6);
    expect_site(&r, "::1");
    struct stats st;
    server_stats(r.srv, &st);
    assert_int_equal(st.fronted, 1);
    rig_stop(&r);
}

/* prefer-ip applies to the fronting host: only-ipv4 never tries the AAAA address, the
   default (prefer-ipv6) tries it first. */
static void test_fronting_follows_prefer_ip(void **state)
{
    (void)state;
    if (!have_ipv6())
        tgtest_skip("no IPv6 on loopback: cannot listen on ::1");
    static const struct {
        enum config_prefer_ip prefer;
        size_t v6_conns, v4_conns;
    } cases[] = {{CONFIG_ONLY_IPV4, 0, 1}, {CONFIG_PREFER_IPV4, 0, 1}, {CONFIG_PREFER_IPV6, 1, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct rig r;
        fake_answer[0] = "::1";
        fake_answer[1] = "127.0.0.2";
        upstream_set_resolver(fake_gai);
        static const char *const l[] = {"127.0.0.1"};
        rig_up(&r, "127.0.0.2", "::1", l, 1, "site.test", cases[i].prefer);
        expect_site(&r, "127.0.0.1");
        assert_int_equal(psite_count(r.site2), cases[i].v6_conns);
        assert_int_equal(psite_count(r.site), cases[i].v4_conns);
        rig_stop(&r);
    }
}

/* The fronting target is the proxy itself (v4-mapped spelling): refused, counted, and the
   probe is held to the deadline and closed; one connection, never a chain. */
static void test_v4_mapped_self_refused_without_chain(void **state)
{
    (void)state;
    struct rig r;
    static const char *const l[] = {"0.0.0.0"};
    /* the site on 127.0.0.3 only picks the port: nothing is fronted to it */
    rig_up(&r, "127.0.0.3", NULL, l, 1, "::ffff:127.0.0.1", CONFIG_PREFER_IPV6);
    struct pprobe_result res;
    struct pprobe p = {.bytes = PROBE, .n = sizeof PROBE - 1, .wait_ms = 5000};
    assert_int_equal(pprobe_run("127.0.0.1", r.port, &p, &res), 0);
    assert_int_equal(res.n, 0);
    assert_int_not_equal(res.end, PPROBE_OPEN);
    assert_true(res.end_ms >= (long)r.cfg.timeout.handshake_ms - 100);
    struct stats st;
    server_stats(r.srv, &st);
    assert_int_equal(st.accepted, 1); /* no self-connection */
    assert_int_equal(st.front_self, 1);
    assert_int_equal(st.fronted, 0);
    rig_stop(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_wildcard_v4),
        cmocka_unit_test(test_set_wildcard_v6_and_dual),
        cmocka_unit_test(test_set_specific),
        cmocka_unit_test(test_set_local),
        cmocka_unit_test(test_wildcard_v4_fronts_to_other_loopback),
        cmocka_unit_test(test_wildcard_v4_fronts_to_ipv6_loopback),
        cmocka_unit_test(test_dual_stack_fronts),
        cmocka_unit_test(test_specific_listener_fronts),
        cmocka_unit_test(test_wildcard_v6_name_skips_self_address),
        cmocka_unit_test(test_fronting_follows_prefer_ip),
        cmocka_unit_test(test_v4_mapped_self_refused_without_chain),
    };
    return tgtest_result(cmocka_run_group_tests(tests, NULL, NULL));
}
