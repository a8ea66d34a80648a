/* reply: pure readers of Redis replies and redirections. See reply.h. */
#include "bot/fleet/reply.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

unsigned tg__redis_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open) {
        size_t rest = len - (size_t)(open - key) - 1;
        const char *close = memchr(open + 1, '}', rest);
        if (close && close > open + 1) {
            key = open + 1;
            len = (size_t)(close - key);
        }
    }
    uint16_t crc = 0; /* CRC16/XMODEM: polynomial 0x1021, initial value 0 */
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((unsigned char)key[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc & (TG__REDIS_SLOTS - 1);
}

/* A decimal number of at most 5 digits at p, followed by stop ('\0': by the end). */
static const char *number(const char *p, const char *end, char stop, unsigned long *v)
{
    const char *q = p;
    *v = 0;
    while (q < end && *q >= '0' && *q <= '9' && q - p < 5)
        *v = *v * 10 + (unsigned long)(*q++ - '0');
    if (q == p)
        return NULL;
    if (stop == '\0') /* the number must end the text */
        return q == end ? q : NULL;
    return q < end && *q == stop ? q : NULL;
}

int tg__redis_redirect(const char *s, size_t len, unsigned *slot, char *host, size_t hcap,
                       uint16_t *port)
{
    const char *end = s + len, *p = memchr(s, ' ', len);
    unsigned long v;
    if (!p || !(p = number(p + 1, end, ' ', &v)) || v >= TG__REDIS_SLOTS)
        return -1;
    *slot = (unsigned)v;
    const char *addr = p + 1, *colon = NULL;
    for (const char *q = addr; q < end; q++)
        if (*q == ':')
            colon = q;
    if (!colon || colon == addr || (size_t)(colon - addr) >= hcap)
        return -1;
    if (!number(colon + 1, end, '\0', &v) || v == 0 || v > 65535)
        return -1;
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    *port = (uint16_t)v;
    return 0;
}

const redisReply *tg__xread_entries(const redisReply *r)
{
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 1)
        return NULL;
    const redisReply *s = r->element[0];
    if (s->type != REDIS_REPLY_ARRAY || s->elements != 2 ||
        s->element[1]->type != REDIS_REPLY_ARRAY)
        return NULL;
    return s->element[1];
}

int tg__xautoclaim(const redisReply *r, char *cursor, const redisReply **entries)
{
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[0]->len >= TG__STREAM_ID_MAX ||
        r->element[1]->type != REDIS_REPLY_ARRAY)
        return -1;
    memcpy(cursor, r->element[0]->str, r->element[0]->len);
    cursor[r->element[0]->len] = '\0';
    *entries = r->element[1];
    return 0;
}

int tg__stream_entry(const redisReply *ent, const char **id, const char **json, size_t *len)
{
    if (ent->type != REDIS_REPLY_ARRAY || ent->elements < 2 ||
        ent->element[0]->type != REDIS_REPLY_STRING || ent->element[0]->len == 0 ||
        ent->element[0]->len >= TG__STREAM_ID_MAX ||
        memchr(ent->element[0]->str, '\0', ent->element[0]->len))
        return -1;
    *id = ent->element[0]->str;
    const redisReply *f = ent->element[1];
    for (size_t i = 0; f->type == REDIS_REPLY_ARRAY && i + 1 < f->elements; i += 2) {
        const redisReply *k = f->element[i], *v = f->element[i + 1];
        if (k->type == REDIS_REPLY_STRING && k->len == 1 && k->str[0] == 'u' &&
            v->type == REDIS_REPLY_STRING) {
            *json = v->str;
            *len = v->len;
            return 0;
        }
    }
    return 1;
}

/* A decimal uint64 at *p (at least one digit, no overflow); advances *p. */
static bool u64_at(const char **p, uint64_t *v)
{
    const char *q = *p;
    *v = 0;
    for (; *q >= '0' && *q <= '9'; q++) {
        unsigned d = (unsigned)(*q - '0');
        if (*v > (UINT64_MAX - d) / 10)
            return false;
        *v = *v * 10 + d;
    }
    if (q == *p)
        return false;
    *p = q;
    return true;
}

int tg__stream_id_next(const char *id, char *next)
{
    uint64_t ms, seq;
    const char *p = id;
    if (!u64_at(&p, &ms) || *p++ != '-' || !u64_at(&p, &seq) || *p)
        return -1;
    if (seq == UINT64_MAX && ms == UINT64_MAX)
        return -1;
    if (seq == UINT64_MAX)
        snprintf(next, TG__STREAM_ID_MAX, "%" PRIu64 "-0", ms + 1);
    else
        snprintf(next, TG__STREAM_ID_MAX, "%" PRIu64 "-%" PRIu64, ms, seq + 1);
    return 0;
}
