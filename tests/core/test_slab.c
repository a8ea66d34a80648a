/*
 * core/slab: objects carved densely from 64 KiB slabs of their own, each object's slab found
 * from its address; a slab whose objects are all back goes to the system (one empty kept);
 * a walk visits exactly the objects in use, and its callback may put any of them.
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

/* What a walk saw: each object (found by its index in objs) at most once. */
struct seen {
    tg__slab *s;
    size_t n;
    void *first;
    unsigned char hits[N];
    int mode; /* 0 look, 1 put the visited, 2 put the visited and the next two, 3 get one */
    int nested;
    size_t ahead; /* objects put before the walk reached them */
};

static size_t index_of(const void *obj)
{
    for (size_t i = 0; i < N; i++)
        if (objs[i] == obj)
            return i;
    fail_msg("the walk visited %p, which no get returned", obj);
    return 0;
}

static void visit(void *obj, void *arg);

static void visit_inner(void *obj, void *arg)
{
    (void)obj;
    (void)arg;
}

static void visit(void *obj, void *arg)
{
    struct seen *w = arg;
    size_t i = index_of(obj);
    assert_int_equal(w->hits[i], 0);
    w->hits[i] = 1;
    if (!w->n++)
        w->first = obj;
    if (w->nested)
        tg__slab_each(w->s, visit_inner, NULL); /* a walk within a walk */
    if (w->mode == 1 || w->mode == 2) {
        tg__slab_put(w->s, obj);
        objs[i] = NULL;
    }
    if (w->mode == 2)
        for (size_t k = i + 1; k < N && k <= i + 2; k++) {
            if (objs[k])
                w->ahead++;
            tg__slab_put(w->s, objs[k]); /* ahead of the walk: not visited */
            objs[k] = NULL;
        }
    if (w->mode == 3 && w->n < 4 * N) {
        void *o = tg__slab_get(w->s);
        assert_non_null(o);
        tg__slab_put(w->s, o); /* the next get gets it again: the walk goes on */
    }
}

/* Every object in use once, none of the free ones, in any slab. */
static void test_slab_each_visits_live(void **state)
{
    (void)state;
    tg__slab s;
    tg__slab_init(&s, 368);
    assert_true(s.per_slab >= 170); /* 64 KiB less the header and its bits */
    for (int i = 0; i < N; i++)
        objs[i] = tg__slab_get(&s);
    assert_true(s.slabs >= 5);
    for (int i = 0; i < N; i += 3) {
        tg__slab_put(&s, objs[i]);
        objs[i] = NULL;
    }
    static struct seen w;
    w = (struct seen){.s = &s};
    tg__slab_each(&s, visit, &w);
    for (int i = 0; i < N; i++)
        assert_int_equal(w.hits[i], objs[i] != NULL);
    assert_int_equal(w.n, s.in_use);
    assert_ptr_equal(tg__slab_first(&s), w.first);
    /* a freed object handed out again is visited again */
    void *again = tg__slab_get(&s);
    objs[index_of(NULL)] = again;
    w = (struct seen){.s = &s, .mode = 3};
    tg__slab_each(&s, visit, &w);
    assert_int_equal(w.n, s.in_use);
    for (int i = 0; i < N; i++)
        if (objs[i])
            tg__slab_put(&s, objs[i]);
    assert_int_equal(s.in_use, 0);
    w = (struct seen){.s = &s};
    tg__slab_each(&s, visit, &w);
    assert_int_equal(w.n, 0);
    assert_null(tg__slab_first(&s));
    tg__slab_cleanup(&s);
}

/* The callback puts what it visits and objects ahead of it: whole slabs empty during the
   walk and must stay mapped until it ends (without that the walk reads an unmapped slab),
   then they go back to the system all but one. */
static void test_slab_each_puts(void **state)
{
    (void)state;
    for (int nested = 0; nested < 2; nested++)
        for (int mode = 1; mode <= 2; mode++) {
            tg__slab s;
            tg__slab_init(&s, 368);
            for (int i = 0; i < N; i++)
                objs[i] = tg__slab_get(&s);
            size_t slabs = s.slabs;
            assert_true(slabs >= 5);
            static struct seen w;
            w = (struct seen){.s = &s, .mode = mode, .nested = nested};
            tg__slab_each(&s, visit, &w);
            assert_int_equal(s.in_use, 0);
            assert_int_equal(w.n + w.ahead, N); /* each visited or put before its turn */
            assert_true(mode == 1 ? w.ahead == 0 : w.ahead >= N / 2);
            assert_int_equal(s.slabs, 1); /* the emptied ones released once the walk ended */
            /* the pool works on: a get takes the kept slab */
            uint64_t maps = s.maps;
            void *o = tg__slab_get(&s);
            assert_non_null(o);
            assert_int_equal(s.maps, maps);
            tg__slab_put(&s, o);
            tg__slab_cleanup(&s);
            assert_int_equal(s.slabs, 0);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slab_dense_and_returned),
        cmocka_unit_test(test_slab_full_gets_room),
        cmocka_unit_test(test_slab_each_visits_live),
        cmocka_unit_test(test_slab_each_puts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
