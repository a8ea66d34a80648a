/*
 * wait: the one bounded wait of the tests and of the benchmarks' support code.
 *
 * tgtest_wait_until(cond, arg, timeout_ms) asks cond(arg) until it holds or timeout_ms have
 * passed, and returns its last answer. The timeout is a bound so that a test never hangs,
 * not a timing: callers assert the answer, never how long it took. Between questions it
 * yields for a millisecond at first and for at most 10 ms later, so a state that arrives
 * at once is seen at once and a long wait does not spin. Every test that waits for a state
 * (a log line, a counter, a connection) uses it instead of a loop of its own.
 *
 * Thread-safety: any thread; cond runs on the calling thread.
 */
#ifndef TGKIT_TEST_WAIT_H
#define TGKIT_TEST_WAIT_H

#include <stdbool.h>

bool tgtest_wait_until(bool (*cond)(void *arg), void *arg, int timeout_ms);

#endif
