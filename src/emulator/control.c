/*
 * control: the control API, JSON over HTTP under /control/, to act as users and to look at
 * the world (docs/emulator.md lists every call). Users send text, commands, photos and
 * documents, press inline buttons, send inline queries, join and leave chats; tests and the
 * web chat read what bots sent, the pending updates and the event log.
 *
 * Every answer is {"ok":true,...} or {"ok":false,"error":"what went wrong"} with status 400
 * (bad input), 404 (unknown call or object) or 405 (wrong HTTP method).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"
#include "core/str.h"
#include "emulator/api.h"
#include "emulator/server.h"
#include "emulator/webapp.h"

typedef struct ctl {
    emu *e;
    const emu_form *q;
    tg__jdoc d;
    tg__jdoc d2; /* a second document (stored inline results) */
    bool have_body;
    tg__arena a;
    tg__buf *out;
    tg__jw w;
    int code;
    char err[256];
} ctl;

static int cfail(ctl *x, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int cfail(ctl *x, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->err, sizeof x->err, fmt, ap);
    va_end(ap);
    x->code = code;
    return -1;
}

/* ---- arguments: JSON body members, else query arguments ---- */

static uint32_t arg_tok(ctl *x, const char *key)
{
    return x->have_body ? tg__json_obj_get(&x->d, 0, key) : UINT32_MAX;
}

static const char *arg_str(ctl *x, const char *key)
{
    uint32_t t = arg_tok(x, key);
    if (t != UINT32_MAX && x->d.toks[t].type == TG__J_STRING)
        return tg__json_str_dup(&x->d, t, &x->a, NULL);
    const emu_field *f = emu_form_get(x->q, key);
    return f ? f->value : NULL;
}

static int64_t arg_i64(ctl *x, const char *key, int64_t def)
{
    uint32_t t = arg_tok(x, key);
    int64_t v;
    tg__jerr err;
    if (t != UINT32_MAX && tg__json_get_i64(&x->d, t, &v, &err) == 0)
        return v;
    const char *s = t == UINT32_MAX ? NULL : arg_str(x, key);
    const emu_field *f = emu_form_get(x->q, key);
    if (!s && f)
        s = f->value;
    return s && tg__parse_i64(s, strlen(s), &v) == 0 ? v : def;
}

static bool arg_bool(ctl *x, const char *key)
{
    uint32_t t = arg_tok(x, key);
    if (t != UINT32_MAX)
        return x->d.toks[t].type == TG__J_TRUE;
    const char *s = arg_str(x, key);
    return s && (!strcmp(s, "true") || !strcmp(s, "1"));
}

/* ---- lookups ---- */

static emu_bot *the_bot(ctl *x)
{
    int64_t id = arg_i64(x, "bot_id", 0);
    emu_bot *b = id ? emu_bot_by_id(x->e, id) : (x->e->nbots ? x->e->bots[0] : NULL);
    if (!b)
        cfail(x, id ? 404 : 400,
              id ? "no bot with id %lld"
                 : "no bot yet: start your bot against the emulator first, or POST "
                   "/control/bots (%lld)",
              (long long)id);
    return b;
}

static emu_user *the_user(ctl *x)
{
    int64_t id = arg_i64(x, "user_id", 0);
    emu_user *u = id ? emu_user_get(x->e, id) : (x->e->nusers ? x->e->users[0] : NULL);
    if (!u)
        cfail(x, 404, "no user with id %lld", (long long)id);
    return u;
}

/* chat_id given: that chat; else the private chat of the user with the bot. */
static emu_chat *the_chat(ctl *x, emu_user *u)
{
    int64_t id = arg_i64(x, "chat_id", 0);
    if (id && id != (u ? u->id : 0)) {
        emu_chat *c = emu_chat_get(x->e, id, 0);
        if (!c)
            cfail(x, 404, "no chat with id %lld", (long long)id);
        return c;
    }
    emu_bot *b = the_bot(x);
    if (!b || !u)
        return NULL;
    emu_chat *c = emu_chat_private(x->e, b, u);
    if (!c)
        cfail(x, 500, "out of memory");
    return c;
}

static void put_msg(ctl *x, const char *key, const emu_msg *m)
{
    tg__jw_key(&x->w, key, strlen(key));
    tg_message *t = emu_msg_decode(m, &x->a);
    if (t)
        tg__codec_encode(&tg__t_message, t, &x->w, 0);
    else
        tg__jw_null(&x->w);
}

/* ---- acting as users ---- */

