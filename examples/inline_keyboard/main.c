/*
 * inline_keyboard: /start shows a counter with two buttons; pressing one edits the message
 * in place and answers the callback query. The state lives in the callback data itself
 * ("count:<value>"), so the bot keeps nothing between updates.
 */
#include "example.h"

/* The reply_markup member for value n: buttons that lead to n-1 and n+1. */
static void keyboard(char *out, size_t cap, long n)
{
    snprintf(out, cap,
             "\"reply_markup\":{\"inline_keyboard\":[[{\"text\":\"-1\",\"callback_data\":"
             "\"count:%ld\"},{\"text\":\"+1\",\"callback_data\":\"count:%ld\"}]]}",
             n - 1, n + 1);
}

static tg_status on_start(tg_hctx *h, void *user)
{
    (void)user;
    char kb[256];
    keyboard(kb, sizeof kb, 0);
    return tg_send_ex(h, "Count: 0", kb);
}

static tg_status on_count(tg_hctx *h, void *user)
{
    (void)user;
    size_t len;
    const char *num = tg_hctx_capture(h, 1, &len);
    long n = strtol(num, NULL, 10);
    if (n < -1000 || n > 1000)
        return tg_answer(h, "That's far enough.");
    char text[64], kb[256];
    snprintf(text, sizeof text, "Count: %ld", n);
    keyboard(kb, sizeof kb, n);
    tg_status st = tg_edit(h, text, kb);
    if (st != TG_OK)
        return st;
    return tg_answer(h, NULL); /* stops the button's loading spinner */
}

int main(void)
{
    tg_bot *bot = example_bot("inline_keyboard");
    if (!bot)
        return EXAMPLE_EXIT_CONFIG;
    tg_router *r = tg_router_new();
    tg_router_on_command(r, "start", on_start, NULL);
    tg_router_add(r, 0, tg_filter_callback_regex("^count:(-?[0-9]+)$"), on_count, NULL);
    tg_dispatcher *d = example_dispatcher("inline_keyboard", bot, r, NULL);
    int rc = d ? example_poll("inline_keyboard", d) : 1;
    tg_dispatcher_free(d);
    tg_router_free(r);
    tg_bot_free(bot);
    return rc;
}
