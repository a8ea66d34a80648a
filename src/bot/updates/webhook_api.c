/*
 * webhook_api: run the webhook server until stopped, and the setWebhook / deleteWebhook
 * helpers whose options mirror the server's (one tg_webhook_options serves both).
 */
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "bot/dispatch/dispatch_int.h"
#include "bot/json/json.h"
#include "core/buf.h"
#include "core/sized.h"
#include "tgbot/client.h"
#include "tgbot/updates.h"

void tg__wait_stop(tg_dispatcher *d, int timeout_ms)
{
    struct pollfd p = {.fd = tg__dispatcher_stop_fd(d), .events = POLLIN};
    if (!tg_dispatcher_stopping(d))
        poll(&p, 1, timeout_ms);
}

static void *stop_watch_main(void *arg)
{
    struct tg__stop_watch *w = arg;
    while (!atomic_load(&w->done)) {
        tg__wait_stop(w->d, 200);
        if (tg_dispatcher_stopping(w->d)) {
            tg_ctx_cancel(w->ctx);
            break;
        }
    }
    return NULL;
}

int tg__stop_watch_start(struct tg__stop_watch *w, tg_dispatcher *d, tg_ctx *ctx)
{
    w->d = d;
    w->ctx = ctx;
    atomic_store(&w->done, false);
    w->running = pthread_create(&w->th, NULL, stop_watch_main, w) == 0;
    return w->running ? 0 : -1;
}

void tg__stop_watch_end(struct tg__stop_watch *w)
{
    atomic_store(&w->done, true);
    if (w->running)
        pthread_join(w->th, NULL);
    w->running = false;
}

tg_status tg_run_webhook_sized(tg_dispatcher *d, const tg_webhook_options *opts, size_t opts_size)
{
    tg_webhook_options copy;
    const tg_webhook_options *o = &copy;
    if (!d)
        return TG_ERR_INVALID;
    if (!tg__sized_in(&copy, sizeof copy, opts, opts_size)) {
        tg__dispatcher_seterr(d, "webhook: options: %s", TG__SIZED_ERRMSG);
        return TG_ERR_INVALID;
    }
    tg_webhook *w = tg_webhook_start(d, o);
    if (!w) {
        tg__dispatcher_seterr(d, "%s", tg_webhook_errmsg());
        tg__dispatcher_log(d, TG__LOG_ERROR, "%s", tg_webhook_errmsg());
        return TG_ERR_INVALID;
    }
    tg__dispatcher_log(d, TG__LOG_INFO, "webhook: listening on port %u", tg_webhook_port(w));
    while (!tg_dispatcher_stopping(d))
        tg__wait_stop(d, 1000);
    tg_webhook_stop(w);
    uint32_t drain = o && o->drain_ms ? o->drain_ms : 10000;
    return tg_dispatcher_drain(d, drain);
}

static void put_allowed(tg__jw *w, const char *const *allowed)
{
    if (!allowed)
        return;
    TG__JW_KEY(w, "allowed_updates");
    tg__jw_arr_begin(w);
    for (size_t i = 0; allowed[i]; i++)
        tg__jw_str(w, allowed[i]);
    tg__jw_arr_end(w);
}

/* The setWebhook parameters as JSON (certificate excluded: it goes as a file part). */
static int encode_set(tg__buf *b, const tg_webhook_options *o)
{
    tg__jw w;
    tg__jw_init(&w, b);
    tg__jw_obj_begin(&w);
    TG__JW_KEY(&w, "url");
    tg__jw_str(&w, o->url);
    if (o->secret_token) {
        TG__JW_KEY(&w, "secret_token");
        tg__jw_str(&w, o->secret_token);
    }
    if (o->ip_address) {
        TG__JW_KEY(&w, "ip_address");
        tg__jw_str(&w, o->ip_address);
    }
    if (o->max_connections) {
        TG__JW_KEY(&w, "max_connections");
        tg__jw_i64(&w, o->max_connections);
    }
    put_allowed(&w, o->allowed_updates);
    if (o->drop_pending_updates) {
        TG__JW_KEY(&w, "drop_pending_updates");
        tg__jw_bool(&w, true);
    }
    tg__jw_obj_end(&w);
    return w.err;
}

tg_status tg_webhook_set_sized(tg_ctx *ctx, const tg_webhook_options *opts, size_t opts_size)
{
    tg_webhook_options copy;
    const tg_webhook_options *o = &copy;
    if (!tg__sized_in(&copy, sizeof copy, opts, opts_size))
        return TG_ERR_INVALID;
    if (!ctx || !o->url || !*o->url)
        return TG_ERR_INVALID;
    if (o->upload_certificate && !o->cert_file)
        return TG_ERR_INVALID;
    tg__buf b;
    tg__buf_init(&b, (size_t)64 * 1024);
    tg_status st = TG_ERR_NOMEM;
    const char *res;
    size_t rlen;
    if (encode_set(&b, o) != 0)
        goto out;
    if (o->upload_certificate) {
        tg_file_part part = {.name = "certificate",
                             .filename = "cert.pem",
                             .content_type = "application/x-pem-file",
                             .path = o->cert_file};
        st = tg_call_raw_files(ctx, "setWebhook", tg__buf_cstr(&b), b.len, &part, 1, &res, &rlen);
    } else {
        st = tg_call_raw(ctx, "setWebhook", tg__buf_cstr(&b), b.len, &res, &rlen);
    }
out:
    tg__buf_cleanup(&b);
    return st;
}

tg_status tg_webhook_delete(tg_ctx *ctx, bool drop_pending_updates)
{
    if (!ctx)
        return TG_ERR_INVALID;
    const char *p = drop_pending_updates ? "{\"drop_pending_updates\":true}" : "{}";
    const char *res;
    size_t rlen;
    return tg_call_raw(ctx, "deleteWebhook", p, strlen(p), &res, &rlen);
}
