/* Tests for proxy/antireplay: add-if-absent, kinds, expiry, fixed memory under churn, the
 * eviction accounting invariant, concurrent add-if-absent, allocation failure. */
#include "tgtest.h"

#include <pthread.h>

#include "core/alloc.h"
#include "proxy/engine/antireplay.h"
#include "proxy/wire/crypto.h"

static void key_of(uint32_t i, uint8_t k[16])
{
    memset(k, 0x5a, 16);
    memcpy(k, &i, sizeof i);
}

static void test_basic(void **state)
{
    (void)state;
    struct antireplay *ar = antireplay_new(1000, 300);
    assert_non_null(ar);
    uint8_t k[48] = {1, 2, 3};
    assert_false(antireplay_seen(ar, ANTIREPLAY_TLS, k, 16, 100));
    assert_false(antireplay_add(ar, ANTIREPLAY_TLS, k, 16, 100));
    assert_true(antireplay_seen(ar, ANTIREPLAY_TLS, k, 16, 100));
    assert_true(antireplay_add(ar, ANTIREPLAY_TLS, k, 16, 101));
    /* the other kind and other lengths are different keys */
    assert_false(antireplay_seen(ar, ANTIREPLAY_OBFS2, k, 16, 101));
    assert_false(antireplay_add(ar, ANTIREPLAY_OBFS2, k, 48, 101));
    assert_true(antireplay_add(ar, ANTIREPLAY_OBFS2, k, 48, 102));
    assert_false(antireplay_seen(ar, ANTIREPLAY_TLS, k, 15, 101));
    struct antireplay_stats st;
    antireplay_get_stats(ar, &st);
    assert_int_equal(st.capacity, 1024);
    assert_int_equal(st.inserts, 2);
    assert_int_equal(st.replays, 3);
    assert_int_equal(st.early_evictions, 0);
    assert_true(st.bytes >= 1024 * 12 && st.bytes < 1024 * 12 + 64 * 1024); /* 12-byte entries */
    antireplay_free(ar);
    antireplay_free(NULL);
    assert_null(antireplay_new(0, 300));
    assert_null(antireplay_new(10, 0));
    assert_false(antireplay_add(NULL, ANTIREPLAY_TLS, k, 16, 1));
}

static void test_expiry(void **state)
{
    (void)state;
    struct antireplay *ar = antireplay_new(64, 300);
    uint8_t k[16];
    key_of(7, k);
    assert_false(antireplay_add(ar, ANTIREPLAY_TLS, k, 16, 1000));
    assert_true(antireplay_seen(ar, ANTIREPLAY_TLS, k, 16, 1299));
    assert_false(antireplay_seen(ar, ANTIREPLAY_TLS, k, 16, 1300));
    assert_false(antireplay_add(ar, ANTIREPLAY_TLS, k, 16, 1300)); /* re-inserted */
    assert_true(antireplay_add(ar, ANTIREPLAY_TLS, k, 16, 1301));
    /* time 0 is a valid time, not "empty" */
    assert_false(antireplay_add(ar, ANTIREPLAY_OBFS2, k, 16, 0));
    assert_true(antireplay_seen(ar, ANTIREPLAY_OBFS2, k, 16, 0));
    antireplay_free(ar);
}

