/*
 * dispatch_fakeapi: a loopback Bot API stand-in with real getUpdates semantics, for the
 * framework's end-to-end tests (the client's bot_server serves canned replies; polling
 * needs state).
 *
 * getUpdates honours offset (every update below it is confirmed and forgotten), limit and
 * timeout (a long poll waits for new updates or the timeout), and can be told to answer
 * 409 Conflict. getMe answers a bot named "testbot". Every other method answers ok with a
 * small message object. getUpdates and the other methods are recorded (method and JSON
 * body) in arrival order.
 *
 * Thread-safety: every function may be called from any thread while the server runs.
 */
#ifndef TGKIT_TEST_DISPATCH_FAKEAPI_H
#define TGKIT_TEST_DISPATCH_FAKEAPI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct fakeapi fakeapi;

fakeapi *fakeapi_start(const char *token); /* NULL on failure */
void fakeapi_stop(fakeapi *f);             /* NULL-safe */
const char *fakeapi_url(const fakeapi *f); /* "http://127.0.0.1:<port>" */

/* Queue an update (json must carry the same update_id; ids must increase). */
void fakeapi_add_update(fakeapi *f, int64_t update_id, const char *json);
/* The highest offset a getUpdates call has sent (0 = none yet). */
int64_t fakeapi_offset(fakeapi *f);
size_t fakeapi_getupdates_calls(fakeapi *f);
/* Body of the latest getUpdates call, malloc'ed (free it); NULL before the first. */
char *fakeapi_last_getupdates(fakeapi *f);
/* The next n getUpdates calls answer 409 Conflict. */
void fakeapi_conflict(fakeapi *f, int n);

/* Number of recorded calls of method (NULL = all recorded calls). */
size_t fakeapi_count(fakeapi *f, const char *method);
/* Body of the i-th recorded call of method, malloc'ed (free it); NULL past the end. */
char *fakeapi_body(fakeapi *f, const char *method, size_t i);

#endif
