/*
 * call.c: the call path shared by tg_call_raw*, tg__call and getFile.
 *
 *   flood slot (send-like methods, when enabled)
 *   -> URL = api prefix + method (into the ctx's reused buffer)
 *   -> attempts: transport perform -> classify -> envelope {"ok":..., "result"|error}
 *      -> retry decision (retry.c) -> interruptible wait
 *
 * The response body is collected in ctx->resp (capped by max_response_bytes) and tokenized
 * once into ctx->doc; on success ctx->result_tok points at "result" for the caller to copy
 * (raw) or decode (generated methods). Nothing here allocates once the ctx is warm.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bot/client/client_int.h"
#include "bot/codec/codec.h"
#include "bot/codec/method.h"
#include "core/clock.h"
#include "core/str.h"

#define METHOD_MAX 63

size_t tg__resp_sink(void *user, const char *p, size_t n)
{
    tg_ctx *ctx = user;
    int rc = tg__buf_append(&ctx->resp, p, n);
    if (rc != 0) {
        ctx->too_big = true;
        ctx->sink_oom = rc == -ENOMEM;
        return 0;
    }
    return n;
}

char *tg__resp_room(void *user, size_t want, size_t *room)
{
    tg_ctx *ctx = user;
    size_t left = ctx->resp.max - ctx->resp.len;
    int rc = left ? tg__buf_reserve(&ctx->resp, want < left ? want : left) : -E2BIG;
    if (rc != 0) {
        ctx->too_big = true;
        ctx->sink_oom = rc == -ENOMEM;
        return NULL;
    }
    *room = want < left ? want : left;
    return ctx->resp.data + ctx->resp.len;
}

void tg__resp_commit(void *user, size_t n)
{
    tg_ctx *ctx = user;
    ctx->resp.len += n;
    ctx->resp.data[ctx->resp.len] = '\0';
}

static enum tg__outcome status_outcome(int http_status)
{
    return http_status >= 500 ? TG__OUT_5XX : TG__OUT_FATAL;
}

/* The answer is not a Bot API envelope: an HTTP error, or a broken 200. */
static tg_status not_envelope(tg_ctx *ctx, const tg__jerr *jerr, const char *why,
                              enum tg__outcome *out)
{
    *out = status_outcome(ctx->http_status);
    if (ctx->http_status != 200)
        return tg__ctx_fail(ctx, TG_ERR_HTTP,
                            "HTTP %d without a Bot API answer (%zu bytes) from %s%s",
                            ctx->http_status, ctx->resp.len, ctx->url_shown, ctx->url_shown_rest);
    if (jerr) {
        tg__buf_reset(&ctx->errpath);
        if (jerr->tok != UINT32_MAX)
            tg__json_path(&ctx->doc, jerr->tok, &ctx->errpath);
        return tg__ctx_fail(ctx, TG_ERR_DECODE, "the answer is not valid JSON: %s (at byte %zu)",
                            jerr->msg, jerr->offset);
    }
    return tg__ctx_fail(ctx, TG_ERR_DECODE, "the answer is not a Bot API reply: %s", why);
}

static void api_parameters(tg_ctx *ctx, uint32_t params)
{
    tg__jerr jerr;
    if (params == UINT32_MAX || ctx->doc.toks[params].type != TG__J_OBJECT)
        return;
    uint32_t t = tg__json_obj_get(&ctx->doc, params, "retry_after");
    if (t != UINT32_MAX)
        tg__json_get_i32(&ctx->doc, t, &ctx->err.retry_after, &jerr);
    t = tg__json_obj_get(&ctx->doc, params, "migrate_to_chat_id");
    if (t != UINT32_MAX)
        tg__json_get_i64(&ctx->doc, t, &ctx->err.migrate_to_chat_id, &jerr);
}

