/*
 * fuzz bot_webhook: what the webhook server does with a request body, minus the socket:
 * the ordering-key parse that decides 400 vs queued, then the worker's event build and a
 * router with every kind of filter (commands with arguments, regexes with captures,
 * callback prefixes, conversation state over the memory store, the full generated decode).
 * Any input must end in a clean error or a routed update: no crash, no leak, no hang.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bot/dispatch/event.h"
#include "core/alloc.h"
#include "core/log.h"
#include "tgbot/dispatch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tg_status h_args(tg_hctx *h, void *user)
{
    (void)user;
    unsigned n = tg_hctx_argc(h);
    for (unsigned i = 0; i < n; i++)
        if (!tg_hctx_arg(h, i))
            abort();
    (void)tg_hctx_payload(h);
    const char *t = tg_hctx_event(h)->text;
    tg_status st = tg_conv_set(h, "step", t, t ? strlen(t) % 64 : 0);
    /* chat 1 keeps its conversation (so the state route runs); others end theirs, or the
     * store would grow with every random chat id the fuzzer invents */
    if (st == TG_OK && tg_hctx_event(h)->chat_id != 1)
        st = tg_conv_end(h);
    return st;
}

static tg_status h_caps(tg_hctx *h, void *user)
{
    (void)user;
    size_t len;
    for (unsigned i = 0; i < tg_hctx_ncaptures(h); i++)
        if (tg_hctx_capture(h, i, &len) && len > tg_hctx_event(h)->json_len)
            abort();
    return TG_OK;
}

static tg_status h_state(tg_hctx *h, void *user)
{
    (void)user;
    size_t len;
    (void)tg_conv_data(h, &len);
    (void)tg_hctx_update(h);
    return tg_conv_end(h);
}

static tg_status h_any(tg_hctx *h, void *user)
{
    (void)user;
    (void)tg_hctx_update(h);
    return TG_ERR_INVALID;
}

static tg_dispatcher *setup(tg_router **out)
{
    tg__log_default()->level = TG__LOG_OFF; /* bad input is expected here */
    tg_router *r = tg_router_new();
    tg_router_set_username(r, "fuzzbot");
    tg_router_on_command(r, "start", h_args, NULL);
    tg_router_on_text(r, "^(\\w+)\\s+(\\d+)?", h_caps, NULL);
    tg_router_add(r, 1, tg_filter_callback_regex("^p:(.*)$"), h_caps, NULL);
    tg_router_add(r, 1, tg_filter_state("step"), h_state, NULL);
    tg_router_add(r, 2, tg_filter_or(tg_filter_kinds(~UINT64_C(0)), tg_filter_state(NULL)), h_any,
                  NULL);
    *out = r;
    return tg_dispatcher_new(
        NULL, r,
        &(tg_dispatcher_options){.workers = 1, .cancel_command = "cancel", .conv_max_bytes = 64});
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static tg_router *r;
    static tg_dispatcher *d;
    if (!d)
        d = setup(&r);
    tg__jdoc doc;
    tg__event_key k;
    char err[256];
    tg__jdoc_init(&doc, NULL);
    int rc = tg__event_key_parse(&doc, (const char *)data, size, &k, err, sizeof err);
    tg__jdoc_cleanup(&doc);
    tg_status st = tg_dispatcher_run_one(d, (const char *)data, size);
    if ((rc == 0) != (st != TG_ERR_DECODE) && st != TG_ERR_NOMEM)
        abort(); /* the queue and the worker must agree on what is an update */
    return 0;
}
