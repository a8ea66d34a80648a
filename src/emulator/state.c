/*
 * state: the emulator's world (bots, users, chats, messages, files, queries, update queues,
 * events). Plain growable arrays searched linearly: an emulator holds a few dozen of each.
 * Every function expects e->mu held (see emu.h).
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "core/alloc.h"
#include "core/str.h"
#include "emulator/emu.h"

/* Grow *arr (element size sz) so one more element fits. 0 or -1. */
static int grow(void *arr, size_t *cap, size_t n, size_t sz)
{
    if (n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 8;
    void *p = tg__realloc(*(void **)arr, nc * sz);
    if (!p)
        return -1;
    *(void **)arr = p;
    *cap = nc;
    return 0;
}

void emu_touch(emu *e)
{
    e->version++;
    pthread_cond_broadcast(&e->cv);
}

struct timespec emu_deadline(const emu *e, int64_t ms)
{
    int64_t cap = e->o.max_wait_ms ? e->o.max_wait_ms : EMU_POLL_MAX_S * 1000;
    if (ms > cap)
        ms = cap;
    if (ms < 0)
        ms = 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

int64_t emu_now(void)
{
    return (int64_t)time(NULL);
}

bool emu_token_ok(const char *t)
{
    size_t i = 0;
    while (isdigit((unsigned char)t[i]))
        i++;
    if (i == 0 || i > 19 || t[i] != ':')
        return false;
    size_t j = ++i;
    while (isalnum((unsigned char)t[j]) || t[j] == '_' || t[j] == '-')
        j++;
    return t[j] == '\0' && j - i >= 20 && j - i <= 64;
}

emu_bot *emu_bot_by_id(emu *e, int64_t id)
{
    for (size_t i = 0; i < e->nbots; i++)
        if (e->bots[i]->u.id == id)
            return e->bots[i];
    return NULL;
}

emu_bot *emu_bot_add(emu *e, const char *token, const char *username, const char *name)
{
    if (!emu_token_ok(token))
        return NULL;
    int64_t id;
    if (tg__parse_i64(token, strcspn(token, ":"), &id) != 0 || emu_bot_by_id(e, id))
        return NULL;
    if (grow(&e->bots, &e->capbots, e->nbots, sizeof *e->bots) != 0)
        return NULL;
    emu_bot *b = tg__calloc(1, sizeof *b);
    if (!b)
        return NULL;
    char un[64], fn[64];
    snprintf(un, sizeof un, "bot%lld_bot", (long long)id);
    snprintf(fn, sizeof fn, "Bot %lld", (long long)id);
    b->u.id = id;
    b->u.is_bot = true;
    b->u.first_name = tg__strdup(name ? name : fn);
    b->u.username = tg__strdup(username ? username : un);
    b->token = tg__strdup(token);
    b->next_update_id = 1;
    /* Telegram's default: every kind except chat_member and the reaction updates. */
    b->allowed = ~(uint64_t)0 & ~((uint64_t)1 << TG_UPDATE_TYPE_CHAT_MEMBER) &
                 ~((uint64_t)1 << TG_UPDATE_TYPE_MESSAGE_REACTION) &
                 ~((uint64_t)1 << TG_UPDATE_TYPE_MESSAGE_REACTION_COUNT);
    e->bots[e->nbots++] = b;
    emu_touch(e);
    return b;
}

emu_bot *emu_bot_get(emu *e, const char *token, bool create)
{
    for (size_t i = 0; i < e->nbots; i++)
        if (strcmp(e->bots[i]->token, token) == 0)
            return e->bots[i];
    if (!create || e->o.strict_tokens)
        return NULL;
    return emu_bot_add(e, token, NULL, NULL);
}

emu_user *emu_user_get(emu *e, int64_t id)
{
    for (size_t i = 0; i < e->nusers; i++)
        if (e->users[i]->id == id)
            return e->users[i];
    emu_bot *b = emu_bot_by_id(e, id);
    return b ? &b->u : NULL;
}

emu_user *emu_user_add(emu *e, int64_t id, const char *first, const char *last,
                       const char *username, const char *lang)
{
    if (id == 0)
        id = e->next_user_id++;
    if (emu_user_get(e, id) || grow(&e->users, &e->capusers, e->nusers, sizeof *e->users))
        return NULL;
    emu_user *u = tg__calloc(1, sizeof *u);
    if (!u)
        return NULL;
    u->id = id;
    u->first_name = tg__strdup(first && *first ? first : "User");
    u->last_name = tg__strdup(last);
    u->username = tg__strdup(username);
    u->language_code = tg__strdup(lang);
    e->users[e->nusers++] = u;
    emu_touch(e);
    return u;
}

emu_chat *emu_chat_get(emu *e, int64_t id, int64_t bot_id)
{
    for (size_t i = 0; i < e->nchats; i++) {
        emu_chat *c = e->chats[i];
        if (c->id == id && (c->type != TG_CHAT_TYPE_PRIVATE || !bot_id || c->bot_id == bot_id))
            return c;
    }
    return NULL;
}

emu_chat *emu_chat_by_username(emu *e, const char *username)
{
    if (*username == '@')
        username++;
    for (size_t i = 0; i < e->nchats; i++)
        if (e->chats[i]->username && strcasecmp(e->chats[i]->username, username) == 0)
            return e->chats[i];
    return NULL;
}

static emu_chat *chat_new(emu *e, int64_t id, int32_t type)
{
    if (grow(&e->chats, &e->capchats, e->nchats, sizeof *e->chats) != 0)
        return NULL;
    emu_chat *c = tg__calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->id = id;
    c->type = type;
    c->next_msg_id = 1;
    c->default_perms = ~(emu_bits)0;
    e->chats[e->nchats++] = c;
    emu_touch(e);
    return c;
}

emu_chat *emu_chat_private(emu *e, emu_bot *b, emu_user *u)
{
    emu_chat *c = emu_chat_get(e, u->id, b->u.id);
    if (c)
        return c;
    c = chat_new(e, u->id, TG_CHAT_TYPE_PRIVATE);
    if (c) {
        c->bot_id = b->u.id;
        c->user_id = u->id;
    }
    return c;
}

emu_chat *emu_chat_add(emu *e, int32_t type, const char *title, const char *username)
{
    /* Telegram's shapes: groups -N, supergroups and channels -100N. */
    int64_t n = e->next_group_id++;
    int64_t id = type == TG_CHAT_TYPE_GROUP ? -n : -(1000000000000LL + n);
    emu_chat *c = chat_new(e, id, type);
    if (c) {
        c->title = tg__strdup(title && *title ? title : "Group");
        c->username = tg__strdup(username && *username == '@' ? username + 1 : username);
    }
    return c;
}

emu_member *emu_member_get(emu_chat *c, int64_t user_id)
{
    for (size_t i = 0; i < c->nmembers; i++)
        if (c->members[i].user_id == user_id)
            return &c->members[i];
    return NULL;
}

emu_member *emu_member_set(emu_chat *c, int64_t user_id, int status)
{
    emu_member *m = emu_member_get(c, user_id);
    if (!m) {
        if (grow(&c->members, &c->capmembers, c->nmembers, sizeof *c->members) != 0)
            return NULL;
        m = &c->members[c->nmembers++];
        memset(m, 0, sizeof *m);
        m->user_id = user_id;
    }
    m->status = status;
    c->version++;
    return m;
}

bool emu_member_in(const emu_member *m)
{
    return m && (m->status == EMU_M_OWNER || m->status == EMU_M_ADMIN ||
                 m->status == EMU_M_MEMBER || m->status == EMU_M_RESTRICTED);
}

emu_msg *emu_msg_get(emu_chat *c, int64_t id)
{
    for (size_t i = 0; i < c->nmsgs; i++)
        if (c->msgs[i].id == id)
            return c->msgs[i].deleted ? NULL : &c->msgs[i];
    return NULL;
}

emu_file *emu_file_get(emu *e, const char *file_id)
{
    for (size_t i = 0; i < e->nfiles; i++)
        if (strcmp(e->files[i]->file_id, file_id) == 0)
            return e->files[i];
    return NULL;
}

emu_file *emu_file_by_path(emu *e, const char *path)
{
    for (size_t i = 0; i < e->nfiles; i++)
        if (strcmp(e->files[i]->path, path) == 0)
            return e->files[i];
    return NULL;
}

void emu_file_free(emu_file *f)
{
    if (!f)
        return;
    tg__free(f->file_id);
    tg__free(f->unique_id);
    tg__free(f->path);
    tg__free(f->data);
    tg__free(f->name);
    tg__free(f->mime);
    tg__free(f->bots);
    tg__free(f);
}

emu_file *emu_file_add(emu *e, const char *data, size_t len, const char *name, const char *mime,
                       const char *dir)
{
    if (grow(&e->files, &e->capfiles, e->nfiles, sizeof *e->files) != 0)
        return NULL;
    emu_file *f = tg__calloc(1, sizeof *f);
    if (!f)
        return NULL;
    int64_t n = e->next_file_id++;
    char id[64], uid[32], path[128];
    /* Telegram's ids are opaque; these are 144 random bits, so no bot can guess another's
     * (the unique id, which downloads nothing, only has to be unique) */
    uint8_t rnd[18];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        tg__free(f);
        return NULL;
    }
    memcpy(id, "AgAD", 4);
    tg__b64_encode(id + 4, sizeof id - 4, rnd, sizeof rnd, TG__B64_URL | TG__B64_NOPAD);
    snprintf(uid, sizeof uid, "EMUU%08lld", (long long)n);
    const char *dot = name ? strrchr(name, '.') : NULL;
    snprintf(path, sizeof path, "%s/file_%lld%s", dir, (long long)n,
             dot && strlen(dot) < 12 && !strchr(dot, '/') ? dot : "");
    f->file_id = tg__strdup(id);
    f->unique_id = tg__strdup(uid);
    f->path = tg__strdup(path);
    f->data = tg__memdup(data ? data : "", len ? len : 1);
    f->len = len;
    f->name = tg__strdup(name);
    f->mime = tg__strdup(mime);
    if (!f->file_id || !f->unique_id || !f->path || !f->data) {
        emu_file_free(f);
        return NULL;
    }
    e->files[e->nfiles++] = f;
    return f;
}

emu_file *emu_file_for_bot(emu *e, const char *file_id, int64_t bot_id)
{
    emu_file *f = emu_file_get(e, file_id);
    if (!f || f->any_bot)
        return f;
    for (size_t i = 0; i < f->nbots; i++)
        if (f->bots[i] == bot_id)
            return f;
    return NULL;
}

int emu_file_grant(emu_file *f, int64_t bot_id)
{
    for (size_t i = 0; i < f->nbots; i++)
        if (f->bots[i] == bot_id)
            return 0;
    if (grow(&f->bots, &f->capbots, f->nbots, sizeof *f->bots) != 0)
        return -1;
    f->bots[f->nbots++] = bot_id;
    return 0;
}

void emu_files_seen(emu *e, int64_t bot_id, const char *json)
{
    static const char key[] = "\"file_id\":\"";
    /* an unescaped quote starts the key: inside a JSON string a quote is always \" */
    for (const char *p = json ? strstr(json, key) : NULL; p; p = strstr(p, key)) {
        p += sizeof key - 1;
        size_t n = strcspn(p, "\"\\");
        char id[96];
        if (p[n] == '"' && n < sizeof id) {
            memcpy(id, p, n);
            id[n] = '\0';
            emu_file *f = emu_file_get(e, id);
            if (f)
                emu_file_grant(f, bot_id);
        }
    }
}

emu_query *emu_query_get(emu *e, const char *id)
{
    for (size_t i = 0; i < e->nqueries; i++)
        if (strcmp(e->queries[i]->id, id) == 0)
            return e->queries[i];
    return NULL;
}

emu_query *emu_query_add(emu *e, bool inline_query, int64_t bot, int64_t user, int64_t chat,
                         int64_t msg, const char *q)
{
    if (grow(&e->queries, &e->capqueries, e->nqueries, sizeof *e->queries) != 0)
        return NULL;
    emu_query *x = tg__calloc(1, sizeof *x);
    if (!x)
        return NULL;
    char id[32];
    snprintf(id, sizeof id, "%lld", (long long)(4200000000000LL + e->next_query_id++));
    x->id = tg__strdup(id);
    x->inline_query = inline_query;
    x->bot_id = bot;
    x->user_id = user;
    x->chat_id = chat;
    x->message_id = msg;
    x->query = tg__strdup(q ? q : "");
    e->queries[e->nqueries++] = x;
    return x;
}

uint32_t emu_json_find_nul(const tg__jdoc *d)
{
    for (uint32_t i = 0; i < d->ntok; i++)
        if (d->toks[i].type == TG__J_STRING && (d->toks[i].flags & TG__JF_NUL))
            return i;
    return UINT32_MAX;
}

void emu_event_add(emu *e, int64_t bot_id, const char *kind, const char *json)
{
    emu_event *ev = &e->events[++e->seq % EMU_EVENTS];
    tg__free(ev->json);
    ev->seq = e->seq;
    ev->date = emu_now();
    ev->bot_id = bot_id;
    tg__strlcpy(ev->kind, kind, sizeof ev->kind);
    ev->json = tg__strdup(json);
    emu_touch(e);
}

/* ---- codec-made values ---- */

tg_user *emu_tg_user(const emu_user *u, tg__arena *a)
{
    tg_user *t = tg__arena_zalloc(a, sizeof *t);
    if (!t)
        return NULL;
    t->id = u->id;
    t->is_bot = u->is_bot;
    t->first_name = u->first_name;
    t->last_name = u->last_name;
    t->username = u->username;
    t->language_code = u->is_bot ? NULL : u->language_code;
    return t;
}

tg_chat *emu_tg_chat(emu *e, const emu_chat *c, tg__arena *a)
{
    tg_chat *t = tg__arena_zalloc(a, sizeof *t);
    if (!t)
        return NULL;
    t->id = c->id;
    t->type = (tg_chat_type){c->type, tg__codec_enum_str(&tg__e_chat_type, c->type)};
    if (c->type == TG_CHAT_TYPE_PRIVATE) {
        const emu_user *u = emu_user_get(e, c->user_id);
        if (u) {
            t->first_name = u->first_name;
            t->last_name = u->last_name;
            t->username = u->username;
        }
    } else {
        t->title = c->title;
        t->username = c->username;
    }
    return t;
}

tg_message *emu_msg_decode(const emu_msg *m, tg__arena *a)
{
    tg__jdoc d;
    tg__jdoc_init(&d, NULL);
    void *out = NULL;
    tg__codec_decode_json(&tg__t_message, m->json, strlen(m->json), a, &d, &out, NULL);
    tg__jdoc_cleanup(&d);
    return out;
}

char *emu_encode(const tg__type *t, const void *v)
{
    tg__buf b;
    tg__buf_init(&b, 0);
    tg__jw w;
    tg__jw_init(&w, &b);
    tg__codec_encode(t, v, &w, 0);
    if (w.err) {
        tg__buf_cleanup(&b);
        return NULL;
    }
    return tg__buf_detach(&b, NULL);
}

emu_msg *emu_msg_store(emu *e, emu_chat *c, tg_message *m, int64_t sender_id, tg__arena *a)
{
    if (grow(&c->msgs, &c->capmsgs, c->nmsgs, sizeof *c->msgs) != 0)
        return NULL;
    m->message_id = c->next_msg_id;
    if (!m->date)
        m->date = emu_now();
    m->chat = emu_tg_chat(e, c, a);
    char *json = m->chat ? emu_encode(&tg__t_message, m) : NULL;
    if (!json)
        return NULL;
    emu_msg *s = &c->msgs[c->nmsgs++];
    s->id = c->next_msg_id++;
    s->sender_id = sender_id;
    s->json = json;
    s->deleted = false;
    c->version++;
    emu_touch(e);
    return s;
}

int emu_msg_replace(emu_msg *s, const tg_message *m)
{
    char *json = emu_encode(&tg__t_message, m);
    if (!json)
        return -1;
    tg__free(s->json);
    s->json = json;
    return 0;
}

void emu_update_push(emu *e, emu_bot *b, int32_t type, tg_update *u)
{
    if (type > 0 && type < 64 && !(b->allowed & ((uint64_t)1 << type)))
        return;
    if (grow(&b->q, &b->capq, b->nq, sizeof *b->q) != 0)
        return;
    u->update_id = b->next_update_id;
    char *json = emu_encode(&tg__t_update, u);
    if (!json)
        return;
    b->next_update_id++;
    b->q[b->nq++] = (emu_update){u->update_id, type, json};
    emu_files_seen(e, b->u.id, json);
    emu_event_add(e, b->u.id, "update", json);
}

void emu_deliver_msg(emu *e, emu_chat *c, const tg_message *m, int64_t sender_id, bool edited,
                     tg__arena *a)
{
    (void)a;
    bool channel = c->type == TG_CHAT_TYPE_CHANNEL;
    int32_t type = channel
                       ? (edited ? TG_UPDATE_TYPE_EDITED_CHANNEL_POST : TG_UPDATE_TYPE_CHANNEL_POST)
                       : (edited ? TG_UPDATE_TYPE_EDITED_MESSAGE : TG_UPDATE_TYPE_MESSAGE);
    for (size_t i = 0; i < e->nbots; i++) {
        emu_bot *b = e->bots[i];
        if (b->u.id == sender_id)
            continue;
        bool there = c->type == TG_CHAT_TYPE_PRIVATE ? c->bot_id == b->u.id
                                                     : emu_member_in(emu_member_get(c, b->u.id));
        if (!there)
            continue;
        tg_update u = {0};
        if (channel)
            *(edited ? &u.edited_channel_post : &u.channel_post) = m;
        else
            *(edited ? &u.edited_message : &u.message) = m;
        emu_update_push(e, b, type, &u);
    }
}

void emu_updates_confirm(emu_bot *b, int64_t offset)
{
    size_t k = 0;
    for (size_t i = 0; i < b->nq; i++) {
        if (b->q[i].id < offset)
            tg__free(b->q[i].json);
        else
            b->q[k++] = b->q[i];
    }
    b->nq = k;
}
