/*
 * bench/proxy/doh: what a host-name lookup costs the resolver threads with [network] dns
 * (src/proxy/doh.c), beside the floor of the system resolver on a local name measured in
 * the same run: getaddrinfo("localhost") answered from /etc/hosts, no network.
 *
 *   doh_resolve     one A query to a local DoH server (tests/support/doh_server.c,
 *                   libmicrohttpd over TLS, on 127.0.0.1) with the cache emptied before
 *                   each lookup: build the query, POST it over the kept-alive HTTPS
 *                   connection of a pooled curl handle, check and parse the answer, cache it
 *   doh_cache_hit   the same lookup answered from the cache (what every connection within
 *                   the TTL pays, the lookup thread aside)
 *
 * The DoH client is the real one (a pooled libcurl handle, keep-alive, TLS verified against
 * a CA the benchmark makes); the server runs in this process, so its allocations and CPU
 * count in the DoH rows too.
 */
#include "bench.h"

#include "doh_server.h"
#include "proxy/doh.h"
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
                                                            .nrecords = 1},
                                      &port);
    setenv("SSL_CERT_FILE", pki.ca_file, 1);
    struct config cfg;
    config_init(&cfg);
    char url[64], err[256];
    snprintf(url, sizeof url, "https://127.0.0.1:%u/dns-query", (unsigned)port);
    struct ctx x = {.d = NULL};
    if (srv && doh_url_parse(url, strlen(url), cfg.dns.url, cfg.dns.host, &cfg.dns.port, err,
                             sizeof err) == 0)
        x.d = doh_new(&cfg, err, sizeof err);
    if (!x.d) {
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
    uint64_t queries, hits;
    doh_counts(x.d, &queries, &hits);
    printf("bench=proxy_doh_counts queries=%llu cache_hits=%llu server_answers=%u\n",
           (unsigned long long)queries, (unsigned long long)hits, dohsrv_queries(srv));
    tg__bench_table();
    doh_free(x.d);
    dohsrv_stop(srv);
    config_cleanup(&cfg);
    tpki_free(&pki);
    return 0;
}
