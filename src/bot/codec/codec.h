/*
 * codec: the hand-written engine behind the generated Bot API code.
 *
 * botapi-gen emits, for every type and every method's parameters, a descriptor table
 * (tg__type with tg__field rows and a hash index of the keys) plus the C structs of
 * tgbot/api.h; this module interprets those tables:
 *  - decode: walk the tokens of a tg__jdoc once and fill structs in an arena (no DOM, no
 *    malloc per field). Key lookup is a generated open-addressing hash (tg__codec_hash) with
 *    one memcmp to confirm, never a chain of strcmp.
 *  - encode: write a struct as JSON through tg__jw (absent optionals omitted).
 *  - unions: dispatch by discriminator, by field presence, by `date == 0`, or by JSON kind
 *    (RichText); an unknown variant is kept with kind TG_UNION_UNKNOWN and its raw JSON.
 *  - forward compatibility: every decoded object keeps its raw JSON (tg_raw raw); unknown
 *    keys can be listed (tg__codec_unknown_keys) and re-emitted (TG__ENC_KEEP_UNKNOWN).
 *
 * Struct layouts the engine relies on (checked by static_assert in the generated code):
 * optional scalars are tg_opt_*; arrays are `T *name; size_t name_count;`; arrays of arrays
 * are `tg__list *name; size_t name_count;`; unions start with `int kind; const void *ptr;
 * tg_raw raw;`; enums are tg_strenum.
 *
 * Lifetimes: decoded strings are copies in the arena; raw spans point into the parsed input,
 * so the input bytes must live as long as the arena's contents (tg__codec_decode_json copies
 * the input into the arena for that reason).
 * Thread-safety: descriptors are immutable; a call uses only its arguments.
 */
#ifndef TGKIT_BOT_CODEC_H
#define TGKIT_BOT_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "bot/json/json.h"
#include "core/arena.h"
#include "tgbot/types.h"

enum tg__kind {
    TG__K_BOOL = 1, /* Boolean: bool / tg_opt_bool */
    TG__K_TRUE,     /* True: bool (absent = false) */
    TG__K_I64,      /* Integer: int64_t / tg_opt_i64 */
    TG__K_F64,      /* Float: double / tg_opt_double */
    TG__K_STR,      /* String: const char * (NULL = absent) */
    TG__K_ENUM,     /* String of an open set: tg_strenum; sub = tg__enum */
    TG__K_OBJ,      /* object: pointer to struct (arrays: contiguous structs); sub = tg__type */
    TG__K_UNION,    /* union struct by value; sub = tg__type with is_union */
    TG__K_CHATID,   /* Integer or String: tg_chat_id */
    TG__K_FILE,     /* InputFile or String, or an attach:// String: tg_input_file */
    TG__K_CONST,    /* constant string (discriminator); no storage; sub = the value */
};

#define TG__F_OPT  0x01 /* optional (absent allowed; scalars use tg_opt_*) */
#define TG__F_ARR  0x02 /* Array of */
#define TG__F_ARR2 0x04 /* Array of Array of */

/* Which bot-wide default (tg_bot_defaults) fills a field the caller left absent. botapi-gen
 * marks the fields of method parameters and of the types a call sends (nested ones too,
 * e.g. InputTextMessageContent, InputMedia*, ReplyParameters.quote_parse_mode). */
enum tg__dflt {
    TG__D_PARSE_MODE = 1, /* a ParseMode field; pair: its entities field, if any */
    TG__D_LINK_PREVIEW,   /* link_preview_options */
    TG__D_PROTECT,        /* protect_content */
    TG__D_SILENT,         /* disable_notification */
};

typedef struct tg__field {
    const char *name;
    uint32_t off;     /* value, tg_opt_*, pointer, or array pointer */
    uint32_t cnt_off; /* arrays: offset of the size_t count */
    const void *sub;
    uint8_t name_len;
    uint8_t kind;  /* enum tg__kind */
    uint8_t flags; /* TG__F_* */
    uint8_t dflt;  /* enum tg__dflt, 0 = no default applies */
    uint8_t pair;  /* TG__D_PARSE_MODE: index + 1 of the entities field that, when present,
                      keeps the default out (entities already format the text); 0 = none */
    uint8_t subj;  /* TG__D_PARSE_MODE: index + 1 of the text it formats; the default applies
                      only when that text is present (0 = always) */
} tg__field;

typedef struct tg__enum {
    const char *name; /* "ParseMode" */
    uint32_t count;   /* values; the value of id i is values[i - 2] */
    const char *const *values;
} tg__enum;

