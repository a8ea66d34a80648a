/*
 * fuzz bot_redis_reply: what the fleet reads from Redis. The first byte picks the reader:
 *  'M'  the rest is an error text: a MOVED/ASK redirection (tg__redis_redirect), and the
 *       cluster slot of the same bytes as a key (tg__redis_slot);
 *  'B'  the rest is RESP fed in pieces (the next byte: their size) to hiredis's reader under
 *       tight bounds (core/rbound.h: 8 elements, depth 3, 64-byte strings and lines, 768 bytes a
 *       reply): every reply that comes out must be within them, and a refusal must leave the
 *       reader in error with the bound named;
 *  else the rest is RESP, parsed by hiredis's reader under the bounds every context uses
 *       (the defaults) into a reply tree of any shape, then walked as an XREADGROUP reply
 *       and as an XAUTOCLAIM reply, entry by entry (with the id after each entry's, where a
 *       reader resumes its claim).
 * Any input must end in "not that" or a well-formed answer: no crash, no read out of bounds,
 * and no allocation larger than the bounds ("*1170000000\r\n" made the default reader ask
 * for 9.3 GB: an oom- artifact).
 */
#include <hiredis/hiredis.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bot/fleet/reply.h"
#include "core/rbound.h"

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

/* Bytes the tree holds, as rbound counts them; aborts past the tight bounds. */
static size_t within(const redisReply *r, unsigned depth)
{
    size_t n = sizeof *r;
    if (r->type == REDIS_REPLY_ARRAY) {
        if (r->elements > 8 || depth > 3)
            abort();
        n += r->elements * sizeof(redisReply *);
        for (size_t i = 0; i < r->elements; i++)
            n += within(r->element[i], depth + 1);
    } else if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS ||
               r->type == REDIS_REPLY_ERROR) {
        if (r->len > 64 || r->str[r->len] != '\0')
            abort();
        n += r->len + 1;
    }
    return n;
}

static void bounded(const char *s, size_t len)
{
    if (len < 1)
        return;
    size_t piece = (unsigned char)s[0] % 32 + 1;
    s++, len--;
    redisReader *rd = redisReaderCreate();
    if (!rd)
        return;
    struct tg__rbound b;
    tg__rbound_init(
        &b,
        &(struct tg__rlimits){
            .max_elements = 8, .max_depth = 3, .max_bulk = 64, .max_line = 64, .max_reply = 768});
    tg__rbound_attach_reader(&b, rd);
    for (size_t off = 0; off < len; off += piece) {
        size_t k = len - off < piece ? len - off : piece;
        if (redisReaderFeed(rd, s + off, k) != REDIS_OK)
            break;
        void *reply = NULL;
        int rc;
        while ((rc = redisReaderGetReply(rd, &reply)) == REDIS_OK && reply) {
            if (within(reply, 1) > 768)
                abort();
            freeReplyObject(reply);
            reply = NULL;
        }
        /* whatever the parse did: a refusal (here or in the reply functions) names its
         * bound and leaves the reader in error saying so */
        if (tg__rbound_check_reader(&b, rd) != 0 &&
            (!b.why || !rd->err || !strstr(rd->errstr, b.msg)))
            abort();
        if (rc != REDIS_OK || rd->err)
            break;
    }
    if (b.why && !rd->err)
        abort();
    redisReaderFree(rd);
}

static void resp(const char *s, size_t len)
{
    redisReader *rd = redisReaderCreate();
    void *reply = NULL;
    if (!rd)
        return;
    struct tg__rbound b;
    tg__rbound_init(&b, NULL);
    tg__rbound_attach_reader(&b, rd);
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
    else if (data[0] == 'B')
        bounded((const char *)data + 1, size - 1);
    else
        resp((const char *)data + 1, size - 1);
    return 0;
}
