/*
 * tgbot-emulator: a local Telegram Bot API for developing and testing bots.
 *
 *   tgbot-emulator [--listen HOST:PORT] [--bot TOKEN[:USERNAME]]... [--strict] [--state FILE]
 *                  [--rate-limits]
 *
 * Serves the Bot API at http://HOST:PORT/bot<TOKEN>/<method>, the control API under
 * /control/ and the web chat at /. Runs until SIGINT or SIGTERM.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emulator/emu.h"

#define MAX_BOTS 32

static int usage(FILE *f)
{
    fprintf(f, "usage: tgbot-emulator [--listen HOST:PORT] [--bot TOKEN[:USERNAME]]... "
               "[--strict] [--rate-limits] [--state FILE]\n"
               "  --listen HOST:PORT  where to serve (default 127.0.0.1:8081; port 0 = any)\n"
               "  --bot TOKEN[:NAME]  a bot to know from the start (username NAME)\n"
               "  --strict            answer 401 to tokens not given with --bot\n"
               "  --rate-limits       enforce Telegram's limits with 429 retry_after\n"
               "  --state FILE        load the world from FILE when it exists, save it there "
               "on exit\n");
    return f == stdout ? 0 : 2;
}

static int parse_listen(const char *s, char *host, size_t cap, uint16_t *port)
{
    const char *colon = strrchr(s, ':');
    if (!colon || (size_t)(colon - s) >= cap || colon == s)
        return -1;
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (*end || end == colon + 1 || p < 0 || p > 65535)
        return -1;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    *port = (uint16_t)p;
    return 0;
}

/* TOKEN or TOKEN:USERNAME (the token itself holds one colon). */
static int add_bot(emu *e, char *arg)
{
    char *second = strchr(arg, ':');
    char *name = second ? strchr(second + 1, ':') : NULL;
    if (name)
        *name++ = '\0';
    pthread_mutex_lock(&e->mu);
    /* a bot the state file brought back is fine */
    emu_bot *b = emu_bot_get(e, arg, false);
    if (!b)
        b = emu_bot_add(e, arg, name, NULL);
    pthread_mutex_unlock(&e->mu);
    return b ? 0 : -1;
}

typedef struct cli {
    char host[256];
    emu_options o;
    char *bots[MAX_BOTS];
    int nbots;
} cli;

/* Fill c from argv. -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, cli *c)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--listen") && i + 1 < argc) {
            if (parse_listen(argv[++i], c->host, sizeof c->host, &c->o.port) != 0) {
                fprintf(stderr, "tgbot-emulator: --listen: expected HOST:PORT, got \"%s\"\n",
                        argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--bot") && i + 1 < argc && c->nbots < MAX_BOTS) {
            c->bots[c->nbots++] = argv[++i];
        } else if (!strcmp(argv[i], "--strict")) {
            c->o.strict_tokens = true;
        } else if (!strcmp(argv[i], "--state") && i + 1 < argc) {
            c->o.state_file = argv[++i];
        } else if (!strcmp(argv[i], "--rate-limits")) {
            c->o.rate_limits = true;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            return usage(stdout);
        } else {
            fprintf(stderr, "tgbot-emulator: unknown argument \"%s\"\n", argv[i]);
            return usage(stderr);
        }
    }
    c->o.host = c->host;
    return -1;
}

/* The world of the state file (when there is one) and the --bot bots. 0, or an exit code. */
static int populate(emu *e, cli *c)
{
    char err[300];
    if (c->o.state_file && access(c->o.state_file, F_OK) == 0) {
        pthread_mutex_lock(&e->mu);
        int rc = emu_state_load(e, c->o.state_file, err, sizeof err);
        pthread_mutex_unlock(&e->mu);
        if (rc != 0) {
            fprintf(stderr, "tgbot-emulator: %s\n", err);
            return 1;
        }
    }
    for (int i = 0; i < c->nbots; i++)
        if (add_bot(e, c->bots[i]) != 0) {
            fprintf(stderr,
                    "tgbot-emulator: --bot %d: not a token like 123456:ABC... (20+ "
                    "characters after the colon), or another bot's id\n",
                    i + 1);
            return 2;
        }
    return 0;
}

static int save(emu *e, const char *path)
{
    char err[300];
    pthread_mutex_lock(&e->mu);
    int rc = emu_state_save(e, path, err, sizeof err);
    pthread_mutex_unlock(&e->mu);
    if (rc != 0)
        fprintf(stderr, "tgbot-emulator: %s\n", err);
    return rc;
}

int main(int argc, char **argv)
{
    cli c = {.host = "127.0.0.1", .o = {.port = 8081}};
    int rc = parse_args(argc, argv, &c);
    if (rc >= 0)
        return rc;
    /* SIGINT/SIGTERM blocked before any thread starts, then taken with sigwait: no window
     * where a signal is lost */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    char err[256];
    emu *e = emu_new(&c.o, err, sizeof err);
    if (!e) {
        fprintf(stderr, "tgbot-emulator: %s\n", err);
        return 1;
    }
    if ((rc = populate(e, &c)) != 0 || (rc = emu_start(e, err, sizeof err)) != 0) {
        if (rc == -1)
            fprintf(stderr, "tgbot-emulator: %s\n", err);
        emu_free(e);
        return rc == 2 ? 2 : 1;
    }
    printf("tgbot-emulator: web chat at http://%s:%u/\n"
           "tgbot-emulator: Bot API at http://%s:%u (set TELEGRAM_API_URL to this)\n",
           c.host, (unsigned)e->port, c.host, (unsigned)e->port);
    fflush(stdout);
    int sig;
    sigwait(&set, &sig);
    fprintf(stderr, "tgbot-emulator: stopping\n");
    rc = c.o.state_file ? save(e, c.o.state_file) : 0;
    emu_free(e);
    return rc ? 1 : 0;
}