/* A message from u in c: membership checks, entities, storage and delivery. */
static int user_message(ctl *x, emu_user *u, emu_chat *c, tg_message *m)
{
    if (c->type != TG_CHAT_TYPE_PRIVATE) {
        emu_member *mb = emu_member_get(c, u->id);
        if (!emu_member_in(mb))
            return cfail(x, 403, "user %lld is not a member of chat %lld", (long long)u->id,
                         (long long)c->id);
        if (mb->status == EMU_M_RESTRICTED && !(mb->perms & 1u))
            return cfail(x, 403, "user %lld may not send messages in chat %lld", (long long)u->id,
                         (long long)c->id);
    }
    m->from = emu_tg_user(u, &x->a);
    if (m->text)
        emu_auto_entities(m->text, &x->a, (tg_message_entity **)&m->entities, &m->entities_count);
    int64_t reply = arg_i64(x, "reply_to_message_id", 0);
    emu_msg *rs = reply ? emu_msg_get(c, reply) : NULL;
    if (reply && !rs)
        return cfail(x, 404, "no message %lld in chat %lld", (long long)reply, (long long)c->id);
    if (rs && (m->reply_to_message = emu_msg_decode(rs, &x->a)) != NULL)
        ((tg_message *)m->reply_to_message)->reply_to_message = NULL;
    emu_msg *s = emu_msg_store(x->e, c, m, u->id, &x->a);
    if (!s)
        return cfail(x, 500, "out of memory");
    tg_message *t = emu_msg_decode(s, &x->a);
    if (t)
        emu_deliver_msg(x->e, c, t, u->id, false, &x->a);
    put_msg(x, "message", s);
    return 0;
}

static int c_send(ctl *x)
{
    emu_user *u = the_user(x);
    emu_chat *c = u ? the_chat(x, u) : NULL;
    if (!c)
        return -1;
    const char *text = arg_str(x, "text");
    const char *cmd = arg_str(x, "command");
    if (cmd) {
        const char *args = arg_str(x, "args");
        size_t n = strlen(cmd) + (args ? strlen(args) : 0) + 3;
        char *t = tg__arena_alloc(&x->a, n);
        snprintf(t, n, "/%s%s%s", *cmd == '/' ? cmd + 1 : cmd, args ? " " : "", args ? args : "");
        text = t;
    }
    if (!text || !*text)
        return cfail(x, 400, "text is empty");
    if (emu_utf16_len(text, strlen(text)) > EMU_TEXT_MAX)
        return cfail(x, 400, "text is longer than %d characters", EMU_TEXT_MAX);
    tg_message m = {.text = text};
    return user_message(x, u, c, &m);
}

/* Photo or document bytes from "data" (text) or "data_base64". */
static int file_bytes(ctl *x, const char **data, size_t *len)
{
    const char *b64 = arg_str(x, "data_base64");
    if (b64) {
        size_t n = strlen(b64);
        char *out = tg__arena_alloc(&x->a, n + 1);
        *len = out ? tg__b64_decode(out, n + 1, b64, n) : TG__BAD_LEN;
        if (*len == TG__BAD_LEN)
            return cfail(x, 400, "data_base64 is not base64");
        *data = out;
        return 0;
    }
    *data = arg_str(x, "data");
    *len = *data ? strlen(*data) : 0;
    return *data ? 0 : cfail(x, 400, "data or data_base64 is required");
}

static int c_media(ctl *x, bool photo)
{
    emu_user *u = the_user(x);
    emu_chat *c = u ? the_chat(x, u) : NULL;
    const char *data;
    size_t len;
    if (!c || file_bytes(x, &data, &len))
        return -1;
    if (len > EMU_UPLOAD_MAX)
        return cfail(x, 400, "file is larger than 50 MB");
    const char *name = arg_str(x, "file_name");
    emu_file *f = emu_file_add(x->e, data, len, name ? name : (photo ? "photo.jpg" : "file"),
                               arg_str(x, "mime_type"), photo ? "photos" : "documents");
    if (!f)
        return cfail(x, 500, "out of memory");
    tg_message m = {.caption = arg_str(x, "caption")};
    if (photo) {
        tg_photo_size *ps = tg__arena_zalloc(&x->a, sizeof *ps);
        *ps = (tg_photo_size){
            .file_id = f->file_id, .file_unique_id = f->unique_id, .width = 320, .height = 320};
        ps->file_size = (tg_opt_i64)TG_SOME((int64_t)len);
        m.photo = ps;
        m.photo_count = 1;
    } else {
        tg_document *d = tg__arena_zalloc(&x->a, sizeof *d);
        *d = (tg_document){.file_id = f->file_id,
                           .file_unique_id = f->unique_id,
                           .file_name = f->name,
                           .mime_type = f->mime};
        d->file_size = (tg_opt_i64)TG_SOME((int64_t)len);
        m.document = d;
    }
    return user_message(x, u, c, &m);
}

