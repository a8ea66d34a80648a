/*
 * persist: the emulator's world saved to and loaded from a JSON file, so a developer can keep
 * a test world (bots with their commands, users, chats with members, pins and messages, and
 * files). Pending updates, queries and the event log are not kept: they belong to running
 * bots. Saving goes through tg__atomic_write (a private temporary renamed over the file; a
 * new file gets mode 0600, since it holds the bots' tokens, an existing one keeps its mode; a
 * symbolic link at the path is refused). Loading is a pure parse into a fresh world: any
 * malformed input is an error naming the path ("chats[2].messages[0].message: missing
 * required field \"chat\""), never a crash.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/atomicfile.h"
#include "core/str.h"
#include "emulator/emu.h"

#define STATE_MAX_BYTES ((size_t)256 << 20)

static const char *const statuses[] = {"",           "creator", "administrator", "member",
                                       "restricted", "left",    "kicked"};

/* ---- save ---- */

static void w_str(tg__jw *w, const char *k, const char *v)
{
    if (!v)
        return;
    tg__jw_key(w, k, strlen(k));
    tg__jw_str(w, v);
}

static void w_int(tg__jw *w, const char *k, int64_t v)
{
    tg__jw_key(w, k, strlen(k));
    tg__jw_i64(w, v);
}

static void save_bot(tg__jw *w, const emu_bot *b)
{
    tg__jw_obj_begin(w);
    w_str(w, "token", b->token);
    w_str(w, "username", b->u.username);
    w_str(w, "first_name", b->u.first_name);
    w_int(w, "next_update_id", b->next_update_id);
    TG__JW_KEY(w, "commands");
    tg__jw_arr_begin(w);
    for (size_t i = 0; i < b->ncmds; i++) {
        tg__jw_obj_begin(w);
        TG__JW_KEY(w, "scope");
        tg__jw_raw(w, b->cmds[i].scope, strlen(b->cmds[i].scope));
        w_str(w, "language_code", b->cmds[i].lang);
        TG__JW_KEY(w, "commands");
        tg__jw_raw(w, b->cmds[i].json, strlen(b->cmds[i].json));
        tg__jw_obj_end(w);
    }
    tg__jw_arr_end(w);
    tg__jw_obj_end(w);
}

static void save_chat(tg__jw *w, const emu_chat *c)
{
    tg__jw_obj_begin(w);
    w_int(w, "id", c->id);
    w_str(w, "type", tg__codec_enum_str(&tg__e_chat_type, c->type));
    w_str(w, "title", c->title);
    w_str(w, "username", c->username);
    w_str(w, "description", c->description);
    w_int(w, "bot_id", c->bot_id);
    w_int(w, "user_id", c->user_id);
    w_int(w, "next_message_id", c->next_msg_id);
    w_int(w, "migrate_to_chat_id", c->migrate_to);
    TG__JW_KEY(w, "blocked");
    tg__jw_bool(w, c->blocked);
    TG__JW_KEY(w, "members");
    tg__jw_arr_begin(w);
    for (size_t i = 0; i < c->nmembers; i++) {
        const emu_member *m = &c->members[i];
        tg__jw_obj_begin(w);
        w_int(w, "user_id", m->user_id);
        w_str(w, "status", statuses[m->status > 0 && m->status <= EMU_M_BANNED ? m->status : 5]);
        w_int(w, "rights", m->rights);
        w_int(w, "permissions", m->perms);
        w_int(w, "until_date", m->until_date);
        tg__jw_obj_end(w);
    }
    tg__jw_arr_end(w);
    TG__JW_KEY(w, "pins");
    tg__jw_arr_begin(w);
    for (size_t i = 0; i < c->npins; i++)
        tg__jw_i64(w, c->pins[i]);
    tg__jw_arr_end(w);
    TG__JW_KEY(w, "messages");
    tg__jw_arr_begin(w);
    for (size_t i = 0; i < c->nmsgs; i++) {
        if (c->msgs[i].deleted)
            continue;
        tg__jw_obj_begin(w);
        w_int(w, "sender_id", c->msgs[i].sender_id);
        TG__JW_KEY(w, "message");
        tg__jw_raw(w, c->msgs[i].json, strlen(c->msgs[i].json));
        tg__jw_obj_end(w);
    }
    tg__jw_arr_end(w);
    tg__jw_obj_end(w);
}

