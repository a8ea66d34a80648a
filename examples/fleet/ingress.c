/*
 * fleet ingress: receives updates from Telegram and publishes them to the fleet's Redis
 * streams; the workers (worker.c) run them. Run as many as you like:
 *
 *  - with WEBHOOK_URL set: a webhook server (WEBHOOK_PORT, default 8443; WEBHOOK_SECRET;
 *    WEBHOOK_CERT/WEBHOOK_KEY for HTTPS) that answers 200 only once Redis has the update,
 *    503 while Redis is unreachable (Telegram retries). Put several behind a balancer;
 *    setWebhook is called at start and left in place at stop (another ingress may be
 *    serving).
 *  - without: long polling; every process polls only while it holds the fleet's polling
 *    lease, so exactly one calls getUpdates and another takes over when it stops or dies.
 *
 * Redis: REDIS_HOST, REDIS_PORT, REDIS_PASSWORD, FLEET_PARTITIONS (see fleet.h).
 */
#include "fleet.h"

static int run_webhook(tg_bot *bot, tg_dispatcher *d, tg_fleet *f, const char *url)
{
    const char *port = example_env("WEBHOOK_PORT");
    const char *path = strchr(strstr(url, "://") ? strstr(url, "://") + 3 : url, '/');
    tg_webhook_options wo = {.port = port ? atoi(port) : 8443,
                             .path = path ? path : "/",
                             .url = url,
                             .secret_token = example_env("WEBHOOK_SECRET"),
                             .cert_file = example_env("WEBHOOK_CERT"),
                             .key_file = example_env("WEBHOOK_KEY"),
                             .upload_certificate = example_env("WEBHOOK_CERT") != NULL,
                             .threads = 4,
                             .fleet = f};
    tg_ctx *ctx = tg_ctx_new(bot);
    if (!ctx || tg_webhook_set(ctx, &wo) != TG_OK) {
        fprintf(stderr, "ingress: setWebhook failed: %s\n", ctx ? tg_ctx_errmsg(ctx) : "no memory");
        tg_ctx_free(ctx);
        return 1;
    }
    tg_ctx_free(ctx);
    fprintf(stderr, "ingress: webhook on port %d publishes to the fleet; Ctrl-C stops\n", wo.port);
    tg_status st = tg_run_webhook(d, &wo);
    if (st != TG_OK)
        fprintf(stderr, "ingress: %s: %s\n", tg_strerror(st), tg_dispatcher_errmsg(d));
    return st == TG_OK ? 0 : 1;
}

static int run_polling(tg_dispatcher *d, tg_fleet *f)
{
    fprintf(stderr, "ingress: long polling under the fleet's lease; Ctrl-C stops\n");
    tg_status st = tg_run_polling(d, &(tg_polling_options){.delete_webhook = true, .fleet = f});
    if (st != TG_OK)
        fprintf(stderr, "ingress: %s: %s\n", tg_strerror(st), tg_dispatcher_errmsg(d));
    return st == TG_OK ? 0 : 1;
}

int main(void)
{
    tg_bot *bot = example_bot("ingress");
    if (!bot)
        return EXAMPLE_EXIT_CONFIG;
    tg_fleet *f = example_fleet("ingress");
    /* The ingress runs no handler: the dispatcher only carries Ctrl-C to the receiver. */
    tg_router *r = tg_router_new();
    tg_dispatcher *d =
        f ? example_dispatcher("ingress", bot, r,
                               &(tg_dispatcher_options){.workers = 1, .no_get_me = true})
          : NULL;
    const char *url = example_env("WEBHOOK_URL");
    int rc = !d ? EXAMPLE_EXIT_CONFIG : url ? run_webhook(bot, d, f, url) : run_polling(d, f);
    tg_fleet_stats s;
    if (f) {
        tg_fleet_get_stats(f, &s);
        fprintf(stderr, "ingress: published %llu, refused while Redis was away %llu\n",
                (unsigned long long)s.published, (unsigned long long)s.publish_failed);
    }
    tg_dispatcher_free(d);
    tg_router_free(r);
    tg_fleet_free(f);
    tg_bot_free(bot);
    return rc;
}
