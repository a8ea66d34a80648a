/*
 * core/slab: objects carved densely from 64 KiB slabs of their own, each object's slab found
 * from its address; a slab whose objects are all back goes to the system (one empty kept).
 * Its debug check is tested in test_pool_check.c.
 */
#include "tgtest.h"

#include "core/slab.h"

#include <stdint.h>
#include <string.h>

enum { OBJ = 424, N = 1000 };

static void *objs[N];

static void test_slab_dense_and_returned(void **state)
{
    (void)state;
    tg__slab s;
    tg__slab_init(&s, OBJ);
    assert_int_equal(s.obj_size, 424); /* a multiple of 8: no rounding to 16 */
    size_t per = s.per_slab;
    assert_true(per >= 150); /* 64 KiB minus the header, 424 bytes each */
    for (int i = 0; i < N; i++) {
        objs[i] = tg__slab_get(&s);
        assert_non_null(objs[i]);
        assert_int_equal((uintptr_t)objs[i] % 8, 0);
        memset(objs[i], i & 0xff, OBJ); /* the whole object is ours */
    }
    assert_int_equal(s.in_use, N);
    assert_int_equal(s.slabs, (N + per - 1) / per); /* densely packed: no slab half used */
    /* objects of one slab are adjacent and do not overlap */
    for (size_t i = 1; i < per; i++)
        assert_int_equal((char *)objs[i] - (char *)objs[i - 1], OBJ);
    for (int i = 0; i < N; i++) {
        const unsigned char *b = objs[i];
        assert_int_equal(b[0], i & 0xff);
        assert_int_equal(b[OBJ - 1], i & 0xff);
    }
    /* every other object back: no slab is empty, all stay */
    size_t slabs = s.slabs;
    for (int i = 0; i < N; i += 2)
        tg__slab_put(&s, objs[i]);
    assert_int_equal(s.slabs, slabs);
    /* a get reuses a returned object, no new slab */
    uint64_t maps = s.maps;
    void *again = tg__slab_get(&s);
    assert_non_null(again);
    assert_int_equal(s.maps, maps);
    tg__slab_put(&s, again);
    /* all back: one empty slab kept, the rest unmapped */
    for (int i = 1; i < N; i += 2)
        tg__slab_put(&s, objs[i]);
    assert_int_equal(s.in_use, 0);
    assert_int_equal(s.slabs, 1);
    /* the kept slab serves the next get without a map */
    void *one = tg__slab_get(&s);
    assert_non_null(one);
    assert_int_equal(s.maps, maps);
    tg__slab_put(&s, one);
    tg__slab_put(&s, NULL);
    tg__slab_cleanup(&s);
    assert_int_equal(s.slabs, 0);
    tg__slab_cleanup(NULL);
}

/* A full slab that gets room back is used again before a new one is mapped. */
static void test_slab_full_gets_room(void **state)
{
    (void)state;
    tg__slab s;
    tg__slab_init(&s, 1000);
    size_t per = s.per_slab;
    for (size_t i = 0; i < 2 * per; i++)
        objs[i] = tg__slab_get(&s);
    assert_int_equal(s.slabs, 2);
    tg__slab_put(&s, objs[3]); /* the first slab, full until now */
    assert_ptr_equal(tg__slab_get(&s), objs[3]);
    assert_int_equal(s.slabs, 2);
    for (size_t i = 0; i < 2 * per; i++)
        tg__slab_put(&s, objs[i]);
    tg__slab_cleanup(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slab_dense_and_returned),
        cmocka_unit_test(test_slab_full_gets_room),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
