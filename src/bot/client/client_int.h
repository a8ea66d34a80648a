/*
 * client_int.h: the insides of tg_bot and tg_ctx, shared by the files of src/bot/client/.
 *
 * Layout of the call path (one concept per file):
 *   bot.c        tg_bot: options, token, URL prefixes, logger, shutdown and interruptible waits
 *   ctx.c        tg_ctx: arena, buffers, last error and its accessors
 *   call.c       tg_call_raw*, the attempt loop, the response envelope
 *   retry.c      the retry decision (pure: policy + outcome -> wait or give up)
 *   flood.c      flood control: shared GCRA buckets keyed by chat id
 *   curl.c       the default transport over a reused curl easy handle and a shared cache
 *   lean.c       the lean transport: HTTP/1.1 keep-alive over sockets and libssl, a bot-wide
 *                pool; lean_body.c writes its multipart bodies, http1.c parses its answers
 *   download.c   getFile and file downloads
 *   method.c     tg__call, the entry point of the generated method wrappers
 *   async.c      the asynchronous client (tgbot/async.h): calls on timers and a loop;
 *                async_conn.c its non-blocking connections (insides in async_int.h)
 *
 * Invariants: the token only ever lives in bot->token, bot->api_prefix, bot->file_prefix and
 * ctx->url; it is registered with bot->log so anything logged is scrubbed, and every error
 * line is scrubbed before it is stored.
 */
#ifndef TGKIT_BOT_CLIENT_INT_H
#define TGKIT_BOT_CLIENT_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "core/arena.h"
#include "core/buf.h"
#include "core/log.h"
#include "bot/json/json.h"
#include "tgbot/client.h"

/* ---- flood control (flood.c) ---- */

struct tg__flood_slot {
    int64_t key;      /* chat id, or a hash of an "@username" */
    int64_t chat_tat; /* GCRA theoretical arrival time, microseconds */
    int64_t group_tat;
};

/* A shared (fleet-wide) flood check: returns the time the message may go (>= now_us), -1
 * when it would wait too long (or at all, fail-fast), or TG__FLOOD_UNAVAILABLE to fall back
 * to the local buckets. Called without the flood lock, from any thread; it may read f's
 * options and intervals (fixed after init). */
#define TG__FLOOD_UNAVAILABLE (-2)
struct tg__flood;
typedef int64_t (*tg__flood_remote_fn)(void *user, const struct tg__flood *f, int64_t key,
                                       bool group, int64_t now_us);

struct tg__flood {
    pthread_mutex_t mu;
    tg__flood_remote_fn remote; /* guarded by mu; NULL = local only */
    void *remote_user;
    tg_flood_options opt;
    int64_t global_us, chat_us, group_us; /* emission intervals */
    int64_t global_tat;
    struct tg__flood_slot *slots; /* open addressing, key INT64_MIN = empty */
    size_t cap, used;
};

int tg__flood_init(struct tg__flood *f, const tg_flood_options *opt);
void tg__flood_cleanup(struct tg__flood *f);
/* Reserve a slot for one message to key at or after now_us. Returns the time the message may
 * go (>= now_us), or -1 if it would have to wait (fail_fast) or wait beyond max_wait_ms. */
int64_t tg__flood_reserve(struct tg__flood *f, int64_t key, bool group, int64_t now_us);
/* Route reservations through fn (NULL: back to local only). Thread-safe. */
void tg__flood_set_remote(struct tg__flood *f, tg__flood_remote_fn fn, void *user);
/* Does method post messages (send*, forward*, copy*, but not sendChatAction)? */
bool tg__flood_applies(const char *method);

/* ---- retry (retry.c) ---- */

enum tg__outcome {
    TG__OUT_OK,
    TG__OUT_CONNECT, /* failed before the request was sent */
    TG__OUT_LOST,    /* timeout or lost connection after sending */
    TG__OUT_429,
    TG__OUT_5XX,
    TG__OUT_FATAL, /* anything else: no retry */
};

/* Effective values of a policy (zero fields replaced by defaults). */
void tg__retry_resolve(const tg_retry_policy *in, tg_retry_policy *out);
/*
 * Should attempt number `attempt` (1-based, just failed with `out`) be followed by another?
 * Returns the wait in ms before it, or -1 to give up. elapsed_ms is the time since the call
 * started; retry_after_s the 429's parameter (0 = absent); rnd a random 32-bit value for the
 * jitter.
 */
int64_t tg__retry_wait_ms(const tg_retry_policy *p, enum tg__outcome out, uint32_t attempt,
                          uint64_t elapsed_ms, int32_t retry_after_s, uint32_t rnd);

/* ---- the bot (bot.c) ---- */

