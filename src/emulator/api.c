/*
 * api: the Bot API request path (method lookup, params, envelope, event log) and the
 * methods about messages, updates, callback and inline queries, and files. Chats, members
 * and commands are in api_chat.c; webhooks in webhook.c.
 *
 * Error texts are Telegram's ("Bad Request: chat not found", "Bad Request: message to edit
 * not found", ...) so bots meet the same strings here as in production.
 */
#include "emulator/api.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "core/str.h"
#include "emulator/params.h"

int emu_fail(emu_req *r, int code, const char *fmt, ...)
{
    const char *prefix = code == 400   ? "Bad Request: "
                         : code == 403 ? "Forbidden: "
                         : code == 409 ? "Conflict: "
                                       : "";
    r->code = code;
    int n = snprintf(r->desc, sizeof r->desc, "%s", prefix);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->desc + n, sizeof r->desc - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

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
static int check_inline_kb(emu_req *r, const tg_inline_keyboard_markup *kb)
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
        if (check_inline_kb(r, rm->inline_keyboard_markup))
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

static int h_send_message(emu_req *r)
{
    const tg_send_message_params *p = r->p;
    emu_chat *c = emu_req_chat(r, &p->chat_id, true);
    if (!c)
        return -1;
    tg_message m = {0};
    char *text;
    if (emu_check_text(r, p->text, p->parse_mode.id, p->entities, p->entities_count, false, &text,
                       &m.entities, &m.entities_count))
        return -1;
    m.text = text;
    m.link_preview_options = p->link_preview_options;
    m.has_protected_content = p->protect_content.has && p->protect_content.v;
    if (emu_apply_reply(r, c, p->reply_parameters, &m) ||
        emu_apply_markup(r, c, &p->reply_markup, &m))
        return -1;
    return emu_finish_send(r, c, &m);
}

static int h_get_me(emu_req *r)
{
    tg_user *u = emu_tg_user(&r->b->u, r->a);
    u->can_join_groups = (tg_opt_bool)TG_SOME(true);
    u->can_read_all_group_messages = (tg_opt_bool)TG_SOME(false);
    u->supports_inline_queries = (tg_opt_bool)TG_SOME(true);
    u->can_connect_to_business = (tg_opt_bool)TG_SOME(false);
    u->has_main_web_app = (tg_opt_bool)TG_SOME(false);
    tg__codec_encode(&tg__t_user, u, &r->w, 0);
    return 0;
}

static int h_true(emu_req *r)
{
    tg__jw_bool(&r->w, true);
    return 0;
}

/* ---- getUpdates ---- */

static void set_allowed(emu_bot *b, const tg_update_type *types, size_t n, bool given)
{
    if (!given)
        return;
    uint64_t mask = 0;
    for (size_t i = 0; i < n; i++)
        if (types[i].id > 1 && types[i].id < 64)
            mask |= (uint64_t)1 << types[i].id;
    if (n == 0)
        mask = ~(uint64_t)0 & ~((uint64_t)1 << TG_UPDATE_TYPE_CHAT_MEMBER) &
               ~((uint64_t)1 << TG_UPDATE_TYPE_MESSAGE_REACTION) &
               ~((uint64_t)1 << TG_UPDATE_TYPE_MESSAGE_REACTION_COUNT);
    b->allowed = mask;
}

static void write_updates(emu_req *r, int64_t limit)
{
    tg__jw_arr_begin(&r->w);
    for (size_t i = 0; i < r->b->nq && (int64_t)i < limit; i++)
        tg__jw_raw(&r->w, r->b->q[i].json, strlen(r->b->q[i].json));
    tg__jw_arr_end(&r->w);
}

static int h_get_updates(emu_req *r)
{
    const tg_get_updates_params *p = r->p;
    emu_bot *b = r->b;
    if (b->hook.url)
        return emu_fail(r, 409,
                        "can't use getUpdates method while webhook is active; use "
                        "deleteWebhook to delete the webhook first");
    tg_get_updates_params none = {0};
    if (!p)
        p = &none;
    set_allowed(b, p->allowed_updates, p->allowed_updates_count, p->allowed_updates != NULL);
    if (p->offset.has && p->offset.v < 0 && b->nq > (size_t)-p->offset.v)
        emu_updates_confirm(b, b->q[b->nq - (size_t)-p->offset.v].id);
    else if (p->offset.has)
        emu_updates_confirm(b, p->offset.v);
    int64_t limit = p->limit.has ? p->limit.v : 100;
    if (limit < 1 || limit > 100)
        limit = limit < 1 ? 1 : 100;
    int64_t timeout = p->timeout.has ? p->timeout.v : 0;
    if (timeout > EMU_POLL_MAX_S)
        timeout = EMU_POLL_MAX_S;
    uint64_t gen = ++b->poll_gen;
    pthread_cond_broadcast(&r->e->cv);
    if (timeout > 0 && b->nq == 0) {
        struct timespec until = emu_deadline(r->e, timeout * 1000);
        while (b->nq == 0 && !r->e->stopping && b->poll_gen == gen && !b->hook.url) {
            if (pthread_cond_timedwait(&r->e->cv, &r->e->mu, &until) == ETIMEDOUT)
                break;
        }
        if (b->poll_gen != gen)
            return emu_fail(r, 409,
                            "terminated by other getUpdates request; make sure that "
                            "only one bot instance is running");
    }
    write_updates(r, limit);
    return 0;
}

/* ---- editing ---- */

/* The bot's own message to edit; NULL after emu_fail. */
static emu_msg *edit_target(emu_req *r, const tg_chat_id *cid, tg_opt_i64 mid,
                            const char *inline_id, emu_chat **chat)
{
    if (inline_id) {
        emu_fail(r, 400, "MESSAGE_ID_INVALID");
        return NULL;
    }
    if (cid->kind == TG_CHAT_ID_NONE) {
        emu_fail(r, 400, "chat_id is empty");
        return NULL;
    }
    if (!mid.has) {
        emu_fail(r, 400, "message_id is empty");
        return NULL;
    }
    emu_chat *c = emu_req_chat(r, cid, false);
    if (!c)
        return NULL;
    emu_msg *s = emu_msg_get(c, mid.v);
    if (!s) {
        emu_fail(r, 400, "message to edit not found");
        return NULL;
    }
    if (s->sender_id != r->b->u.id) {
        emu_fail(r, 400, "message can't be edited");
        return NULL;
    }
    *chat = c;
    return s;
}

/* The bot's message to edit, decoded; NULL after emu_fail. */
static tg_message *edit_decoded(emu_req *r, const tg_chat_id *cid, tg_opt_i64 mid,
                                const char *inline_id, emu_chat **chat, emu_msg **stored)
{
    *stored = edit_target(r, cid, mid, inline_id, chat);
    if (!*stored)
        return NULL;
    tg_message *t = emu_msg_decode(*stored, r->a);
    if (!t)
        emu_fail(r, 500, "Internal Server Error: stored message does not decode");
    return t;
}

/* Store the edited message t (edit_date now) unless nothing changed; write the result. */
static int finish_edit(emu_req *r, emu_chat *c, emu_msg *s, tg_message *t)
{
    char *before = s->json;
    char *json = emu_encode(&tg__t_message, t);
    if (!json)
        return emu_fail(r, 500, "Internal Server Error: out of memory");
    bool same = strcmp(json, before) == 0;
    tg__free(json);
    if (same)
        return emu_fail(r, 400,
                        "message is not modified: specified new message content and "
                        "reply markup are exactly the same as a current content and "
                        "reply markup of the message");
    t->edit_date = (tg_opt_i64)TG_SOME(emu_now());
    if (emu_msg_replace(s, t) != 0)
        return emu_fail(r, 500, "Internal Server Error: out of memory");
    c->version++;
    emu_touch(r->e);
    if (c->type == TG_CHAT_TYPE_CHANNEL)
        emu_deliver_msg(r->e, c, t, r->b->u.id, true, r->a);
    return emu_write_msg(r, s);
}

static int h_edit_message_text(emu_req *r)
{
    const tg_edit_message_text_params *p = r->p;
    emu_chat *c;
    emu_msg *s;
    tg_message *t = edit_decoded(r, &p->chat_id, p->message_id, p->inline_message_id, &c, &s);
    if (!t)
        return -1;
    if (!p->text)
        return emu_fail(r, 400, "text is empty");
    if (!t->text)
        return emu_fail(r, 400, "there is no text in the message to edit");
    char *text;
    if (emu_check_text(r, p->text, p->parse_mode.id, p->entities, p->entities_count, false, &text,
                       &t->entities, &t->entities_count))
        return -1;
    if (check_inline_kb(r, p->reply_markup))
        return -1;
    t->text = text;
    t->reply_markup = p->reply_markup;
    return finish_edit(r, c, s, t);
}

static int h_edit_message_caption(emu_req *r)
{
    const tg_edit_message_caption_params *p = r->p;
    emu_chat *c;
    emu_msg *s;
    tg_message *t = edit_decoded(r, &p->chat_id, p->message_id, p->inline_message_id, &c, &s);
    if (!t)
        return -1;
    if (t->text)
        return emu_fail(r, 400, "there is no caption in the message to edit");
    char *text;
    if (emu_check_text(r, p->caption, p->parse_mode.id, p->caption_entities,
                       p->caption_entities_count, true, &text, &t->caption_entities,
                       &t->caption_entities_count) ||
        check_inline_kb(r, p->reply_markup))
        return -1;
    t->caption = text && *text ? text : NULL;
    t->reply_markup = p->reply_markup;
    return finish_edit(r, c, s, t);
}

static int h_edit_message_reply_markup(emu_req *r)
{
    const tg_edit_message_reply_markup_params *p = r->p;
    emu_chat *c;
    emu_msg *s;
    tg_message *t = edit_decoded(r, &p->chat_id, p->message_id, p->inline_message_id, &c, &s);
    if (!t)
        return -1;
    if (check_inline_kb(r, p->reply_markup))
        return -1;
    t->reply_markup = p->reply_markup;
    return finish_edit(r, c, s, t);
}

/* ---- deleting, forwarding, copying ---- */

static int delete_one(emu_req *r, emu_chat *c, int64_t id)
{
    emu_msg *s = emu_msg_get(c, id);
    if (!s)
        return emu_fail(r, 400, "message to delete not found");
    bool own = s->sender_id == r->b->u.id;
    if (!own && c->type != TG_CHAT_TYPE_PRIVATE &&
        !emu_is_admin(c, r->b->u.id, 1u << 1 /* can_delete_messages */))
        return emu_fail(r, 400, "message can't be deleted");
    s->deleted = true;
    c->version++;
    emu_touch(r->e);
    return 0;
}

static int h_delete_message(emu_req *r)
{
    const tg_delete_message_params *p = r->p;
    emu_chat *c = emu_req_chat(r, &p->chat_id, false);
    if (!c || delete_one(r, c, p->message_id))
        return -1;
    return h_true(r);
}

static int h_delete_messages(emu_req *r)
{
    const tg_delete_messages_params *p = r->p;
    emu_chat *c = emu_req_chat(r, &p->chat_id, false);
    if (!c)
        return -1;
    if (p->message_ids_count < 1 || p->message_ids_count > 100)
        return emu_fail(r, 400, "message_ids must hold 1 to 100 identifiers");
    for (size_t i = 0; i < p->message_ids_count; i++)
        if (emu_msg_get(c, p->message_ids[i]))
            delete_one(r, c, p->message_ids[i]);
    r->code = 0;
    return h_true(r);
}

/* The content of src, ready to be sent again (ids, sender, reply and markup cleared). */
static tg_message *content_of(emu_req *r, emu_chat *from, int64_t id, const char *what,
                              const tg_user **sender)
{
    emu_msg *s = emu_msg_get(from, id);
    if (!s) {
        emu_fail(r, 400, "message to %s not found", what);
        return NULL;
    }
    tg_message *t = emu_msg_decode(s, r->a);
    if (!t) {
        emu_fail(r, 500, "Internal Server Error: stored message does not decode");
        return NULL;
    }
    tg_message *m = tg__arena_zalloc(r->a, sizeof *m);
    m->text = t->text;
    m->entities = t->entities;
    m->entities_count = t->entities_count;
    m->caption = t->caption;
    m->caption_entities = t->caption_entities;
    m->caption_entities_count = t->caption_entities_count;
    m->photo = t->photo;
    m->photo_count = t->photo_count;
    m->document = t->document;
    m->audio = t->audio;
    m->video = t->video;
    m->voice = t->voice;
    m->animation = t->animation;
    m->sticker = t->sticker;
    m->location = t->location;
    m->contact = t->contact;
    m->forward_origin = t->forward_origin;
    *sender = t->from;
    m->date = t->date;
    return m;
}

static int h_forward_message(emu_req *r)
{
    const tg_forward_message_params *p = r->p;
    emu_chat *c = emu_req_chat(r, &p->chat_id, true);
    emu_chat *from = c ? emu_req_chat(r, &p->from_chat_id, false) : NULL;
    const tg_user *sender = NULL;
    tg_message *m = from ? content_of(r, from, p->message_id, "forward", &sender) : NULL;
    if (!m)
        return -1;
    if (m->forward_origin.kind == TG_MESSAGE_ORIGIN_NONE) {
        if (from->type == TG_CHAT_TYPE_CHANNEL) {
            tg_message_origin_channel *o = tg__arena_zalloc(r->a, sizeof *o);
            o->date = m->date;
            o->chat = emu_tg_chat(r->e, from, r->a);
            o->message_id = p->message_id;
            m->forward_origin = tg_message_origin_from_channel(o);
        } else if (sender) {
            tg_message_origin_user *o = tg__arena_zalloc(r->a, sizeof *o);
            o->date = m->date;
            o->sender_user = sender;
            m->forward_origin = tg_message_origin_from_user(o);
        }
    }
    m->date = 0;
    m->has_protected_content = p->protect_content.has && p->protect_content.v;
    return emu_finish_send(r, c, m);
}

static int h_copy_message(emu_req *r)
{
    const tg_copy_message_params *p = r->p;
    emu_chat *c = emu_req_chat(r, &p->chat_id, true);
    emu_chat *from = c ? emu_req_chat(r, &p->from_chat_id, false) : NULL;
    const tg_user *sender = NULL;
    tg_message *m = from ? content_of(r, from, p->message_id, "copy", &sender) : NULL;
    if (!m)
        return -1;
    (void)sender;
    m->date = 0;
    m->forward_origin = (tg_message_origin){0};
    if (p->caption) {
        char *text;
        if (m->text)
            return emu_fail(r, 400, "there is no caption in the message to copy");
        if (emu_check_text(r, p->caption, p->parse_mode.id, p->caption_entities,
                           p->caption_entities_count, true, &text, &m->caption_entities,
                           &m->caption_entities_count))
            return -1;
        m->caption = text;
    }
    if (emu_apply_reply(r, c, p->reply_parameters, m) ||
        emu_apply_markup(r, c, &p->reply_markup, m))
        return -1;
    m->from = emu_tg_user(&r->b->u, r->a);
    emu_msg *s = emu_msg_store(r->e, c, m, r->b->u.id, r->a);
    if (!s)
        return emu_fail(r, 500, "Internal Server Error: out of memory");
    tg_message_id id = {.message_id = s->id};
    tg__codec_encode(&tg__t_message_id, &id, &r->w, 0);
    return 0;
}

/* ---- callback and inline queries ---- */

static int h_answer_callback_query(emu_req *r)
{
    const tg_answer_callback_query_params *p = r->p;
    emu_query *q = emu_query_get(r->e, p->callback_query_id);
    if (!q || q->inline_query || q->bot_id != r->b->u.id || q->answered)
        return emu_fail(r, 400,
                        "query is too old and response timeout expired or query ID is "
                        "invalid");
    if (p->text && emu_utf16_len(p->text, strlen(p->text)) > 200)
        return emu_fail(r, 400, "MESSAGE_TOO_LONG");
    tg__buf b;
    tg__buf_init(&b, 0);
    tg__jw w;
    tg__jw_init(&w, &b);
    tg__jw_obj_begin(&w);
    TG__JW_KEY(&w, "text");
    tg__jw_str(&w, p->text);
    TG__JW_KEY(&w, "show_alert");
    tg__jw_bool(&w, p->show_alert.has && p->show_alert.v);
    TG__JW_KEY(&w, "url");
    tg__jw_str(&w, p->url);
    tg__jw_obj_end(&w);
    q->answer = w.err ? NULL : tg__buf_detach(&b, NULL);
    tg__buf_cleanup(&b);
    q->answered = true;
    emu_touch(r->e);
    return h_true(r);
}

static int h_answer_inline_query(emu_req *r)
{
    const tg_answer_inline_query_params *p = r->p;
    emu_query *q = emu_query_get(r->e, p->inline_query_id);
    if (!q || !q->inline_query || q->bot_id != r->b->u.id || q->answered)
        return emu_fail(r, 400,
                        "query is too old and response timeout expired or query ID is "
                        "invalid");
    if (p->results_count > 50)
        return emu_fail(r, 400, "RESULTS_TOO_MUCH");
    tg__buf b;
    tg__buf_init(&b, 0);
    tg__jw w;
    tg__jw_init(&w, &b);
    tg__jw_arr_begin(&w);
    for (size_t i = 0; i < p->results_count; i++)
        tg__codec_encode(&tg__t_inline_query_result, &p->results[i], &w, 0);
    tg__jw_arr_end(&w);
    q->answer = w.err ? NULL : tg__buf_detach(&b, NULL);
    tg__buf_cleanup(&b);
    q->answered = true;
    emu_touch(r->e);
    return h_true(r);
}

static int h_send_chat_action(emu_req *r)
{
    const tg_send_chat_action_params *p = r->p;
    if (!emu_req_chat(r, &p->chat_id, true))
        return -1;
    if (p->action.id == TG_ENUM_UNKNOWN)
        return emu_fail(r, 400, "wrong parameter action in request");
    return h_true(r);
}

/* ---- pins ---- */

static int pin_rights(emu_req *r, emu_chat *c)
{
    if (c->type == TG_CHAT_TYPE_PRIVATE)
        return 0;
    if (!emu_is_admin(c, r->b->u.id, 1u << 8 /* can_pin_messages */))
        return emu_fail(r, 400, "not enough rights to manage pinned messages in the chat");
    return 0;
}

static int h_pin_chat_message(emu_req *r)
{
    const tg_pin_chat_message_params *p = r->p;
    emu_chat *c = emu_req_chat(r, &p->chat_id, false);
    if (!c || pin_rights(r, c))
        return -1;
    emu_msg *s = emu_msg_get(c, p->message_id);
    if (!s)
        return emu_fail(r, 400, "message to pin not found");
    int64_t *np = tg__realloc(c->pins, (c->npins + 1) * sizeof *np);
    if (!np)
        return emu_fail(r, 500, "Internal Server Error: out of memory");
    c->pins = np;
    c->pins[c->npins++] = p->message_id;
    tg_message *t = emu_msg_decode(s, r->a);
    tg_message svc = {.from = emu_tg_user(&r->b->u, r->a)};
    if (t) {
        t->reply_to_message = NULL;
        svc.pinned_message = tg_maybe_inaccessible_message_from_message(t);
    }
    emu_msg_store(r->e, c, &svc, r->b->u.id, r->a);
    return h_true(r);
}

static int h_unpin_chat_message(emu_req *r)
{
    const tg_unpin_chat_message_params *p = r->p;
    emu_chat *c = emu_req_chat(r, &p->chat_id, false);
    if (!c || pin_rights(r, c))
        return -1;
    if (c->npins == 0)
        return emu_fail(r, 400, "message to unpin not found");
    int64_t id = p->message_id.has ? p->message_id.v : c->pins[c->npins - 1];
    size_t k = 0;
    bool found = false;
    for (size_t i = 0; i < c->npins; i++) {
        if (c->pins[i] == id)
            found = true;
        else
            c->pins[k++] = c->pins[i];
    }
    if (!found)
        return emu_fail(r, 400, "message to unpin not found");
    c->npins = k;
    emu_touch(r->e);
    return h_true(r);
}

static int h_unpin_all_chat_messages(emu_req *r)
{
    const tg_unpin_all_chat_messages_params *p = r->p;
    emu_chat *c = emu_req_chat(r, &p->chat_id, false);
    if (!c || pin_rights(r, c))
        return -1;
    c->npins = 0;
    emu_touch(r->e);
    return h_true(r);
}

int emu_webhook_set(emu_req *r);
int emu_webhook_delete(emu_req *r);
int emu_webhook_info(emu_req *r);

static const emu_method_entry methods[] = {
    {"getMe", h_get_me},
    {"logOut", h_true},
    {"close", h_true},
    {"getUpdates", h_get_updates},
    {"setWebhook", emu_webhook_set},
    {"deleteWebhook", emu_webhook_delete},
    {"getWebhookInfo", emu_webhook_info},
    {"sendMessage", h_send_message},
    {"forwardMessage", h_forward_message},
    {"copyMessage", h_copy_message},
    {"sendChatAction", h_send_chat_action},
    {"editMessageText", h_edit_message_text},
    {"editMessageCaption", h_edit_message_caption},
    {"editMessageReplyMarkup", h_edit_message_reply_markup},
    {"deleteMessage", h_delete_message},
    {"deleteMessages", h_delete_messages},
    {"pinChatMessage", h_pin_chat_message},
    {"unpinChatMessage", h_unpin_chat_message},
    {"unpinAllChatMessages", h_unpin_all_chat_messages},
    {"answerCallbackQuery", h_answer_callback_query},
    {"answerInlineQuery", h_answer_inline_query},
};

static emu_handler find_handler(const char *name)
{
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (!strcmp(methods[i].name, name))
            return methods[i].fn;
    for (size_t i = 0; i < emu_chat_method_count; i++)
        if (!strcmp(emu_chat_methods[i].name, name))
            return emu_chat_methods[i].fn;
    for (size_t i = 0; i < emu_media_method_count; i++)
        if (!strcmp(emu_media_methods[i].name, name))
            return emu_media_methods[i].fn;
    return NULL;
}

bool emu_api_emulated(const char *method)
{
    return find_handler(method) != NULL;
}

static const tg__method *method_by_name(const char *name)
{
    for (size_t i = 0; i < tg__method_count; i++)
        if (!strcasecmp(tg__methods[i]->name, name))
            return tg__methods[i];
    return NULL;
}

/* {"ok":false,...} */
static void write_error(emu_req *r, tg__buf *out)
{
    tg__jw w;
    tg__jw_init(&w, out);
    tg__jw_obj_begin(&w);
    TG__JW_KEY(&w, "ok");
    tg__jw_bool(&w, false);
    TG__JW_KEY(&w, "error_code");
    tg__jw_i64(&w, r->code);
    TG__JW_KEY(&w, "description");
    tg__jw_str(&w, r->desc);
    if (r->retry_after || r->migrate_to) {
        TG__JW_KEY(&w, "parameters");
        tg__jw_obj_begin(&w);
        if (r->retry_after) {
            TG__JW_KEY(&w, "retry_after");
            tg__jw_i64(&w, r->retry_after);
        }
        if (r->migrate_to) {
            TG__JW_KEY(&w, "migrate_to_chat_id");
            tg__jw_i64(&w, r->migrate_to);
        }
        tg__jw_obj_end(&w);
    }
    tg__jw_obj_end(&w);
}

/* Rate limits (when switched on), as Telegram documents them: about one message a second
 * in a chat (bursts of 3), 20 a minute in a group, 30 a second per bot. Per chat a token
 * bucket; per bot a one-second window. 429 with retry_after in whole seconds. */
#define RATE_BOT_PER_S      30
#define RATE_PRIVATE_BURST  3.0
#define RATE_PRIVATE_PER_MS (1.0 / 1000)
#define RATE_GROUP_BURST    20.0
#define RATE_GROUP_PER_MS   (20.0 / 60000)

static int too_many(emu_req *r, int64_t retry_after)
{
    r->retry_after = retry_after < 1 ? 1 : retry_after;
    r->code = 429;
    snprintf(r->desc, sizeof r->desc, "Too Many Requests: retry after %lld",
             (long long)r->retry_after);
    return -1;
}

static bool chat_limited(emu_req *r, int64_t now)
{
    const tg__field *f = tg__codec_lookup(r->m->params_desc, "chat_id", 7);
    if (!f || f->kind != TG__K_CHATID || !r->p)
        return false;
    const tg_chat_id *id = (const tg_chat_id *)(const void *)((const char *)r->p + f->off);
    emu_chat *c = id->kind == TG_CHAT_ID_INT ? emu_chat_get(r->e, id->id, r->b->u.id) : NULL;
    if (!c)
        return false;
    bool group = c->type != TG_CHAT_TYPE_PRIVATE;
    double burst = group ? RATE_GROUP_BURST : RATE_PRIVATE_BURST;
    double per_ms = group ? RATE_GROUP_PER_MS : RATE_PRIVATE_PER_MS;
    if (c->rate_ms == 0)
        c->rate_tokens = burst;
    else
        c->rate_tokens += (double)(now - c->rate_ms) * per_ms;
    if (c->rate_tokens > burst)
        c->rate_tokens = burst;
    c->rate_ms = now;
    if (c->rate_tokens >= 1.0) {
        c->rate_tokens -= 1.0;
        return false;
    }
    too_many(r, (int64_t)((1.0 - c->rate_tokens) / per_ms / 1000.0 + 0.999));
    return true;
}

static bool rate_limited(emu_req *r)
{
    if (!r->e->o.rate_limits || strncmp(r->m->name, "send", 4) != 0 ||
        !strcmp(r->m->name, "sendChatAction"))
        return false;
    int64_t now = (int64_t)tg__now_ms();
    emu_bot *b = r->b;
    if (now - b->rate_window_ms >= 1000) {
        b->rate_window_ms = now;
        b->rate_count = 0;
    }
    if (b->rate_count >= RATE_BOT_PER_S) {
        too_many(r, 1);
        return true;
    }
    if (chat_limited(r, now))
        return true;
    b->rate_count++;
    return false;
}

static int run(emu_req *r, const char *method, const char **json, size_t *len, tg__buf *conv)
{
    r->m = method_by_name(method);
    if (!r->m) {
        r->code = 404;
        snprintf(r->desc, sizeof r->desc, "Not Found");
        return -1;
    }
    emu_handler fn = find_handler(r->m->name);
    if (!fn)
        return emu_fail(r, 400, "method %s is not emulated by tgbot-emulator", r->m->name);
    char err[300];
    if (!*json && r->form) {
        if (emu_params_form_json(r->m, r->form, conv, err, sizeof err))
            return emu_fail(r, 400, "%s", err);
        *json = conv->data;
        *len = conv->len;
    } else if (*json && *len) {
        if (emu_params_normalize(r->m, *json, *len, conv, err, sizeof err))
            return emu_fail(r, 400, "%s", err);
        *json = conv->data;
        *len = conv->len;
    }
    if (!*json || !*len) {
        *json = "{}";
        *len = 2;
    }
    void *params = NULL;
    if (emu_params_decode(r->m, *json, *len, r->a, &params, err, sizeof err))
        return emu_fail(r, 400, "%s", err);
    r->p = params;
    if (rate_limited(r))
        return -1;
    return fn(r);
}

static void log_call(emu_req *r, const char *method, const char *json, size_t len,
                     const tg__buf *out)
{
    tg__buf b;
    tg__buf_init(&b, 0);
    tg__jw w;
    tg__jw_init(&w, &b);
    tg__jw_obj_begin(&w);
    TG__JW_KEY(&w, "method");
    tg__jw_str(&w, r->m ? r->m->name : "?");
    TG__JW_KEY(&w, "request");
    if (json && len && len < 8192)
        tg__jw_raw(&w, json, len);
    else
        tg__jw_str(&w, len ? "(large)" : "{}");
    TG__JW_KEY(&w, "response");
    if (out->len < 8192)
        tg__jw_raw(&w, out->data, out->len);
    else
        tg__jw_str(&w, "(large)");
    tg__jw_obj_end(&w);
    (void)method;
    if (!w.err && strcasecmp(method, "getUpdates") != 0)
        emu_event_add(r->e, r->b ? r->b->u.id : 0, "call", tg__buf_cstr(&b));
    tg__buf_cleanup(&b);
}

int emu_api_call(emu *e, const char *token, const char *method, const char *json, size_t len,
                 const emu_form *form, tg__buf *out)
{
    tg__arena a;
    tg__arena_init(&a, 0, 0);
    emu_req r = {.e = e, .a = &a, .form = form};
    tg__buf_init(&r.res, 0);
    tg__jw_init(&r.w, &r.res);
    tg__buf conv;
    tg__buf_init(&conv, 0);
    pthread_mutex_lock(&e->mu);
    r.b = emu_token_ok(token) ? emu_bot_get(e, token, true) : NULL;
    int rc;
    if (!r.b) {
        r.code = 401;
        snprintf(r.desc, sizeof r.desc, "Unauthorized");
        rc = -1;
    } else {
        rc = run(&r, method, &json, &len, &conv);
    }
    if (rc == 0 && r.w.err)
        rc = emu_fail(&r, 500, "Internal Server Error: result does not encode");
    if (rc == 0) {
        tg__buf_puts(out, "{\"ok\":true,\"result\":");
        tg__buf_append(out, r.res.data, r.res.len);
        tg__buf_putc(out, '}');
        emu_files_seen(e, r.b->u.id, tg__buf_cstr(out)); /* its uploads, forwards, copies */
    } else {
        write_error(&r, out);
    }
    if (r.b)
        log_call(&r, method, json, len, out);
    pthread_mutex_unlock(&e->mu);
    tg__buf_cleanup(&r.res);
    tg__buf_cleanup(&conv);
    tg__arena_cleanup(&a);
    return rc == 0 ? 200 : r.code;
}