static int c_photo(ctl *x)
{
    return c_media(x, true);
}

static int c_document(ctl *x)
{
    return c_media(x, false);
}

/* Wait (bounded by wait_ms) until q is answered. */
static void wait_answer(ctl *x, emu_query *q)
{
    int64_t ms = arg_i64(x, "wait_ms", 0);
    if (ms <= 0)
        return;
    struct timespec until = emu_deadline(x->e, ms > 30000 ? 30000 : ms);
    while (!q->answered && !x->e->stopping)
        if (pthread_cond_timedwait(&x->e->cv, &x->e->mu, &until) == ETIMEDOUT)
            break;
}

static void put_query(ctl *x, const emu_query *q)
{
    TG__JW_KEY(&x->w, "query_id");
    tg__jw_str(&x->w, q->id);
    TG__JW_KEY(&x->w, "answered");
    tg__jw_bool(&x->w, q->answered);
    TG__JW_KEY(&x->w, "answer");
    if (q->answer)
        tg__jw_raw(&x->w, q->answer, strlen(q->answer));
    else
        tg__jw_null(&x->w);
}

/* The button of message t with callback data (or text) wanted; NULL if none. */
static const tg_inline_keyboard_button *find_button(const tg_message *t, const char *data,
                                                    const char *text)
{
    const tg_inline_keyboard_markup *kb = t->reply_markup;
    for (size_t i = 0; kb && i < kb->inline_keyboard_count; i++)
        for (size_t j = 0; j < kb->inline_keyboard[i].count; j++) {
            const tg_inline_keyboard_button *b = &kb->inline_keyboard[i].items[j];
            if (!b->callback_data)
                continue;
            if ((data && !strcmp(b->callback_data, data)) || (text && !strcmp(b->text, text)))
                return b;
        }
    return NULL;
}

static int c_press(ctl *x)
{
    emu_user *u = the_user(x);
    emu_chat *c = u ? the_chat(x, u) : NULL;
    if (!c)
        return -1;
    int64_t mid = arg_i64(x, "message_id", 0);
    emu_msg *s = emu_msg_get(c, mid);
    tg_message *t = s ? emu_msg_decode(s, &x->a) : NULL;
    if (!t)
        return cfail(x, 404, "no message %lld in chat %lld", (long long)mid, (long long)c->id);
    const tg_inline_keyboard_button *b = find_button(t, arg_str(x, "data"), arg_str(x, "text"));
    emu_bot *bot = emu_bot_by_id(x->e, s->sender_id);
    if (!b || !bot)
        return cfail(x, 404, "message %lld has no such callback button", (long long)mid);
    emu_query *q = emu_query_add(x->e, false, bot->u.id, u->id, c->id, mid, b->callback_data);
    if (!q)
        return cfail(x, 500, "out of memory");
    char inst[32];
    snprintf(inst, sizeof inst, "%lld", (long long)(c->id * 31 + bot->u.id));
    tg_callback_query cq = {.id = q->id,
                            .from = emu_tg_user(u, &x->a),
                            .chat_instance = inst,
                            .data = b->callback_data};
    cq.message = tg_maybe_inaccessible_message_from_message(t);
    tg_update up = {.callback_query = &cq};
    emu_update_push(x->e, bot, TG_UPDATE_TYPE_CALLBACK_QUERY, &up);
    emu_touch(x->e);
    wait_answer(x, q);
    put_query(x, q);
    return 0;
}

static int c_inline(ctl *x)
{
    emu_user *u = the_user(x);
    emu_bot *bot = u ? the_bot(x) : NULL;
    if (!bot)
        return -1;
    const char *text = arg_str(x, "query");
    if (!text)
        text = "";
    if (strlen(text) > 256)
        return cfail(x, 400, "query is longer than 256 characters");
    emu_query *q = emu_query_add(x->e, true, bot->u.id, u->id, 0, 0, text);
    if (!q)
        return cfail(x, 500, "out of memory");
    tg_inline_query iq = {.id = q->id, .from = emu_tg_user(u, &x->a), .query = text, .offset = ""};
    iq.chat_type = (tg_inline_query_chat_type)TG_ENUM_STR("sender");
    tg_update up = {.inline_query = &iq};
    emu_update_push(x->e, bot, TG_UPDATE_TYPE_INLINE_QUERY, &up);
    wait_answer(x, q);
    put_query(x, q);
    return 0;
}

/* The user's latest answered inline query (query_id given: that one); NULL after cfail. */
static emu_query *chosen_query(ctl *x, emu_user *u)
{
    const char *id = arg_str(x, "query_id");
    emu_query *q = NULL;
    for (size_t i = 0; i < x->e->nqueries; i++) {
        emu_query *c = x->e->queries[i];
        if (c->inline_query && c->answered && c->user_id == u->id && (!id || !strcmp(c->id, id)))
            q = c;
    }
    if (!q || !q->answer)
        cfail(x, 404, "no answered inline query to choose from");
    return q;
}

