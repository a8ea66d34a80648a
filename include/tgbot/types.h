/*
 * tgbot/types.h: the small value types the generated Bot API (tgbot/api.h) is built from.
 *
 *  - tg_ctx: the per-thread call context (opaque; created and documented in tgbot/client.h).
 *  - Optional scalars (tg_opt_bool, tg_opt_i64, tg_opt_double): a presence flag plus the
 *    value, because "absent" is not the same as 0 or false. Write TG_SOME(x) in an
 *    initializer; a zero-initialized field is absent.
 *  - tg_raw: a span of JSON text. Every decoded object and union keeps the span of its own
 *    JSON, so fields this version of the library does not know stay reachable.
 *  - tg_strenum: a value of an open string set ("enum" of the Bot API: parse modes, chat
 *    types, entity types, ...). id is one of the generated TG_<SET>_<VALUE> constants,
 *    TG_ENUM_UNKNOWN for a string this version does not know (kept in str), 0 = absent, or
 *    TG_ENUM_NONE = explicitly none when sending (not sent, and no bot default fills it).
 *  - tg_chat_id: the Bot API's "Integer or String" (a numeric chat id or "@username").
 *  - tg_input_file: the Bot API's "InputFile or String": a file_id or URL to pass on, or a
 *    file to upload from a path or from memory.
 *  - Tagged unions ("one of" types) are generated structs with a kind, a pointer to the
 *    member and the raw JSON; TG_UNION_OF() builds one in an initializer.
 *
 * Ownership: these are plain values. Pointers inside them are borrowed: for values you
 * build, what they point to must stay alive for the call that uses them; for decoded values,
 * everything lives in the ctx's arena until tg_ctx_reset() or tg_ctx_free().
 * Thread-safety: plain data; no functions here touch shared state.
 */
#ifndef TGBOT_TYPES_H
#define TGBOT_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tgbot/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The per-thread call context; see tgbot/client.h for its lifecycle. */
typedef struct tg_ctx tg_ctx;

/* ---- optional scalars ---- */

typedef struct tg_opt_bool {
    bool has;
    bool v;
} tg_opt_bool;

typedef struct tg_opt_i64 {
    bool has;
    int64_t v;
} tg_opt_i64;

typedef struct tg_opt_double {
    bool has;
    double v;
} tg_opt_double;

/* Present with value x, in an initializer: .disable_notification = TG_SOME(true).
 * In an assignment, add the type: p.limit = (tg_opt_i64)TG_SOME(10). */
#define TG_SOME(x)                                                                                 \
    {                                                                                              \
        true, (x)                                                                                  \
    }
/* Absent (the same as zero-initialized). */
#define TG_NONE                                                                                    \
    {                                                                                              \
        0                                                                                          \
    }

/* ---- raw JSON ---- */

/* A complete JSON value as text (not NUL-terminated). len 0 = none. */
typedef struct tg_raw {
    const char *json;
    size_t len;
} tg_raw;

/* Called with the path of each key ("chat.new_field", "entities[2].extra") that the
 * generated type does not know; path is valid during the call only. */
typedef void (*tg_unknown_key_fn)(void *ud, const char *path);

/*
 * List the keys of raw (the JSON a decoded object kept, e.g. msg->raw) that the generated
 * type named type ("Message", "Update", ...) does not know, recursively. Returns how many
 * there are (0 also when type is unknown or raw is empty or not valid JSON); cb may be NULL.
 * Allocates a temporary token array; thread-safe (uses only its arguments). Time is linear in
 * raw's size (about twice a tg_decode of it), however many keys are unknown.
 */
TG_API size_t tg_unknown_keys(const char *type, tg_raw raw, tg_unknown_key_fn cb, void *ud);

/* ---- open string sets ---- */

#define TG_ENUM_ABSENT  0
#define TG_ENUM_UNKNOWN 1 /* a value this version does not know; str holds it */
/* Sending: explicitly none. Not sent, like absent, but a bot-wide default
 * (tg_bot_set_defaults) does not fill it either: .parse_mode = TG_ENUM(TG_ENUM_NONE) sends a
 * message without a parse mode on a bot whose default is HTML. Decoding never yields it. */
#define TG_ENUM_NONE (-1)

