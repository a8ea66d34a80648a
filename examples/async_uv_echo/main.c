/*
 * async_uv_echo: a whole bot on one thread inside a libuv program. Updates come from long
 * polling on the libuv loop (tg_async_poll_start), the handler runs on that same thread and
 * answers with an asynchronous call (tg_async_send_message): no thread is started, nothing
 * blocks, and the program's own libuv handles (here: the signal watchers, a once-a-minute
 * status line) share the loop with the bot.
 *
 *   TELEGRAM_BOT_TOKEN=<token> ./async_uv_echo      (TELEGRAM_API_URL for a local server)
 */
#include <stdio.h>
#include <uv.h>

#include <tgbot/async_uv.h>
#include <tgbot/tgbot.h>

#include "example.h"

static unsigned long echoed;

static void on_sent(tg_async *a, const tg_async_result *r, tg_message *m, void *user)
{
    (void)a, (void)m, (void)user;
    if (r->status == TG_OK)
        echoed++;
    else
        fprintf(stderr, "async_uv_echo: %s\n", tg_ctx_errmsg(r->ctx));
}

/* The handler: on the loop thread, answering without blocking it. */
static void on_update(tg_async *a, const tg_update *u, void *user)
{
    (void)user;
    const tg_message *m = u->message;
    if (!m || !m->text || !m->chat)
        return;
    tg_send_message_params p = {.chat_id = tg_chat_id_int(m->chat->id), .text = m->text};
    tg_async_send_message(a, &p, on_sent, NULL); /* params are copied: p may go */
}

static void on_signal(uv_signal_t *s, int signum)
{
    (void)signum;
    uv_stop(s->loop);
}

static void on_status(uv_timer_t *t)
{
    (void)t;
    fprintf(stderr, "async_uv_echo: %lu messages echoed\n", echoed);
}

int main(void)
{
    tg_bot *bot = example_bot("async_uv_echo");
    if (!bot)
        return EXAMPLE_EXIT_CONFIG;
    uv_loop_t *loop = uv_default_loop();
    tg_async_uv ad;
    tg_async *a = tg_async_uv_new(&ad, loop, bot, NULL);
    tg_async_poller *poller = a ? tg_async_poll_start(a, NULL, on_update, NULL) : NULL;
    if (!poller) {
        fprintf(stderr, "async_uv_echo: cannot start the async client\n");
        return 1;
    }
    uv_signal_t sig_int, sig_term;
    uv_timer_t status;
    uv_signal_init(loop, &sig_int);
    uv_signal_start(&sig_int, on_signal, SIGINT);
    uv_signal_init(loop, &sig_term);
    uv_signal_start(&sig_term, on_signal, SIGTERM);
    uv_timer_init(loop, &status);
    uv_timer_start(&status, on_status, 60000, 60000);
    fprintf(stderr, "async_uv_echo: running (Ctrl-C to stop)\n");

    uv_run(loop, UV_RUN_DEFAULT); /* until a signal stops the loop */

    tg_async_poll_stop(poller);
    tg_async_uv_free(&ad); /* answers in flight complete (cancelled) first */
    uv_close((uv_handle_t *)&sig_int, NULL);
    uv_close((uv_handle_t *)&sig_term, NULL);
    uv_close((uv_handle_t *)&status, NULL);
    uv_run(loop, UV_RUN_DEFAULT); /* let libuv close the handles */
    uv_loop_close(loop);
    tg_bot_free(bot);
    fprintf(stderr, "async_uv_echo: stopped after %lu messages\n", echoed);
    return 0;
}
