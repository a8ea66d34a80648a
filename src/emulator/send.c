/*
 * send: what every sending method shares: the chat a request names (and whether the bot
 * may write there), text and entity checks, reply parameters, reply markup, storing the
 * sent message and writing it as the result.
 */
#include "emulator/api.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/str.h"
#include "emulator/params.h"

bool emu_is_admin(const emu_chat *c, int64_t user_id, emu_bits right)
{
    for (size_t i = 0; i < c->nmembers; i++) {
        const emu_member *m = &c->members[i];
        if (m->user_id != user_id)
            continue;
        return m->status == EMU_M_OWNER ||
               (m->status == EMU_M_ADMIN && (right == 0 || (m->rights & right)));
    }
    return false;
}

/* The chat a bot addresses; NULL after emu_fail. to_send: the bot must be able to post. */
emu_chat *emu_req_chat(emu_req *r, const tg_chat_id *id, bool to_send)
{
    emu_chat *c = NULL;
    tg_chat_id num;
    /* "123" is a chat id given as a string, as Telegram reads it. */
    if (id->kind == TG_CHAT_ID_USERNAME && id->username && *id->username != '@' &&
        tg__parse_i64(id->username, strlen(id->username), &num.id) == 0) {
        num.kind = TG_CHAT_ID_INT;
        id = &num;
    }
    if (id->kind == TG_CHAT_ID_INT)
        c = emu_chat_get(r->e, id->id, r->b->u.id);
    else if (id->kind == TG_CHAT_ID_USERNAME && id->username)
        c = emu_chat_by_username(r->e, id->username);
    if (!c) {
        if (id->kind == TG_CHAT_ID_INT && emu_user_get(r->e, id->id) && id->id > 0)
            emu_fail(r, 403, "bot can't initiate conversation with a user");
        else
            emu_fail(r, 400, "chat not found");
        return NULL;
    }
    if (c->migrate_to) {
        r->migrate_to = c->migrate_to;
        emu_fail(r, 400, "group chat was upgraded to a supergroup chat");
        return NULL;
    }
    if (c->type == TG_CHAT_TYPE_PRIVATE) {
        if (to_send && c->blocked) {
            emu_fail(r, 403, "bot was blocked by the user");
            return NULL;
        }
        return c;
    }
    emu_member *m = emu_member_get(c, r->b->u.id);
    if (m && m->status == EMU_M_BANNED) {
        emu_fail(r, 403, "bot was kicked from the %s chat",
                 c->type == TG_CHAT_TYPE_CHANNEL ? "channel" : "group");
        return NULL;
    }
    if (!emu_member_in(m)) {
        emu_fail(r, 403, "bot is not a member of the %s chat",
                 c->type == TG_CHAT_TYPE_CHANNEL ? "channel" : "group");
        return NULL;
    }
    if (to_send && c->type == TG_CHAT_TYPE_CHANNEL && !emu_is_admin(c, r->b->u.id, 0)) {
        emu_fail(r, 400, "need administrator rights in the channel chat");
        return NULL;
    }
    return c;
}

int emu_write_msg(emu_req *r, const emu_msg *m)
{
    tg_message *t = emu_msg_decode(m, r->a);
    if (!t)
        return emu_fail(r, 500, "Internal Server Error: stored message does not decode");
    tg__codec_encode(&tg__t_message, t, &r->w, 0);
    return 0;
}

/* Text (or caption) checks and parse_mode: the final text and entities. */
int emu_check_text(emu_req *r, const char *text, int32_t parse_mode, const tg_message_entity *ents,
                   size_t nents, bool caption, char **out_text, const tg_message_entity **out_ents,
                   size_t *out_n)
{
    *out_text = (char *)text;
    *out_ents = ents;
    *out_n = nents;
    if (!text)
        return 0;
    if (parse_mode == TG_PARSE_MODE_HTML || parse_mode == TG_PARSE_MODE_MARKDOWN_V2) {
        tg_message_entity *pe = NULL;
        size_t pn = 0;
        char err[200];
        if (emu_markup_parse(parse_mode, text, r->a, out_text, &pe, &pn, err, sizeof err))
            return emu_fail(r, 400, "%s", err);
        *out_ents = pe;
        *out_n = pn;
    } else if (parse_mode == TG_ENUM_UNKNOWN || parse_mode == TG_PARSE_MODE_MARKDOWN) {
        if (parse_mode == TG_ENUM_UNKNOWN)
            return emu_fail(r, 400, "unsupported parse_mode");
    }
    size_t n = emu_utf16_len(*out_text, strlen(*out_text));
    if (!caption && n == 0)
        return emu_fail(r, 400, "message text is empty");
    if (n > (caption ? EMU_CAPTION_MAX : EMU_TEXT_MAX))
        return emu_fail(r, 400, caption ? "message caption is too long" : "message is too long");
    for (size_t i = 0; i < *out_n; i++) {
        const tg_message_entity *x = &(*out_ents)[i];
        if (x->offset < 0 || x->length <= 0 || (size_t)(x->offset + x->length) > n)
            return emu_fail(r, 400, "can't parse entities: entity %zu is out of the text", i);
    }
    /* text_link urls as Telegram checks and keeps them (a copy: the params stay as given) */
    if (*out_n) {
        tg_message_entity *copy = tg__arena_alloc(r->a, *out_n * sizeof *copy);
        char err[320];
        if (!copy)
            return emu_fail(r, 500, "Internal Server Error: out of memory");
        memcpy(copy, *out_ents, *out_n * sizeof *copy);
        if (emu_links_check(copy, *out_n, r->a, err, sizeof err))
            return emu_fail(r, 400, "%s", err);
        *out_ents = copy;
    }
    return 0;
}