static void save_file(tg__jw *w, const emu_file *f)
{
    tg__jw_obj_begin(w);
    w_str(w, "file_id", f->file_id);
    w_str(w, "file_unique_id", f->unique_id);
    w_str(w, "file_path", f->path);
    w_str(w, "file_name", f->name);
    w_str(w, "mime_type", f->mime);
    if (!f->any_bot) { /* absent: every bot may use the file (files saved before per-bot ids) */
        TG__JW_KEY(w, "bots");
        tg__jw_arr_begin(w);
        for (size_t i = 0; i < f->nbots; i++)
            tg__jw_i64(w, f->bots[i]);
        tg__jw_arr_end(w);
    }
    size_t cap = f->len / 3 * 4 + 8;
    char *b64 = tg__malloc(cap);
    if (b64 && tg__b64_encode(b64, cap, f->data, f->len, TG__B64_STD) != TG__BAD_LEN)
        w_str(w, "data_base64", b64);
    else
        w->err = -ENOMEM;
    tg__free(b64);
    tg__jw_obj_end(w);
}

static void save_world(const emu *e, tg__jw *w)
{
    tg__jw_obj_begin(w);
    w_int(w, "format", 1);
    w_int(w, "next_user_id", e->next_user_id);
    w_int(w, "next_group_id", e->next_group_id);
    w_int(w, "next_file_id", e->next_file_id);
    TG__JW_KEY(w, "bots");
    tg__jw_arr_begin(w);
    for (size_t i = 0; i < e->nbots; i++)
        save_bot(w, e->bots[i]);
    tg__jw_arr_end(w);
    TG__JW_KEY(w, "users");
    tg__jw_arr_begin(w);
    for (size_t i = 0; i < e->nusers; i++) {
        const emu_user *u = e->users[i];
        tg__jw_obj_begin(w);
        w_int(w, "id", u->id);
        w_str(w, "first_name", u->first_name);
        w_str(w, "last_name", u->last_name);
        w_str(w, "username", u->username);
        w_str(w, "language_code", u->language_code);
        tg__jw_obj_end(w);
    }
    tg__jw_arr_end(w);
    TG__JW_KEY(w, "chats");
    tg__jw_arr_begin(w);
    for (size_t i = 0; i < e->nchats; i++)
        save_chat(w, e->chats[i]);
    tg__jw_arr_end(w);
    TG__JW_KEY(w, "files");
    tg__jw_arr_begin(w);
    for (size_t i = 0; i < e->nfiles; i++)
        save_file(w, e->files[i]);
    tg__jw_arr_end(w);
    tg__jw_obj_end(w);
}

int emu_state_save(emu *e, const char *path, char *err, size_t errcap)
{
    tg__buf b;
    tg__buf_init(&b, STATE_MAX_BYTES);
    tg__jw w;
    tg__jw_init(&w, &b);
    save_world(e, &w);
    int rc = -1;
    if (w.err) {
        snprintf(err, errcap, "state: the world does not fit in %zu bytes", STATE_MAX_BYTES);
        goto out;
    }
    char why[400];
    if (tg__atomic_write(path, b.data, b.len, 0600, why, sizeof why) != 0) {
        snprintf(err, errcap, "state: %s", why);
        goto out;
    }
    rc = 0;
out:
    tg__buf_cleanup(&b);
    return rc;
}

/* ---- load ---- */

typedef struct ld {
    emu *e;
    tg__jdoc d;
    tg__arena a;
    char *err;
    size_t errcap;
} ld;

static int lfail(ld *l, uint32_t tok, const char *what)
{
    tg__buf p;
    tg__buf_init(&p, 512);
    tg__json_path(&l->d, tok, &p);
    snprintf(l->err, l->errcap, "state: %s: %s", p.len ? tg__buf_cstr(&p) : "(top)", what);
    tg__buf_cleanup(&p);
    return -1;
}

/* Member key of object obj as a string copy in the arena (NULL when absent or not a string). */
static const char *get_s(ld *l, uint32_t obj, const char *key)
{
    uint32_t t = tg__json_obj_get(&l->d, obj, key);
    if (t == UINT32_MAX || l->d.toks[t].type != TG__J_STRING)
        return NULL;
    return tg__json_str_dup(&l->d, t, &l->a, NULL);
}

static int64_t get_i(ld *l, uint32_t obj, const char *key)
{
    uint32_t t = tg__json_obj_get(&l->d, obj, key);
    int64_t v = 0;
    tg__jerr e;
    if (t != UINT32_MAX && tg__json_get_i64(&l->d, t, &v, &e) != 0)
        v = 0;
    return v;
}

/* The array member key of obj (token), or UINT32_MAX when absent; -1 stored in *bad when
 * present but not an array. */