static tg_status api_error(tg_ctx *ctx, enum tg__outcome *out)
{
    tg__jerr jerr;
    const tg__jdoc *d = &ctx->doc;
    int32_t code = ctx->http_status;
    uint32_t t = tg__json_obj_get(d, 0, "error_code");
    if (t != UINT32_MAX)
        tg__json_get_i32(d, t, &code, &jerr);
    tg__buf_reset(&ctx->errdesc);
    t = tg__json_obj_get(d, 0, "description");
    if (t != UINT32_MAX && d->toks[t].type == TG__J_STRING &&
        tg__buf_reserve(&ctx->errdesc, d->toks[t].len + 1) == 0) {
        long n = tg__json_str_copy(d, t, ctx->errdesc.data, ctx->errdesc.cap);
        ctx->errdesc.len = n > 0 ? (size_t)n : 0;
        ctx->errdesc.data[ctx->errdesc.len] = '\0';
    }
    api_parameters(ctx, tg__json_obj_get(d, 0, "parameters"));
    ctx->err.error_code = code;
    *out = code == 429 ? TG__OUT_429 : status_outcome(code);
    char extra[1024] = "";
    if (code == 401 || code == 404) /* a wrong token and a wrong base_url look alike */
        snprintf(extra, sizeof extra, " (URL tried: %s%s%s)", ctx->url_shown, ctx->url_shown_rest,
                 ctx->url_shown == ctx->bot->api_shown ? "; check base_url and the token" : "");
    else if (ctx->err.retry_after && !strstr(tg__buf_cstr(&ctx->errdesc), "retry after"))
        snprintf(extra, sizeof extra, " (retry after %d s)", (int)ctx->err.retry_after);
    else if (ctx->err.migrate_to_chat_id)
        snprintf(extra, sizeof extra, " (migrated to chat %lld)",
                 (long long)ctx->err.migrate_to_chat_id);
    tg_status st = tg__ctx_fail(ctx, TG_ERR_API, "Bot API error %d: %s%s", (int)code,
                                ctx->errdesc.len ? ctx->errdesc.data : "(no description)", extra);
    ctx->err.error_code = code;
    return st;
}

tg_status tg__call_envelope(tg_ctx *ctx, bool keep_source, enum tg__outcome *out)
{
    tg__jerr jerr;
    tg__jdoc *d = &ctx->doc;
    const char *src = ctx->resp.data ? ctx->resp.data : "";
    if (keep_source && !(src = tg__arena_memdup(&ctx->arena, src, ctx->resp.len + 1))) {
        *out = TG__OUT_FATAL;
        return tg__ctx_fail(ctx, TG_ERR_NOMEM, "no memory for the answer (%zu bytes)",
                            ctx->resp.len);
    }
    if (tg__json_parse(d, src, ctx->resp.len, &jerr) != 0) {
        if (!jerr.nomem)
            return not_envelope(ctx, &jerr, NULL, out);
        *out = TG__OUT_FATAL;
        return tg__ctx_fail(ctx, TG_ERR_NOMEM, "no memory to parse the answer");
    }
    if (d->toks[0].type != TG__J_OBJECT)
        return not_envelope(ctx, NULL, "not a JSON object", out);
    uint32_t ok = tg__json_obj_get(d, 0, "ok");
    if (ok == UINT32_MAX || (d->toks[ok].type != TG__J_TRUE && d->toks[ok].type != TG__J_FALSE))
        return not_envelope(ctx, NULL, "\"ok\" is missing or not a boolean", out);
    if (d->toks[ok].type == TG__J_FALSE)
        return api_error(ctx, out);
    ctx->result_tok = tg__json_obj_get(d, 0, "result");
    if (ctx->result_tok == UINT32_MAX) {
        *out = TG__OUT_FATAL;
        tg__buf_reset(&ctx->errpath);
        tg__buf_puts(&ctx->errpath, "result");
        return tg__ctx_fail(ctx, TG_ERR_DECODE, "result: missing in an ok answer");
    }
    *out = TG__OUT_OK;
    return TG_OK;
}

tg_status tg__ctx_transport_error(tg_ctx *ctx, const tg_http_result *res, enum tg__outcome *out)
{
    *out = res->sent ? TG__OUT_LOST : TG__OUT_CONNECT;
    ctx->err.transport_code = res->code;
    switch (res->status) {
    case TG_ERR_CANCELLED:
        *out = TG__OUT_FATAL;
        return tg__ctx_fail(ctx, TG_ERR_CANCELLED, "cancelled during the request");
    case TG_ERR_TIMEOUT:
        return tg__ctx_fail(ctx, TG_ERR_TIMEOUT, "timed out %s: %s (transport code %d)",
                            res->sent ? "waiting for the answer" : "connecting", res->msg,
                            res->code);
    case TG_ERR_IO:
        *out = TG__OUT_FATAL;
        return tg__ctx_fail(ctx, TG_ERR_IO, "cannot read a file to upload: %s", res->msg);
    case TG_ERR_NOMEM:
        *out = TG__OUT_FATAL;
        return tg__ctx_fail(ctx, TG_ERR_NOMEM, "transport: %s", res->msg);
    default:
        return tg__ctx_fail(ctx, TG_ERR_TRANSPORT, "%s: %s (transport code %d)",
                            res->sent ? "connection lost" : "cannot connect", res->msg, res->code);
    }
}

