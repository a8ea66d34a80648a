/*
 * tgbot/codec.h: the generated codec as a public API: decode any Bot API type from a JSON
 * buffer, encode any value back to JSON. For a bot that receives updates from its own HTTP
 * server or a queue, for tools (tgbot-json) and for tests.
 *
 * The typed forms are generated for every type in tgbot/api.h:
 *   tg_status tg_decode_update(tg_ctx *ctx, const char *json, size_t len, tg_update **out);
 *   tg_status tg_encode_update(tg_ctx *ctx, const tg_update *v, char *buf, size_t cap,
 *                              size_t *len);
 * (and tg_decode_message, tg_encode_chat_member, ...). The functions here are the generic
 * forms, taking the Bot API type name ("Update", "Message", "ChatMember", ...).
 *
 * Ownership and lifetime: decoded values live in ctx's arena until tg_ctx_reset(ctx) or
 * tg_ctx_free(ctx); the input is copied, so it may go right after the call. A ctx made with
 * tg_ctx_new(NULL) has no bot: it serves the codec only. Errors are the ctx's last error:
 * tg_ctx_errmsg(ctx) ("decode Update: message.from: missing required field \"first_name\"
 * (at byte N)") and tg_ctx_error(ctx)->json_path ("message.from").
 * Thread-safety: a ctx is used by one thread at a time, as for calls; tg_type_name and
 * tg_unknown_visit use only their arguments.
 */
#ifndef TGBOT_CODEC_H
#define TGBOT_CODEC_H

#include <stdbool.h>
#include <stddef.h>

#include "tgbot/common.h"
#include "tgbot/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Decode json[0..len) as the Bot API type named type into ctx's arena; *out points at the
 * generated struct (tg_update for "Update", ...). Returns TG_OK, TG_ERR_DECODE (with the
 * JSON path), TG_ERR_NOMEM, or TG_ERR_INVALID (unknown type name, NULL json with len > 0).
 */
TG_API tg_status tg_decode(tg_ctx *ctx, const char *type, const char *json, size_t len, void **out);

/*
 * Encode the value v of the Bot API type named type into buf (cap bytes, NUL-terminated).
 * *len (optional) gets the JSON's length, also when the answer is TG_ERR_TOO_BIG (cap is
 * not at least *len + 1: grow buf and call again). Keys a decoded value kept in its raw JSON
 * that this version does not know are written too, so decode -> encode loses nothing.
 * TG_ERR_INVALID names an invalid value by its path ("reply_markup: ..."), or an unknown
 * type name.
 */
TG_API tg_status tg_encode(tg_ctx *ctx, const char *type, const void *v, char *buf, size_t cap,
                           size_t *len);

/* The name of generated type i (0, 1, ... in name order), NULL past the last one. */
TG_API const char *tg_type_name(size_t i);

/* Called with each path tg_unknown_visit finds: a key the type does not know (variant =
 * false) or a union value whose variant it cannot tell (variant = true). path is valid
 * during the call only. */
typedef void (*tg_unknown_path_fn)(void *ud, const char *path, bool variant);

/*
 * Like tg_unknown_keys (tgbot/types.h), reporting unknown union variants as well. Returns
 * the number of unknown keys (variants are reported, not counted); 0 also for an unknown
 * type or JSON that does not parse. Allocates a temporary token array.
 */
TG_API size_t tg_unknown_visit(const char *type, tg_raw raw, tg_unknown_path_fn cb, void *ud);

#ifdef __cplusplus
}
#endif

#endif