static uint32_t get_arr(ld *l, uint32_t obj, const char *key, bool *bad)
{
    uint32_t t = tg__json_obj_get(&l->d, obj, key);
    if (t != UINT32_MAX && l->d.toks[t].type != TG__J_ARRAY) {
        *bad = true;
        return UINT32_MAX;
    }
    return t;
}

static char *raw_dup(ld *l, uint32_t t)
{
    size_t n;
    const char *s = tg__json_raw(&l->d, t, &n);
    return tg__strndup(s, n);
}

static int load_commands(ld *l, emu_bot *b, uint32_t arr)
{
    uint32_t k = arr + 1;
    for (uint32_t i = 0; i < l->d.toks[arr].count; i++, k = l->d.toks[k].next) {
        uint32_t sc = tg__json_obj_get(&l->d, k, "scope");
        uint32_t cm = tg__json_obj_get(&l->d, k, "commands");
        if (l->d.toks[k].type != TG__J_OBJECT || sc == UINT32_MAX || cm == UINT32_MAX ||
            l->d.toks[cm].type != TG__J_ARRAY)
            return lfail(l, k, "expected {scope, language_code, commands}");
        emu_command_set *n = tg__realloc(b->cmds, (b->ncmds + 1) * sizeof *n);
        if (!n)
            return lfail(l, k, "out of memory");
        b->cmds = n;
        const char *lang = get_s(l, k, "language_code");
        b->cmds[b->ncmds++] =
            (emu_command_set){raw_dup(l, sc), tg__strdup(lang ? lang : ""), raw_dup(l, cm)};
    }
    return 0;
}

static int load_bots(ld *l, uint32_t arr)
{
    uint32_t k = arr + 1;
    for (uint32_t i = 0; i < l->d.toks[arr].count; i++, k = l->d.toks[k].next) {
        const char *token = l->d.toks[k].type == TG__J_OBJECT ? get_s(l, k, "token") : NULL;
        emu_bot *b =
            token ? emu_bot_add(l->e, token, get_s(l, k, "username"), get_s(l, k, "first_name"))
                  : NULL;
        if (!b)
            return lfail(l, k, "a bot needs a well-formed, unique token");
        int64_t next = get_i(l, k, "next_update_id");
        b->next_update_id = next > 0 ? next : 1;
        bool bad = false;
        uint32_t cmds = get_arr(l, k, "commands", &bad);
        if (bad || (cmds != UINT32_MAX && load_commands(l, b, cmds)))
            return bad ? lfail(l, k, "commands: expected an array") : -1;
    }
    return 0;
}

static int load_users(ld *l, uint32_t arr)
{
    uint32_t k = arr + 1;
    for (uint32_t i = 0; i < l->d.toks[arr].count; i++, k = l->d.toks[k].next) {
        int64_t id = l->d.toks[k].type == TG__J_OBJECT ? get_i(l, k, "id") : 0;
        if (id <= 0)
            return lfail(l, k, "a user needs a positive id");
        if (emu_user_get(l->e, id))
            continue; /* the Developer exists already */
        if (!emu_user_add(l->e, id, get_s(l, k, "first_name"), get_s(l, k, "last_name"),
                          get_s(l, k, "username"), get_s(l, k, "language_code")))
            return lfail(l, k, "cannot add this user");
    }
    return 0;
}

static int load_members(ld *l, emu_chat *c, uint32_t arr)
{
    uint32_t k = arr + 1;
    for (uint32_t i = 0; i < l->d.toks[arr].count; i++, k = l->d.toks[k].next) {
        const char *st = l->d.toks[k].type == TG__J_OBJECT ? get_s(l, k, "status") : NULL;
        int s = 0;
        for (int j = 1; st && j <= EMU_M_BANNED; j++)
            if (!strcmp(st, statuses[j]))
                s = j;
        emu_member *m = s ? emu_member_set(c, get_i(l, k, "user_id"), s) : NULL;
        if (!m)
            return lfail(l, k, "a member needs user_id and a known status");
        m->rights = (emu_bits)get_i(l, k, "rights");
        m->perms = (emu_bits)get_i(l, k, "permissions");
        m->until_date = get_i(l, k, "until_date");
    }
    return 0;
}

