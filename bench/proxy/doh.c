/*
 * bench/proxy/doh: what a host-name lookup costs the resolver threads with [network] dns
 * (src/proxy/services/doh.c), beside the floor of the system resolver on a local name measured in
 * the same run: getaddrinfo("localhost") answered from /etc/hosts, no network.
 *
 *   doh_resolve     one A query to a local DoH server (tests/support/doh_server.c,
 *                   libmicrohttpd over TLS, on 127.0.0.1) with the cache emptied before
 *                   each lookup: build the query, POST it over the kept-alive HTTPS
 *                   connection of a pooled curl handle, check and parse the answer, cache it
 *   doh_cache_hit   the same lookup answered from the cache (what every connection within
 *                   the TTL pays, the lookup thread aside)
 *   dot_resolve     the same over DNS over TLS (tls://, on the kept TLS connection)
 *   udp_resolve     the same over plain UDP (udp://IP)
 *
 * The DoH client is the real one (a pooled libcurl handle, keep-alive, TLS verified against
 * a CA the benchmark makes); the server runs in this process, so its allocations and CPU
 * count in the DoH rows too.
 */
#include "bench.h"

#include "doh_server.h"
#include "proxy/services/doh.h"
#include "tls_pki.h"

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct dohsrv_record table[] = {{"dc.bench", 1, "127.0.0.1", 3600, 0}};

struct ctx {
    struct doh *d;
    bool flush;
};

/* A resolver for url, or NULL. */
static struct doh *resolver_for(const char *url)
{
    struct config cfg;
    char err[256];
    config_init(&cfg);
    struct doh *d = NULL;
    if (doh_url_parse(url, strlen(url), cfg.dns.url, cfg.dns.host, &cfg.dns.port, err,
                      sizeof err) == 0)
        d = doh_new(&cfg, err, sizeof err);
    config_cleanup(&cfg);
    return d;
}

static void gai_localhost(void *arg)
{
    (void)arg;
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo("localhost", "443", &hints, &res) != 0 || !res)
        abort();
    tg__bench_sink(res->ai_addrlen);
    freeaddrinfo(res);
}

static void resolve(void *arg)
{
    struct ctx *x = arg;
    if (x->flush)
        doh_flush(x->d);
    struct doh_result r;
    if (doh_resolve(x->d, "dc.bench", CONFIG_ONLY_IPV4, &r) != DOH_OK || r.n != 1)
        abort();
    tg__bench_sink(r.a[0].addr[0]);
}

int main(void)
{
    struct tpki pki;
    uint16_t port = 0;
    if (tpki_make(&pki, "doh.bench") != 0) {
        fprintf(stderr, "doh: cannot make the test CA\n");
        return 1;
    }
    struct dohsrv *srv = dohsrv_start(&(struct dohsrv_opts){.addr = "127.0.0.1",
                                                            .crt_pem = pki.crt_pem,
                                                            .key_pem = pki.key_pem,
                                                            .records = table,
                                                            .nrecords = 1,
                                                            .udp = true,
                                                            .dot = true},
                                      &port);
    setenv("SSL_CERT_FILE", pki.ca_file, 1);
    char url[3][64];
    snprintf(url[0], sizeof url[0], "https://127.0.0.1:%u/dns-query", (unsigned)port);
    snprintf(url[1], sizeof url[1], "tls://127.0.0.1:%u", srv ? dohsrv_dot_port(srv) : 0u);
    snprintf(url[2], sizeof url[2], "udp://127.0.0.1:%u", srv ? dohsrv_udp_port(srv) : 0u);
    struct ctx x = {.d = srv ? resolver_for(url[0]) : NULL}, t = {.flush = true},
               u = {.flush = true};
    t.d = srv ? resolver_for(url[1]) : NULL;
    u.d = srv ? resolver_for(url[2]) : NULL;
    if (!x.d || !t.d || !u.d) {
        fprintf(stderr, "doh: cannot start the DoH server or resolver\n");
        return 1;
    }
    tg__bench_result floor, r;
    tg__bench_run("proxy_getaddrinfo_localhost", gai_localhost, NULL, &floor);
    tg__bench_report(&floor, NULL);
    x.flush = true;
    tg__bench_run("proxy_doh_resolve", resolve, &x, &r);
    tg__bench_report(&r, &floor);
    x.flush = false;
    tg__bench_run("proxy_doh_cache_hit", resolve, &x, &r);
    tg__bench_report(&r, &floor);
    tg__bench_run("proxy_dot_resolve", resolve, &t, &r);
    tg__bench_report(&r, &floor);
    tg__bench_run("proxy_udp_resolve", resolve, &u, &r);
    tg__bench_report(&r, &floor);
    uint64_t queries, hits;
    doh_counts(x.d, &queries, &hits);
    printf("bench=proxy_doh_counts queries=%llu cache_hits=%llu server_answers=%u\n",
           (unsigned long long)queries, (unsigned long long)hits, dohsrv_queries(srv));
    tg__bench_table();
    doh_free(x.d);
    doh_free(t.d);
    doh_free(u.d);
    dohsrv_stop(srv);
    tpki_free(&pki);
    return 0;
}
