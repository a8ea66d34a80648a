/*
 * test_doh: DNS over HTTPS ([network] dns, doh-ip) against a DoH server written for the
 * test (tests/support/doh_server.c: libmicrohttpd over TLS, answers from a table) with a CA
 * the test makes (tests/support/tls_pki.c). First the resolver alone (src/proxy/services/doh.c):
 * the RFC 8484 request form, A/AAAA and CNAME answers, the TTL cache on an injected clock,
 * negative answers, server failures, a wrong id, a certificate from another CA, a server
 * that is down, doh-ip pinning. Then a real tgproxy whose DC and fronting host are names
 * resolved through the DoH server: relaying, the TTL honoured across connections, and
 * NXDOMAIN ending the connection with a clear warning.
 */
#include "tgtest.h"

#include "core/log.h"
#include "core/str.h"
#include "doh_server.h"
#include "logcap.h"
#include "proxy/services/doh.h"
#include "proxy_client.h"
#include "proxy_expect.h"
#include "proxy_harness.h"
#include "proxy_util.h"
#include "tls_pki.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define DOH_NAME "doh.test" /* the DoH server's name in its certificate */

static const struct dohsrv_record table[] = {
    {"dc.test", 1, "127.0.0.1", 60, 0},
    {"dc.test", 28, "::1", 30, 0},
    {"v4only.test", 1, "127.0.0.1", 1, 0}, /* TTL 1 s: raised to DOH_TTL_MIN_S */
    {"alias.test", 5, "mid.test", 40, 0},
    {"mid.test", 5, "dc.test", 50, 0},
    {"front.test", 1, "127.0.0.1", 120, 0},
    {"gone.test", 0, NULL, 20, 3},  /* NXDOMAIN with an SOA: negative TTL 20 s */
    {"broken.test", 0, NULL, 0, 2}, /* SERVFAIL */
    {"badid.test", 0, NULL, 0, DOHSRV_BAD_ID},
    {"lossy.test", 0, NULL, 0, DOHSRV_DROP_FIRST},
    {"lossy.test", 1, "127.0.0.3", 60, 0},
    {"closer.test", 0, NULL, 0, DOHSRV_CLOSE_AFTER},
    {"closer.test", 1, "127.0.0.4", 60, 0},
};

struct fx {
    struct tpki pki, other; /* other: a second CA, which did not sign the server */
    struct dohsrv *srv;
    uint16_t port;
};

/* The injected clock (milliseconds), advanced by the tests. */
static _Atomic uint64_t vclock = 1000000;

static uint64_t test_clock(void)
{
    return atomic_load(&vclock);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(tpki_make(&f->pki, DOH_NAME), 0);
    assert_int_equal(tpki_make(&f->other, DOH_NAME), 0);
    f->srv = dohsrv_start(&(struct dohsrv_opts){.addr = "127.0.0.1",
                                                .crt_pem = f->pki.crt_pem,
                                                .key_pem = f->pki.key_pem,
                                                .records = table,
                                                .nrecords = sizeof table / sizeof table[0],
                                                .udp = true,
                                                .dot = true},
                          &f->port);
    assert_non_null(f->srv);
    setenv("SSL_CERT_FILE", f->pki.ca_file, 1);
    doh_set_clock(test_clock);
    logcap_start();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    tg__log_default()->sink = NULL;
    doh_set_clock(NULL);
    unsetenv("SSL_CERT_FILE");
    dohsrv_stop(f->srv);
    tpki_free(&f->pki);
    tpki_free(&f->other);
    free(f);
    return 0;
}

/* A config whose dns points at the test server (by IP, or by name pinned with doh-ip). */
static void dns_config(struct config *cfg, const struct fx *f, bool by_name, uint16_t port)
{
    char url[128], why[256];
    snprintf(url, sizeof url, "https://%s:%u", by_name ? DOH_NAME : "127.0.0.1", port);
    assert_int_equal(doh_url_parse(url, strlen(url), cfg->dns.url, cfg->dns.host, &cfg->dns.port,
                                   why, sizeof why),
                     0);
    if (by_name)
        snprintf(cfg->dns.ip, sizeof cfg->dns.ip, "127.0.0.1");
    cfg->timeout.tcp_ms = 2000;
    cfg->timeout.http_ms = 3000;
    (void)f;
}

/* A loopback UDP port nobody listens on (bound, then closed): the kernel answers a
   datagram there with "port unreachable". */
