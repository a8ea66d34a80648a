/*
 * fuzz bot_redis_reply: what the fleet reads from Redis. The first byte picks the reader:
 *  'M'  the rest is an error text: a MOVED/ASK redirection (tg__redis_redirect), and the
 *       cluster slot of the same bytes as a key (tg__redis_slot);
 *  else the rest is RESP, parsed by hiredis's reader into a reply tree of any shape, then
 *       walked as an XREADGROUP reply and as an XAUTOCLAIM reply, entry by entry (with the
 *       id after each entry's, where a reader resumes its claim).
 * Any input must end in "not that" or a well-formed answer: no crash, no read out of bounds.
 */
#include <hiredis/hiredis.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bot/fleet/reply.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile unsigned char sink; /* keeps the reads of the values */

static void walk_entries(const redisReply *arr)
{
    for (size_t i = 0; arr && i < arr->elements; i++) {
        const char *id, *json;
        size_t len;
        int rc = tg__stream_entry(arr->element[i], &id, &json, &len);
        if (rc >= 0 && strlen(id) >= TG__STREAM_ID_MAX)
            abort();
        char next[TG__STREAM_ID_MAX];
        if (rc >= 0 && tg__stream_id_next(id, next) == 0 && strlen(next) >= sizeof next)
            abort();
        unsigned char x = 0;
        for (size_t k = 0; rc == 0 && k < len; k++) /* the whole value must be readable */
            x ^= (unsigned char)json[k];
        sink ^= x;
    }
}

static void redirect(const char *s, size_t len)
{
    unsigned slot;
    char host[64];
    uint16_t port;
    if (tg__redis_redirect(s, len, &slot, host, sizeof host, &port) == 0 &&
        (slot >= TG__REDIS_SLOTS || strlen(host) >= sizeof host || port == 0))
        abort();
    if (tg__redis_slot(s, len) >= TG__REDIS_SLOTS)
        abort();
}

static void resp(const char *s, size_t len)
{
    redisReader *rd = redisReaderCreate();
    void *reply = NULL;
    if (!rd)
        return;
    if (redisReaderFeed(rd, s, len) == REDIS_OK && redisReaderGetReply(rd, &reply) == REDIS_OK &&
        reply) {
        const redisReply *r = reply, *entries;
        char cursor[TG__STREAM_ID_MAX];
        walk_entries(tg__xread_entries(r));
        if (tg__xautoclaim(r, cursor, &entries) == 0) {
            if (strlen(cursor) >= sizeof cursor)
                abort();
            walk_entries(entries);
        }
        freeReplyObject(reply);
    }
    redisReaderFree(rd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] == 'M')
        redirect((const char *)data + 1, size - 1);
    else
        resp((const char *)data + 1, size - 1);
    return 0;
}
