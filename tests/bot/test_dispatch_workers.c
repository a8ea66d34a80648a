/*
 * Worker pool and offset tracker: per-key ordering under 8 workers, nothing lost or
 * duplicated, backpressure, drain with a deadline, lowest-unfinished offsets.
 */
#include "tgtest.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "bot/dispatch/workers.h"
#include "bot/updates/offsets.h"
#include "core/alloc.h"
#include "core/clock.h"

#define NKEYS  100
#define NITEMS 10000

struct item {
    tg__witem w;
    int seq; /* position within its key */
    int id;
};

struct order_state {
    pthread_mutex_t mu;
    int next_seq[NKEYS];
    int errors;
    int ran[NITEMS];
    atomic_int done;
    atomic_int cancelled;
};

static void order_run(void *user, unsigned worker, tg__witem *it)
{
    struct order_state *s = user;
    struct item *x = (struct item *)it;
    (void)worker;
    pthread_mutex_lock(&s->mu);
    if (s->next_seq[x->w.key] != x->seq)
        s->errors++;
    s->next_seq[x->w.key] = x->seq + 1;
    s->ran[x->id]++;
    pthread_mutex_unlock(&s->mu);
}

static void order_done(void *user, tg__witem *it, bool cancelled)
{
    struct order_state *s = user;
    (void)it;
    if (cancelled)
        atomic_fetch_add(&s->cancelled, 1);
    else
        atomic_fetch_add(&s->done, 1);
}

static void test_per_key_order(void **state)
{
    (void)state;
    static struct order_state s;
    static struct item items[NITEMS];
    memset(&s, 0, sizeof s);
    pthread_mutex_init(&s.mu, NULL);
    tg__workers *w;
    tg__workers_options o = {
        .workers = 8, .capacity = 64, .run = order_run, .done = order_done, .user = &s};
    assert_int_equal(tg__workers_new(&w, &o), 0);
    int seq[NKEYS] = {0};
    for (int i = 0; i < NITEMS; i++) {
        int key = (i * 37) % NKEYS;
        items[i] = (struct item){.w = {.key = key, .ordered = true}, .seq = seq[key]++, .id = i};
        assert_int_equal(tg__workers_submit(w, &items[i].w, -1), 0);
    }
    assert_int_equal(tg__workers_drain(w, tg__now_ms() + 60000), 0);
    tg__workers_stats st = tg__workers_stats_get(w);
    tg__workers_free(w);
    assert_int_equal(s.errors, 0);
    assert_int_equal(atomic_load(&s.done), NITEMS);
    assert_int_equal(atomic_load(&s.cancelled), 0);
    assert_int_equal((int)st.finished, NITEMS);
    for (int i = 0; i < NITEMS; i++)
        assert_int_equal(s.ran[i], 1);
    for (int k = 0; k < NKEYS; k++)
        assert_int_equal(s.next_seq[k], NITEMS / NKEYS);
    pthread_mutex_destroy(&s.mu);
}

/* A gate the first item waits on, so the test controls when the worker is free. */
struct gate_state {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool open;
    atomic_int running;
    atomic_int done;
    atomic_int cancelled;
};

