/*
 * api_chat: Bot API methods about chats, members and the bot's commands: getChat,
 * getChatMember(Count), getChatAdministrators, ban/unban/restrict/promoteChatMember,
 * leaveChat, approve/declineChatJoinRequest, setChatTitle, setChatDescription,
 * set/get/deleteMyCommands. Member changes produce chat_member updates for the bots of the
 * chat (administrators, as on Telegram) and my_chat_member for the bot changed.
 *
 * Rights are bit sets: RIGHTS[] below names the administrator bits, PERMS[] the member
 * permission bits, in ChatAdministratorRights / ChatPermissions order.
 */
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "emulator/handlers.h"

/* Administrator rights (bit i = RIGHTS[i]). */
enum {
    R_MANAGE_CHAT,
    R_DELETE_MESSAGES,
    R_MANAGE_VIDEO_CHATS,
    R_RESTRICT_MEMBERS,
    R_PROMOTE_MEMBERS,
    R_CHANGE_INFO,
    R_INVITE_USERS,
    R_POST_MESSAGES,
    R_PIN_MESSAGES,
    R_EDIT_MESSAGES,
};

/* Member permissions (bit i). */
enum {
    P_SEND_MESSAGES,
    P_SEND_AUDIOS,
    P_SEND_DOCUMENTS,
    P_SEND_PHOTOS,
    P_SEND_VIDEOS,
    P_SEND_VIDEO_NOTES,
    P_SEND_VOICE_NOTES,
    P_SEND_POLLS,
    P_SEND_OTHER,
    P_WEB_PREVIEWS,
    P_CHANGE_INFO,
    P_INVITE_USERS,
    P_PIN_MESSAGES,
    P_MANAGE_TOPICS,
};

#define BIT(b, i) (((b) >> (i)) & 1u)

tg_chat_member emu_tg_member(emu *e, const emu_member *m, tg__arena *a)
{
    const emu_user *eu = emu_user_get(e, m->user_id);
    emu_user fallback = {.id = m->user_id, .first_name = "Deleted Account"};
    const tg_user *u = emu_tg_user(eu ? eu : &fallback, a);
    switch (m->status) {
    case EMU_M_OWNER: {
        tg_chat_member_owner *o = tg__arena_zalloc(a, sizeof *o);
        o->user = u;
        o->custom_title = m->custom_title;
        return tg_chat_member_from_owner(o);
    }
    case EMU_M_ADMIN: {
        tg_chat_member_administrator *o = tg__arena_zalloc(a, sizeof *o);
        o->user = u;
        o->can_manage_chat = BIT(m->rights, R_MANAGE_CHAT);
        o->can_delete_messages = BIT(m->rights, R_DELETE_MESSAGES);
        o->can_manage_video_chats = BIT(m->rights, R_MANAGE_VIDEO_CHATS);
        o->can_restrict_members = BIT(m->rights, R_RESTRICT_MEMBERS);
        o->can_promote_members = BIT(m->rights, R_PROMOTE_MEMBERS);
        o->can_change_info = BIT(m->rights, R_CHANGE_INFO);
        o->can_invite_users = BIT(m->rights, R_INVITE_USERS);
        o->can_post_messages = (tg_opt_bool)TG_SOME(BIT(m->rights, R_POST_MESSAGES));
        o->can_pin_messages = (tg_opt_bool)TG_SOME(BIT(m->rights, R_PIN_MESSAGES));
        o->can_edit_messages = (tg_opt_bool)TG_SOME(BIT(m->rights, R_EDIT_MESSAGES));
        o->custom_title = m->custom_title;
        return tg_chat_member_from_administrator(o);
    }
    case EMU_M_RESTRICTED: {
        tg_chat_member_restricted *o = tg__arena_zalloc(a, sizeof *o);
        o->user = u;
        o->is_member = true;
        o->can_send_messages = BIT(m->perms, P_SEND_MESSAGES);
        o->can_send_audios = BIT(m->perms, P_SEND_AUDIOS);
        o->can_send_documents = BIT(m->perms, P_SEND_DOCUMENTS);
        o->can_send_photos = BIT(m->perms, P_SEND_PHOTOS);
        o->can_send_videos = BIT(m->perms, P_SEND_VIDEOS);
        o->can_send_video_notes = BIT(m->perms, P_SEND_VIDEO_NOTES);
        o->can_send_voice_notes = BIT(m->perms, P_SEND_VOICE_NOTES);
        o->can_send_polls = BIT(m->perms, P_SEND_POLLS);
        o->can_send_other_messages = BIT(m->perms, P_SEND_OTHER);
        o->can_add_web_page_previews = BIT(m->perms, P_WEB_PREVIEWS);
        o->can_change_info = BIT(m->perms, P_CHANGE_INFO);
        o->can_invite_users = BIT(m->perms, P_INVITE_USERS);
        o->can_pin_messages = BIT(m->perms, P_PIN_MESSAGES);
        o->can_manage_topics = BIT(m->perms, P_MANAGE_TOPICS);
        o->until_date = m->until_date;
        return tg_chat_member_from_restricted(o);
    }
    case EMU_M_BANNED: {
        tg_chat_member_banned *o = tg__arena_zalloc(a, sizeof *o);
        o->user = u;
        o->until_date = m->until_date;
        return tg_chat_member_from_banned(o);
    }
    case EMU_M_MEMBER: {
        tg_chat_member_member *o = tg__arena_zalloc(a, sizeof *o);
        o->user = u;
        return tg_chat_member_from_member(o);
    }
    default: {
        tg_chat_member_left *o = tg__arena_zalloc(a, sizeof *o);
        o->user = u;
        return tg_chat_member_from_left(o);
    }
    }
}

