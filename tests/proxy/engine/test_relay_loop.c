/* Unit tests of the engine's event loop (src/proxy/engine/loop.c): timers, deletion, stop. */
#include "tgtest.h"

#include "core/clock.h"
#include "proxy/engine/loop.h"

#include <errno.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

struct rec {
    struct loop_timer t;
    int id;
    int *order;
    int *n;
};

static void on_rec(struct loop *l, struct loop_timer *t)
{
    (void)l;
    struct rec *r = (struct rec *)(void *)t;
    r->order[(*r->n)++] = r->id;
}

/* A virtual clock: timers fire when the test moves it, never because real time passed. */
struct vclock {
    uint64_t ms;
};

static uint64_t vclock_read(void *ud)
{
    return ((struct vclock *)ud)->ms;
}

static void test_timers_fire_in_deadline_order(void **state)
{
    (void)state;
    struct loop l;
    struct vclock vc = {.ms = 1000};
    assert_int_equal(loop_init(&l), 0);
    loop_set_clock(&l, vclock_read, &vc);
    assert_int_equal(l.now_ms, 1000);
    struct loop_tq fast, slow;
    assert_int_equal(loop_tq_add(&l, &slow, 60), 0);
    assert_int_equal(loop_tq_add(&l, &fast, 20), 0);
    assert_int_equal(loop_next_deadline(&l), UINT64_MAX);
    int order[4], n = 0;
    struct rec r[4];
    for (int i = 0; i < 4; i++)
        r[i] = (struct rec){.id = i, .order = order, .n = &n};
    loop_timer_start(&l, &slow, &r[0].t, on_rec);
    loop_timer_start(&l, &fast, &r[1].t, on_rec);
    vc.ms = 1010;
    assert_int_equal(loop_run_once(&l, 0), 0);
    loop_timer_start(&l, &slow, &r[2].t, on_rec); /* deadline 1070 */
    loop_timer_start(&l, &fast, &r[3].t, on_rec);
    loop_timer_stop(&r[3].t); /* stopped timers never fire */
    assert_false(loop_timer_active(&r[3].t));
    assert_int_equal(loop_next_deadline(&l), 1020);
    static const struct {
        uint64_t at;
        int fired;
    } steps[] = {{1019, 0}, {1020, 1}, {1059, 1}, {1060, 2}, {1069, 2}, {1070, 3}, {5000, 3}};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        vc.ms = steps[i].at;
        assert_int_equal(loop_run_once(&l, 0), 0);
        if (n != steps[i].fired)
            fail_msg("at %llu ms: %d timers fired, want %d", (unsigned long long)vc.ms, n,
                     steps[i].fired);
    }
    assert_int_equal(order[0], 1);
    assert_int_equal(order[1], 0);
    assert_int_equal(order[2], 2);
    assert_int_equal(loop_next_deadline(&l), UINT64_MAX);
    loop_set_clock(&l, NULL, NULL); /* back to the monotonic clock */
    assert_int_equal(l.now_ms / 1000, tg__now_ms() / 1000);
    loop_cleanup(&l);
}

struct restarter {
    struct loop_timer t;
    struct loop_tq *q;
    int fired;
};

static void on_restart(struct loop *l, struct loop_timer *t)
{
    struct restarter *r = (struct restarter *)(void *)t;
    if (++r->fired < 3)
        loop_timer_start(l, r->q, t, on_restart);
}

/* A callback that restarts its timer lands behind now: one firing per iteration at most. */
static void test_timer_restart_in_callback_is_bounded(void **state)
{
    (void)state;
    struct loop l;
    struct vclock vc = {.ms = 50};
    assert_int_equal(loop_init(&l), 0);
    loop_set_clock(&l, vclock_read, &vc);
    struct loop_tq q;
    assert_int_equal(loop_tq_add(&l, &q, 0), 0); /* clamped to 1 ms: no busy loop */
    struct restarter r = {.q = &q};
    loop_timer_start(&l, &q, &r.t, on_restart);
    assert_int_equal(loop_run_once(&l, 0), 0);
    assert_int_equal(r.fired, 0);
    for (int i = 1; i <= 3; i++) {
        vc.ms++;
        assert_int_equal(loop_run_once(&l, 0), 0);
        assert_int_equal(r.fired, i);
    }
    vc.ms += 100;
    assert_int_equal(loop_run_once(&l, 0), 0);
    assert_int_equal(r.fired, 3);
    assert_false(loop_timer_active(&r.t));
    loop_cleanup(&l);
}

