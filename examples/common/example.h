/*
 * example.h: the few lines every example bot shares: the bot from TELEGRAM_BOT_TOKEN (and
 * TELEGRAM_API_URL when set, e.g. a local Bot API server), a clear message when the token is
 * missing, and running a dispatcher until SIGINT or SIGTERM.
 */
#ifndef TGBOT_EXAMPLE_H
#define TGBOT_EXAMPLE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tgbot/tgbot.h>

/* Exit code when the environment is incomplete. */
#define EXAMPLE_EXIT_CONFIG 2

static inline const char *example_env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* The bot with options o (base_url and timeout_ms filled in here), or NULL after printing
 * why (the token itself is never printed). */
static inline tg_bot *example_bot_opts(const char *prog, tg_bot_options o)
{
    const char *token = example_env("TELEGRAM_BOT_TOKEN");
    if (!token) {
        fprintf(stderr,
                "%s: TELEGRAM_BOT_TOKEN is not set.\n"
                "  Create a bot with @BotFather, then run:\n"
                "  TELEGRAM_BOT_TOKEN=<your token> %s\n"
                "  (optional: TELEGRAM_API_URL=http://127.0.0.1:8081 for a local Bot API "
                "server)\n",
                prog, prog);
        return NULL;
    }
    o.base_url = example_env("TELEGRAM_API_URL");
    o.timeout_ms = 60000;
    tg_bot *bot = tg_bot_new(token, &o);
    if (!bot)
        fprintf(stderr, "%s: %s\n", prog, tg_bot_new_errmsg());
    return bot;
}

static inline tg_bot *example_bot(const char *prog)
{
    return example_bot_opts(prog, (tg_bot_options){0});
}

/* Dispatcher over r with Ctrl-C / SIGTERM wired to a clean stop. NULL after printing why. */
static inline tg_dispatcher *example_dispatcher(const char *prog, tg_bot *bot, tg_router *r,
                                                const tg_dispatcher_options *o)
{
    tg_dispatcher *d = tg_dispatcher_new(bot, r, o);
    if (!d) {
        fprintf(stderr, "%s: %s\n", prog, tg_dispatcher_errmsg(NULL));
        return NULL;
    }
    tg_dispatcher_stop_on_signals(d);
    return d;
}

/* Poll until stopped; prints the outcome. Returns the process exit code. */
static inline int example_poll(const char *prog, tg_dispatcher *d)
{
    fprintf(stderr, "%s: running; press Ctrl-C to stop\n", prog);
    tg_status st = tg_run_polling(d, &(tg_polling_options){.delete_webhook = true});
    if (st != TG_OK)
        fprintf(stderr, "%s: stopped: %s: %s\n", prog, tg_strerror(st), tg_dispatcher_errmsg(d));
    else
        fprintf(stderr, "%s: stopped cleanly\n", prog);
    return st == TG_OK ? 0 : 1;
}

/* Append s to out as a JSON string (quotes included); out has cap bytes. false if short. */
static inline bool example_json_str(char *out, size_t cap, const char *s)
{
    size_t n = strlen(out);
    if (n + 3 > cap)
        return false;
    out[n++] = '"';
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8] = {0};
        if (c == '"' || c == '\\')
            snprintf(esc, sizeof esc, "\\%c", c);
        else if (c < 0x20)
            snprintf(esc, sizeof esc, "\\u%04x", c);
        else
            esc[0] = (char)c;
        size_t k = strlen(esc);
        if (n + k + 2 > cap)
            return false;
        memcpy(out + n, esc, k);
        n += k;
    }
    out[n++] = '"';
    out[n] = '\0';
    return true;
}

#endif
