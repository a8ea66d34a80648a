/* Tests for proxy/seen: counting within a window, the order of the addresses, replacement of
 * the least recently noted one at SEEN_ADDRS, a long random sequence checked against a plain
 * model (the index's deletions included), a wall clock set back, concurrent notes, bad
 * arguments and allocation failure. */
#include "tgtest.h"

#include <pthread.h>

#include "core/alloc.h"
#include "proxy/engine/seen.h"

static void addr_of(uint32_t i, uint8_t a[16])
{
    memset(a, 0, 16);
    a[10] = a[11] = 0xff; /* IPv4 mapped, as conn.c notes them */
    memcpy(a + 12, &i, 4);
}

static uint32_t id_of(const uint8_t a[16])
{
    uint32_t i;
    memcpy(&i, a + 12, 4);
    return i;
}

static void test_count_and_order(void **state)
{
    (void)state;
    struct seen *s = seen_new(4);
    assert_non_null(s);
    struct seen_addr out[SEEN_ADDRS];
    int64_t last = -1;
    assert_int_equal(seen_get(s, 1, 1000, 3600, out, SEEN_ADDRS, &last), 0);
    assert_int_equal(last, 0); /* never */
    uint8_t a[16];
    addr_of(1, a);
    seen_note(s, 1, a, 1000);
    addr_of(2, a);
    seen_note(s, 1, a, 1001);
    addr_of(1, a);
    seen_note(s, 1, a, 1002);    /* again: counted once, now the newest */
    seen_note(s, 1, NULL, 1003); /* an unknown address: only the time */
    assert_int_equal(seen_get(s, 1, 1003, 3600, out, SEEN_ADDRS, &last), 2);
    assert_int_equal(last, 1003);
    assert_int_equal(id_of(out[0].addr), 1);
    assert_int_equal(out[0].at, 1002);
    assert_int_equal(id_of(out[1].addr), 2);
    assert_int_equal(out[1].at, 1001);
    /* the window: after now - window, exclusive */
    assert_int_equal(seen_get(s, 1, 1003, 2, out, SEEN_ADDRS, &last), 1);
    assert_int_equal(id_of(out[0].addr), 1);
    assert_int_equal(seen_get(s, 1, 1003, 1, NULL, 0, &last), 0);
    /* max limits what is copied, not the count */
    memset(out, 0xee, sizeof out);
    assert_int_equal(seen_get(s, 1, 1003, 3600, out, 1, &last), 2);
    assert_int_equal(id_of(out[0].addr), 1);
    assert_int_equal(out[1].at, (int64_t)0xeeeeeeeeeeeeeeeeull); /* untouched */
    /* other slots are apart */
    assert_int_equal(seen_get(s, 0, 1003, 3600, NULL, 0, &last), 0);
    assert_int_equal(last, 0);
    seen_free(s);
    seen_free(NULL);
}

static void test_replaces_least_recent(void **state)
{
    (void)state;
    struct seen *s = seen_new(1);
    uint8_t a[16];
    for (uint32_t i = 0; i < SEEN_ADDRS; i++) {
        addr_of(i, a);
        seen_note(s, 0, a, 100 + i);
    }
    addr_of(0, a);
    seen_note(s, 0, a, 1000); /* the oldest noted again: 1 is now the least recent */
    addr_of(SEEN_ADDRS, a);
    seen_note(s, 0, a, 1001); /* past the cap: replaces 1 */
    struct seen_addr out[SEEN_ADDRS];
    int64_t last;
    assert_int_equal(seen_get(s, 0, 1001, 100000, out, SEEN_ADDRS, &last), SEEN_ADDRS);
    assert_int_equal(id_of(out[0].addr), SEEN_ADDRS);
    assert_int_equal(id_of(out[1].addr), 0);
    for (size_t k = 0; k < SEEN_ADDRS; k++)
        assert_int_not_equal(id_of(out[k].addr), 1);
    assert_int_equal(id_of(out[SEEN_ADDRS - 1].addr), 2); /* the next to go */
    seen_free(s);
}

/* The model: the same list kept as a plain array, most recent first. */
struct model {
    uint32_t id[SEEN_ADDRS];
    int64_t at[SEEN_ADDRS];
    size_t n;
};

static void model_note(struct model *m, uint32_t id, int64_t at)
{
    size_t i = 0;
    while (i < m->n && m->id[i] != id)
        i++;
    if (i == m->n)
        i = m->n < SEEN_ADDRS ? m->n++ : SEEN_ADDRS - 1; /* new: a free place or the last's */
    memmove(m->id + 1, m->id, i * sizeof m->id[0]);
    memmove(m->at + 1, m->at, i * sizeof m->at[0]);
    m->id[0] = id;
    m->at[0] = at;
}

