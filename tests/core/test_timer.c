/* Tests for core/timer: heap order and links, FIFO ties, callbacks that rearm, cancel and
 * free, the injected clock, timeout rounding, and 100,000 timers in virtual time. */
#include "tgtest.h"

#include "core/timer.h"

#include <limits.h>

struct vclock {
    uint64_t now;
};

static uint64_t vclock_now(void *user)
{
    return ((struct vclock *)user)->now;
}

struct rec {
    tg__timer t;
    int id;
    int fired;
    uint64_t fired_at;
    bool cancelled;
};

static uint64_t g_last_deadline, g_last_seq;
static size_t g_order_errors, g_fired;

static void on_rec(tg__timer *t, uint64_t now)
{
    struct rec *r = t->user;
    r->fired++;
    r->fired_at = now;
    if (t->deadline_ns > now)
        g_order_errors++;
    if (t->deadline_ns < g_last_deadline ||
        (t->deadline_ns == g_last_deadline && t->seq < g_last_seq))
        g_order_errors++;
    g_last_deadline = t->deadline_ns;
    g_last_seq = t->seq;
    g_fired++;
}

static void reset_globals(void)
{
    g_last_deadline = 0;
    g_last_seq = 0;
    g_order_errors = 0;
    g_fired = 0;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    return tgtest_xorshift64(&rng_state);
}

static void test_empty_and_timeout(void **state)
{
    (void)state;
    struct vclock c = {1000};
    tg__timers h;
    tg__timers_init(&h, vclock_now, &c);
    assert_int_equal(tg__timers_now(&h), 1000);
    assert_true(tg__timers_next_deadline(&h) == UINT64_MAX);
    assert_int_equal(tg__timers_timeout_ms(&h, 0), -1);
    assert_int_equal(tg__timers_run_due(&h, UINT64_MAX), 0);

    struct rec r = {.id = 1};
    tg__timer_init(&r.t, on_rec, &r);
    assert_false(tg__timer_armed(&r.t));
    assert_false(tg__timer_cancel(&h, &r.t)); /* idle: no-op */
    tg__timer_add_in(&h, &r.t, 1500000);      /* 1.5 ms after the virtual 1000 ns */
    assert_true(tg__timer_armed(&r.t));
    assert_int_equal(tg__timers_next_deadline(&h), 1501000);
    assert_int_equal(tg__timers_timeout_ms(&h, 1000), 2);       /* rounded up */
    assert_int_equal(tg__timers_timeout_ms(&h, 501000), 1);     /* exactly 1 ms */
    assert_int_equal(tg__timers_timeout_ms(&h, 1501000), 0);    /* due */
    assert_int_equal(tg__timers_timeout_ms(&h, 9999999999), 0); /* overdue */
    tg__timer_add(&h, &r.t, UINT64_MAX - 1);
    assert_int_equal(tg__timers_timeout_ms(&h, 0), INT32_MAX); /* capped */
    assert_int_equal(tg__timers_count(&h), 1);                 /* moved, not added twice */
    c.now = UINT64_MAX - 5;
    tg__timer_add_in(&h, &r.t, 100); /* saturates instead of wrapping into the past */
    assert_true(tg__timers_next_deadline(&h) == UINT64_MAX);
    assert_true(tg__timer_cancel(&h, &r.t));
    assert_int_equal(tg__timers_count(&h), 0);
    assert_int_equal(tg__timers_run_due(&h, UINT64_MAX), 0);
    assert_int_equal(r.fired, 0);
}

static void test_default_clock_is_monotonic(void **state)
{
    (void)state;
    tg__timers h;
    tg__timers_init(&h, NULL, NULL);
    uint64_t a = tg__timers_now(&h), b = tg__timers_now(&h);
    assert_true(a > 0 && b >= a);
}

