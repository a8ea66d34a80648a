/*
 * lean_int.h: the insides of the lean transport, shared by lean.c (pool, connections, TLS,
 * the request/response cycle) and lean_body.c (the request writer: one send for JSON,
 * multipart forms streamed with Content-Length or chunked).
 *
 * Error codes: the lean transport reports the same numbers libcurl uses for the same
 * failures (tg_error_info.transport_code means one thing whichever transport runs), listed
 * below as LEAN_E_*.
 */
#ifndef TGKIT_BOT_CLIENT_LEAN_INT_H
#define TGKIT_BOT_CLIENT_LEAN_INT_H

#include <openssl/ssl.h>

#include "bot/client/client_int.h"

enum {
    LEAN_E_MALFORMAT = 3,    /* URL outside the bot's base URL */
    LEAN_E_RESOLVE = 6,      /* cannot resolve the host */
    LEAN_E_CONNECT = 7,      /* cannot connect */
    LEAN_E_WEIRD_REPLY = 8,  /* malformed HTTP answer */
    LEAN_E_PARTIAL = 18,     /* closed in the middle of the answer */
    LEAN_E_WRITE = 23,       /* the body sink refused bytes */
    LEAN_E_READ = 26,        /* an upload source failed */
    LEAN_E_NOMEM = 27,       /* out of memory */
    LEAN_E_TIMEOUT = 28,     /* connect or whole-request timeout */
    LEAN_E_TLS_CONNECT = 35, /* TLS handshake failed */
    LEAN_E_ABORTED = 42,     /* cancelled */
    LEAN_E_NOTHING = 52,     /* the server closed without answering */
    LEAN_E_SEND = 55,        /* sending failed */
    LEAN_E_RECV = 56,        /* receiving failed */
    LEAN_E_PEER_VERIFY = 60, /* the server's certificate or name did not verify */
    LEAN_E_CA_FILE = 77,     /* ca_file / ca_path cannot be loaded */
};

#define LEAN_RBUF   32768  /* bytes: per connection read buffer (holds a whole head) */
#define LEAN_CHUNK  65536  /* bytes: upload pieces */
#define LEAN_DIRECT 262144 /* bytes: most received into the answer buffer per read */

#define TG__LEAN_POOL_LIMIT 64 /* idle connections kept at most */

/* The bot's pool (lean.c): the parsed base URL, the TLS context and the idle connections.
 * The async client makes one of its own (for the URL and TLS parts). */
struct tg__lean_pool {
    pthread_mutex_t mu;
    const tg_bot *bot;
    bool tls;
    bool host_is_ip;
    char host[256]; /* without brackets */
    char port[8];
    char authority[280]; /* Host header: host[:port] as in the base URL */
    size_t origin_len;   /* "scheme://authority" length: URLs start with it */
    SSL_CTX *ssl_ctx;
    bool ssl_tried;
    int ssl_code;
    char ssl_err[200];
    SSL_SESSION *session; /* last session a server gave, for resumption */
    struct lean_sock **idle;
    size_t nidle, max;
};

/* Make a pool for bot's base URL (proxy refused): NULL, or why not (static string). */
const char *tg__lean_pool_make(const tg_bot *bot, struct tg__lean_pool **out);
void tg__lean_pool_destroy(struct tg__lean_pool *p); /* NULL-safe */

/* One connection: a socket, its TLS state and its read buffer. */
struct lean_sock {
    int fd;
    SSL *ssl;
    bool tls_failed;        /* a TLS protocol error: its session must not be resumed */
    uint64_t idle_since_ns; /* when it went back to the pool */
    size_t rlen;            /* bytes in rbuf */
    char rbuf[LEAN_RBUF];
};

/* A connection back in the pool for less than this is reused without the liveness probe
 * (default 1 ms; a test sets 0 to probe every time). See lean.c. */
extern uint64_t tg__lean_fresh_ns;

/* One request in flight: deadline, cancellation and what went wrong. */
struct lean_io {
    struct lean_sock *s;
    uint64_t deadline_ms; /* 0 = none */
    bool (*cancelled)(void *);
    void *cancel_user;
    uint64_t sent_bytes; /* request bytes handed to the kernel / TLS */
    tg_http_result *res;
    tg__buf *capture; /* non-NULL: "sending" appends to it instead (no socket) */
};

/* An SSL for fd (non-blocking or not) with SNI, host name (or IP) verification and the
 * pool's last session; NULL with io's result filled. Thread-safe. */
SSL *tg__lean_ssl_new(struct tg__lean_pool *p, int fd, struct lean_io *io);

/* Fill res with a failure (msg formatted; status from code). Returns -1. */
int tg__lean_fail(struct lean_io *io, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Send all of p[0..n) (a request piece); 0 or -1 with the result filled. */
int tg__lean_send(struct lean_io *io, const void *p, size_t n);
/* Send two pieces with one syscall where the socket is plain (head + body). */
int tg__lean_send2(struct lean_io *io, const void *a, size_t an, const void *b, size_t bn);

/* Append v in decimal (Content-Length); 0 or -ENOMEM. */
int tg__lean_put_u64(tg__buf *b, uint64_t v);

/* Per-ctx state of the request writer (lean_body.c). */
struct lean_body {
    tg__buf buf; /* multipart pieces waiting to be sent */
    char boundary[40];
};

void tg__lean_body_init(struct lean_body *w);
void tg__lean_body_cleanup(struct lean_body *w);
/* The multipart headers for req: Content-Type with the boundary, then Content-Length or
 * Transfer-Encoding: chunked, appended to head. Opens nothing; sizes come from stat(2).
 * Returns 0, or -1 with the result filled (a file that cannot be read: TG_ERR_IO). */
int tg__lean_form_head(struct lean_io *io, struct lean_body *w, const tg_http_request *req,
                       tg__buf *head, bool *chunked);
/* Send the multipart body of req (after the head went out). */
int tg__lean_form_send(struct lean_io *io, struct lean_body *w, const tg_http_request *req,
                       bool chunked);

#endif
