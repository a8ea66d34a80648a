/*
 * bench/proxy/junkhello: what a junk FakeTLS ClientHello costs the proxy (parse + validate),
 * with 1 and with 256 `ee` secrets, beside the floor of a single HMAC-SHA256 over the same
 * bytes measured in the same run.
 *
 * A junk hello is well formed but carries a digest no configured key produced (a prober's,
 * or a client with a stale secret). Rows:
 *   hmac_floor_517 / _16k     one crypto_hmac_sha256 over a 517-byte / 16 KiB record
 *   1_secret                  one key, SNI = its domain
 *   256_secrets_sni           256 keys with distinct domains, SNI names one of them
 *   256_secrets_foreign_sni   SNI names none of the 256 domains (refused without an HMAC)
 *   256_secrets_no_sni        no SNI extension: every key is a candidate
 *   256_same_domain           256 keys sharing the SNI's domain: every key is a candidate
 *   256_secrets_no_sni_16k    16 KiB, no SNI: bounded by FAKETLS_DIGEST_BUDGET
 * and, as the engine checks a hello many keys could sign (engine/keyscan.h: the address's
 * hint and the worker's scan budget, at the monotonic clock), against the same hello with
 * one secret in the same run:
 *   1_secret_no_sni[_16k]           one key, no SNI: the reference
 *   256_secrets_no_sni_gated[_16k]  a stream of junk no-SNI hellos from ever new addresses
 *   256_same_domain_gated           the same with SNI naming the domain all 256 share
 *   256_secrets_no_sni_hinted       a genuine no-SNI client whose address is hinted
 *   1000_same_domain[_hinted]       1,000 keys sharing the SNI's domain: junk (a scan of
 *                                   every key), then a genuine client whose address is hinted
 *   1000_same_domain_hinted_reloads the same client with a reload (the key list in another
 *                                   order) between any two hellos: hints name keys, not places
 * Each line gives ns and allocations per hello, the HMACs it computed (the last hello's),
 * and the ratio to the matching floor. TGKIT_BENCH_SECONDS / TGKIT_BENCH_CLOCK=cpu as in
 * bench.h.
 */
#include "bench.h"

#include "proxy/engine/keyscan.h"
#include "proxy/wire/crypto.h"
#include "proxy/wire/faketls.h"
#include "proxy_client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NKEYS 256
#define NMANY 1000 /* secrets sharing one domain: an operator's API-made secrets */
#define NOW   1700000000
#define BIG   (5 + FAKETLS_HELLO_MAX)

struct junk {
    uint8_t k[NMANY][16];
    char dom[NMANY][24];
    struct faketls_key keys[NMANY];
    struct faketls_key rkeys[NMANY]; /* the same keys in reverse: the next generation's list */
    size_t nkeys;
    uint8_t hello[BIG];
    size_t len;
    size_t digests; /* HMACs of the last validation */
    /* the engine's gate (conn.c tls_hello) */
    struct keyscan_hints hints;
    struct keyscan_budget budget;
    uint32_t addr; /* the next client address (gated rows) */
};

static void keys_init(struct junk *x, size_t n, bool same_domain)
{
    x->nkeys = n;
    for (size_t i = 0; i < n; i++) {
        memset(x->k[i], (int)(i + 1), 16);
        snprintf(x->dom[i], sizeof x->dom[i], "d%03zu.example", same_domain ? (size_t)0 : i);
        size_t dn = strlen(x->dom[i]);
        x->keys[i] = (struct faketls_key){.domain = x->dom[i],
                                          .domain_len = dn,
                                          .domain_hash = faketls_domain_hash(x->dom[i], dn)};
        memcpy(x->keys[i].key, x->k[i], 16);
        x->keys[i].id = keyscan_key_id(x->k[i], x->dom[i], dn);
    }
    for (size_t i = 0; i < n; i++)
        x->rkeys[i] = x->keys[n - 1 - i];
}

