/*
 * workers: per-key ordered thread pool. See workers.h for the contract.
 *
 * One mutex guards everything: the lane table, the ready list and the counters. Handlers run
 * outside the lock, so the lock is held only for a few pointer moves per item. Lanes live in
 * a preallocated array with a freelist; the key -> lane map is a chained hash whose buckets
 * are also preallocated.
 */
#include "bot/dispatch/workers.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "core/alloc.h"
#include "core/clock.h"

struct lane {
    struct lane *hnext; /* hash chain, or freelist link */
    struct lane *rnext; /* ready list link */
    tg__witem *head, *tail;
    int64_t key;
    bool hashed; /* in the key map (ordered lanes only) */
    bool busy;   /* a worker runs its head item */
    bool ready;  /* on the ready list */
};

struct tg__workers {
    pthread_mutex_t mu;
    pthread_cond_t work;     /* ready list became non-empty, or quit */
    pthread_cond_t not_full; /* queued dropped below capacity, or stop */
    pthread_cond_t idle;     /* queued + inflight reached 0 */
    tg__workers_options o;
    pthread_t *threads;
    unsigned started;
    struct lane *lanes;
    struct lane *free_lanes;
    struct lane **buckets;
    size_t nbuckets; /* power of two */
    struct lane *ready_head, *ready_tail;
    tg__workers_stats st;
    bool accepting;
    bool quit;
    bool joined;
};

static size_t bucket_of(const tg__workers *w, int64_t key)
{
    uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 32) & (w->nbuckets - 1);
}

static struct lane *lane_find(tg__workers *w, int64_t key)
{
    for (struct lane *l = w->buckets[bucket_of(w, key)]; l; l = l->hnext)
        if (l->key == key)
            return l;
    return NULL;
}

static struct lane *lane_take(tg__workers *w, int64_t key, bool ordered)
{
    struct lane *l = w->free_lanes;
    if (!l)
        return NULL; /* cannot happen: lanes >= capacity + workers */
    w->free_lanes = l->hnext;
    *l = (struct lane){.key = key, .hashed = ordered};
    if (ordered) {
        size_t b = bucket_of(w, key);
        l->hnext = w->buckets[b];
        w->buckets[b] = l;
    }
    return l;
}

static void lane_release(tg__workers *w, struct lane *l)
{
    if (l->hashed) {
        struct lane **pp = &w->buckets[bucket_of(w, l->key)];
        while (*pp && *pp != l)
            pp = &(*pp)->hnext;
        if (*pp)
            *pp = l->hnext;
    }
    l->hashed = false;
    l->hnext = w->free_lanes;
    w->free_lanes = l;
}

static void ready_push(tg__workers *w, struct lane *l)
{
    l->ready = true;
    l->rnext = NULL;
    if (w->ready_tail)
        w->ready_tail->rnext = l;
    else
        w->ready_head = l;
    w->ready_tail = l;
    pthread_cond_signal(&w->work);
}

static struct lane *ready_pop(tg__workers *w)
{
    struct lane *l = w->ready_head;
    if (l) {
        w->ready_head = l->rnext;
        if (!w->ready_head)
            w->ready_tail = NULL;
        l->ready = false;
    }
    return l;
}

static void deadline_ts(struct timespec *ts, uint64_t deadline_ms)
{
    ts->tv_sec = (time_t)(deadline_ms / 1000);
    ts->tv_nsec = (long)(deadline_ms % 1000) * 1000000L;
}

/* Take the next runnable item, or NULL when told to quit. Called with the lock held. */
static tg__witem *next_item(tg__workers *w, struct lane **lane_out)
{
    for (;;) {
        struct lane *l = ready_pop(w);
        if (l && l->head) {
            tg__witem *it = l->head;
            l->head = it->next;
            if (!l->head)
                l->tail = NULL;
            l->busy = true;
            w->st.queued--;
            w->st.inflight++;
            pthread_cond_signal(&w->not_full);
            *lane_out = l;
            return it;
        }
        if (l) { /* emptied by a cancel while on the ready list */
            lane_release(w, l);
            continue;
        }
        if (w->quit)
            return NULL;
        pthread_cond_wait(&w->work, &w->mu);
    }
}

