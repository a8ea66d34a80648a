/*
 * dispatch_int: the structures behind tg_router, tg_filter, tg_hctx and tg_dispatcher,
 * shared by the files of src/bot/dispatch/ and by white-box tests and benchmarks.
 *
 * A tg_hctx is per worker and reused for every update that worker runs: its arena is reset
 * and its event rebuilt per update, so a warm worker allocates nothing to route an update.
 */
#ifndef TGKIT_BOT_DISPATCH_INT_H
#define TGKIT_BOT_DISPATCH_INT_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <stdatomic.h>

#include "bot/dispatch/event.h"
#include "bot/dispatch/workers.h"
#include "bot/json/json.h"
#include "core/arena.h"
#include "core/buf.h"
#include "core/log.h"
#include "tgbot/dispatch.h"

#define TG__MAX_CAPTURES   16
#define TG__CONV_STATE_MAX 64

/* A conversation state or field name: 1..TG__CONV_STATE_MAX of [A-Za-z0-9_.:-] (conv.c). */
bool tg__conv_name_valid(const char *s);

enum filter_type {
    F_KINDS,
    F_COMMAND,
    F_REGEX,
    F_TEXT,
    F_CB_PREFIX,
    F_CB_REGEX,
    F_INLINE_PREFIX,
    F_CHAT_TYPE,
    F_CHAT,
    F_USER,
    F_STATE,
    F_FN,
    F_AND,
    F_OR,
    F_NOT,
};

struct tg_filter {
    enum filter_type type;
    uint64_t mask; /* F_KINDS */
    int64_t id;    /* F_CHAT, F_USER */
    char *str;     /* command name, text, prefix, chat type, state, pattern */
    size_t len;
    pcre2_code *re; /* F_REGEX, F_CB_REGEX */
    tg_filter_fn fn;
    void *user;
    struct tg_filter *a, *b;
};

struct route {
    int group;
    tg_filter *filter;
    tg_handler_fn fn;
    void *user;
};

struct middleware {
    tg_before_fn before;
    tg_after_fn after;
    void *user;
};

/* A command of the menu (commands.c): name, default description, translations, scopes. */
struct tg__command {
    char *name;
    char *description;
    struct tg__command_tr {
        char *lang, *description;
    } * tr;
    size_t ntr;
    uint32_t scopes; /* bits of tg_bot_command_scope_kind; 0 = every scope */
};