static void gate_run(void *user, unsigned worker, tg__witem *it)
{
    struct gate_state *g = user;
    (void)worker;
    (void)it;
    atomic_fetch_add(&g->running, 1);
    pthread_mutex_lock(&g->mu);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void gate_done(void *user, tg__witem *it, bool cancelled)
{
    struct gate_state *g = user;
    (void)it;
    atomic_fetch_add(cancelled ? &g->cancelled : &g->done, 1);
}

static void gate_open(struct gate_state *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void wait_running(struct gate_state *g, int n)
{
    for (int i = 0; i < 10000 && atomic_load(&g->running) < n; i++)
        tg__sleep_ms(1);
    assert_int_equal(atomic_load(&g->running), n);
}

static void test_backpressure(void **state)
{
    (void)state;
    struct gate_state g = {.open = false};
    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.cv, NULL);
    tg__workers *w;
    tg__workers_options o = {
        .workers = 1, .capacity = 3, .run = gate_run, .done = gate_done, .user = &g};
    assert_int_equal(tg__workers_new(&w, &o), 0);
    tg__witem it[5] = {{.key = 1, .ordered = true},
                       {.key = 2, .ordered = true},
                       {.key = 3, .ordered = true},
                       {.key = 4, .ordered = true},
                       {.key = 5, .ordered = false}};
    assert_int_equal(tg__workers_submit(w, &it[0], 0), 0);
    wait_running(&g, 1);
    for (int i = 1; i < 4; i++)
        assert_int_equal(tg__workers_submit(w, &it[i], 0), 0);
    assert_int_equal(tg__workers_submit(w, &it[4], 0), -EAGAIN);
    assert_int_equal(tg__workers_submit(w, &it[4], 20), -EAGAIN);
    assert_int_equal((int)tg__workers_stats_get(w).queued, 3);
    gate_open(&g);
    assert_int_equal(tg__workers_submit(w, &it[4], -1), 0);
    assert_int_equal(tg__workers_drain(w, tg__now_ms() + 60000), 0);
    assert_int_equal(atomic_load(&g.done), 5);
    assert_int_equal(tg__workers_submit(w, &it[0], 0), -ECANCELED);
    tg__workers_free(w);
    pthread_cond_destroy(&g.cv);
    pthread_mutex_destroy(&g.mu);
}

struct drain_arg {
    tg__workers *w;
    int rc;
};

static void *drain_thread(void *p)
{
    struct drain_arg *a = p;
    a->rc = tg__workers_drain(a->w, tg__now_ms());
    return NULL;
}

static void test_drain_deadline_cancels_queued(void **state)
{
    (void)state;
    struct gate_state g = {.open = false};
    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.cv, NULL);
    tg__workers *w;
    tg__workers_options o = {
        .workers = 2, .capacity = 8, .run = gate_run, .done = gate_done, .user = &g};
    assert_int_equal(tg__workers_new(&w, &o), 0);
    tg__witem it[3] = {
        {.key = 7, .ordered = true}, {.key = 7, .ordered = true}, {.key = 7, .ordered = true}};
    for (int i = 0; i < 3; i++)
        assert_int_equal(tg__workers_submit(w, &it[i], 0), 0);
    wait_running(&g, 1); /* same key: only the first may run */
    struct drain_arg a = {.w = w};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, drain_thread, &a), 0);
    for (int i = 0; i < 10000 && atomic_load(&g.cancelled) < 2; i++)
        tg__sleep_ms(1);
    assert_int_equal(atomic_load(&g.cancelled), 2);
    gate_open(&g);
    pthread_join(t, NULL);
    assert_int_equal(a.rc, -ETIMEDOUT);
    assert_int_equal(atomic_load(&g.done), 1);
    assert_int_equal(atomic_load(&g.running), 1);
    tg__workers_free(w);
    pthread_cond_destroy(&g.cv);
    pthread_mutex_destroy(&g.mu);
}

static void test_new_rejects_missing_run(void **state)
{
    (void)state;
    tg__workers *w = (tg__workers *)1;
    tg__workers_options o = {0};
    assert_int_equal(tg__workers_new(&w, &o), -EINVAL);
    assert_null(w);
    tg__workers_free(NULL);
}

static void test_offsets_lowest_unfinished(void **state)
{
    (void)state;
    tg__offsets o;
    assert_int_equal(tg__offsets_init(&o, 4), 0);
    assert_int_equal(tg__offsets_confirmed(&o), 0);
    for (int64_t id = 10; id < 14; id++)
        assert_int_equal(tg__offsets_add(&o, id), 0);
    assert_int_equal(tg__offsets_add(&o, 14), -ENOSPC);
    assert_int_equal(tg__offsets_add(&o, 12), 1); /* redelivered: already seen */
    tg__offsets_done(&o, 11);
    tg__offsets_done(&o, 12);
    assert_int_equal(tg__offsets_confirmed(&o), 10);
    assert_int_equal((int)tg__offsets_pending(&o), 2);
    tg__offsets_done(&o, 10);
    assert_int_equal(tg__offsets_confirmed(&o), 13);
    assert_int_equal(tg__offsets_add(&o, 20), 0);
    tg__offsets_done(&o, 20);
    assert_int_equal(tg__offsets_confirmed(&o), 13);
    tg__offsets_done(&o, 99); /* unknown: ignored */
    tg__offsets_done(&o, 13);
    assert_int_equal(tg__offsets_confirmed(&o), 21);
    assert_int_equal((int)tg__offsets_pending(&o), 0);
    tg__offsets_cleanup(&o);
    tg__offsets_cleanup(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_per_key_order),
        cmocka_unit_test(test_backpressure),
        cmocka_unit_test(test_drain_deadline_cancels_queued),
        cmocka_unit_test(test_new_rejects_missing_run),
        cmocka_unit_test(test_offsets_lowest_unfinished),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