static uint16_t closed_udp_port(void)
{
    uint16_t port = 0;
    int fd = psock_udp_bind(&port);
    assert_true(fd >= 0);
    close(fd);
    return port;
}

/* A resolver for any form of dns (pin: doh-ip, or NULL). */
static struct doh *resolver_for(const char *url, const char *pin)
{
    struct config cfg;
    config_init(&cfg);
    char why[256], err[256];
    if (doh_url_parse(url, strlen(url), cfg.dns.url, cfg.dns.host, &cfg.dns.port, why,
                      sizeof why) != 0)
        fail_msg("%s: %s", url, why);
    snprintf(cfg.dns.ip, sizeof cfg.dns.ip, "%s", pin ? pin : "");
    cfg.timeout.tcp_ms = 2000;
    cfg.timeout.http_ms = 3000;
    struct doh *d = doh_new(&cfg, err, sizeof err);
    if (!d)
        fail_msg("%s", err);
    config_cleanup(&cfg);
    return d;
}

static struct doh *resolver(const struct fx *f, bool by_name)
{
    struct config cfg;
    config_init(&cfg);
    dns_config(&cfg, f, by_name, f->port);
    char err[256];
    struct doh *d = doh_new(&cfg, err, sizeof err);
    if (!d)
        fail_msg("%s", err);
    config_cleanup(&cfg);
    return d;
}

static char addr_text_buf[64];
static const char *addr_text(const struct dnsmsg_addr *a)
{
    inet_ntop(a->family, a->addr, addr_text_buf, sizeof addr_text_buf);
    return addr_text_buf;
}

/* ---- the resolver ---- */

/* A and AAAA in prefer-ip order, each a POST of application/dns-message to /dns-query. */
static void test_request_form_and_order(void **state)
{
    struct fx *f = *state;
    struct doh *d = resolver(f, false);
    struct doh_result r;
    assert_int_equal(doh_resolve(d, "dc.test", CONFIG_PREFER_IPV6, &r), DOH_OK);
    assert_int_equal(r.n, 2);
    assert_string_equal(addr_text(&r.a[0]), "::1");
    assert_string_equal(addr_text(&r.a[1]), "127.0.0.1");
    assert_int_equal(r.ttl_ms, 30000); /* the smaller of the two TTLs */
    assert_int_equal(dohsrv_queries_for(f->srv, "dc.test"), 2);
    char last[512];
    dohsrv_last(f->srv, last, sizeof last);
    assert_string_equal(last, "POST /dns-query ct=application/dns-message "
                              "accept=application/dns-message type=1 name=dc.test");
    assert_int_equal(doh_resolve(d, "DC.Test.", CONFIG_PREFER_IPV4, &r), DOH_OK);
    assert_string_equal(addr_text(&r.a[0]), "127.0.0.1"); /* from the cache, IPv4 first */
    assert_int_equal(dohsrv_queries(f->srv), 2);
    doh_free(d);

    d = resolver(f, false);
    assert_int_equal(doh_resolve(d, "dc.test", CONFIG_ONLY_IPV4, &r), DOH_OK);
    assert_int_equal(r.n, 1);
    assert_int_equal(dohsrv_queries(f->srv), 3); /* only A was asked */
    assert_int_equal(doh_resolve(d, "v4only.test", CONFIG_ONLY_IPV6, &r), DOH_NODATA);
    assert_non_null(strstr(r.err, "AAAA v4only.test: no address of this type"));
    doh_free(d);
}

/* A CNAME chain inside the answer is followed; the TTL is the chain's smallest. */
static void test_cname_chain(void **state)
{
    struct fx *f = *state;
    struct doh *d = resolver(f, false);
    struct doh_result r;
    assert_int_equal(doh_resolve(d, "alias.test", CONFIG_ONLY_IPV4, &r), DOH_OK);
    assert_int_equal(r.n, 1);
    assert_string_equal(addr_text(&r.a[0]), "127.0.0.1");
    assert_int_equal(r.ttl_ms, 40000);
    doh_free(d);
}

