/*
 * tgkit_soak_bot: a libtgbot bot on tgbot-emulator under a million updates (run it through
 * bench/soak/run.sh bot, which draws the plots and writes the verdicts).
 *
 * Three processes: tgbot-emulator (the built one), the bot (this program again with
 * --role bot, so its RSS, descriptors and threads are its own) and the driver (this
 * program). The bot runs the dispatcher with its per-chat ordered workers and a
 * conversation per chat on SQLite storage: each message is "SEQ ID", and the handler checks
 * that SEQ is one more than the conversation's count (else it counts the update as out of
 * order or repeated), stores the new count, and appends ID (4 bytes) to a results file.
 * --mode polling (long polling) or webhook (the emulator POSTs to the bot's server).
 *
 * The driver makes --chats users, then sends --updates messages through the emulator's
 * control API from 4 threads (each owning a quarter of the chats, so each chat's messages
 * leave in order), keeping at most 20,000 sent but not yet handled. Half-way the bot is
 * restarted (SIGTERM, drained, started again on the same database): nothing may be lost
 * or handled twice across it. Every second it samples the bot. At the end it reads the
 * results file: every ID exactly once, and in each chat in increasing order.
 *
 * Output in --out DIR: samples.csv, summary.txt, emulator.log, bot.log. Exit 0 when the
 * run completed (the verdicts are report.py's), 1 when it could not run, 2 on usage.
 */
#include "proxy_proc.h" /* pproc_spawn_logged, pproc_log_wait, pproc_log_port: any program */
#include "ports.h"

#include "tgbot/tgbot.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SENDERS   4
#define LAG_MAX   20000
#define USER_BASE 300000000LL

static struct {
    long updates;
    int chats;
    const char *mode, *out, *emulator, *self;
} O = {.updates = 1000000,
       .chats = 1000,
       .mode = "polling",
       .out = "bench/results/soak-bot",
       .emulator = TGKIT_BINARY_DIR "/tgbot-emulator"};

/* ======================= the bot (--role bot) ======================= */

static int results_fd = -1;
static atomic_ullong bot_out_of_order, bot_repeated;

static tg_status on_message(tg_hctx *h, void *user)
{
    (void)user;
    const char *text = tg_hctx_event(h)->text;
    long long seq, id;
    if (!text || sscanf(text, "%lld %lld", &seq, &id) != 2)
        return TG_OK;
    int64_t n = 0;
    if (tg_conv_state(h) == NULL) {
        tg_status st = tg_conv_enter(h, "counting");
        if (st != TG_OK)
            return st;
    } else if (!tg_conv_get_int(h, "n", &n)) {
        n = 0;
    }
    if (seq <= n) {
        atomic_fetch_add(&bot_repeated, 1);
        return TG_OK; /* handled before: not stored again */
    }
    if (seq != n + 1)
        atomic_fetch_add(&bot_out_of_order, 1);
    tg_status st = tg_conv_set_int(h, "n", seq);
    if (st != TG_OK)
        return st;
    uint32_t rec = (uint32_t)id;
    if (write(results_fd, &rec, sizeof rec) != (ssize_t)sizeof rec)
        return TG_ERR_IO;
    return TG_OK;
}

