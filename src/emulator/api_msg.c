/*
 * api_msg: the Bot API methods about messages (send, edit, delete, forward, copy, pins),
 * updates (getMe, getUpdates), chat actions, callback and inline queries. The method table
 * is methods.c; the shared send helpers are send.c.
 *
 * Error texts are Telegram's ("Bad Request: chat not found", "Bad Request: message to edit
 * not found", ...) so bots meet the same strings here as in production.
 */
#include "emulator/handlers.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "core/str.h"
#include "emulator/params.h"

int emu_h_send_message(emu_req *r)
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

int emu_h_get_me(emu_req *r)
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

int emu_h_true(emu_req *r)
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

int emu_h_get_updates(emu_req *r)
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

int emu_h_edit_message_text(emu_req *r)
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
    if (emu_check_inline_kb(r, p->reply_markup))
        return -1;
    t->text = text;
    t->reply_markup = p->reply_markup;
    return finish_edit(r, c, s, t);
}

int emu_h_edit_message_caption(emu_req *r)
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
        emu_check_inline_kb(r, p->reply_markup))
        return -1;
    t->caption = text && *text ? text : NULL;
    t->reply_markup = p->reply_markup;
    return finish_edit(r, c, s, t);
}

int emu_h_edit_message_reply_markup(emu_req *r)
{
    const tg_edit_message_reply_markup_params *p = r->p;
    emu_chat *c;
    emu_msg *s;
    tg_message *t = edit_decoded(r, &p->chat_id, p->message_id, p->inline_message_id, &c, &s);
    if (!t)
        return -1;
    if (emu_check_inline_kb(r, p->reply_markup))
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

int emu_h_delete_message(emu_req *r)
{
    const tg_delete_message_params *p = r->p;
    emu_chat *c = emu_req_chat(r, &p->chat_id, false);
    if (!c || delete_one(r, c, p->message_id))
        return -1;
    return emu_h_true(r);
}

int emu_h_delete_messages(emu_req *r)
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
    return emu_h_true(r);
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

int emu_h_forward_message(emu_req *r)
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

int emu_h_copy_message(emu_req *r)
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

int emu_h_answer_callback_query(emu_req *r)
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
    return emu_h_true(r);
}

int emu_h_answer_inline_query(emu_req *r)
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
    return emu_h_true(r);
}

int emu_h_send_chat_action(emu_req *r)
{
    const tg_send_chat_action_params *p = r->p;
    if (!emu_req_chat(r, &p->chat_id, true))
        return -1;
    if (p->action.id == TG_ENUM_UNKNOWN)
        return emu_fail(r, 400, "wrong parameter action in request");
    return emu_h_true(r);
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

int emu_h_pin_chat_message(emu_req *r)
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
    return emu_h_true(r);
}

int emu_h_unpin_chat_message(emu_req *r)
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
    return emu_h_true(r);
}

int emu_h_unpin_all_chat_messages(emu_req *r)
{
    const tg_unpin_all_chat_messages_params *p = r->p;
    emu_chat *c = emu_req_chat(r, &p->chat_id, false);
    if (!c || pin_rights(r, c))
        return -1;
    c->npins = 0;
    emu_touch(r->e);
    return emu_h_true(r);
}