/* Text, entities and keyboard of result result_id of q's answer into m (arena of x). */
static int result_message(ctl *x, const emu_query *q, const char *result_id, tg_message *m)
{
    tg__jdoc *d = &x->d2;
    tg__jerr je;
    if (tg__json_parse(d, q->answer, strlen(q->answer), &je) != 0)
        return cfail(x, 500, "stored results do not parse");
    for (uint32_t k = 1, i = 0; i < d->toks[0].count; i++, k = d->toks[k].next) {
        uint32_t id = tg__json_obj_get(d, k, "id");
        if (id == UINT32_MAX || !tg__json_str_eq(d, id, result_id, strlen(result_id)))
            continue;
        uint32_t imc = tg__json_obj_get(d, k, "input_message_content");
        uint32_t kb = tg__json_obj_get(d, k, "reply_markup");
        tg_input_text_message_content c;
        if (imc == UINT32_MAX ||
            tg__codec_decode(&tg__t_input_text_message_content, d, imc, &x->a, &c, &je) != TG_OK)
            return cfail(x, 400, "result %s has no text input_message_content", result_id);
        char err[320];
        tg_message_entity *pe = NULL;
        if (c.parse_mode.id == TG_PARSE_MODE_HTML || c.parse_mode.id == TG_PARSE_MODE_MARKDOWN_V2) {
            char *text;
            if (emu_markup_parse(c.parse_mode.id, c.message_text, &x->a, &text, &pe,
                                 &m->entities_count, err, sizeof err))
                return cfail(x, 400, "result %s: %s", result_id, err);
            m->text = text;
            m->entities = pe;
        } else {
            m->text = c.message_text;
            m->entities = c.entities;
            m->entities_count = c.entities_count;
        }
        tg_inline_keyboard_markup *ik = tg__arena_zalloc(&x->a, sizeof *ik);
        if (kb != UINT32_MAX && ik &&
            tg__codec_decode(&tg__t_inline_keyboard_markup, d, kb, &x->a, ik, &je) == TG_OK)
            m->reply_markup = ik;
        /* the links the bot offered, checked as for its own messages */
        if ((m->entities_count &&
             emu_links_check((tg_message_entity *)m->entities, m->entities_count, &x->a, err,
                             sizeof err)) ||
            (m->reply_markup && emu_kb_links_check(ik, &x->a, err, sizeof err)))
            return cfail(x, 400, "result %s: %s", result_id, err);
        return 0;
    }
    return cfail(x, 404, "the bot offered no result with id \"%s\"", result_id);
}

/* The user picks a result of an inline query: it is sent "via" the bot into the chat, and
 * the bot gets chosen_inline_result (as with inline feedback switched on). */
static int c_choose(ctl *x)
{
    emu_user *u = the_user(x);
    emu_query *q = u ? chosen_query(x, u) : NULL;
    emu_bot *b = q ? emu_bot_by_id(x->e, q->bot_id) : NULL;
    const char *rid = arg_str(x, "result_id");
    if (!b)
        return q ? cfail(x, 404, "the bot of that query is gone") : -1;
    if (!rid)
        return cfail(x, 400, "result_id is required");
    int64_t cid = arg_i64(x, "chat_id", 0);
    emu_chat *c = cid && cid != u->id ? emu_chat_get(x->e, cid, 0) : emu_chat_private(x->e, b, u);
    if (!c)
        return cfail(x, 404, "no chat with id %lld", (long long)cid);
    tg_message m = {.via_bot = emu_tg_user(&b->u, &x->a)};
    if (result_message(x, q, rid, &m) || user_message(x, u, c, &m))
        return -1;
    tg_chosen_inline_result cr = {
        .result_id = rid, .from = emu_tg_user(u, &x->a), .query = q->query};
    tg_update up = {.chosen_inline_result = &cr};
    emu_update_push(x->e, b, TG_UPDATE_TYPE_CHOSEN_INLINE_RESULT, &up);
    return 0;
}

/* A service message (joined, left) in c from u, delivered to the bots there. */
static void service(ctl *x, emu_chat *c, emu_user *u, tg_message *m)
{
    m->from = emu_tg_user(u, &x->a);
    emu_msg *s = emu_msg_store(x->e, c, m, u->id, &x->a);
    tg_message *t = s ? emu_msg_decode(s, &x->a) : NULL;
    if (t)
        emu_deliver_msg(x->e, c, t, u->id, false, &x->a);
}