static uint64_t rnd(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* 200,000 notes over 700 addresses, some drawn far more often: every deletion from the index
   (the tail replaced), every shift, checked through the whole list after each batch. */
static void test_random_against_model(void **state)
{
    (void)state;
    struct seen *s = seen_new(2);
    static struct model m;
    m.n = 0;
    uint64_t x = 0x243f6a8885a308d3ull;
    struct seen_addr out[SEEN_ADDRS];
    uint8_t a[16];
    int64_t now = 5000, last;
    for (int round = 0; round < 2000; round++) {
        for (int k = 0; k < 100; k++) {
            uint64_t r = rnd(&x);
            uint32_t id = (uint32_t)(r % 8 < 5 ? (r >> 8) % 300 : (r >> 8) % 700);
            now += (int64_t)(r >> 60 == 0);
            addr_of(id, a);
            seen_note(s, 1, a, now);
            model_note(&m, id, now);
        }
        size_t n = seen_get(s, 1, now, UINT32_MAX, out, SEEN_ADDRS, &last);
        assert_int_equal(n, m.n);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(id_of(out[i].addr), m.id[i]);
            assert_int_equal(out[i].at, m.at[i]);
        }
    }
    assert_int_equal(m.n, SEEN_ADDRS);
    seen_free(s);
}

/* A wall clock set back: the later notes carry earlier times, and the entries from before
   the jump that are still inside the window keep counting. */
static void test_clock_set_back(void **state)
{
    (void)state;
    struct seen *s = seen_new(1);
    uint8_t a[16];
    addr_of(1, a);
    seen_note(s, 0, a, 2000);
    addr_of(2, a);
    seen_note(s, 0, a, 1000); /* clock set back */
    addr_of(3, a);
    seen_note(s, 0, a, 300); /* before the window: skipped, and the walk goes on */
    struct seen_addr out[4];
    int64_t last;
    assert_int_equal(seen_get(s, 0, 1000, 600, out, 4, &last), 2); /* 1 (after) and 2 */
    assert_int_equal(id_of(out[0].addr), 2);
    assert_int_equal(id_of(out[1].addr), 1);
    assert_int_equal(last, 2000); /* the last handshake never goes back */
    seen_free(s);
}

struct racer {
    struct seen *s;
    uint32_t base;
};

static void *race(void *p)
{
    struct racer *r = p;
    uint8_t a[16];
    for (uint32_t i = 0; i < 20000; i++) {
        addr_of(r->base + i % 200, a);
        seen_note(r->s, i % 3, a, 10 + i / 1000);
    }
    return NULL;
}

static void test_concurrent(void **state)
{
    (void)state;
    struct seen *s = seen_new(3);
    struct racer r[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        r[i] = (struct racer){s, (uint32_t)i * 100}; /* overlapping ranges of addresses */
        assert_int_equal(pthread_create(&th[i], NULL, race, &r[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    /* every slot saw addresses 0..499 in all; 256 kept, each once */
    for (uint32_t slot = 0; slot < 3; slot++) {
        struct seen_addr out[SEEN_ADDRS];
        int64_t last;
        size_t n = seen_get(s, slot, 100, 1000, out, SEEN_ADDRS, &last);
        assert_int_equal(n, SEEN_ADDRS);
        assert_int_equal(last, 29);
        bool dup[500] = {false};
        for (size_t k = 0; k < n; k++) {
            uint32_t id = id_of(out[k].addr);
            assert_true(id < 500);
            assert_false(dup[id]);
            dup[id] = true;
        }
    }
    seen_free(s);
}

static void test_bad_arguments_and_alloc_failure(void **state)
{
    (void)state;
    uint8_t a[16];
    addr_of(7, a);
    seen_note(NULL, 0, a, 1);
    struct seen_addr out[2];
    int64_t last = 5;
    assert_int_equal(seen_get(NULL, 0, 1, 10, out, 2, &last), 0);
    assert_int_equal(last, 0);
    tg__alloc_fail_at(1);
    assert_null(seen_new(2));
    tg__alloc_fail_at(0);
    struct seen *s = seen_new(2);
    assert_non_null(s);
    seen_note(s, 2, a, 1); /* out of range: ignored */
    assert_int_equal(seen_get(s, 2, 1, 10, out, 2, &last), 0);
    tg__alloc_fail_at(1); /* the slot's table cannot be allocated: the time is still kept */
    seen_note(s, 1, a, 50);
    assert_true(tg__alloc_failed());
    tg__alloc_fail_at(0);
    assert_int_equal(seen_get(s, 1, 50, 10, out, 2, &last), 0);
    assert_int_equal(last, 50);
    seen_note(s, 1, a, 51); /* and a later note allocates it */
    assert_int_equal(seen_get(s, 1, 51, 10, out, 2, &last), 1);
    assert_int_equal(id_of(out[0].addr), 7);
    seen_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_count_and_order),
        cmocka_unit_test(test_replaces_least_recent),
        cmocka_unit_test(test_random_against_model),
        cmocka_unit_test(test_clock_set_back),
        cmocka_unit_test(test_concurrent),
        cmocka_unit_test(test_bad_arguments_and_alloc_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
