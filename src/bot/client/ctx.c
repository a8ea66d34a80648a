/*
 * ctx.c: tg_ctx, the per-thread half of the client, and the last error of its calls.
 *
 * A ctx keeps everything a call needs warm: the arena results are decoded into, the request
 * and response buffers, the JSON token array and the transport connection. None of them is
 * released between calls, so a steady stream of calls allocates nothing here.
 *
 * Errors: tg__ctx_fail() formats "<method>: <detail>" once, scrubs the token out of it
 * (details may quote a server's or curl's words) and fills the structured tg_error_info.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "bot/client/client_int.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "core/sized.h"

#define ERRMSG_MAX 2048 /* bytes */
#define MISUSE_MSG                                                                                 \
    "tg_ctx used by two threads at once: a tg_ctx belongs to one thread at a time; give each "     \
    "thread its own (tg_ctx_new), the tg_bot may be shared"

#define URL_MAX 8192 /* bytes */

/* The logger of ctx's bot; NULL (stderr at the default level) for a codec-only ctx. */
static tg__logger *ctx_log(const tg_ctx *ctx)
{
    return ctx->bot ? &ctx->bot->log : NULL;
}

TG_API tg_ctx *tg_ctx_new(tg_bot *bot)
{
    tg_ctx *ctx = tg__calloc(1, sizeof *ctx);
    if (!ctx)
        return NULL;
    size_t max_bytes = bot ? bot->max_response_bytes : 0; /* 0: the JSON defaults */
    ctx->bot = bot;
    tg__arena_init(&ctx->arena, 0, 0);
    tg__buf_init(&ctx->req, 0);
    tg__buf_init(&ctx->resp, max_bytes);
    tg__buf_init(&ctx->url, URL_MAX);
    tg__buf_init(&ctx->errmsg, ERRMSG_MAX);
    tg__buf_init(&ctx->errdesc, ERRMSG_MAX);
    tg__buf_init(&ctx->errpath, ERRMSG_MAX);
    tg__jdoc_init(&ctx->doc, &(tg__jlimits){.max_bytes = max_bytes});
    atomic_init(&ctx->cancel, false);
    atomic_flag_clear(&ctx->busy);
    atomic_init(&ctx->misused, false);
    ctx->rnd = (uint32_t)(tg__now_ns() ^ (uintptr_t)ctx) | 1u;
    ctx->err.method = ctx->method;
    ctx->err.description = "";
    ctx->err.json_path = "";
    return ctx;
}

TG_API void tg_ctx_free(tg_ctx *ctx)
{
    if (!ctx)
        return;
    if (ctx->conn) /* only a ctx with a bot connects */
        ctx->bot->transport.conn_free(ctx->conn);
    if (ctx->url.data)
        memset(ctx->url.data, 0, ctx->url.cap);
    tg__arena_cleanup(&ctx->arena);
    tg__buf_cleanup(&ctx->req);
    tg__buf_cleanup(&ctx->resp);
    tg__buf_cleanup(&ctx->url);
    tg__buf_cleanup(&ctx->errmsg);
    tg__buf_cleanup(&ctx->errdesc);
    tg__buf_cleanup(&ctx->errpath);
    tg__jdoc_cleanup(&ctx->doc);
    tg__free(ctx);
}

void tg__ctx_clear_error(tg_ctx *ctx)
{
    memset(&ctx->err, 0, sizeof ctx->err);
    ctx->err.method = ctx->method;
    ctx->err.description = "";
    ctx->err.json_path = "";
    tg__buf_reset(&ctx->errmsg);
    tg__buf_reset(&ctx->errdesc);
    tg__buf_reset(&ctx->errpath);
}

bool tg__ctx_enter(tg_ctx *ctx)
{
    if (!ctx)
        return false;
    if (!atomic_flag_test_and_set_explicit(&ctx->busy, memory_order_acquire)) {
        atomic_store_explicit(&ctx->misused, false, memory_order_relaxed);
        return true;
    }
    /* The other thread owns every field but these atomics: touch nothing else. */
    atomic_store_explicit(&ctx->misused, true, memory_order_relaxed);
    tg__log(ctx_log(ctx), TG__LOG_ERROR, "%s", MISUSE_MSG);
    return false;
}

void tg__ctx_leave(tg_ctx *ctx)
{
    atomic_flag_clear_explicit(&ctx->busy, memory_order_release);
}

void tg__ctx_set_defer(tg_ctx *ctx, tg__ctx_defer_fn fn, void *user)
{
    ctx->defer = fn;
    ctx->defer_user = user;
}

TG_API void tg_ctx_reset(tg_ctx *ctx)
{
    if (!tg__ctx_enter(ctx))
        return;
    if (ctx->bot && ctx->bot->debug_arena)
        tg__arena_poison(&ctx->arena, 0xA5);
    tg__arena_reset(&ctx->arena);
    tg__ctx_clear_error(ctx);
    ctx->method[0] = '\0';
    atomic_store(&ctx->cancel, false);
    tg__ctx_leave(ctx);
}

TG_API tg_bot *tg_ctx_bot(const tg_ctx *ctx)
{
    return ctx ? ctx->bot : NULL;
}

TG_API void tg_ctx_set_retry_policy(tg_ctx *ctx, const tg_retry_policy *policy)
{
    if (!ctx)
        return;
    ctx->has_policy = policy != NULL;
    if (policy)
        tg__retry_resolve(policy, &ctx->policy);
}