/* Live keys = inserted - early evictions, exactly; memory never changes. */
static void test_bounded(void **state)
{
    (void)state;
    struct antireplay *ar = antireplay_new(1024, 300);
    struct antireplay_stats st0, st;
    antireplay_get_stats(ar, &st0);
    uint8_t k[16];
    const uint32_t n = 600;
    for (uint32_t i = 0; i < n; i++) {
        key_of(i, k);
        assert_false(antireplay_add(ar, ANTIREPLAY_TLS, k, 16, 10));
    }
    antireplay_get_stats(ar, &st);
    uint32_t live = 0;
    for (uint32_t i = 0; i < n; i++) {
        key_of(i, k);
        live += antireplay_seen(ar, ANTIREPLAY_TLS, k, 16, 11);
    }
    assert_int_equal(live, n - st.early_evictions);
    /* churn: 20x capacity more keys; memory is what it was, evictions are counted */
    for (uint32_t i = n; i < n + 20 * 1024; i++) {
        key_of(i, k);
        antireplay_add(ar, ANTIREPLAY_TLS, k, 16, 12);
    }
    antireplay_get_stats(ar, &st);
    assert_int_equal(st.bytes, st0.bytes);
    assert_int_equal(st.capacity, st0.capacity);
    assert_true(st.early_evictions >= n + 20 * 1024 - 1024);
    /* the most recent key of the churn is still there */
    key_of(n + 20 * 1024 - 1, k);
    assert_true(antireplay_seen(ar, ANTIREPLAY_TLS, k, 16, 13));
    /* once everything expired, inserting evicts nothing early */
    uint64_t before = st.early_evictions;
    for (uint32_t i = 0; i < 512; i++) {
        key_of(1000000 + i, k);
        antireplay_add(ar, ANTIREPLAY_TLS, k, 16, 1000);
    }
    antireplay_get_stats(ar, &st);
    assert_true(st.early_evictions - before <= 512);
    antireplay_free(ar);
}

/* The table grows with the live keys instead of being touched at random over its maximum
   size: 20,000 keys in a table allowed 1M entries never evict early, every one is still
   there, and with two choices per key the table stays within 4x the live keys. */
static void test_grows_to_load(void **state)
{
    (void)state;
    struct antireplay *ar = antireplay_new(1u << 20, 300);
    struct antireplay_stats st;
    antireplay_get_stats(ar, &st);
    assert_int_equal(st.capacity, 4096);
    assert_int_equal(st.max_capacity, 1u << 20);
    uint8_t k[16];
    const uint32_t n = 20000;
    for (uint32_t i = 0; i < n; i++) {
        key_of(i, k);
        assert_false(antireplay_add(ar, ANTIREPLAY_TLS, k, 16, 10));
    }
    for (uint32_t i = 0; i < n; i++) {
        key_of(i, k);
        assert_true(antireplay_seen(ar, ANTIREPLAY_TLS, k, 16, 11));
    }
    antireplay_get_stats(ar, &st);
    assert_int_equal(st.early_evictions, 0);
    assert_int_equal(st.inserts, n);
    assert_true(st.capacity >= n && st.capacity <= 4 * n);
    assert_true(st.bytes < (size_t)st.capacity * 16 + 64 * 1024);
    /* keys that expired are not carried into a bigger table, nor seen */
    size_t cap = st.capacity;
    for (uint32_t i = 0; i < 4 * n; i++) {
        key_of(n + i, k);
        assert_false(antireplay_add(ar, ANTIREPLAY_TLS, k, 16, 400));
    }
    key_of(0, k);
    assert_false(antireplay_seen(ar, ANTIREPLAY_TLS, k, 16, 400));
    antireplay_get_stats(ar, &st);
    assert_true(st.capacity > cap);
    assert_int_equal(st.early_evictions, 0);
    antireplay_free(ar);
}

struct worker {
    struct antireplay *ar;
    uint32_t fresh;
};

static void *hammer(void *arg)
{
    struct worker *w = arg;
    uint8_t k[16];
    for (uint32_t i = 0; i < 5000; i++) {
        key_of(i, k);
        if (!antireplay_add(w->ar, ANTIREPLAY_OBFS2, k, 16, 50))
            w->fresh++;
    }
    return NULL;
}

