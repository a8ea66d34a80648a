/*
 * fleet_fx: what the fleet tests share: update JSON for (chat, seq), a keep-alive HTTP
 * poster for the webhook, a hiredis probe of the test's redis-server, and the order checker
 * that judges handling records (which must also fail on broken input).
 */
#ifndef TGKIT_TEST_FLEET_FX_H
#define TGKIT_TEST_FLEET_FX_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tgbot/tgbot.h"

/* One handled update, as a handler recorded it. */
struct fx_rec {
    int64_t chat;
    long seq;       /* 1, 2, ... per chat, in publishing order */
    long prev;      /* the seq the chat's conversation held when the handler started */
    uint64_t t0_ns; /* CLOCK_MONOTONIC when the handler started and ended (one machine) */
    uint64_t t1_ns;
};

struct fx_check {
    long missing;    /* (chat, seq) never handled */
    long dups;       /* handled more than once */
    long order;      /* a seq ran (first time) before an earlier one of its chat */
    long overlap;    /* two handlers of one chat ran at the same time */
    long conv;       /* the conversation did not hold the previous seq */
    char first[200]; /* the first problem, for the failure message */
    char lost[400];  /* the updates never handled: "update <id> (chat C seq S), ..." */
};

/* {"update_id":id,"message":{... chat C, from C, text "<seq>"}} into buf. Length. */
size_t fx_update(char *buf, size_t cap, int64_t update_id, int64_t chat, long seq);
/* Parse the text of such an update's message back ("<seq>"); -1 if not a number. */
long fx_seq_of(const char *text);

/* Judge records (sorted in place) against chats 0..nchats-1 each with seqs 1..per_chat.
 * Update ids in out->lost are numbered as the fleet tests publish them: chat index c's seq s
 * is update (s - 1) * nchats + c + 1. */
void fx_check_records(struct fx_rec *r, size_t n, int64_t chat_base, long nchats, long per_chat,
                      struct fx_check *out);

/* POST body to url (keep-alive handle per thread). HTTP status, or -1 when no answer. */
long fx_post(const char *url, const char *body, size_t len);
void fx_post_cleanup(void);

/* A fleet worker on a thread of this process: fleet f, a router running fn(user) on
 * messages, a dispatcher of 4 threads with conversation storage st (NULL = memory). */
struct fx_worker {
    tg_fleet *f;
    tg_router *r;
    tg_storage *st;
    tg_dispatcher *d;
    pthread_t th;
    tg_status rc;
};

/* Start; takes f and st (freed by fx_worker_stop). false when something could not be made. */
bool fx_worker_start(struct fx_worker *w, tg_fleet *f, tg_storage *st, tg_handler_fn fn,
                     void *user);
/* tg_dispatcher_stop, join, free everything; the worker loop's status. */
tg_status fx_worker_stop(struct fx_worker *w);

/* Run a redis command on 127.0.0.1:port and return its integer reply (-1 on failure). */
long long fx_redis_int(uint16_t port, const char *fmt, ...);

#endif