struct tg_bot {
    char *token;
    size_t token_len;
    int64_t id;
    char *base_url;
    char *api_prefix; /* "<base>/bot<token>/" or ".../test/" (SECRET) */
    size_t api_prefix_len;
    char *file_prefix; /* "<base>/file/bot<token>/" or ".../test/" (SECRET) */
    size_t file_prefix_len;
    char *api_shown; /* the prefixes as errors show them: "<token>" stands for the token */
    char *file_shown;
    char *user_agent;
    char *proxy;
    char *ca_file;
    char *ca_path;
    uint32_t timeout_ms;
    uint32_t connect_timeout_ms;
    size_t max_response_bytes;
    uint32_t max_connections;
    bool debug_arena;        /* poison the arena at tg_ctx_reset */
    size_t arena_warn_bytes; /* warn once per ctx past this many arena bytes */
    tg__logger log;
    tg_log_fn user_log;
    void *user_log_user;
    tg_retry_policy retry; /* resolved */
    struct tg__flood flood;
    tg_transport transport;
    void *share; /* CURLSH *, owned by curl.c */
    struct tg__lean_pool *lean; /* owned by lean.c; only with the lean transport */
    pthread_mutex_t share_mu[8];
    atomic_bool shutdown;
    pthread_mutex_t wait_mu;
    pthread_cond_t wait_cv;
    _Atomic(struct tg__defaults_snap *) defaults; /* owned by defaults.c; NULL = none */
    struct tg__logrep *rep; /* repeats held back (logrep.c); NULL = every line passes */
};

/* logrep.c: hold back repeated warnings (see there). out gets the lines to show. */
struct tg__logrep *tg__logrep_new(void);
void tg__logrep_line(struct tg__logrep *r, int level, const char *msg,
                     void (*out)(void *user, int level, const char *msg), void *user);
/* Tests: a virtual clock (NULL = the monotonic one). */
void tg__logrep_set_clock(struct tg__logrep *r, uint64_t (*now_ms)(void *user), void *user);
/* Show the end of every run that held lines back (out may be NULL: drop them), then free. */
void tg__logrep_free(struct tg__logrep *r, void (*out)(void *user, int level, const char *msg),
                     void *user);

/* The bot's defaults for this call (load once per call), or NULL when none are set. */
const tg_bot_defaults *tg__bot_defaults(const tg_bot *bot);
/* Free every defaults snapshot (tg_bot_free). */
void tg__bot_defaults_free(tg_bot *bot);

/* Wait ms milliseconds unless the bot shuts down or ctx is cancelled first.
 * Returns TG_OK after the full wait, TG_ERR_CANCELLED otherwise. */
tg_status tg__bot_sleep(tg_bot *bot, tg_ctx *ctx, uint64_t ms);
/* Wake every waiter (shutdown, cancel). */
void tg__bot_wake(tg_bot *bot);

/* The default transport (curl.c). */
extern const tg_transport tg__curl_transport;
int tg__curl_share_new(tg_bot *bot);
void tg__curl_share_free(tg_bot *bot);

/* The lean transport (lean.c). tg__lean_is: is t the lean transport? tg__lean_pool_new makes
 * the bot's connection pool (base URL parsed, proxy refused): NULL on success, else why (a
 * static string for tg_bot_new_errmsg). tg__lean_pool_free closes every idle connection. */
bool tg__lean_is(const tg_transport *t);
const char *tg__lean_pool_new(tg_bot *bot);
void tg__lean_pool_free(tg_bot *bot);

/* ---- the context (ctx.c) ---- */

#include "bot/client/defer.h"

struct tg_ctx {
    tg_bot *bot;
    tg__arena arena;
    tg__buf req;         /* encoded request body */
    tg__buf resp;        /* response body */
    tg__buf url;         /* SECRET: prefix + method */
    tg__jdoc doc;        /* parse of resp (or of req while preparing a call) */
    void *conn;          /* transport connection */
    uint32_t timeout_ms; /* 0 = the bot's */
    bool has_policy;
    tg_retry_policy policy; /* resolved, when has_policy */
    atomic_bool cancel;
    atomic_flag busy;    /* a call is running (tg__ctx_enter/leave) */
    atomic_bool misused; /* a call found busy set: two threads used the ctx at once */
    uint32_t rnd;
    /* last error */
    tg_error_info err;
    tg__buf errmsg;
    tg__buf errdesc;
    tg__buf errpath;
    char method[64];
    /* per-call transient state */
    const char *url_shown;      /* api_shown or file_shown, by the URL the call uses */
    const char *url_shown_rest; /* the method or file path after it (valid during the call) */
    int http_status;
    uint32_t result_tok; /* "result" token in doc after a successful call */
    bool too_big;
    bool sink_oom; /* too_big came from out of memory, not the cap */
    bool arena_warned;
    tg_ctx_stats stats;
    /* deferred mode (bot/client/defer.h): calls are handed here instead of being sent */
    tg__ctx_defer_fn defer;
    void *defer_user;
};

/* Guard every public entry point that works on ctx: false (and a logged error) when another
 * call is running on it, i.e. two threads share one ctx. Pair a true with tg__ctx_leave. */