/* Four threads add the same 5000 keys while the table doubles under them (from 4096). */
static void test_concurrent(void **state)
{
    (void)state;
    struct antireplay *ar = antireplay_new(1 << 16, 300);
    struct worker w[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct worker){.ar = ar};
        assert_int_equal(pthread_create(&t[i], NULL, hammer, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    struct antireplay_stats st;
    antireplay_get_stats(ar, &st);
    assert_int_equal(st.early_evictions, 0);
    /* each key was fresh for exactly one thread */
    assert_int_equal(w[0].fresh + w[1].fresh + w[2].fresh + w[3].fresh, 5000);
    assert_int_equal(st.inserts, 5000);
    assert_int_equal(st.replays, 15000);
    assert_int_equal(antireplay_live(ar, 50), 5000); /* counted once each, across doublings */
    antireplay_free(ar);
}

/* The set index the cache used before it was keyed: SHA-256(kind || key), first 8 bytes,
   modulo the number of sets. Anyone could compute it offline. */
static size_t unkeyed_set(const uint8_t k[16], size_t nsets)
{
    uint8_t kind = ANTIREPLAY_TLS, h[32];
    struct crypto_part parts[2] = {{&kind, 1}, {k, 16}};
    assert_int_equal(crypto_sha256(parts, 2, h), 0);
    uint64_t idx;
    memcpy(&idx, h, sizeof idx);
    return (size_t)(idx & (nsets - 1));
}

/* Eight keys chosen offline to share the target's unkeyed set used to push the target out
   (ways = 8); with a random per-cache index key they scatter and nothing is evicted. */
static void test_chosen_collisions_do_not_evict(void **state)
{
    (void)state;
    const size_t nsets = 1024 / ANTIREPLAY_WAYS;
    uint8_t target[16], k[16], chosen[ANTIREPLAY_WAYS][16];
    key_of(0, target);
    size_t want = unkeyed_set(target, nsets), found = 0;
    for (uint32_t i = 1; found < ANTIREPLAY_WAYS && i < 1000000; i++) {
        key_of(i, k);
        if (unkeyed_set(k, nsets) == want)
            memcpy(chosen[found++], k, 16);
    }
    assert_int_equal(found, ANTIREPLAY_WAYS);
    for (int round = 0; round < 4; round++) { /* four caches, four random keys */
        struct antireplay *ar = antireplay_new(1024, 300);
        assert_non_null(ar);
        bool early = true;
        assert_false(antireplay_insert(ar, ANTIREPLAY_TLS, target, 16, 10, &early));
        assert_false(early);
        for (int i = 0; i < ANTIREPLAY_WAYS; i++) {
            assert_false(antireplay_insert(ar, ANTIREPLAY_TLS, chosen[i], 16, 11, &early));
            assert_false(early);
        }
        assert_true(antireplay_seen(ar, ANTIREPLAY_TLS, target, 16, 12));
        struct antireplay_stats st;
        antireplay_get_stats(ar, &st);
        assert_int_equal(st.early_evictions, 0);
        uint64_t total = 99;
        assert_false(antireplay_warn_due(ar, 12, &total)); /* nothing to warn about */
        assert_int_equal(total, 0);
        antireplay_free(ar);
    }
}

/* A real early eviction is reported to the caller, counted, and warned about at most once
   a minute. */
static void test_early_eviction_reported(void **state)
{
    (void)state;
    struct antireplay *ar = antireplay_new(1024, 300);
    uint8_t k[16];
    uint32_t flagged = 0;
    for (uint32_t i = 0; i < 4096; i++) { /* 4x capacity within one window */
        bool early = false;
        key_of(i, k);
        antireplay_insert(ar, ANTIREPLAY_TLS, k, 16, 100, &early);
        flagged += early;
    }
    struct antireplay_stats st;
    antireplay_get_stats(ar, &st);
    assert_true(flagged >= 4096 - 1024);
    assert_int_equal(st.early_evictions, flagged);
    uint64_t total = 0;
    assert_true(antireplay_warn_due(ar, 100, &total));
    assert_int_equal(total, flagged);
    assert_false(antireplay_warn_due(ar, 100, &total));
    assert_false(antireplay_warn_due(ar, 159, &total));
    assert_true(antireplay_warn_due(ar, 160, &total));
    assert_false(antireplay_warn_due(NULL, 160, &total));
    antireplay_free(ar);
}

/* Keys of [from, to) that the cache remembers at now. */
static uint64_t count_seen(struct antireplay *ar, uint32_t from, uint32_t to, uint64_t now)
{
    uint8_t k[16];
    uint64_t n = 0;
    for (uint32_t i = from; i < to; i++) {
        key_of(i, k);
        n += antireplay_seen(ar, ANTIREPLAY_TLS, k, 16, now);
    }
    return n;
}

/* The live-entry count (metric antireplay_entries) is the number of keys the cache still
   remembers: it follows inserts, ignores replays, drops each second's keys exactly when
   their window ends, and loses the keys evicted early. */
static void test_live_entries(void **state)
{
    (void)state;
    struct antireplay *ar = antireplay_new(1024, 300);
    uint8_t k[16];
    assert_int_equal(antireplay_live(ar, 1000), 0);
    for (uint32_t i = 0; i < 100; i++) {
        key_of(i, k);
        assert_false(antireplay_add(ar, ANTIREPLAY_TLS, k, 16, 1000));
    }
    for (uint32_t i = 100; i < 150; i++) {
        key_of(i, k);
        assert_false(antireplay_add(ar, ANTIREPLAY_TLS, k, 16, 1100));
    }
    key_of(3, k);
    assert_true(antireplay_add(ar, ANTIREPLAY_TLS, k, 16, 1150)); /* a replay adds nothing */
    static const struct {
        uint64_t now, live;
    } want[] = {{1000, 100}, {1150, 150}, {1299, 150}, {1300, 50}, {1399, 50}, {1400, 0}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_int_equal(antireplay_live(ar, want[i].now), want[i].live);
        assert_int_equal(count_seen(ar, 0, 150, want[i].now), want[i].live);
    }
    key_of(0, k); /* an expired key recorded again counts again */
    assert_false(antireplay_add(ar, ANTIREPLAY_TLS, k, 16, 1400));
    assert_int_equal(antireplay_live(ar, 1400), 1);
    /* 3x capacity in one second: what is left is what was not evicted early */
    for (uint32_t i = 1000; i < 4072; i++) {
        key_of(i, k);
        antireplay_add(ar, ANTIREPLAY_TLS, k, 16, 2000);
    }
    struct antireplay_stats st;
    antireplay_get_stats(ar, &st);
    assert_true(st.early_evictions >= 3072 - 1024);
    assert_int_equal(antireplay_live(ar, 2000), 3072 - st.early_evictions);
    assert_int_equal(antireplay_live(ar, 2000), count_seen(ar, 1000, 4072, 2000));
    assert_true(antireplay_live(ar, 2000) <= st.capacity);
    assert_int_equal(antireplay_live(NULL, 2000), 0);
    antireplay_free(ar);
}

static void test_alloc_failure(void **state)
{
    (void)state;
    for (uint64_t nth = 1; nth <= 4; nth++) {
        tg__alloc_fail_at(nth);
        struct antireplay *ar = antireplay_new(100, 300);
        assert_null(ar);
        tg__alloc_fail_at(0);
    }
    struct antireplay *ar = antireplay_new(100, 300);
    assert_non_null(ar);
    antireplay_free(ar);
    /* a doubling that cannot allocate leaves the table as it is: inserts evict early */
    ar = antireplay_new(1u << 20, 300);
    tg__alloc_fail_at(1);
    uint8_t k[16];
    for (uint32_t i = 0; i < 5000; i++) {
        key_of(i, k);
        assert_false(antireplay_add(ar, ANTIREPLAY_TLS, k, 16, 10));
    }
    assert_true(tg__alloc_failed());
    tg__alloc_fail_at(0);
    key_of(4999, k);
    assert_true(antireplay_seen(ar, ANTIREPLAY_TLS, k, 16, 11));
    struct antireplay_stats st;
    antireplay_get_stats(ar, &st);
    assert_int_equal(st.capacity, 4096);
    assert_true(st.early_evictions >= 5000 - 4096);
    antireplay_free(ar);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),         cmocka_unit_test(test_expiry),
        cmocka_unit_test(test_bounded),       cmocka_unit_test(test_concurrent),
        cmocka_unit_test(test_chosen_collisions_do_not_evict),
        cmocka_unit_test(test_early_eviction_reported),
        cmocka_unit_test(test_alloc_failure),
        cmocka_unit_test(test_live_entries),
        cmocka_unit_test(test_grows_to_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
