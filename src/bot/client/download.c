/*
 * download.c: getFile and fetching files to a path, to memory (capped) or to a callback.
 *
 * A download is a GET of <base>/file/bot<token>/<file_path> through the ctx's transport
 * connection. The body reaches the caller's sink only when the status is 200; any other
 * answer is kept (capped) in ctx->resp so the error can quote Telegram's description. A
 * local Bot API server (--local) hands out absolute paths on its own disk: those are read
 * from the file system directly. Only failures before anything was written are retried,
 * since the sink may have consumed part of the file.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bot/client/client_int.h"
#include "core/alloc.h"
#include "core/clock.h"

#define DEFAULT_MEMORY_CAP ((size_t)20 << 20) /* bytes: the Bot API's download limit */
#define LOCAL_CHUNK        65536              /* bytes */
#define ERROR_BODY_MAX     65536              /* bytes kept of a non-200 answer */

struct dl {
    tg_ctx *ctx;
    tg_write_fn fn;
    void *user;
    int status;
    bool sink_failed;
};

static void dl_status(void *user, int status)
{
    struct dl *d = user;
    d->status = status;
}

static size_t dl_write(void *user, const char *p, size_t n)
{
    struct dl *d = user;
    if (d->status != 200) {
        size_t room = ERROR_BODY_MAX - d->ctx->resp.len;
        tg__buf_append(&d->ctx->resp, p, n < room ? n : room);
        return n;
    }
    if (d->fn(d->user, p, n) != n) {
        d->sink_failed = true;
        return 0;
    }
    return n;
}

/* A non-200 answer: the same envelope parser as calls (TG_ERR_API with error_code and
 * retry_after when Telegram explains, else TG_ERR_HTTP naming the URL). */
static tg_status dl_http_error(tg_ctx *ctx, int status)
{
    enum tg__outcome out;
    ctx->http_status = status;
    tg_status st = tg__call_envelope(ctx, false, &out);
    if (st == TG_OK)
        return tg__ctx_fail(ctx, TG_ERR_HTTP, "HTTP %d with an \"ok\" answer from %s%s", status,
                            ctx->url_shown, ctx->url_shown_rest);
    return st;
}

static tg_status dl_local(tg_ctx *ctx, const char *path, struct dl *d)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return tg__ctx_fail(ctx, TG_ERR_IO, "cannot open the local file %s: %s", path,
                            strerror(errno));
    char *chunk = tg__malloc(LOCAL_CHUNK);
    tg_status st = chunk ? TG_OK : tg__ctx_fail(ctx, TG_ERR_NOMEM, "no memory for a chunk");
    d->status = 200;
    size_t got;
    while (st == TG_OK && (got = fread(chunk, 1, LOCAL_CHUNK, f)) > 0) {
        if (tg__ctx_cancelled(ctx))
            st = tg__ctx_fail(ctx, TG_ERR_CANCELLED, "cancelled while reading %s", path);
        else if (dl_write(d, chunk, got) != got)
            st = TG_ERR_IO; /* the caller words the sink's failure */
    }
    if (st == TG_OK && ferror(f))
        st = tg__ctx_fail(ctx, TG_ERR_IO, "cannot read the local file %s", path);
    tg__free(chunk);
    fclose(f);
    return st;
}

