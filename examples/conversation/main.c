/*
 * conversation: a three-step pizza order. /order asks for a size, then an address, then
 * confirms. /cancel ends it at any step; an order left alone for five minutes times out.
 * With REDIS_HOST set (and optionally REDIS_PORT) the conversation lives in Redis, so
 * several copies of the bot can share it; otherwise in memory.
 */
#include "example.h"

static tg_status on_order(tg_hctx *h, void *user)
{
    (void)user;
    tg_status st = tg_conv_set(h, "size", NULL, 0);
    return st == TG_OK ? tg_reply(h, "Which size? small, medium or large") : st;
}

static tg_status on_size(tg_hctx *h, void *user)
{
    (void)user;
    const char *size = tg_hctx_event(h)->text;
    if (!size || (strcmp(size, "small") && strcmp(size, "medium") && strcmp(size, "large")))
        return tg_reply(h, "Please answer small, medium or large (or /cancel).");
    tg_status st = tg_conv_set(h, "address", size, strlen(size)); /* data: the size */
    return st == TG_OK ? tg_reply(h, "Where should we deliver it?") : st;
}

static tg_status on_address(tg_hctx *h, void *user)
{
    (void)user;
    size_t n;
    const char *size = tg_conv_data(h, &n);
    const char *addr = tg_hctx_event(h)->text;
    if (!addr)
        return tg_reply(h, "Please send the address as text.");
    char text[512];
    snprintf(text, sizeof text, "Ordered: one %.*s pizza to %s. Thanks!", (int)n, size, addr);
    tg_status st = tg_conv_end(h);
    return st == TG_OK ? tg_reply(h, text) : st;
}

static tg_status on_cancel(tg_hctx *h, void *user)
{
    (void)user;
    return tg_reply(h, "Order cancelled.");
}

static tg_status on_timeout(tg_hctx *h, void *user)
{
    (void)user;
    return tg_send(h, "Your previous order timed out; send /order to start again.");
}

static tg_storage *make_storage(void)
{
    const char *host = example_env("REDIS_HOST");
    if (!host)
        return NULL; /* the dispatcher's memory store */
    const char *port = example_env("REDIS_PORT");
    tg_redis_options o = {.host = host,
                          .port = (uint16_t)(port ? atoi(port) : 0),
                          .password = example_env("REDIS_PASSWORD"),
                          .prefix = "pizza:"};
    tg_storage *s = tg_storage_redis_new(&o);
    if (!s)
        fprintf(stderr, "conversation: %s\n", tg_storage_errmsg());
    return s;
}

int main(void)
{
    tg_bot *bot = example_bot("conversation");
    if (!bot)
        return EXAMPLE_EXIT_CONFIG;
    tg_storage *s = make_storage();
    if (example_env("REDIS_HOST") && !s) {
        tg_bot_free(bot);
        return 1;
    }
    tg_router *r = tg_router_new();
    tg_router_on_command(r, "order", on_order, NULL);
    tg_router_add(r, 0, tg_filter_state("size"), on_size, NULL);
    tg_router_add(r, 0, tg_filter_state("address"), on_address, NULL);
    tg_dispatcher_options o = {.storage = s,
                               .conv_timeout_ms = 5 * 60 * 1000,
                               .cancel_command = "cancel",
                               .on_cancel = on_cancel,
                               .on_timeout = on_timeout};
    tg_dispatcher *d = example_dispatcher("conversation", bot, r, &o);
    int rc = d ? example_poll("conversation", d) : 1;
    tg_dispatcher_free(d);
    tg_router_free(r);
    tg_storage_free(s);
    tg_bot_free(bot);
    return rc;
}