enum tg__ustrategy {
    TG__U_DISCRIM = 1, /* a constant field (disc) tells the member; equal values: presence */
    TG__U_PRESENCE,    /* the member whose required fields are all present (most wins) */
    TG__U_DATE0,       /* MaybeInaccessibleMessage: date == 0 picks the "0" member */
};

#define TG__UF_STRING 0x01 /* may be a plain JSON string (kind = nmembers + 2, text) */
#define TG__UF_ARRAY  0x02 /* may be an array of itself (kind = nmembers + 3, items) */
#define TG__UF_DUPS   0x04 /* discriminator values repeat */

typedef struct tg__type {
    const char *name; /* Bot API name ("Message"), or the method name for params */
    uint32_t size;    /* sizeof the struct */
    uint32_t raw_off; /* offset of tg_raw, or UINT32_MAX (params) */
    const tg__field *fields;
    const uint8_t *slots; /* hash index: field index + 1, 0 = empty */
    uint16_t nfields;
    uint16_t nslots;    /* power of two */
    uint16_t nrequired; /* fields without TG__F_OPT */
    /* required strings and objects (indexes into fields): decoding fails without them, so
     * a decoded struct never has NULL where the page promises a value */
    const uint8_t *req_ptrs;
    uint8_t nreq_ptrs;
    /* unions only */
    uint8_t is_union;
    uint8_t strategy; /* enum tg__ustrategy */
    uint8_t uflags;   /* TG__UF_* */
    uint16_t nmembers;
    const struct tg__type *const *members;
    const char *const *values; /* per member: discriminator value (DATE0: "0" or NULL) */
    const char *disc;          /* discriminator key */
    uint32_t text_off, items_off, count_off; /* TG__UF_STRING / TG__UF_ARRAY storage */
} tg__type;

/* The layout every generated union struct starts with. */
typedef struct tg__union_head {
    int kind;
    const void *ptr;
    tg_raw raw;
} tg__union_head;

/* Arrays of arrays: one row. */
typedef struct tg__list {
    const void *items;
    size_t count;
} tg__list;

/* Descriptor rows, as the generated tables write them. */
#define TG__FIELD(T, m, k, fl, s)                                                                  \
    {                                                                                              \
        .name = #m, .off = offsetof(T, m), .cnt_off = 0, .sub = (s), .name_len = sizeof(#m) - 1,   \
        .kind = (k), .flags = (fl)                                                                 \
    }