void tg__router_commands_free(tg_router *r);
/* menu.c: free the router's menus. */
void tg__router_menus_free(tg_router *r);
/* limiter.c: free the router's limiters. */
void tg__router_limiters_free(tg_router *r);
/* Record why a router call failed (tg_router_errmsg) and return st (router.c). */
tg_status tg__router_fail(tg_router *r, tg_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

struct tg_router {
    struct tg__command *cmds; /* the command menu, in registration order */
    size_t ncmds;
    struct route *routes; /* sorted by group, then registration order */
    size_t nroutes, cap;
    struct middleware *mw;
    size_t nmw;
    tg_error_fn on_error;
    void *error_user;
    char *username;
    struct tg_menu **menus; /* every menu of every tree added (menu.c); owned */
    size_t nmenus;
    struct tg__limiter **limiters; /* limiter.c; owned */
    size_t nlimiters;
    char err[256];
};

struct tg__conv {
    bool loaded;     /* storage consulted for this update */
    bool has;        /* a conversation exists */
    bool timed_out;  /* it existed but its deadline passed */
    bool in_timeout; /* the timeout handler runs: the old state stays readable */
    char key[96];    /* storage key; "" when the update has no (chat, user) */
    char state[TG__CONV_STATE_MAX + 1];
    unsigned char *data; /* in the hctx arena */
    size_t len;
};

/* Per-user or per-chat data of one update (session.c); reset with the hctx. */
struct tg_data {
    struct tg_hctx *h;
    const char *what; /* "user data" / "chat data" */
    bool loaded;      /* storage consulted for this update */
    bool ok;          /* loaded without error: the handle may be given out */
    bool stored;      /* the storage holds a record (delete it when emptied) */
    bool dirty;       /* a field changed since loading */
    char key[96];
    unsigned char *blob; /* fields blob in the hctx arena; len 0 = no fields */
    size_t len;
};

/*
 * A webhook request waiting for its handler (tg_hctx_respond answers in the HTTP response).
 * Shared by the request thread and the worker; whoever releases it last frees it, so a
 * request that gave up waiting never leaves the worker writing into freed memory.
 */
struct tg__reply {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    bool done;  /* the handler finished (or the update was dropped) */
    char *body; /* {"method":...} set by tg_hctx_respond, or NULL */
    size_t len;
};

struct tg__reply *tg__reply_new(void); /* refs = 1; NULL on out of memory */
void tg__reply_release(struct tg__reply *r);
/* Wait until done or deadline_ms (tg__now_ms clock). Returns the body (detached: the caller
 * frees it with tg__free) or NULL. */
char *tg__reply_wait(struct tg__reply *r, uint64_t deadline_ms, size_t *len);

struct tg_hctx {
    tg_event ev;
    tg_ctx *ctx;
    struct tg_dispatcher *d;
    unsigned worker;
    tg__arena arena;
    tg__jdoc doc;
    pcre2_match_data *md;
    unsigned ncap;
    const char *cap_p[TG__MAX_CAPTURES];
    size_t cap_n[TG__MAX_CAPTURES];
    bool args_split;
    unsigned argc;
    char **argv;
    struct tg__conv conv;
    struct tg_data udata, cdata;
    const void *cb_data; /* the callback data swapped back (cbdata.c), or NULL */
    size_t cb_len;
    bool cb_lost;
    bool answered; /* tg_answer succeeded for this update (menus answer only if not) */
    size_t menu_page, menu_pages;  /* the list page a menu draws (menu.c) */
    const struct tg_job_info *job; /* the job being run (jobs.c), else NULL */
    const tg_update *update;       /* decoded on demand by tg_hctx_update */
    bool update_tried;
    struct tg__reply *reply;            /* the waiting webhook request, or NULL */
    const struct tg__type *update_type; /* the codec's table for Update */
    tg__buf jbuf;                       /* request JSON of the shortcuts, reused */
    tg__buf xbuf;                       /* a shortcut's extra JSON as an object (defaults) */
    tg__jdoc xdoc;                      /* its parse, to see which keys it sets */
    struct tg__lrun *lrun;              /* loop mode (loop.c): the run this hctx is */
    tg_hctx_result_fn then_fn;          /* tg_hctx_call_then's continuation, being queued */
    void *then_user;
    char err[256];
};

/* The process's index of stored callback data (cbdata.c): least recently used first out. */
struct tg__cbnode;
struct tg__cbindex {
    pthread_mutex_t mu;
    struct tg__cbnode **map;
    size_t nmap, count;
    struct tg__cbnode *head, *tail; /* head: most recent */
};

struct tg_dispatcher {
    tg_bot *bot;
    tg_router *router;
    tg_dispatcher_options o;
    tg_storage *storage;
    bool own_storage;
    char *conv_prefix;
    char *session_prefix;
    char *cancel_command;
    tg__workers *pool;
    struct tg__cbindex cb;
    struct tg_hctx *hctx; /* one per worker */
    unsigned nworkers;
    /* tokenizer docs for feeding threads (feed may run on many threads at once) */
    pthread_mutex_t docs_mu;
    tg__jdoc **docs;
    size_t ndocs, docs_cap;
    atomic_bool stop;
    int stop_pipe[2];
    struct tg__loop *loop; /* loop mode (loop.c), else NULL */
    struct {
        atomic_ullong received, handled, failed, unhandled, dropped, rejected;
    } st;
    char err[256];
};

/* hctx.c */
int tg__hctx_init(struct tg_hctx *h, struct tg_dispatcher *d, unsigned worker, size_t arena_max);
void tg__hctx_cleanup(struct tg_hctx *h);
/* Reset per-update state (arena, captures, args, conversation, error). */
void tg__hctx_reset(struct tg_hctx *h);

/* filter.c */
bool tg__filter_eval(const tg_filter *f, struct tg_hctx *h);

/* router.c: run middleware and the matching handlers for h's event. Returns the first error
 * a handler returned (after the error handler ran), else TG_OK; *handled says whether any
 * handler ran. */
tg_status tg__router_run(tg_router *r, struct tg_hctx *h, bool *handled);

/* dispatcher.c: feed with the error text in err (thread-safe, unlike tg_dispatcher_errmsg). */
tg_status tg__dispatcher_feed(struct tg_dispatcher *d, const char *json, size_t len,
                              int64_t wait_ms, tg_feed_done_fn done, void *user,
                              struct tg__reply *reply, char *err, size_t errcap);
/* Log through the bot's logger (or the default one without a bot). */
void tg__dispatcher_log(struct tg_dispatcher *d, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Record the text tg_dispatcher_errmsg(d) returns. */
void tg__dispatcher_seterr(struct tg_dispatcher *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* dispatcher.c: run fn(h, arg) on a worker, in key's lane when ordered (the scheduled
 * jobs): h is reset before and its ctx after; done(arg, ran) follows (ran = false when a
 * drain dropped it). 0, or -EAGAIN (full after wait_ms), -ECANCELED (stopping), -ENOMEM;
 * done is not called then. */
typedef void (*tg__work_fn)(struct tg_hctx *h, void *arg);
typedef void (*tg__work_done_fn)(void *arg, bool ran);
int tg__dispatcher_submit_fn(struct tg_dispatcher *d, int64_t key, bool ordered, tg__work_fn fn,
                             tg__work_done_fn done, void *arg, int64_t wait_ms);

/* dispatcher.c: run one update on h (routing, handlers, session write-back, stats);
 * resets h's ctx afterwards, not h. Returns the router's status. */
tg_status tg__dispatch_process(struct tg_dispatcher *d, struct tg_hctx *h, const char *json,
                               size_t len);

/* loop.c: loop mode (tg_dispatcher_options.async). */
struct tg__loop;
int tg__loop_new(struct tg_dispatcher *d, char *err, size_t errcap); /* 0, or -1 (err) */
void tg__loop_free(struct tg__loop *l);
tg_status tg__loop_feed(struct tg__loop *l, const char *json, size_t len, tg_feed_done_fn done,
                        void *user, char *err, size_t errcap);
int tg__loop_submit_fn(struct tg__loop *l, int64_t key, bool ordered, tg__work_fn fn,
                       tg__work_done_fn done, void *arg);
/* jobs.c in loop mode: the loop's jobs timer runs pass(q) (which returns the ms until it
 * wants to run again); wake re-arms it at once when called on the loop thread; drop
 * finishes queued runs whose done is fn_done (ran = false). q NULL = none any more. */
struct tg_jobs;
void tg__loop_set_jobs(struct tg__loop *l, struct tg_jobs *q, uint64_t (*pass)(struct tg_jobs *));
void tg__loop_jobs_wake(struct tg__loop *l);
void tg__loop_drop_fns(struct tg__loop *l, tg__work_done_fn fn_done);

/* dispatcher.c: read end of the stop pipe (readable once tg_dispatcher_stop ran). */
int tg__dispatcher_stop_fd(const struct tg_dispatcher *d);

/* updates/webhook_api.c: wait until tg_dispatcher_stop(d) or timeout_ms (-1 = forever). */
void tg__wait_stop(struct tg_dispatcher *d, int timeout_ms);

/* updates/poller.c: the getUpdates parameters (offset left out when 0: Telegram's default)
 * into b. 0, or nonzero when b cannot hold them. */
struct tg_polling_options;
int tg__getupdates_request(tg__buf *b, const struct tg_polling_options *o, int64_t offset,
                           uint32_t timeout_s, uint32_t limit);

/* updates/webhook_api.c: a thread that turns tg_dispatcher_stop(d) into tg_ctx_cancel(ctx),
 * so a long poll on ctx ends at once (the poller and the fleet's poller). */
struct tg__stop_watch {
    struct tg_dispatcher *d;
    tg_ctx *ctx;
    atomic_bool done;
    bool running;
    pthread_t th;
};
/* 0, or -1 when the thread cannot be started. */
int tg__stop_watch_start(struct tg__stop_watch *w, struct tg_dispatcher *d, tg_ctx *ctx);
/* Stop and join the thread (before a call whose cancel it must not hit). Idempotent. */
void tg__stop_watch_end(struct tg__stop_watch *w);

/* session.c: reset both scopes for a new update; write back the changed ones (TG_OK, or
 * the first failure with h->err set). */
void tg__session_reset(struct tg_hctx *h);
tg_status tg__session_flush(struct tg_hctx *h);

/* cbdata.c: swap a pressed token back to its data before routing; index life. */
void tg__cbdata_resolve(struct tg_hctx *h);
int tg__cbindex_init(struct tg__cbindex *x);
void tg__cbindex_cleanup(struct tg__cbindex *x);

/* conv.c */
tg_status tg__conv_load(struct tg_hctx *h);
/* Cancel command and timeout handling before routing; true = the update is consumed. */
bool tg__conv_pre_route(struct tg_hctx *h);

#endif
