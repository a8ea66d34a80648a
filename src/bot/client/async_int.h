/*
 * async_int.h: the insides of the asynchronous client (tgbot/async.h), shared by
 *   async.c       the handle, calls (submit, flood wait, queue, retry, completion, cancel,
 *                 shutdown), the loop glue and the built-in epoll loop
 *   async_conn.c  connections: non-blocking connect, TLS handshake, send, receive and parse
 *                 (http1.c), the idle pool
 *
 * A call (struct tg__acall) lives in a slot that is reused: its tg_ctx (arena, buffers,
 * error) and its wire buffer stay warm, so a steady stream of calls allocates nothing.
 * States: QUEUED (waiting for a connection) -> ACTIVE (bound to one) -> done, with FLOOD
 * (waiting for a flood-control slot) before and RETRY (waiting to try again) in between.
 * Exactly one completion per call: every path ends in acall_complete(), which puts the call
 * on the done list once (state DONE); the list is drained on the loop, never inside submit
 * or cancel.
 *
 * Threads: everything belongs to the loop thread; nothing here locks (the bot's flood
 * buckets and the TLS context are locked by their owners).
 */
#ifndef TGKIT_BOT_CLIENT_ASYNC_INT_H
#define TGKIT_BOT_CLIENT_ASYNC_INT_H

#include <netdb.h>

#include "bot/client/async_call.h"
#include "bot/client/http1.h"
#include "bot/client/lean_int.h"
#include "core/timer.h"
#include "tgbot/async.h"

enum acall_state {
    AC_FREE,
    AC_NEW,    /* being submitted */
    AC_FLOOD,  /* timer: the flood-control slot */
    AC_QUEUED, /* on a->queue */
    AC_ACTIVE, /* on a connection (connecting, sending, receiving); timer: the deadline */
    AC_RETRY,  /* timer: the retry wait */
    AC_DONE,   /* on a->done, callback not run yet */
};

struct tg__aconn;

struct tg__acall {
    tg_async *a;
    uint64_t id; /* gen << 32 | (slot + 1) */
    uint32_t slot, gen;
    uint8_t state;
    bool reconnected; /* the one silent resend after a dead reused connection was used */
    tg_ctx *ctx;
    const struct tg__method *m; /* typed calls; NULL for raw */
    void *out;                  /* typed result storage (ctx arena) */
    struct tg__call_req req;
    tg__buf wire;           /* request head (+ body over TLS, or the whole multipart) */
    const char *body;       /* second piece after wire (JSON over plain TCP) or NULL */
    size_t body_len;
    const char *json;       /* raw result */
    size_t json_len;
    tg__async_tramp tramp;  /* typed calls: calls fn with the typed result */
    void (*fn)(void);       /* the user's callback (tg_async_fn when tramp is NULL) */
    void *user;
    tg__timer timer;
    struct tg__aconn *conn;
    struct tg__acall *next, *prev; /* a->queue or a->done; free list (next) */
    uint32_t attempt;
    uint32_t timeout_ms;
    uint64_t t0_ms;
    tg_retry_policy policy; /* resolved */
    tg_status st;
};

enum aconn_state { CN_CONNECTING, CN_HANDSHAKE, CN_SENDING, CN_RECEIVING, CN_IDLE };

struct tg__aconn {
    tg_async *a;
    int fd;
    SSL *ssl;
    bool tls_failed;
    bool reused; /* served a request before */
    uint8_t state;
    int watched; /* TG_ASYNC_* asked of the loop */
    struct tg__acall *call;
    tg__timer timer; /* connect + handshake deadline */
    const struct addrinfo *ai; /* the address being tried */
    size_t sent;
    bool received;
    tg__h1 h1;
    uint64_t idle_since_ns;
    tg_http_result res;
    struct tg__aconn *next, *prev; /* a->idle */
    size_t rlen;
    char rbuf[LEAN_RBUF];
};

struct tg_async {
    tg_bot *bot;
    struct tg__lean_pool *pool; /* URL parts and TLS context (not its idle stack) */
    struct lean_body body;      /* multipart writer (renders into a call's wire) */
    tg_async_loop loop;
    bool own_loop;
    int epfd;
    tg__timers timers;
    tg__timer kick; /* due at once: the loop comes back to drain completions */
    uint64_t timer_asked; /* deadline last asked of loop.timer (UINT64_MAX: none) */
    struct addrinfo *ai;  /* resolved once; again after a connect failure */
    /* calls */
    struct tg__acall **slots;
    uint32_t nslots, slot_cap;
    struct tg__acall *free_calls;
    struct tg__acall *queue, *queue_tail;
    struct tg__acall *done, *done_tail;
    size_t pending, max_pending;
    struct tg__acall *in_cb; /* the call whose callback runs */
    bool draining, shut, stopped, pumping;
    /* connections */
    struct tg__aconn *idle; /* LIFO */
    uint32_t nconns, max_conns;
    struct tg__aconn **byfd;
    size_t byfd_cap;
    /* options */
    bool has_policy;
    tg_retry_policy policy;
    uint32_t timeout_ms;
    uint32_t next_timeout_ms; /* the next submission's per-attempt timeout (long polls) */
    tg_async_stats stats;
};

/* async.c, for async_conn.c */
/* The attempt on c ended (c->conn already detached): classify, retry or complete. */
void tg__acall_attempt_done(struct tg__acall *c, const tg_http_result *res);
/* Hand queued calls to idle or new connections while there is room. */
void tg__async_pump(tg_async *a);
/* Tell a foreign loop the next deadline if it changed (after arming timers from outside
 * the handle's own entry points, e.g. broadcast.c). */
void tg__async_sync_timer(tg_async *a);
/* Ask the loop to watch fd for events (0 = stop). */
void tg__async_watch(tg_async *a, int fd, int events);

/* async_conn.c */
/* Open a connection for c (non-blocking); c becomes ACTIVE on it. false: failed at once
 * (c's attempt is already reported). */
void tg__aconn_open(tg_async *a, struct tg__acall *c);
/* Start c on an idle connection taken from the pool (NULL when none is usable). */
struct tg__aconn *tg__aconn_take_idle(tg_async *a);
void tg__aconn_start(struct tg__aconn *k, struct tg__acall *c);
/* Readiness of the connection on fd. */
void tg__aconn_event(tg_async *a, int fd, int events);
/* Give up the attempt on k's call with code/msg (timeout, cancel); k is closed. The call is
 * told through tg__acall_attempt_done unless quiet. */
void tg__aconn_abort(struct tg__aconn *k, int code, bool quiet, const char *msg);
/* Close every idle connection. */
void tg__aconn_close_idle(tg_async *a);

/* updates/async_poll.c, for tests: the failed poll's retry wait doubles from min_ms up to
 * max_ms instead of 1 s .. 30 s. */
void tg__async_poll_backoff(tg_async_poller *p, uint32_t min_ms, uint32_t max_ms);

#endif