static int bot_main(const char *api, const char *db, const char *results, int port)
{
    const char *token = getenv("TGKIT_SOAK_TOKEN"); /* never in argv */
    if (!token)
        return 2;
    results_fd = open(results, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (results_fd < 0)
        return 1;
    tg_bot *bot = tg_bot_new(token, &(tg_bot_options){.base_url = api, .timeout_ms = 60000});
    tg_storage *s = tg_storage_sqlite_new(&(tg_sqlite_options){.path = db});
    tg_router *r = tg_router_new();
    if (!bot || !s || !r) {
        fprintf(stderr, "soak bot: %s\n", !bot ? tg_bot_new_errmsg() : tg_storage_errmsg());
        return 1;
    }
    tg_router_on_kind(r, TG_UPDATE_MESSAGE, on_message, NULL);
    tg_dispatcher *d =
        tg_dispatcher_new(bot, r, &(tg_dispatcher_options){.storage = s, .workers = 4});
    if (!d || tg_dispatcher_stop_on_signals(d) != TG_OK) {
        fprintf(stderr, "soak bot: %s\n", tg_dispatcher_errmsg(NULL));
        return 1;
    }
    tg_status st;
    if (strcmp(O.mode, "webhook") == 0) {
        char url[128];
        snprintf(url, sizeof url, "http://127.0.0.1:%d/hook", port);
        tg_webhook_options wo = {.host = "127.0.0.1", .port = port, .path = "/hook",
                                 .url = url, .queue_wait_ms = 5000};
        tg_ctx *ctx = tg_ctx_new(bot);
        st = ctx ? tg_webhook_set(ctx, &wo) : TG_ERR_NOMEM;
        if (st == TG_OK)
            st = tg_run_webhook(d, &wo);
        tg_ctx_free(ctx);
    } else {
        st = tg_run_polling(d, &(tg_polling_options){.timeout_s = 5, .delete_webhook = true});
    }
    fprintf(stderr, "soak bot: stopped: %s; %llu out of order, %llu repeated\n",
            tg_strerror(st), atomic_load(&bot_out_of_order), atomic_load(&bot_repeated));
    tg_dispatcher_free(d);
    tg_router_free(r);
    tg_storage_free(s);
    tg_bot_free(bot);
    close(results_fd);
    return st == TG_OK ? 0 : 1;
}

/* ======================= the driver ======================= */

static char api[64], token[80], db[300], results[300], bot_log[300], emu_log[300];
static uint16_t emu_port;
static int hook_port;
static pid_t emu_pid, bot_pid;
static atomic_long sent, send_failures;
static atomic_bool stop_flag;
static atomic_int event_code;
static int restarts, bot_exit = -1;
static pthread_mutex_t bot_mu = PTHREAD_MUTEX_INITIALIZER; /* bot_pid during a restart */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static long handled_now(void)
{
    struct stat st;
    return stat(results, &st) == 0 ? (long)(st.st_size / 4) : 0;
}

static size_t sink(char *p, size_t s, size_t n, void *u)
{
    (void)p;
    (void)u;
    return s * n;
}

/* POST /control/CALL with body; 0 when the emulator answered 200. */
static int control(CURL *h, const char *call, const char *body)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/control/%s", emu_port, call);
    struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 30000L);
    long code = 0;
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(hd);
    return rc == CURLE_OK && code == 200 ? 0 : -1;
}

static pid_t start_bot(void)
{
    char port[16];
    snprintf(port, sizeof port, "%d", hook_port);
    char *argv[] = {(char *)O.self, "--role", "bot", "--mode", (char *)O.mode, "--api", api,
                    "--db", db, "--results", results, "--hook-port", port, NULL};
    setenv("TGKIT_SOAK_TOKEN", token, 1);
    pid_t p = pproc_spawn_logged(argv, bot_log);
    unsetenv("TGKIT_SOAK_TOKEN");
    return p;
}

static int stop_bot(void)
{
    pthread_mutex_lock(&bot_mu);
    pid_t p = bot_pid;
    bot_pid = -1;
    pthread_mutex_unlock(&bot_mu);
    if (p <= 0)
        return -1;
    kill(p, SIGTERM);
    int st = 0;
    for (int i = 0; i < 600; i++) { /* bounded: 60 s */
        if (waitpid(p, &st, WNOHANG) == p)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        nap_ms(100);
    }
    kill(p, SIGKILL);
    waitpid(p, NULL, 0);
    return 137;
}

