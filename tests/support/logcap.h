/*
 * logcap: capture the process default logger's lines in memory, for tests that assert on
 * what the code under test logged (in-process servers and resolvers).
 *
 * Ownership: one static 16 KiB buffer per test binary; lines past it are dropped. Thread-safety:
 * the sink runs on any thread (a mutex guards the buffer); logcap_start/clear run between tests.
 */
#ifndef TGTEST_LOGCAP_H
#define TGTEST_LOGCAP_H

#include <stdbool.h>

/* Empty the buffer and route tg__log_default() into it. */
void logcap_start(void);
/* Empty the buffer. */
void logcap_clear(void);
/* Whether a captured line holds needle now. */
bool logcap_has(const char *needle);
/* Bounded wait (10 s, polling) until a captured line holds needle. */
bool logcap_wait(const char *needle);
/* The captured text, for a failure message (read once the writers are quiet). */
const char *logcap_text(void);

#endif