bool tg__ctx_enter(tg_ctx *ctx);
void tg__ctx_leave(tg_ctx *ctx);
/* Start a call: clear the last error, remember method, check cancel/shutdown. */
tg_status tg__ctx_begin(tg_ctx *ctx, const char *method);
/* Forget the last error (after a retried call finally succeeds). */
void tg__ctx_clear_error(tg_ctx *ctx);
/* Record a failure: status plus a formatted detail; builds errmsg "<method>: <detail>" and
 * scrubs it. Returns st. */
tg_status tg__ctx_fail(tg_ctx *ctx, tg_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
uint32_t tg__ctx_random(tg_ctx *ctx);
/* Whether the running call should stop (ctx cancelled or bot shut down). */
bool tg__ctx_cancelled(void *ctx);
/* The whole-request timeout of ctx's calls (its own, else the bot's). */
uint32_t tg__ctx_timeout(const tg_ctx *ctx);
/* Lazily create the transport connection. */
tg_status tg__ctx_conn(tg_ctx *ctx);

/* ---- the call path (call.c) ---- */

/*
 * The call path's answer sink (write_user = the ctx): appends to ctx->resp, the buffer the
 * JSON tokenizer reads, within max_response_bytes. A built-in transport that sees it as
 * req->write may instead receive body bytes straight into that buffer: tg__resp_room gives
 * room for up to want bytes at its end (NULL when the cap or memory is exhausted, leaving the
 * same state a refused write leaves), tg__resp_commit counts the n bytes that arrived.
 */
size_t tg__resp_sink(void *ctx, const char *p, size_t n);
char *tg__resp_room(void *ctx, size_t want, size_t *room);
void tg__resp_commit(void *ctx, size_t n);

struct tg__call_req {
    const char *method;
    const char *body; /* JSON body (NULL = none) */
    size_t body_len;
    const tg_form_field *fields; /* multipart when nfields + nfiles > 0 */
    size_t nfields;
    const tg_file_part *files;
    size_t nfiles;
    bool keep_source; /* parse an arena copy of the answer (decoded values may point in) */
};

/*
 * Run a prepared request: flood control, URL, attempts with retries, the response envelope.
 * On TG_OK, ctx->doc holds the parsed answer and ctx->result_tok its "result".
 * Flood control reads the chat id from body (JSON) or from the "chat_id" form field.
 */
tg_status tg__call_exec(tg_ctx *ctx, const struct tg__call_req *r);
/* A prepared request on a deferred ctx (defer.h): queue it, or refuse what cannot be. */
tg_status tg__defer_call(tg_ctx *ctx, const struct tg__call_req *r, bool wants_result);
/* ctx->url = prefix + rest (prefix is the bot's api_prefix or file_prefix). */
tg_status tg__ctx_url(tg_ctx *ctx, const char *prefix, size_t prefix_len, const char *rest);
/* Parse ctx->resp as a Bot API envelope {"ok":..., "result"|error} (ctx->http_status set).
 * TG_OK with ctx->result_tok; else the error is recorded: TG_ERR_API with error_code,
 * description and parameters, TG_ERR_HTTP for a non-200 answer that is no envelope,
 * TG_ERR_DECODE, TG_ERR_NOMEM. *out classifies it for the retry policy. */
tg_status tg__call_envelope(tg_ctx *ctx, bool keep_source, enum tg__outcome *out);
/* Record a transport failure (res->status != TG_OK) and classify it for the retry policy. */
tg_status tg__ctx_transport_error(tg_ctx *ctx, const tg_http_result *res, enum tg__outcome *out);
/* The chat a send-like call goes to (JSON body or chat_id form field); false if none.
 * Parses into ctx->doc. */
bool tg__call_chat_key(tg_ctx *ctx, const struct tg__call_req *r, int64_t *key);
/* tg_call_raw's checks: method name, params JSON (NULL/"" becomes "{}"), the required
 * parameters of a known method; the call is begun on ctx (error cleared, method set). */
tg_status tg__raw_prepare(tg_ctx *ctx, const char *method, const char **json_params, size_t *len);
/* Copy "result" of the parsed answer into the arena (tg_call_raw's out). */
tg_status tg__raw_result(tg_ctx *ctx, const char **result, size_t *result_len);
/* The typed call path, split for the async client (method.c): begin the call, check the
 * required params, encode them into ctx->req (multipart fields and parts when uploading)
 * and fill *r; then, after tg__call_exec's work, decode "result" into out. */
struct tg__method;
tg_status tg__method_prepare(tg_ctx *ctx, const struct tg__method *m, const void *params,
                             struct tg__call_req *r);
tg_status tg__method_decode(tg_ctx *ctx, const struct tg__method *m, void *out);
/* Check file parts before sending (one source each; paths readable). */
tg_status tg__check_files(tg_ctx *ctx, const tg_file_part *files, size_t nfiles);
/* Turn the members of the JSON object json[0..len) into form fields in the ctx arena.
 * Returns TG_OK or TG_ERR_INVALID/NOMEM with the error set. */
tg_status tg__json_to_fields(tg_ctx *ctx, const char *json, size_t len, tg_form_field **fields,
                             size_t *n);

#endif