static void join_request(ctl *x, emu_chat *c, emu_user *u)
{
    int64_t *n = tg__realloc(c->join_reqs, (c->njoin + 1) * sizeof *n);
    if (!n)
        return;
    c->join_reqs = n;
    c->join_reqs[c->njoin++] = u->id;
    tg_chat_join_request jr = {.chat = emu_tg_chat(x->e, c, &x->a),
                               .from = emu_tg_user(u, &x->a),
                               .user_chat_id = u->id,
                               .date = emu_now()};
    for (size_t i = 0; i < x->e->nbots; i++)
        if (emu_is_admin(c, x->e->bots[i]->u.id, 1u << 6 /* can_invite_users */)) {
            tg_update up = {.chat_join_request = &jr};
            emu_update_push(x->e, x->e->bots[i], TG_UPDATE_TYPE_CHAT_JOIN_REQUEST, &up);
        }
    c->version++;
}

static int c_join(ctl *x)
{
    emu_user *u = the_user(x);
    int64_t cid = arg_i64(x, "chat_id", 0);
    emu_chat *c = u ? emu_chat_get(x->e, cid, 0) : NULL;
    if (!c)
        return u ? cfail(x, 404, "no chat with id %lld", (long long)cid) : -1;
    if (c->type == TG_CHAT_TYPE_PRIVATE)
        return cfail(x, 400, "private chats cannot be joined");
    emu_member *m = emu_member_get(c, u->id);
    if (m && m->status == EMU_M_BANNED)
        return cfail(x, 403, "user %lld is banned in chat %lld", (long long)u->id,
                     (long long)c->id);
    if (arg_bool(x, "request")) {
        join_request(x, c, u);
        TG__JW_KEY(&x->w, "requested");
        tg__jw_bool(&x->w, true);
        return 0;
    }
    emu_member before = m ? *m : (emu_member){.user_id = u->id, .status = EMU_M_LEFT};
    bool admin = arg_bool(x, "admin");
    m = emu_member_set(c, u->id, admin ? EMU_M_ADMIN : EMU_M_MEMBER);
    if (!m)
        return cfail(x, 500, "out of memory");
    m->rights = admin ? ~(emu_bits)0 : 0;
    if (c->type != TG_CHAT_TYPE_CHANNEL) {
        tg_message svc = {.new_chat_members = emu_tg_user(u, &x->a), .new_chat_members_count = 1};
        service(x, c, u, &svc);
    }
    emu_member_changed(x->e, c, u->id, &before, m, &x->a);
    return 0;
}

static int c_leave(ctl *x)
{
    emu_user *u = the_user(x);
    int64_t cid = arg_i64(x, "chat_id", 0);
    emu_chat *c = u ? emu_chat_get(x->e, cid, 0) : NULL;
    if (!c)
        return u ? cfail(x, 404, "no chat with id %lld", (long long)cid) : -1;
    emu_member *m = emu_member_get(c, u->id);
    if (!emu_member_in(m))
        return cfail(x, 400, "user %lld is not in chat %lld", (long long)u->id, (long long)c->id);
    emu_member before = *m;
    m->status = EMU_M_LEFT;
    if (c->type != TG_CHAT_TYPE_CHANNEL) {
        tg_message svc = {.left_chat_member = emu_tg_user(u, &x->a)};
        service(x, c, u, &svc);
    }
    emu_member_changed(x->e, c, u->id, &before, m, &x->a);
    return 0;
}

/* The user blocks (or unblocks) the bot: sends to the chat get 403, and the bot gets
 * my_chat_member (kicked, or member again), as on Telegram. */
static int c_block(ctl *x)
{
    emu_user *u = the_user(x);
    emu_bot *b = u ? the_bot(x) : NULL;
    emu_chat *c = b ? emu_chat_private(x->e, b, u) : NULL;
    if (!c)
        return b ? cfail(x, 500, "out of memory") : -1;
    bool block = x->have_body && tg__json_obj_get(&x->d, 0, "blocked") != UINT32_MAX
                     ? arg_bool(x, "blocked")
                     : true;
    if (c->blocked == block)
        return 0;
    c->blocked = block;
    emu_member before = {.user_id = b->u.id, .status = block ? EMU_M_MEMBER : EMU_M_BANNED};
    emu_member after = {.user_id = b->u.id, .status = block ? EMU_M_BANNED : EMU_M_MEMBER};
    emu_member_changed(x->e, c, u->id, &before, &after, &x->a);
    return 0;
}

/* ---- creating things ---- */

static void put_user(ctl *x, const emu_user *u)
{
    TG__JW_KEY(&x->w, "user");
    tg__codec_encode(&tg__t_user, emu_tg_user(u, &x->a), &x->w, 0);
}

