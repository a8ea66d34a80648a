/*
 * The pool's item check (TGKIT_CHECKS: Debug and sanitizer builds, pool.c): a buffer put
 * back twice, or into a pool that did not hand it out, aborts at once with a message naming
 * the mistake, in a child process. A release build has no check: the test says so and
 * ctest reports it skipped.
 */
#include "tgtest.h"

#include "core/pool.h"

#if TGKIT_CHECKS
static void double_put(void *arg)
{
    (void)arg;
    tg__pool p;
    tg__pool_init(&p, 64, 4);
    void *b = tg__pool_get(&p);
    tg__pool_put(&p, b);
    tg__pool_put(&p, b); /* the mistake */
}

static void foreign_put(void *arg)
{
    (void)arg;
    tg__pool a, b;
    tg__pool_init(&a, 64, 4);
    tg__pool_init(&b, 64, 4);
    tg__pool_put(&b, tg__pool_get(&a)); /* the mistake */
}
#endif

static void test_double_put_aborts(void **state)
{
    (void)state;
#if TGKIT_CHECKS
    tgtest_expect_abort(double_put, NULL, "put twice (already free)");
#else
    tgtest_skip("the pool's item check is compiled out of release builds (TGKIT_CHECKS)");
#endif
}

static void test_foreign_put_aborts(void **state)
{
    (void)state;
#if TGKIT_CHECKS
    tgtest_expect_abort(foreign_put, NULL, "not this pool's item");
#else
    tgtest_skip("the pool's item check is compiled out of release builds (TGKIT_CHECKS)");
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_double_put_aborts),
        cmocka_unit_test(test_foreign_put_aborts),
    };
    return tgtest_result(cmocka_run_group_tests(tests, NULL, NULL));
}
