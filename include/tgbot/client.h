/*
 * tgbot/client.h: the bot handle, per-thread call contexts, errors, retries, flood control,
 * file uploads and downloads of libtgbot.
 *
 * A tg_bot is made once from a token and options (copied) and is shared by any number of
 * threads: its configuration is immutable after tg_bot_new(), and the things it shares (the
 * connection cache, DNS cache and TLS sessions, through a curl share handle; the flood-control
 * buckets) are locked internally. Work happens through a tg_ctx: one per thread (or per handler
 * invocation), used by one thread at a time. A ctx owns an arena for everything decoded, the
 * last error's details and a reused transport connection (a curl easy handle), so a warm ctx
 * makes a call with no allocation of its own.
 *
 * The token is a secret: it is never logged, never put in an error message, and the URL that
 * carries it is never shown (curl's verbose output goes through the bot's logger, which
 * scrubs it).
 *
 * Lifetimes: every pointer a tg_ctx_* accessor returns stays valid until the next call made
 * through that ctx, tg_ctx_reset() or tg_ctx_free(). Results of tg_call_raw() and downloads to
 * memory live in the ctx arena until tg_ctx_reset() or tg_ctx_free().
 */
#ifndef TGBOT_CLIENT_H
#define TGBOT_CLIENT_H

#include "tgbot/common.h"
#include "tgbot/types.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_bot tg_bot;
typedef struct tg_ctx tg_ctx;

/* ---- logging ---- */

enum {
    TG_LOG_DEFAULT = 0, /* in options: TG_LOG_INFO */
    TG_LOG_TRACE = 1,   /* curl's verbose output (scrubbed) */
    TG_LOG_DEBUG = 2,   /* one line per call: method, status, attempts, time */
    TG_LOG_INFO = 3,
    TG_LOG_WARN = 4, /* retries, flood waits, failed calls */
    TG_LOG_ERROR = 5,
    TG_LOG_OFF = 6,
};

/* A log sink. line is NUL-terminated, already scrubbed of the token, without a newline, and
 * valid only during the call. Called from whichever thread logs: it must be thread-safe. */
typedef void (*tg_log_fn)(void *user, int level, const char *line);

/* ---- retry policy ---- */

/*
 * When a failed call is tried again. Zero in every field means the documented default, so
 * (tg_retry_policy){0} is the default policy: 429s are retried after retry_after (while the
 * total wait stays bounded), connection failures that happened before the request was sent
 * are retried, everything else fails at once.
 *
 * 5xx answers, timeouts and connections lost after the request was sent are retried only with
 * retry_5xx / retry_after_send: the server may have acted on the request already, so a
 * retried sendMessage can post the message twice. Opt in only for idempotent methods, or when
 * a duplicate is better than a loss.
 *
 * ABI: frozen (it sits inside tg_bot_options); new retry knobs go at the end of
 * tg_bot_options. The same holds for tg_flood_options.
 */
typedef struct tg_retry_policy {
    uint32_t max_attempts;      /* attempts in all, first included; 0 = 5; 1 = never retry */
    uint32_t max_total_ms;      /* bound on the whole call, waits included; 0 = 120000 */
    uint32_t max_retry_after_s; /* a 429 asking for longer fails at once; 0 = 60 */
    uint32_t backoff_base_ms;   /* first backoff for non-429 retries; 0 = 250 */
    uint32_t backoff_max_ms;    /* cap of the exponential backoff; 0 = 10000 */
    bool no_retry_429;          /* never retry 429 Too Many Requests */
    bool no_retry_connect;      /* never retry connection failures before sending */
    bool retry_5xx;             /* retry HTTP 5xx answers (duplicates possible) */
    bool retry_after_send;      /* retry timeouts and lost connections after sending
                                   (duplicates possible) */
} tg_retry_policy;

/* ---- flood control ---- */

/*
 * Client-side rate limiting that keeps a bot inside Telegram's documented limits. Off unless
 * enabled. It applies to the methods that post messages (send*, forward*, copy*) and is keyed
 * by their chat_id: a global limit, one per chat, and a stricter one for groups and channels
 * (negative ids and "@username" ids). Requests are evenly spaced (no bursts). Thread-safe: all
 * ctxs of a bot share the buckets.
 */