void emu_member_changed(emu *e, emu_chat *c, int64_t actor, const emu_member *before,
                        const emu_member *after, tg__arena *a)
{
    const emu_user *au = emu_user_get(e, actor);
    tg_chat_member_updated cmu = {.chat = emu_tg_chat(e, c, a), .date = emu_now()};
    emu_user fallback = {.id = actor, .first_name = "User"};
    cmu.from = emu_tg_user(au ? au : &fallback, a);
    cmu.old_chat_member = emu_tg_member(e, before, a);
    cmu.new_chat_member = emu_tg_member(e, after, a);
    for (size_t i = 0; i < e->nbots; i++) {
        emu_bot *b = e->bots[i];
        tg_update u = {0};
        if (b->u.id == after->user_id) {
            u.my_chat_member = &cmu;
            emu_update_push(e, b, TG_UPDATE_TYPE_MY_CHAT_MEMBER, &u);
        } else if (emu_is_admin(c, b->u.id, 0)) {
            u.chat_member = &cmu;
            emu_update_push(e, b, TG_UPDATE_TYPE_CHAT_MEMBER, &u);
        }
    }
    c->version++;
    emu_touch(e);
}

/* A group chat the bot acts in with right (0: any admin); NULL after emu_fail. */
static emu_chat *admin_chat(emu_req *r, const tg_chat_id *id, emu_bits right)
{
    emu_chat *c = emu_req_chat(r, id, false);
    if (!c)
        return NULL;
    if (c->type == TG_CHAT_TYPE_PRIVATE) {
        emu_fail(r, 400, "method is available for supergroup and channel chats only");
        return NULL;
    }
    if (!emu_is_admin(c, r->b->u.id, right)) {
        emu_fail(r, 400, "not enough rights to restrict/unrestrict chat member");
        return NULL;
    }
    return c;
}

static int write_member(emu_req *r, const emu_member *m)
{
    tg_chat_member cm = emu_tg_member(r->e, m, r->a);
    tg__codec_encode(&tg__t_chat_member, &cm, &r->w, 0);
    return 0;
}

