/*
 * tutorial: the pizza bot that docs/tutorial.md builds step by step, complete. Commands with
 * a published menu, buttons, a conversation with typed fields, formatted text, the user's
 * last order kept in SQLite across restarts; long polling by default, a webhook when
 * WEBHOOK_URL is set. The tutorial quotes this file: change
 * both together (ctest docs/tutorial_snippets checks that every C snippet is in here).
 *
 * Environment: TELEGRAM_BOT_TOKEN (required), TELEGRAM_API_URL (e.g. the emulator's
 * http://127.0.0.1:8081), BOT_DB (the SQLite file; default pizzabot.db), WEBHOOK_URL,
 * WEBHOOK_PORT (default 8443), WEBHOOK_SECRET.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tgbot/tgbot.h>

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* Send text with a reply markup to the update's chat. */
static tg_status send_markup(tg_hctx *h, const char *text, tg_reply_markup markup)
{
    return tg_send_message(
        tg_hctx_ctx(h),
        &(tg_send_message_params){.chat_id = tg_chat_id_int(tg_hctx_event(h)->chat_id),
                                  .text = text,
                                  .reply_markup = markup},
        NULL);
}

/* /start: a greeting with the user's name in bold, and their last order if they have one. */
static tg_status on_start(tg_hctx *h, void *user)
{
    (void)user;
    const tg_update *u = tg_hctx_update(h);
    const char *name = u && u->message && u->message->from ? u->message->from->first_name : "there";
    tg_data *me = tg_hctx_user_data(h); /* this user's data, loaded from the storage */
    const char *last = tg_data_get_str(me, "last_order");
    tg_text *t = tg_text_new();
    tg_text_plain(t, "Hello, ");
    tg_text_bold(t, name);
    tg_text_plain(t, "! Send /order to order a pizza.");
    if (last)
        tg_text_printf(t, " Orders so far: %lld; the last: %s.",
                       (long long)tg_data_get_int(me, "orders", 0), last);
    tg_status st = tg_text_status(t);
    if (st == TG_OK)
        st = tg_send_message(
            tg_hctx_ctx(h),
            &(tg_send_message_params){.chat_id = tg_chat_id_int(tg_hctx_event(h)->chat_id),
                                      .text = tg_text_str(t),
                                      .entities = tg_text_entities(t),
                                      .entities_count = tg_text_entity_count(t)},
            NULL);
    tg_text_free(t);
    return st;
}

/* /order: enter the conversation and ask for a size with three buttons. */
static tg_status on_order(tg_hctx *h, void *user)
{
    (void)user;
    tg_status st = tg_conv_enter(h, "size");
    if (st != TG_OK)
        return st;
    return send_markup(h, "Which size?",
                       TG_INLINE_MARKUP(TG_INLINE_ROW(TG_BUTTON_CALLBACK("Small", "size:small"),
                                                      TG_BUTTON_CALLBACK("Medium", "size:medium"),
                                                      TG_BUTTON_CALLBACK("Large", "size:large"))));
}

/* A size button: keep the size, then ask for the address. */
static tg_status on_size(tg_hctx *h, void *user)
{
    (void)user;
    const char *size = tg_hctx_event(h)->data + strlen("size:");
    tg_status st = tg_conv_set_str(h, "size", size);
    if (st == TG_OK)
        st = tg_conv_enter(h, "address");
    if (st == TG_OK)
        st = tg_answer(h, NULL); /* stops the button's spinner */
    if (st == TG_OK)
        st = send_markup(h, "Where should we deliver it?", TG_FORCE_REPLY("Street and number"));
    return st;
}

/* The address: keep it and ask to confirm. */
static tg_status on_address(tg_hctx *h, void *user)
{
    (void)user;
    const char *address = tg_hctx_event(h)->text;
    if (!address)
        return tg_reply(h, "Please send the address as text.");
    tg_status st = tg_conv_set_str(h, "address", address);
    if (st == TG_OK)
        st = tg_conv_enter(h, "confirm");
    char text[512];
    snprintf(text, sizeof text, "A %s pizza to %s. Shall we?", tg_conv_get_str(h, "size"), address);
    if (st == TG_OK)
        st = send_markup(
            h, text,
            TG_INLINE_MARKUP(TG_INLINE_ROW(TG_BUTTON_CALLBACK("Yes, order", "confirm:yes"),
                                           TG_BUTTON_CALLBACK("No", "confirm:no"))));
    return st;
}

/* Remember the order in the user's data: written to the storage after the handler. */
static tg_status remember_order(tg_hctx *h)
{
    tg_data *me = tg_hctx_user_data(h);
    char last[400];
    snprintf(last, sizeof last, "a %s pizza to %s", tg_conv_get_str(h, "size"),
             tg_conv_get_str(h, "address"));
    tg_status st = tg_data_set_str(me, "last_order", last);
    if (st == TG_OK)
        st = tg_data_set_int(me, "orders", tg_data_get_int(me, "orders", 0) + 1);
    return st;
}