static tg_status dl_remote(tg_ctx *ctx, const char *file_path, struct dl *d)
{
    tg_bot *bot = ctx->bot;
    const tg_retry_policy *p = ctx->has_policy ? &ctx->policy : &bot->retry;
    tg_status st = tg__ctx_url(ctx, bot->file_prefix, bot->file_prefix_len, file_path);
    if (st == TG_OK)
        st = tg__ctx_conn(ctx);
    uint64_t t0 = tg__now_ms();
    for (uint32_t attempt = 1; st == TG_OK; attempt++) {
        tg_http_request req = {.url = tg__buf_cstr(&ctx->url),
                               .timeout_ms = tg__ctx_timeout(ctx),
                               .write = dl_write,
                               .write_user = d,
                               .on_status = dl_status};
        tg_http_result res = {0};
        enum tg__outcome out;
        tg__buf_reset(&ctx->resp);
        d->status = 0;
        ctx->stats.requests++;
        bot->transport.perform(ctx->conn, &req, &res, tg__ctx_cancelled, ctx);
        ctx->stats.connects += res.connects;
        ctx->err.attempts = attempt;
        if (d->sink_failed)
            return TG_ERR_IO;
        if (res.status == TG_OK)
            return res.http_status == 200 ? TG_OK : dl_http_error(ctx, res.http_status);
        st = tg__ctx_transport_error(ctx, &res, &out);
        if (out != TG__OUT_CONNECT)
            return st;
        int64_t wait =
            tg__retry_wait_ms(p, out, attempt, tg__now_ms() - t0, 0, tg__ctx_random(ctx));
        if (wait < 0)
            return st;
        if (tg__bot_sleep(bot, ctx, (uint64_t)wait) != TG_OK)
            return tg__ctx_fail(ctx, TG_ERR_CANCELLED, "cancelled while waiting to retry");
        st = TG_OK;
    }
    return st;
}

static tg_status dl_run(tg_ctx *ctx, const char *file_path, struct dl *d)
{
    tg_status st = tg__ctx_begin(ctx, "download");
    if (st != TG_OK)
        return st;
    if (ctx->defer)
        return tg__ctx_fail(ctx, TG_ERR_INVALID,
                            "a download blocks, which a handler on the event loop must not do");
    if (!file_path || !*file_path || strstr(file_path, "..") || strpbrk(file_path, " \r\n?#"))
        return tg__ctx_fail(ctx, TG_ERR_INVALID,
                            "file_path: expected the path getFile returned, without spaces, "
                            "'..', '?' or '#'");
    if (file_path[0] == '/')
        return dl_local(ctx, file_path, d);
    return dl_remote(ctx, file_path, d);
}

static tg_status download_to_fn(tg_ctx *ctx, const char *file_path, tg_write_fn fn, void *user)
{
    if (!ctx)
        return TG_ERR_INVALID;
    if (!fn) {
        tg__ctx_begin(ctx, "download");
        return tg__ctx_fail(ctx, TG_ERR_INVALID, "fn: the write callback is missing");
    }
    struct dl d = {.ctx = ctx, .fn = fn, .user = user};
    tg_status st = dl_run(ctx, file_path, &d);
    if (st == TG_ERR_IO && d.sink_failed && ctx->err.status == TG_OK)
        st = tg__ctx_fail(ctx, TG_ERR_IO, "the write callback stopped the download");
    return st;
}

TG_API tg_status tg_download_to_fn(tg_ctx *ctx, const char *file_path, tg_write_fn fn, void *user)
{
    if (!tg__ctx_enter(ctx))
        return TG_ERR_INVALID;
    tg_status st = download_to_fn(ctx, file_path, fn, user);
    tg__ctx_leave(ctx);
    return st;
}

static size_t file_sink(void *user, const char *p, size_t n)
{
    return fwrite(p, 1, n, user);
}

static tg_status download_to_path(tg_ctx *ctx, const char *file_path, const char *dest)
{
    if (!ctx)
        return TG_ERR_INVALID;
    if (!dest || !*dest) {
        tg__ctx_begin(ctx, "download");
        return tg__ctx_fail(ctx, TG_ERR_INVALID, "dest: the destination path is missing");
    }
    FILE *f = fopen(dest, "wb");
    if (!f) {
        tg__ctx_begin(ctx, "download");
        return tg__ctx_fail(ctx, TG_ERR_IO, "cannot create %s: %s", dest, strerror(errno));
    }
    struct dl d = {.ctx = ctx, .fn = file_sink, .user = f};
    tg_status st = dl_run(ctx, file_path, &d);
    if (fclose(f) != 0 && st == TG_OK)
        st = TG_ERR_IO, d.sink_failed = true;
    if (st == TG_ERR_IO && d.sink_failed && ctx->err.status == TG_OK)
        st = tg__ctx_fail(ctx, TG_ERR_IO, "cannot write %s", dest);
    if (st != TG_OK)
        unlink(dest);
    return st;
}