/* One stored message: must decode as a Message; kept as its JSON text. */
static int load_message(ld *l, emu_chat *c, uint32_t k)
{
    uint32_t mt =
        l->d.toks[k].type == TG__J_OBJECT ? tg__json_obj_get(&l->d, k, "message") : UINT32_MAX;
    if (mt == UINT32_MAX)
        return lfail(l, k, "expected {sender_id, message}");
    tg_message m;
    tg__jerr je;
    if (tg__codec_decode(&tg__t_message, &l->d, mt, &l->a, &m, &je) != TG_OK)
        return lfail(l, je.tok != UINT32_MAX ? je.tok : mt, je.msg);
    emu_msg *n = tg__realloc(c->msgs, (c->nmsgs + 1) * sizeof *n);
    if (!n)
        return lfail(l, k, "out of memory");
    c->msgs = n;
    c->msgs[c->nmsgs++] = (emu_msg){m.message_id, get_i(l, k, "sender_id"), raw_dup(l, mt), false};
    if (m.message_id >= c->next_msg_id)
        c->next_msg_id = m.message_id + 1;
    return 0;
}

static int load_chat_lists(ld *l, emu_chat *c, uint32_t k)
{
    bool bad = false;
    uint32_t mem = get_arr(l, k, "members", &bad);
    uint32_t pins = get_arr(l, k, "pins", &bad);
    uint32_t msgs = get_arr(l, k, "messages", &bad);
    if (bad)
        return lfail(l, k, "members, pins and messages must be arrays");
    if (mem != UINT32_MAX && load_members(l, c, mem))
        return -1;
    for (uint32_t i = 0, p = pins + 1; pins != UINT32_MAX && i < l->d.toks[pins].count;
         i++, p = l->d.toks[p].next) {
        int64_t *np = tg__realloc(c->pins, (c->npins + 1) * sizeof *np);
        tg__jerr je;
        if (!np || tg__json_get_i64(&l->d, p, &np[c->npins], &je) != 0) {
            c->pins = np ? np : c->pins;
            return lfail(l, p, "expected a message id");
        }
        c->pins = np;
        c->npins++;
    }
    for (uint32_t i = 0, m = msgs + 1; msgs != UINT32_MAX && i < l->d.toks[msgs].count;
         i++, m = l->d.toks[m].next)
        if (load_message(l, c, m))
            return -1;
    return 0;
}

static int load_chats(ld *l, uint32_t arr)
{
    uint32_t k = arr + 1;
    for (uint32_t i = 0; i < l->d.toks[arr].count; i++, k = l->d.toks[k].next) {
        const char *type = l->d.toks[k].type == TG__J_OBJECT ? get_s(l, k, "type") : NULL;
        int32_t t = type ? tg__codec_enum_id(&tg__e_chat_type, type, strlen(type)) : 0;
        int64_t id = get_i(l, k, "id"), bot = get_i(l, k, "bot_id");
        if (t < TG_CHAT_TYPE_PRIVATE || t > TG_CHAT_TYPE_CHANNEL || id == 0 ||
            emu_chat_get(l->e, id, t == TG_CHAT_TYPE_PRIVATE ? bot : 0))
            return lfail(l, k, "a chat needs a unique id and a known type");
        emu_chat *c = t == TG_CHAT_TYPE_PRIVATE ? NULL : emu_chat_add(l->e, t, NULL, NULL);
        if (t == TG_CHAT_TYPE_PRIVATE) {
            emu_bot *b = emu_bot_by_id(l->e, bot);
            emu_user *u = emu_user_get(l->e, get_i(l, k, "user_id"));
            if (!b || !u || u->id != id)
                return lfail(l, k, "a private chat needs its bot and its user");
            c = emu_chat_private(l->e, b, u);
        }
        if (!c)
            return lfail(l, k, "out of memory");
        c->id = id;
        tg__free(c->title);
        tg__free(c->username);
        c->title = tg__strdup(get_s(l, k, "title"));
        c->username = tg__strdup(get_s(l, k, "username"));
        c->description = tg__strdup(get_s(l, k, "description"));
        c->migrate_to = get_i(l, k, "migrate_to_chat_id");
        uint32_t bl = tg__json_obj_get(&l->d, k, "blocked");
        c->blocked = bl != UINT32_MAX && l->d.toks[bl].type == TG__J_TRUE;
        int64_t next = get_i(l, k, "next_message_id");
        c->next_msg_id = next > 0 ? next : 1;
        if (load_chat_lists(l, c, k))
            return -1;
    }
    return 0;
}

