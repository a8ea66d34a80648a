/*
 * shortcuts_text: the handler shortcuts with formatted text (tgbot/text.h) and a keyboard,
 * through the generated calls, so a formatted reply with buttons is one line instead of a
 * whole tg_send_message with its params. Errors land in tg_hctx_errmsg like the other
 * shortcuts' (a refused keyboard with its own message: see method.c).
 */
#include <stdio.h>
#include <string.h>

#include "bot/dispatch/dispatch_int.h"
#include "tgbot/client.h"
#include "tgbot/text.h"

static tg_status done(tg_hctx *h, tg_status st)
{
    if (st != TG_OK)
        return tg_hctx_fail(h, st, "%s", tg_ctx_errmsg(h->ctx));
    h->err[0] = '\0';
    return st;
}

static tg_status ready(tg_hctx *h, const tg_text *t, const char *method)
{
    if (!h->ctx)
        return tg_hctx_fail(h, TG_ERR_INVALID, "%s: the dispatcher has no bot", method);
    if (!t)
        return tg_hctx_fail(h, TG_ERR_INVALID, "%s: text is NULL", method);
    if (tg_text_status(t) != TG_OK)
        return tg_hctx_fail(h, tg_text_status(t), "%s: the text is not finished: %s", method,
                            tg_text_errmsg(t));
    return TG_OK;
}

static tg_status send_t(tg_hctx *h, const tg_text *t, tg_reply_markup markup, bool reply)
{
    tg_status st = ready(h, t, "sendMessage");
    if (st != TG_OK)
        return st;
    if (!h->ev.has_chat)
        return tg_hctx_fail(h, TG_ERR_INVALID, "sendMessage: the %s update has no chat",
                            h->ev.kind_name);
    tg_reply_parameters rp = {.message_id = TG_SOME(h->ev.message_id)};
    bool replying = reply && h->ev.message_id && h->ev.kind != TG_UPDATE_CALLBACK_QUERY;
    return done(h, tg_send_message(h->ctx,
                                   &(tg_send_message_params){
                                       .business_connection_id = h->ev.business_connection_id,
                                       .chat_id = tg_chat_id_int(h->ev.chat_id),
                                       .text = tg_text_str(t),
                                       .entities = tg_text_entities(t),
                                       .entities_count = tg_text_entity_count(t),
                                       .reply_parameters = replying ? &rp : NULL,
                                       .reply_markup = markup},
                                   NULL));
}

tg_status tg_send_text(tg_hctx *h, const tg_text *t, tg_reply_markup markup)
{
    return send_t(h, t, markup, false);
}

tg_status tg_reply_text(tg_hctx *h, const tg_text *t, tg_reply_markup markup)
{
    return send_t(h, t, markup, true);
}

tg_status tg_edit_text(tg_hctx *h, const tg_text *t, const tg_inline_keyboard_markup *kb)
{
    tg_status st = ready(h, t, "editMessageText");
    if (st != TG_OK)
        return st;
    if (h->ev.kind != TG_UPDATE_CALLBACK_QUERY || (!h->ev.has_chat && !h->ev.inline_message_id))
        return tg_hctx_fail(h, TG_ERR_INVALID,
                            "editMessageText: tg_edit_text edits the message of a callback "
                            "query; this is a %s update",
                            h->ev.kind_name);
    tg_edit_message_text_params p = {.business_connection_id = h->ev.business_connection_id,
                                     .text = tg_text_str(t),
                                     .entities = tg_text_entities(t),
                                     .entities_count = tg_text_entity_count(t),
                                     .reply_markup = kb};
    if (h->ev.has_chat) {
        p.chat_id = tg_chat_id_int(h->ev.chat_id);
        p.message_id = (tg_opt_i64)TG_SOME(h->ev.message_id);
    } else {
        p.inline_message_id = h->ev.inline_message_id;
    }
    return done(h, tg_edit_message_text(h->ctx, &p, NULL));
}
