/*
 * tgbot/dispatch.h: the framework layer of libtgbot: router, filters, middleware, handler
 * context, conversations, conversation storage and the dispatcher (worker pool).
 *
 * The pieces:
 *  - tg_router: handlers matched by update kind, command, text pattern, callback data and
 *    composable filters; middleware before/after; groups (at most one handler per group runs,
 *    groups run in ascending order); an error handler. Built once, then read-only: one router
 *    may serve any number of threads.
 *  - tg_dispatcher: a worker pool in front of a router. Updates of one chat run in order,
 *    different chats in parallel. Feed it raw update JSON yourself, or let long polling /
 *    the webhook server (tgbot/updates.h) do it. In loop mode (.async) it runs the router
 *    on an event loop's thread instead, with no thread of its own (see "the dispatcher on
 *    an event loop" below).
 *  - tg_hctx: what a handler gets: the routed view of the update (tg_event), its own tg_ctx
 *    (whose arena is reset after every handler), reply/answer/edit shortcuts, regex captures,
 *    command arguments and the conversation of this (chat, user).
 *  - tg_storage: get/set/delete with a TTL; a memory store and a Redis store are provided,
 *    and any other can be plugged in.
 *
 * Thread-safety: routers and filters are built by one thread before the dispatcher starts
 * and never changed afterwards. A tg_hctx belongs to the worker running the handler. Storage
 * implementations must be thread-safe (both provided ones are).
 */
#ifndef TGBOT_DISPATCH_H
#define TGBOT_DISPATCH_H

#include "tgbot/api.h"
#include "tgbot/common.h"
#include "tgbot/storage.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_bot tg_bot;
typedef struct tg_ctx tg_ctx;
typedef struct tg_update tg_update; /* tgbot/api.h */

/* ---- update kinds: one per optional field of the Bot API Update object ---- */

/* Generated (tgbot/api.h, TG_UPDATE_KIND_LIST, from the page's update types): the kinds
 * follow the page's order, and kind k is the update type TG_UPDATE_TYPE_* numbered k + 1. */
#define TG_UPDATE_KINDS(X) TG_UPDATE_KIND_LIST(X)
/* The kind of a TG_UPDATE_TYPE_* id, and back. */
#define TG_UPDATE_KIND_OF_TYPE(type_id) ((tg_update_kind)((type_id)-1))
#define TG_UPDATE_TYPE_OF_KIND(kind)    ((int32_t)(kind) + 1)

typedef enum tg_update_kind {
    TG_UPDATE_UNKNOWN = 0, /* a field this library does not know yet (kept in kind_name) */
#define TG__KIND_ENUM(id, name) TG_UPDATE_##id,
    TG_UPDATE_KINDS(TG__KIND_ENUM)
#undef TG__KIND_ENUM
        TG_UPDATE_KIND_COUNT
} tg_update_kind;

#define TG_KIND_BIT(k) (UINT64_C(1) << (k))
/* Message-like kinds: message, edited_message, channel_post, edited_channel_post,
 * business_message, edited_business_message, guest_message. */
#define TG_KINDS_MESSAGES                                                                          \
    (TG_KIND_BIT(TG_UPDATE_MESSAGE) | TG_KIND_BIT(TG_UPDATE_EDITED_MESSAGE) |                      \
     TG_KIND_BIT(TG_UPDATE_CHANNEL_POST) | TG_KIND_BIT(TG_UPDATE_EDITED_CHANNEL_POST) |            \
     TG_KIND_BIT(TG_UPDATE_BUSINESS_MESSAGE) | TG_KIND_BIT(TG_UPDATE_EDITED_BUSINESS_MESSAGE) |    \
     TG_KIND_BIT(TG_UPDATE_GUEST_MESSAGE))

/* "message", "callback_query", ...; "unknown" for TG_UPDATE_UNKNOWN. Static. */
TG_API const char *tg_update_kind_name(tg_update_kind k);
/* The kind of an Update field name; TG_UPDATE_UNKNOWN if it is not one. */
TG_API tg_update_kind tg_update_kind_parse(const char *name, size_t len);

/*
 * The routed view of one update: the fields routing and the shortcuts need, extracted in one
 * pass over the JSON. Strings are NUL-terminated, decoded, and live as long as the handler
 * context (NULL when absent). The full update stays available as JSON.
 */
