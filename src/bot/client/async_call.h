/*
 * async_call.h: the one function every generated tg_async_<method> wrapper calls
 * (src/bot/api/async.gen.c), implemented by the async client (async.c).
 *
 * tramp, when not NULL, is a generated function that calls fn (the user's typed callback)
 * with the typed result taken from r->result; NULL: fn is a tg_async_fn.
 */
#ifndef TGKIT_BOT_CLIENT_ASYNC_CALL_H
#define TGKIT_BOT_CLIENT_ASYNC_CALL_H

#include "bot/codec/method.h"
#include "tgbot/async.h"

typedef void (*tg__async_tramp)(tg_async *a, const tg_async_result *r, void (*fn)(void),
                                void *user);

/* Submit a typed call (params copied by encoding); 0 when the handle cannot take it. */
uint64_t tg__async_call(tg_async *a, const tg__method *m, const void *params,
                        tg__async_tramp tramp, void (*fn)(void), void *user);

/* Bytes of the storage a typed call's result is decoded into (r->result points at it). */
size_t tg__async_out_size(const tg__method *m);

#endif
