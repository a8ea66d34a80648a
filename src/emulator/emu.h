/*
 * emu: tgbot-emulator's state and the functions its rooms share (internal).
 *
 * One emulator (struct emu) holds the whole world: bots, users, chats with their messages
 * and members, files, pending callback and inline queries, each bot's update queue and a
 * ring of recent events (API calls, updates) for the web chat's panel. Everything sits
 * behind one mutex (e->mu); the HTTP threads (libmicrohttpd, one per connection) take it for
 * the length of one request; long polls wait on e->cv, broadcast whenever anything changes.
 *
 * Messages are stored as the JSON of a Message encoded by libtgbot's generated codec;
 * changing one (edit, pin) decodes it, changes the struct and encodes it again, so what a bot
 * or the web page reads is always exactly the Bot API's type.
 *
 * Rooms: emu.c (lifecycle), form.c (pure body parsers), params.c (request -> params
 * struct), state.c (world), api.c (the Bot API request pipeline), methods.c (the one table
 * of emulated methods, handlers.h), api_msg.c / api_chat.c / api_media.c (the methods),
 * send.c (what sending methods share), webhook.c (webhook methods and delivery), control.c
 * (control API), server.c (HTTP), guard.c (who may use the web chat and control API),
 * markup.c (parse_mode), web.c (embedded page), webapp.c (Mini App initData), persist.c
 * (file). The public C test client (tgbot/testing.h) is src/testing/, outside the emulator.
 * Thread-safety: every emu_* function here expects e->mu held unless it says otherwise.
 */
#ifndef TGKIT_EMULATOR_EMU_H
#define TGKIT_EMULATOR_EMU_H

#include <pthread.h>
#include <time.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bot/api/api.gen.h"
#include "bot/json/json.h"
#include "core/arena.h"
#include "core/buf.h"
#include "emulator/form.h"

#define EMU_TEXT_MAX          4096               /* UTF-16 code units of a message text (Bot API) */
#define EMU_CAPTION_MAX       1024               /* caption */
#define EMU_CALLBACK_DATA_MAX 64                 /* bytes of callback_data */
#define EMU_UPLOAD_MAX        ((size_t)50 << 20) /* multipart upload limit (bytes) */
#define EMU_DOWNLOAD_MAX      ((size_t)20 << 20) /* getFile limit (bytes) */
#define EMU_EVENTS            512                /* events kept for the web panel */
#define EMU_POLL_MAX_S        50                 /* getUpdates timeout cap (seconds) */

enum emu_member_status {
    EMU_M_NONE = 0,
    EMU_M_OWNER,
    EMU_M_ADMIN,
    EMU_M_MEMBER,
    EMU_M_RESTRICTED,
    EMU_M_LEFT,
    EMU_M_BANNED,
};

/* Administrator rights and member permissions as bit sets (see api_chat.c for the order). */
typedef uint32_t emu_bits;

typedef struct emu_user {
    int64_t id;
    char *first_name, *last_name, *username, *language_code;
    bool is_bot;
} emu_user;

typedef struct emu_member {
    int64_t user_id;
    int status;      /* enum emu_member_status */
    emu_bits rights; /* administrators */
    emu_bits perms;  /* restricted members */
    int64_t until_date;
    char *custom_title;
} emu_member;

typedef struct emu_msg {
    int64_t id;
    int64_t sender_id; /* user or bot id; 0 for channel posts */
    char *json;        /* the Message, encoded by the codec */
    bool deleted;
} emu_msg;

typedef struct emu_chat {
    int64_t id;
    int32_t type; /* TG_CHAT_TYPE_* */
    char *title, *username, *description;
    int64_t bot_id, user_id; /* private chats: the bot and the user */
    emu_msg *msgs;
    size_t nmsgs, capmsgs;
    int64_t next_msg_id;
    emu_member *members;
    size_t nmembers, capmembers;
    int64_t *pins;
    size_t npins, cappins;
    emu_bits default_perms;
    char *reply_kb;     /* the ReplyKeyboardMarkup shown to users, or NULL */
    bool blocked;       /* private chats: the user blocked the bot */
    int64_t migrate_to; /* a group upgraded to a supergroup */
    int64_t *join_reqs; /* users waiting for approval */
    size_t njoin, capjoin;
    uint64_t version;   /* bumped on every change, for the web page */
    double rate_tokens; /* rate limits: messages the bot may still send now */
    int64_t rate_ms;    /* when rate_tokens was last refilled (monotonic ms) */
} emu_chat;

typedef struct emu_update {
    int64_t id;
    int32_t type; /* TG_UPDATE_TYPE_* */
    char *json;   /* the Update, encoded by the codec */
} emu_update;

typedef struct emu_command_set {
    char *scope; /* canonical JSON of the scope ("{\"type\":\"default\"}") */
    char *lang;  /* "" = all languages */
    char *json;  /* the commands array */
} emu_command_set;

typedef struct emu_webhook {
    char *url;
    char *secret;
    int64_t max_connections;
    int64_t last_error_date;
    char *last_error_message;
    int64_t next_try_ms; /* monotonic ms of the next delivery attempt */
    uint32_t failures;
} emu_webhook;