typedef struct tg_event {
    int64_t update_id;
    tg_update_kind kind;
    const char *kind_name; /* the Update field, also for unknown kinds */
    bool has_chat;
    int64_t chat_id;       /* the chat the update belongs to (callbacks: its message's) */
    const char *chat_type; /* "private", "group", "supergroup", "channel" or NULL */
    bool has_user;
    int64_t user_id;               /* from.id, or user.id (reactions, poll answers, boosts...) */
    const char *username;          /* from.username or NULL */
    int64_t message_id;            /* the message (callbacks: the message with the button); 0 */
    const char *text;              /* message text, else caption; NULL */
    const char *data;              /* callback_query.data */
    const char *query;             /* inline_query.query */
    const char *id;                /* id of a callback/inline/shipping/pre-checkout query */
    const char *inline_message_id; /* callback on an inline message */
    const char *business_connection_id; /* business messages and callbacks */
    /* Commands: text starting with '/'. command excludes the '/' and any "@botname". */
    const char *command; /* NULL when the text is not a command */
    size_t command_len;
    const char *command_args; /* text after the command and its spaces; "" if none */
    bool command_for_me;      /* no @mention, or the mention is this bot (case-insensitive) */
    const char *json;         /* the whole update as received (not NUL-terminated) */
    size_t json_len;
    const char *language_code; /* the user's interface language (from.language_code); NULL */
} tg_event;

/* ---- handler context ---- */

typedef struct tg_hctx tg_hctx;

/* A handler. Return TG_OK, or an error status: the router's error handler sees it (with
 * tg_hctx_errmsg()) and the dispatcher goes on with the next update. */
typedef tg_status (*tg_handler_fn)(tg_hctx *h, void *user);

TG_API const tg_event *tg_hctx_event(const tg_hctx *h);
/* The whole Update as the generated types of tgbot/api.h, decoded on first call into the
 * handler's scratch memory (routing never pays for it). NULL when it does not decode (a
 * malformed field): tg_hctx_errmsg() then says where. Valid until the handler returns. */
TG_API const tg_update *tg_hctx_update(tg_hctx *h);
/* The worker's ctx for API calls (NULL when the dispatcher has no bot). Its arena is reset
 * after every handler: copy what must outlive the update. */
TG_API tg_ctx *tg_hctx_ctx(tg_hctx *h);
/* Scratch memory that lives until the handler returns (NULL on out of memory). */
TG_API void *tg_hctx_alloc(tg_hctx *h, size_t n);
/* Regex captures of the matching text or callback filter: i = 0 is the whole match.
 * NULL if there is no such group; *len (optional) gets the length. Valid during the handler. */
