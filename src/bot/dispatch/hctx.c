/*
 * hctx: the handler context: accessors, command arguments, captures, errors and the reply
 * shortcuts. See tgbot/dispatch.h.
 *
 * The shortcuts encode their parameters with the JSON writer into a buffer owned by the
 * context and call tg_call_raw() on the worker's ctx, so they work with any Bot API version
 * and allocate nothing once warm (beyond what the client does).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "bot/api/api.gen.h"
#include "bot/codec/codec.h"
#include "bot/codec/method.h"
#include "bot/dispatch/dispatch_int.h"
#include "core/alloc.h"
#include "tgbot/client.h"

int tg__hctx_init(struct tg_hctx *h, struct tg_dispatcher *d, unsigned worker, size_t arena_max)
{
    memset(h, 0, sizeof *h);
    h->d = d;
    h->worker = worker;
    tg__arena_init(&h->arena, 0, arena_max);
    tg__jdoc_init(&h->doc, NULL);
    tg__buf_init(&h->jbuf, 1 << 20);
    tg__jdoc_init(&h->xdoc, NULL);
    tg__buf_init(&h->xbuf, 1 << 20);
    h->md = pcre2_match_data_create(TG__MAX_CAPTURES, NULL);
    h->update_type = tg__codec_type_by_name("Update");
    return h->md ? 0 : -1;
}

void tg__hctx_cleanup(struct tg_hctx *h)
{
    if (!h)
        return;
    if (h->md)
        pcre2_match_data_free(h->md);
    h->md = NULL;
    tg__buf_cleanup(&h->jbuf);
    tg__buf_cleanup(&h->xbuf);
    tg__jdoc_cleanup(&h->xdoc);
    tg__jdoc_cleanup(&h->doc);
    tg__arena_cleanup(&h->arena);
}

void tg__hctx_reset(struct tg_hctx *h)
{
    tg__arena_reset(&h->arena);
    h->ncap = 0;
    h->args_split = false;
    h->argc = 0;
    h->argv = NULL;
    h->conv = (struct tg__conv){0};
    tg__session_reset(h);
    h->job = NULL;
    h->cb_data = NULL;
    h->cb_len = 0;
    h->cb_lost = false;
    h->answered = false;
    h->menu_page = h->menu_pages = 0;
    h->update = NULL;
    h->update_tried = false;
    h->err[0] = '\0';
}

const tg_update *tg_hctx_update(tg_hctx *h)
{
    const tg__type *update_type = h->update_type;
    if (h->update_tried)
        return h->update;
    h->update_tried = true;
    void *out = update_type ? tg__arena_alloc(&h->arena, update_type->size) : NULL;
    tg__jerr je = {0};
    if (!out) {
        tg_hctx_fail(h, TG_ERR_NOMEM, "update %lld: out of memory decoding",
                     (long long)h->ev.update_id);
        return NULL;
    }
    /* h->doc still holds this update's tokens (tg__event_parse) and ev.json its bytes. */
    tg_status st = tg__codec_decode(update_type, &h->doc, 0, &h->arena, out, &je);
    if (st != TG_OK) {
        tg__buf b;
        tg__buf_init(&b, 512);
        tg__json_errmsg(&h->doc, &je, &b);
        tg_hctx_fail(h, st, "update %lld: %s", (long long)h->ev.update_id, tg__buf_cstr(&b));
        tg__buf_cleanup(&b);
        return NULL;
    }
    h->update = out;
    return h->update;
}

const tg_event *tg_hctx_event(const tg_hctx *h)
{
    return &h->ev;
}

tg_ctx *tg_hctx_ctx(tg_hctx *h)
{
    return h->ctx;
}

unsigned tg_hctx_worker(const tg_hctx *h)
{
    return h->worker;
}

void *tg_hctx_alloc(tg_hctx *h, size_t n)
{
    return tg__arena_alloc(&h->arena, n ? n : 1);
}

const char *tg_hctx_capture(const tg_hctx *h, unsigned i, size_t *len)
{
    if (i >= h->ncap || !h->cap_p[i])
        return NULL;
    if (len)
        *len = h->cap_n[i];
    return h->cap_p[i];
}

unsigned tg_hctx_ncaptures(const tg_hctx *h)
{
    return h->ncap;
}

/* Copy the next argument starting at *p into out; quotes group words. Returns false at end. */
static bool next_arg(const char **p, char *out, size_t *n)
{
    const char *s = *p + strspn(*p, " \t\n\r");
    if (!*s)
        return false;
    size_t k = 0;
    char quote = 0;
    for (; *s; s++) {
        if (quote && *s == quote) {
            quote = 0;
        } else if (!quote && (*s == '"' || *s == '\'')) {
            quote = *s;
        } else if (!quote && strchr(" \t\n\r", *s)) {
            break;
        } else {
            out[k++] = *s;
        }
    }
    out[k] = '\0';
    *n = k;
    *p = s;
    return true;
}

