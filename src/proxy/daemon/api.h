/*
 * api: tgproxy's control API ([api]): secrets made, limited, disabled, rotated and watched
 * over HTTP+JSON, served by libmicrohttpd on its own thread. docs/api.md is the contract.
 *
 * Access, in this order for every request: the peer address must be in `allow` (else 403);
 * an address with `auth-failures-per-minute` failed logins in the current minute gets 429;
 * with a token-file, every /v1/ path but /v1/health and /v1/ready needs
 * "Authorization: Bearer TOKEN" (401 otherwise), compared in constant time (HMAC of both
 * under a per-process key, then CRYPTO_memcmp). The token is never logged and never echoed.
 * Bodies over max-body get 413.
 *
 * Changes go through the server's reload lock (server.h): the API reads its state file,
 * changes a copy, merges it with the configuration file, publishes the result as a new
 * generation (as SIGHUP does) and only then replaces the state file atomically; if the
 * write fails the previous state is published again. So a SIGHUP and an API call never
 * interleave, and what runs is what the files say.
 *
 * Ownership: struct api is created by api_start and freed by api_stop; it borrows the
 * server, which must outlive it. Thread-safety: start/stop from the controlling thread;
 * api_note_reload from whoever holds the reload lock.
 */
#ifndef TGPROXY_API_H
#define TGPROXY_API_H

#include <stdbool.h>
#include <stdint.h>

struct server;
struct api;

/* Start the API for s's config. 0, or -errno with a line logged (token file, bind). */
int api_start(struct server *s, struct api **out);
/* Port the API listens on; 0 for NULL. */
uint16_t api_port(const struct api *a);
/* Record a reload (for /v1/info's recent reloads) and, after one that did not come from the
   API, re-read the state file. NULL-safe; reload lock held. err may be NULL. */
void api_note_reload(struct api *a, bool ok, const char *origin, const char *err);
/* Stop serving and free. NULL-safe. */
void api_stop(struct api *a);

#endif