TG_API tg_status tg_download_to_path(tg_ctx *ctx, const char *file_path, const char *dest)
{
    if (!tg__ctx_enter(ctx))
        return TG_ERR_INVALID;
    tg_status st = download_to_path(ctx, file_path, dest);
    tg__ctx_leave(ctx);
    return st;
}

static size_t mem_sink(void *user, const char *p, size_t n)
{
    return tg__buf_append(user, p, n) == 0 ? n : 0;
}

static tg_status download_to_memory(tg_ctx *ctx, const char *file_path, size_t max_bytes,
                                    const void **data, size_t *len)
{
    if (!ctx)
        return TG_ERR_INVALID;
    tg__buf b;
    size_t cap = max_bytes ? max_bytes : DEFAULT_MEMORY_CAP;
    tg__buf_init(&b, cap);
    struct dl d = {.ctx = ctx, .fn = mem_sink, .user = &b};
    tg_status st = dl_run(ctx, file_path, &d);
    if (st == TG_ERR_IO && d.sink_failed && ctx->err.status == TG_OK)
        st = tg__ctx_fail(ctx, TG_ERR_TOO_BIG, "the file exceeds max_bytes (%zu)", cap);
    char *copy = NULL;
    if (st == TG_OK) {
        copy = tg__arena_strndup(&ctx->arena, tg__buf_cstr(&b), b.len);
        if (!copy)
            st = tg__ctx_fail(ctx, TG_ERR_NOMEM, "no memory for %zu bytes", b.len);
    }
    if (st == TG_OK) {
        if (data)
            *data = copy;
        if (len)
            *len = b.len;
    }
    tg__buf_cleanup(&b);
    return st;
}

TG_API tg_status tg_download_to_memory(tg_ctx *ctx, const char *file_path, size_t max_bytes,
                                       const void **data, size_t *len)
{
    if (!tg__ctx_enter(ctx))
        return TG_ERR_INVALID;
    tg_status st = download_to_memory(ctx, file_path, max_bytes, data, len);
    tg__ctx_leave(ctx);
    return st;
}

static tg_status get_file_path(tg_ctx *ctx, const char *file_id, const char **file_path)
{
    if (!ctx)
        return TG_ERR_INVALID;
    tg_status st = tg__ctx_begin(ctx, "getFile");
    if (st != TG_OK)
        return st;
    if (!file_id || !*file_id)
        return tg__ctx_fail(ctx, TG_ERR_INVALID, "file_id: missing");
    tg__jw w;
    tg__buf_reset(&ctx->req);
    tg__jw_init(&w, &ctx->req);
    tg__jw_obj_begin(&w);
    TG__JW_KEY(&w, "file_id");
    tg__jw_str(&w, file_id);
    tg__jw_obj_end(&w);
    if (w.err)
        return tg__ctx_fail(ctx, TG_ERR_INVALID, "file_id: cannot be encoded");
    struct tg__call_req r = {.method = "getFile", .body = ctx->req.data, .body_len = ctx->req.len};
    st = tg__call_exec(ctx, &r);
    if (st != TG_OK)
        return st;
    const tg__jdoc *d = &ctx->doc;
    uint32_t t = d->toks[ctx->result_tok].type == TG__J_OBJECT
                     ? tg__json_obj_get(d, ctx->result_tok, "file_path")
                     : UINT32_MAX;
    if (t == UINT32_MAX || d->toks[t].type != TG__J_STRING) {
        tg__buf_reset(&ctx->errpath);
        tg__buf_puts(&ctx->errpath, "result.file_path");
        return tg__ctx_fail(ctx, TG_ERR_DECODE,
                            "result.file_path: missing (is the file over the download limit?)");
    }
    char *path = tg__json_str_dup(d, t, &ctx->arena, NULL);
    if (!path)
        return tg__ctx_fail(ctx, TG_ERR_NOMEM, "no memory for the file path");
    if (file_path)
        *file_path = path;
    return TG_OK;
}

TG_API tg_status tg_get_file_path(tg_ctx *ctx, const char *file_id, const char **file_path)
{
    if (!tg__ctx_enter(ctx))
        return TG_ERR_INVALID;
    tg_status st = get_file_path(ctx, file_id, file_path);
    tg__ctx_leave(ctx);
    return st;
}
