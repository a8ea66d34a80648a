/*
 * bench/proxy/antireplay: the replay check every authenticated handshake pays
 * (antireplay_add: keyed SHA-256 fingerprint, striped lock, set scan, insert), beside the
 * floor of the unkeyed SHA-256 the index used before it was keyed (kind byte || key),
 * measured in the same run, and the keyed hash alone (16-byte index key || kind || key):
 * keyed_sha256 / floor is what keying costs, add / floor what the whole check costs. Rows
 * for both key kinds: a FakeTLS client random (16 bytes) and an obfs2 header slice (48
 * bytes). The cache may hold the default 1,048,576 entries (it grows to 16 MiB, so most
 * inserts miss the CPU caches), every key is fresh (no replays) and time stands still:
 * after the first million inserts the cache is full and every insert evicts early, its
 * busiest state.
 */
#include "bench.h"

#include "proxy/engine/antireplay.h"
#include "proxy/wire/crypto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ar_ctx {
    struct antireplay *ar;
    enum antireplay_kind kind;
    size_t len;
    uint8_t key[48];
    uint64_t n;
};

/* A fresh key each call: the counter in the first 8 bytes. */
static void next_key(struct ar_ctx *x)
{
    x->n++;
    memcpy(x->key, &x->n, sizeof x->n);
}

static void unkeyed_sha(void *ctx)
{
    struct ar_ctx *x = ctx;
    next_key(x);
    uint8_t k = (uint8_t)x->kind, h[32];
    struct crypto_part parts[2] = {{&k, 1}, {x->key, x->len}};
    if (crypto_sha256(parts, 2, h) != 0)
        abort();
    tg__bench_sink(h[0]);
}

static void keyed_sha(void *ctx)
{
    static const uint8_t index_key[16] = {0x9e, 0x37};
    struct ar_ctx *x = ctx;
    next_key(x);
    uint8_t k = (uint8_t)x->kind, h[32];
    struct crypto_part parts[3] = {{index_key, sizeof index_key}, {&k, 1}, {x->key, x->len}};
    if (crypto_sha256(parts, 3, h) != 0)
        abort();
    tg__bench_sink(h[0]);
}

static void add(void *ctx)
{
    struct ar_ctx *x = ctx;
    next_key(x);
    if (antireplay_add(x->ar, x->kind, x->key, x->len, 1000))
        abort(); /* every key is fresh */
}

static void rows(struct antireplay *ar, enum antireplay_kind kind, size_t len, const char *what)
{
    struct ar_ctx x = {.ar = ar, .kind = kind, .len = len, .n = (uint64_t)kind << 40};
    memset(x.key, 0x5c, sizeof x.key);
    char name[3][64];
    snprintf(name[0], sizeof name[0], "proxy_antireplay_unkeyed_sha256_%s", what);
    snprintf(name[1], sizeof name[1], "proxy_antireplay_keyed_sha256_%s", what);
    snprintf(name[2], sizeof name[2], "proxy_antireplay_add_%s", what);
    tg__bench_result f, r;
    tg__bench_run(name[0], unkeyed_sha, &x, &f);
    tg__bench_report(&f, NULL);
    tg__bench_run(name[1], keyed_sha, &x, &r);
    tg__bench_report(&r, &f);
    tg__bench_run(name[2], add, &x, &r);
    tg__bench_report(&r, &f);
}

int main(void)
{
    struct antireplay *ar = antireplay_new((size_t)1 << 20, 300);
    if (!ar) {
        fprintf(stderr, "antireplay: cannot allocate the cache\n");
        return 1;
    }
    rows(ar, ANTIREPLAY_TLS, 16, "tls");
    rows(ar, ANTIREPLAY_OBFS2, 48, "obfs2");
    struct antireplay_stats st;
    antireplay_get_stats(ar, &st);
    printf("bench=proxy_antireplay_cache inserts=%llu early_evictions=%llu capacity=%zu\n",
           (unsigned long long)st.inserts, (unsigned long long)st.early_evictions, st.capacity);
    tg__bench_table();
    antireplay_free(ar);
    return 0;
}
