/*
 * async_uv_bot: a whole framework bot — router, commands, a conversation, per-user data, an
 * inline keyboard, a scheduled reminder — single-threaded inside a libuv program. The
 * dispatcher runs in loop mode (tg_dispatcher_options.async): updates come from long
 * polling on the libuv loop, handlers run on that same thread, and their tg_reply / tg_send
 * / tg_answer / tg_edit calls are queued on the async client instead of blocking, each
 * chat's answers in order. No thread is started; the program's own libuv handles (signal
 * watchers) share the loop.
 *
 *   TELEGRAM_BOT_TOKEN=<token> ./async_uv_bot      (TELEGRAM_API_URL for a local server)
 *
 * Talk to it: any text is echoed; /order asks a size and confirms it (a conversation);
 * /menu shows a button whose press is answered and edits the message; /remind answers now
 * and again a second later (a job, also on the loop); /stats says how many times you wrote.
 */
#include <stdio.h>
#include <uv.h>

#include <tgbot/async_uv.h>
#include <tgbot/jobs.h>
#include <tgbot/tgbot.h>

#include "example.h"

static tg_jobs *jobs;

static tg_status count_visit(tg_hctx *h)
{
    tg_data *u = tg_hctx_user_data(h);
    return tg_data_set_int(u, "visits", tg_data_get_int(u, "visits", 0) + 1);
}

static tg_status on_text(tg_hctx *h, void *user)
{
    (void)user;
    count_visit(h);
    return tg_reply(h, tg_hctx_event(h)->text); /* queued: returns at once */
}

static tg_status on_order(tg_hctx *h, void *user)
{
    (void)user;
    tg_status st = tg_conv_enter(h, "size");
    return st == TG_OK ? tg_reply(h, "Which size: small, medium or large?") : st;
}

static tg_status on_size(tg_hctx *h, void *user)
{
    (void)user;
    char line[160];
    snprintf(line, sizeof line, "Ordered: %s. Thank you!", tg_hctx_event(h)->text);
    tg_status st = tg_conv_end(h);
    return st == TG_OK ? tg_send(h, line) : st;
}

static tg_status on_menu(tg_hctx *h, void *user)
{
    (void)user;
    return tg_send_ex(h, "Press the button",
                      "\"reply_markup\":{\"inline_keyboard\":[[{\"text\":\"Press me\","
                      "\"callback_data\":\"press\"}]]}");
}

static tg_status on_press(tg_hctx *h, void *user)
{
    (void)user;
    tg_status st = tg_answer(h, "Pressed");
    return st == TG_OK ? tg_edit(h, "The button was pressed", NULL) : st;
}

static tg_status on_remind(tg_hctx *h, void *user)
{
    (void)user;
    tg_status st = tg_jobs_add(jobs, NULL, 0,
                               &(tg_job_spec){.name = "remind", .has_chat = true,
                                              .chat_id = tg_hctx_event(h)->chat_id,
                                              .delay_ms = 1000, .data = "Reminder: one second"});
    return st == TG_OK ? tg_reply(h, "I will remind you in a second") : st;
}

static tg_status job_remind(tg_hctx *h, void *user)
{
    (void)user;
    return tg_send(h, tg_hctx_job(h)->data); /* the job's chat */
}

static tg_status on_stats(tg_hctx *h, void *user)
{
    (void)user;
    char line[96];
    snprintf(line, sizeof line, "You wrote %lld messages",
             (long long)tg_data_get_int(tg_hctx_user_data(h), "visits", 0));
    return tg_reply(h, line);
}

static void on_error(tg_hctx *h, tg_status st, const char *errmsg, void *user)
{
    (void)h, (void)user;
    fprintf(stderr, "async_uv_bot: %s: %s\n", tg_strerror(st), errmsg);
}

static void on_signal(uv_signal_t *s, int signum)
{
    (void)signum;
    tg_dispatcher_stop(s->data); /* noticed within a second; then on_stopped */
}

static void on_stopped(tg_dispatcher *d, void *user)
{
    (void)d;
    uv_stop(user); /* every update finished and every answer sent */
}

int main(void)
{
    tg_bot *bot = example_bot("async_uv_bot");
    if (!bot)
        return EXAMPLE_EXIT_CONFIG;
    uv_loop_t *loop = uv_default_loop();
    tg_router *r = tg_router_new();
    tg_router_add(r, 0, tg_filter_and(tg_filter_state("size"), tg_filter_kind(TG_UPDATE_MESSAGE)),
                  on_size, NULL);
    tg_router_on_command(r, "order", on_order, NULL);
    tg_router_on_command(r, "menu", on_menu, NULL);
    tg_router_on_command(r, "remind", on_remind, NULL);
    tg_router_on_command(r, "stats", on_stats, NULL);
    tg_router_on_callback(r, "press", on_press, NULL);
    tg_router_on_kind(r, TG_UPDATE_MESSAGE, on_text, NULL);
    tg_router_on_error(r, on_error, NULL);

    tg_async_uv ad;
    tg_async *a = tg_async_uv_new(&ad, loop, bot, NULL);
    tg_dispatcher *d =
        a ? tg_dispatcher_new(bot, r,
                              &(tg_dispatcher_options){.async = a,
                                                       .on_stopped = on_stopped,
                                                       .stopped_user = loop})
          : NULL;
    jobs = d ? tg_jobs_new(d, NULL) : NULL;
    if (!jobs || tg_jobs_register(jobs, "remind", job_remind, NULL) != TG_OK ||
        tg_jobs_start(jobs) != TG_OK || tg_dispatcher_poll_async(d, NULL) != TG_OK) {
        fprintf(stderr, "async_uv_bot: cannot start: %s\n", tg_dispatcher_errmsg(d));
        return 1;
    }
    uv_signal_t sig_int, sig_term;
    uv_signal_init(loop, &sig_int);
    uv_signal_init(loop, &sig_term);
    sig_int.data = sig_term.data = d;
    uv_signal_start(&sig_int, on_signal, SIGINT);
    uv_signal_start(&sig_term, on_signal, SIGTERM);
    fprintf(stderr, "async_uv_bot: running on one thread (Ctrl-C to stop)\n");

    uv_run(loop, UV_RUN_DEFAULT); /* until on_stopped */

    tg_dispatcher_stats st;
    tg_dispatcher_get_stats(d, &st);
    tg_jobs_free(jobs);
    tg_dispatcher_free(d);
    tg_async_uv_free(&ad);
    uv_close((uv_handle_t *)&sig_int, NULL);
    uv_close((uv_handle_t *)&sig_term, NULL);
    uv_run(loop, UV_RUN_DEFAULT); /* let libuv close the handles */
    uv_loop_close(loop);
    tg_router_free(r);
    tg_bot_free(bot);
    fprintf(stderr, "async_uv_bot: stopped after %llu updates\n",
            (unsigned long long)st.handled);
    return 0;
}