typedef struct tg_flood_options {
    bool enabled;
    bool fail_fast;        /* TG_ERR_FLOOD at once instead of waiting for a slot */
    double global_per_sec; /* 0 = 30 messages per second over all chats */
    double chat_per_sec;   /* 0 = 1 message per second per chat */
    double group_per_min;  /* 0 = 20 messages per minute per group or channel */
    uint32_t max_wait_ms;  /* a slot further away than this fails with TG_ERR_FLOOD;
                              0 = 60000 */
} tg_flood_options;

/* ---- transport ---- */

/* One file part of a multipart upload. Exactly one source: path, data or read. */
typedef struct tg_file_part {
    const char *name;         /* form field: the parameter ("document") or an attach:// name */
    const char *filename;     /* NULL = the path's last component, else "file" */
    const char *content_type; /* NULL = application/octet-stream */
    const char *path;         /* streamed from disk while sending, never loaded whole */
    const void *data;         /* from memory: borrowed for the call */
    size_t len;
    /* Read callback: fill buf with up to n bytes; return the count, 0 at the end, or
     * (size_t)-1 to abort the upload. size is the total (-1 if unknown: chunked encoding). */
    size_t (*read)(void *user, char *buf, size_t n);
    void *read_user;
    int64_t size;
} tg_file_part;

/* A plain form field of a multipart upload (value is borrowed for the call). */
typedef struct tg_form_field {
    const char *name;
    const char *value;
    size_t len;
} tg_form_field;

typedef struct tg_http_request {
    const char *url;  /* SECRET: contains the token; never log or show it */
    bool post;        /* false: GET (downloads) */
    const char *body; /* JSON body of a POST without files (NULL = empty) */
    size_t body_len;
    const tg_form_field *fields; /* multipart when nfields + nfiles > 0 */
    size_t nfields;
    const tg_file_part *files;
    size_t nfiles;
    uint32_t timeout_ms; /* whole transfer; 0 = none */
    /* Response body sink: return n to go on, anything else aborts the transfer. */
    size_t (*write)(void *user, const char *p, size_t n);
    void *write_user;
    /* Optional: told the HTTP status once, before the first write (write_user is passed). */
    void (*on_status)(void *user, int http_status);
} tg_http_request;

typedef struct tg_http_result {
    tg_status status;  /* TG_OK (any HTTP status), TG_ERR_TRANSPORT, TG_ERR_TIMEOUT,
                          TG_ERR_CANCELLED, TG_ERR_IO (a file part could not be read),
                          TG_ERR_NOMEM */
    int http_status;   /* when status == TG_OK */
    bool sent;         /* the request may have reached the server (false: failed while
                          resolving or connecting, safe to retry) */
    bool aborted;      /* the write callback stopped the transfer */
    int code;          /* the transport's own error code (CURLcode for curl) */
    uint32_t connects; /* new connections opened for this request */
    char msg[256];     /* the transport's error text; must not contain the URL */
} tg_http_result;

/*
 * A pluggable HTTP client. libcurl is the default; tests and users may plug their own.
 * conn_new makes one connection state per tg_ctx (NULL on failure); perform runs a request
 * on it and fills *res (perform must check cancelled() regularly while blocking and stop
 * with TG_ERR_CANCELLED when it returns true); conn_free releases it. All three are called
 * from the thread using the ctx; user is shared by every ctx of the bot.
 */
typedef struct tg_transport {
    void *(*conn_new)(void *user, const tg_bot *bot);
    void (*perform)(void *conn, const tg_http_request *req, tg_http_result *res,
                    bool (*cancelled)(void *cancel_user), void *cancel_user);
    void (*conn_free)(void *conn);
    void *user;
} tg_transport;

/*
 * The lean transport: HTTP/1.1 keep-alive over a plain socket or TLS (OpenSSL libssl, TLS 1.2
 * and 1.3, SNI, certificate and host name verification against ca_file / ca_path or the
 * system store, session resumption), with a small pool of connections per bot shared by its
 * contexts. Answers are parsed in place; a warm call allocates nothing. For bots that send a
 * lot. It does not do HTTP/2 or proxies: tg_bot_new() refuses it together with proxy.
 * Use: tg_bot_options.transport = tg_transport_lean(). The returned struct is static; it may
 * be used by any number of bots.
 * Thread-safety: any thread. tg_error_info.transport_code carries the CURLcode numbers of the
 * same failures (7 cannot connect, 28 timeout, 60 certificate, ...).
 */
TG_API const tg_transport *tg_transport_lean(void);

/* ---- the bot ---- */

/*
 * Options of tg_bot_new(). Zero in every field means the default written next to it, so
 * (tg_bot_options){0} or NULL is a valid configuration. Strings are copied.
 */