TG_API void tg_ctx_set_timeout(tg_ctx *ctx, uint32_t timeout_ms)
{
    if (ctx)
        ctx->timeout_ms = timeout_ms;
}

uint32_t tg__ctx_timeout(const tg_ctx *ctx)
{
    return ctx->timeout_ms ? ctx->timeout_ms : ctx->bot->timeout_ms;
}

TG_API void tg_ctx_cancel(tg_ctx *ctx)
{
    if (!ctx)
        return;
    atomic_store(&ctx->cancel, true);
    if (ctx->bot)
        tg__bot_wake(ctx->bot);
}

bool tg__ctx_cancelled(void *p)
{
    tg_ctx *ctx = p;
    return atomic_load_explicit(&ctx->cancel, memory_order_relaxed) ||
           atomic_load_explicit(&ctx->bot->shutdown, memory_order_relaxed);
}

static bool misused(const tg_ctx *ctx)
{
    return atomic_load_explicit(&((tg_ctx *)ctx)->misused, memory_order_relaxed);
}

TG_API const char *tg_ctx_errmsg(const tg_ctx *ctx)
{
    if (!ctx)
        return "no context";
    return misused(ctx) ? MISUSE_MSG : tg__buf_cstr(&ctx->errmsg);
}

TG_API tg_status tg_ctx_status(const tg_ctx *ctx)
{
    return !ctx || misused(ctx) ? TG_ERR_INVALID : ctx->err.status;
}

TG_API const tg_error_info *tg_ctx_error(const tg_ctx *ctx)
{
    static const tg_error_info misuse = {
        .status = TG_ERR_INVALID, .method = "", .description = "", .json_path = ""};
    if (!ctx)
        return NULL;
    return misused(ctx) ? &misuse : &ctx->err;
}

TG_API void tg_ctx_get_stats_sized(const tg_ctx *ctx, tg_ctx_stats *out, size_t out_size)
{
    if (ctx)
        tg__sized_out(out, out_size, &ctx->stats, sizeof ctx->stats);
}

/* Once per ctx: results pile up in the arena when calls run in a loop without a reset. */
static void arena_check(tg_ctx *ctx)
{
    size_t used = tg__arena_used(&ctx->arena);
    if (!ctx->bot || ctx->arena_warned || used <= ctx->bot->arena_warn_bytes)
        return;
    ctx->arena_warned = true;
    tg__log(ctx_log(ctx), TG__LOG_WARN,
            "tg_ctx arena holds %zu bytes without a tg_ctx_reset(): every result stays until "
            "a reset, so reset the ctx once you are done with them (warned once per ctx; "
            "tg_bot_options.arena_warn_bytes)",
            used);
}

tg_status tg__ctx_begin(tg_ctx *ctx, const char *method)
{
    arena_check(ctx);
    tg__ctx_clear_error(ctx);
    size_t n = strlen(method);
    if (n >= sizeof ctx->method)
        n = sizeof ctx->method - 1;
    memcpy(ctx->method, method, n);
    ctx->method[n] = '\0';
    ctx->http_status = 0;
    ctx->too_big = ctx->sink_oom = false;
    ctx->stats.calls++;
    if (!ctx->bot)
        return tg__ctx_fail(ctx, TG_ERR_INVALID,
                            "this ctx has no bot (tg_ctx_new(NULL)): it serves the codec only");
    if (tg__ctx_cancelled(ctx))
        return tg__ctx_fail(ctx, TG_ERR_CANCELLED, "%s",
                            atomic_load(&ctx->bot->shutdown) ? "the bot is shut down"
                                                             : "the context was cancelled");
    return TG_OK;
}

tg_status tg__ctx_fail(tg_ctx *ctx, tg_status st, const char *fmt, ...)
{
    ctx->err.status = st;
    ctx->err.method = ctx->method;
    ctx->err.http_status = ctx->http_status;
    tg__buf_reset(&ctx->errmsg);
    tg__buf_printf(&ctx->errmsg, "%s: ", ctx->method[0] ? ctx->method : "call");
    va_list ap;
    va_start(ap, fmt);
    tg__buf_vprintf(&ctx->errmsg, fmt, ap);
    va_end(ap);
    if (ctx->errmsg.data && ctx->bot)
        tg__log_scrub(&ctx->bot->log, ctx->errmsg.data, ctx->errmsg.cap);
    ctx->errmsg.len = ctx->errmsg.data ? strlen(ctx->errmsg.data) : 0;
    ctx->err.description = tg__buf_cstr(&ctx->errdesc);
    ctx->err.json_path = tg__buf_cstr(&ctx->errpath);
    if (st != TG_ERR_CANCELLED)
        tg__log(ctx_log(ctx), TG__LOG_DEBUG, "%s", tg__buf_cstr(&ctx->errmsg));
    return st;
}

uint32_t tg__ctx_random(tg_ctx *ctx)
{
    uint32_t x = ctx->rnd; /* xorshift32: jitter only, not security */
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    ctx->rnd = x;
    return x;
}

tg_status tg__ctx_conn(tg_ctx *ctx)
{
    if (ctx->conn)
        return TG_OK;
    ctx->conn = ctx->bot->transport.conn_new(ctx->bot->transport.user, ctx->bot);
    if (!ctx->conn)
        return tg__ctx_fail(ctx, TG_ERR_NOMEM, "cannot create the transport connection");
    return TG_OK;
}
