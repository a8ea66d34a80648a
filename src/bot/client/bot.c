/*
 * bot.c: tg_bot, the immutable, thread-shared half of the client.
 *
 * It validates and keeps the token (a secret: registered with the logger for scrubbing,
 * never echoed), builds the two URL prefixes once, owns the resolved retry policy, the flood
 * buckets and the curl share handle, and provides the shutdown flag and the interruptible
 * sleep every wait of the client uses (retry backoff, 429 waits, flood slots).
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "bot/client/client_int.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "core/sized.h"
#include "core/str.h"

#define DEFAULT_BASE_URL           "https://api.telegram.org"
#define DEFAULT_TIMEOUT_MS         60000
#define DEFAULT_CONNECT_TIMEOUT_MS 10000
#define DEFAULT_MAX_RESPONSE       ((size_t)64 << 20) /* bytes */
#define DEFAULT_MAX_CONNECTIONS    64
#define DEFAULT_ARENA_WARN         ((size_t)16 << 20) /* bytes */
#define TOKEN_MIN_SECRET           35                 /* characters after ':' */
#define TOKEN_MAX_LEN              256

static _Thread_local const char *new_errmsg = "";

/* Embedded in tg_bot_options (and tg_retry_policy passed by pointer): these two are frozen,
 * because growing them would move every later field of tg_bot_options (docs/abi.md). New
 * knobs go at the end of tg_bot_options instead. */
#if defined(__LP64__)
_Static_assert(sizeof(tg_retry_policy) == 24, "tg_retry_policy is frozen (docs/abi.md)");
_Static_assert(sizeof(tg_flood_options) == 40, "tg_flood_options is frozen (docs/abi.md)");
#endif

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;

static void curl_init_once(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

TG_API const char *tg_bot_new_errmsg(void)
{
    return new_errmsg;
}

/* "<digits>:<35+ of [A-Za-z0-9_-]>". Says why in *why; never quotes the token. */
static bool token_valid(const char *t, int64_t *id, const char **why)
{
    size_t n = strnlen(t, TOKEN_MAX_LEN + 1), colon = 0;
    while (colon < n && t[colon] >= '0' && t[colon] <= '9')
        colon++;
    if (n > TOKEN_MAX_LEN) {
        *why = "token: longer than 256 characters";
        return false;
    }
    if (colon == 0 || colon > 19 || colon >= n || t[colon] != ':') {
        *why = "token: expected <bot id digits>:<secret>, the id part is malformed";
        return false;
    }
    if (tg__parse_i64(t, colon, id) != 0 || *id <= 0) {
        *why = "token: the bot id before ':' is out of range";
        return false;
    }
    for (size_t i = colon + 1; i < n; i++) {
        char c = t[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-')) {
            *why = "token: the secret after ':' may only hold A-Z a-z 0-9 _ -";
            return false;
        }
    }
    if (n - colon - 1 < TOKEN_MIN_SECRET) {
        *why = "token: the secret after ':' is shorter than 35 characters";
        return false;
    }
    return true;
}

static bool base_url_valid(const char *u)
{
    if (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0)
        return false;
    for (const char *p = u; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == '?' || *p == '#')
            return false;
    return true;
}

/* "<base>" mid token "/" (or "/test/"); token is the real one or a stand-in for messages. */
static char *make_prefix(const tg_bot *bot, const char *mid, const char *token, size_t token_len,
                         bool test_env, size_t *len)
{
    tg__buf b;
    tg__buf_init(&b, 4096);
    size_t base_len = strlen(bot->base_url);
    while (base_len > 0 && bot->base_url[base_len - 1] == '/')
        base_len--;
    /* Check every step: a failed append followed by a successful one would build a wrong
     * URL (and one without the token answers 401). */
    if (tg__buf_append(&b, bot->base_url, base_len) != 0 || tg__buf_puts(&b, mid) != 0 ||
        tg__buf_append(&b, token, token_len) != 0 ||
        tg__buf_puts(&b, test_env ? "/test/" : "/") != 0) {
        tg__buf_cleanup(&b);
        return NULL;
    }
    return tg__buf_detach(&b, len);
}

static int copy_strings(tg_bot *bot, const tg_bot_options *o)
{
    char ua[64];
    snprintf(ua, sizeof ua, "tgbot/%s", tg_version());
    bot->base_url = tg__strdup(o->base_url ? o->base_url : DEFAULT_BASE_URL);
    bot->user_agent = tg__strdup(o->user_agent ? o->user_agent : ua);
    if (!bot->base_url || !bot->user_agent)
        return -1;
    if ((o->proxy && !(bot->proxy = tg__strdup(o->proxy))) ||
        (o->ca_file && !(bot->ca_file = tg__strdup(o->ca_file))) ||
        (o->ca_path && !(bot->ca_path = tg__strdup(o->ca_path))))
        return -1;
    const char *t = bot->token, *shown = "<token>";
    size_t tn = bot->token_len, n;
    bot->api_prefix = make_prefix(bot, "/bot", t, tn, o->test_env, &bot->api_prefix_len);
    bot->file_prefix = make_prefix(bot, "/file/bot", t, tn, o->test_env, &bot->file_prefix_len);
    bot->api_shown = make_prefix(bot, "/bot", shown, strlen(shown), o->test_env, &n);
    bot->file_shown = make_prefix(bot, "/file/bot", shown, strlen(shown), o->test_env, &n);
    return bot->api_prefix && bot->file_prefix && bot->api_shown && bot->file_shown ? 0 : -1;
}

static int init_sync(tg_bot *bot)
{
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0)
        return -1;
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&bot->wait_cv, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0)
        return -1;
    pthread_mutex_init(&bot->wait_mu, NULL);
    for (size_t i = 0; i < sizeof bot->share_mu / sizeof bot->share_mu[0]; i++)
        pthread_mutex_init(&bot->share_mu[i], NULL);
    atomic_init(&bot->shutdown, false);
    return 0;
}

