/*
 * The pool's item check (TGKIT_CHECKS: Debug and sanitizer builds, pool.c): a buffer put
 * back twice, or into a pool that did not hand it out, aborts at once with a message naming
 * the mistake, in a child process; so does the slab's (slab.c) for an object put twice, into
 * another slab pool, or at an address inside an object. A release build has no check: the test says so and
 * ctest reports it skipped.
 */
#include "tgtest.h"

#include "core/pool.h"
#include "core/slab.h"

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

#if TGKIT_CHECKS
static void slab_double_put(void *arg)
{
    (void)arg;
    tg__slab s;
    tg__slab_init(&s, 64);
    void *a = tg__slab_get(&s);
    void *b = tg__slab_get(&s); /* keeps the slab in use after the first put */
    (void)b;
    tg__slab_put(&s, a);
    tg__slab_put(&s, a); /* the mistake */
}

static void slab_foreign_put(void *arg)
{
    (void)arg;
    tg__slab a, b;
    tg__slab_init(&a, 64);
    tg__slab_init(&b, 64);
    tg__slab_get(&b);
    tg__slab_put(&b, tg__slab_get(&a)); /* the mistake */
}

static void slab_misaligned_put(void *arg)
{
    (void)arg;
    tg__slab s;
    tg__slab_init(&s, 64);
    char *o = tg__slab_get(&s);
    tg__slab_put(&s, o + 8); /* the mistake: inside an object */
}
#endif

static void test_slab_checks(void **state)
{
    (void)state;
#if TGKIT_CHECKS
    tgtest_expect_abort(slab_double_put, NULL, "put twice (already free)");
    tgtest_expect_abort(slab_foreign_put, NULL, "not an object of this pool");
    tgtest_expect_abort(slab_misaligned_put, NULL, "not an object of this pool");
#else
    tgtest_skip("the slab's check is compiled out of release builds (TGKIT_CHECKS)");
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_double_put_aborts),
        cmocka_unit_test(test_foreign_put_aborts),
        cmocka_unit_test(test_slab_checks),
    };
    return tgtest_result(cmocka_run_group_tests(tests, NULL, NULL));
}