static int c_users(ctl *x)
{
    emu_user *u =
        emu_user_add(x->e, arg_i64(x, "id", 0), arg_str(x, "first_name"), arg_str(x, "last_name"),
                     arg_str(x, "username"), arg_str(x, "language_code"));
    if (!u)
        return cfail(x, 400, "cannot add the user (id taken?)");
    put_user(x, u);
    return 0;
}

static int c_bots(ctl *x)
{
    const char *token = arg_str(x, "token");
    if (!token || !emu_token_ok(token))
        return cfail(x, 400,
                     "token is missing or not shaped like 123456:ABC... (20+ "
                     "characters after the colon)");
    emu_bot *b = emu_bot_get(x->e, token, false);
    if (!b)
        b = emu_bot_add(x->e, token, arg_str(x, "username"), arg_str(x, "first_name"));
    if (!b)
        return cfail(x, 400, "cannot add the bot (id taken?)");
    put_user(x, &b->u);
    return 0;
}

static int c_chats(ctl *x)
{
    const char *type = arg_str(x, "type");
    int32_t t = type ? tg__codec_enum_id(&tg__e_chat_type, type, strlen(type)) : 0;
    if (t != TG_CHAT_TYPE_GROUP && t != TG_CHAT_TYPE_SUPERGROUP && t != TG_CHAT_TYPE_CHANNEL)
        return cfail(x, 400, "type must be group, supergroup or channel");
    emu_chat *c = emu_chat_add(x->e, t, arg_str(x, "title"), arg_str(x, "username"));
    if (!c)
        return cfail(x, 500, "out of memory");
    int64_t owner = arg_i64(x, "owner_id", 0);
    if (owner && emu_user_get(x->e, owner))
        emu_member_set(c, owner, EMU_M_OWNER);
    TG__JW_KEY(&x->w, "chat");
    tg__codec_encode(&tg__t_chat, emu_tg_chat(x->e, c, &x->a), &x->w, 0);
    return 0;
}

static int c_migrate(ctl *x)
{
    emu_chat *c = emu_chat_get(x->e, arg_i64(x, "chat_id", 0), 0);
    if (!c || c->type != TG_CHAT_TYPE_GROUP)
        return cfail(x, 404, "no group with that chat_id");
    emu_chat *s = emu_chat_add(x->e, TG_CHAT_TYPE_SUPERGROUP, c->title, NULL);
    if (!s)
        return cfail(x, 500, "out of memory");
    for (size_t i = 0; i < c->nmembers; i++) {
        emu_member *m = emu_member_set(s, c->members[i].user_id, c->members[i].status);
        if (m)
            m->rights = c->members[i].rights;
    }
    c->migrate_to = s->id;
    TG__JW_KEY(&x->w, "chat");
    tg__codec_encode(&tg__t_chat, emu_tg_chat(x->e, s, &x->a), &x->w, 0);
    return 0;
}

/* ---- looking ---- */

static void put_chat_entry(ctl *x, const emu_chat *c)
{
    tg__codec_encode(&tg__t_chat, emu_tg_chat(x->e, c, &x->a), &x->w, 0);
}

static int c_state(ctl *x)
{
    emu *e = x->e;
    TG__JW_KEY(&x->w, "version");
    tg__jw_i64(&x->w, (int64_t)e->version);
    TG__JW_KEY(&x->w, "bots");
    tg__jw_arr_begin(&x->w);
    for (size_t i = 0; i < e->nbots; i++) {
        tg__jw_obj_begin(&x->w);
        TG__JW_KEY(&x->w, "user");
        tg__codec_encode(&tg__t_user, emu_tg_user(&e->bots[i]->u, &x->a), &x->w, 0);
        TG__JW_KEY(&x->w, "pending_updates");
        tg__jw_i64(&x->w, (int64_t)e->bots[i]->nq);
        TG__JW_KEY(&x->w, "webhook_url");
        tg__jw_str(&x->w, e->bots[i]->hook.url);
        tg__jw_obj_end(&x->w);
    }
    tg__jw_arr_end(&x->w);
    TG__JW_KEY(&x->w, "users");
    tg__jw_arr_begin(&x->w);
    for (size_t i = 0; i < e->nusers; i++)
        tg__codec_encode(&tg__t_user, emu_tg_user(e->users[i], &x->a), &x->w, 0);
    tg__jw_arr_end(&x->w);
    TG__JW_KEY(&x->w, "chats");
    tg__jw_arr_begin(&x->w);
    for (size_t i = 0; i < e->nchats; i++) {
        const emu_chat *c = e->chats[i];
        tg__jw_obj_begin(&x->w);
        TG__JW_KEY(&x->w, "chat");
        put_chat_entry(x, c);
        TG__JW_KEY(&x->w, "bot_id");
        tg__jw_i64(&x->w, c->bot_id);
        TG__JW_KEY(&x->w, "version");
        tg__jw_i64(&x->w, (int64_t)c->version);
        TG__JW_KEY(&x->w, "migrate_to_chat_id");
        tg__jw_i64(&x->w, c->migrate_to);
        tg__jw_obj_end(&x->w);
    }
    tg__jw_arr_end(&x->w);
    return 0;
}