/* Core levels are the public ones minus one (TG_LOG_DEFAULT takes the public 0). */
static void log_deliver(void *user, int level, const char *msg)
{
    const tg_bot *bot = user;
    if (bot->user_log)
        bot->user_log(bot->user_log_user, level + 1, msg);
    else
        tg__log_stderr(level, msg);
}

/* Every line of the bot's logger: repeated warnings are held back (logrep.c). */
static void log_sink(void *user, int level, const char *msg)
{
    const tg_bot *bot = user;
    tg__logrep_line(bot->rep, level, msg, log_deliver, user);
}

static int apply_options(tg_bot *bot, const tg_bot_options *o)
{
    bot->timeout_ms = o->timeout_ms ? o->timeout_ms : DEFAULT_TIMEOUT_MS;
    bot->connect_timeout_ms =
        o->connect_timeout_ms ? o->connect_timeout_ms : DEFAULT_CONNECT_TIMEOUT_MS;
    bot->max_response_bytes = o->max_response_bytes ? o->max_response_bytes : DEFAULT_MAX_RESPONSE;
    bot->max_connections = o->max_connections ? o->max_connections : DEFAULT_MAX_CONNECTIONS;
    bot->debug_arena = o->debug_arena;
    bot->arena_warn_bytes = o->arena_warn_bytes ? o->arena_warn_bytes : DEFAULT_ARENA_WARN;
    int level = o->log_level ? o->log_level - 1 : TG__LOG_INFO;
    if (level < TG__LOG_TRACE || level > TG__LOG_OFF) {
        new_errmsg = "options: log_level is not one of TG_LOG_*";
        return -1;
    }
    bot->user_log = o->log;
    bot->user_log_user = o->log_user;
    bot->rep = tg__logrep_new(); /* NULL (no memory): every line passes */
    tg__logger_init(&bot->log, level, log_sink, bot);
    if (tg__logger_add_secret(&bot->log, bot->token, bot->token_len) != 0) {
        new_errmsg = "out of memory";
        return -1;
    }
    tg__retry_resolve(&o->retry, &bot->retry);
    if (tg__flood_init(&bot->flood, &o->flood) != 0) {
        new_errmsg = "options: flood control rates must be positive and finite";
        return -1;
    }
    bot->transport = o->transport ? *o->transport : tg__curl_transport;
    if (!bot->transport.conn_new || !bot->transport.perform || !bot->transport.conn_free) {
        new_errmsg = "options: transport lacks conn_new, perform or conn_free";
        return -1;
    }
    if (tg__lean_is(&bot->transport)) {
        const char *why = tg__lean_pool_new(bot);
        if (why) {
            new_errmsg = why;
            return -1;
        }
    }
    return 0;
}

