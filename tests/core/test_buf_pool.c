/* Tests for core/buf (growth, cap, printf, consume) and core/pool (reuse, stats, watermark,
   decay). */
#include "tgtest.h"

#include "core/alloc.h"
#include "core/buf.h"
#include "core/pool.h"

#include <errno.h>

static void test_buf_append_and_cap(void **state)
{
    (void)state;
    tg__buf b;
    tg__buf_init(&b, 10);
    assert_string_equal(tg__buf_cstr(&b), "");
    assert_int_equal(tg__buf_puts(&b, "hello"), 0);
    assert_int_equal(tg__buf_putc(&b, ' '), 0);
    assert_int_equal(tg__buf_append(&b, "worl", 4), 0);
    assert_int_equal(b.len, 10);
    assert_string_equal(tg__buf_cstr(&b), "hello worl");
    assert_int_equal(tg__buf_putc(&b, 'd'), -E2BIG); /* cap holds, content unchanged */
    assert_string_equal(tg__buf_cstr(&b), "hello worl");
    tg__buf_consume(&b, 6);
    assert_string_equal(tg__buf_cstr(&b), "worl");
    tg__buf_consume(&b, 100);
    assert_int_equal(b.len, 0);
    tg__buf_cleanup(&b);
    tg__buf_cleanup(NULL);
}

static void test_buf_printf_long(void **state)
{
    (void)state;
    tg__buf b;
    tg__buf_init(&b, 0);
    char big[1000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(tg__buf_printf(&b, "%d:%s", 42, big), 0);
    assert_int_equal(b.len, 3 + 999);
    assert_memory_equal(b.data, "42:xxx", 6);
    size_t len;
    char *d = tg__buf_detach(&b, &len);
    assert_int_equal(len, 1002);
    assert_null(b.data);
    tg__free(d);
}

static void test_buf_nomem(void **state)
{
    (void)state;
    tg__buf b;
    tg__buf_init(&b, 0);
    tg__alloc_fail_at(1);
    assert_int_equal(tg__buf_puts(&b, "abc"), -ENOMEM);
    assert_int_equal(b.len, 0);
    assert_int_equal(tg__buf_puts(&b, "abc"), 0);
    tg__buf_cleanup(&b);
}

static void test_pool_reuse_and_stats(void **state)
{
    (void)state;
    tg__pool p;
    tg__pool_init(&p, 16384, 4);
    void *bufs[10];
    for (int i = 0; i < 10; i++) {
        bufs[i] = tg__pool_get(&p);
        assert_non_null(bufs[i]);
        memset(bufs[i], i, 16384);
    }
    tg__pool_stats st = tg__pool_stats_get(&p);
    assert_int_equal(st.in_use, 10);
    assert_int_equal(st.high_water, 10);
    assert_int_equal(st.allocs, 10);
    for (int i = 0; i < 10; i++)
        tg__pool_put(&p, bufs[i]);
    st = tg__pool_stats_get(&p);
    assert_int_equal(st.in_use, 0);
    assert_int_equal(st.free, 4); /* the low watermark returned the rest */
    /* Warm: the next four gets come from the freelist, LIFO order. */
    void *a = tg__pool_get(&p);
    assert_ptr_equal(a, bufs[3]);
    void *b = tg__pool_get(&p);
    void *c = tg__pool_get(&p);
    void *d = tg__pool_get(&p);
    assert_int_equal(tg__pool_stats_get(&p).allocs, 10);
    void *e = tg__pool_get(&p);
    assert_int_equal(tg__pool_stats_get(&p).allocs, 11);
    tg__pool_put(&p, a);
    tg__pool_put(&p, b);
    tg__pool_put(&p, c);
    tg__pool_put(&p, d);
    tg__pool_put(&p, e);
    tg__pool_put(&p, NULL);
    tg__pool_trim(&p, 1);
    assert_int_equal(tg__pool_stats_get(&p).free, 1);
    assert_int_equal(tg__pool_stats_get(&p).high_water, 10);
    tg__pool_cleanup(&p);
}

/* Decay frees what no get took since the last call, down to the floor, and keeps what a
   steady load reuses. */
static void test_pool_decay(void **state)
{
    (void)state;
    tg__pool p;
    tg__pool_init(&p, 1024, 64);
    void *bufs[40];
    for (int i = 0; i < 40; i++)
        bufs[i] = tg__pool_get(&p);
    for (int i = 0; i < 40; i++)
        tg__pool_put(&p, bufs[i]);
    assert_int_equal(tg__pool_stats_get(&p).free, 40);
    /* the burst's period: free_low was 0 (all 40 were taken), nothing is surplus yet */
    assert_int_equal(tg__pool_decay(&p, 4), 0);
    assert_int_equal(tg__pool_stats_get(&p).free, 40);
    /* a period in which 10 at most were in use at once: 30 never left the cache */
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 10; i++)
            bufs[i] = tg__pool_get(&p);
        for (int i = 0; i < 10; i++)
            tg__pool_put(&p, bufs[i]);
    }
    assert_int_equal(tg__pool_stats_get(&p).free_low, 30);
    assert_int_equal(tg__pool_decay(&p, 4), 30 * 1024);
    assert_int_equal(tg__pool_stats_get(&p).free, 10);
    assert_int_equal(tg__pool_stats_get(&p).decayed, 30);
    /* a quiet period: all surplus, but the floor stays */
    assert_int_equal(tg__pool_decay(&p, 4), 6 * 1024);
    assert_int_equal(tg__pool_stats_get(&p).free, 4);
    assert_int_equal(tg__pool_decay(&p, 4), 0);
    /* the floor cached, a get is no malloc */
    uint64_t allocs = tg__pool_stats_get(&p).allocs;
    void *a = tg__pool_get(&p);
    assert_int_equal(tg__pool_stats_get(&p).allocs, allocs);
    tg__pool_put(&p, a);
    tg__pool_cleanup(&p);
}

static void test_pool_nomem(void **state)
{
    (void)state;
    tg__pool p;
    tg__pool_init(&p, 64, 0);
    tg__alloc_fail_at(1);
    assert_null(tg__pool_get(&p));
    assert_int_equal(tg__pool_stats_get(&p).in_use, 0);
    tg__pool_cleanup(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buf_append_and_cap), cmocka_unit_test(test_buf_printf_long),
        cmocka_unit_test(test_buf_nomem),          cmocka_unit_test(test_pool_reuse_and_stats),
        cmocka_unit_test(test_pool_nomem),         cmocka_unit_test(test_pool_decay),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
