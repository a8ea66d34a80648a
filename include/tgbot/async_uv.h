/*
 * tgbot/async_uv.h: run a tg_async handle (tgbot/async.h) inside a libuv loop.
 *
 * Header-only, like hiredis's adapters: libtgbot itself does not link libuv; a program that
 * includes this header links libuv (pkg-config libuv) next to libtgbot.
 *
 *   tg_async_uv ad;
 *   tg_async *a = tg_async_uv_new(&ad, uv_default_loop(), bot, NULL);
 *   tg_async_send_message(a, &params, on_sent, NULL);
 *   uv_run(uv_default_loop(), UV_RUN_DEFAULT);
 *   ...
 *   tg_async_uv_free(&ad);                     // frees a; then let the loop close handles:
 *   uv_run(uv_default_loop(), UV_RUN_DEFAULT); // (or uv_loop_close after it)
 *
 * One uv_poll_t per connection (allocated when its socket opens, closed and freed through
 * uv_close when it closes) and one uv_timer_t per handle. Idle keep-alive connections stay
 * watched, so uv_run(UV_RUN_DEFAULT) keeps running while the handle has connections open:
 * stop it with uv_stop() from a callback, or free the handle.
 * Threads: the loop's thread only, as for the handle.
 */
#ifndef TGBOT_ASYNC_UV_H
#define TGBOT_ASYNC_UV_H

#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "tgbot/async.h"

typedef struct tg_async_uv_fd {
    uv_poll_t poll;
    int fd;
} tg_async_uv_fd;

typedef struct tg_async_uv {
    uv_loop_t *loop;
    tg_async *a;
    uv_timer_t timer;
    void **fds; /* tg_async_uv_fd * by fd number */
    size_t nfds;
} tg_async_uv;

static inline void tg_async_uv__on_poll(uv_poll_t *h, int status, int events)
{
    tg_async_uv *ad = (tg_async_uv *)h->data;
    tg_async_uv_fd *p = (tg_async_uv_fd *)(void *)h;
    int what = (events & UV_READABLE ? TG_ASYNC_READ : 0) |
               (events & UV_WRITABLE ? TG_ASYNC_WRITE : 0) | (status < 0 ? TG_ASYNC_ERROR : 0);
    tg_async_on_fd(ad->a, p->fd, what);
}

static inline void tg_async_uv__on_closed(uv_handle_t *h)
{
    free(h); /* the tg_async_uv_fd (poll is its first member) */
}

static inline void tg_async_uv__watch(void *user, int fd, int events)
{
    tg_async_uv *ad = (tg_async_uv *)user;
    if (fd < 0 || ((size_t)fd >= ad->nfds && events == 0))
        return;
    if (tg_async_fd_table_reserve(&ad->fds, &ad->nfds, fd) != 0)
        abort(); /* no way to report it through the loop contract */
    tg_async_uv_fd *p = (tg_async_uv_fd *)ad->fds[fd];
    if (events == 0) { /* the fd is about to be closed: stop now, free once libuv is done */
        if (p) {
            uv_poll_stop(&p->poll);
            uv_close((uv_handle_t *)&p->poll, tg_async_uv__on_closed);
            ad->fds[fd] = NULL;
        }
        return;
    }
    if (!p) {
        p = (tg_async_uv_fd *)calloc(1, sizeof *p);
        if (!p || uv_poll_init(ad->loop, &p->poll, fd) != 0)
            abort();
        p->fd = fd;
        p->poll.data = ad;
        ad->fds[fd] = p;
    }
    uv_poll_start(&p->poll,
                  (events & TG_ASYNC_READ ? UV_READABLE : 0) |
                      (events & TG_ASYNC_WRITE ? UV_WRITABLE : 0),
                  tg_async_uv__on_poll);
}

static inline void tg_async_uv__on_timer(uv_timer_t *t)
{
    tg_async_uv *ad = (tg_async_uv *)t->data;
    tg_async_on_timer(ad->a);
}

static inline void tg_async_uv__timer(void *user, int64_t timeout_ms)
{
    tg_async_uv *ad = (tg_async_uv *)user;
    if (timeout_ms < 0)
        uv_timer_stop(&ad->timer);
    else
        uv_timer_start(&ad->timer, tg_async_uv__on_timer, (uint64_t)timeout_ms, 0);
}

/* Make a handle over bot whose I/O and timers run on loop. ad is the caller's (it must stay
 * put until tg_async_uv_free). opts may be NULL; its loop field is ignored. NULL on
 * failure. */
static inline tg_async *tg_async_uv_new(tg_async_uv *ad, uv_loop_t *loop, tg_bot *bot,
                                        const tg_async_options *opts)
{
    memset(ad, 0, sizeof *ad);
    ad->loop = loop;
    if (uv_timer_init(loop, &ad->timer) != 0)
        return NULL;
    ad->timer.data = ad;
    tg_async_loop l = {tg_async_uv__watch, tg_async_uv__timer, ad};
    tg_async_options o;
    memset(&o, 0, sizeof o);
    if (opts)
        o = *opts;
    o.loop = &l;
    ad->a = tg_async_new(bot, &o);
    if (!ad->a)
        uv_close((uv_handle_t *)&ad->timer, NULL);
    return ad->a;
}

/* Free the handle (its pending calls complete with TG_ERR_CANCELLED first) and close the
 * adapter's handles; run the loop once more to let libuv finish closing them. */
static inline void tg_async_uv_free(tg_async_uv *ad)
{
    if (!ad->a)
        return;
    tg_async_free(ad->a); /* stops watching every fd on the way */
    ad->a = NULL;
    uv_timer_stop(&ad->timer);
    uv_close((uv_handle_t *)&ad->timer, NULL);
    free(ad->fds);
    ad->fds = NULL;
    ad->nfds = 0;
}

#endif