static void split_args(tg_hctx *h)
{
    h->args_split = true;
    const char *args = h->ev.command_args;
    if (!args || !*args)
        return;
    size_t cap = strlen(args) / 2 + 2; /* upper bound on words */
    h->argv = tg__arena_alloc(&h->arena, cap * sizeof *h->argv);
    char *tmp = tg__arena_alloc(&h->arena, strlen(args) + 1);
    if (!h->argv || !tmp)
        return;
    const char *p = args;
    size_t n;
    while (h->argc < cap && next_arg(&p, tmp, &n)) {
        h->argv[h->argc++] = tmp;
        tmp += n + 1;
    }
}

unsigned tg_hctx_argc(tg_hctx *h)
{
    if (!h->args_split)
        split_args(h);
    return h->argc;
}

const char *tg_hctx_arg(tg_hctx *h, unsigned i)
{
    return i < tg_hctx_argc(h) ? h->argv[i] : NULL;
}

const char *tg_hctx_payload(const tg_hctx *h)
{
    const tg_event *ev = &h->ev;
    if (!ev->command || ev->command_len != 5 || memcmp(ev->command, "start", 5) != 0)
        return NULL;
    return ev->command_args && *ev->command_args ? ev->command_args : NULL;
}

tg_status tg_hctx_fail(tg_hctx *h, tg_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->err, sizeof h->err, fmt, ap);
    va_end(ap);
    return st;
}

const char *tg_hctx_errmsg(const tg_hctx *h)
{
    return h->err;
}

tg_status tg_hctx_call(tg_hctx *h, const char *method, const char *json_params,
                       const char **result_json, size_t *result_len)
{
    if (!h->ctx)
        return tg_hctx_fail(h, TG_ERR_INVALID, "%s: the dispatcher has no bot", method);
    tg_status st = tg_call_raw(h->ctx, method, json_params, json_params ? strlen(json_params) : 0,
                               result_json, result_len);
    if (st != TG_OK)
        tg_hctx_fail(h, st, "%s", tg_ctx_errmsg(h->ctx));
    else
        h->err[0] = '\0'; /* the last call's error, not a stale one */
    return st;
}

tg_status tg_hctx_call_then(tg_hctx *h, const char *method, const char *json_params,
                            tg_hctx_result_fn fn, void *user)
{
    if (!fn)
        return tg_hctx_fail(h, TG_ERR_INVALID, "%s: call_then needs a function",
                            method ? method : "call");
    if (h->lrun) { /* loop mode: the deferred ctx queues it with fn (loop.c) */
        h->then_fn = fn;
        h->then_user = user;
        tg_status st = tg_hctx_call(h, method, json_params, NULL, NULL);
        h->then_fn = NULL;
        return st;
    }
    const char *res = NULL;
    size_t len = 0;
    tg_status st = tg_hctx_call(h, method, json_params, &res, &len);
    return fn(h, st, st == TG_OK ? res : NULL, st == TG_OK ? len : 0, user);
}

/* Start {"chat_id":..} (or inline_message_id) for the update's target. */
static bool begin_target(tg_hctx *h, tg__jw *w, bool allow_inline)
{
    tg__buf_reset(&h->jbuf);
    tg__jw_init(w, &h->jbuf);
    tg__jw_obj_begin(w);
    if (allow_inline && !h->ev.has_chat && h->ev.inline_message_id) {
        TG__JW_KEY(w, "inline_message_id");
        tg__jw_str(w, h->ev.inline_message_id);
        return true;
    }
    if (!h->ev.has_chat)
        return false;
    TG__JW_KEY(w, "chat_id");
    tg__jw_i64(w, h->ev.chat_id);
    if (h->ev.business_connection_id) {
        TG__JW_KEY(w, "business_connection_id");
        tg__jw_str(w, h->ev.business_connection_id);
    }
    return true;
}

/* The members of the caller's extra JSON (parsed into h->xdoc) and whether it parsed. */
struct extra_keys {
    const tg__jdoc *d;
    bool parsed;
};

/* Does the call set key: the shortcut itself (every one with defaults writes "text"), or
 * extra? */
static bool extra_gives(void *ud, const char *key)
{
    const struct extra_keys *x = ud;
    if (strcmp(key, "text") == 0)
        return true;
    return x->parsed && tg__json_obj_get(x->d, 0, key) != UINT32_MAX;
}

/* The bot-wide defaults (tg_bot_set_defaults) of method that neither the shortcut nor extra
 * sets. extra that does not parse gets none: Telegram refuses the call with its own words.
 * Nothing to do (no defaults) costs one load; with defaults, the buffers are the hctx's own,
 * reused, so a warm worker still allocates nothing. */