static int load_files(ld *l, uint32_t arr)
{
    uint32_t k = arr + 1;
    for (uint32_t i = 0; i < l->d.toks[arr].count; i++, k = l->d.toks[k].next) {
        const char *id = l->d.toks[k].type == TG__J_OBJECT ? get_s(l, k, "file_id") : NULL;
        const char *b64 = id ? get_s(l, k, "data_base64") : NULL;
        const char *path = b64 ? get_s(l, k, "file_path") : NULL;
        size_t n = b64 ? strlen(b64) : 0;
        char *data = path ? tg__arena_alloc(&l->a, n + 1) : NULL;
        size_t len = data ? tg__b64_decode(data, n + 1, b64, n) : TG__BAD_LEN;
        if (len == TG__BAD_LEN || emu_file_get(l->e, id))
            return lfail(l, k, "a file needs a unique file_id, file_path and data_base64");
        emu_file *f = emu_file_add(l->e, data, len, get_s(l, k, "file_name"),
                                   get_s(l, k, "mime_type"), "documents");
        if (!f)
            return lfail(l, k, "out of memory");
        tg__free(f->file_id);
        tg__free(f->path);
        f->file_id = tg__strdup(id);
        f->path = tg__strdup(path);
        const char *uid = get_s(l, k, "file_unique_id");
        if (uid) {
            tg__free(f->unique_id);
            f->unique_id = tg__strdup(uid);
        }
        uint32_t bots = tg__json_obj_get(&l->d, k, "bots");
        f->any_bot = bots == UINT32_MAX;
        if (!f->any_bot && l->d.toks[bots].type != TG__J_ARRAY)
            return lfail(l, bots, "bots must be an array of bot ids");
        for (uint32_t j = 0, t = bots + 1; !f->any_bot && j < l->d.toks[bots].count;
             j++, t = l->d.toks[t].next) {
            int64_t bot;
            tg__jerr je;
            if (tg__json_get_i64(&l->d, t, &bot, &je) != 0)
                return lfail(l, t, "bots must be an array of bot ids");
            if (emu_file_grant(f, bot) != 0)
                return lfail(l, t, "out of memory");
        }
    }
    return 0;
}

int emu_state_load_json(emu *e, const char *json, size_t len, char *err, size_t errcap)
{
    ld l = {.e = e, .err = err, .errcap = errcap};
    tg__jdoc_init(&l.d, &(tg__jlimits){.max_bytes = STATE_MAX_BYTES});
    tg__arena_init(&l.a, 0, 0);
    tg__jerr je;
    int rc = -1;
    if (tg__json_parse(&l.d, json, len, &je) != 0) {
        snprintf(err, errcap, "state: not JSON: %s (at byte %zu)", je.msg, je.offset);
        goto out;
    }
    uint32_t nul = emu_json_find_nul(&l.d);
    if (nul != UINT32_MAX) {
        lfail(&l, nul,
              "a string holding \\u0000 (the emulator keeps NUL-terminated strings: it would "
              "cut the text there)");
        goto out;
    }
    if (l.d.toks[0].type != TG__J_OBJECT || get_i(&l, 0, "format") != 1) {
        lfail(&l, 0, "expected an object with \"format\": 1");
        goto out;
    }
    bool bad = false;
    uint32_t bots = get_arr(&l, 0, "bots", &bad), users = get_arr(&l, 0, "users", &bad);
    uint32_t chats = get_arr(&l, 0, "chats", &bad), files = get_arr(&l, 0, "files", &bad);
    if (bad) {
        lfail(&l, 0, "bots, users, chats and files must be arrays");
        goto out;
    }
    if ((bots != UINT32_MAX && load_bots(&l, bots)) ||
        (users != UINT32_MAX && load_users(&l, users)) ||
        (chats != UINT32_MAX && load_chats(&l, chats)) ||
        (files != UINT32_MAX && load_files(&l, files)))
        goto out;
    int64_t v;
    if ((v = get_i(&l, 0, "next_user_id")) > e->next_user_id)
        e->next_user_id = v;
    if ((v = get_i(&l, 0, "next_group_id")) > e->next_group_id)
        e->next_group_id = v;
    if ((v = get_i(&l, 0, "next_file_id")) > e->next_file_id)
        e->next_file_id = v;
    rc = 0;
out:
    tg__arena_cleanup(&l.a);
    tg__jdoc_cleanup(&l.d);
    return rc;
}

int emu_state_load(emu *e, const char *path, char *err, size_t errcap)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errcap, "state: %s: %s", path, strerror(errno));
        return -1;
    }
    tg__buf b;
    tg__buf_init(&b, STATE_MAX_BYTES);
    char chunk[65536];
    size_t n;
    int rc = 0;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        if (tg__buf_append(&b, chunk, n) != 0) {
            snprintf(err, errcap, "state: %s is larger than %zu bytes", path, STATE_MAX_BYTES);
            rc = -1;
            break;
        }
    fclose(f);
    if (rc == 0)
        rc = emu_state_load_json(e, b.data ? b.data : "", b.len, err, errcap);
    tg__buf_cleanup(&b);
    return rc;
}
