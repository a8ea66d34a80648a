/*
 * moderation: in a group, an administrator who may restrict members replies to a message
 * with /ban to ban its author. Everyone else is told they lack the permission. The bot must
 * be an administrator of the group with the "ban users" right.
 */
#include "example.h"

/* Whether user may ban in chat: owner, or administrator with can_restrict_members. */
static tg_status may_ban(tg_hctx *h, int64_t chat, int64_t user, bool *yes)
{
    tg_chat_member m;
    tg_get_chat_member_params p = {.chat_id = tg_chat_id_int(chat), .user_id = user};
    tg_status st = tg_get_chat_member(tg_hctx_ctx(h), &p, &m);
    if (st != TG_OK)
        return tg_hctx_fail(h, st, "getChatMember: %s", tg_ctx_errmsg(tg_hctx_ctx(h)));
    *yes = m.kind == TG_CHAT_MEMBER_OWNER ||
           (m.kind == TG_CHAT_MEMBER_ADMINISTRATOR && m.administrator->can_restrict_members);
    return TG_OK;
}

static tg_status on_ban(tg_hctx *h, void *user)
{
    (void)user;
    const tg_event *ev = tg_hctx_event(h);
    const tg_update *u = tg_hctx_update(h);
    const tg_message *target = u && u->message ? u->message->reply_to_message : NULL;
    if (!target || !target->from)
        return tg_reply(h, "Reply to a message of the user to ban with /ban.");
    bool allowed = false;
    tg_status st = may_ban(h, ev->chat_id, ev->user_id, &allowed);
    if (st != TG_OK)
        return st;
    if (!allowed)
        return tg_reply(h, "Only administrators who may ban users can do that.");
    tg_ban_chat_member_params p = {.chat_id = tg_chat_id_int(ev->chat_id),
                                   .user_id = target->from->id};
    st = tg_ban_chat_member(tg_hctx_ctx(h), &p);
    if (st != TG_OK)
        return tg_reply(h, "I could not ban them: am I an administrator with that right?");
    char text[160];
    snprintf(text, sizeof text, "Banned %s.", target->from->first_name);
    return tg_send(h, text);
}

static void log_errors(tg_hctx *h, tg_status st, const char *msg, void *user)
{
    (void)user;
    fprintf(stderr, "moderation: update %lld: %s: %s\n", (long long)tg_hctx_event(h)->update_id,
            tg_strerror(st), msg);
}

int main(void)
{
    tg_bot *bot = example_bot("moderation");
    if (!bot)
        return EXAMPLE_EXIT_CONFIG;
    tg_router *r = tg_router_new();
    tg_router_add(
        r, 0,
        tg_filter_and(tg_filter_command("ban"), tg_filter_or(tg_filter_chat_type("group"),
                                                             tg_filter_chat_type("supergroup"))),
        on_ban, NULL);
    tg_router_on_error(r, log_errors, NULL);
    tg_dispatcher *d = example_dispatcher("moderation", bot, r, NULL);
    int rc = d ? example_poll("moderation", d) : 1;
    tg_dispatcher_free(d);
    tg_router_free(r);
    tg_bot_free(bot);
    return rc;
}