/* The confirmation buttons: order or drop, and end the conversation either way. */
static tg_status on_confirm(tg_hctx *h, void *user)
{
    (void)user;
    char text[512];
    tg_status st = TG_OK;
    if (strcmp(tg_hctx_event(h)->data, "confirm:yes") == 0) {
        snprintf(text, sizeof text, "Ordered: a %s pizza to %s. Thanks!",
                 tg_conv_get_str(h, "size"), tg_conv_get_str(h, "address"));
        st = remember_order(h);
    } else {
        snprintf(text, sizeof text, "Order dropped.");
    }
    if (st == TG_OK)
        st = tg_conv_end(h);
    if (st == TG_OK)
        st = tg_answer(h, NULL);
    if (st == TG_OK)
        st = tg_edit(h, text, NULL); /* replaces the question and removes its buttons */
    return st;
}

static tg_status on_cancel(tg_hctx *h, void *user)
{
    (void)user;
    return tg_reply(h, "Order cancelled.");
}

static tg_router *make_router(void)
{
    tg_router *r = tg_router_new();
    tg_router_command(r, "start", "Say hello", on_start, NULL);
    tg_router_command(r, "order", "Order a pizza", on_order, NULL);
    tg_router_describe_command(r, "cancel", NULL, "Cancel the order");
    tg_router_add(r, 0, tg_filter_and(tg_filter_state("size"), tg_filter_callback_prefix("size:")),
                  on_size, NULL);
    tg_router_add(r, 0,
                  tg_filter_and(tg_filter_state("address"), tg_filter_kind(TG_UPDATE_MESSAGE)),
                  on_address, NULL);
    tg_router_add(r, 0,
                  tg_filter_and(tg_filter_state("confirm"), tg_filter_callback_prefix("confirm:")),
                  on_confirm, NULL);
    return r;
}

/* Publish the command menu once at start (setMyCommands). */
static void publish_commands(tg_bot *bot, tg_router *r)
{
    tg_ctx *ctx = tg_ctx_new(bot);
    if (ctx && tg_router_publish_commands(r, ctx, NULL, NULL) != TG_OK)
        fprintf(stderr, "tutorial: setMyCommands: %s\n", tg_ctx_errmsg(ctx));
    tg_ctx_free(ctx);
}

/* Serve a webhook at WEBHOOK_URL until Ctrl-C. */
static tg_status run_webhook(tg_bot *bot, tg_dispatcher *d, const char *url)
{
    char secret[65];
    const char *given = env("WEBHOOK_SECRET");
    if (!given && tg_webhook_secret_generate(secret, sizeof secret, 0) != TG_OK)
        return TG_ERR_IO;
    const char *path = strchr(strstr(url, "://") ? strstr(url, "://") + 3 : url, '/');
    tg_webhook_options wo = {.port = env("WEBHOOK_PORT") ? atoi(env("WEBHOOK_PORT")) : 8443,
                             .path = path ? path : "/",
                             .url = url,
                             .secret_token = given ? given : secret};
    tg_ctx *ctx = tg_ctx_new(bot);
    tg_status st = ctx ? tg_webhook_set(ctx, &wo) : TG_ERR_NOMEM;
    if (st == TG_OK)
        st = tg_run_webhook(d, &wo);
    else
        fprintf(stderr, "tutorial: setWebhook: %s\n", ctx ? tg_ctx_errmsg(ctx) : "no memory");
    tg_ctx_free(ctx);
    return st;
}

int main(void)
{
    const char *token = env("TELEGRAM_BOT_TOKEN");
    if (!token) {
        fprintf(stderr, "tutorial: TELEGRAM_BOT_TOKEN is not set\n");
        return 2;
    }
    tg_bot *bot = tg_bot_new(token, &(tg_bot_options){.base_url = env("TELEGRAM_API_URL")});
    if (!bot) {
        fprintf(stderr, "tutorial: %s\n", tg_bot_new_errmsg());
        return 1;
    }
    const char *db = env("BOT_DB") ? env("BOT_DB") : "pizzabot.db";
    tg_storage *store = tg_storage_sqlite_new(&(tg_sqlite_options){.path = db});
    if (!store) {
        fprintf(stderr, "tutorial: %s\n", tg_storage_errmsg());
        return 1;
    }
    tg_router *r = make_router();
    publish_commands(bot, r);
    tg_dispatcher *d =
        tg_dispatcher_new(bot, r,
                          &(tg_dispatcher_options){.storage = store,
                                                   .cancel_command = "cancel",
                                                   .on_cancel = on_cancel,
                                                   .conv_timeout_ms = 10 * 60 * 1000});
    if (!d) {
        fprintf(stderr, "tutorial: %s\n", tg_dispatcher_errmsg(NULL));
        return 1;
    }
    tg_dispatcher_stop_on_signals(d);
    const char *url = env("WEBHOOK_URL");
    tg_status st = url ? run_webhook(bot, d, url)
                       : tg_run_polling(d, &(tg_polling_options){.delete_webhook = true});
    if (st != TG_OK)
        fprintf(stderr, "tutorial: %s: %s\n", tg_strerror(st), tg_dispatcher_errmsg(d));
    tg_dispatcher_free(d);
    tg_storage_free(store);
    tg_router_free(r);
    tg_bot_free(bot);
    return st == TG_OK ? 0 : 1;
}
