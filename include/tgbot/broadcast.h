/*
 * tgbot/broadcast.h: send one message to many chats at the rate Telegram allows, on an
 * async handle's loop (tgbot/async.h).
 *
 *   tg_broadcast *b = tg_broadcast_new(a, chats, n, &(tg_broadcast_options){
 *       .text = "Tonight: the new release", .progress_path = "news.progress",
 *       .on_done = finished, .user = &state});
 *   tg_async_run(a);                  // or your loop: the broadcast is timers and calls
 *
 * Rates: messages go out evenly spaced at rate_per_sec overall (default 28 a second: about
 * Telegram's 30, with a margin for network jitter; with allow_paid_broadcast the default is
 * 1000 and the messages carry allow_paid_broadcast, which Telegram charges Stars for).
 * Telegram's per-chat limits (1 a second in a private chat, 20 a minute in a group) cannot
 * be reached: each chat gets one message, and a chat listed twice is sent to once (the
 * later entries report TG_BCAST_DUPLICATE). A 429 that comes anyway waits its retry_after
 * (the async handle's retry policy) and the message is sent again: reported as sent, and
 * counted in flood_retried.
 *
 * Outcomes: every chat gets exactly one (on_chat, once per list entry), counted in the
 * progress (on_progress after each outcome, on_done once at the end).
 *
 * Resuming (progress_path): before a message is submitted, "S <index>" is appended to the
 * file, and "D <index> <outcome>" once it has its outcome, each with one write(2) (so a
 * killed process loses nothing the kernel got; a power cut may). A new broadcast over the
 * same list with the same file skips every chat that has an outcome, and never resends a
 * chat whose message was submitted but whose outcome was not recorded (the process died
 * with it in flight: Telegram may have delivered it): those report TG_BCAST_UNCERTAIN. So
 * no chat gets the message twice. A file written for another list is refused.
 *
 * Threads: the async handle's loop thread, like the handle.
 */
#ifndef TGBOT_BROADCAST_H
#define TGBOT_BROADCAST_H

#include "tgbot/async.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tg_broadcast_outcome { /* append only */
    TG_BCAST_PENDING = 0,
    TG_BCAST_SENT,        /* delivered (possibly after a 429 and its wait) */
    TG_BCAST_BLOCKED,     /* 403: the user blocked the bot */
    TG_BCAST_NOT_FOUND,   /* 400: chat not found (an unknown id) */
    TG_BCAST_DEACTIVATED, /* 403: the user's account is deactivated */
    TG_BCAST_FORBIDDEN,   /* another 403: kicked, not a member, cannot write first */
    TG_BCAST_FAILED,      /* any other failure (API error, transport, cancelled) */
    TG_BCAST_UNCERTAIN,   /* resumed: in flight when an earlier run died; not resent */
    TG_BCAST_DUPLICATE,   /* the chat is listed earlier too: sent to once */
    TG_BCAST_NOUTCOMES
} tg_broadcast_outcome;

/* "sent", "blocked", "not found", ... (static). */
TG_API const char *tg_broadcast_outcome_name(tg_broadcast_outcome o);

typedef struct tg_broadcast_progress {
    size_t total;              /* chats in the list */
    size_t done;               /* with an outcome */
    size_t sent;               /* TG_BCAST_SENT */
    size_t failed;             /* done - sent */
    size_t by_outcome[16];     /* indexed by tg_broadcast_outcome */
    size_t flood_retried;      /* sent after one or more 429s */
    size_t resumed;            /* outcomes read back from the progress file */
    bool finished;             /* every chat has its outcome */
} tg_broadcast_progress;

typedef struct tg_broadcast tg_broadcast;

typedef struct tg_broadcast_options {
    const char *text;        /* sendMessage text (copied); or: */
    int64_t copy_from_chat_id; /* with copy_message_id: copyMessage of an existing message */
    int64_t copy_message_id;
    const char *parse_mode;  /* "HTML", "MarkdownV2" (formatted text); NULL = plain */
    double rate_per_sec;     /* overall; 0 = 28, or 1000 with allow_paid_broadcast */
    bool allow_paid_broadcast;
    uint32_t max_in_flight;  /* 0 = 64 */
    const char *progress_path; /* resume file (see above); NULL = none */
    /* Once per list entry (chat_ids[index]); r is the call's result (NULL for outcomes read
     * back from the progress file and for duplicates). */
    void (*on_chat)(void *user, size_t index, int64_t chat_id, tg_broadcast_outcome o,
                    const tg_async_result *r);
    void (*on_progress)(void *user, const tg_broadcast_progress *p);
    void (*on_done)(void *user, const tg_broadcast_progress *p); /* once, at the end */
    void *user;
} tg_broadcast_options;

/*
 * Start broadcasting to chat_ids[0..n) (copied) on a. The first message goes out from the
 * loop (never inside this call). NULL on failure, with tg_broadcast_errmsg() saying why (no
 * text nor message to copy, the progress file unreadable, unwritable or for another list,
 * out of memory).
 */
TG_API tg_broadcast *tg_broadcast_new(tg_async *a, const int64_t *chat_ids, size_t n,
                                      const tg_broadcast_options *opts);
TG_API const char *tg_broadcast_errmsg(void);
TG_API const tg_broadcast_progress *tg_broadcast_get_progress(const tg_broadcast *b);
/* Stop submitting; messages in flight still get their outcome (and on_done still comes,
 * with finished = false). Resume later with the same progress file. */
TG_API void tg_broadcast_stop(tg_broadcast *b);
/* Free. With messages still in flight, it stops first and the memory goes once their
 * outcomes are in (no callbacks run any more); the async handle must outlive that.
 * NULL is a no-op. */
TG_API void tg_broadcast_free(tg_broadcast *b);

#ifdef __cplusplus
}
#endif

#endif
