/* offsets: lowest-unfinished tracking for getUpdates offsets. See offsets.h. */
#include "bot/updates/offsets.h"

#include <errno.h>

#include "core/alloc.h"

int tg__offsets_init(tg__offsets *o, size_t cap)
{
    *o = (tg__offsets){.cap = cap ? cap : 1};
    o->ids = tg__calloc(o->cap, sizeof *o->ids);
    o->done = tg__calloc(o->cap, sizeof *o->done);
    if (!o->ids || !o->done || pthread_mutex_init(&o->mu, NULL) != 0) {
        tg__free(o->ids);
        tg__free(o->done);
        o->ids = NULL;
        o->done = NULL;
        return -ENOMEM;
    }
    return 0;
}

void tg__offsets_cleanup(tg__offsets *o)
{
    if (!o || !o->ids)
        return;
    pthread_mutex_destroy(&o->mu);
    tg__free(o->ids);
    tg__free(o->done);
    o->ids = NULL;
    o->done = NULL;
}

int tg__offsets_add(tg__offsets *o, int64_t id)
{
    int rc = 0;
    pthread_mutex_lock(&o->mu);
    if (o->any && id < o->next) {
        rc = 1;
    } else if (o->count == o->cap) {
        rc = -ENOSPC;
    } else {
        size_t at = (o->head + o->count) % o->cap;
        o->ids[at] = id;
        o->done[at] = false;
        o->count++;
        o->next = id + 1;
        o->any = true;
    }
    pthread_mutex_unlock(&o->mu);
    return rc;
}

/* Binary search over the ring (ids increase from head). Returns the slot or cap. */
static size_t find_slot(const tg__offsets *o, int64_t id)
{
    size_t lo = 0, hi = o->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int64_t v = o->ids[(o->head + mid) % o->cap];
        if (v == id)
            return (o->head + mid) % o->cap;
        if (v < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return o->cap;
}

void tg__offsets_done(tg__offsets *o, int64_t id)
{
    pthread_mutex_lock(&o->mu);
    size_t slot = find_slot(o, id);
    if (slot != o->cap) {
        o->done[slot] = true;
        while (o->count && o->done[o->head]) {
            o->head = (o->head + 1) % o->cap;
            o->count--;
        }
    }
    pthread_mutex_unlock(&o->mu);
}

int64_t tg__offsets_confirmed(tg__offsets *o)
{
    pthread_mutex_lock(&o->mu);
    int64_t v = o->count ? o->ids[o->head] : (o->any ? o->next : 0);
    pthread_mutex_unlock(&o->mu);
    return v;
}

size_t tg__offsets_pending(tg__offsets *o)
{
    pthread_mutex_lock(&o->mu);
    size_t n = 0;
    for (size_t i = 0; i < o->count; i++)
        n += !o->done[(o->head + i) % o->cap];
    pthread_mutex_unlock(&o->mu);
    return n;
}
