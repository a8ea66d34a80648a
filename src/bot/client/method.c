/*
 * method.c: tg__call, the one function every generated method wrapper calls.
 *
 * It follows the contract in src/bot/codec/method.h: required parameters are checked before
 * anything is sent; params are encoded to JSON into the ctx's reused request buffer; when an
 * upload is reachable (a path or bytes in an InputFile) the JSON's top-level members become
 * form fields and each upload a file part, named as the codec reports them (so attach://
 * references in InputMedia agree); the answer is parsed from an arena copy, because decoded
 * objects keep spans of their raw JSON, and "result" is decoded into out in the ctx arena.
 */
#include <errno.h>
#include <string.h>

#include "bot/client/client_int.h"
#include "tgbot/keyboard.h"
#include "bot/codec/method.h"

#define MAX_UPLOADS 64 /* per call; the Bot API takes at most 10 media plus thumbnails */

struct uploads {
    tg_ctx *ctx;
    tg_file_part *parts;
    size_t n;
};

static int collect_upload(void *ud, const char *part, const tg_input_file *f)
{
    struct uploads *u = ud;
    if (u->n == MAX_UPLOADS)
        return -1;
    tg_file_part *p = &u->parts[u->n];
    memset(p, 0, sizeof *p);
    p->name = tg__arena_strdup(&u->ctx->arena, part);
    p->filename = f->filename;
    p->content_type = f->mime_type;
    if (f->kind == TG_INPUT_FILE_PATH) {
        p->path = f->str;
    } else {
        p->data = f->data ? f->data : "";
        p->len = f->len;
    }
    if (!p->name)
        return -2;
    u->n++;
    return 0;
}

static tg_status encode(tg_ctx *ctx, const tg__method *m, const void *params)
{
    tg__jw w;
    char why[256];
    tg__buf_reset(&ctx->req);
    tg__jw_init(&w, &ctx->req);
    tg__codec_encode_params(m, params, tg__bot_defaults(ctx->bot), &w, why, sizeof why);
    if (w.err == 0)
        return TG_OK;
    if (w.err == -ENOMEM)
        return tg__ctx_fail(ctx, TG_ERR_NOMEM, "params: out of memory while encoding");
    /* A keyboard refused by its check (tgbot/keyboard.h) is poisoned so that it cannot be
     * encoded; its own reason, on this thread, says more than the encoder can. */
    if (w.err == -EINVAL && strstr(why, "tg_keyboard_errmsg") && tg_keyboard_errmsg()[0])
        return tg__ctx_fail(ctx, TG_ERR_INVALID, "params: reply_markup: %s",
                            tg_keyboard_errmsg());
    if (w.err == -EINVAL && why[0])
        return tg__ctx_fail(ctx, TG_ERR_INVALID, "params: %s", why);
    if (w.err == -E2BIG)
        return tg__ctx_fail(ctx, TG_ERR_INVALID, "params: cannot be encoded as JSON (too large)");
    return tg__ctx_fail(ctx, TG_ERR_INVALID,
                        "params: cannot be encoded as JSON (NaN, infinity, an enum or union "
                        "value that is not valid, e.g. a keyboard refused by a check: see "
                        "tg_keyboard_errmsg(), or nesting too deep)");
}

static tg_status prepare_uploads(tg_ctx *ctx, const tg__method *m, const void *params,
                                 struct tg__call_req *r)
{
    struct uploads u = {.ctx = ctx};
    if (!m->has_input_files || !params)
        return TG_OK;
    u.parts = tg__arena_alloc(&ctx->arena, MAX_UPLOADS * sizeof *u.parts);
    if (!u.parts)
        return tg__ctx_fail(ctx, TG_ERR_NOMEM, "no memory for the upload list");
    int rc = tg__codec_foreach_file(m, params, collect_upload, &u);
    if (rc == -1)
        return tg__ctx_fail(ctx, TG_ERR_INVALID, "params: more than %d files to upload",
                            MAX_UPLOADS);
    if (rc != 0)
        return tg__ctx_fail(ctx, TG_ERR_NOMEM, "no memory for the upload list");
    if (u.n == 0)
        return TG_OK;
    tg_status st = tg__check_files(ctx, u.parts, u.n);
    tg_form_field *fields = NULL;
    size_t nfields = 0;
    if (st == TG_OK)
        st = tg__json_to_fields(ctx, ctx->req.data, ctx->req.len, &fields, &nfields);
    if (st != TG_OK)
        return st;
    r->body = NULL;
    r->body_len = 0;
    r->fields = fields;
    r->nfields = nfields;
    r->files = u.parts;
    r->nfiles = u.n;
    return TG_OK;
}

tg_status tg__method_decode(tg_ctx *ctx, const tg__method *m, void *out)
{
    tg__jerr jerr = {.tok = UINT32_MAX};
    tg_status st = tg__codec_decode_result(m, &ctx->doc, ctx->result_tok, &ctx->arena, out, &jerr);
    if (st == TG_ERR_NOMEM)
        return tg__ctx_fail(ctx, TG_ERR_NOMEM, "no memory to decode the result");
    if (st == TG_OK)
        return TG_OK;
    tg__buf_reset(&ctx->errpath);
    tg__json_path(&ctx->doc, jerr.tok != UINT32_MAX ? jerr.tok : ctx->result_tok, &ctx->errpath);
    return tg__ctx_fail(ctx, TG_ERR_DECODE, "%s: %s", tg__buf_cstr(&ctx->errpath), jerr.msg);
}

tg_status tg__method_prepare(tg_ctx *ctx, const tg__method *m, const void *params,
                             struct tg__call_req *r)
{
    if (!m || !m->name)
        return tg__ctx_fail(ctx, TG_ERR_INVALID, "no method given");
    tg_status st = tg__ctx_begin(ctx, m->name);
    if (st != TG_OK)
        return st;
    const char *missing = tg__codec_missing_param(m, params);
    if (missing)
        return tg__ctx_fail(ctx, TG_ERR_INVALID, "params: required parameter %s is missing",
                            missing);
    st = encode(ctx, m, params);
    *r = (struct tg__call_req){
        .method = m->name, .body = ctx->req.data, .body_len = ctx->req.len, .keep_source = true};
    if (st == TG_OK)
        st = prepare_uploads(ctx, m, params, r);
    return st;
}

static tg_status call_method(tg_ctx *ctx, const tg__method *m, const void *params, void *out)
{
    if (!ctx)
        return TG_ERR_INVALID;
    struct tg__call_req r;
    tg_status st = tg__method_prepare(ctx, m, params, &r);
    if (st == TG_OK && ctx->defer)
        return tg__defer_call(ctx, &r, out != NULL);
    if (st == TG_OK)
        st = tg__call_exec(ctx, &r);
    if (st == TG_OK)
        st = tg__method_decode(ctx, m, out);
    return st;
}

tg_status tg__call(tg_ctx *ctx, const tg__method *m, const void *params, void *out)
{
    if (!tg__ctx_enter(ctx))
        return TG_ERR_INVALID;
    tg_status st = call_method(ctx, m, params, out);
    tg__ctx_leave(ctx);
    return st;
}
