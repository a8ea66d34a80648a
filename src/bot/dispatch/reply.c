/*
 * reply: answering a webhook update in the HTTP response itself. Telegram accepts a method
 * call as the body of the webhook's 200 answer ({"method":"sendMessage",...}), which saves
 * the bot one request; it never reports that call's result. See tg_hctx_respond.
 */
#include <string.h>
#include <time.h>

#include "bot/dispatch/dispatch_int.h"
#include "core/alloc.h"
#include "core/clock.h"

struct tg__reply *tg__reply_new(void)
{
    struct tg__reply *r = tg__calloc(1, sizeof *r);
    if (!r)
        return NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, &ca);
    pthread_condattr_destroy(&ca);
    r->refs = 1;
    return r;
}

void tg__reply_release(struct tg__reply *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    bool last = --r->refs == 0;
    pthread_mutex_unlock(&r->mu);
    if (!last)
        return;
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    tg__free(r->body);
    tg__free(r);
}

char *tg__reply_wait(struct tg__reply *r, uint64_t deadline_ms, size_t *len)
{
    struct timespec ts = {.tv_sec = (time_t)(deadline_ms / 1000),
                          .tv_nsec = (long)(deadline_ms % 1000) * 1000000L};
    pthread_mutex_lock(&r->mu);
    while (!r->done && tg__now_ms() < deadline_ms)
        pthread_cond_timedwait(&r->cv, &r->mu, &ts);
    char *body = r->done ? r->body : NULL;
    if (body) {
        *len = r->len;
        r->body = NULL;
    }
    pthread_mutex_unlock(&r->mu);
    return body;
}

/* The members of a JSON object text without its braces ("" for "{}"); NULL if not one. */
static const char *object_inside(const char *json, size_t *n)
{
    const char *ws = " \t\r\n";
    const char *p = json + strspn(json, ws);
    size_t len = strlen(p);
    while (len && strchr(ws, p[len - 1]))
        len--;
    if (len < 2 || p[0] != '{' || p[len - 1] != '}')
        return NULL;
    p++;
    len -= 2;
    size_t lead = strspn(p, ws);
    *n = len - (lead < len ? lead : len);
    return p + lead;
}

tg_status tg_hctx_respond(tg_hctx *h, const char *method, const char *json_params)
{
    size_t n = 0;
    const char *inside = json_params ? object_inside(json_params, &n) : "";
    if (!method || !*method || !inside)
        return tg_hctx_fail(h, TG_ERR_INVALID,
                            "respond: need a method and a JSON object of "
                            "parameters");
    if (!h->reply)
        return tg_hctx_fail(h, TG_ERR_INVALID,
                            "respond: update %lld did not come from a webhook "
                            "waiting for an answer (tg_webhook_options.reply_wait_ms)",
                            (long long)h->ev.update_id);
    tg__buf b;
    tg__jw w;
    tg__buf_init(&b, 1 << 20);
    tg__jw_init(&w, &b);
    tg__jw_obj_begin(&w);
    TG__JW_KEY(&w, "method");
    tg__jw_str(&w, method);
    if (n) {
        tg__buf_putc(&b, ',');
        tg__buf_append(&b, inside, n);
    }
    tg__jw_obj_end(&w);
    if (w.err) {
        tg__buf_cleanup(&b);
        return tg_hctx_fail(h, TG_ERR_NOMEM, "respond: %s: cannot encode", method);
    }
    size_t len;
    char *body = tg__buf_detach(&b, &len);
    pthread_mutex_lock(&h->reply->mu);
    tg__free(h->reply->body);
    h->reply->body = body;
    h->reply->len = len;
    pthread_mutex_unlock(&h->reply->mu);
    return TG_OK;
}
