/* Tests for core/alloc's tables (tg__calloc_table): zeroed, untouched until written (no page
 * resident at allocation, one page per page written), the small-size fallback, failure
 * injection and overflow, and zeroed mutexes usable as they are. */
#include "tgtest.h"

#include "core/alloc.h"

#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

/* Resident pages of [p, p + n) (mincore; p page-aligned). Reading a page would map the zero
   page, which mincore counts, so the tests only write. */
static size_t resident(void *p, size_t n)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), np = (n + pg - 1) / pg, r = 0;
    unsigned char vec[64];
    assert_true(np <= sizeof vec);
    assert_int_equal(mincore(p, n, vec), 0);
    for (size_t i = 0; i < np; i++)
        r += vec[i] & 1;
    return r;
}

static void test_table_untouched_until_written(void **state)
{
    (void)state;
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    /* issue 30's revocation marks: 8192 x 8 bytes, which calloc made resident at start */
    uint64_t *t = tg__calloc_table(8192, sizeof *t);
    assert_non_null(t);
    assert_int_equal((uintptr_t)t % pg, 0);
    assert_int_equal(resident(t, 8192 * sizeof *t), 0);
    t[3 * pg / sizeof *t] = 1; /* one write: its page alone */
    assert_int_equal(resident(t, 8192 * sizeof *t), 1);
    t[8191] = 2;
    assert_int_equal(resident(t, 8192 * sizeof *t), 2);
    tg__free_table(t, 8192, sizeof *t);
}

static void test_table_is_zeroed(void **state)
{
    (void)state;
    size_t sizes[] = {1, 100, TG__TABLE_MIN - 1, TG__TABLE_MIN, 3 * TG__TABLE_MIN + 5};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        unsigned char *p = tg__calloc_table(sizes[k], 1);
        assert_non_null(p);
        for (size_t i = 0; i < sizes[k]; i++)
            assert_int_equal(p[i], 0);
        memset(p, 0xa5, sizes[k]);
        tg__free_table(p, sizes[k], 1);
    }
    tg__free_table(NULL, 8192, 8); /* a no-op */
}

static void test_table_failures(void **state)
{
    (void)state;
    assert_null(tg__calloc_table(SIZE_MAX / 2, 4)); /* count * size overflows */
    tg__alloc_fail_at(1);
    assert_null(tg__calloc_table(8192, 8)); /* mapped ones fail on injection too */
    assert_true(tg__alloc_failed());
    tg__alloc_fail_at(1);
    assert_null(tg__calloc_table(16, 8)); /* and the calloc'd ones */
    assert_true(tg__alloc_failed());
    tg__alloc_fail_at(0);
}

static void test_zeroed_mutexes(void **state)
{
    (void)state;
    if (!tg__zeroed_mutex_ok())
        fail_msg("a zeroed mutex is not PTHREAD_MUTEX_INITIALIZER on this C library");
    pthread_mutex_t *m = tg__calloc_table(1024, sizeof *m);
    assert_non_null(m);
    for (size_t i = 0; i < 1024; i += 97) {
        assert_int_equal(pthread_mutex_lock(&m[i]), 0);
        assert_int_equal(pthread_mutex_trylock(&m[i]), EBUSY);
        assert_int_equal(pthread_mutex_unlock(&m[i]), 0);
    }
    tg__free_table(m, 1024, sizeof *m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_untouched_until_written),
        cmocka_unit_test(test_table_is_zeroed),
        cmocka_unit_test(test_table_failures),
        cmocka_unit_test(test_zeroed_mutexes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
