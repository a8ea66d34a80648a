/*
 * bot_server: a loopback stand-in for the Telegram Bot API on libmicrohttpd, for tests.
 *
 * It listens on 127.0.0.1 (a free port), answers /bot<token>/<method> (and the test
 * environment's /bot<token>/test/<method>) with canned replies per method, serves files at
 * /file/bot<token>/<path>, and records every request: method, path (token replaced by
 * "<TOKEN>"), headers of interest, the JSON body, and each multipart part (name, file name,
 * type, size, SHA-256 of all its bytes and the first BOT_PART_KEEP bytes).
 *
 * Scriptable failures, consumed one per request in FIFO order per method ("*" = any method,
 * tried after the method's own queue): a reply with any status/body/content type (429 with
 * retry_after, 5xx, an HTML 502 page, truncated JSON), a slow reply, and a connection closed
 * halfway through the body. Optional flood enforcement answers 429 to send-like methods that
 * break Telegram's limits (global, per chat, per group), so clients can be checked against it.
 *
 * A wrong token gets 401 like Telegram's; an unknown method with no reply set gets 404.
 * Thread-safety: all functions may be called from any thread while the server runs; the
 * server answers each connection on its own thread. Records stay valid until stop.
 */
#ifndef TGKIT_TEST_BOT_SERVER_H
#define TGKIT_TEST_BOT_SERVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BOT_PART_KEEP ((size_t)1 << 20) /* bytes of each part and JSON body kept */

typedef struct bot_server bot_server;

typedef enum bot_action_kind {
    BOT_ACT_REPLY = 0, /* answer status/body */
    BOT_ACT_SLOW,      /* wait delay_ms (cut short by stop), then answer */
    BOT_ACT_CLOSE_MID, /* announce the full body, send half of it, close the connection */
} bot_action_kind;

typedef struct bot_action {
    bot_action_kind kind;
    int status;               /* 0 = 200 */
    const char *content_type; /* NULL = application/json */
    const char *body;         /* copied; NULL = "" */
    uint32_t delay_ms;
} bot_action;

typedef struct bot_part {
    char *name;
    char *filename;     /* NULL for plain fields */
    char *content_type; /* NULL if not given */
    size_t size;        /* bytes received */
    unsigned char sha256[32];
    char *data; /* first min(size, BOT_PART_KEEP) bytes, NUL-terminated */
    size_t data_len;
} bot_part;

typedef struct bot_request {
    char *method;      /* "sendMessage"; "" for file and unknown paths */
    char *path;        /* with the token replaced by <TOKEN> */
    char *http_method; /* "POST", "GET" */
    bool token_ok;
    bool test_env;
    bool is_file;
    char *content_type; /* request header, "" if absent */
    char *user_agent;
    char *body; /* non-multipart body, first BOT_PART_KEEP bytes, NUL-terminated */
    size_t body_len;
    size_t body_total;
    bot_part *parts;
    size_t nparts;
    int status; /* what the server answered (0 = closed mid-response) */
} bot_request;

/* Start on 127.0.0.1 with the token it accepts. NULL on failure (message on stderr). */
bot_server *bot_server_start(const char *token);
/* Same over HTTPS with the given PEM certificate and key (url() says "https://..."). */
bot_server *bot_server_start_tls(const char *token, const char *cert_file, const char *key_file);
void bot_server_stop(bot_server *s); /* NULL-safe; frees every record */

const char *bot_server_url(const bot_server *s); /* "http(s)://127.0.0.1:<port>" */
uint16_t bot_server_port(const bot_server *s);

/* The persistent reply to method (replaces an earlier one). body is copied. */
void bot_server_set_reply(bot_server *s, const char *method, int status, const char *body);
/* Queue a one-shot action for method ("*" = any). */
void bot_server_push(bot_server *s, const char *method, const bot_action *a);
/* Shorthands: a 429 with retry_after; an API error; a raw status with a content type. */
void bot_server_push_429(bot_server *s, const char *method, int retry_after);
void bot_server_push_error(bot_server *s, const char *method, int code, const char *desc);
void bot_server_push_raw(bot_server *s, const char *method, int status, const char *ctype,
                         const char *body);

/* Serve data at /file/bot<token>/<file_path> (copied). */
void bot_server_add_file(bot_server *s, const char *file_path, const void *data, size_t len);

/*
 * Enforce flood limits on send*, forward*, copy* (0 = that limit off). A message is refused
 * with 429 (retry_after 1) when it would make more than N messages inside a window of
 * N/rate*(1-tolerance) seconds, with N = max(1, global/10) for the global limit and 1 for chats
 * and groups (negative ids or @names) and tolerance 0.2 for network jitter.
 */
void bot_server_enforce_flood(bot_server *s, double global_per_sec, double chat_per_sec,
                              double group_per_min);
size_t bot_server_flood_429s(const bot_server *s);

size_t bot_server_nrequests(const bot_server *s);
/* Request i (0-based, in completion order); NULL if out of range. */
const bot_request *bot_server_request(const bot_server *s, size_t i);
/* The last request, NULL if none. */
const bot_request *bot_server_last(const bot_server *s);
/* Requests whose method is method. */
size_t bot_server_count(const bot_server *s, const char *method);
/* TCP connections accepted so far. */
size_t bot_server_connections(const bot_server *s);
/* Find a part by name in a request (NULL if absent). */
const bot_part *bot_request_part(const bot_request *r, const char *name);

/* A fake server plus a bot and ctx pointed at it: the fixture most client tests need. */
typedef struct bot_fx {
    bot_server *srv;
    struct tg_bot *bot;
    struct tg_ctx *ctx;
} bot_fx;

/* Start a server for token and make a bot (opts' base_url is filled in) and a ctx.
 * Fails the running cmocka test on any error. Free with bot_fx_free. */
struct tg_bot_options;
bot_fx *bot_fx_new(const char *token, const struct tg_bot_options *opts);
void bot_fx_free(bot_fx *f); /* NULL-safe */

/* The client suite runs once per transport: TGKIT_TEST_TRANSPORT=lean (set by ctest for the
 * "@lean" runs) selects tg_transport_lean(), anything else libcurl. bot_test_new is tg_bot_new
 * with that transport filled in, unless opts names a transport of its own. */
bool bot_test_lean(void);
struct tg_bot *bot_test_new(const char *token, const struct tg_bot_options *opts);

/* Every line a bot logs, for checks such as "the token never appears". Pass bot_logcap_sink
 * as tg_bot_options.log with the logcap as log_user. Thread-safe (lines may come from any
 * thread); read text only after the bot is freed or under mu. */
typedef struct bot_logcap {
    pthread_mutex_t mu;
    char *text; /* all lines, '\n'-terminated, NUL-terminated; NULL until the first */
    size_t len;
    int lines;
} bot_logcap;
void bot_logcap_init(bot_logcap *c);
void bot_logcap_sink(void *user, int level, const char *line);
void bot_logcap_free(bot_logcap *c);

#endif