static void test_order_and_fifo_ties(void **state)
{
    (void)state;
    tg__timers h;
    tg__timers_init(&h, NULL, NULL);
    enum { N = 300 };
    struct rec r[N];
    reset_globals();
    for (int i = 0; i < N; i++) {
        r[i] = (struct rec){.id = i};
        tg__timer_init(&r[i].t, on_rec, &r[i]);
        tg__timer_add(&h, &r[i].t, 10 + (uint64_t)(i % 7)); /* many equal deadlines */
        assert_int_equal(tg__timers_check(&h), 0);
    }
    assert_int_equal(tg__timers_next_deadline(&h), 10);
    assert_int_equal(tg__timers_run_due(&h, 9), 0);
    assert_int_equal(tg__timers_run_due(&h, 12), 3 * ((N + 6) / 7));
    assert_int_equal(tg__timers_check(&h), 0);
    assert_int_equal(tg__timers_run_due(&h, 100), N - 3 * ((N + 6) / 7));
    assert_int_equal(g_order_errors, 0); /* deadline order, arming order among equals */
    for (int i = 0; i < N; i++)
        assert_int_equal(r[i].fired, 1);
    assert_int_equal(tg__timers_count(&h), 0);
}

/* A callback rearming itself for "now" fires once per run_due, not forever. */
struct self_rearm {
    tg__timer t;
    tg__timers *h;
    int fired;
};
static void on_self_rearm(tg__timer *t, uint64_t now)
{
    struct self_rearm *s = t->user;
    s->fired++;
    tg__timer_add(s->h, t, now); /* already due */
}

static void test_rearm_for_now_waits_for_next_run(void **state)
{
    (void)state;
    tg__timers h;
    tg__timers_init(&h, NULL, NULL);
    struct self_rearm s = {.h = &h};
    tg__timer_init(&s.t, on_self_rearm, &s);
    tg__timer_add(&h, &s.t, 5);
    assert_int_equal(tg__timers_run_due(&h, 5), 1);
    assert_int_equal(s.fired, 1);
    assert_true(tg__timer_armed(&s.t));
    assert_int_equal(tg__timers_run_due(&h, 5), 1);
    assert_int_equal(s.fired, 2);
    tg__timer_cancel(&h, &s.t);
    assert_int_equal(tg__timers_run_due(&h, 5), 0);
}

/* The first due timer cancels the second (due in the same run) and rearms the third: neither
 * fires in this run; the fourth (not due) is cancelled from the callback too. */
struct group {
    struct rec r[4];
    tg__timers *h;
};
static struct group *g_group;
static void on_canceller(tg__timer *t, uint64_t now)
{
    on_rec(t, now);
    assert_true(tg__timer_cancel(g_group->h, &g_group->r[1].t));
    tg__timer_add(g_group->h, &g_group->r[2].t, now + 50);
    assert_true(tg__timer_cancel(g_group->h, &g_group->r[3].t));
    assert_int_equal(tg__timers_check(g_group->h), 0);
}

static void test_callback_cancels_and_rearms_others(void **state)
{
    (void)state;
    tg__timers h;
    tg__timers_init(&h, NULL, NULL);
    struct group g = {.h = &h};
    g_group = &g;
    reset_globals();
    for (int i = 0; i < 4; i++) {
        g.r[i].id = i;
        tg__timer_init(&g.r[i].t, i == 0 ? on_canceller : on_rec, &g.r[i]);
        tg__timer_add(&h, &g.r[i].t, i < 3 ? 10 : 1000);
    }
    assert_int_equal(tg__timers_run_due(&h, 20), 1);
    assert_int_equal(g.r[0].fired, 1);
    assert_int_equal(g.r[1].fired, 0);
    assert_false(tg__timer_armed(&g.r[1].t));
    assert_int_equal(g.r[2].fired, 0);
    assert_int_equal(tg__timers_count(&h), 1); /* only r[2], rearmed at 70 */
    assert_int_equal(tg__timers_next_deadline(&h), 70);
    reset_globals();
    assert_int_equal(tg__timers_run_due(&h, 10000), 1);
    assert_int_equal(g.r[2].fired, 1);
    assert_int_equal(g.r[3].fired, 0);
}

/* A callback may free its own timer's memory (ASan watches). */
static void on_free_self(tg__timer *t, uint64_t now)
{
    (void)now;
    int *fired = *(int **)t->user;
    (*fired)++;
    free(t->user);
}

