/*
 * files: send the bot a document and it downloads it (getFile, then the file itself, into
 * memory with a 20 MB cap) and tells you its size and first line; /report makes a small text
 * file in memory and uploads it with sendDocument (multipart).
 */
#include "example.h"

static tg_status on_document(tg_hctx *h, void *user)
{
    (void)user;
    const tg_update *u = tg_hctx_update(h);
    if (!u || !u->message || !u->message->document)
        return tg_hctx_fail(h, TG_ERR_DECODE, "no document: %s", tg_hctx_errmsg(h));
    tg_ctx *ctx = tg_hctx_ctx(h);
    const tg_document *doc = u->message->document;
    const char *path;
    const void *data;
    size_t len;
    if (tg_get_file_path(ctx, doc->file_id, &path) != TG_OK ||
        tg_download_to_memory(ctx, path, 0, &data, &len) != TG_OK)
        return tg_reply(h, "Sorry, I could not download that (files over 20 MB are refused).");
    const char *text = data;
    size_t line = strcspn(text, "\r\n");
    char msg[400];
    snprintf(msg, sizeof msg, "%s: %zu bytes; first line: %.*s",
             doc->file_name ? doc->file_name : "file", len, (int)(line > 200 ? 200 : line), text);
    return tg_reply(h, msg);
}

static tg_status on_report(tg_hctx *h, void *user)
{
    (void)user;
    const tg_event *ev = tg_hctx_event(h);
    char body[256];
    int n = snprintf(body, sizeof body, "report for chat %lld\nupdate %lld\n",
                     (long long)ev->chat_id, (long long)ev->update_id);
    tg_message *sent;
    tg_send_document_params p = {
        .chat_id = tg_chat_id_int(ev->chat_id),
        .document = tg_input_file_memory(body, (size_t)n, "report.txt"),
        .caption = "Here is your report",
    };
    tg_status st = tg_send_document(tg_hctx_ctx(h), &p, &sent);
    if (st != TG_OK)
        return tg_hctx_fail(h, st, "sendDocument: %s", tg_ctx_errmsg(tg_hctx_ctx(h)));
    return TG_OK;
}

static bool has_document(const tg_hctx *h, void *user)
{
    (void)user;
    return strstr(tg_hctx_event(h)->json, "\"document\":") != NULL;
}

int main(void)
{
    tg_bot *bot = example_bot("files");
    if (!bot)
        return EXAMPLE_EXIT_CONFIG;
    tg_router *r = tg_router_new();
    tg_router_on_command(r, "report", on_report, NULL);
    tg_router_add(
        r, 0,
        tg_filter_and(tg_filter_kind(TG_UPDATE_MESSAGE), tg_filter_fn_new(has_document, NULL)),
        on_document, NULL);
    tg_dispatcher *d = example_dispatcher("files", bot, r, NULL);
    int rc = d ? example_poll("files", d) : 1;
    tg_dispatcher_free(d);
    tg_router_free(r);
    tg_bot_free(bot);
    return rc;
}