/* Answers are reused for their TTL (clamped) on the injected clock, then asked again. */
static void test_ttl_cache(void **state)
{
    struct fx *f = *state;
    struct doh *d = resolver(f, false);
    struct doh_result r;
    uint64_t q, hits;
    assert_int_equal(doh_resolve(d, "dc.test", CONFIG_PREFER_IPV6, &r), DOH_OK);
    atomic_fetch_add(&vclock, 29000);
    assert_int_equal(doh_resolve(d, "dc.test", CONFIG_PREFER_IPV6, &r), DOH_OK);
    assert_int_equal(r.ttl_ms, 1000); /* what is left of the AAAA TTL */
    doh_counts(d, &q, &hits);
    assert_int_equal(q, 2);
    assert_int_equal(hits, 2);
    atomic_fetch_add(&vclock, 1000); /* the AAAA answer (30 s) expires, the A one (60 s) not */
    assert_int_equal(doh_resolve(d, "dc.test", CONFIG_PREFER_IPV6, &r), DOH_OK);
    assert_int_equal(dohsrv_queries_for(f->srv, "dc.test"), 3);
    /* a TTL of 1 s is used for DOH_TTL_MIN_S */
    assert_int_equal(doh_resolve(d, "v4only.test", CONFIG_ONLY_IPV4, &r), DOH_OK);
    assert_int_equal(r.ttl_ms, DOH_TTL_MIN_S * 1000);
    atomic_fetch_add(&vclock, DOH_TTL_MIN_S * 1000 - 1);
    assert_int_equal(doh_resolve(d, "v4only.test", CONFIG_ONLY_IPV4, &r), DOH_OK);
    assert_int_equal(dohsrv_queries_for(f->srv, "v4only.test"), 1);
    atomic_fetch_add(&vclock, 1);
    assert_int_equal(doh_resolve(d, "v4only.test", CONFIG_ONLY_IPV4, &r), DOH_OK);
    assert_int_equal(dohsrv_queries_for(f->srv, "v4only.test"), 2);
    /* five requests, one after the other: one pooled handle, one kept-alive connection */
    assert_int_equal(dohsrv_queries(f->srv), 5);
    assert_int_equal(dohsrv_connections(f->srv), 1);
    doh_free(d);
}

/* The cache holds DOH_CACHE_MAX answers; when full of live ones, the answer that expires
   first makes room, not the oldest: a long-lived answer stored first survives a flood of
   short-lived ones. */
static void test_cache_bound(void **state)
{
    struct fx *f = *state;
    struct doh *d = resolver(f, false);
    struct doh_result r;
    assert_int_equal(doh_resolve(d, "dc.test", CONFIG_ONLY_IPV4, &r), DOH_OK); /* 60 s */
    for (int i = 0; i < DOH_CACHE_MAX + 8; i++) { /* NXDOMAIN, kept 10 s each */
        char name[32];
        snprintf(name, sizeof name, "n%d.test", i);
        assert_int_equal(doh_resolve(d, name, CONFIG_ONLY_IPV4, &r), DOH_NXDOMAIN);
    }
    assert_int_equal(doh_resolve(d, "dc.test", CONFIG_ONLY_IPV4, &r), DOH_OK);
    assert_int_equal(dohsrv_queries_for(f->srv, "dc.test"), 1); /* still cached */
    uint64_t q, hits;
    doh_counts(d, &q, &hits);
    assert_int_equal(q, DOH_CACHE_MAX + 9);
    assert_int_equal(doh_resolve(d, "n0.test", CONFIG_ONLY_IPV4, &r), DOH_NXDOMAIN);
    doh_counts(d, &q, &hits);
    assert_int_equal(q, DOH_CACHE_MAX + 10); /* n0 made room for a later name: asked again */
    doh_free(d);
}