#define TG__ARRAY(T, m, k, fl, s)                                                                  \
    {                                                                                              \
        .name = #m, .off = offsetof(T, m), .cnt_off = offsetof(T, m##_count), .sub = (s),          \
        .name_len = sizeof(#m) - 1, .kind = (k), .flags = (fl)                                     \
    }
/* A field a bot-wide default may fill (d: enum tg__dflt; p, t: tg__field.pair and .subj). */
#define TG__FIELD_DEF(T, m, k, fl, s, d, p, t)                                                     \
    {                                                                                              \
        .name = #m, .off = offsetof(T, m), .cnt_off = 0, .sub = (s), .name_len = sizeof(#m) - 1,   \
        .kind = (k), .flags = (fl), .dflt = (d), .pair = (p), .subj = (t)                          \
    }
#define TG__CONST(key, value)                                                                      \
    {                                                                                              \
        .name = (key), .off = 0, .cnt_off = 0, .sub = (value), .name_len = sizeof(key) - 1,        \
        .kind = TG__K_CONST, .flags = 0                                                            \
    }
/* A generated union struct must start like tg__union_head. */
#define TG__UNION_LAYOUT(T)                                                                        \
    _Static_assert(offsetof(T, kind) == offsetof(tg__union_head, kind) &&                          \
                       sizeof(((T *)0)->kind) == sizeof(int) &&                                    \
                       offsetof(T, ptr) == offsetof(tg__union_head, ptr) &&                        \
                       offsetof(T, raw) == offsetof(tg__union_head, raw),                          \
                   #T " layout")

/* The key hash used by the generated index (botapi-gen computes the same function). */
static inline uint32_t tg__codec_hash(const char *k, size_t n)
{
    uint32_t h = (uint32_t)n * 0x9E3779B1u;
    h ^= (uint32_t)(unsigned char)k[0] * 0x85EBCA77u;
    h ^= (uint32_t)(unsigned char)k[n - 1] * 0xC2B2AE3Du;
    h ^= (uint32_t)(unsigned char)k[n >> 1] * 0x27D4EB2Fu;
    h ^= h >> 15;
    return h;
}

/* Field of t named k[0..n), or NULL: one hash, usually one probe and one memcmp. */
static inline const tg__field *tg__codec_lookup(const tg__type *t, const char *k, size_t n)
{
    if (n == 0 || n > 255)
        return NULL;
    uint32_t mask = (uint32_t)t->nslots - 1;
    uint32_t h = tg__codec_hash(k, n) & mask;
    for (uint32_t probes = 0; probes < t->nslots; probes++) {
        uint8_t s = t->slots[h];
        if (s == 0)
            return NULL;
        const tg__field *f = &t->fields[s - 1];
        if (f->name_len == n && f->name[0] == k[0] && memcmp(f->name, k, n) == 0)
            return f;
        h = (h + 1) & mask;
    }
    return NULL;
}

/* ---- registry (generated) ---- */

extern const tg__type *const tg__types[]; /* every type and union, sorted by name */
extern const size_t tg__type_count;
/* Type by its Bot API name ("Message"), or NULL. */
const tg__type *tg__codec_type_by_name(const char *name);

/* ---- decode ---- */

/* Decode the value at tok of d as t into out (caller storage of t->size bytes, zeroed by
 * this call). Strings and nested values go to a; raw spans point into d->src.
 * Returns TG_OK, TG_ERR_DECODE (err filled; path via tg__json_errmsg) or TG_ERR_NOMEM. */
tg_status tg__codec_decode(const tg__type *t, const tg__jdoc *d, uint32_t tok, tg__arena *a,
                           void *out, tg__jerr *err);
/* Copy json into a, parse it with doc (reused; its tokens are not in the arena) and decode
 * the root as t into a new struct in a (*out). On failure *out is NULL and errmsg (may be
 * NULL) receives one line "<path>: <what> (at byte N)". */
tg_status tg__codec_decode_json(const tg__type *t, const char *json, size_t len, tg__arena *a,
                                tg__jdoc *doc, void **out, tg__buf *errmsg);

/* Id of s[0..n) in e: 2.. for known values, TG_ENUM_UNKNOWN otherwise. */
int32_t tg__codec_enum_id(const tg__enum *e, const char *s, size_t n);
/* String of id in e, or NULL for absent/unknown/out of range. */
const char *tg__codec_enum_str(const tg__enum *e, int32_t id);

/* ---- encode ---- */

#define TG__ENC_KEEP_UNKNOWN 0x01 /* re-emit keys of raw spans the descriptor does not know */

/* Write the struct at v (of type t) as one JSON value. Errors are sticky in w (w->err);
 * an invalid value (an enum value out of range, an unknown union without raw JSON, a chat
 * id of no valid kind or a username chat id without a username, ...) sets -EINVAL. */
void tg__codec_encode(const tg__type *t, const void *v, tg__jw *w, int flags);
/* The same; on -EINVAL, why (optional, why_cap bytes) gets "<path>: <reason>" of the first
 * invalid value, e.g. "scope.chat_id: a username chat id without a username". */
void tg__codec_encode_why(const tg__type *t, const void *v, tg__jw *w, int flags, char *why,
                          size_t why_cap);

/* ---- the public codec (src/bot/client/codec_api.c; called by codec.gen.c) ---- */

/* tg_decode_<type> / tg_encode_<type> of tgbot/api.h for the type t. */
tg_status tg__decode_public(tg_ctx *ctx, const tg__type *t, const char *json, size_t len,
                            void **out);
tg_status tg__encode_public(tg_ctx *ctx, const tg__type *t, const void *v, char *buf, size_t cap,
                            size_t *len);

/* ---- forward compatibility ---- */

/* Called for each member of the JSON at tok whose key t (recursively) does not know, with
 * the member's value token (variant false), and for each union value whose variant cannot
 * be told, with that value's token (variant true). path names it (as tg__json_path does,
 * from tok) when the walk was given a path buffer, else NULL. */
typedef void (*tg__unknown_cb)(void *ud, const tg__jdoc *d, uint32_t tok, bool variant,
                               const char *path);
/* Walk the JSON value at tok as t (only reading tokens); returns the number of unknown keys
 * (unknown variants are reported but not counted). path (NULL = no paths) is the walk's
 * scratch: it holds the path of where the walk is, one step pushed on the way down and
 * popped on the way back, so naming every key costs O(its depth), not a search from the
 * root. The whole walk is linear in the tokens it visits. A path that cannot grow (out of
 * memory) is reported as NULL. */
size_t tg__codec_unknown_keys(const tg__type *t, const tg__jdoc *d, uint32_t tok, tg__unknown_cb cb,
                              void *ud, tg__buf *path);

#endif