static tg_status attempt_once(tg_ctx *ctx, const struct tg__call_req *r, enum tg__outcome *out)
{
    tg_http_request req = {
        .url = tg__buf_cstr(&ctx->url),
        .post = true,
        .body = r->body,
        .body_len = r->body_len,
        .fields = r->fields,
        .nfields = r->nfields,
        .files = r->files,
        .nfiles = r->nfiles,
        .timeout_ms = tg__ctx_timeout(ctx),
        .write = tg__resp_sink,
        .write_user = ctx,
    };
    tg_http_result res = {0};
    tg__buf_reset(&ctx->resp);
    ctx->too_big = ctx->sink_oom = false;
    ctx->http_status = 0;
    ctx->stats.requests++;
    ctx->bot->transport.perform(ctx->conn, &req, &res, tg__ctx_cancelled, ctx);
    ctx->stats.connects += res.connects;
    if (ctx->too_big && ctx->sink_oom) {
        *out = TG__OUT_FATAL;
        return tg__ctx_fail(ctx, TG_ERR_NOMEM, "no memory for the answer");
    }
    if (ctx->too_big) {
        *out = TG__OUT_FATAL;
        return tg__ctx_fail(ctx, TG_ERR_TOO_BIG, "the answer exceeds max_response_bytes (%zu)",
                            ctx->bot->max_response_bytes);
    }
    if (res.status != TG_OK)
        return tg__ctx_transport_error(ctx, &res, out);
    ctx->http_status = res.http_status;
    return tg__call_envelope(ctx, r->keep_source, out);
}

static int64_t username_key(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return (int64_t)(h | (1ull << 63)); /* negative: treated like a group id */
}

/* The chat a send-like call goes to: from the JSON body or the chat_id form field. */
bool tg__call_chat_key(tg_ctx *ctx, const struct tg__call_req *r, int64_t *key)
{
    char v[128];
    long n = -1;
    tg__jerr jerr;
    if (r->body && tg__json_parse(&ctx->doc, r->body, r->body_len, &jerr) == 0 &&
        ctx->doc.toks[0].type == TG__J_OBJECT) {
        uint32_t t = tg__json_obj_get(&ctx->doc, 0, "chat_id");
        if (t != UINT32_MAX && ctx->doc.toks[t].type == TG__J_NUMBER)
            return tg__json_get_i64(&ctx->doc, t, key, &jerr) == 0;
        if (t != UINT32_MAX && ctx->doc.toks[t].type == TG__J_STRING)
            n = tg__json_str_copy(&ctx->doc, t, v, sizeof v);
    }
    for (size_t i = 0; n < 0 && i < r->nfields; i++)
        if (strcmp(r->fields[i].name, "chat_id") == 0 && r->fields[i].len < sizeof v) {
            n = (long)r->fields[i].len;
            memcpy(v, r->fields[i].value, (size_t)n);
        }
    if (n <= 0)
        return false;
    if (tg__parse_i64(v, (size_t)n, key) != 0)
        *key = username_key(v, (size_t)n);
    return true;
}

static tg_status flood_wait(tg_ctx *ctx, const struct tg__call_req *r)
{
    tg_bot *bot = ctx->bot;
    int64_t key;
    if (!bot->flood.opt.enabled || !tg__flood_applies(r->method) || !tg__call_chat_key(ctx, r, &key))
        return TG_OK;
    int64_t now = (int64_t)(tg__now_ns() / 1000);
    int64_t at = tg__flood_reserve(&bot->flood, key, key < 0, now);
    if (at < 0)
        return tg__ctx_fail(
            ctx, TG_ERR_FLOOD, "flood control: no slot for chat %lld %s", (long long)key,
            bot->flood.opt.fail_fast ? "right now (fail-fast)" : "within max_wait_ms");
    if (at == now)
        return TG_OK;
    uint64_t ms = (uint64_t)(at - now + 999) / 1000;
    ctx->stats.flood_wait_ms += ms;
    if (tg__bot_sleep(bot, ctx, ms) != TG_OK)
        return tg__ctx_fail(ctx, TG_ERR_CANCELLED, "cancelled while waiting for flood control");
    return TG_OK;
}