static void test_callback_frees_its_timer(void **state)
{
    (void)state;
    tg__timers h;
    tg__timers_init(&h, NULL, NULL);
    int fired = 0;
    for (int i = 0; i < 10; i++) {
        struct {
            int *fired;
            tg__timer t;
        } *box = malloc(sizeof *box);
        assert_non_null(box);
        box->fired = &fired;
        tg__timer_init(&box->t, on_free_self, box);
        tg__timer_add(&h, &box->t, (uint64_t)(i % 3));
    }
    assert_int_equal(tg__timers_run_due(&h, 2), 10);
    assert_int_equal(fired, 10);
    assert_int_equal(tg__timers_count(&h), 0);
}

/* 100,000 timers: random deadlines, a third cancelled, a third rearmed, links checked along
 * the way, then run in virtual time: each survivor fires once, at or after its deadline, in
 * order; no cancelled one fires. */
static void test_hundred_thousand(void **state)
{
    (void)state;
    enum { N = 100000 };
    struct vclock c = {0};
    tg__timers h;
    tg__timers_init(&h, vclock_now, &c);
    struct rec *r = calloc(N, sizeof *r);
    assert_non_null(r);
    reset_globals();
    for (int i = 0; i < N; i++) {
        r[i].id = i;
        tg__timer_init(&r[i].t, on_rec, &r[i]);
        tg__timer_add_in(&h, &r[i].t, 1 + rnd() % 1000000000u); /* within 1 s */
        if (i % 20000 == 0)
            assert_int_equal(tg__timers_check(&h), 0);
    }
    assert_int_equal(tg__timers_count(&h), N);
    assert_int_equal(tg__timers_check(&h), 0);
    size_t live = N;
    for (int i = 0; i < N; i++) {
        size_t j = rnd() % N;
        if (r[j].cancelled)
            continue;
        if (i % 2) {
            assert_true(tg__timer_cancel(&h, &r[j].t));
            r[j].cancelled = true;
            live--;
        } else {
            tg__timer_add(&h, &r[j].t, rnd() % 1200000000u);
        }
    }
    assert_int_equal(tg__timers_count(&h), live);
    assert_int_equal(tg__timers_check(&h), 0);
    size_t runs = 0;
    while (tg__timers_count(&h) && runs < 100000) {
        uint64_t next = tg__timers_next_deadline(&h);
        assert_true(next >= c.now);
        c.now += 1 + rnd() % 5000000u; /* steps of up to 5 ms of virtual time */
        tg__timers_run_due(&h, c.now);
        runs++;
        if (runs % 50 == 0)
            assert_int_equal(tg__timers_check(&h), 0);
    }
    assert_int_equal(tg__timers_count(&h), 0);
    assert_int_equal(g_fired, live);
    assert_int_equal(g_order_errors, 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(r[i].fired, r[i].cancelled ? 0 : 1);
    free(r);
}

/* Removal from every position of heaps of every size up to 64 (the hole-filling paths). */
static void test_remove_each_position(void **state)
{
    (void)state;
    struct rec r[64];
    for (int n = 1; n <= 64; n++) {
        for (int victim = 0; victim < n; victim++) {
            tg__timers h;
            tg__timers_init(&h, NULL, NULL);
            reset_globals();
            for (int i = 0; i < n; i++) {
                r[i] = (struct rec){.id = i};
                tg__timer_init(&r[i].t, on_rec, &r[i]);
                tg__timer_add(&h, &r[i].t, (uint64_t)((i * 37) % 11));
            }
            assert_true(tg__timer_cancel(&h, &r[victim].t));
            assert_int_equal(tg__timers_check(&h), 0);
            assert_int_equal(tg__timers_run_due(&h, 100), (size_t)n - 1);
            assert_int_equal(g_order_errors, 0);
            assert_int_equal(r[victim].fired, 0);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_and_timeout),
        cmocka_unit_test(test_default_clock_is_monotonic),
        cmocka_unit_test(test_order_and_fifo_ties),
        cmocka_unit_test(test_rearm_for_now_waits_for_next_run),
        cmocka_unit_test(test_callback_cancels_and_rearms_others),
        cmocka_unit_test(test_callback_frees_its_timer),
        cmocka_unit_test(test_remove_each_position),
        cmocka_unit_test(test_hundred_thousand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