/* NXDOMAIN is cached for the SOA's negative TTL (or the default); SERVFAIL is not cached. */
static void test_negative_answers(void **state)
{
    struct fx *f = *state;
    struct doh *d = resolver(f, false);
    struct doh_result r;
    char where[64];
    snprintf(where, sizeof where, "DoH 127.0.0.1:%u: A gone.test: NXDOMAIN", (unsigned)f->port);
    assert_int_equal(doh_resolve(d, "gone.test", CONFIG_ONLY_IPV4, &r), DOH_NXDOMAIN);
    assert_non_null(strstr(r.err, where));
    assert_int_equal(r.ttl_ms, 20000);
    atomic_fetch_add(&vclock, 19999);
    assert_int_equal(doh_resolve(d, "gone.test", CONFIG_ONLY_IPV4, &r), DOH_NXDOMAIN);
    assert_int_equal(dohsrv_queries_for(f->srv, "gone.test"), 1);
    atomic_fetch_add(&vclock, 1);
    assert_int_equal(doh_resolve(d, "gone.test", CONFIG_ONLY_IPV4, &r), DOH_NXDOMAIN);
    assert_int_equal(dohsrv_queries_for(f->srv, "gone.test"), 2);
    /* a name the table does not know: NXDOMAIN without an SOA */
    assert_int_equal(doh_resolve(d, "unknown.test", CONFIG_ONLY_IPV4, &r), DOH_NXDOMAIN);
    assert_int_equal(r.ttl_ms, DOH_NEG_TTL_DEFAULT_S * 1000);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(doh_resolve(d, "broken.test", CONFIG_ONLY_IPV4, &r), DOH_E_SERVER);
        assert_non_null(strstr(r.err, "A broken.test: the server answered RCODE 2 (SERVFAIL)"));
    }
    assert_int_equal(dohsrv_queries_for(f->srv, "broken.test"), 2);
    /* with both types asked and both failing, the failure is what is reported */
    assert_int_equal(doh_resolve(d, "broken.test", CONFIG_PREFER_IPV4, &r), DOH_E_SERVER);
    assert_int_equal(doh_resolve(d, "badid.test", CONFIG_ONLY_IPV4, &r), DOH_E_ANSWER);
    assert_non_null(strstr(r.err, "not the response to this query"));
    assert_int_equal(doh_resolve(d, "bad..name", CONFIG_ONLY_IPV4, &r), DOH_E_NAME);
    doh_free(d);
}

/* A certificate from another CA, a server that is down, a wrong path: transport and HTTP
   errors name the server by host and port, and nothing is cached. */
static void test_transport_failures(void **state)
{
    struct fx *f = *state;
    struct doh_result r;
    setenv("SSL_CERT_FILE", f->other.ca_file, 1);
    struct doh *d = resolver(f, false);
    assert_int_equal(doh_resolve(d, "dc.test", CONFIG_ONLY_IPV4, &r), DOH_E_TRANSPORT);
    if (!strstr(r.err, "certificate"))
        fail_msg("%s", r.err);
    assert_int_equal(dohsrv_queries(f->srv), 0);
    doh_free(d);
    setenv("SSL_CERT_FILE", f->pki.ca_file, 1);

    uint16_t closed = 0;
    int held = psock_refusing(&closed); /* refuses, and no other process can take it */
    assert_true(held >= 0);
    struct config cfg;
    config_init(&cfg);
    dns_config(&cfg, f, false, closed);
    char err[256];
    d = doh_new(&cfg, err, sizeof err);
    assert_non_null(d);
    assert_int_equal(doh_resolve(d, "dc.test", CONFIG_ONLY_IPV4, &r), DOH_E_TRANSPORT);
    char where[64];
    snprintf(where, sizeof where, "DoH 127.0.0.1:%u: A dc.test: ", (unsigned)closed);
    if (!strstr(r.err, where) || !strstr(r.err, "onnect"))
        fail_msg("%s", r.err);
    doh_free(d);
    close(held);

    snprintf(cfg.dns.url, sizeof cfg.dns.url, "https://127.0.0.1:%u/other", (unsigned)f->port);
    d = doh_new(&cfg, err, sizeof err);
    assert_int_equal(doh_resolve(d, "dc.test", CONFIG_ONLY_IPV4, &r), DOH_E_HTTP);
    assert_non_null(strstr(r.err, "HTTP status 404"));
    doh_free(d);
    config_cleanup(&cfg);
}

/* doh-ip: the URL names the server by a name no resolver knows; the connection goes to the
   pinned address and TLS checks the name against the certificate. */
static void test_doh_ip_pins_the_server(void **state)
{
    struct fx *f = *state;
    struct doh *d = resolver(f, true);
    struct doh_result r;
    assert_int_equal(doh_resolve(d, "dc.test", CONFIG_ONLY_IPV4, &r), DOH_OK);
    assert_string_equal(addr_text(&r.a[0]), "127.0.0.1");
    doh_free(d);
}

/* mtg's other forms: plain DNS over UDP and DNS over TLS, through the same checks and
   cache; TLS verifies the server's name (or IP) against the CA. */