tg_status tg__ctx_url(tg_ctx *ctx, const char *prefix, size_t prefix_len, const char *rest)
{
    tg__buf_reset(&ctx->url);
    ctx->url_shown = prefix == ctx->bot->file_prefix ? ctx->bot->file_shown : ctx->bot->api_shown;
    ctx->url_shown_rest = rest;
    if (tg__buf_append(&ctx->url, prefix, prefix_len) != 0 || tg__buf_puts(&ctx->url, rest) != 0)
        return tg__ctx_fail(ctx, TG_ERR_NOMEM, "cannot build the request URL");
    return TG_OK;
}

tg_status tg__defer_call(tg_ctx *ctx, const struct tg__call_req *r, bool wants_result)
{
    if (wants_result)
        return tg__ctx_fail(ctx, TG_ERR_INVALID,
                            "a handler on the event loop cannot wait for a result: pass NULL "
                            "for it (the call is queued) or use tg_hctx_call_then");
    if (r->nfields || r->nfiles || !r->body)
        return tg__ctx_fail(ctx, TG_ERR_INVALID,
                            "uploads cannot be queued from a handler on the event loop: "
                            "send files by file_id or URL, or through the tg_async_* calls");
    return ctx->defer(ctx->defer_user, ctx, r->method, r->body, r->body_len);
}

tg_status tg__call_exec(tg_ctx *ctx, const struct tg__call_req *r)
{
    tg_bot *bot = ctx->bot;
    if (ctx->defer) /* a path that needs the answer itself (getFile of a download...) */
        return tg__ctx_fail(ctx, TG_ERR_INVALID,
                            "this call blocks for its answer, which a handler on the event "
                            "loop must not do (use tg_hctx_call_then or tg_async_*)");
    const tg_retry_policy *p = ctx->has_policy ? &ctx->policy : &bot->retry;
    uint64_t t0 = tg__now_ms();
    tg_status st = flood_wait(ctx, r);
    if (st == TG_OK)
        st = tg__ctx_url(ctx, bot->api_prefix, bot->api_prefix_len, r->method);
    if (st == TG_OK)
        st = tg__ctx_conn(ctx);
    /* Bounded: tg__retry_wait_ms gives up once attempt reaches max_attempts. */
    for (uint32_t attempt = 1; st == TG_OK; attempt++) {
        enum tg__outcome out;
        st = attempt_once(ctx, r, &out);
        if (out == TG__OUT_OK) {
            if (attempt > 1)
                tg__ctx_clear_error(ctx);
            return TG_OK;
        }
        ctx->err.attempts = attempt;
        int64_t wait = tg__retry_wait_ms(p, out, attempt, tg__now_ms() - t0, ctx->err.retry_after,
                                         tg__ctx_random(ctx));
        if (wait < 0)
            return st;
        tg__log(&bot->log, TG__LOG_WARN, "%s (attempt %u); retrying in %lld ms",
                tg__buf_cstr(&ctx->errmsg), attempt, (long long)wait);
        ctx->stats.retries++;
        if (tg__bot_sleep(bot, ctx, (uint64_t)wait) != TG_OK) {
            st = tg__ctx_fail(ctx, TG_ERR_CANCELLED, "cancelled while waiting to retry");
            ctx->err.attempts = attempt;
            return st;
        }
        st = TG_OK;
    }
    return st;
}