static int c_messages(ctl *x)
{
    emu_user *u = NULL;
    int64_t cid = arg_i64(x, "chat_id", 0);
    int64_t bid = arg_i64(x, "bot_id", 0);
    if (!bid && x->e->nbots)
        bid = x->e->bots[0]->u.id;
    emu_chat *c = emu_chat_get(x->e, cid, bid);
    if (!c)
        return cfail(x, 404, "no chat with id %lld", (long long)cid);
    (void)u;
    int64_t since = arg_i64(x, "since_id", 0);
    bool bot_only = arg_bool(x, "from_bot");
    TG__JW_KEY(&x->w, "version");
    tg__jw_i64(&x->w, (int64_t)c->version);
    TG__JW_KEY(&x->w, "reply_keyboard");
    if (c->reply_kb)
        tg__jw_raw(&x->w, c->reply_kb, strlen(c->reply_kb));
    else
        tg__jw_null(&x->w);
    TG__JW_KEY(&x->w, "messages");
    tg__jw_arr_begin(&x->w);
    for (size_t i = 0; i < c->nmsgs; i++) {
        const emu_msg *m = &c->msgs[i];
        if (m->deleted || m->id <= since || (bot_only && !emu_bot_by_id(x->e, m->sender_id)))
            continue;
        tg_message *t = emu_msg_decode(m, &x->a);
        if (t)
            tg__codec_encode(&tg__t_message, t, &x->w, 0);
    }
    tg__jw_arr_end(&x->w);
    return 0;
}

static int c_updates(ctl *x)
{
    emu_bot *b = the_bot(x);
    if (!b)
        return -1;
    TG__JW_KEY(&x->w, "updates");
    tg__jw_arr_begin(&x->w);
    for (size_t i = 0; i < b->nq; i++)
        tg__jw_raw(&x->w, b->q[i].json, strlen(b->q[i].json));
    tg__jw_arr_end(&x->w);
    return 0;
}

/* Events after "since"; waits up to timeout_ms (bounded) for something to change. */
static int c_events(ctl *x)
{
    emu *e = x->e;
    uint64_t since = (uint64_t)arg_i64(x, "since", 0);
    uint64_t version = (uint64_t)arg_i64(x, "version", -1);
    int64_t ms = arg_i64(x, "timeout_ms", 0);
    if (ms > 25000)
        ms = 25000;
    if (ms > 0 && e->seq <= since && e->version == version) {
        struct timespec until = emu_deadline(e, ms);
        while (e->seq <= since && e->version == version && !e->stopping)
            if (pthread_cond_timedwait(&e->cv, &e->mu, &until) == ETIMEDOUT)
                break;
    }
    TG__JW_KEY(&x->w, "seq");
    tg__jw_i64(&x->w, (int64_t)e->seq);
    TG__JW_KEY(&x->w, "version");
    tg__jw_i64(&x->w, (int64_t)e->version);
    TG__JW_KEY(&x->w, "events");
    tg__jw_arr_begin(&x->w);
    uint64_t first = e->seq > EMU_EVENTS ? e->seq - EMU_EVENTS + 1 : 1;
    for (uint64_t s = since + 1 > first ? since + 1 : first; s <= e->seq; s++) {
        const emu_event *ev = &e->events[s % EMU_EVENTS];
        tg__jw_obj_begin(&x->w);
        TG__JW_KEY(&x->w, "seq");
        tg__jw_i64(&x->w, (int64_t)ev->seq);
        TG__JW_KEY(&x->w, "date");
        tg__jw_i64(&x->w, ev->date);
        TG__JW_KEY(&x->w, "bot_id");
        tg__jw_i64(&x->w, ev->bot_id);
        TG__JW_KEY(&x->w, "kind");
        tg__jw_str(&x->w, ev->kind);
        TG__JW_KEY(&x->w, "data");
        tg__jw_raw(&x->w, ev->json, strlen(ev->json));
        tg__jw_obj_end(&x->w);
    }
    tg__jw_arr_end(&x->w);
    return 0;
}

static int c_save(ctl *x)
{
    char err[300];
    if (!x->e->state_file)
        return cfail(x, 400, "no state file: start the emulator with --state FILE");
    if (emu_state_save(x->e, x->e->state_file, err, sizeof err) != 0)
        return cfail(x, 500, "%s", err);
    return 0;
}

