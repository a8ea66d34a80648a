/*
 * defer.h: a ctx whose calls are queued instead of sent (the dispatcher's loop mode,
 * src/bot/dispatch/loop.c).
 *
 * With a defer function set, every call on the ctx is prepared as usual (parameters
 * checked and encoded as JSON, the same errors) and then handed to defer(user, ctx, method,
 * body, len) instead of going out: the call returns what defer returns (TG_OK = queued).
 * A deferred call has no result to give, so a call that asks for one (a non-NULL out /
 * result_json), an upload (multipart) and a download fail with TG_ERR_INVALID saying so,
 * nothing queued. body is valid during the defer call only.
 */
#ifndef TGKIT_BOT_CLIENT_DEFER_H
#define TGKIT_BOT_CLIENT_DEFER_H

#include <stddef.h>

#include "tgbot/client.h"

typedef tg_status (*tg__ctx_defer_fn)(void *user, tg_ctx *ctx, const char *method,
                                      const char *body, size_t len);

/* fn NULL = back to sending. */
void tg__ctx_set_defer(tg_ctx *ctx, tg__ctx_defer_fn fn, void *user);

#endif