int emu_h_get_chat(emu_req *r)
{
    const tg_get_chat_params *p = r->p;
    emu_chat *c = emu_req_chat(r, &p->chat_id, false);
    if (!c)
        return -1;
    tg_chat *t = emu_tg_chat(r->e, c, r->a);
    tg_chat_full_info f = {.id = t->id,
                           .type = t->type,
                           .title = t->title,
                           .username = t->username,
                           .first_name = t->first_name,
                           .last_name = t->last_name,
                           .max_reaction_count = 11};
    f.description = c->description;
    tg_chat_permissions perms = {0};
    if (c->type == TG_CHAT_TYPE_GROUP || c->type == TG_CHAT_TYPE_SUPERGROUP) {
        perms.can_send_messages = (tg_opt_bool)TG_SOME(BIT(c->default_perms, P_SEND_MESSAGES));
        perms.can_invite_users = (tg_opt_bool)TG_SOME(BIT(c->default_perms, P_INVITE_USERS));
        perms.can_pin_messages = (tg_opt_bool)TG_SOME(BIT(c->default_perms, P_PIN_MESSAGES));
        f.permissions = &perms;
    }
    if (c->npins) {
        emu_msg *s = emu_msg_get(c, c->pins[c->npins - 1]);
        f.pinned_message = s ? emu_msg_decode(s, r->a) : NULL;
    }
    tg__codec_encode(&tg__t_chat_full_info, &f, &r->w, 0);
    return 0;
}

int emu_h_get_chat_member(emu_req *r)
{
    const tg_get_chat_member_params *p = r->p;
    emu_chat *c = emu_req_chat(r, &p->chat_id, false);
    if (!c)
        return -1;
    emu_member priv = {.user_id = p->user_id, .status = EMU_M_MEMBER};
    const emu_member *m = emu_member_get(c, p->user_id);
    if (c->type == TG_CHAT_TYPE_PRIVATE) {
        if (p->user_id != c->user_id && p->user_id != r->b->u.id)
            return emu_fail(r, 400, "user not found");
        m = &priv;
    }
    if (!emu_user_get(r->e, p->user_id))
        return emu_fail(r, 400, "user not found");
    emu_member left = {.user_id = p->user_id, .status = EMU_M_LEFT};
    return write_member(r, m ? m : &left);
}

int emu_h_get_chat_member_count(emu_req *r)
{
    const tg_get_chat_member_count_params *p = r->p;
    emu_chat *c = emu_req_chat(r, &p->chat_id, false);
    if (!c)
        return -1;
    int64_t n = 0;
    for (size_t i = 0; i < c->nmembers; i++)
        n += emu_member_in(&c->members[i]);
    tg__jw_i64(&r->w, c->type == TG_CHAT_TYPE_PRIVATE ? 2 : n);
    return 0;
}

int emu_h_get_chat_administrators(emu_req *r)
{
    const tg_get_chat_administrators_params *p = r->p;
    emu_chat *c = emu_req_chat(r, &p->chat_id, false);
    if (!c)
        return -1;
    if (c->type == TG_CHAT_TYPE_PRIVATE)
        return emu_fail(r, 400, "there are no administrators in the private chat");
    tg__jw_arr_begin(&r->w);
    for (size_t i = 0; i < c->nmembers; i++)
        if (c->members[i].status == EMU_M_OWNER || c->members[i].status == EMU_M_ADMIN)
            write_member(r, &c->members[i]);
    tg__jw_arr_end(&r->w);
    return 0;
}

/* Change user's status in c as the bot; the updates follow. */
static int change_member(emu_req *r, emu_chat *c, int64_t user_id, int status, emu_bits bits,
                         int64_t until)
{
    emu_member *m = emu_member_get(c, user_id);
    if (m && m->status == EMU_M_OWNER)
        return emu_fail(r, 400, "can't remove chat owner");
    if (user_id == r->b->u.id)
        return emu_fail(r, 400, "can't restrict self");
    emu_member before = m ? *m : (emu_member){.user_id = user_id, .status = EMU_M_LEFT};
    m = emu_member_set(c, user_id, status);
    if (!m)
        return emu_fail(r, 500, "Internal Server Error: out of memory");
    if (status == EMU_M_ADMIN)
        m->rights = bits;
    else if (status == EMU_M_RESTRICTED)
        m->perms = bits;
    m->until_date = until;
    if (before.status != m->status || before.rights != m->rights || before.perms != m->perms)
        emu_member_changed(r->e, c, r->b->u.id, &before, m, r->a);
    tg__jw_bool(&r->w, true);
    return 0;
}