/* The bot's first getUpdates / setWebhook made it known to the emulator. */
static int wait_bot_ready(void)
{
    CURL *h = curl_easy_init();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/control/state", emu_port);
    int rc = -1;
    for (int i = 0; i < 200 && rc != 0; i++) { /* bounded: 20 s */
        char *buf = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&buf, &len);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, NULL);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, m);
        CURLcode c = curl_easy_perform(h);
        fclose(m);
        bool webhook = strcmp(O.mode, "webhook") == 0;
        if (c == CURLE_OK && buf && strstr(buf, "\"bots\":[{") &&
            (!webhook || strstr(buf, "/hook\"")))
            rc = 0;
        free(buf);
        if (rc != 0)
            nap_ms(100);
    }
    curl_easy_cleanup(h);
    return rc;
}

static void *sender_main(void *arg)
{
    int k = (int)(intptr_t)arg;
    CURL *h = curl_easy_init();
    long per_chat = O.updates / O.chats;
    char body[256];
    for (long seq = 1; seq <= per_chat && !atomic_load(&stop_flag); seq++) {
        for (int c = k; c < O.chats && !atomic_load(&stop_flag); c += SENDERS) {
            while (atomic_load(&sent) - handled_now() > LAG_MAX && !atomic_load(&stop_flag))
                nap_ms(5);
            long id = (seq - 1) * O.chats + c; /* decodes back to (chat, seq) */
            snprintf(body, sizeof body,
                     "{\"user_id\":%lld,\"text\":\"%ld %ld\"}", USER_BASE + c, seq, id);
            if (control(h, "send", body) == 0)
                atomic_fetch_add(&sent, 1);
            else
                atomic_fetch_add(&send_failures, 1);
        }
    }
    curl_easy_cleanup(h);
    return NULL;
}

static void *sampler_main(void *arg)
{
    FILE *csv = arg;
    fprintf(csv, "t_s,rss_kb,fds,threads,handled_per_s,lag,sent,handled,event\n");
    double t0 = now_s();
    long prev = handled_now();
    for (long s = 1; !atomic_load(&stop_flag); s++) {
        double until = t0 + (double)s;
        while (now_s() < until && !atomic_load(&stop_flag))
            nap_ms(20);
        pthread_mutex_lock(&bot_mu);
        pid_t p = bot_pid;
        pthread_mutex_unlock(&bot_mu);
        long h = handled_now(), se = atomic_load(&sent);
        int ev = atomic_exchange(&event_code, 0);
        if (p <= 0)
            continue; /* the restart's gap: no process to sample */
        fprintf(csv, "%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld,%s\n", s, pproc_status_field(p, "VmRSS"),
                pproc_fd_count(p), pproc_status_field(p, "Threads"), h - prev, se - h, se, h,
                ev ? "bot-restart" : "");
        fflush(csv);
        prev = h;
    }
    return NULL;
}

static int parse(int argc, char **argv, const char **role, const char **a, const char **d,
                 const char **r, int *port)
{
    static const struct option lo[] = {
        {"updates", 1, NULL, 'u'}, {"chats", 1, NULL, 'c'},   {"mode", 1, NULL, 'm'},
        {"out", 1, NULL, 'o'},     {"emulator", 1, NULL, 'e'}, {"role", 1, NULL, 'R'},
        {"api", 1, NULL, 'a'},     {"db", 1, NULL, 'd'},      {"results", 1, NULL, 'r'},
        {"hook-port", 1, NULL, 'p'}, {"help", 0, NULL, 'h'},  {"webhook", 0, NULL, 'w'},
        {NULL, 0, NULL, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (ch) {
        case 'u': O.updates = atol(optarg); break;
        case 'c': O.chats = atoi(optarg); break;
        case 'm': O.mode = optarg; break;
        case 'w': O.mode = "webhook"; break;
        case 'o': O.out = optarg; break;
        case 'e': O.emulator = optarg; break;
        case 'R': *role = optarg; break;
        case 'a': *a = optarg; break;
        case 'd': *d = optarg; break;
        case 'r': *r = optarg; break;
        case 'p': *port = atoi(optarg); break;
        case 'h':
            printf("usage: tgkit_soak_bot [--updates N] [--chats N] [--mode polling|webhook | "
                   "--webhook] [--out DIR] [--emulator PATH]\n");
            exit(0);
        default: return -1;
        }
    }
    if (O.updates < 1000 || O.chats < SENDERS || O.chats > 100000 ||
        (strcmp(O.mode, "polling") && strcmp(O.mode, "webhook"))) {
        fprintf(stderr, "tgkit_soak_bot: --updates >= 1000, --chats 4..100000, --mode "
                        "polling or webhook\n");
        return -1;
    }
    return 0;
}

/* Updates the bot was given again after it had handled them (the conversation's count
   caught them), summed over its runs' last log lines. */
static long redelivered(void)
{
    FILE *f = fopen(bot_log, "r");
    char line[512];
    long sum = 0, ooo, rep;
    while (f && fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "soak bot: stopped: ");
        if (p && (p = strchr(p, ';')) && sscanf(p, "; %ld out of order, %ld repeated", &ooo,
                                                &rep) == 2)
            sum += rep;
    }
    if (f)
        fclose(f);
    return sum;
}