TG_API const char *tg_hctx_capture(const tg_hctx *h, unsigned i, size_t *len);
TG_API unsigned tg_hctx_ncaptures(const tg_hctx *h);
/* Command arguments split at spaces (a quoted "a b" stays one argument). */
TG_API unsigned tg_hctx_argc(tg_hctx *h);
TG_API const char *tg_hctx_arg(tg_hctx *h, unsigned i); /* NULL past the end */
/* The /start deep-link payload ("/start abc" -> "abc"); NULL when none. */
TG_API const char *tg_hctx_payload(const tg_hctx *h);
/* Record why a handler fails (shown to the error handler). printf-style. */
TG_API tg_status tg_hctx_fail(tg_hctx *h, tg_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The last error of this handler: tg_hctx_fail, a failed shortcut or tg_hctx_call, a failed
 * decode. "" when none, and again once a later shortcut or tg_hctx_call succeeds. */
TG_API const char *tg_hctx_errmsg(const tg_hctx *h);
/* Worker number (0..workers-1) running this handler. */
TG_API unsigned tg_hctx_worker(const tg_hctx *h);

/*
 * Shortcuts (they need a bot; TG_ERR_INVALID without one or when the update has no such
 * target). text is borrowed for the call. The one place for their errors is
 * tg_hctx_errmsg(): it holds the last failure of a shortcut or tg_hctx_call (a call's
 * message is tg_ctx_errmsg's, copied) and is cleared when a later one succeeds.
 *  tg_reply          sendMessage to the update's chat, replying to its message
 *  tg_send           sendMessage to the update's chat (no reply)
 *  tg_answer         answerCallbackQuery (text may be NULL) for callback queries
 *  tg_edit           editMessageText of the callback query's message (chat or inline
 *                    message); refused (TG_ERR_INVALID) for any other update, whose message
 *                    is the user's, not the bot's
 */
TG_API tg_status tg_reply(tg_hctx *h, const char *text);
TG_API tg_status tg_send(tg_hctx *h, const char *text);
/* Like tg_send with extra members for the sendMessage object, e.g.
 * "\"reply_markup\":{...}" (a JSON fragment without braces; NULL = none). */
TG_API tg_status tg_send_ex(tg_hctx *h, const char *text, const char *extra_json);
TG_API tg_status tg_answer(tg_hctx *h, const char *text);
TG_API tg_status tg_edit(tg_hctx *h, const char *text, const char *extra_json);
/*
 * The same with formatted text (tgbot/text.h: entities, no parse_mode or escaping) and a
 * keyboard in one call:
 *   tg_reply_text(h, t, TG_INLINE_MARKUP(TG_INLINE_ROW(TG_BUTTON_CALLBACK("Yes", "y"))));
 *   tg_send_text(h, t, (tg_reply_markup){0});         no keyboard
 *   tg_edit_text(h, t, TG_INLINE_KEYBOARD(...));      the callback's message; NULL: none
 * t is borrowed for the call. A keyboard refused by its check fails the call with the
 * keyboard's own reason in tg_hctx_errmsg ("... row 1, button 2 ("Big"): callback_data is
 * 100 bytes; Telegram allows 1 to 64"), nothing sent.
 */
typedef struct tg_text tg_text;
TG_API tg_status tg_send_text(tg_hctx *h, const tg_text *t, tg_reply_markup markup);
TG_API tg_status tg_reply_text(tg_hctx *h, const tg_text *t, tg_reply_markup markup);
TG_API tg_status tg_edit_text(tg_hctx *h, const tg_text *t, const tg_inline_keyboard_markup *kb);
/*
 * Answer a webhook update with a method call in the HTTP response body (Telegram runs it;
 * saves one request, but its result and any error are never seen). Only for updates from a
 * webhook with reply_wait_ms > 0 whose handler finishes within that time; otherwise
 * TG_ERR_INVALID (use tg_hctx_call). json_params is a JSON object ("{...}"), copied; a later
 * call replaces an earlier one.
 */
TG_API tg_status tg_hctx_respond(tg_hctx *h, const char *method, const char *json_params);
/* Call method with a JSON object of parameters (tg_call_raw on the handler's ctx). */
TG_API tg_status tg_hctx_call(tg_hctx *h, const char *method, const char *json_params,
                              const char **result_json, size_t *result_len);

/* ---- conversations (per chat and user) ---- */

/*
 * The conversation of the update's (chat, user): a named state plus a blob of data, kept in
 * the dispatcher's storage. Without a chat or user there is none (state NULL, enter fails).
 * A conversation with a timeout ends when it is not touched for that long; the next update
 * of that (chat, user) then runs the timeout handler first (tg_dispatcher_options).
 */
TG_API const char *tg_conv_state(const tg_hctx *h); /* NULL when none */
TG_API const void *tg_conv_data(const tg_hctx *h, size_t *len);
/* Enter state (1..64 bytes of [A-Za-z0-9_.:-]) with data (copied; NULL/0 = empty). Stored at
 * once; TG_ERR_TOO_BIG beyond conv_max_bytes, TG_ERR_INVALID for a bad state name. */
TG_API tg_status tg_conv_set(tg_hctx *h, const char *state, const void *data, size_t len);
TG_API tg_status tg_conv_end(tg_hctx *h);

/*
 * Typed fields: strings and integers by name, kept in the conversation's data instead of a
 * blob the handler packs itself. Every setter stores at once (one storage write, as
 * tg_conv_set), keeps the state and the other fields, and needs a conversation: enter a
 * state first (tg_conv_enter or tg_conv_set). Names are 1..64 bytes of [A-Za-z0-9_.:-];
 * strings may hold any bytes but NUL. The fields share conv_max_bytes with the state
 * (about 8 bytes of overhead per field). Fields and tg_conv_set's blob are two views of one
 * data: tg_conv_set with data replaces the fields, and a field setter refuses data that is
 * a blob (TG_ERR_INVALID).
 *
 *   tg_conv_enter(h, "ask_size");            on /order
 *   tg_conv_set_str(h, "size", text);        in state ask_size
 *   tg_conv_set_int(h, "qty", 2);
 *   tg_conv_get_str(h, "size");              in a later update: "large"
 *
 * Returned strings live until the handler returns. Getters return NULL / false when there
 * is no conversation, no such field, or a field of the other type.
 */
/* Move to state keeping the data (fields); starts an empty conversation if there is none. */
TG_API tg_status tg_conv_enter(tg_hctx *h, const char *state);
TG_API tg_status tg_conv_set_str(tg_hctx *h, const char *name, const char *value);
TG_API tg_status tg_conv_set_int(tg_hctx *h, const char *name, int64_t value);
TG_API tg_status tg_conv_unset(tg_hctx *h, const char *name); /* TG_OK also when absent */
TG_API const char *tg_conv_get_str(const tg_hctx *h, const char *name);
TG_API bool tg_conv_get_int(const tg_hctx *h, const char *name, int64_t *out);

/* ---- sessions: per-user and per-chat data ---- */

/*
 * Data a bot keeps about a user (across every chat) and about a chat (for every user in
 * it), beside conversations and with no state machine: settings, counters, a language, a
 * cart. Named, typed fields (strings and integers), kept in the dispatcher's storage
 * (memory, SQLite, Redis: tgbot/storage.h) under "<session_prefix>u<user id>" and
 * "<session_prefix>c<chat id>".
 *
 *   tg_data *u = tg_hctx_user_data(h);
 *   int64_t visits = tg_data_get_int(u, "visits", 0);
 *   tg_data_set_int(u, "visits", visits + 1);
 *   tg_data_set_str(tg_hctx_chat_data(h), "lang", "de");
 *
 * Loaded on first use in an update (an update that never asks costs no storage round
 * trip), changed in the handler's memory, and written back once after the update's
 * handlers and middleware ran, only when a field changed (setting a field to the value it
 * has is no change): one storage set per scope, or a delete when no field is left. A
 * write-back that fails is an error of the update (the error handler sees it). Changes are
 * written back also when a handler returned an error.
 *
 * Ordering: a chat's updates run one at a time (per process), so chat data never loses a
 * change. User data of a user active in two chats at once may: the later write-back wins.
 *
 * tg_hctx_user_data is NULL when the update has no user, tg_hctx_chat_data when it has no
 * chat; both are NULL when the storage failed or holds something else under the key
 * (tg_hctx_errmsg() says which). Getters and setters take NULL and then return the default
 * / TG_ERR_INVALID, so a chain of calls needs one check. Names are 1..64 bytes of
 * [A-Za-z0-9_.:-]; strings may hold any bytes but NUL; a scope holds at most
 * session_max_bytes (tg_dispatcher_options; about 8 bytes of overhead per field).
 * Returned strings live until the handler returns. A tg_data belongs to the handler's
 * update: never keep it.
 */
typedef struct tg_data tg_data;

TG_API tg_data *tg_hctx_user_data(tg_hctx *h);
TG_API tg_data *tg_hctx_chat_data(tg_hctx *h);
/* NULL when absent or an integer field. */
TG_API const char *tg_data_get_str(const tg_data *d, const char *name);
/* dflt when absent or a string field. */
TG_API int64_t tg_data_get_int(const tg_data *d, const char *name, int64_t dflt);
TG_API bool tg_data_has(const tg_data *d, const char *name);
TG_API tg_status tg_data_set_str(tg_data *d, const char *name, const char *value);
TG_API tg_status tg_data_set_int(tg_data *d, const char *name, int64_t value);
TG_API tg_status tg_data_unset(tg_data *d, const char *name); /* TG_OK also when absent */
/* Remove every field (the stored record is deleted at write-back). */
TG_API tg_status tg_data_clear(tg_data *d);
/* Call fn for each field in stored order (value as text: integers in decimal); for
 * listing and export. is_int says which setter made it. */
typedef void (*tg_data_each_fn)(void *user, const char *name, const char *value, bool is_int);
TG_API void tg_data_each(const tg_data *d, tg_data_each_fn fn, void *user);

/* ---- callback data of any size ---- */

/*
 * Telegram carries at most 64 bytes of callback_data per button. tg_hctx_callback_put
 * keeps data of any size (any bytes) in the dispatcher's storage and returns what to put
 * in the button instead: the data itself when it fits and is plain text, else a token of
 * 17 characters ("~" and 16 of base64url). When that button is pressed, the dispatcher
 * swaps the token back before routing, so tg_hctx_event(h)->data, the callback filters and
 * tg_hctx_callback_data see the original data:
 *
 *   char data[200];
 *   snprintf(data, sizeof data, "order:%s:%s", long_product_id, options);
 *   TG_BUTTON_CALLBACK("Buy", tg_hctx_callback_put(h, data, strlen(data)))
 *   ...
 *   tg_router_on_callback(r, "order:", on_buy, NULL);     matches the swapped-back data
 *
 * Stored data expires after callback_ttl_ms (48 hours); each process also keeps at most
 * callback_max_entries of its own (100,000), dropping the least recently put or pressed.
 * A press whose data has expired or was dropped keeps the token as its data, and
 * tg_hctx_callback_lost(h) says so (answer "this menu has expired").
 * Returns NULL on failure (too big, storage error: tg_hctx_errmsg says why); the string
 * lives until the handler returns.
 */
TG_API const char *tg_hctx_callback_put(tg_hctx *h, const void *data, size_t len);
/* The pressed button's data (swapped back when it was stored) and its length; NULL when
 * the update is not a callback query with data. */
TG_API const void *tg_hctx_callback_data(const tg_hctx *h, size_t *len);
/* The pressed button carried a token whose data is gone (expired or dropped). */
TG_API bool tg_hctx_callback_lost(const tg_hctx *h);

/* ---- filters ---- */

typedef struct tg_filter tg_filter;
typedef bool (*tg_filter_fn)(const tg_hctx *h, void *user);

/*
 * Filters are values: a constructor returns a new filter (NULL on out of memory or a bad
 * regex; tg_filter_errmsg() says why), combinators take ownership of their operands (a NULL
 * operand makes them free the other and return NULL), and the router takes ownership of the
 * filter it is given. Strings are copied.
 */
TG_API tg_filter *tg_filter_kind(tg_update_kind kind);
TG_API tg_filter *tg_filter_kinds(uint64_t mask); /* TG_KIND_BIT(...) | ... */
/* A command ("start", without '/') addressed to this bot, in any message-like update. */
TG_API tg_filter *tg_filter_command(const char *name);
/* PCRE2 pattern on the text (message text or caption); captures reach the handler. */
TG_API tg_filter *tg_filter_regex(const char *pattern);
TG_API tg_filter *tg_filter_text(const char *exact);
TG_API tg_filter *tg_filter_callback_prefix(const char *prefix);
TG_API tg_filter *tg_filter_callback_regex(const char *pattern);
TG_API tg_filter *tg_filter_inline_prefix(const char *prefix); /* inline_query.query */
TG_API tg_filter *tg_filter_chat_type(const char *type);       /* "private", ... */
TG_API tg_filter *tg_filter_chat(int64_t chat_id);
TG_API tg_filter *tg_filter_user(int64_t user_id);
/* The conversation is in state (NULL = there is no conversation; "*" = any state). */
TG_API tg_filter *tg_filter_state(const char *state);
TG_API tg_filter *tg_filter_fn_new(tg_filter_fn fn, void *user);
TG_API tg_filter *tg_filter_and(tg_filter *a, tg_filter *b);
TG_API tg_filter *tg_filter_or(tg_filter *a, tg_filter *b);
TG_API tg_filter *tg_filter_not(tg_filter *a);
TG_API void tg_filter_free(tg_filter *f); /* NULL-safe */
/* Why the last constructor on this thread returned NULL ("" otherwise). */
TG_API const char *tg_filter_errmsg(void);
/* Evaluate f for h (for custom filters composing others). */
TG_API bool tg_filter_match(const tg_filter *f, tg_hctx *h);

/* ---- router ---- */

typedef struct tg_router tg_router;

typedef enum tg_next { TG_NEXT = 0, TG_STOP = 1 } tg_next;
/* Runs before matching, for every update a handler could see: the conversation's cancel
 * command (on_cancel) and the update that notices a timeout (on_timeout) included.
 * TG_STOP ends the update there (no handler, no on_cancel/on_timeout, no later middleware). */
typedef tg_next (*tg_before_fn)(tg_hctx *h, void *user);
/* Runs after the handler (or when none matched: st = TG_OK, handled = false; after
 * on_cancel: handled = true). */
typedef void (*tg_after_fn)(tg_hctx *h, tg_status st, bool handled, void *user);
/* Called when a handler returns an error. */
typedef void (*tg_error_fn)(tg_hctx *h, tg_status st, const char *errmsg, void *user);

TG_API tg_router *tg_router_new(void);
TG_API void tg_router_free(tg_router *r); /* NULL-safe */
/* The bot's username (without '@') for "/cmd@botname"; copied. Without it, commands with a
 * mention are taken as addressed to this bot. The dispatcher sets it from getMe when empty. */
TG_API tg_status tg_router_set_username(tg_router *r, const char *username);
/*
 * Add a handler to group (any int; groups run in ascending order, and in each group the
 * first handler whose filter matches runs). filter is owned by the router from now on (NULL
 * filter: TG_ERR_INVALID, e.g. a constructor failed). Handlers keep registration order.
 * A handler that returns an error ends the update: later groups do not run, the error
 * handler does.
 */
TG_API tg_status tg_router_add(tg_router *r, int group, tg_filter *filter, tg_handler_fn fn,
                               void *user);
/* Shortcuts into group 0. */
TG_API tg_status tg_router_on_kind(tg_router *r, tg_update_kind kind, tg_handler_fn fn, void *user);
TG_API tg_status tg_router_on_command(tg_router *r, const char *name, tg_handler_fn fn, void *user);
TG_API tg_status tg_router_on_text(tg_router *r, const char *pattern, tg_handler_fn fn, void *user);
TG_API tg_status tg_router_on_callback(tg_router *r, const char *prefix, tg_handler_fn fn,
                                       void *user);
/* Middleware, run in the order added (after: in reverse). Either function may be NULL. */
TG_API tg_status tg_router_use(tg_router *r, tg_before_fn before, tg_after_fn after, void *user);
TG_API void tg_router_on_error(tg_router *r, tg_error_fn fn, void *user);
/* Why the last tg_router_* call failed ("" otherwise). */
TG_API const char *tg_router_errmsg(const tg_router *r);

/* ---- anti-spam: an inbound rate limit as middleware ---- */

typedef enum tg_limit_key {
    TG_LIMIT_USER = 0, /* count each user's updates (in every chat together) */
    TG_LIMIT_CHAT = 1, /* count each chat's updates (every user together) */
} tg_limit_key;

typedef struct tg_limiter_options {
    tg_limit_key key;
    uint32_t limit;     /* updates let through per window and key; 0 = 5 */
    uint64_t window_ms; /* 0 = 10000 */
    const char *reply;  /* NULL: drop the rest silently; else send this (copied) to the chat
                           once per window, when the limit is first passed */
    size_t max_keys;    /* keys tracked at most; 0 = 100000 (past it, new keys pass) */
    uint64_t (*clock_ms)(void *clock_user); /* tests: monotonic ms; NULL = the real clock */
    void *clock_user;
} tg_limiter_options;

/*
 * Add a limiter (grammY's ratelimiter) as middleware: per user or chat, at most limit
 * updates per window_ms run; the rest stop before any handler (TG_STOP), and with reply set
 * the chat is told once per window. Updates without the key (no user, no chat) pass.
 * Windows are fixed (they start at the key's first update after the last one ended).
 * Add it before other middleware so a flood costs nothing else. The router owns it.
 * Counts are per process (a fleet of workers limits per worker). Thread-safe.
 */
TG_API tg_status tg_router_use_limiter_sized(tg_router *r, const tg_limiter_options *opts,
                                             size_t opts_size);
#define tg_router_use_limiter(r, ...)                                                              \
    tg_router_use_limiter_sized((r), (__VA_ARGS__), sizeof(tg_limiter_options))

/* ---- the command menu ---- */

typedef struct tg_bot_command_scope tg_bot_command_scope; /* tgbot/api.h */

/*
 * The router knows the bot's commands and publishes them as the client's command menu
 * (setMyCommands): register a handler and describe it in one call, add translations, then
 * publish once at start-up.
 *
 *   tg_router_command(r, "start", "Start over", on_start, NULL);
 *   tg_router_command(r, "order", "Order a pizza", on_order, NULL);
 *   tg_router_describe_command(r, "order", "de", "Pizza bestellen");
 *   tg_router_publish_all_commands(r, ctx, NULL);   default list plus a "de" list
 *
 * Names are 1..32 of [a-z0-9_] (Telegram's rule; no '/'), descriptions 1..256 characters
 * (UTF-8, counted in UTF-16 units), at most 100 commands per list. Strings are copied.
 * Commands added with tg_router_on_command have no description and stay off the menu.
 * Thread-safety: describe while building the router; publishing reads it (any thread, one
 * ctx per thread).
 */
TG_API tg_status tg_router_command(tg_router *r, const char *name, const char *description,
                                   tg_handler_fn fn, void *user);
/* Describe a command for the menu: lang NULL = the default description, else an IETF
 * language code ("de", "pt-br") for users with that interface language. The command need
 * not have a handler in this router (e.g. handled by another process). */
TG_API tg_status tg_router_describe_command(tg_router *r, const char *name, const char *lang,
                                            const char *description);
/* Limit a command to scopes: a mask of TG_SCOPE_BIT(TG_BOT_COMMAND_SCOPE_...) kinds
 * (0 = every scope, the default). A list published for a scope keeps only its commands. */
#define TG_SCOPE_BIT(kind) (UINT32_C(1) << (kind))
TG_API tg_status tg_router_command_scopes(tg_router *r, const char *name, uint32_t scopes);
/*
 * Call setMyCommands on ctx with the described commands (registration order) whose scopes
 * allow scope (NULL = BotCommandScopeDefault), for language lang (NULL = the list for every
 * language; else each command's lang description, the default one when it has none).
 * Returns what the call returns (tg_ctx_errmsg(ctx) says why); TG_ERR_INVALID when more
 * than 100 commands would be sent.
 */
TG_API tg_status tg_router_publish_commands(const tg_router *r, tg_ctx *ctx,
                                            const tg_bot_command_scope *scope, const char *lang);
/* Add lang's description to every described command from the catalogs of tr
 * (tgbot/i18n.h): the default description is the msgid. Commands the catalogs do not
 * translate get none for lang (publishing falls back to the default). *count (optional)
 * gets the number translated. tr is only read during the call. */
typedef struct tg_i18n tg_i18n;
TG_API tg_status tg_router_translate_commands(tg_router *r, const tg_i18n *tr, const char *lang,
                                              size_t *count);
/* The default list, then one list per language any command is translated to. */
TG_API tg_status tg_router_publish_all_commands(const tg_router *r, tg_ctx *ctx,
                                                const tg_bot_command_scope *scope);

/* ---- dispatcher ---- */

typedef struct tg_dispatcher tg_dispatcher;
typedef struct tg_async tg_async;                           /* tgbot/async.h */
typedef struct tg_async_poll_options tg_async_poll_options; /* tgbot/async.h */

typedef struct tg_dispatcher_options {
    unsigned workers;            /* threads; 0 = 4 */
    size_t queue_capacity;       /* updates waiting at most; 0 = 1024 */
    tg_storage *storage;         /* conversations; borrowed; NULL = a private memory store */
    const char *conv_prefix;     /* storage key prefix; NULL = "conv:" */
    uint64_t conv_timeout_ms;    /* idle conversations end after this; 0 = never */
    size_t conv_max_bytes;       /* state + data at most; 0 = 16384 */
    const char *cancel_command;  /* e.g. "cancel": ends the conversation; NULL = none */
    tg_handler_fn on_cancel;     /* runs after a cancel (conversation already ended) */
    tg_handler_fn on_timeout;    /* runs when a timed-out conversation is noticed (its old
                                    state is readable with tg_conv_state) */
    void *conv_user;             /* user of on_cancel / on_timeout */
    size_t arena_max_bytes;      /* cap on a handler's scratch arena; 0 = 16 MiB */
    bool no_get_me;              /* do not call getMe to learn the username */
    const char *session_prefix;  /* storage key prefix of user/chat data; NULL = "sess:" */
    uint64_t session_ttl_ms;     /* user/chat data not written for this long is forgotten
                                    (the storage's TTL); 0 = kept forever */
    size_t session_max_bytes;    /* one scope's fields at most; 0 = 16384 */
    uint64_t callback_ttl_ms;    /* stored callback data (tg_hctx_callback_put) lives this
                                    long; 0 = 48 hours */
    size_t callback_max_entries; /* this process keeps at most this many, least recently
                                    used dropped first; 0 = 100000 */
    size_t callback_max_bytes;   /* one stored callback data at most; 0 = 16384 */
    /* Loop mode (see "the dispatcher on an event loop" below): handlers run on the thread
     * of this async handle (tgbot/async.h) instead of on worker threads; workers and
     * queue wait times are then ignored. bot must be the handle's bot (or NULL: taken from
     * it). NULL = the worker pool. */
    tg_async *async;
    /* Loop mode: called once, on the loop thread, when tg_dispatcher_stop() was noticed and
     * every queued update and every call of the handlers has completed. */
    void (*on_stopped)(tg_dispatcher *d, void *user);
    void *stopped_user;
} tg_dispatcher_options;

/*
 * A dispatcher over router (borrowed: it must outlive the dispatcher and not change).
 * bot may be NULL (handlers then get no ctx: tests, offline use). opts may be NULL.
 * NULL on failure (bad option, out of memory, getMe failed); tg_dispatcher_errmsg(NULL)
 * then says why.
 */
TG_API tg_dispatcher *tg_dispatcher_new_sized(tg_bot *bot, tg_router *router,
                                              const tg_dispatcher_options *opts, size_t opts_size);
#define tg_dispatcher_new(bot, router, ...)                                                        \
    tg_dispatcher_new_sized((bot), (router), (__VA_ARGS__), sizeof(tg_dispatcher_options))
/* Stop accepting, let queued updates finish (at most 10 s; call tg_dispatcher_drain first
 * for another deadline), then free. NULL-safe. */
TG_API void tg_dispatcher_free(tg_dispatcher *d);

/* Called when an update fed with tg_dispatcher_feed() is finished (handled = it ran;
 * false = dropped at shutdown). From a worker thread. */
typedef void (*tg_feed_done_fn)(void *user, int64_t update_id, bool handled);

/*
 * Queue one update (raw JSON, copied). wait_ms: 0 = fail at once if the queue is full,
 * < 0 = wait for room. Returns TG_OK, TG_ERR_DECODE (not an Update; errmsg says where),
 * TG_ERR_FLOOD (queue full: backpressure), TG_ERR_CANCELLED (stopping), TG_ERR_NOMEM.
 * done (optional) runs once the update is finished or dropped.
 * Thread-safety: any thread.
 */
TG_API tg_status tg_dispatcher_feed(tg_dispatcher *d, const char *json, size_t len, int64_t wait_ms,
                                    tg_feed_done_fn done, void *user);
/* Wait until nothing is queued or running, at most timeout_ms; TG_OK or TG_ERR_TIMEOUT. */
TG_API tg_status tg_dispatcher_wait_idle(tg_dispatcher *d, uint64_t timeout_ms);
/*
 * Finish: stop accepting, let queued updates run until timeout_ms has passed, drop the rest
 * (their done callbacks say handled = false), wait for running handlers. TG_OK when nothing
 * was dropped, else TG_ERR_TIMEOUT. Idempotent.
 */
TG_API tg_status tg_dispatcher_drain(tg_dispatcher *d, uint64_t timeout_ms);
/*
 * Ask the running polling loop or webhook server to stop. Async-signal-safe (it only sets a
 * flag and writes a byte to a pipe), so it may be called from a signal handler.
 */
TG_API void tg_dispatcher_stop(tg_dispatcher *d);
TG_API bool tg_dispatcher_stopping(const tg_dispatcher *d);
/* Install SIGINT and SIGTERM handlers that call tg_dispatcher_stop(d) (one dispatcher per
 * process). */
TG_API tg_status tg_dispatcher_stop_on_signals(tg_dispatcher *d);
/* Why the last dispatcher call failed (NULL d: the last tg_dispatcher_new on this thread). */
TG_API const char *tg_dispatcher_errmsg(const tg_dispatcher *d);
/* Dispatch one update synchronously on the calling thread (no queue, worker 0's context must
 * not be in use: for tests and benchmarks). */
TG_API tg_status tg_dispatcher_run_one(tg_dispatcher *d, const char *json, size_t len);

/*
 * ---- the dispatcher on an event loop (loop mode: tg_dispatcher_options.async) ----
 *
 * A whole bot single-threaded inside the program's event loop (libuv, libevent, your own,
 * or tg_async_run): updates come from long polling on the async handle
 * (tg_dispatcher_poll_async) or from tg_dispatcher_feed on the loop thread, and routing,
 * filters, middleware, conversations, sessions, callback data, menus and scheduled jobs
 * (tgbot/jobs.h) all run on the loop thread, in the handle's callbacks. No thread is
 * started.
 *
 * Order: a chat's updates run one at a time, in order, as with workers; and a chat's next
 * update starts only once every call its previous update made has completed, so a chat's
 * answers arrive in the order the handlers made them. Calls of one update go out one at
 * a time in the order made. Different chats proceed independently.
 *
 * Calls from handlers do not block: on the loop, every call on the handler's ctx —
 * tg_reply, tg_send, tg_send_ex, tg_answer, tg_edit, tg_send_text, tg_reply_text,
 * tg_edit_text, tg_hctx_call, the menus' and the limiter's replies, and the generated
 * calls on tg_hctx_ctx(h) — is checked and encoded at once (a bad parameter or refused
 * keyboard fails the call right there, as on workers) and queued: it returns TG_OK
 * meaning "queued". A call that asks for its result (tg_hctx_call with result_json, a
 * generated call with an out pointer), an upload and a download fail with TG_ERR_INVALID
 * instead of blocking; to use a result, chain with tg_hctx_call_then. When a queued call
 * fails (after the handle's retries), the update fails: tg_hctx_errmsg says why, the
 * calls it queued after the failed one are cancelled (not sent), and the router's error
 * handler runs — later, on the loop thread, with the same tg_hctx (it may reply; a failure
 * of that reply is only logged). After-middleware has run by then and saw the handler's
 * own status. Storage (conversations, sessions, jobs) is called directly: the memory
 * store costs nothing, but SQLite or Redis block the loop for their round trip.
 *
 * With the handle's built-in loop, drive it with tg_async_run_once until on_stopped:
 * tg_async_run returns as soon as no call is pending, and updates waiting in the
 * dispatcher's lanes are not calls.
 *
 * Jobs (tgbot/jobs.h) over a loop-mode dispatcher start no thread: a timer on the handle
 * fires them on the loop; a run is finished for the queue when its handler returns.
 *
 * Threads: create, feed, poll and free the dispatcher (and its jobs queue) on the loop
 * thread; feed from another thread is refused (TG_ERR_INVALID). tg_dispatcher_stop may
 * come from any thread or a signal handler and is noticed within a second: polling stops,
 * feeds are refused, what is queued still runs, then on_stopped. tg_dispatcher_run_one,
 * _wait_idle and _drain block, so in loop mode they return TG_ERR_INVALID.
 * tg_dispatcher_free drops updates still queued (done says handled = false) and cancels
 * calls in flight; free it before the async handle. For a clean end, stop and free after
 * on_stopped.
 */

/* Long polling on the dispatcher's async handle (loop mode): each update is fed in order;
 * while queue_capacity updates wait, polling pauses. TG_ERR_INVALID outside loop mode or
 * when polling already; TG_ERR_NOMEM. */
TG_API tg_status tg_dispatcher_poll_async(tg_dispatcher *d, const tg_async_poll_options *opts);

/*
 * A call whose result the handler wants: fn(h, st, result_json, len, user) runs with the
 * call's outcome (result_json: the "result" JSON on TG_OK, else NULL; h's errmsg says
 * why). On workers, at once (the call blocks); in loop mode when the call has completed,
 * on the loop thread, with the same h (the update's data, conversation and sessions
 * still there; calls made in fn queue behind those made before). fn's return value is
 * the update's: an error ends it as a handler's error would. Returns TG_OK once queued
 * (on workers: fn's return value, fn having run with whatever the call returned); in
 * loop mode a call refused at once (bad parameters) returns its error and fn does not run.
 */
typedef tg_status (*tg_hctx_result_fn)(tg_hctx *h, tg_status st, const char *result_json,
                                       size_t len, void *user);
TG_API tg_status tg_hctx_call_then(tg_hctx *h, const char *method, const char *json_params,
                                   tg_hctx_result_fn fn, void *user);

typedef struct tg_dispatcher_stats {
    uint64_t received;  /* updates accepted by feed */
    uint64_t handled;   /* updates that ran */
    uint64_t failed;    /* handlers that returned an error */
    uint64_t unhandled; /* updates no handler matched */
    uint64_t dropped;   /* cancelled at shutdown */
    uint64_t rejected;  /* feed refused (decode error, full, stopping) */
} tg_dispatcher_stats;

TG_API void tg_dispatcher_get_stats_sized(tg_dispatcher *d, tg_dispatcher_stats *out,
                                          size_t out_size);
#define tg_dispatcher_get_stats(d, out)                                                            \
    tg_dispatcher_get_stats_sized((d), (out), sizeof(tg_dispatcher_stats))

#ifdef __cplusplus
}
#endif

#endif