int emu_h_ban_chat_member(emu_req *r)
{
    const tg_ban_chat_member_params *p = r->p;
    emu_chat *c = admin_chat(r, &p->chat_id, 1u << R_RESTRICT_MEMBERS);
    if (!c)
        return -1;
    if (!emu_user_get(r->e, p->user_id))
        return emu_fail(r, 400, "PARTICIPANT_ID_INVALID");
    return change_member(r, c, p->user_id, EMU_M_BANNED, 0,
                         p->until_date.has ? p->until_date.v : 0);
}

int emu_h_unban_chat_member(emu_req *r)
{
    const tg_unban_chat_member_params *p = r->p;
    emu_chat *c = admin_chat(r, &p->chat_id, 1u << R_RESTRICT_MEMBERS);
    if (!c)
        return -1;
    emu_member *m = emu_member_get(c, p->user_id);
    bool banned = m && m->status == EMU_M_BANNED;
    if (!banned && p->only_if_banned.has && p->only_if_banned.v) {
        tg__jw_bool(&r->w, true); /* nothing to do, as Telegram answers */
        return 0;
    }
    if (!m) {
        tg__jw_bool(&r->w, true);
        return 0;
    }
    return change_member(r, c, p->user_id, EMU_M_LEFT, 0, 0);
}

static emu_bits perms_bits(const tg_chat_permissions *p)
{
    const tg_opt_bool v[] = {
        p->can_send_messages,         p->can_send_audios,  p->can_send_documents,
        p->can_send_photos,           p->can_send_videos,  p->can_send_video_notes,
        p->can_send_voice_notes,      p->can_send_polls,   p->can_send_other_messages,
        p->can_add_web_page_previews, p->can_change_info,  p->can_invite_users,
        p->can_pin_messages,          p->can_manage_topics};
    emu_bits b = 0;
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (v[i].has && v[i].v)
            b |= 1u << i;
    return b;
}

int emu_h_restrict_chat_member(emu_req *r)
{
    const tg_restrict_chat_member_params *p = r->p;
    emu_chat *c = admin_chat(r, &p->chat_id, 1u << R_RESTRICT_MEMBERS);
    if (!c)
        return -1;
    if (c->type != TG_CHAT_TYPE_SUPERGROUP)
        return emu_fail(r, 400, "method is available only for supergroups");
    if (!emu_member_in(emu_member_get(c, p->user_id)))
        return emu_fail(r, 400, "user is not a member of the chat");
    return change_member(r, c, p->user_id, EMU_M_RESTRICTED, perms_bits(p->permissions),
                         p->until_date.has ? p->until_date.v : 0);
}

int emu_h_promote_chat_member(emu_req *r)
{
    const tg_promote_chat_member_params *p = r->p;
    emu_chat *c = admin_chat(r, &p->chat_id, 1u << R_PROMOTE_MEMBERS);
    if (!c)
        return -1;
    if (!emu_member_in(emu_member_get(c, p->user_id)))
        return emu_fail(r, 400, "user is not a member of the chat");
    const tg_opt_bool v[] = {p->can_manage_chat,        p->can_delete_messages,
                             p->can_manage_video_chats, p->can_restrict_members,
                             p->can_promote_members,    p->can_change_info,
                             p->can_invite_users,       p->can_post_messages,
                             p->can_pin_messages,       p->can_edit_messages};
    emu_bits b = 0;
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (v[i].has && v[i].v)
            b |= 1u << i;
    return change_member(r, c, p->user_id, b ? EMU_M_ADMIN : EMU_M_MEMBER, b, 0);
}

