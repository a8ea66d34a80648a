/*
 * async_broadcast: send one text to every chat listed in a file, as fast as Telegram allows,
 * on one thread (tgbot/broadcast.h over tgbot/async.h).
 *
 *   async_broadcast --api URL --token TOKEN --chats FILE --text TEXT [--rate N]
 *                   [--progress FILE] [--parse-mode HTML|MarkdownV2]
 *
 * FILE holds one chat id per line (blank lines and lines starting with # are skipped).
 * Without --token the token comes from TELEGRAM_BOT_TOKEN (better: argv is visible to other
 * users of the machine; a --token given is wiped from argv at once), without --api from
 * TELEGRAM_API_URL, else Telegram. --rate is messages per second overall (default 28, a
 * margin under Telegram's 30). With --progress, an interrupted run (Ctrl-C, SIGTERM, a crash)
 * resumes where it stopped when started again with the same file: no chat gets the text
 * twice. A progress bar on a terminal, plain progress lines otherwise; at the end a summary
 * "sent N, failed M (reasons...)". Exit status: 0 when every chat got an outcome, 1 when
 * interrupted or on errors, 2 for bad arguments.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tgbot/tgbot.h>

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

struct run {
    bool tty, done;
    size_t last_shown;
    uint64_t shown_at_ms;
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void show(struct run *r, const tg_broadcast_progress *p, bool final)
{
    if (r->tty) {
        if (!final && now_ms() - r->shown_at_ms < 100)
            return;
        int width = 30, full = p->total ? (int)(p->done * (size_t)width / p->total) : width;
        fprintf(stderr, "\r[%.*s%*s] %zu/%zu  sent %zu  failed %zu", full,
                "##############################", width - full, "", p->done, p->total, p->sent,
                p->failed);
        if (final)
            fputc('\n', stderr);
    } else {
        size_t step = p->total / 10 ? p->total / 10 : 1;
        if (!final && p->done / step == r->last_shown / step)
            return;
        r->last_shown = p->done;
        fprintf(stderr, "progress: %zu/%zu sent %zu failed %zu\n", p->done, p->total, p->sent,
                p->failed);
    }
    r->shown_at_ms = now_ms();
}

static void on_progress(void *user, const tg_broadcast_progress *p)
{
    show(user, p, false);
}

static void on_done(void *user, const tg_broadcast_progress *p)
{
    struct run *r = user;
    show(r, p, true);
    r->done = true;
}

static int usage(const char *why)
{
    fprintf(stderr,
            "async_broadcast: %s\n"
            "usage: async_broadcast --api URL --token TOKEN --chats FILE --text TEXT [--rate N]\n"
            "                       [--progress FILE] [--parse-mode HTML|MarkdownV2]\n",
            why);
    return 2;
}

/* One chat id per line. Returns the count, or -1 (message printed). */
static long read_chats(const char *path, int64_t **out)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "async_broadcast: --chats %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t n = 0, cap = 1024;
    int64_t *v = malloc(cap * sizeof *v);
    char line[256];
    long lineno = 0;
    while (v && fgets(line, sizeof line, f)) {
        lineno++;
        char *s = line + strspn(line, " \t");
        if (*s == '\n' || *s == '\0' || *s == '#')
            continue;
        char *end;
        errno = 0;
        long long id = strtoll(s, &end, 10);
        end += strspn(end, " \t\r\n");
        if (errno || end == s || *end) {
            fprintf(stderr, "async_broadcast: %s:%ld: expected a chat id, got \"%.*s\"\n", path,
                    lineno, (int)strcspn(s, "\r\n"), s);
            free(v);
            fclose(f);
            return -1;
        }
        if (n == cap) {
            int64_t *g = realloc(v, (cap *= 2) * sizeof *v);
            if (!g) {
                free(v);
                v = NULL;
                break;
            }
            v = g;
        }
        v[n++] = id;
    }
    fclose(f);
    if (!v) {
        fprintf(stderr, "async_broadcast: out of memory reading %s\n", path);
        return -1;
    }
    *out = v;
    return (long)n;
}

