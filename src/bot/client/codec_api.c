/*
 * codec_api: the public codec on a ctx: tg_decode / tg_encode and the engine behind the
 * generated tg_decode_<type> / tg_encode_<type> (src/bot/api/codec.gen.c).
 *
 * Decoding copies the input into the ctx arena (decoded values keep spans of their own JSON)
 * and tokenizes it with the ctx's reused token array; encoding writes into the ctx's reused
 * request buffer and copies out, so a warm ctx allocates nothing but the decoded values.
 * Errors are the ctx's last error, with the JSON path in tg_error_info.json_path. Each entry
 * point holds the ctx's in-use flag like a call does. A ctx without a bot works here.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bot/client/client_int.h"
#include "bot/codec/codec.h"
#include "tgbot/codec.h"

/* Start a codec operation: no bot needed, nothing counted as a call. */
static void start(tg_ctx *ctx, const char *verb, const tg__type *t)
{
    tg__ctx_clear_error(ctx);
    snprintf(ctx->method, sizeof ctx->method, "%s %s", verb, t ? t->name : "?");
}

static tg_status decode_in(tg_ctx *ctx, const tg__type *t, const char *json, size_t len, void **out)
{
    start(ctx, "decode", t);
    if (!json && len)
        return tg__ctx_fail(ctx, TG_ERR_INVALID, "json: NULL with len %zu", len);
    char *copy = tg__arena_alloc_align(&ctx->arena, len + 1, 1);
    void *obj = copy ? tg__arena_alloc(&ctx->arena, t->size) : NULL;
    if (!obj)
        return tg__ctx_fail(ctx, TG_ERR_NOMEM, "no memory for %zu bytes of JSON", len);
    if (len)
        memcpy(copy, json, len);
    copy[len] = '\0';
    tg__jerr err = {0, UINT32_MAX, "", false};
    tg_status st = TG_ERR_DECODE;
    if (tg__json_parse(&ctx->doc, copy, len, &err) != 0)
        st = err.nomem ? TG_ERR_NOMEM : TG_ERR_DECODE;
    else
        st = tg__codec_decode(t, &ctx->doc, 0, &ctx->arena, obj, &err);
    if (st == TG_OK) {
        *out = obj;
        return TG_OK;
    }
    tg__buf_reset(&ctx->errpath);
    if (err.tok != UINT32_MAX)
        tg__json_path(&ctx->doc, err.tok, &ctx->errpath);
    const char *path = tg__buf_cstr(&ctx->errpath);
    return tg__ctx_fail(ctx, st, "%s%s%s (at byte %zu)", path, *path ? ": " : "", err.msg,
                        err.offset);
}

tg_status tg__decode_public(tg_ctx *ctx, const tg__type *t, const char *json, size_t len,
                            void **out)
{
    void *v = NULL;
    if (!tg__ctx_enter(ctx))
        return TG_ERR_INVALID;
    tg_status st = decode_in(ctx, t, json, len, &v);
    tg__ctx_leave(ctx);
    if (out)
        *out = v;
    return st;
}

static tg_status encode_in(tg_ctx *ctx, const tg__type *t, const void *v, char *buf, size_t cap,
                           size_t *len)
{
    start(ctx, "encode", t);
    if (!v)
        return tg__ctx_fail(ctx, TG_ERR_INVALID, "value: NULL");
    char why[256];
    tg__jw w;
    tg__buf_reset(&ctx->req);
    tg__jw_init(&w, &ctx->req);
    tg__codec_encode_why(t, v, &w, TG__ENC_KEEP_UNKNOWN, why, sizeof why);
    if (w.err == -ENOMEM)
        return tg__ctx_fail(ctx, TG_ERR_NOMEM, "out of memory while encoding");
    if (w.err == -EINVAL && why[0])
        return tg__ctx_fail(ctx, TG_ERR_INVALID, "%s", why);
    if (w.err == -E2BIG)
        return tg__ctx_fail(ctx, TG_ERR_TOO_BIG, "the JSON exceeds the encoder's cap");
    if (w.err)
        return tg__ctx_fail(ctx, TG_ERR_INVALID,
                            "cannot be encoded (NaN, infinity or nesting "
                            "too deep)");
    size_t n = ctx->req.len;
    if (len)
        *len = n;
    if (!buf || cap < n + 1)
        return tg__ctx_fail(ctx, TG_ERR_TOO_BIG,
                            "the JSON is %zu bytes; buf holds %zu (cap "
                            "must be at least len + 1)",
                            n, cap);
    memcpy(buf, ctx->req.data ? ctx->req.data : "", n);
    buf[n] = '\0';
    return TG_OK;
}

tg_status tg__encode_public(tg_ctx *ctx, const tg__type *t, const void *v, char *buf, size_t cap,
                            size_t *len)
{
    if (!tg__ctx_enter(ctx))
        return TG_ERR_INVALID;
    tg_status st = encode_in(ctx, t, v, buf, cap, len);
    tg__ctx_leave(ctx);
    return st;
}

/* The generic forms: an unknown type name is the caller's mistake, told through the ctx. */
static const tg__type *type_named(tg_ctx *ctx, const char *verb, const char *type)
{
    const tg__type *t = type ? tg__codec_type_by_name(type) : NULL;
    if (!t && tg__ctx_enter(ctx)) {
        start(ctx, verb, NULL);
        tg__ctx_fail(ctx, TG_ERR_INVALID,
                     "type: '%s' is not a Bot API type (tg_type_name lists "
                     "them)",
                     type ? type : "(null)");
        tg__ctx_leave(ctx);
    }
    return t;
}

TG_API tg_status tg_decode(tg_ctx *ctx, const char *type, const char *json, size_t len, void **out)
{
    if (out)
        *out = NULL;
    const tg__type *t = type_named(ctx, "decode", type);
    return t ? tg__decode_public(ctx, t, json, len, out) : TG_ERR_INVALID;
}

TG_API tg_status tg_encode(tg_ctx *ctx, const char *type, const void *v, char *buf, size_t cap,
                           size_t *len)
{
    const tg__type *t = type_named(ctx, "encode", type);
    return t ? tg__encode_public(ctx, t, v, buf, cap, len) : TG_ERR_INVALID;
}
