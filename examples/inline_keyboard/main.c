/*
 * inline_keyboard: /start shows a counter with two buttons; pressing one edits the message
 * in place and answers the callback query. The state lives in the callback data itself
 * ("count:<value>"), so the bot keeps nothing between updates. The keyboard is built with
 * the macros of tgbot/keyboard.h: no JSON by hand.
 */
#include "example.h"

/* Send or edit the counter message showing n, with buttons that lead to n-1 and n+1. */
static tg_status show(tg_hctx *h, long n, bool edit)
{
    const tg_event *ev = tg_hctx_event(h);
    char text[64], down[32], up[32];
    snprintf(text, sizeof text, "Count: %ld", n);
    snprintf(down, sizeof down, "count:%ld", n - 1);
    snprintf(up, sizeof up, "count:%ld", n + 1);
    const tg_inline_keyboard_markup *kb = TG_INLINE_KEYBOARD(
        TG_INLINE_ROW(TG_BUTTON_CALLBACK("-1", down), TG_BUTTON_CALLBACK("+1", up)));
    if (!edit)
        return tg_send_message(
            tg_hctx_ctx(h),
            &(tg_send_message_params){.chat_id = tg_chat_id_int(ev->chat_id),
                                      .text = text,
                                      .reply_markup = tg_reply_markup_inline(kb)},
            NULL);
    /* a callback carries either a chat message or an inline message id */
    tg_edit_message_text_params p = {.text = text, .reply_markup = kb};
    if (ev->inline_message_id) {
        p.inline_message_id = ev->inline_message_id;
    } else {
        p.chat_id = tg_chat_id_int(ev->chat_id);
        p.message_id = (tg_opt_i64)TG_SOME(ev->message_id);
    }
    return tg_edit_message_text(tg_hctx_ctx(h), &p, NULL);
}

static tg_status on_start(tg_hctx *h, void *user)
{
    (void)user;
    return show(h, 0, false);
}

static tg_status on_count(tg_hctx *h, void *user)
{
    (void)user;
    size_t len;
    const char *num = tg_hctx_capture(h, 1, &len);
    long n = strtol(num, NULL, 10);
    if (n < -1000 || n > 1000)
        return tg_answer(h, "That's far enough.");
    tg_status st = show(h, n, true);
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