static void test_udp_and_tls(void **state)
{
    struct fx *f = *state;
    char url[128], last[512], want[160];
    struct doh_result r0;
    uint16_t udp = dohsrv_udp_port(f->srv), dot = dohsrv_dot_port(f->srv);
    const struct {
        const char *prefix, *pin, *form;
        uint16_t port;
    } ok[] = {
        {"udp://127.0.0.1:", NULL, "UDP", udp},
        {"tls://" DOH_NAME ":", "127.0.0.1", "TLS", dot},
        {"tls://127.0.0.1:", NULL, "TLS", dot},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        snprintf(url, sizeof url, "%s%u", ok[i].prefix, (unsigned)ok[i].port);
        struct doh *d = resolver_for(url, ok[i].pin);
        struct doh_result r;
        if (doh_resolve(d, "alias.test", CONFIG_PREFER_IPV6, &r) != DOH_OK)
            fail_msg("%s: %s", url, r.err);
        assert_int_equal(r.n, 2); /* through the CNAME chain: ::1 and 127.0.0.1 */
        assert_string_equal(addr_text(&r.a[0]), "::1");
        dohsrv_last(f->srv, last, sizeof last);
        snprintf(want, sizeof want, "%s type=1 name=alias.test", ok[i].form);
        assert_string_equal(last, want);
        assert_int_equal(doh_resolve(d, "gone.test", CONFIG_ONLY_IPV4, &r), DOH_NXDOMAIN);
        doh_free(d);
    }
    /* DoT connections are kept for the next query; one the server closed meanwhile is
       replaced and the query sent again, once */
    snprintf(url, sizeof url, "tls://127.0.0.1:%u", (unsigned)dot);
    struct doh *kept = resolver_for(url, NULL);
    unsigned conns = dohsrv_connections(f->srv);
    assert_int_equal(doh_resolve(kept, "dc.test", CONFIG_PREFER_IPV4, &r0), DOH_OK);
    assert_int_equal(doh_resolve(kept, "mid.test", CONFIG_ONLY_IPV4, &r0), DOH_OK);
    assert_int_equal(dohsrv_connections(f->srv) - conns, 1); /* three queries, one connection */
    assert_int_equal(doh_resolve(kept, "closer.test", CONFIG_ONLY_IPV4, &r0), DOH_OK);
    if (doh_resolve(kept, "v4only.test", CONFIG_ONLY_IPV4, &r0) != DOH_OK)
        fail_msg("%s", r0.err);
    assert_int_equal(dohsrv_connections(f->srv) - conns, 2);
    doh_free(kept);
    /* a lost datagram is sent again (after an eighth of the http timeout, 100 ms here) */
    snprintf(url, sizeof url, "udp://127.0.0.1:%u", (unsigned)udp);
    struct config cfg;
    config_init(&cfg);
    char why[256];
    assert_int_equal(
        doh_url_parse(url, strlen(url), cfg.dns.url, cfg.dns.host, &cfg.dns.port, why, sizeof why),
        0);
    cfg.timeout.http_ms = 800;
    struct doh *lossy = doh_new(&cfg, why, sizeof why);
    assert_non_null(lossy);
    struct doh_result lr;
    if (doh_resolve(lossy, "lossy.test", CONFIG_ONLY_IPV4, &lr) != DOH_OK)
        fail_msg("%s", lr.err);
    assert_string_equal(addr_text(&lr.a[0]), "127.0.0.3");
    assert_int_equal(dohsrv_dropped(f->srv), 1);
    assert_int_equal(dohsrv_queries_for(f->srv, "lossy.test"), 1);
    doh_free(lossy);
    config_cleanup(&cfg);
    /* a certificate from another CA, and a UDP port where no server listens */
    setenv("SSL_CERT_FILE", f->other.ca_file, 1);
    snprintf(url, sizeof url, "tls://" DOH_NAME ":%u", (unsigned)dot);
    struct doh *d = resolver_for(url, "127.0.0.1");
    struct doh_result r;
    assert_int_equal(doh_resolve(d, "dc.test", CONFIG_ONLY_IPV4, &r), DOH_E_TRANSPORT);
    snprintf(want, sizeof want,
             "DoT " DOH_NAME ":%u: A dc.test: TLS certificate refused: ", (unsigned)dot);
    if (!strstr(r.err, want))
        fail_msg("%s", r.err);
    doh_free(d);
    setenv("SSL_CERT_FILE", f->pki.ca_file, 1);
    uint16_t closed = closed_udp_port();
    snprintf(url, sizeof url, "udp://127.0.0.1:%u", (unsigned)closed);
    d = resolver_for(url, NULL);
    assert_int_equal(doh_resolve(d, "dc.test", CONFIG_ONLY_IPV4, &r), DOH_E_TRANSPORT);
    snprintf(want, sizeof want, "DNS 127.0.0.1:%u: A dc.test: ", (unsigned)closed);
    if (!strstr(r.err, want))
        fail_msg("%s", r.err);
    doh_free(d);
}

