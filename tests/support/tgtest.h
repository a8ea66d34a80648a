/*
 * tgtest.h: what every cmocka test of tgkit includes.
 * cmocka needs <stdarg.h>, <stddef.h>, <stdint.h> and <setjmp.h> before <cmocka.h>.
 */
#ifndef TGKIT_TEST_H
#define TGKIT_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ports.h" /* tgtest_listen_port */
#include "wait.h"  /* tgtest_wait_until */

/* Path of the test data file tests/<rel> of this checkout, e.g. "fixtures/botapi/x.json" or
 * "vectors/secrets.json" (tests/fixtures/README.md, tests/vectors/README.md say where each came
 * from). Returns a thread-local buffer. */
const char *tgtest_data_path(const char *rel);
/* Read a whole file into a malloc'ed, NUL-terminated buffer; NULL on error. */
char *tgtest_read_file(const char *path, size_t *len);
/* Occurrences of needle in the file at path now (0 if it cannot be read). */
int tgtest_file_count(const char *path, const char *needle);
/* Remove a SQLite database file and its -wal and -shm companions (missing ones are fine). */
void tgtest_remove_sqlite(const char *path);
/* Next number of a reproducible xorshift64 stream (Marsaglia's 13, 7, 17) kept in *state,
 * which must not be 0: for random test cases that repeat on every run. */
uint64_t tgtest_xorshift64(uint64_t *state);
/* Current resident set size of this process in KiB (from /proc/self/statm). */
long tgtest_rss_kb(void);
/* Number of open file descriptors of this process. */
int tgtest_open_fds(void);
/* Raise this process's open-files soft limit to at least want; fails the test when the hard
   limit is lower (the machine cannot run it). */
void tgtest_nofile_at_least(unsigned long want);
/* Fail the running test unless a and b are the same JSON value (jansson decides: key order
 * and number spelling do not matter). */
void tgtest_assert_same_json(const char *a, const char *b);

/*
 * Skips. A test that needs something this build makes (a binary, a library) declares it as a
 * build dependency and fails when it is missing; a test skips only when this machine cannot
 * run it (no IPv6 on loopback, no such locale). cmocka counts a skip as a pass, so a skip
 * goes through these: tgtest_skip(why...) prints the reason and leaves the test, and main
 * returns tgtest_result(cmocka_run_group_tests(...)), which is TGTEST_SKIP_CODE when a test
 * was skipped and none failed. Every ctest case has SKIP_RETURN_CODE TGTEST_SKIP_CODE, so
 * ctest lists the file as skipped, not passed.
 */
/* Run fn(arg) in a child process and fail unless it aborts (SIGABRT) with needle in what
 * it wrote to stderr: the death test of a debug check. The child's stderr is quoted on
 * failure. fn must not use cmocka's assertions (the child is not a cmocka test). */
void tgtest_expect_abort(void (*fn)(void *arg), void *arg, const char *needle);

#define TGTEST_SKIP_CODE 77
#define tgtest_skip(...)                                                                           \
    do {                                                                                           \
        tgtest_skip_note(__VA_ARGS__);                                                             \
        skip();                                                                                    \
    } while (0)
void tgtest_skip_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int tgtest_result(int failed);

#endif
