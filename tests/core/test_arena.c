/* Tests for core/arena: alignment, chunking, O(1) reset with reuse, caps, accounting. */
#include "tgtest.h"

#include "core/alloc.h"
#include "core/arena.h"

#include <stdalign.h>

static void test_alignment(void **state)
{
    (void)state;
    tg__arena a;
    tg__arena_init(&a, 256, 0);
    for (size_t sz = 1; sz < 100; sz += 7) {
        void *p = tg__arena_alloc(&a, sz);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % alignof(max_align_t), 0);
        memset(p, 0xab, sz);
    }
    for (size_t al = 1; al <= 4096; al <<= 1) {
        void *p = tg__arena_alloc_align(&a, 3, al);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % al, 0);
    }
    assert_null(tg__arena_alloc_align(&a, 3, 3));    /* not a power of two */
    assert_null(tg__arena_alloc_align(&a, 3, 8192)); /* beyond the supported maximum */
    tg__arena_cleanup(&a);
}

static void test_reset_reuses_chunks(void **state)
{
    (void)state;
    tg__arena a;
    tg__arena_init(&a, 1024, 0);
    for (int i = 0; i < 100; i++)
        assert_non_null(tg__arena_alloc(&a, 100));
    size_t reserved = tg__arena_reserved(&a);
    assert_true(reserved >= 100 * 100);
    assert_true(tg__arena_used(&a) >= 100 * 100);
    uint64_t before = tg__alloc_calls();
    for (int round = 0; round < 10; round++) {
        tg__arena_reset(&a);
        assert_int_equal(tg__arena_used(&a), 0);
        for (int i = 0; i < 100; i++)
            assert_non_null(tg__arena_alloc(&a, 100));
    }
    /* A warm arena serves the same work without touching malloc. */
    assert_int_equal(tg__alloc_calls() - before, 0);
    assert_int_equal(tg__arena_reserved(&a), reserved);
    tg__arena_cleanup(&a);
}

static void test_large_allocation_gets_own_chunk(void **state)
{
    (void)state;
    tg__arena a;
    tg__arena_init(&a, 128, 0);
    char *small = tg__arena_alloc(&a, 16);
    char *big = tg__arena_alloc(&a, 10000);
    assert_non_null(small);
    assert_non_null(big);
    memset(big, 1, 10000);
    char *small2 = tg__arena_alloc(&a, 16);
    assert_non_null(small2);
    memset(small, 2, 16);
    assert_int_equal(big[9999], 1); /* no overlap */
    tg__arena_cleanup(&a);
}

static void test_cap(void **state)
{
    (void)state;
    tg__arena a;
    tg__arena_init(&a, 1024, 4096);
    int ok = 0;
    while (tg__arena_alloc(&a, 512) && ok < 100)
        ok++;
    assert_true(ok >= 4 && ok <= 8);
    assert_true(tg__arena_reserved(&a) <= 4096);
    assert_null(tg__arena_alloc(&a, 5000));
    assert_null(tg__arena_alloc(&a, SIZE_MAX - 8)); /* overflow is refused, not wrapped */
    tg__arena_reset(&a);
    assert_non_null(tg__arena_alloc(&a, 512)); /* reset frees room again */
    tg__arena_cleanup(&a);
}

static void test_strdup_memdup(void **state)
{
    (void)state;
    tg__arena a;
    tg__arena_init(&a, 0, 0);
    char *s = tg__arena_strndup(&a, "hello world", 5);
    assert_string_equal(s, "hello");
    assert_string_equal(tg__arena_strdup(&a, "x"), "x");
    assert_null(tg__arena_strdup(&a, NULL));
    int v[3] = {1, 2, 3};
    int *d = tg__arena_memdup(&a, v, sizeof v);
    assert_memory_equal(d, v, sizeof v);
    unsigned char *z = tg__arena_zalloc(&a, 64);
    for (int i = 0; i < 64; i++)
        assert_int_equal(z[i], 0);
    tg__arena_cleanup(&a);
    tg__arena_cleanup(NULL);
}

static void test_out_of_memory(void **state)
{
    (void)state;
    tg__arena a;
    tg__arena_init(&a, 64, 0);
    tg__alloc_fail_at(1);
    assert_null(tg__arena_alloc(&a, 8));
    assert_true(tg__alloc_failed());
    assert_non_null(tg__arena_alloc(&a, 8)); /* recovers once memory is back */
    tg__arena_cleanup(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alignment),
        cmocka_unit_test(test_reset_reuses_chunks),
        cmocka_unit_test(test_large_allocation_gets_own_chunk),
        cmocka_unit_test(test_cap),
        cmocka_unit_test(test_strdup_memdup),
        cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