/* ---- through tgproxy ---- */

/* tgproxy with [dcs] default = dc_host:PORT and the fronting host front_host (NULL: the
   harness's IP literal), names resolved through the DoH server on doh_port (pinned by
   doh-ip). */
static void proxy_start(struct pharness *h, const struct fx *f, const char *dc_host,
                        const char *front_host, uint16_t doh_port)
{
    assert_int_equal(pharness_prepare(h, &(struct pharness_opts){.ee = true,
                                                                 .dd = true,
                                                                 .workers = 1,
                                                                 .log_level = TG__LOG_INFO,
                                                                 .dc_host = dc_host}),
                     0);
    dns_config(&h->cfg, f, true, doh_port);
    if (front_host) {
        tg__strlcpy(h->cfg.fronting.host, front_host, sizeof h->cfg.fronting.host);
        h->cfg.fronting.resolved = false;
    }
    assert_int_equal(server_start(&h->cfg, &h->srv), 0);
    h->port = server_port(h->srv, 0);
}

/* A client whose connection tgproxy ends (no DC address): it reads EOF, nothing else. */
static void ended_once(const struct pharness *h)
{
    struct pcli c;
    struct pcli_opts o = pharness_client(h, PCLI_TLS);
    assert_int_equal(pcli_connect(&c, h->port, &o), 0);
    uint8_t b;
    assert_true(pcli_recv(&c, &b, 1) <= 0);
    pcli_close(&c);
}

static void relay_once(const struct pharness *h, enum pcli_mode mode, uint32_t seed)
{
    struct pcli c;
    struct pcli_opts o = pharness_client(h, mode);
    assert_int_equal(pcli_connect(&c, h->port, &o), 0);
    assert_int_equal(pcli_echo(&c, seed, 50000, 0), 0);
    pcli_close(&c);
}

/* The DC's name is looked up once per TTL: connections within it ask nothing, the first
   after it asks again. (prefer-ip is prefer-ipv4 here: A then AAAA; the A TTL is 60 s, the
   AAAA one 30 s, so the answer lives 30 s.) */
static void test_proxy_dc_by_name_honours_ttl(void **state)
{
    struct fx *f = *state;
    struct pharness h;
    proxy_start(&h, f, "dc.test", "front.test", f->port);
    relay_once(&h, PCLI_TLS, 1);
    assert_int_equal(dohsrv_queries_for(f->srv, "dc.test"), 2);
    relay_once(&h, PCLI_DD, 2);
    atomic_fetch_add(&vclock, 29000);
    relay_once(&h, PCLI_TLS, 3);
    assert_int_equal(dohsrv_queries_for(f->srv, "dc.test"), 2); /* within the TTL */
    atomic_fetch_add(&vclock, 1500);
    relay_once(&h, PCLI_TLS, 4);
    /* expired: AAAA (30 s) is asked again; A (60 s) still comes from the DoH cache */
    assert_int_equal(dohsrv_queries_for(f->srv, "dc.test"), 3);
    assert_int_equal(fakedc_counters(h.dc).headers_ok, 4);
    pharness_stop(&h);
}

/* The same engine with dns = tls:// and udp://: the DC's name comes over DoT / UDP. */
static void test_proxy_dot_and_udp(void **state)
{
    struct fx *f = *state;
    const char *forms[] = {"TLS", "UDP"};
    for (int i = 0; i < 2; i++) {
        struct pharness h;
        assert_int_equal(
            pharness_prepare(
                &h, &(struct pharness_opts){.ee = true, .workers = 1, .dc_host = "alias.test"}),
            0);
        char url[96], why[256];
        snprintf(url, sizeof url, i == 0 ? "tls://" DOH_NAME ":%u" : "udp://127.0.0.1:%u",
                 (unsigned)(i == 0 ? dohsrv_dot_port(f->srv) : dohsrv_udp_port(f->srv)));
        assert_int_equal(doh_url_parse(url, strlen(url), h.cfg.dns.url, h.cfg.dns.host,
                                       &h.cfg.dns.port, why, sizeof why),
                         0);
        snprintf(h.cfg.dns.ip, sizeof h.cfg.dns.ip, "127.0.0.1");
        assert_int_equal(server_start(&h.cfg, &h.srv), 0);
        h.port = server_port(h.srv, 0);
        relay_once(&h, PCLI_TLS, 7);
        char last[512];
        dohsrv_last(f->srv, last, sizeof last);
        assert_non_null(strstr(last, forms[i]));
        assert_non_null(strstr(last, "name=alias.test"));
        pharness_stop(&h);
    }
}

