/*
 * webhook: the echo bot behind a webhook instead of long polling. It registers the webhook
 * with Telegram (setWebhook, with the secret token and, for a self-signed certificate, the
 * certificate), serves it until Ctrl-C, then removes it (deleteWebhook).
 *
 * Environment: WEBHOOK_URL (public https URL, required), WEBHOOK_PORT (default 8443),
 * WEBHOOK_SECRET (recommended), WEBHOOK_CERT and WEBHOOK_KEY (PEM files: serve HTTPS
 * directly; without them serve plain HTTP behind a TLS-terminating reverse proxy).
 */
#include "example.h"

static tg_status echo(tg_hctx *h, void *user)
{
    (void)user;
    const tg_event *ev = tg_hctx_event(h);
    return ev->text ? tg_reply(h, ev->text) : TG_OK;
}

static int serve(tg_bot *bot, tg_dispatcher *d, const tg_webhook_options *wo)
{
    tg_ctx *ctx = tg_ctx_new(bot);
    if (!ctx || tg_webhook_set(ctx, wo) != TG_OK) {
        fprintf(stderr, "webhook: setWebhook failed: %s\n", ctx ? tg_ctx_errmsg(ctx) : "no memory");
        tg_ctx_free(ctx);
        return 1;
    }
    fprintf(stderr, "webhook: serving port %d for %s; press Ctrl-C to stop\n", wo->port, wo->url);
    tg_status st = tg_run_webhook(d, wo); /* the one line that differs from polling */
    if (st != TG_OK)
        fprintf(stderr, "webhook: %s: %s\n", tg_strerror(st), tg_dispatcher_errmsg(d));
    tg_ctx_reset(ctx);
    if (tg_webhook_delete(ctx, false) != TG_OK)
        fprintf(stderr, "webhook: deleteWebhook failed: %s\n", tg_ctx_errmsg(ctx));
    tg_ctx_free(ctx);
    return st == TG_OK ? 0 : 1;
}

int main(void)
{
    tg_bot *bot = example_bot("webhook");
    if (!bot)
        return EXAMPLE_EXIT_CONFIG;
    const char *url = example_env("WEBHOOK_URL");
    if (!url) {
        fprintf(stderr, "webhook: WEBHOOK_URL is not set (the public https URL Telegram will "
                        "post to, e.g. https://bot.example.com:8443/tg)\n");
        tg_bot_free(bot);
        return EXAMPLE_EXIT_CONFIG;
    }
    const char *port = example_env("WEBHOOK_PORT");
    const char *path = strchr(strstr(url, "://") ? strstr(url, "://") + 3 : url, '/');
    tg_webhook_options wo = {.port = port ? atoi(port) : 8443,
                             .path = path ? path : "/",
                             .url = url,
                             .secret_token = example_env("WEBHOOK_SECRET"),
                             .cert_file = example_env("WEBHOOK_CERT"),
                             .key_file = example_env("WEBHOOK_KEY"),
                             .upload_certificate = example_env("WEBHOOK_CERT") != NULL};
    tg_router *r = tg_router_new();
    tg_router_on_kind(r, TG_UPDATE_MESSAGE, echo, NULL);
    tg_dispatcher *d = example_dispatcher("webhook", bot, r, NULL);
    int rc = d ? serve(bot, d, &wo) : 1;
    tg_dispatcher_free(d);
    tg_router_free(r);
    tg_bot_free(bot);
    return rc;
}
