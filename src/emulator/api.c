/*
 * api: the Bot API request pipeline: the method looked up (methods.c's table), the bot's and
 * chat's rate limits, the parameters decoded, the handler run, Telegram's envelope written
 * and the call logged for the web panel. The handlers are in api_msg.c, api_chat.c,
 * api_media.c and webhook.c; what sending methods share is send.c.
 */
#include "emulator/handlers.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "core/str.h"
#include "emulator/params.h"

int emu_fail(emu_req *r, int code, const char *fmt, ...)
{
    const char *prefix = code == 400   ? "Bad Request: "
                         : code == 403 ? "Forbidden: "
                         : code == 409 ? "Conflict: "
                                       : "";
    r->code = code;
    int n = snprintf(r->desc, sizeof r->desc, "%s", prefix);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->desc + n, sizeof r->desc - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

static const tg__method *method_by_name(const char *name)
{
    for (size_t i = 0; i < tg__method_count; i++)
        if (!strcasecmp(tg__methods[i]->name, name))
            return tg__methods[i];
    return NULL;
}

/* {"ok":false,...} */
static void write_error(emu_req *r, tg__buf *out)
{
    tg__jw w;
    tg__jw_init(&w, out);
    tg__jw_obj_begin(&w);
    TG__JW_KEY(&w, "ok");
    tg__jw_bool(&w, false);
    TG__JW_KEY(&w, "error_code");
    tg__jw_i64(&w, r->code);
    TG__JW_KEY(&w, "description");
    tg__jw_str(&w, r->desc);
    if (r->retry_after || r->migrate_to) {
        TG__JW_KEY(&w, "parameters");
        tg__jw_obj_begin(&w);
        if (r->retry_after) {
            TG__JW_KEY(&w, "retry_after");
            tg__jw_i64(&w, r->retry_after);
        }
        if (r->migrate_to) {
            TG__JW_KEY(&w, "migrate_to_chat_id");
            tg__jw_i64(&w, r->migrate_to);
        }
        tg__jw_obj_end(&w);
    }
    tg__jw_obj_end(&w);
}

/* Rate limits (when switched on), as Telegram documents them: about one message a second
 * in a chat (bursts of 3), 20 a minute in a group, 30 a second per bot. Per chat a token
 * bucket; per bot a one-second window. 429 with retry_after in whole seconds. */
#define RATE_BOT_PER_S      30
#define RATE_PRIVATE_BURST  3.0
#define RATE_PRIVATE_PER_MS (1.0 / 1000)
#define RATE_GROUP_BURST    20.0
#define RATE_GROUP_PER_MS   (20.0 / 60000)

static int too_many(emu_req *r, int64_t retry_after)
{
    r->retry_after = retry_after < 1 ? 1 : retry_after;
    r->code = 429;
    snprintf(r->desc, sizeof r->desc, "Too Many Requests: retry after %lld",
             (long long)r->retry_after);
    return -1;
}

static bool chat_limited(emu_req *r, int64_t now)
{
    const tg__field *f = tg__codec_lookup(r->m->params_desc, "chat_id", 7);
    if (!f || f->kind != TG__K_CHATID || !r->p)
        return false;
    const tg_chat_id *id = (const tg_chat_id *)(const void *)((const char *)r->p + f->off);
    emu_chat *c = id->kind == TG_CHAT_ID_INT ? emu_chat_get(r->e, id->id, r->b->u.id) : NULL;
    if (!c)
        return false;
    bool group = c->type != TG_CHAT_TYPE_PRIVATE;
    double burst = group ? RATE_GROUP_BURST : RATE_PRIVATE_BURST;
    double per_ms = group ? RATE_GROUP_PER_MS : RATE_PRIVATE_PER_MS;
    if (c->rate_ms == 0)
        c->rate_tokens = burst;
    else
        c->rate_tokens += (double)(now - c->rate_ms) * per_ms;
    if (c->rate_tokens > burst)
        c->rate_tokens = burst;
    c->rate_ms = now;
    if (c->rate_tokens >= 1.0) {
        c->rate_tokens -= 1.0;
        return false;
    }
    too_many(r, (int64_t)((1.0 - c->rate_tokens) / per_ms / 1000.0 + 0.999));
    return true;
}

static bool rate_limited(emu_req *r)
{
    if (!r->e->o.rate_limits || strncmp(r->m->name, "send", 4) != 0 ||
        !strcmp(r->m->name, "sendChatAction"))
        return false;
    int64_t now = (int64_t)tg__now_ms();
    emu_bot *b = r->b;
    if (now - b->rate_window_ms >= 1000) {
        b->rate_window_ms = now;
        b->rate_count = 0;
    }
    if (b->rate_count >= RATE_BOT_PER_S) {
        too_many(r, 1);
        return true;
    }
    if (chat_limited(r, now))
        return true;
    b->rate_count++;
    return false;
}

static int run(emu_req *r, const char *method, const char **json, size_t *len, tg__buf *conv)
{
    r->m = method_by_name(method);
    if (!r->m) {
        r->code = 404;
        snprintf(r->desc, sizeof r->desc, "Not Found");
        return -1;
    }
    emu_handler fn = emu_find_handler(r->m->name);
    if (!fn)
        return emu_fail(r, 400, "method %s is not emulated by tgbot-emulator", r->m->name);
    char err[300];
    if (!*json && r->form) {
        if (emu_params_form_json(r->m, r->form, conv, err, sizeof err))
            return emu_fail(r, 400, "%s", err);
        *json = conv->data;
        *len = conv->len;
    } else if (*json && *len) {
        if (emu_params_normalize(r->m, *json, *len, conv, err, sizeof err))
            return emu_fail(r, 400, "%s", err);
        *json = conv->data;
        *len = conv->len;
    }
    if (!*json || !*len) {
        *json = "{}";
        *len = 2;
    }
    void *params = NULL;
    if (emu_params_decode(r->m, *json, *len, r->a, &params, err, sizeof err))
        return emu_fail(r, 400, "%s", err);
    r->p = params;
    if (rate_limited(r))
        return -1;
    return fn(r);
}

static void log_call(emu_req *r, const char *method, const char *json, size_t len,
                     const tg__buf *out)
{
    tg__buf b;
    tg__buf_init(&b, 0);
    tg__jw w;
    tg__jw_init(&w, &b);
    tg__jw_obj_begin(&w);
    TG__JW_KEY(&w, "method");
    tg__jw_str(&w, r->m ? r->m->name : "?");
    TG__JW_KEY(&w, "request");
    if (json && len && len < 8192)
        tg__jw_raw(&w, json, len);
    else
        tg__jw_str(&w, len ? "(large)" : "{}");
    TG__JW_KEY(&w, "response");
    if (out->len < 8192)
        tg__jw_raw(&w, out->data, out->len);
    else
        tg__jw_str(&w, "(large)");
    tg__jw_obj_end(&w);
    (void)method;
    if (!w.err && strcasecmp(method, "getUpdates") != 0)
        emu_event_add(r->e, r->b ? r->b->u.id : 0, "call", tg__buf_cstr(&b));
    tg__buf_cleanup(&b);
}

int emu_api_call(emu *e, const char *token, const char *method, const char *json, size_t len,
                 const emu_form *form, tg__buf *out)
{
    tg__arena a;
    tg__arena_init(&a, 0, 0);
    emu_req r = {.e = e, .a = &a, .form = form};
    tg__buf_init(&r.res, 0);
    tg__jw_init(&r.w, &r.res);
    tg__buf conv;
    tg__buf_init(&conv, 0);
    pthread_mutex_lock(&e->mu);
    r.b = emu_token_ok(token) ? emu_bot_get(e, token, true) : NULL;
    int rc;
    if (!r.b) {
        r.code = 401;
        snprintf(r.desc, sizeof r.desc, "Unauthorized");
        rc = -1;
    } else {
        rc = run(&r, method, &json, &len, &conv);
    }
    if (rc == 0 && r.w.err)
        rc = emu_fail(&r, 500, "Internal Server Error: result does not encode");
    if (rc == 0) {
        tg__buf_puts(out, "{\"ok\":true,\"result\":");
        tg__buf_append(out, r.res.data, r.res.len);
        tg__buf_putc(out, '}');
        emu_files_seen(e, r.b->u.id, tg__buf_cstr(out)); /* its uploads, forwards, copies */
    } else {
        write_error(&r, out);
    }
    if (r.b)
        log_call(&r, method, json, len, out);
    pthread_mutex_unlock(&e->mu);
    tg__buf_cleanup(&r.res);
    tg__buf_cleanup(&conv);
    tg__arena_cleanup(&a);
    return rc == 0 ? 200 : r.code;
}