TG_API tg_bot *tg_bot_new_sized(const char *token, const tg_bot_options *opts, size_t opts_size)
{
    tg_bot_options copy;
    const tg_bot_options *o = &copy;
    int64_t id = 0;
    new_errmsg = "";
    if (!tg__sized_in(&copy, sizeof copy, opts, opts_size)) {
        new_errmsg = "options: " TG__SIZED_ERRMSG;
        return NULL;
    }
    if (!token || !token_valid(token, &id, &new_errmsg)) {
        if (!token)
            new_errmsg = "token: missing";
        return NULL;
    }
    if (o->base_url && !base_url_valid(o->base_url)) {
        new_errmsg = "options: base_url must be an http:// or https:// URL without spaces, "
                     "query or fragment";
        return NULL;
    }
    pthread_once(&curl_once, curl_init_once);
    if (curl_init_rc != CURLE_OK) {
        new_errmsg = "libcurl: global initialisation failed";
        return NULL;
    }
    tg_bot *bot = tg__calloc(1, sizeof *bot);
    if (!bot || init_sync(bot) != 0) {
        tg__free(bot);
        new_errmsg = "out of memory";
        return NULL;
    }
    bot->id = id;
    bot->token_len = strlen(token);
    bot->token = tg__strndup(token, bot->token_len);
    new_errmsg = "out of memory";
    if (!bot->token || copy_strings(bot, o) != 0 || apply_options(bot, o) != 0 ||
        tg__curl_share_new(bot) != 0)
        goto fail;
    new_errmsg = "";
    return bot;
fail:
    tg_bot_free(bot);
    return NULL;
}

TG_API void tg_bot_free(tg_bot *bot)
{
    if (!bot)
        return;
    tg__curl_share_free(bot);
    tg__lean_pool_free(bot);
    tg__flood_cleanup(&bot->flood);
    tg__bot_defaults_free(bot);
    tg__logrep_free(bot->rep, log_deliver, bot);
    bot->rep = NULL;
    tg__logger_cleanup(&bot->log);
    if (bot->token)
        memset(bot->token, 0, bot->token_len);
    if (bot->api_prefix)
        memset(bot->api_prefix, 0, bot->api_prefix_len);
    if (bot->file_prefix)
        memset(bot->file_prefix, 0, bot->file_prefix_len);
    tg__free(bot->token);
    tg__free(bot->api_prefix);
    tg__free(bot->file_prefix);
    tg__free(bot->api_shown);
    tg__free(bot->file_shown);
    tg__free(bot->base_url);
    tg__free(bot->user_agent);
    tg__free(bot->proxy);
    tg__free(bot->ca_file);
    tg__free(bot->ca_path);
    pthread_cond_destroy(&bot->wait_cv);
    pthread_mutex_destroy(&bot->wait_mu);
    for (size_t i = 0; i < sizeof bot->share_mu / sizeof bot->share_mu[0]; i++)
        pthread_mutex_destroy(&bot->share_mu[i]);
    tg__free(bot);
}

void tg__bot_wake(tg_bot *bot)
{
    pthread_mutex_lock(&bot->wait_mu);
    pthread_cond_broadcast(&bot->wait_cv);
    pthread_mutex_unlock(&bot->wait_mu);
}

TG_API void tg_bot_shutdown(tg_bot *bot)
{
    if (!bot)
        return;
    atomic_store(&bot->shutdown, true);
    tg__bot_wake(bot);
}

TG_API bool tg_bot_is_shut_down(const tg_bot *bot)
{
    return bot && atomic_load(&((tg_bot *)bot)->shutdown);
}

TG_API int64_t tg_bot_id(const tg_bot *bot)
{
    return bot ? bot->id : 0;
}

TG_API void tg_bot_log(const tg_bot *bot, int level, const char *fmt, ...)
{
    if (!bot || level <= TG_LOG_DEFAULT || level >= TG_LOG_OFF)
        return;
    tg__logger *lg = (tg__logger *)&bot->log;
    if (!tg__log_enabled(lg, level - 1))
        return;
    va_list ap;
    va_start(ap, fmt);
    tg__vlog(lg, level - 1, fmt, ap);
    va_end(ap);
}

tg_status tg__bot_sleep(tg_bot *bot, tg_ctx *ctx, uint64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + (ms % 1000) * 1000000u;
    ts.tv_sec += (time_t)(ms / 1000 + ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    tg_status st = TG_OK;
    pthread_mutex_lock(&bot->wait_mu);
    for (int spins = 0; spins < 1000000; spins++) {
        if (tg__ctx_cancelled(ctx)) {
            st = TG_ERR_CANCELLED;
            break;
        }
        if (pthread_cond_timedwait(&bot->wait_cv, &bot->wait_mu, &ts) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&bot->wait_mu);
    if (st == TG_OK && tg__ctx_cancelled(ctx))
        st = TG_ERR_CANCELLED;
    return st;
}
