/*
 * inline_mode: type "@yourbot some text" in any chat; the bot offers the text in upper and
 * lower case as inline results. Enable inline mode for the bot with @BotFather (/setinline).
 */
#include <ctype.h>

#include "example.h"

static void convert(char *out, size_t cap, const char *in, int (*fn)(int))
{
    size_t i = 0;
    for (; in[i] && i + 1 < cap; i++)
        out[i] = (char)fn((unsigned char)in[i]);
    out[i] = '\0';
}

/* One InputQueryResultArticle. */
static bool article(char *out, size_t cap, const char *id, const char *text)
{
    size_t n = strlen(out);
    snprintf(out + n, cap - n,
             "%s{\"type\":\"article\",\"id\":\"%s\",\"title\":", out[n - 1] == '[' ? "" : ",", id);
    bool ok = example_json_str(out, cap, text);
    n = strlen(out);
    snprintf(out + n, cap - n, ",\"input_message_content\":{\"message_text\":");
    ok = ok && example_json_str(out, cap, text);
    n = strlen(out);
    snprintf(out + n, cap - n, "}}");
    return ok && strlen(out) + 2 < cap;
}

static tg_status on_inline(tg_hctx *h, void *user)
{
    (void)user;
    const tg_event *ev = tg_hctx_event(h);
    const char *q = ev->query && *ev->query ? ev->query : "type something";
    char up[256], low[256], json[2048] = "";
    convert(up, sizeof up, q, toupper);
    convert(low, sizeof low, q, tolower);
    strcat(json, "{\"inline_query_id\":");
    bool ok = example_json_str(json, sizeof json, ev->id);
    strcat(json, ",\"cache_time\":0,\"results\":[");
    ok = ok && article(json, sizeof json, "upper", up) && article(json, sizeof json, "lower", low);
    if (!ok)
        return tg_hctx_fail(h, TG_ERR_TOO_BIG, "inline query too long");
    strcat(json, "]}");
    return tg_hctx_call(h, "answerInlineQuery", json, NULL, NULL);
}

int main(void)
{
    tg_bot *bot = example_bot("inline_mode");
    if (!bot)
        return EXAMPLE_EXIT_CONFIG;
    tg_router *r = tg_router_new();
    tg_router_on_kind(r, TG_UPDATE_INLINE_QUERY, on_inline, NULL);
    tg_dispatcher *d = example_dispatcher("inline_mode", bot, r, NULL);
    int rc = d ? example_poll("inline_mode", d) : 1;
    tg_dispatcher_free(d);
    tg_router_free(r);
    tg_bot_free(bot);
    return rc;
}