static void analyse(FILE *f, long expected)
{
    long per_chat = O.updates / O.chats;
    uint8_t *seen = calloc((size_t)expected, 1);
    long *last = calloc((size_t)O.chats, sizeof *last);
    long handled = 0, dup = 0, ooo = 0, bad = 0, missing = 0;
    int fd = open(results, O_RDONLY);
    uint32_t rec[4096];
    ssize_t n;
    while (fd >= 0 && seen && last && (n = read(fd, rec, sizeof rec)) > 0) {
        for (ssize_t i = 0; i < n / 4; i++) {
            long id = rec[i];
            if (id >= expected) {
                bad++;
                continue;
            }
            handled++;
            if (seen[id]++)
                dup++;
            long c = id % O.chats, seq = id / O.chats + 1;
            if (seq <= last[c])
                ooo++;
            last[c] = seq;
        }
    }
    if (fd >= 0)
        close(fd);
    for (long i = 0; seen && i < expected; i++)
        missing += !seen[i];
    fprintf(f, "updates=%ld\nchats=%d\nper_chat=%ld\nmode=%s\nsent=%ld\nsend_failures=%ld\n"
               "handled=%ld\nduplicates=%ld\nmissing=%ld\nout_of_order=%ld\nunknown_ids=%ld\n"
               "redelivered=%ld\nrestarts=%d\nbot_exit=%d\n",
            expected, O.chats, per_chat, O.mode, atomic_load(&sent), atomic_load(&send_failures),
            handled, dup, missing, ooo, bad, redelivered(), restarts, bot_exit);
    free(seen);
    free(last);
}