int main(int argc, char **argv)
{
    const char *api = getenv("TELEGRAM_API_URL"), *token = getenv("TELEGRAM_BOT_TOKEN");
    const char *chats_path = NULL, *text = NULL, *progress = NULL, *parse_mode = NULL;
    char *token_arg = NULL;
    double rate = 0;
    for (int i = 1; i < argc; i += 2) { /* --option value pairs */
        const char *a = argv[i];
        char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            return usage("every option takes a value");
        if (!strcmp(a, "--api"))
            api = v;
        else if (!strcmp(a, "--token"))
            token_arg = v;
        else if (!strcmp(a, "--chats"))
            chats_path = v;
        else if (!strcmp(a, "--text"))
            text = v;
        else if (!strcmp(a, "--progress"))
            progress = v;
        else if (!strcmp(a, "--parse-mode"))
            parse_mode = v;
        else if (!strcmp(a, "--rate")) {
            char *end;
            rate = strtod(v, &end);
            if (*end || rate <= 0)
                return usage("--rate: expected messages per second, e.g. 25");
        } else
            return usage("unknown option");
    }
    char *token_copy = NULL;
    if (token_arg) { /* out of argv (ps, /proc/PID/cmdline) at once */
        token_copy = strdup(token_arg);
        memset(token_arg, 'x', strlen(token_arg));
        token = token_copy;
    }
    if (!token || !*token) {
        fprintf(stderr, "async_broadcast: TELEGRAM_BOT_TOKEN is not set (and no --token)\n");
        return 2;
    }
    if (!chats_path || !text)
        return usage("--chats and --text are required");
    int64_t *chats = NULL;
    long n = read_chats(chats_path, &chats);
    if (n < 0)
        return 2;
    tg_bot *bot = tg_bot_new(token, &(tg_bot_options){.base_url = api && *api ? api : NULL});
    if (!bot) {
        fprintf(stderr, "async_broadcast: %s\n", tg_bot_new_errmsg());
        return 2;
    }
    tg_async *a = tg_async_new(bot, NULL);
    struct run r = {.tty = isatty(2)};
    tg_broadcast *b = a ? tg_broadcast_new(a, chats, (size_t)n,
                                           &(tg_broadcast_options){.text = text,
                                                                   .parse_mode = parse_mode,
                                                                   .rate_per_sec = rate,
                                                                   .progress_path = progress,
                                                                   .on_progress = on_progress,
                                                                   .on_done = on_done,
                                                                   .user = &r})
                        : NULL;
    if (!b) {
        fprintf(stderr, "async_broadcast: %s\n", a ? tg_broadcast_errmsg() : "no async handle");
        return 1;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    bool stopping = false;
    while (!r.done) { /* ends: every chat gets an outcome, or the stop drains what is out */
        if (interrupted && !stopping) {
            stopping = true;
            fprintf(stderr, "\nasync_broadcast: interrupted; waiting for messages in flight\n");
            tg_broadcast_stop(b);
        }
        if (tg_async_run_once(a, 200) < 0) {
            fprintf(stderr, "async_broadcast: the event loop failed\n");
            break;
        }
    }
    const tg_broadcast_progress *p = tg_broadcast_get_progress(b);
    printf("sent %zu, failed %zu", p->sent, p->failed);
    const char *sep = " (";
    for (int o = TG_BCAST_BLOCKED; o < TG_BCAST_NOUTCOMES; o++)
        if (p->by_outcome[o]) {
            printf("%s%s %zu", sep, tg_broadcast_outcome_name((tg_broadcast_outcome)o),
                   p->by_outcome[o]);
            sep = ", ";
        }
    printf("%s; flood-waited and retried %zu, resumed %zu%s\n", *sep == ',' ? ")" : "",
           p->flood_retried, p->resumed,
           p->finished ? "" : "; interrupted: run again with the same --progress to resume");
    int rc = p->finished ? 0 : 1;
    tg_broadcast_free(b);
    tg_async_free(a);
    tg_bot_free(bot);
    free(chats);
    free(token_copy);
    return rc;
}