static void write_defaults(tg_hctx *h, tg__jw *w, const tg__method *m, const char *extra)
{
    const tg_bot_defaults *dflt = h->ctx ? tg_bot_get_defaults(tg_ctx_bot(h->ctx)) : NULL;
    if (!dflt || !m->params_desc ||
        !(dflt->parse_mode.id || dflt->link_preview_options || dflt->protect_content.has ||
          dflt->disable_notification.has))
        return;
    struct extra_keys x = {.d = &h->xdoc, .parsed = false};
    if (extra && *extra) {
        tg__jerr je;
        tg__buf_reset(&h->xbuf);
        int rc = tg__buf_putc(&h->xbuf, '{') | tg__buf_puts(&h->xbuf, extra) |
                 tg__buf_putc(&h->xbuf, '}');
        if (rc != 0 || tg__json_parse(&h->xdoc, h->xbuf.data, h->xbuf.len, &je) != 0)
            return;
        x.parsed = true;
    }
    tg__codec_encode_defaults(m->params_desc, dflt, extra_gives, &x, w);
}

/* Close the object (appending extra members and the bot's defaults) and call method. */
static tg_status finish_call(tg_hctx *h, tg__jw *w, const tg__method *m, const char *extra)
{
    const char *method = m->name;
    write_defaults(h, w, m, extra);
    if (extra && *extra) {
        tg__buf_putc(&h->jbuf, ',');
        tg__buf_puts(&h->jbuf, extra);
    }
    tg__jw_obj_end(w);
    if (w->err)
        return tg_hctx_fail(h, TG_ERR_NOMEM, "%s: cannot encode the parameters", method);
    return tg_hctx_call(h, method, tg__buf_cstr(&h->jbuf), NULL, NULL);
}

static tg_status send_text(tg_hctx *h, const char *text, const char *extra, bool reply)
{
    tg__jw w;
    if (!text)
        return tg_hctx_fail(h, TG_ERR_INVALID, "sendMessage: text is NULL");
    if (!begin_target(h, &w, false))
        return tg_hctx_fail(h, TG_ERR_INVALID, "sendMessage: the %s update has no chat",
                            h->ev.kind_name);
    TG__JW_KEY(&w, "text");
    tg__jw_str(&w, text);
    if (reply && h->ev.message_id && h->ev.kind != TG_UPDATE_CALLBACK_QUERY) {
        TG__JW_KEY(&w, "reply_parameters");
        tg__jw_obj_begin(&w);
        TG__JW_KEY(&w, "message_id");
        tg__jw_i64(&w, h->ev.message_id);
        tg__jw_obj_end(&w);
    }
    return finish_call(h, &w, &tg__m_send_message, extra);
}

tg_status tg_reply(tg_hctx *h, const char *text)
{
    return send_text(h, text, NULL, true);
}

tg_status tg_send(tg_hctx *h, const char *text)
{
    return send_text(h, text, NULL, false);
}

tg_status tg_send_ex(tg_hctx *h, const char *text, const char *extra_json)
{
    return send_text(h, text, extra_json, false);
}

tg_status tg_answer(tg_hctx *h, const char *text)
{
    if (h->ev.kind != TG_UPDATE_CALLBACK_QUERY || !h->ev.id)
        return tg_hctx_fail(h, TG_ERR_INVALID,
                            "answerCallbackQuery: a %s update has no "
                            "callback query",
                            h->ev.kind_name);
    tg__jw w;
    tg__buf_reset(&h->jbuf);
    tg__jw_init(&w, &h->jbuf);
    tg__jw_obj_begin(&w);
    TG__JW_KEY(&w, "callback_query_id");
    tg__jw_str(&w, h->ev.id);
    if (text) {
        TG__JW_KEY(&w, "text");
        tg__jw_str(&w, text);
    }
    tg_status st = finish_call(h, &w, &tg__m_answer_callback_query, NULL);
    if (st == TG_OK)
        h->answered = true;
    return st;
}

tg_status tg_edit(tg_hctx *h, const char *text, const char *extra_json)
{
    tg__jw w;
    if (!text)
        return tg_hctx_fail(h, TG_ERR_INVALID, "editMessageText: text is NULL");
    /* Only a callback's message is the bot's own: editing a plain message would target the
     * user's message (and fail, or worse, edit a message the bot sent as that chat). */
    if (h->ev.kind != TG_UPDATE_CALLBACK_QUERY)
        return tg_hctx_fail(h, TG_ERR_INVALID,
                            "editMessageText: tg_edit edits the message of a callback query; "
                            "this is a %s update (call editMessageText with tg_hctx_call and "
                            "the message_id of a message the bot sent)",
                            h->ev.kind_name);
    bool ok = begin_target(h, &w, true);
    if (ok && h->ev.has_chat) {
        ok = h->ev.message_id != 0;
        TG__JW_KEY(&w, "message_id");
        tg__jw_i64(&w, h->ev.message_id);
    }
    if (!ok)
        return tg_hctx_fail(h, TG_ERR_INVALID,
                            "editMessageText: the %s update has no "
                            "message to edit",
                            h->ev.kind_name);
    TG__JW_KEY(&w, "text");
    tg__jw_str(&w, text);
    return finish_call(h, &w, &tg__m_edit_message_text, extra_json);
}