int emu_h_leave_chat(emu_req *r)
{
    const tg_leave_chat_params *p = r->p;
    emu_chat *c = emu_req_chat(r, &p->chat_id, false);
    if (!c)
        return -1;
    if (c->type == TG_CHAT_TYPE_PRIVATE)
        return emu_fail(r, 400, "chat member status can't be changed in private chats");
    emu_member *m = emu_member_get(c, r->b->u.id);
    emu_member before = *m;
    m->status = EMU_M_LEFT;
    emu_member_changed(r->e, c, r->b->u.id, &before, m, r->a);
    tg__jw_bool(&r->w, true);
    return 0;
}

static int join_request(emu_req *r, const tg_chat_id *cid, int64_t user_id, bool approve)
{
    emu_chat *c = admin_chat(r, cid, 1u << R_INVITE_USERS);
    if (!c)
        return -1;
    size_t i = 0;
    while (i < c->njoin && c->join_reqs[i] != user_id)
        i++;
    if (i == c->njoin)
        return emu_fail(r, 400, "HIDE_REQUESTER_MISSING");
    c->join_reqs[i] = c->join_reqs[--c->njoin];
    if (!approve) {
        c->version++;
        emu_touch(r->e);
        tg__jw_bool(&r->w, true);
        return 0;
    }
    emu_member *m = emu_member_get(c, user_id);
    emu_member before = m ? *m : (emu_member){.user_id = user_id, .status = EMU_M_LEFT};
    m = emu_member_set(c, user_id, EMU_M_MEMBER);
    if (m)
        emu_member_changed(r->e, c, r->b->u.id, &before, m, r->a);
    tg__jw_bool(&r->w, true);
    return 0;
}

int emu_h_approve_chat_join_request(emu_req *r)
{
    const tg_approve_chat_join_request_params *p = r->p;
    return join_request(r, &p->chat_id, p->user_id, true);
}

int emu_h_decline_chat_join_request(emu_req *r)
{
    const tg_decline_chat_join_request_params *p = r->p;
    return join_request(r, &p->chat_id, p->user_id, false);
}

int emu_h_set_chat_title(emu_req *r)
{
    const tg_set_chat_title_params *p = r->p;
    emu_chat *c = admin_chat(r, &p->chat_id, 1u << R_CHANGE_INFO);
    if (!c)
        return -1;
    if (strlen(p->title) > 128)
        return emu_fail(r, 400, "chat title is too long");
    char *t = tg__strdup(p->title);
    if (!t)
        return emu_fail(r, 500, "Internal Server Error: out of memory");
    tg__free(c->title);
    c->title = t;
    tg_message svc = {.from = emu_tg_user(&r->b->u, r->a), .new_chat_title = t};
    emu_msg_store(r->e, c, &svc, r->b->u.id, r->a);
    tg__jw_bool(&r->w, true);
    return 0;
}

int emu_h_set_chat_description(emu_req *r)
{
    const tg_set_chat_description_params *p = r->p;
    emu_chat *c = admin_chat(r, &p->chat_id, 1u << R_CHANGE_INFO);
    if (!c)
        return -1;
    if (p->description && strlen(p->description) > 255)
        return emu_fail(r, 400, "chat description is too long");
    tg__free(c->description);
    c->description = tg__strdup(p->description);
    emu_touch(r->e);
    tg__jw_bool(&r->w, true);
    return 0;
}

/* ---- commands ---- */

/* Canonical text of a scope (absent = default). */
static char *scope_key(const tg_bot_command_scope *s)
{
    if (s->kind == TG_BOT_COMMAND_SCOPE_NONE)
        return tg__strdup("{\"type\":\"default\"}");
    return emu_encode(&tg__t_bot_command_scope, s);
}

static emu_command_set *find_cmds(emu_bot *b, const char *scope, const char *lang)
{
    for (size_t i = 0; i < b->ncmds; i++)
        if (!strcmp(b->cmds[i].scope, scope) && !strcmp(b->cmds[i].lang, lang))
            return &b->cmds[i];
    return NULL;
}

