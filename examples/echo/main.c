/*
 * echo: answers every text message in a private chat with the same text, as a reply to it.
 * Long polling; stops cleanly on Ctrl-C.
 */
#include "example.h"

static bool has_text(const tg_hctx *h, void *user)
{
    (void)user;
    return tg_hctx_event(h)->text != NULL;
}

static tg_status echo(tg_hctx *h, void *user)
{
    (void)user;
    return tg_reply(h, tg_hctx_event(h)->text);
}

int main(void)
{
    tg_bot *bot = example_bot("echo");
    if (!bot)
        return EXAMPLE_EXIT_CONFIG;
    tg_router *r = tg_router_new();
    tg_filter *f = tg_filter_and(
        tg_filter_kind(TG_UPDATE_MESSAGE),
        tg_filter_and(tg_filter_chat_type("private"), tg_filter_fn_new(has_text, NULL)));
    tg_router_add(r, 0, f, echo, NULL);
    tg_dispatcher *d = example_dispatcher("echo", bot, r, NULL);
    int rc = d ? example_poll("echo", d) : 1;
    tg_dispatcher_free(d);
    tg_router_free(r);
    tg_bot_free(bot);
    return rc;
}