/* The user opens the bot's Mini App: the initData it would get, signed (emulator/webapp.h). */
static int c_webapp(ctl *x)
{
    emu_user *u = the_user(x);
    emu_bot *b = u ? the_bot(x) : NULL;
    if (!b)
        return -1;
    tg__buf init;
    tg__buf_init(&init, 65536);
    int64_t date = arg_i64(x, "auth_date", 0);
    if (emu_webapp_init_data(b, u, arg_str(x, "start_param"), arg_str(x, "chat_type"),
                             date ? date : (int64_t)time(NULL), &init, x->err,
                             sizeof x->err) != 0) {
        tg__buf_cleanup(&init);
        return cfail(x, 500, "%s", x->err);
    }
    TG__JW_KEY(&x->w, "init_data");
    tg__jw_str(&x->w, tg__buf_cstr(&init));
    TG__JW_KEY(&x->w, "public_key");
    tg__jw_str(&x->w, emu_webapp_public_key());
    tg__buf_cleanup(&init);
    return 0;
}

typedef struct ctl_route {
    const char *name;
    bool post;
    int (*fn)(ctl *x);
} ctl_route;

static const ctl_route routes[] = {
    {"state", false, c_state},    {"messages", false, c_messages}, {"updates", false, c_updates},
    {"events", false, c_events},  {"users", true, c_users},        {"bots", true, c_bots},
    {"chats", true, c_chats},     {"send", true, c_send},          {"command", true, c_send},
    {"photo", true, c_photo},     {"document", true, c_document},  {"press", true, c_press},
    {"inline", true, c_inline},   {"join", true, c_join},          {"leave", true, c_leave},
    {"migrate", true, c_migrate}, {"choose", true, c_choose},      {"block", true, c_block},
    {"save", true, c_save},       {"webapp", true, c_webapp},
};

static int dispatch(ctl *x, const char *name, const char *method)
{
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        if (strcmp(routes[i].name, name))
            continue;
        if (routes[i].post != !strcmp(method, "POST"))
            return cfail(x, 405, "use %s for /control/%s", routes[i].post ? "POST" : "GET", name);
        return routes[i].fn(x);
    }
    return cfail(x, 404, "no control call named \"%s\"", name);
}

int emu_control(emu *e, const char *name, const char *method, const emu_form *query,
                const char *body, size_t len, tg__buf *out)
{
    ctl x = {.e = e, .q = query, .out = out, .code = 200};
    tg__jdoc_init(&x.d, NULL);
    tg__jdoc_init(&x.d2, NULL);
    tg__arena_init(&x.a, 0, 0);
    tg__jerr je;
    int rc = 0;
    if (len) {
        if (tg__json_parse(&x.d, body, len, &je) != 0 || x.d.toks[0].type != TG__J_OBJECT)
            rc = cfail(&x, 400, "body is not a JSON object: %s", je.msg);
        uint32_t nul = rc == 0 ? emu_json_find_nul(&x.d) : UINT32_MAX;
        if (nul != UINT32_MAX) {
            tg__buf p;
            tg__buf_init(&p, 512);
            tg__json_path(&x.d, nul, &p);
            rc = cfail(&x, 400,
                       "body: %s: a string holding \\u0000 (the emulator keeps NUL-terminated "
                       "strings: it would cut the text there)",
                       p.len ? tg__buf_cstr(&p) : "(top)");
            tg__buf_cleanup(&p);
        }
        x.have_body = rc == 0;
    }
    tg__buf res;
    tg__buf_init(&res, 0);
    tg__jw_init(&x.w, &res);
    tg__jw_obj_begin(&x.w);
    TG__JW_KEY(&x.w, "ok");
    tg__jw_bool(&x.w, true);
    pthread_mutex_lock(&e->mu);
    if (rc == 0)
        rc = dispatch(&x, name, method);
    pthread_mutex_unlock(&e->mu);
    tg__jw_obj_end(&x.w);
    if (rc == 0 && x.w.err == 0) {
        tg__buf_append(out, res.data, res.len);
    } else {
        tg__jw w;
        tg__jw_init(&w, out);
        tg__jw_obj_begin(&w);
        TG__JW_KEY(&w, "ok");
        tg__jw_bool(&w, false);
        TG__JW_KEY(&w, "error");
        tg__jw_str(&w, rc ? x.err : "answer does not encode");
        tg__jw_obj_end(&w);
        if (!rc)
            x.code = 500;
    }
    tg__buf_cleanup(&res);
    tg__arena_cleanup(&x.a);
    tg__jdoc_cleanup(&x.d);
    tg__jdoc_cleanup(&x.d2);
    return x.code;
}
