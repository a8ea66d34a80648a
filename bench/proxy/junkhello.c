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
 * Each line gives ns and allocations per hello, the HMACs it computed, and the ratio to the
 * matching floor. TGKIT_BENCH_SECONDS / TGKIT_BENCH_CLOCK=cpu as in bench.h.
 */
#include "bench.h"

#include "proxy/wire/crypto.h"
#include "proxy/wire/faketls.h"
#include "proxy_client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NKEYS 256
#define NOW   1700000000
#define BIG   (5 + FAKETLS_HELLO_MAX)

struct junk {
    uint8_t k[NKEYS][16];
    char dom[NKEYS][24];
    struct faketls_key keys[NKEYS];
    size_t nkeys;
    uint8_t hello[BIG];
    size_t len;
    size_t digests; /* HMACs of the last validation */
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
    }
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

static void row(struct junk *x, const char *name, const tg__bench_result *floor)
{
    tg__bench_result r;
    tg__bench_run(name, junk_hello, x, &r);
    tg__bench_report(&r, floor);
    printf("bench=%s_hmacs hmacs_per_op=%zu bytes=%zu\n", name, x->digests, x->len);
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
    tg__bench_table();
    free(x);
    return 0;
}
