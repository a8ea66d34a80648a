/*
 * reply: pure readers of what Redis sends the fleet: cluster slots of keys, MOVED/ASK
 * redirections, and the shapes of stream replies (XREADGROUP, XAUTOCLAIM, one entry).
 * No I/O and no allocation; every function accepts any input (a reply tree from hiredis of
 * any shape, any bytes) and answers "not that" for what it does not recognise. Fuzzed by
 * fuzz/bot_redis_reply.
 */
#ifndef TGKIT_BOT_FLEET_REPLY_H
#define TGKIT_BOT_FLEET_REPLY_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#define TG__REDIS_SLOTS   16384
#define TG__STREAM_ID_MAX 48 /* bytes of a stream entry id, NUL included */

/* The cluster slot of a key (CRC16/XMODEM of the key or of its {hash tag}, mod 16384). */
unsigned tg__redis_slot(const char *key, size_t len);

/* "MOVED <slot> <host>:<port>" or "ASK ..." (the text after the first word is parsed the
 * same way). Fills slot, host (NUL-terminated, at most hcap - 1 bytes) and port. 0, or -1
 * when s is not such a redirection. */
int tg__redis_redirect(const char *s, size_t len, unsigned *slot, char *host, size_t hcap,
                       uint16_t *port);

/* The entries of an XREADGROUP reply naming one stream; NULL for a nil reply (nothing new)
 * or any other shape. */
const redisReply *tg__xread_entries(const redisReply *r);
/* An XAUTOCLAIM reply: the next cursor (copied into cursor[TG__STREAM_ID_MAX]) and the
 * claimed entries. 0, or -1 for another shape. */
int tg__xautoclaim(const redisReply *r, char *cursor, const redisReply **entries);
/* One stream entry [id, [field, value, ...]]: its id (in the reply, NUL-terminated) and the
 * value of field "u" (the update). 0 with both; 1 when the entry lacks "u" (id set); -1 when
 * it is not an entry (e.g. deleted while pending). */
int tg__stream_entry(const redisReply *ent, const char **id, const char **json, size_t *len);
/* The smallest stream id after id ("<ms>-<seq>", both decimal) into next[TG__STREAM_ID_MAX]:
 * "<ms>-<seq+1>", or "<ms+1>-0" when seq is the largest. 0, or -1 when id is not such an id
 * or has no successor. */
int tg__stream_id_next(const char *id, char *next);

#endif
