/*
 * event: Update JSON -> tg_event and ordering key. See event.h.
 *
 * The Update object has update_id plus exactly one optional field naming its kind; that
 * field's object (the payload) holds everything routing needs. Where things live differs by
 * kind, so lookups go through a short list of places: chat at payload.chat, else at
 * payload.message.chat (callback queries), else payload.user_chat_id (business connections);
 * the user at payload.from, else payload.user.
 */
#include "bot/dispatch/event.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const kind_names[TG_UPDATE_KIND_COUNT] = {[TG_UPDATE_UNKNOWN] = "unknown",
#define TG__KIND_NAME(id, name) [TG_UPDATE_##id] = (name),
                                                             TG_UPDATE_KINDS(TG__KIND_NAME)
#undef TG__KIND_NAME
};

/* The dispatcher's kinds and the generated update types are one list, shifted by one. */
#define TG__KIND_TIE(id, name)                                                                     \
    _Static_assert(TG_UPDATE_TYPE_OF_KIND(TG_UPDATE_##id) == TG_UPDATE_TYPE_##id,                  \
                   "update kind " name " is not its TG_UPDATE_TYPE_* - 1");
TG_UPDATE_KINDS(TG__KIND_TIE)
#undef TG__KIND_TIE

const char *tg_update_kind_name(tg_update_kind k)
{
    return (unsigned)k < TG_UPDATE_KIND_COUNT ? kind_names[k] : "unknown";
}

tg_update_kind tg_update_kind_parse(const char *name, size_t len)
{
    for (int k = 1; k < TG_UPDATE_KIND_COUNT; k++)
        if (strlen(kind_names[k]) == len && memcmp(kind_names[k], name, len) == 0)
            return (tg_update_kind)k;
    return TG_UPDATE_UNKNOWN;
}

static uint32_t obj_get(const tg__jdoc *d, uint32_t obj, const char *key)
{
    if (obj == UINT32_MAX || d->toks[obj].type != TG__J_OBJECT)
        return UINT32_MAX;
    return tg__json_obj_get(d, obj, key);
}

static bool get_i64(const tg__jdoc *d, uint32_t tok, int64_t *out)
{
    tg__jerr e;
    return tok != UINT32_MAX && d->toks[tok].type == TG__J_NUMBER &&
           tg__json_get_i64(d, tok, out, &e) == 0;
}

static uint32_t chat_tok(const tg__jdoc *d, uint32_t payload)
{
    uint32_t c = obj_get(d, payload, "chat");
    if (c == UINT32_MAX)
        c = obj_get(d, obj_get(d, payload, "message"), "chat");
    return c;
}

static uint32_t user_tok(const tg__jdoc *d, uint32_t payload)
{
    uint32_t u = obj_get(d, payload, "from");
    return u != UINT32_MAX ? u : obj_get(d, payload, "user");
}

static void fmt_err(const tg__jdoc *d, const tg__jerr *je, char *err, size_t cap)
{
    tg__buf b;
    tg__buf_init(&b, 512);
    if (tg__json_errmsg(d, je, &b) == 0)
        snprintf(err, cap, "update: %s", tg__buf_cstr(&b));
    else
        snprintf(err, cap, "update: %s (at byte %zu)", je->msg, je->offset);
    tg__buf_cleanup(&b);
}

/* Tokenize and find update_id and the payload. Returns the payload token (UINT32_MAX when the
 * update has no field besides update_id) via *payload; 0 or -1. */
static int parse_root(tg__jdoc *doc, const char *json, size_t len, int64_t *id, uint32_t *payload,
                      char *err, size_t cap)
{
    tg__jerr je;
    if (tg__json_parse(doc, json, len, &je) != 0) {
        fmt_err(doc, &je, err, cap);
        return je.nomem ? -2 : -1;
    }
    if (doc->toks[0].type != TG__J_OBJECT) {
        snprintf(err, cap, "update: expected object, found %s",
                 tg__json_type_name((tg__jtype)doc->toks[0].type));
        return -1;
    }
    uint32_t idt = tg__json_obj_get(doc, 0, "update_id");
    if (idt == UINT32_MAX) {
        snprintf(err, cap, "update.update_id: missing");
        return -1;
    }
    if (tg__json_get_i64(doc, idt, id, &je) != 0) {
        snprintf(err, cap, "update.update_id: %s", je.msg);
        return -1;
    }
    *payload = UINT32_MAX;
    uint32_t k = 1;
    for (uint32_t i = 0; i < doc->toks[0].count; i++, k = doc->toks[k + 1].next) {
        if (k + 1 != idt && doc->toks[k + 1].type == TG__J_OBJECT) {
            *payload = k + 1;
            break;
        }
    }
    return 0;
}

int tg__event_key_parse(tg__jdoc *doc, const char *json, size_t len, tg__event_key *out, char *err,
                        size_t errcap)
{
    uint32_t payload;
    *out = (tg__event_key){0};
    if (parse_root(doc, json, len, &out->update_id, &payload, err, errcap) != 0)
        return -1;
    if (payload == UINT32_MAX)
        return 0;
    const tg__jtok *kt = &doc->toks[payload - 1];
    out->kind = tg_update_kind_parse(json + kt->start, kt->len);
    int64_t v;
    if (get_i64(doc, obj_get(doc, chat_tok(doc, payload), "id"), &v) ||
        get_i64(doc, obj_get(doc, payload, "user_chat_id"), &v) ||
        get_i64(doc, obj_get(doc, user_tok(doc, payload), "id"), &v)) {
        out->key = v;
        out->ordered = true;
    }
    return 0;
}

void tg__command_split(const char *text, const char **name, size_t *name_len, const char **mention,
                       size_t *mention_len, const char **args)
{
    const char *p = text + 1; /* after '/' */
    size_t n = strcspn(p, "@ \t\n\r");
    *name = p;
    *name_len = n;
    *mention = NULL;
    *mention_len = 0;
    p += n;
    if (*p == '@') {
        *mention = p + 1;
        *mention_len = strcspn(p + 1, " \t\n\r");
        p += 1 + *mention_len;
    }
    p += strspn(p, " \t\n\r");
    *args = p;
}

static void parse_command(tg_event *ev, const char *username)
{
    if (!ev->text || ev->text[0] != '/' || !(TG_KIND_BIT(ev->kind) & TG_KINDS_MESSAGES))
        return;
    const char *name, *mention;
    size_t nlen, mlen;
    tg__command_split(ev->text, &name, &nlen, &mention, &mlen, &ev->command_args);
    if (nlen == 0)
        return;
    ev->command = name;
    ev->command_len = nlen;
    ev->command_for_me = !mention || !username || !*username ||
                         (strlen(username) == mlen && strncasecmp(username, mention, mlen) == 0);
}

/* A decoded copy of the string at tok, or NULL when tok is absent or not a string. */
static const char *str_at(const tg__jdoc *d, uint32_t tok, tg__arena *a, bool *oom)
{
    if (tok == UINT32_MAX || d->toks[tok].type != TG__J_STRING)
        return NULL;
    char *s = tg__json_str_dup(d, tok, a, NULL);
    if (!s)
        *oom = true;
    return s;
}

/* Payload members routing reads, found in one pass over the payload object. */
enum slot {
    S_CHAT,
    S_FROM,
    S_USER,
    S_MESSAGE,
    S_MESSAGE_ID,
    S_TEXT,
    S_CAPTION,
    S_DATA,
    S_QUERY,
    S_ID,
    S_INLINE_MESSAGE_ID,
    S_BUSINESS_CONNECTION_ID,
    S_USER_CHAT_ID,
    S_COUNT
};

static const struct {
    const char *name;
    uint8_t len;
} slot_names[S_COUNT] = {
    [S_CHAT] = {"chat", 4},
    [S_FROM] = {"from", 4},
    [S_USER] = {"user", 4},
    [S_MESSAGE] = {"message", 7},
    [S_MESSAGE_ID] = {"message_id", 10},
    [S_TEXT] = {"text", 4},
    [S_CAPTION] = {"caption", 7},
    [S_DATA] = {"data", 4},
    [S_QUERY] = {"query", 5},
    [S_ID] = {"id", 2},
    [S_INLINE_MESSAGE_ID] = {"inline_message_id", 17},
    [S_BUSINESS_CONNECTION_ID] = {"business_connection_id", 22},
    [S_USER_CHAT_ID] = {"user_chat_id", 12},
};

static bool key_is(const tg__jdoc *d, uint32_t k, int slot)
{
    const tg__jtok *t = &d->toks[k];
    size_t n = slot_names[slot].len;
    if (t->flags & TG__JF_ESCAPED)
        return tg__json_str_eq(d, k, slot_names[slot].name, n);
    return t->len == n && memcmp(d->src + t->start, slot_names[slot].name, n) == 0;
}

static void scan_payload(const tg__jdoc *d, uint32_t p, uint32_t at[S_COUNT])
{
    for (int i = 0; i < S_COUNT; i++)
        at[i] = UINT32_MAX;
    uint32_t k = p + 1;
    for (uint32_t m = 0; m < d->toks[p].count; m++, k = d->toks[k + 1].next) {
        for (int slot = 0; slot < S_COUNT; slot++) {
            if (at[slot] == UINT32_MAX && key_is(d, k, slot)) {
                at[slot] = k + 1;
                break;
            }
        }
    }
}

static bool fill_fields(tg_event *ev, const tg__jdoc *d, uint32_t p, tg__arena *a)
{
    bool oom = false;
    uint32_t at[S_COUNT];
    scan_payload(d, p, at);
    uint32_t chat = at[S_CHAT] != UINT32_MAX ? at[S_CHAT] : obj_get(d, at[S_MESSAGE], "chat");
    uint32_t user = at[S_FROM] != UINT32_MAX ? at[S_FROM] : at[S_USER];
    ev->has_chat = get_i64(d, obj_get(d, chat, "id"), &ev->chat_id) ||
                   get_i64(d, at[S_USER_CHAT_ID], &ev->chat_id);
    ev->chat_type = str_at(d, obj_get(d, chat, "type"), a, &oom);
    ev->has_user = get_i64(d, obj_get(d, user, "id"), &ev->user_id);
    ev->username = str_at(d, obj_get(d, user, "username"), a, &oom);
    ev->language_code = str_at(d, obj_get(d, user, "language_code"), a, &oom);
    if (!get_i64(d, at[S_MESSAGE_ID], &ev->message_id))
        get_i64(d, obj_get(d, at[S_MESSAGE], "message_id"), &ev->message_id);
    ev->text = str_at(d, at[S_TEXT], a, &oom);
    if (!ev->text)
        ev->text = str_at(d, at[S_CAPTION], a, &oom);
    ev->data = str_at(d, at[S_DATA], a, &oom);
    ev->query = str_at(d, at[S_QUERY], a, &oom);
    ev->id = str_at(d, at[S_ID], a, &oom);
    ev->inline_message_id = str_at(d, at[S_INLINE_MESSAGE_ID], a, &oom);
    ev->business_connection_id = str_at(d, at[S_BUSINESS_CONNECTION_ID], a, &oom);
    return !oom;
}

int tg__event_parse(tg_event *ev, tg__jdoc *doc, tg__arena *a, const char *json, size_t len,
                    const char *username, char *err, size_t errcap)
{
    uint32_t p;
    *ev = (tg_event){.json = json, .json_len = len, .kind_name = "unknown"};
    int rc = parse_root(doc, json, len, &ev->update_id, &p, err, errcap);
    if (rc != 0)
        return rc;
    if (p == UINT32_MAX)
        return 0;
    const tg__jtok *kt = &doc->toks[p - 1];
    ev->kind = tg_update_kind_parse(json + kt->start, kt->len);
    ev->kind_name = ev->kind ? kind_names[ev->kind] : str_at(doc, p - 1, a, &(bool){false});
    if (!ev->kind_name || !fill_fields(ev, doc, p, a)) {
        snprintf(err, errcap, "update %lld: out of memory decoding the %s",
                 (long long)ev->update_id, tg_update_kind_name(ev->kind));
        return -2;
    }
    parse_command(ev, username);
    return 0;
}
