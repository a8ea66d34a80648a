/*
 * redis_hostile: a Redis that attacks its client's memory (issue 21 item 4), on 127.0.0.1 and
 * a free port, for the tests of every hiredis context (bot fleet, conversation storage, the
 * proxy's [fleet] link).
 *
 * It takes one connection at a time. It waits for the client's first command (whatever it
 * is: PING, AUTH, GET, XREADGROUP), reads what came, and answers with the attack of its mode,
 * streamed until the client goes away, cap bytes were written, or rhostile_stop; then it
 * closes and takes the next connection. A client that closes (or resets) while the answer
 * is still coming counts as a cut: it refused the answer before holding all of it.
 *
 * Ownership: struct rhostile is caller storage; rhostile_stop joins the thread and closes
 * every socket. Thread-safety: the counters are atomics, read from any thread.
 */
#ifndef TGKIT_TEST_REDIS_HOSTILE_H
#define TGKIT_TEST_REDIS_HOSTILE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum rhostile_mode {
    RH_HUGE_ARRAY,  /* "*1170000000\r\n" then ":1\r\n" elements */
    RH_BIG_REPLY,   /* "*65536\r\n" then 16 KiB bulk strings: the reply's total is the bound */
    RH_HUGE_BULK,   /* "$4000000000\r\n" then its bytes */
    RH_DEEP,        /* "*1\r\n" 64 times, then ":1\r\n" */
    RH_LONG_LINE,   /* "+" then a status line that never ends */
    RH_UNSOLICITED, /* "+OK\r\n" to the first command, then ":1\r\n" forever */
};

struct rhostile {
    enum rhostile_mode mode;
    uint64_t cap; /* bytes written per connection at most */
    int lfd;
    uint16_t port;
    pthread_t th;
    bool running;
    atomic_bool stop;
    atomic_uint conns;         /* connections taken */
    atomic_uint cuts;          /* connections the client closed while the answer was coming */
    atomic_uint_fast64_t sent; /* bytes written to the last connection */
};

/* Listen and start answering. cap 0 = 256 MiB. 0 or -1. */
int rhostile_start(struct rhostile *h, enum rhostile_mode mode, uint64_t cap);
void rhostile_stop(struct rhostile *h); /* NULL-safe on a zeroed struct */

/* Bounded waits (10 s, polling) until at least n connections were taken, or cut. 0 or -1. */
int rhostile_wait_conns(struct rhostile *h, unsigned n);
int rhostile_wait_cuts(struct rhostile *h, unsigned n);

/* Peak resident memory of this process since the last tgtest_rss_reset(), in bytes (VmHWM
 * of /proc/self/status; tgtest_rss_kb() in tgtest.h is the resident memory now). */
uint64_t tgtest_rss_peak(void);
/* Start a new peak (writes "5" to /proc/self/clear_refs). 0 or -1. */
int tgtest_rss_reset(void);

#endif
