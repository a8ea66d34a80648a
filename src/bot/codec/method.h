/*
 * method: how a generated method wrapper hands a call to the client, and the codec
 * functions the client uses to build the request and read the reply.
 *
 * Every generated wrapper (tg_send_message, tg_get_me, ...) is one line:
 *     return tg__call(ctx, &tg__m_send_message, params, out);
 * tg__call is implemented by the client (src/bot/client/); it
 *   1. checks required parameters: tg__codec_missing_param() -> TG_ERR_INVALID naming it;
 *   2. if m->has_input_files and tg__codec_foreach_file() reports an upload, sends
 *      multipart/form-data: every top-level key of the JSON from tg__codec_encode_params()
 *      becomes a form field (strings as their decoded text, anything else as JSON text) and
 *      every reported file becomes a part named as reported; otherwise POSTs that JSON;
 *   3. on ok=true, decodes "result" with tg__codec_decode_result() into out.
 *
 * Upload naming: a top-level InputFile parameter that is an upload is left out of the JSON
 * and reported under the parameter's name ("photo"); an upload nested in an object
 * (InputMedia*.media, thumbnails, stickers, ...) is written as "attach://tgfileN" and
 * reported as "tgfileN", N counting from 0 in encoding order. Both functions walk the
 * params in the same order, so the names always agree.
 *
 * Thread-safety: the method tables are immutable; the functions use only their arguments.
 */
#ifndef TGKIT_BOT_CODEC_METHOD_H
#define TGKIT_BOT_CODEC_METHOD_H

#include <stdbool.h>
#include <stdint.h>

#include "bot/codec/codec.h"
#include "tgbot/types.h"

enum tg__result_kind {
    TG__R_TRUE = 1, /* result must be true; out unused (may be NULL) */
    TG__R_VALUE,    /* one value as result_desc says; out: see tg__codec_decode_result */
    TG__R_ARRAY,    /* array; out is a tg__array_out * */
    TG__R_OR_TRUE,  /* object, or true (then the out pointer is set to NULL) */
};

typedef struct tg__method {
    const char *name;        /* "sendMessage" */
    const void *params_desc; /* const tg__type * of the params struct (NULL if none) */
    const void *result_desc; /* const tg__field * describing the result (NULL for TRUE) */
    uint8_t result_kind;     /* enum tg__result_kind */
    bool has_input_files;    /* params may carry an InputFile (multipart candidate) */
} tg__method;

/* out of TG__R_ARRAY results. */
typedef struct tg__array_out {
    void *items;
    size_t count;
} tg__array_out;

/* Implemented by the client. params may be NULL (= all absent); out as for
 * tg__codec_decode_result. */
tg_status tg__call(tg_ctx *ctx, const tg__method *m, const void *params, void *out);

/* Every generated method, in page order, and a lookup by Bot API name (NULL if unknown). */
extern const tg__method *const tg__methods[];
extern const size_t tg__method_count;
const tg__method *tg__codec_method_by_name(const char *name);

struct tg_bot_defaults;
/* Write params (NULL = none) as one JSON object. dflt (NULL = none): the bot-wide defaults,
 * filled into the marked fields the caller left unset (see encode.c). Sticky errors in w; on
 * -EINVAL, why (optional) names the invalid value as tg__codec_encode_why does. */
void tg__codec_encode_params(const tg__method *m, const void *params,
                             const struct tg_bot_defaults *dflt, tg__jw *w, char *why,
                             size_t why_cap);
/* For JSON built by hand (the handler shortcuts): write `"key":value` for each top-level
 * field of the params t that a default fills and given(ud, key) says the caller did not
 * send; a parse mode only when given says its text is there and its entities are not
 * (given NULL: nothing sent, so no parse mode). w must be inside the object being built. */
void tg__codec_encode_defaults(const tg__type *t, const struct tg_bot_defaults *dflt,
                               bool (*given)(void *ud, const char *key), void *ud, tg__jw *w);
/* The default a bot-wide default gives field f of t at base (base NULL: assume unset), or NULL
 * when none applies; the value has f's storage shape. */
const void *tg__codec_default_for(const struct tg_bot_defaults *d, const tg__type *t,
                                  const tg__field *f, const unsigned char *base);

/* Name of the first required parameter that is absent (NULL string/object, no chat id,
 * no file, empty union/enum, NULL array), or NULL when all are there. Required numbers and
 * booleans are always sent, so they are never "missing". */
const char *tg__codec_missing_param(const tg__method *m, const void *params);

/* Called for each upload reachable from params, in encoding order; a non-zero return stops
 * the walk and is returned by tg__codec_foreach_file. part is valid during the call only. */
typedef int (*tg__file_cb)(void *ud, const char *part, const tg_input_file *f);
int tg__codec_foreach_file(const tg__method *m, const void *params, tg__file_cb cb, void *ud);

/* Decode the "result" value at tok into out, with strings and structs in a (raw spans point
 * into d->src: keep it alive as long as a, e.g. parse an arena copy of the body).
 * out by result: object -> T ** (struct allocated in a); union -> the union struct itself;
 * Integer -> int64_t *; String -> const char **; Boolean -> bool *; TG__R_ARRAY ->
 * tg__array_out *; TG__R_OR_TRUE -> T ** (NULL when the result is true); TG__R_TRUE -> unused.
 * out NULL: the result is checked but not kept.
 * Returns TG_OK, TG_ERR_DECODE (err filled) or TG_ERR_NOMEM. */
tg_status tg__codec_decode_result(const tg__method *m, const tg__jdoc *d, uint32_t tok,
                                  tg__arena *a, void *out, tg__jerr *err);

#endif