static bool method_valid(const char *m)
{
    size_t n = 0;
    for (; m[n]; n++) {
        char c = m[n];
        if (n >= METHOD_MAX || !((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                                 (c >= '0' && c <= '9') || c == '_'))
            return false;
    }
    return n > 0;
}

/* Check the raw parameters are one JSON object; "{}" stands in for none. */
static tg_status raw_params(tg_ctx *ctx, const char **json, size_t *len)
{
    tg__jerr jerr;
    if (*json && *len == 0) /* 0 = a C string: its strlen (tgbot/client.h) */
        *len = strlen(*json);
    if (!*json || *len == 0) {
        *json = "{}";
        *len = 2;
    }
    if (tg__json_parse(&ctx->doc, *json, *len, &jerr) != 0)
        return tg__ctx_fail(ctx, jerr.nomem ? TG_ERR_NOMEM : TG_ERR_INVALID,
                            "params: not valid JSON: %s (at byte %zu)", jerr.msg, jerr.offset);
    if (ctx->doc.toks[0].type != TG__J_OBJECT)
        return tg__ctx_fail(ctx, TG_ERR_INVALID, "params: expected a JSON object, found %s",
                            tg__json_type_name((tg__jtype)ctx->doc.toks[0].type));
    return TG_OK;
}

/* For a method this library knows, its required parameters must be in the parsed params
 * (ctx->doc, not null) or be one of the file parts: the same rule as the typed calls. */
static tg_status raw_required(tg_ctx *ctx, const char *method, const tg_file_part *files,
                              size_t nfiles)
{
    const tg__method *m = tg__codec_method_by_name(method);
    const tg__type *t = m ? m->params_desc : NULL;
    for (uint16_t i = 0; t && i < t->nfields; i++) {
        const tg__field *f = &t->fields[i];
        if (f->flags & TG__F_OPT)
            continue;
        uint32_t v = tg__json_obj_get(&ctx->doc, 0, f->name);
        bool found = v != UINT32_MAX && ctx->doc.toks[v].type != TG__J_NULL;
        for (size_t k = 0; !found && k < nfiles; k++)
            found = files[k].name && strcmp(files[k].name, f->name) == 0;
        if (!found)
            return tg__ctx_fail(ctx, TG_ERR_INVALID, "params: required parameter %s is missing",
                                f->name);
    }
    return TG_OK;
}

static tg_status raw_result(tg_ctx *ctx, const char **result, size_t *result_len)
{
    size_t n;
    const char *raw = tg__json_raw(&ctx->doc, ctx->result_tok, &n);
    char *copy = tg__arena_strndup(&ctx->arena, raw, n);
    if (!copy)
        return tg__ctx_fail(ctx, TG_ERR_NOMEM, "cannot copy the result (%zu bytes)", n);
    if (result)
        *result = copy;
    if (result_len)
        *result_len = n;
    return TG_OK;
}

static tg_status raw_begin(tg_ctx *ctx, const char *method)
{
    if (!method || !method_valid(method)) {
        tg__ctx_begin(ctx, "call");
        return tg__ctx_fail(ctx, TG_ERR_INVALID,
                            "method: expected a Bot API method name of [A-Za-z0-9_]");
    }
    return tg__ctx_begin(ctx, method);
}

tg_status tg__raw_prepare(tg_ctx *ctx, const char *method, const char **json_params, size_t *len)
{
    tg_status st = raw_begin(ctx, method);
    if (st == TG_OK)
        st = raw_params(ctx, json_params, len);
    if (st == TG_OK)
        st = raw_required(ctx, method, NULL, 0);
    return st;
}

tg_status tg__raw_result(tg_ctx *ctx, const char **result, size_t *result_len)
{
    return raw_result(ctx, result, result_len);
}

static tg_status call_raw(tg_ctx *ctx, const char *method, const char *json_params, size_t len,
                          const char **result_json, size_t *result_len)
{
    if (!ctx)
        return TG_ERR_INVALID;
    tg_status st = tg__raw_prepare(ctx, method, &json_params, &len);
    if (st != TG_OK)
        return st;
    struct tg__call_req r = {.method = method, .body = json_params, .body_len = len};
    if (ctx->defer)
        return tg__defer_call(ctx, &r, result_json || result_len);
    st = tg__call_exec(ctx, &r);
    return st == TG_OK ? raw_result(ctx, result_json, result_len) : st;
}

TG_API tg_status tg_call_raw(tg_ctx *ctx, const char *method, const char *json_params, size_t len,
                             const char **result_json, size_t *result_len)
{
    if (!tg__ctx_enter(ctx))
        return TG_ERR_INVALID;
    tg_status st = call_raw(ctx, method, json_params, len, result_json, result_len);
    tg__ctx_leave(ctx);
    return st;
}

tg_status tg__check_files(tg_ctx *ctx, const tg_file_part *files, size_t nfiles)
{
    for (size_t i = 0; i < nfiles; i++) {
        const tg_file_part *f = &files[i];
        int sources = (f->path != NULL) + (f->data != NULL) + (f->read != NULL);
        if (!f->name || !*f->name)
            return tg__ctx_fail(ctx, TG_ERR_INVALID, "files[%zu]: name is missing", i);
        if (sources != 1)
            return tg__ctx_fail(ctx, TG_ERR_INVALID,
                                "files[%zu] (%s): give exactly one of path, data, read", i,
                                f->name);
        if (f->path) {
            FILE *fp = fopen(f->path, "rb");
            if (!fp)
                return tg__ctx_fail(ctx, TG_ERR_IO, "files[%zu] (%s): cannot open %s", i, f->name,
                                    f->path);
            fclose(fp);
        }
    }
    return TG_OK;
}

static tg_status call_raw_files(tg_ctx *ctx, const char *method, const char *json_params,
                                size_t len, const tg_file_part *files, size_t nfiles,
                                const char **result_json, size_t *result_len)
{
    if (!ctx)
        return TG_ERR_INVALID;
    tg_form_field *fields = NULL;
    size_t nfields = 0;
    tg_status st = raw_begin(ctx, method);
    if (st != TG_OK)
        return st;
    if (nfiles && !files)
        return tg__ctx_fail(ctx, TG_ERR_INVALID, "files: NULL with nfiles > 0");
    st = tg__check_files(ctx, files, nfiles);
    if (st == TG_OK && json_params && len)
        st = tg__json_to_fields(ctx, json_params, len, &fields, &nfields);
    else if (st == TG_OK)
        st = raw_params(ctx, &json_params, &len);
    if (st == TG_OK) /* ctx->doc holds the params' parse either way */
        st = raw_required(ctx, method, files, nfiles);
    if (st != TG_OK)
        return st;
    struct tg__call_req r = {
        .method = method, .fields = fields, .nfields = nfields, .files = files, .nfiles = nfiles};
    if (nfields + nfiles == 0) {
        r.body = "{}";
        r.body_len = 2;
    }
    st = tg__call_exec(ctx, &r);
    return st == TG_OK ? raw_result(ctx, result_json, result_len) : st;
}

TG_API tg_status tg_call_raw_files(tg_ctx *ctx, const char *method, const char *json_params,
                                   size_t len, const tg_file_part *files, size_t nfiles,
                                   const char **result_json, size_t *result_len)
{
    if (!tg__ctx_enter(ctx))
        return TG_ERR_INVALID;
    tg_status st =
        call_raw_files(ctx, method, json_params, len, files, nfiles, result_json, result_len);
    tg__ctx_leave(ctx);
    return st;
}

tg_status tg__json_to_fields(tg_ctx *ctx, const char *json, size_t len, tg_form_field **fields,
                             size_t *n)
{
    tg_status st = raw_params(ctx, &json, &len);
    if (st != TG_OK)
        return st;
    const tg__jdoc *d = &ctx->doc;
    uint32_t count = d->toks[0].count;
    tg_form_field *f = tg__arena_alloc(&ctx->arena, (count ? count : 1) * sizeof *f);
    if (!f)
        return tg__ctx_fail(ctx, TG_ERR_NOMEM, "params: no memory for %u form fields", count);
    uint32_t t = 1;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t v = t + 1;
        size_t vlen;
        f[i].name = tg__json_str_dup(d, t, &ctx->arena, NULL);
        if (d->toks[v].type == TG__J_STRING) {
            f[i].value = tg__json_str_dup(d, v, &ctx->arena, &vlen);
        } else {
            const char *raw = tg__json_raw(d, v, &vlen);
            f[i].value = tg__arena_strndup(&ctx->arena, raw, vlen);
        }
        f[i].len = vlen;
        if (!f[i].name || !f[i].value)
            return tg__ctx_fail(ctx, TG_ERR_NOMEM, "params: no memory for form field %u", i);
        t = d->toks[v].next;
    }
    *fields = f;
    *n = count;
    return TG_OK;
}