struct worker_arg {
    tg__workers *w;
    unsigned idx;
};

static void *worker_main(void *arg)
{
    tg__workers *w = ((struct worker_arg *)arg)->w;
    unsigned idx = ((struct worker_arg *)arg)->idx;
    tg__free(arg);
    pthread_mutex_lock(&w->mu);
    struct lane *l;
    tg__witem *it;
    while ((it = next_item(w, &l)) != NULL) {
        pthread_mutex_unlock(&w->mu);
        w->o.run(w->o.user, idx, it);
        if (w->o.done)
            w->o.done(w->o.user, it, false);
        pthread_mutex_lock(&w->mu);
        w->st.inflight--;
        w->st.finished++;
        l->busy = false;
        if (l->head)
            ready_push(w, l);
        else
            lane_release(w, l);
        if (w->st.queued == 0 && w->st.inflight == 0)
            pthread_cond_broadcast(&w->idle);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static int init_sync(tg__workers *w)
{
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0)
        return -ENOMEM;
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_mutex_init(&w->mu, NULL);
    if (rc == 0)
        rc = pthread_cond_init(&w->work, &ca);
    if (rc == 0)
        rc = pthread_cond_init(&w->not_full, &ca);
    if (rc == 0)
        rc = pthread_cond_init(&w->idle, &ca);
    pthread_condattr_destroy(&ca);
    return -rc;
}

static int start_threads(tg__workers *w)
{
    for (unsigned i = 0; i < w->o.workers; i++) {
        struct worker_arg *a = tg__malloc(sizeof *a);
        if (!a)
            return -ENOMEM;
        a->w = w;
        a->idx = i;
        int rc = pthread_create(&w->threads[i], NULL, worker_main, a);
        if (rc != 0) {
            tg__free(a);
            return -rc;
        }
        w->started++;
    }
    return 0;
}

int tg__workers_new(tg__workers **out, const tg__workers_options *opt)
{
    *out = NULL;
    if (!opt || !opt->run)
        return -EINVAL;
    tg__workers *w = tg__calloc(1, sizeof *w);
    if (!w)
        return -ENOMEM;
    w->o = *opt;
    if (!w->o.workers)
        w->o.workers = 4;
    if (!w->o.capacity)
        w->o.capacity = 1024;
    size_t nlanes = w->o.capacity + w->o.workers;
    w->nbuckets = 16;
    while (w->nbuckets < nlanes)
        w->nbuckets <<= 1;
    w->lanes = tg__calloc(nlanes, sizeof *w->lanes);
    w->buckets = tg__calloc(w->nbuckets, sizeof(struct lane *));
    w->threads = tg__calloc(w->o.workers, sizeof *w->threads);
    int rc = -ENOMEM;
    if (!w->lanes || !w->buckets || !w->threads)
        goto fail_alloc;
    for (size_t i = nlanes; i-- > 0;) {
        w->lanes[i].hnext = w->free_lanes;
        w->free_lanes = &w->lanes[i];
    }
    rc = init_sync(w);
    if (rc != 0)
        goto fail_alloc;
    w->accepting = true;
    rc = start_threads(w);
    if (rc != 0) {
        tg__workers_free(w);
        return rc;
    }
    *out = w;
    return 0;
fail_alloc:
    tg__free(w->lanes);
    tg__free(w->buckets);
    tg__free(w->threads);
    tg__free(w);
    return rc;
}

/* Wait for room. Called with the lock held. 0, -EAGAIN or -ECANCELED. */
static int wait_room(tg__workers *w, int64_t wait_ms)
{
    uint64_t deadline = wait_ms > 0 ? tg__now_ms() + (uint64_t)wait_ms : 0;
    while (w->accepting && w->st.queued >= w->o.capacity) {
        if (wait_ms == 0)
            return -EAGAIN;
        if (wait_ms < 0) {
            pthread_cond_wait(&w->not_full, &w->mu);
            continue;
        }
        if (tg__now_ms() >= deadline)
            return -EAGAIN;
        struct timespec ts;
        deadline_ts(&ts, deadline);
        pthread_cond_timedwait(&w->not_full, &w->mu, &ts);
    }
    return w->accepting ? 0 : -ECANCELED;
}

int tg__workers_submit(tg__workers *w, tg__witem *it, int64_t wait_ms)
{
    pthread_mutex_lock(&w->mu);
    int rc = wait_room(w, wait_ms);
    if (rc != 0)
        goto out;
    struct lane *l = it->ordered ? lane_find(w, it->key) : NULL;
    if (!l)
        l = lane_take(w, it->key, it->ordered);
    if (!l) {
        rc = -EAGAIN;
        goto out;
    }
    it->next = NULL;
    if (l->tail)
        l->tail->next = it;
    else
        l->head = it;
    l->tail = it;
    w->st.queued++;
    if (!l->busy && !l->ready)
        ready_push(w, l);
out:
    pthread_mutex_unlock(&w->mu);
    return rc;
}

static int wait_idle_locked(tg__workers *w, uint64_t deadline_ms)
{
    while (w->st.queued + w->st.inflight > 0) {
        if (tg__now_ms() >= deadline_ms)
            return -ETIMEDOUT;
        struct timespec ts;
        deadline_ts(&ts, deadline_ms);
        pthread_cond_timedwait(&w->idle, &w->mu, &ts);
    }
    return 0;
}

int tg__workers_wait_idle(tg__workers *w, uint64_t deadline_ms)
{
    pthread_mutex_lock(&w->mu);
    int rc = wait_idle_locked(w, deadline_ms);
    pthread_mutex_unlock(&w->mu);
    return rc;
}

/* Detach every queued item into one list. Called with the lock held. */
static tg__witem *cancel_queued(tg__workers *w)
{
    tg__witem *all = NULL;
    size_t nlanes = w->o.capacity + w->o.workers;
    for (size_t i = 0; i < nlanes; i++) {
        struct lane *l = &w->lanes[i];
        if (!l->head)
            continue;
        l->tail->next = all;
        all = l->head;
        l->head = l->tail = NULL;
    }
    for (tg__witem *it = all; it; it = it->next) {
        w->st.queued--;
        w->st.cancelled++;
    }
    return all;
}

int tg__workers_drain(tg__workers *w, uint64_t deadline_ms)
{
    pthread_mutex_lock(&w->mu);
    w->accepting = false;
    pthread_cond_broadcast(&w->not_full);
    wait_idle_locked(w, deadline_ms);
    tg__witem *dropped = cancel_queued(w);
    int rc = dropped ? -ETIMEDOUT : 0;
    w->quit = true;
    pthread_cond_broadcast(&w->work);
    bool join = !w->joined;
    w->joined = true;
    pthread_mutex_unlock(&w->mu);
    while (dropped) {
        tg__witem *it = dropped;
        dropped = it->next;
        if (w->o.done)
            w->o.done(w->o.user, it, true);
    }
    for (unsigned i = 0; join && i < w->started; i++)
        pthread_join(w->threads[i], NULL);
    return rc;
}

tg__workers_stats tg__workers_stats_get(tg__workers *w)
{
    pthread_mutex_lock(&w->mu);
    tg__workers_stats st = w->st;
    pthread_mutex_unlock(&w->mu);
    return st;
}

void tg__workers_free(tg__workers *w)
{
    if (!w)
        return;
    tg__workers_drain(w, 0);
    pthread_cond_destroy(&w->work);
    pthread_cond_destroy(&w->not_full);
    pthread_cond_destroy(&w->idle);
    pthread_mutex_destroy(&w->mu);
    tg__free(w->lanes);
    tg__free(w->buckets);
    tg__free(w->threads);
    tg__free(w);
}