struct pairio {
    struct loop_io io;
    struct pairio *other;
    int calls;
};

static void on_delete_other(struct loop *l, struct loop_io *io, unsigned events)
{
    (void)events;
    struct pairio *p = (struct pairio *)(void *)io;
    p->calls++;
    loop_io_del(l, &p->other->io); /* its pending event in this batch must be dropped */
    loop_io_del(l, io);
}

static void test_delete_drops_pending_events(void **state)
{
    (void)state;
    struct loop l;
    assert_int_equal(loop_init(&l), 0);
    int a[2], b[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, a), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, b), 0);
    assert_int_equal(write(a[1], "x", 1), 1);
    assert_int_equal(write(b[1], "y", 1), 1);
    struct pairio pa = {0}, pb = {0};
    pa.other = &pb;
    pb.other = &pa;
    assert_int_equal(loop_io_add(&l, &pa.io, a[0], LOOP_READ, on_delete_other), 0);
    assert_int_equal(loop_io_add(&l, &pb.io, b[0], LOOP_READ, on_delete_other), 0);
    /* both are readable, so both events arrive in one batch */
    assert_int_equal(loop_run_once(&l, 100), 0);
    assert_int_equal(pa.calls + pb.calls, 1);
    assert_int_equal(loop_run_once(&l, 0), 0);
    assert_int_equal(pa.calls + pb.calls, 1);
    assert_int_equal(pa.io.fd, -1);
    assert_int_equal(pb.io.fd, -1);
    loop_io_del(&l, &pa.io); /* deleting twice is a no-op */
    close(a[0]), close(a[1]), close(b[0]), close(b[1]);
    loop_cleanup(&l);
}

static void on_count(struct loop *l, struct loop_io *io, unsigned events)
{
    (void)l;
    struct pairio *p = (struct pairio *)(void *)io;
    if (events & LOOP_WRITE)
        p->calls++;
}

static void test_interest_mask(void **state)
{
    (void)state;
    struct loop l;
    assert_int_equal(loop_init(&l), 0);
    int s[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, s), 0);
    struct pairio p = {0};
    assert_int_equal(loop_io_set(&l, &(struct loop_io){.fd = -1}, LOOP_READ), -EBADF);
    assert_int_equal(loop_io_add(&l, &p.io, s[0], 0, on_count), 0);
    assert_int_equal(loop_run_once(&l, 0), 0);
    assert_int_equal(p.calls, 0); /* writable, but not asked */
    assert_int_equal(loop_io_set(&l, &p.io, LOOP_WRITE), 0);
    assert_int_equal(loop_io_set(&l, &p.io, LOOP_WRITE), 0); /* unchanged: no-op */
    assert_int_equal(loop_run_once(&l, 100), 0);
    assert_int_equal(p.calls, 1);
    loop_io_del(&l, &p.io);
    close(s[0]), close(s[1]);
    loop_cleanup(&l);
}

static void *stopper(void *arg)
{
    tg__sleep_ms(20);
    loop_stop(arg);
    return NULL;
}

static void test_stop_from_another_thread(void **state)
{
    (void)state;
    struct loop l;
    assert_int_equal(loop_init(&l), 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, stopper, &l), 0);
    assert_int_equal(loop_run(&l), 0); /* would block forever without the stop */
    pthread_join(th, NULL);
    assert_true(loop_stopping(&l));
    loop_cleanup(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timers_fire_in_deadline_order),
        cmocka_unit_test(test_timer_restart_in_callback_is_bounded),
        cmocka_unit_test(test_delete_drops_pending_events),
        cmocka_unit_test(test_interest_mask),
        cmocka_unit_test(test_stop_from_another_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