int main(int argc, char **argv)
{
    const char *role = "driver", *a = NULL, *d = NULL, *r = NULL;
    int port = 0;
    if (parse(argc, argv, &role, &a, &d, &r, &port) != 0)
        return 2;
    if (strcmp(role, "bot") == 0)
        return a && d && r ? bot_main(a, d, r, port) : 2;
    signal(SIGPIPE, SIG_IGN);
    O.self = "/proc/self/exe";
    char self[512];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl > 0) {
        self[sl] = '\0';
        O.self = self;
    }
    O.updates -= O.updates % O.chats; /* whole rounds: every chat gets as many */
    char mk[512];
    snprintf(mk, sizeof mk, "mkdir -p '%s'", O.out);
    if (system(mk) != 0)
        return 1;
    snprintf(db, sizeof db, "%s/bot.db", O.out);
    snprintf(results, sizeof results, "%s/handled.bin", O.out);
    snprintf(bot_log, sizeof bot_log, "%s/bot.log", O.out);
    snprintf(emu_log, sizeof emu_log, "%s/emulator.log", O.out);
    unlink(db);
    unlink(results);
    unlink(bot_log);
    unlink(emu_log);
    uint8_t rnd[24]; /* a token of Telegram's shape: ID:35+ characters */
    if (RAND_bytes(rnd, sizeof rnd) != 1)
        return 1;
    int tn = snprintf(token, sizeof token, "7%05u:", (unsigned)(rnd[0] | rnd[1] << 8));
    for (int i = 2; i < 24; i++)
        tn += snprintf(token + tn, sizeof token - (size_t)tn, "%02x", rnd[i]);
    hook_port = tgtest_listen_port();
    curl_global_init(CURL_GLOBAL_DEFAULT);

    char *eargv[] = {(char *)O.emulator, "--listen", "127.0.0.1:0", NULL};
    emu_pid = pproc_spawn_logged(eargv, emu_log);
    if (emu_pid < 0 || pproc_log_wait(emu_log, "web chat at", 1) != 0 ||
        pproc_log_port(emu_log, "web chat at", &emu_port) != 0) {
        fprintf(stderr, "soak: tgbot-emulator did not start (see %s)\n", emu_log);
        return 1;
    }
    snprintf(api, sizeof api, "http://127.0.0.1:%u", emu_port);
    bot_pid = start_bot();
    if (bot_pid < 0 || wait_bot_ready() != 0) {
        fprintf(stderr, "soak: the bot did not reach the emulator (see %s)\n", bot_log);
        return 1;
    }
    CURL *h = curl_easy_init();
    char body[160];
    for (int c = 0; c < O.chats; c++) {
        snprintf(body, sizeof body, "{\"id\":%lld,\"first_name\":\"Soak %d\"}", USER_BASE + c, c);
        if (control(h, "users", body) != 0) {
            fprintf(stderr, "soak: creating user %d failed\n", c);
            return 1;
        }
    }
    curl_easy_cleanup(h);
    printf("soak: bot pid %d (%s) on tgbot-emulator port %u: %ld updates over %d chats, "
           "a restart half-way\n",
           (int)bot_pid, O.mode, emu_port, O.updates, O.chats);
    fflush(stdout);

    char csv_path[320];
    snprintf(csv_path, sizeof csv_path, "%s/samples.csv", O.out);
    FILE *csv = fopen(csv_path, "w");
    if (!csv)
        return 1;
    pthread_t senders[SENDERS], sampler;
    pthread_create(&sampler, NULL, sampler_main, csv);
    for (int k = 0; k < SENDERS; k++)
        pthread_create(&senders[k], NULL, sender_main, (void *)(intptr_t)k);

    /* the restart, half-way through what was sent */
    while (atomic_load(&sent) < O.updates / 2 && atomic_load(&send_failures) < 1000)
        nap_ms(50);
    int st = stop_bot();
    if (st != 0)
        fprintf(stderr, "soak: the bot exited %d at the restart\n", st);
    pthread_mutex_lock(&bot_mu);
    bot_pid = start_bot();
    pthread_mutex_unlock(&bot_mu);
    restarts++;
    atomic_store(&event_code, 1);
    if (bot_pid < 0)
        fprintf(stderr, "soak: restarting the bot failed\n");

    for (int k = 0; k < SENDERS; k++)
        pthread_join(senders[k], NULL);
    /* everything sent: wait for the bot, as long as it makes progress (bounded) */
    long last = -1;
    double quiet_since = now_s();
    while (handled_now() < atomic_load(&sent) && now_s() - quiet_since < 60) {
        long hn = handled_now();
        if (hn != last) {
            last = hn;
            quiet_since = now_s();
        }
        nap_ms(100);
    }
    atomic_store(&stop_flag, true);
    pthread_join(sampler, NULL);
    fclose(csv);
    bot_exit = stop_bot();
    if (st != 0 && bot_exit == 0)
        bot_exit = st;
    kill(emu_pid, SIGTERM);
    waitpid(emu_pid, NULL, 0);

    char sum[320];
    snprintf(sum, sizeof sum, "%s/summary.txt", O.out);
    FILE *f = fopen(sum, "w");
    if (!f)
        return 1;
    analyse(f, O.updates);
    fclose(f);
    unlink(results);
    unlink(db);
    printf("soak: done; %s/samples.csv and summary.txt written\n", O.out);
    return 0;
}