typedef struct tg_bot_options {
    const char *base_url;        /* NULL = "https://api.telegram.org"; a local Bot API
                                    server ("http://127.0.0.1:8081") works the same way */
    bool test_env;               /* Telegram's test environment: /bot<token>/test/<method> */
    uint32_t timeout_ms;         /* whole request; 0 = 60000 (raise it for long polling
                                    beyond 50 s and for large uploads) */
    uint32_t connect_timeout_ms; /* 0 = 10000 */
    const char *user_agent;      /* NULL = "tgbot/<version>" */
    const char *proxy;           /* "http://host:port", "socks5h://host:port"; NULL = none
                                    (curl's proxy environment variables are ignored) */
    const char *ca_file;         /* PEM bundle; NULL = the system default */
    const char *ca_path;         /* directory of hashed certificates; NULL = default */
    tg_log_fn log;               /* NULL = stderr. Repeats of a warning (the same text up
                                    to its numbers) are held back and summarised: the
                                    10th, 100th, ... time, and the count at the end of a
                                    run (docs/client.md) */
    void *log_user;
    int log_level;                 /* TG_LOG_*; 0 = TG_LOG_INFO (start and stop lines) */
    tg_retry_policy retry;         /* {0} = the default policy */
    tg_flood_options flood;        /* {0} = off */
    const tg_transport *transport; /* NULL = libcurl; tg_transport_lean() for the lean one;
                                      the struct is copied */
    size_t max_response_bytes;     /* cap on an API answer's body; 0 = 64 MiB */
    uint32_t max_connections;      /* connections kept open in the bot's shared cache (one
                                      per thread calling at once is enough); 0 = 64 */
    /* Debugging arena lifetimes. debug_arena: tg_ctx_reset() overwrites everything it frees
     * with 0xA5 bytes, so a pointer kept past a reset shows garbage at once instead of
     * stale data that looks right (costs a memset per reset; for development).
     * arena_warn_bytes: a ctx whose arena grows past this without a tg_ctx_reset() logs
     * one warning (a loop of calls that never resets grows ~1.5 KB per call without
     * bound); 0 = 16 MiB, SIZE_MAX = never. */
    bool debug_arena;
    size_t arena_warn_bytes;
} tg_bot_options;

/*
 * Make a bot. token must look like "<digits>:<at least 35 of [A-Za-z0-9_-]>"; it is copied
 * and registered as a secret with the bot's logger. opts may be NULL.
 * Returns NULL on a malformed token or option, or out of memory; tg_bot_new_errmsg() then says
 * why (without the token).
 * Thread-safety: any thread; the first call initialises libcurl (process-wide, once).
 */
TG_API tg_bot *tg_bot_new_sized(const char *token, const tg_bot_options *opts, size_t opts_size);
/* The call to write: passes the size of tg_bot_options as this header declares it (see
 * docs/abi.md, "Structs that grow"). */
#define tg_bot_new(token, ...) tg_bot_new_sized((token), (__VA_ARGS__), sizeof(tg_bot_options))

/* Why the last tg_bot_new() on this thread failed: a static string ("" if it did not). */
TG_API const char *tg_bot_new_errmsg(void);

/* Free a bot. Every tg_ctx made from it must be freed first. NULL is a no-op. */
TG_API void tg_bot_free(tg_bot *bot);

/*
 * Stop the bot: calls waiting for a retry or a flood-control slot return TG_ERR_CANCELLED at
 * once, transfers in flight are aborted (TG_ERR_CANCELLED), and new calls fail the same way.
 * Thread-safety: any thread, any time (e.g. from a signal-handling thread); idempotent.
 */
TG_API void tg_bot_shutdown(tg_bot *bot);
TG_API bool tg_bot_is_shut_down(const tg_bot *bot);

/* The bot's numeric id, the part of the token before ':' (not a secret). */
TG_API int64_t tg_bot_id(const tg_bot *bot);