/* Inline keyboard checks, as Telegram: callback_data length (BUTTON_DATA_INVALID), and URL
 * buttons' links (emu_link_check; kept in their checked form). */
int emu_check_inline_kb(emu_req *r, const tg_inline_keyboard_markup *kb)
{
    for (size_t i = 0; kb && i < kb->inline_keyboard_count; i++) {
        const tg_inline_keyboard_button_list *row = &kb->inline_keyboard[i];
        for (size_t j = 0; j < row->count; j++) {
            const tg_inline_keyboard_button *b = &row->items[j];
            if (b->callback_data && strlen(b->callback_data) > EMU_CALLBACK_DATA_MAX)
                return emu_fail(r, 400, "BUTTON_DATA_INVALID");
            if (!b->text || !*b->text)
                return emu_fail(r, 400, "text buttons are unallowed in the inline keyboard");
        }
    }
    char err[320];
    /* decoded into this request's arena: ours to normalize */
    if (emu_kb_links_check((tg_inline_keyboard_markup *)kb, r->a, err, sizeof err))
        return emu_fail(r, 400, "%s", err);
    return 0;
}

/* reply_markup of a send: inline keyboards go on the message; reply keyboards on the chat
 * (shown to the user until removed). */
int emu_apply_markup(emu_req *r, emu_chat *c, const tg_reply_markup *rm, tg_message *m)
{
    switch (rm->kind) {
    case TG_REPLY_MARKUP_INLINE_KEYBOARD_MARKUP:
        if (emu_check_inline_kb(r, rm->inline_keyboard_markup))
            return -1;
        m->reply_markup = rm->inline_keyboard_markup;
        return 0;
    case TG_REPLY_MARKUP_REPLY_KEYBOARD_MARKUP: {
        char *json = emu_encode(&tg__t_reply_keyboard_markup, rm->reply_keyboard_markup);
        if (json) {
            tg__free(c->reply_kb);
            c->reply_kb = json;
        }
        return 0;
    }
    case TG_REPLY_MARKUP_REPLY_KEYBOARD_REMOVE:
        tg__free(c->reply_kb);
        c->reply_kb = NULL;
        return 0;
    default:
        return 0;
    }
}

/* reply_parameters: the message replied to, without its own reply (as Telegram sends). */
int emu_apply_reply(emu_req *r, emu_chat *c, const tg_reply_parameters *rp, tg_message *m)
{
    if (!rp || !rp->message_id.has)
        return 0;
    emu_chat *src = c;
    if (rp->chat_id.kind != TG_CHAT_ID_NONE && !(src = emu_req_chat(r, &rp->chat_id, false)))
        return -1;
    emu_msg *s = emu_msg_get(src, rp->message_id.v);
    if (!s) {
        if (rp->allow_sending_without_reply.has && rp->allow_sending_without_reply.v)
            return 0;
        return emu_fail(r, 400, "message to be replied not found");
    }
    tg_message *t = emu_msg_decode(s, r->a);
    if (t) {
        t->reply_to_message = NULL;
        m->reply_to_message = t;
    }
    return 0;
}

/* Store m as sent by the bot in c and write it as the result. */
int emu_finish_send(emu_req *r, emu_chat *c, tg_message *m)
{
    m->from = c->type == TG_CHAT_TYPE_CHANNEL ? NULL : emu_tg_user(&r->b->u, r->a);
    if (c->type == TG_CHAT_TYPE_CHANNEL)
        m->sender_chat = emu_tg_chat(r->e, c, r->a);
    emu_msg *s = emu_msg_store(r->e, c, m, r->b->u.id, r->a);
    if (!s)
        return emu_fail(r, 500, "Internal Server Error: out of memory");
    if (c->type == TG_CHAT_TYPE_CHANNEL)
        emu_deliver_msg(r->e, c, emu_msg_decode(s, r->a), r->b->u.id, false, r->a);
    return emu_write_msg(r, s);
}