typedef struct emu_bot {
    emu_user u;
    char *token;
    emu_update *q;
    size_t nq, capq;
    int64_t next_update_id;
    uint64_t allowed;  /* bit per TG_UPDATE_TYPE_* */
    uint64_t poll_gen; /* a newer getUpdates ends an older one with 409 */
    emu_webhook hook;
    emu_command_set *cmds;
    size_t ncmds, capcmds;
    char *description, *short_description, *name;
    int64_t rate_window_ms; /* rate limits: start of the current one-second window */
    uint32_t rate_count;
} emu_bot;

/* A file's id is random (unguessable) and, as on Telegram where file ids are per bot, only
 * the bots that have been shown it may use it: the uploader and every bot an update or an
 * answer carrying it went to (emu_files_seen). The web chat (/control/file) sees them all. */
typedef struct emu_file {
    char *file_id, *unique_id, *path; /* path: "documents/file_3.txt" */
    char *data;
    size_t len;
    char *name, *mime;
    int64_t *bots; /* the bots that may use file_id */
    size_t nbots, capbots;
    bool any_bot; /* from a state file of before per-bot ids: every bot may */
} emu_file;

typedef struct emu_query {
    char *id;
    int64_t bot_id, user_id, chat_id, message_id;
    bool inline_query; /* else a callback query */
    char *query;       /* inline: the text; callback: the data */
    bool answered;
    char *answer; /* callback: {"text":..,"show_alert":..,"url":..}; inline: results */
} emu_query;

typedef struct emu_event {
    uint64_t seq;
    int64_t date;
    int64_t bot_id;
    char kind[8]; /* "call" or "update" */
    char *json;
} emu_event;

typedef struct emu_options {
    const char *host;       /* NULL = 127.0.0.1 */
    uint16_t port;          /* 0 = a free port */
    bool rate_limits;       /* 429 when Telegram's limits are exceeded */
    bool strict_tokens;     /* only bots added with emu_bot_add (or --bot) */
    const char *state_file; /* load at start when it exists, save at stop */
    uint32_t max_wait_ms;   /* cap on every wait (long polls, wait_ms); 0 = 50 s */
} emu_options;

typedef struct emu {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stopping;
    emu_options o;
    char *host, *state_file;
    emu_bot **bots;
    size_t nbots, capbots;
    emu_user **users;
    size_t nusers, capusers;
    emu_chat **chats;
    size_t nchats, capchats;
    emu_file **files;
    size_t nfiles, capfiles;
    emu_query **queries;
    size_t nqueries, capqueries;
    emu_event events[EMU_EVENTS];
    uint64_t seq;     /* last event number */
    uint64_t version; /* bumped on every change */
    int64_t next_user_id, next_group_id, next_query_id, next_file_id;
    void *http; /* struct MHD_Daemon */
    uint16_t port;
    pthread_t hook_thread;
    bool hook_started;
} emu;

/* ---- lifecycle (emu.c); these take the lock themselves ---- */
emu *emu_new(const emu_options *o, char *err, size_t errcap);
int emu_start(emu *e, char *err, size_t errcap); /* HTTP server + webhook thread */
void emu_free(emu *e);                           /* stops, saves state when asked; NULL-safe */

/* ---- world (state.c) ---- */
/* Absolute CLOCK_REALTIME deadline ms from now, capped by the options' max_wait_ms. */
struct timespec emu_deadline(const emu *e, int64_t ms);
void emu_touch(emu *e); /* version++ and wake every waiter */
int64_t emu_now(void);  /* unix seconds */
bool emu_token_ok(const char *token);
emu_bot *emu_bot_get(emu *e, const char *token, bool create);
emu_bot *emu_bot_by_id(emu *e, int64_t id);
emu_bot *emu_bot_add(emu *e, const char *token, const char *username, const char *name);
emu_user *emu_user_get(emu *e, int64_t id); /* users and bots */
emu_user *emu_user_add(emu *e, int64_t id, const char *first, const char *last,
                       const char *username, const char *lang);
emu_chat *emu_chat_get(emu *e, int64_t id, int64_t bot_id);
emu_chat *emu_chat_by_username(emu *e, const char *username);
emu_chat *emu_chat_private(emu *e, emu_bot *b, emu_user *u); /* found or made */
emu_chat *emu_chat_add(emu *e, int32_t type, const char *title, const char *username);
emu_member *emu_member_get(emu_chat *c, int64_t user_id);
emu_member *emu_member_set(emu_chat *c, int64_t user_id, int status);
bool emu_member_in(const emu_member *m);       /* owner, admin, member, restricted-and-in */
emu_msg *emu_msg_get(emu_chat *c, int64_t id); /* NULL when absent or deleted */
emu_file *emu_file_get(emu *e, const char *file_id);
emu_file *emu_file_by_path(emu *e, const char *path);
emu_file *emu_file_add(emu *e, const char *data, size_t len, const char *name, const char *mime,
                       const char *dir);
