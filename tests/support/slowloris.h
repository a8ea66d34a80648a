/*
 * slowloris: HTTP clients that hold connections by trickling a request that never ends
 * (headers a byte at a time), as a slow-headers attack does, for the tests of our HTTP
 * listeners (webhook, metrics page, core/httpd). Every wait is bounded.
 *
 *   struct slow s = {0};
 *   slow_open(&s, "127.0.0.2", port, 8);          8 connections from 127.0.0.2, a byte each
 *   assert_true(slow_refused("127.0.0.2", port)); the 9th is closed at once (a limit)
 *   slow_until_cut(&s, 50, 200);                   a byte to each open one every 50 ms
 *                                                  until the server has closed them all
 *   slow_close(&s);
 *
 * Ownership: struct slow is caller storage. Thread-safety: one thread.
 */
#ifndef TGKIT_TEST_SLOWLORIS_H
#define TGKIT_TEST_SLOWLORIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SLOW_MAX 2048

struct slow {
    int fd[SLOW_MAX];
    bool closed[SLOW_MAX]; /* the server closed it */
    size_t sent[SLOW_MAX]; /* bytes of the endless request sent so far */
    size_t n;
};

/* Open n more connections from src_ip (an address of 127/8) to 127.0.0.1:port, each sending
   the first byte of its request; fails the test when a connect fails. */
void slow_open(struct slow *s, const char *src_ip, uint16_t port, size_t n);
/* One more connection from src_ip, which the server must close without reading (the
   per-IP limit: MHD closes it at accept; at its overall limit MHD stops accepting instead,
   and a connection waits in the listen queue): true once it sees the close, false if it
   stays open for 5 s. */
bool slow_refused(const char *src_ip, uint16_t port);
/* Wait up to pace_ms for the server to close one of s's connections, then send the next
   byte on each one still open. Returns how many the server has closed so far. */
size_t slow_round(struct slow *s, int pace_ms);
/* slow_round every pace_ms until the server has closed all of s's connections, at most
   rounds times; fails the test if some are still open then. */
void slow_until_cut(struct slow *s, int pace_ms, int rounds);
/* Close every connection. */
void slow_close(struct slow *s);

#endif