/* A failed handshake is fronted to the fronting host's DoH address. */
static void test_proxy_fronting_by_name(void **state)
{
    struct fx *f = *state;
    struct pharness h;
    proxy_start(&h, f, "dc.test", "front.test", f->port);
    static const char req[] = "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n";
    pexpect_fronted(h.front, h.port, NULL, req, sizeof req - 1, 0);
    assert_true(dohsrv_queries_for(f->srv, "front.test") >= 1);
    pharness_stop(&h);
}

/* NXDOMAIN for the DC ends the connection (reason dns) and the warning says why and where;
   NXDOMAIN for the fronting host closes a failed handshake without reaching any site. */
static void test_proxy_nxdomain(void **state)
{
    struct fx *f = *state;
    struct pharness h;
    proxy_start(&h, f, "gone.test", "gone.test", f->port);
    ended_once(&h);
    assert_true(logcap_wait("gone.test: no address (DoH " DOH_NAME ":"));
    assert_true(logcap_wait("A gone.test: NXDOMAIN (no such name)"));
    assert_true(logcap_wait("reason=dns dc=2"));

    int fd = psock_connect(h.port, 2000);
    assert_true(fd >= 0);
    static const char req[] = "GET / HTTP/1.1\r\n\r\n";
    assert_int_equal(psock_write_all(fd, req, sizeof req - 1), 0);
    char buf[16];
    assert_true(read(fd, buf, sizeof buf) <= 0); /* closed, nothing fronted */
    close(fd);
    assert_int_equal(pfront_count(h.front), 0);
    pharness_stop(&h);
}

/* A DoH server that is down, one whose certificate this host does not trust, one that
   answers SERVFAIL: each DC connection ends (reason dns) and the warning says what failed,
   where and why. */
static void test_proxy_doh_failures(void **state)
{
    struct fx *f = *state;
    uint16_t closed = 0;
    int held = psock_refusing(&closed); /* refuses, and no other process can take it */
    assert_true(held >= 0);
    const struct {
        const char *host, *ca, *why;
        uint16_t port;
    } cases[] = {
        {"dc.test", f->pki.ca_file, "onnect", closed},
        {"dc.test", f->other.ca_file, "certificate", f->port},
        {"broken.test", f->pki.ca_file, "the server answered RCODE 2 (SERVFAIL)", f->port},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        logcap_clear();
        setenv("SSL_CERT_FILE", cases[i].ca, 1);
        struct pharness h;
        proxy_start(&h, f, cases[i].host, NULL, cases[i].port);
        ended_once(&h);
        char where[128];
        snprintf(where, sizeof where,
                 "dc 2: %s: no address (DoH " DOH_NAME ":%u: A %s: ", cases[i].host,
                 (unsigned)cases[i].port, cases[i].host);
        if (!logcap_wait(where) || !logcap_wait(cases[i].why) || !logcap_wait("reason=dns dc=2"))
            fail_msg("case %zu: log:\n%s", i, logcap_text());
        assert_int_equal(fakedc_counters(h.dc).accepted, 0);
        pharness_stop(&h);
    }
    close(held);
    setenv("SSL_CERT_FILE", f->pki.ca_file, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_request_form_and_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cname_chain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ttl_cache, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cache_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_negative_answers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transport_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_doh_ip_pins_the_server, setup, teardown),
        cmocka_unit_test_setup_teardown(test_udp_and_tls, setup, teardown),
        cmocka_unit_test_setup_teardown(test_proxy_dc_by_name_honours_ttl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_proxy_fronting_by_name, setup, teardown),
        cmocka_unit_test_setup_teardown(test_proxy_dot_and_udp, setup, teardown),
        cmocka_unit_test_setup_teardown(test_proxy_nxdomain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_proxy_doh_failures, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