/* A hello of len bytes signed by a key nobody has. */
static void hello_init(struct junk *x, const char *sni, size_t len)
{
    static const uint8_t foreign[16] = {0xfe, 0xed};
    x->len = pcli_hello_sized(x->hello, sizeof x->hello, foreign, sni, NOW, len);
    if (x->len != len) {
        fprintf(stderr, "junkhello: cannot build a %zu-byte hello\n", len);
        exit(1);
    }
}

static void one_hmac(void *ctx)
{
    struct junk *x = ctx;
    uint8_t mac[32];
    struct crypto_part part = {x->hello, x->len};
    if (crypto_hmac_sha256(x->k[0], 16, &part, 1, mac) != 0)
        abort();
    tg__bench_sink(mac[0]);
}

static void junk_hello(void *ctx)
{
    struct junk *x = ctx;
    struct faketls_hello h;
    struct faketls_match m;
    struct faketls_policy pol = {.now = NOW, .past_s = 120, .future_s = 120};
    if (faketls_parse_hello(x->hello, x->len, &h, NULL) != FAKETLS_OK)
        abort();
    enum faketls_verdict v = faketls_validate(&h, x->keys, x->nkeys, &pol, &m);
    if (v != FAKETLS_BAD_DIGEST && v != FAKETLS_BAD_SNI)
        abort();
    x->digests = m.digests;
    tg__bench_sink(v);
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The engine's check of a hello (conn.c tls_hello): keyscan_validate when more than two keys
   are candidates (hint alone, then a budgeted scan; an accepted key becomes the hint). */
static enum faketls_verdict gated_keys(struct junk *x, const uint8_t ip[16],
                                       const struct faketls_key *keys)
{
    struct faketls_hello h;
    struct faketls_match m;
    struct faketls_policy pol = {.now = NOW, .past_s = 120, .future_s = 120};
    if (faketls_parse_hello(x->hello, x->len, &h, NULL) != FAKETLS_OK)
        abort();
    size_t ncand = x->nkeys > 2 ? faketls_candidates(&h, keys, x->nkeys, &pol) : x->nkeys;
    bool capped;
    enum faketls_verdict v = keyscan_validate(&x->hints, &x->budget, ip, mono_ms(), &h, keys,
                                              x->nkeys, ncand, &pol, &m, &capped);
    x->digests = m.digests;
    return v;
}

static enum faketls_verdict gated(struct junk *x, const uint8_t ip[16])
{
    return gated_keys(x, ip, x->keys);
}

/* Junk from a new address each time (2^32 of them, IPv4-mapped). */
static void junk_gated(void *ctx)
{
    struct junk *x = ctx;
    uint8_t ip[16] = {[10] = 0xff, [11] = 0xff};
    uint32_t a = x->addr++;
    memcpy(ip + 12, &a, 4);
    enum faketls_verdict v = gated(x, ip);
    if (v != FAKETLS_BAD_DIGEST)
        abort();
    tg__bench_sink(v);
}

/* A genuine client, always from 192.0.2.1. */
static void genuine_hinted(void *ctx)
{
    struct junk *x = ctx;
    static const uint8_t ip[16] = {[10] = 0xff, [11] = 0xff, 192, 0, 2, 1};
    enum faketls_verdict v = gated(x, ip);
    if (v != FAKETLS_ACCEPT)
        abort();
    tg__bench_sink(v);
}

/* The same client, with a reload between any two hellos: the key lists alternate. */
static void genuine_reloads(void *ctx)
{
    struct junk *x = ctx;
    static const uint8_t ip[16] = {[10] = 0xff, [11] = 0xff, 192, 0, 2, 1};
    x->addr ^= 1;
    enum faketls_verdict v = gated_keys(x, ip, x->addr ? x->rkeys : x->keys);
    if (v != FAKETLS_ACCEPT)
        abort();
    tg__bench_sink(v);
}

static void row_fn(struct junk *x, const char *name, tg__bench_fn fn, const tg__bench_result *floor,
                   tg__bench_result *r)
{
    tg__bench_run(name, fn, x, r);
    tg__bench_report(r, floor);
    printf("bench=%s_hmacs hmacs_per_op=%zu bytes=%zu\n", name, x->digests, x->len);
}

static void row(struct junk *x, const char *name, const tg__bench_result *floor)
{
    tg__bench_result r;
    row_fn(x, name, junk_hello, floor, &r);
}

int main(void)
{
    struct junk *x = calloc(1, sizeof *x);
    if (!x)
        return 1;
    tg__bench_result floor_small, floor_big;
    hello_init(x, "d007.example", 517);
    tg__bench_run("proxy_junkhello_hmac_floor_517", one_hmac, x, &floor_small);
    tg__bench_report(&floor_small, NULL);
    hello_init(x, NULL, BIG);
    tg__bench_run("proxy_junkhello_hmac_floor_16k", one_hmac, x, &floor_big);
    tg__bench_report(&floor_big, NULL);

    keys_init(x, 1, false);
    hello_init(x, "d000.example", 517);
    row(x, "proxy_junkhello_1_secret", &floor_small);
    keys_init(x, NKEYS, false);
    hello_init(x, "d007.example", 517);
    row(x, "proxy_junkhello_256_secrets_sni", &floor_small);
    hello_init(x, "nobody.example", 517);
    row(x, "proxy_junkhello_256_secrets_foreign_sni", &floor_small);
    hello_init(x, NULL, 517);
    row(x, "proxy_junkhello_256_secrets_no_sni", &floor_small);
    keys_init(x, NKEYS, true);
    hello_init(x, "d000.example", 517);
    row(x, "proxy_junkhello_256_same_domain", &floor_small);
    keys_init(x, NKEYS, false);
    hello_init(x, NULL, BIG);
    row(x, "proxy_junkhello_256_secrets_no_sni_16k", &floor_big);

    /* the engine's gate, against one secret in the same run */
    tg__bench_result one, one_big, r;
    keys_init(x, 1, false);
    hello_init(x, NULL, 517);
    row_fn(x, "proxy_junkhello_1_secret_no_sni", junk_hello, &floor_small, &one);
    hello_init(x, NULL, BIG);
    row_fn(x, "proxy_junkhello_1_secret_no_sni_16k", junk_hello, &floor_big, &one_big);
    keys_init(x, NKEYS, false);
    hello_init(x, NULL, 517);
    row_fn(x, "proxy_junkhello_256_secrets_no_sni_gated", junk_gated, &one, &r);
    hello_init(x, NULL, BIG);
    row_fn(x, "proxy_junkhello_256_secrets_no_sni_gated_16k", junk_gated, &one_big, &r);
    x->len = pcli_hello_sized(x->hello, sizeof x->hello, x->k[200], NULL, NOW, 517);
    row_fn(x, "proxy_junkhello_256_secrets_no_sni_hinted", genuine_hinted, &one, &r);
    keys_init(x, NKEYS, true);
    hello_init(x, "d000.example", 517);
    row_fn(x, "proxy_junkhello_256_same_domain_gated", junk_gated, &one, &r);
    /* 1,000 secrets sharing the domain (issue 25): an unknown client is a scan of every key,
       a remembered one one HMAC, also with a reload between any two of its hellos */
    keys_init(x, NMANY, true);
    hello_init(x, "d000.example", 517);
    row(x, "proxy_junkhello_1000_same_domain", &floor_small);
    x->len = pcli_hello_sized(x->hello, sizeof x->hello, x->k[700], "d000.example", NOW, 517);
    memset(&x->hints, 0, sizeof x->hints);
    memset(&x->budget, 0, sizeof x->budget); /* the junk rows spent it: the first hello scans */
    row_fn(x, "proxy_junkhello_1000_same_domain_hinted", genuine_hinted, &one, &r);
    x->addr = 0;
    row_fn(x, "proxy_junkhello_1000_same_domain_hinted_reloads", genuine_reloads, &one, &r);
    tg__bench_table();
    free(x);
    return 0;
}