typedef struct tg_strenum {
    int32_t id;      /* TG_<SET>_<VALUE>, TG_ENUM_UNKNOWN or TG_ENUM_ABSENT */
    const char *str; /* decoded: always the string as received; sending: used for UNKNOWN */
} tg_strenum;

/* In an initializer: .parse_mode = TG_ENUM(TG_PARSE_MODE_HTML). */
#define TG_ENUM(id)                                                                                \
    {                                                                                              \
        (id), NULL                                                                                 \
    }
/* A value by its string (sent as is), for strings newer than this library. */
#define TG_ENUM_STR(s)                                                                             \
    {                                                                                              \
        TG_ENUM_UNKNOWN, (s)                                                                       \
    }

/* ---- "Integer or String" chat ids ---- */

typedef enum tg_chat_id_kind {
    TG_CHAT_ID_NONE = 0,
    TG_CHAT_ID_INT,      /* id */
    TG_CHAT_ID_USERNAME, /* username, e.g. "@channel" */
} tg_chat_id_kind;

typedef struct tg_chat_id {
    tg_chat_id_kind kind;
    int64_t id;
    const char *username;
} tg_chat_id;

static inline tg_chat_id tg_chat_id_int(int64_t id)
{
    tg_chat_id c = {TG_CHAT_ID_INT, id, NULL};
    return c;
}

/* username is borrowed (keep it alive for the call). */
static inline tg_chat_id tg_chat_id_username(const char *username)
{
    tg_chat_id c = {TG_CHAT_ID_USERNAME, 0, username};
    return c;
}

/* ---- "InputFile or String" ---- */

typedef enum tg_input_file_kind {
    TG_INPUT_FILE_NONE = 0,
    TG_INPUT_FILE_ID,     /* str: a file_id already on Telegram's servers (sent as text) */
    TG_INPUT_FILE_URL,    /* str: an HTTP URL Telegram fetches (sent as text) */
    TG_INPUT_FILE_PATH,   /* str: a local file to upload (streamed from disk) */
    TG_INPUT_FILE_MEMORY, /* data/len: bytes to upload */
} tg_input_file_kind;

typedef struct tg_input_file {
    tg_input_file_kind kind;
    const char *str;       /* ID, URL, PATH */
    const void *data;      /* MEMORY */
    size_t len;            /* MEMORY: bytes */
    const char *filename;  /* uploads: file name shown to users (NULL: derived / "file") */
    const char *mime_type; /* uploads: content type (NULL: application/octet-stream) */
} tg_input_file;

static inline tg_input_file tg_input_file_id(const char *file_id)
{
    tg_input_file f = {TG_INPUT_FILE_ID, file_id, NULL, 0, NULL, NULL};
    return f;
}

static inline tg_input_file tg_input_file_url(const char *url)
{
    tg_input_file f = {TG_INPUT_FILE_URL, url, NULL, 0, NULL, NULL};
    return f;
}

static inline tg_input_file tg_input_file_path(const char *path)
{
    tg_input_file f = {TG_INPUT_FILE_PATH, path, NULL, 0, NULL, NULL};
    return f;
}

static inline tg_input_file tg_input_file_memory(const void *data, size_t len, const char *filename)
{
    tg_input_file f = {TG_INPUT_FILE_MEMORY, NULL, data, len, filename, NULL};
    return f;
}

/* True when f is uploaded as a multipart part (not sent as text). */
static inline bool tg_input_file_is_upload(const tg_input_file *f)
{
    return f->kind == TG_INPUT_FILE_PATH || f->kind == TG_INPUT_FILE_MEMORY;
}

/* ---- tagged unions ---- */

/* Every generated union struct starts with these members (kind, ptr, raw); kind 0 = absent,
 * 1 = a variant this version does not know (raw holds its JSON). In an initializer:
 *   .reply_markup = TG_UNION_OF(TG_REPLY_MARKUP_INLINE_KEYBOARD_MARKUP, &kb)
 * or use the generated constructors tg_<union>_from_<member>(). */
#define TG_UNION_ABSENT  0
#define TG_UNION_UNKNOWN 1
#define TG_UNION_OF(k, p)                                                                          \
    {                                                                                              \
        .kind = (k), .ptr = (p)                                                                    \
    }

#ifdef __cplusplus
}
#endif

#endif