/* Log through the bot's logger (scrubbed, levelled). Thread-safe. */
TG_API void tg_bot_log(const tg_bot *bot, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- bot-wide defaults ---- */

struct tg_link_preview_options; /* tgbot/api.h */

/*
 * Values every generated call of the bot (tg_<method>, tg_async_<method>) and the handler
 * shortcuts (tg_reply, tg_send, tg_send_ex, tg_edit, tg_reply_text, tg_send_text,
 * tg_edit_text) send when the caller left the parameter unset, like python-telegram-bot's
 * Defaults. They fill every parameter of these names that Telegram has, in the method's
 * params and in the objects a call sends (InputTextMessageContent of inline results,
 * InputMedia* captions, ReplyParameters.quote_parse_mode, poll options, ...):
 *  - parse_mode: every ParseMode field (parse_mode, quote_parse_mode, explanation_parse_mode,
 *    question_parse_mode, text_parse_mode, description_parse_mode), except where the call
 *    gives the matching entities (entities, caption_entities, quote_entities, ...): those
 *    already format the text (the tg_text shortcuts send entities, so HTML never re-parses
 *    their text);
 *  - link_preview_options, protect_content, disable_notification: by name.
 * An explicit value always wins, "none" included: TG_ENUM(TG_ENUM_NONE) for no parse mode,
 * TG_SOME(false) for the booleans, &(tg_link_preview_options){0} (sent as {}, Telegram's own
 * behaviour) for the link preview. Raw calls (tg_call_raw, tg_hctx_call) send their JSON as
 * given. Unset (zero) members of tg_bot_defaults set no default.
 */
typedef struct tg_bot_defaults {
    tg_strenum parse_mode; /* tg_parse_mode: TG_ENUM(TG_PARSE_MODE_HTML), ...; {0} = none */
    const struct tg_link_preview_options *link_preview_options; /* NULL = none; copied */
    tg_opt_bool protect_content;      /* TG_SOME(true): every message protected */
    tg_opt_bool disable_notification; /* TG_SOME(true): every message silent */
} tg_bot_defaults;

/*
 * Replace the bot's defaults with a copy of d (NULL = no defaults). Returns TG_OK, or
 * TG_ERR_NOMEM / TG_ERR_INVALID (d from a newer header setting what this library does not
 * know; a parse mode out of range) leaving the old ones.
 * Thread-safety: any thread, any time; a call already encoding keeps the defaults it began
 * with. Each replaced copy is kept (a few dozen bytes) until tg_bot_free: set them at start,
 * not per message.
 */
TG_API tg_status tg_bot_set_defaults_sized(tg_bot *bot, const tg_bot_defaults *d, size_t d_size);
#define tg_bot_set_defaults(bot, d) tg_bot_set_defaults_sized((bot), (d), sizeof(tg_bot_defaults))
/* The bot's current defaults (all unset when none were set); valid until tg_bot_free. */
TG_API const tg_bot_defaults *tg_bot_get_defaults(const tg_bot *bot);

/* ---- contexts ---- */

/* A context for one thread. NULL on out of memory. Thread-safety: any thread.
 * bot NULL makes a codec-only ctx: tg_decode_* / tg_encode_* (tgbot/codec.h) work on it,
 * calls and downloads fail with TG_ERR_INVALID. */
TG_API tg_ctx *tg_ctx_new(tg_bot *bot);
/* Free a context and everything in its arena. NULL is a no-op. */
TG_API void tg_ctx_free(tg_ctx *ctx);
/* Free everything decoded since the last reset, in O(1); memory is kept for reuse. The last
 * error is cleared as well. */
TG_API void tg_ctx_reset(tg_ctx *ctx);
TG_API tg_bot *tg_ctx_bot(const tg_ctx *ctx);

/*
 * Use policy for this ctx's calls instead of the bot's (copied); NULL goes back to the bot's.
 * For "per call": set it, call, set NULL.
 */
TG_API void tg_ctx_set_retry_policy(tg_ctx *ctx, const tg_retry_policy *policy);

/*
 * Whole-request timeout for this ctx's calls and downloads instead of the bot's timeout_ms
 * (0 = the bot's again): e.g. a long-polling ctx whose getUpdates timeout is long, or a ctx
 * doing large uploads.
 */
TG_API void tg_ctx_set_timeout(tg_ctx *ctx, uint32_t timeout_ms);

/*
 * Abort the call running on ctx (or the next one) with TG_ERR_CANCELLED. The only tg_ctx
 * function that may be called from another thread. The flag clears when a call starts
 * after tg_ctx_reset().
 */
TG_API void tg_ctx_cancel(tg_ctx *ctx);

/* ---- errors of the last call on a ctx ---- */

/* One readable line: "sendMessage: Bot API error 400: Bad Request: chat not found". "" after
 * a success. Never contains the token. */
TG_API const char *tg_ctx_errmsg(const tg_ctx *ctx);
TG_API tg_status tg_ctx_status(const tg_ctx *ctx);

typedef struct tg_error_info {
    tg_status status;
    const char *method;         /* the Bot API method, or "download" */
    int http_status;            /* 0 when no HTTP answer arrived */
    int transport_code;         /* CURLcode (TG_ERR_TRANSPORT, TG_ERR_TIMEOUT), else 0 */
    int error_code;             /* TG_ERR_API: Telegram's error_code */
    const char *description;    /* TG_ERR_API: Telegram's description, else "" */
    int32_t retry_after;        /* parameters.retry_after, seconds; 0 = absent */
    int64_t migrate_to_chat_id; /* parameters.migrate_to_chat_id; 0 = absent */
    const char *json_path;      /* TG_ERR_DECODE: where, e.g. "result.chat.id"; else "" */
    uint32_t attempts;          /* requests made by the call */
} tg_error_info;

/* The structured parts of the last error (all zero/"" after a success). */
TG_API const tg_error_info *tg_ctx_error(const tg_ctx *ctx);

/* ---- calls ---- */

/*
 * Call any Bot API method by name with its parameters as a JSON object (NULL or "" = no
 * parameters): useful for methods newer than the library. len is the length of
 * json_params, which then need not be NUL-terminated; len 0 means json_params is a C string
 * (its strlen is taken). For a method the library knows,
 * its required parameters must be present and not null (TG_ERR_INVALID naming the first
 * missing one, nothing sent); a method it does not know is sent unchecked. On TG_OK, *result_json
 * (NUL- terminated) and *result_len hold the raw JSON of the answer's "result", in the ctx arena.
 * Returns TG_OK or an error status; details in tg_ctx_errmsg(ctx) / tg_ctx_error(ctx).
 */
TG_API tg_status tg_call_raw(tg_ctx *ctx, const char *method, const char *json_params, size_t len,
                             const char **result_json, size_t *result_len);

/*
 * The same, as multipart/form-data with files: each member of json_params becomes a form
 * field (strings as their text, anything else as its JSON), then each file part. A required
 * parameter may be a member or a file part of that name. Refer to a
 * part from JSON with "attach://<name>" (media groups, InputMedia, thumbnails).
 */
TG_API tg_status tg_call_raw_files(tg_ctx *ctx, const char *method, const char *json_params,
                                   size_t len, const tg_file_part *files, size_t nfiles,
                                   const char **result_json, size_t *result_len);

/* ---- downloads ---- */

/* Response sink of a download: return n to go on, anything else aborts with TG_ERR_IO. */
typedef size_t (*tg_write_fn)(void *user, const char *p, size_t n);

/*
 * getFile: the file_path of file_id (in the ctx arena), to pass to the downloads below.
 */
TG_API tg_status tg_get_file_path(tg_ctx *ctx, const char *file_id, const char **file_path);

/*
 * Fetch a file by the file_path getFile returned (<base>/file/bot<token>/<file_path>). A local
 * Bot API server returns absolute paths: those are read from the local disk instead.
 * to_path   writes dest (created or truncated; removed again on failure).
 * to_memory stores the bytes in the ctx arena (NUL-terminated); a file bigger than
 *           max_bytes fails with TG_ERR_TOO_BIG (0 = 20 MiB, the Bot API download limit).
 * to_fn     streams the bytes to fn.
 */
TG_API tg_status tg_download_to_path(tg_ctx *ctx, const char *file_path, const char *dest);
TG_API tg_status tg_download_to_memory(tg_ctx *ctx, const char *file_path, size_t max_bytes,
                                       const void **data, size_t *len);
TG_API tg_status tg_download_to_fn(tg_ctx *ctx, const char *file_path, tg_write_fn fn, void *user);

/* ---- statistics (for tests and benchmarks) ---- */

typedef struct tg_ctx_stats {
    uint64_t calls;    /* calls made through the ctx */
    uint64_t requests; /* HTTP requests, retries included */
    uint64_t connects; /* new connections the transport opened for them */
    uint64_t retries;
    uint64_t flood_wait_ms; /* total time spent waiting for flood-control slots */
} tg_ctx_stats;

/* Fill *out (at most out_size bytes: write tg_ctx_get_stats(ctx, &st)). */
TG_API void tg_ctx_get_stats_sized(const tg_ctx *ctx, tg_ctx_stats *out, size_t out_size);
#define tg_ctx_get_stats(ctx, out) tg_ctx_get_stats_sized((ctx), (out), sizeof(tg_ctx_stats))

#ifdef __cplusplus
}
#endif

#endif