void emu_file_free(emu_file *f); /* NULL-safe */
/* file_id as bot_id may use it: the file, or NULL when unknown or not shown to that bot. */
emu_file *emu_file_for_bot(emu *e, const char *file_id, int64_t bot_id);
int emu_file_grant(emu_file *f, int64_t bot_id); /* 0 or -1 (out of memory) */
/* Grant bot_id every file whose "file_id" appears in json (an update or an answer). */
void emu_files_seen(emu *e, int64_t bot_id, const char *json);
emu_query *emu_query_get(emu *e, const char *id);
emu_query *emu_query_add(emu *e, bool inline_query, int64_t bot, int64_t user, int64_t chat,
                         int64_t msg, const char *q);
void emu_event_add(emu *e, int64_t bot_id, const char *kind, const char *json);
/* The first string token (key or value) of d whose text holds U+0000 (a \u0000 escape), or
 * UINT32_MAX. The emulator keeps NUL-terminated strings, so the control API and the state
 * loader refuse such a string instead of cutting it there. */
uint32_t emu_json_find_nul(const tg__jdoc *d);

/* Codec-made values, in arena a. */
tg_user *emu_tg_user(const emu_user *u, tg__arena *a);
tg_chat *emu_tg_chat(emu *e, const emu_chat *c, tg__arena *a);
tg_message *emu_msg_decode(const emu_msg *m, tg__arena *a); /* NULL on failure */
/* Encode v of type t into a fresh tg__strdup'ed string (NULL on failure). */
char *emu_encode(const tg__type *t, const void *v);

/* Store m (message_id, date and chat are filled here) as the next message of c. */
emu_msg *emu_msg_store(emu *e, emu_chat *c, tg_message *m, int64_t sender_id, tg__arena *a);
/* Replace the stored JSON of s by m. 0 or -1. */
int emu_msg_replace(emu_msg *s, const tg_message *m);

/* Queue an update of kind type for bot b (value filled at the right field of u). */
void emu_update_push(emu *e, emu_bot *b, int32_t type, tg_update *u);
/* Deliver a new message (or an edit) in c to every bot there except sender_id. */
void emu_deliver_msg(emu *e, emu_chat *c, const tg_message *m, int64_t sender_id, bool edited,
                     tg__arena *a);
/* The ChatMember of m (api_chat.c). */
tg_chat_member emu_tg_member(emu *e, const emu_member *m, tg__arena *a);
/* A member of c changed from before to after by actor: chat_member updates for the bots
 * administering c, my_chat_member for a bot that is the member (api_chat.c). */
void emu_member_changed(emu *e, emu_chat *c, int64_t actor, const emu_member *before,
                        const emu_member *after, tg__arena *a);
/* Drop updates below offset. */
void emu_updates_confirm(emu_bot *b, int64_t offset);

/* ---- persistence (persist.c) ---- */
/* Write the world (bots, commands, users, chats, members, pins, messages, files) to path as
 * JSON (tg__atomic_write: a private temporary and a rename; a new file is 0600, an existing
 * one keeps its mode, a symbolic link at path is refused). 0, or -1 with err set. */
int emu_state_save(emu *e, const char *path, char *err, size_t errcap);
/* Add the world saved in json[0..len) to e (normally fresh). 0, or -1 with err naming the
 * path of the problem. */
int emu_state_load_json(emu *e, const char *json, size_t len, char *err, size_t errcap);
int emu_state_load(emu *e, const char *path, char *err, size_t errcap);

/* ---- parse_mode (markup.c): pure ---- */
/* Turn HTML or MarkdownV2 text into plain text + entities (arena a). 0, or -1 with err set
 * to Telegram's description ("can't parse entities: ..."). */
int emu_markup_parse(int32_t mode, const char *in, tg__arena *a, char **text,
                     tg_message_entity **ents, size_t *nents, char *err, size_t errcap);
/* Entities found in plain text as Telegram finds them (bot_command, mention, url, hashtag,
 * email): appended to *ents. */
int emu_auto_entities(const char *text, tg__arena *a, tg_message_entity **ents, size_t *nents);
/* Length in UTF-16 code units. */
size_t emu_utf16_len(const char *s, size_t n);
/* A link a bot gives (text_link url, button url) checked as Telegram checks it: NULL and
 * *out the link as Telegram keeps it (a scheme-less one gets "http://", in arena a), or
 * Telegram's reason ("Unsupported URL protocol", "URL host is empty", ...). */
const char *emu_link_check(const char *url, tg__arena *a, const char **out);
/* Every text_link of ents[0..n) through emu_link_check (urls replaced by their checked
 * form). 0, or -1 with err = "entity URL '...' is invalid: REASON". */
int emu_links_check(tg_message_entity *ents, size_t n, tg__arena *a, char *err, size_t errcap);
/* Every URL button of kb the same way (-1 with err = "inline keyboard button URL '...' is
 * invalid: REASON"). kb and its rows must be the caller's to change (an arena's). */
int emu_kb_links_check(tg_inline_keyboard_markup *kb, tg__arena *a, char *err, size_t errcap);

#endif