static int check_lang(emu_req *r, const char *lang)
{
    if (lang && *lang && (strlen(lang) != 2 || lang[0] < 'a' || lang[0] > 'z'))
        return emu_fail(r, 400, "invalid language code specified");
    return 0;
}

static int check_commands(emu_req *r, const tg_set_my_commands_params *p)
{
    if (p->commands_count > 100)
        return emu_fail(r, 400, "BOT_COMMANDS_TOO_MUCH");
    for (size_t i = 0; i < p->commands_count; i++) {
        const char *c = p->commands[i].command;
        size_t n = strlen(c);
        if (n < 1 || n > 32 || strspn(c, "abcdefghijklmnopqrstuvwxyz0123456789_") != n)
            return emu_fail(r, 400, "BOT_COMMAND_INVALID");
        size_t d = strlen(p->commands[i].description);
        if (d < 1 || d > 256)
            return emu_fail(r, 400, "BOT_COMMAND_DESCRIPTION_INVALID");
    }
    return 0;
}

int emu_h_set_my_commands(emu_req *r)
{
    const tg_set_my_commands_params *p = r->p;
    const char *lang = p->language_code ? p->language_code : "";
    if (check_lang(r, lang) || check_commands(r, p))
        return -1;
    char *scope = scope_key(&p->scope);
    tg__buf b;
    tg__buf_init(&b, 0);
    tg__jw w;
    tg__jw_init(&w, &b);
    tg__jw_arr_begin(&w);
    for (size_t i = 0; i < p->commands_count; i++)
        tg__codec_encode(&tg__t_bot_command, &p->commands[i], &w, 0);
    tg__jw_arr_end(&w);
    emu_bot *bot = r->b;
    emu_command_set *s = scope ? find_cmds(bot, scope, lang) : NULL;
    if (!s && scope) {
        emu_command_set *n = tg__realloc(bot->cmds, (bot->ncmds + 1) * sizeof *n);
        if (n) {
            bot->cmds = n;
            s = &bot->cmds[bot->ncmds++];
            *s = (emu_command_set){tg__strdup(scope), tg__strdup(lang), NULL};
        }
    }
    if (!s || w.err) {
        tg__free(scope);
        tg__buf_cleanup(&b);
        return emu_fail(r, 500, "Internal Server Error: out of memory");
    }
    tg__free(s->json);
    s->json = tg__buf_detach(&b, NULL);
    tg__free(scope);
    emu_touch(r->e);
    tg__jw_bool(&r->w, true);
    return 0;
}

/* The command set of (scope, language) of get/deleteMyCommands (same parameters): 0 with
 * *out (NULL when none), or -1 after emu_fail. */
static int cmds_of(emu_req *r, const tg_bot_command_scope *scope, const char *language,
                   emu_command_set **out)
{
    const char *lang = language ? language : "";
    if (check_lang(r, lang))
        return -1;
    char *key = scope_key(scope);
    *out = key ? find_cmds(r->b, key, lang) : NULL;
    tg__free(key);
    return 0;
}

int emu_h_get_my_commands(emu_req *r)
{
    const tg_get_my_commands_params *p = r->p, none = {0};
    emu_command_set *s;
    if (cmds_of(r, p ? &p->scope : &none.scope, p ? p->language_code : NULL, &s))
        return -1;
    if (s)
        tg__jw_raw(&r->w, s->json, strlen(s->json));
    else
        tg__jw_raw(&r->w, "[]", 2);
    return 0;
}

int emu_h_delete_my_commands(emu_req *r)
{
    const tg_delete_my_commands_params *p = r->p, none = {0};
    emu_command_set *s;
    if (cmds_of(r, p ? &p->scope : &none.scope, p ? p->language_code : NULL, &s))
        return -1;
    if (s) {
        tg__free(s->scope);
        tg__free(s->lang);
        tg__free(s->json);
        *s = r->b->cmds[--r->b->ncmds];
    }
    tg__jw_bool(&r->w, true);
    return 0;
}
