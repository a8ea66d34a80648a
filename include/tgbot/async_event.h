/*
 * tgbot/async_event.h: run a tg_async handle (tgbot/async.h) inside a libevent 2 event_base.
 *
 * Header-only, like hiredis's adapters: libtgbot itself does not link libevent; a program
 * that includes this header links libevent (pkg-config libevent) next to libtgbot.
 *
 *   tg_async_event ad;
 *   tg_async *a = tg_async_event_new(&ad, base, bot, NULL);
 *   tg_async_send_message(a, &params, on_sent, NULL);
 *   event_base_dispatch(base);
 *   tg_async_event_free(&ad);
 *
 * One persistent event per connection (event_new when its socket opens, event_free when it
 * closes) and one timer event per handle. Idle keep-alive connections stay watched, so
 * event_base_dispatch keeps running while the handle has connections open: stop it with
 * event_base_loopbreak() from a callback, or free the handle.
 * Threads: the base's thread only, as for the handle.
 */
#ifndef TGBOT_ASYNC_EVENT_H
#define TGBOT_ASYNC_EVENT_H

#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

#include "tgbot/async.h"

typedef struct tg_async_event {
    struct event_base *base;
    tg_async *a;
    struct event *timer;
    void **evs; /* struct event * by fd number */
    size_t nfds;
} tg_async_event;

static inline void tg_async_event__on_fd(evutil_socket_t fd, short what, void *user)
{
    tg_async_event *ad = (tg_async_event *)user;
    tg_async_on_fd(ad->a, (int)fd,
                   (what & EV_READ ? TG_ASYNC_READ : 0) | (what & EV_WRITE ? TG_ASYNC_WRITE : 0));
}

static inline void tg_async_event__watch(void *user, int fd, int events)
{
    tg_async_event *ad = (tg_async_event *)user;
    if (fd < 0 || ((size_t)fd >= ad->nfds && events == 0))
        return;
    if (tg_async_fd_table_reserve(&ad->evs, &ad->nfds, fd) != 0)
        abort(); /* no way to report it through the loop contract */
    if (ad->evs[fd]) { /* interest changes: a new persistent event with the new flags */
        event_free((struct event *)ad->evs[fd]);
        ad->evs[fd] = NULL;
    }
    if (events == 0)
        return;
    short flags = (short)(EV_PERSIST | (events & TG_ASYNC_READ ? EV_READ : 0) |
                          (events & TG_ASYNC_WRITE ? EV_WRITE : 0));
    struct event *ev = event_new(ad->base, fd, flags, tg_async_event__on_fd, ad);
    if (!ev || event_add(ev, NULL) != 0)
        abort();
    ad->evs[fd] = ev;
}

static inline void tg_async_event__on_timer(evutil_socket_t fd, short what, void *user)
{
    (void)fd;
    (void)what;
    tg_async_on_timer(((tg_async_event *)user)->a);
}

static inline void tg_async_event__timer(void *user, int64_t timeout_ms)
{
    tg_async_event *ad = (tg_async_event *)user;
    if (timeout_ms < 0) {
        evtimer_del(ad->timer);
        return;
    }
    struct timeval tv = {(time_t)(timeout_ms / 1000), (suseconds_t)(timeout_ms % 1000) * 1000};
    evtimer_add(ad->timer, &tv);
}

/* Make a handle over bot whose I/O and timers run on base. ad is the caller's (it must stay
 * put until tg_async_event_free). opts may be NULL; its loop field is ignored. NULL on
 * failure. */
static inline tg_async *tg_async_event_new(tg_async_event *ad, struct event_base *base,
                                           tg_bot *bot, const tg_async_options *opts)
{
    memset(ad, 0, sizeof *ad);
    ad->base = base;
    ad->timer = evtimer_new(base, tg_async_event__on_timer, ad);
    if (!ad->timer)
        return NULL;
    tg_async_loop l = {tg_async_event__watch, tg_async_event__timer, ad};
    tg_async_options o;
    memset(&o, 0, sizeof o);
    if (opts)
        o = *opts;
    o.loop = &l;
    ad->a = tg_async_new(bot, &o);
    if (!ad->a) {
        event_free(ad->timer);
        ad->timer = NULL;
    }
    return ad->a;
}

/* Free the handle (its pending calls complete with TG_ERR_CANCELLED first) and the
 * adapter's events. */
static inline void tg_async_event_free(tg_async_event *ad)
{
    if (!ad->a)
        return;
    tg_async_free(ad->a); /* stops watching every fd on the way */
    ad->a = NULL;
    event_free(ad->timer);
    ad->timer = NULL;
    for (size_t i = 0; i < ad->nfds; i++)
        if (ad->evs[i])
            event_free((struct event *)ad->evs[i]);
    free(ad->evs);
    ad->evs = NULL;
    ad->nfds = 0;
}

#endif
