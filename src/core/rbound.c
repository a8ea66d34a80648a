/*
 * rbound: bounded Redis replies. See rbound.h.
 *
 * The reply objects are the redisReply trees hiredis builds by default (so freeReplyObject
 * and every reader of them work unchanged); what differs is that each object is accounted
 * before it is allocated. A new reply starts with the object whose task has no parent: hiredis
 * creates an aggregate before its elements, so that object is always the reply's first.
 */
#include "core/rbound.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

#if HIREDIS_MAJOR != 0
#error "core/rbound.c is written for hiredis 0.x's reader (RESP2 objects, createArray(int))"
#endif

void tg__rbound_init(struct tg__rbound *b, const struct tg__rlimits *lim)
{
    memset(b, 0, sizeof *b);
    if (lim)
        b->lim = *lim;
    if (!b->lim.max_elements)
        b->lim.max_elements = TG__RBOUND_ELEMENTS;
    if (!b->lim.max_depth)
        b->lim.max_depth = TG__RBOUND_DEPTH;
    if (!b->lim.max_bulk)
        b->lim.max_bulk = TG__RBOUND_BULK;
    if (!b->lim.max_line)
        b->lim.max_line = TG__RBOUND_LINE;
    if (!b->lim.max_reply)
        b->lim.max_reply = TG__RBOUND_REPLY;
}

__attribute__((format(printf, 3, 4))) static void *
refuse(struct tg__rbound *b, enum tg__rbound_why why, const char *fmt, ...)
{
    if (!b->why) {
        b->why = why;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(b->msg, sizeof b->msg, fmt, ap);
        va_end(ap);
    }
    return NULL; /* hiredis takes NULL as out of memory and stops the reader */
}

/* Account bytes for the object of task t; false (refused) when they cross a bound. */
static bool account(struct tg__rbound *b, const redisReadTask *t, size_t bytes)
{
    if (b->why)
        return false;
    if (!t->parent) {
        b->held = 0;
        if (b->waiting && !b->waiting->head && t->type != REDIS_REPLY_ERROR) {
            refuse(b, TG__RB_UNSOLICITED, "a reply no command is waiting for");
            return false;
        }
    }
    if (bytes > b->lim.max_reply - b->held) {
        refuse(b, TG__RB_REPLY, "a reply of more than %zu bytes (limit %zu)", b->held + bytes,
               b->lim.max_reply);
        return false;
    }
    b->held += bytes;
    return true;
}

/* A zeroed reply of type, linked into its parent's element vector. */
static redisReply *new_obj(const redisReadTask *t, int type)
{
    redisReply *r = tg__calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->type = type;
    if (t->parent) {
        redisReply *up = t->parent->obj;
        up->element[t->idx] = r;
    }
    return r;
}

static void *on_string(const redisReadTask *t, char *str, size_t len)
{
    struct tg__rbound *b = t->privdata;
    bool bulk = t->type == REDIS_REPLY_STRING;
    size_t max = bulk ? b->lim.max_bulk : b->lim.max_line;
    if (len > max)
        return refuse(b, bulk ? TG__RB_BULK : TG__RB_LINE, "a %s of %zu bytes (limit %zu)",
                      bulk ? "bulk string" : "line", len, max);
    if (!account(b, t, sizeof(redisReply) + len + 1))
        return NULL;
    char *s = tg__malloc(len + 1);
    if (!s)
        return NULL;
    redisReply *r = new_obj(t, t->type);
    if (!r) {
        tg__free(s);
        return NULL;
    }
    memcpy(s, str, len);
    s[len] = '\0';
    r->str = s;
    r->len = len;
    return r;
}

static void *on_array(const redisReadTask *t, int elements)
{
    struct tg__rbound *b = t->privdata;
    if (elements > 0 && (uint32_t)elements > b->lim.max_elements)
        return refuse(b, TG__RB_ELEMENTS, "an array of %d elements (limit %u)", elements,
                      b->lim.max_elements);
    uint32_t depth = 1;
    for (const redisReadTask *p = t->parent; p; p = p->parent)
        depth++;
    if (depth > b->lim.max_depth)
        return refuse(b, TG__RB_DEPTH, "arrays nested %u deep (limit %u)", depth, b->lim.max_depth);
    size_t n = elements > 0 ? (size_t)elements : 0;
    if (!account(b, t, sizeof(redisReply) + n * sizeof(redisReply *)))
        return NULL;
    redisReply **v = NULL;
    if (n && !(v = tg__calloc(n, sizeof *v)))
        return NULL;
    redisReply *r = new_obj(t, REDIS_REPLY_ARRAY);
    if (!r) {
        tg__free(v);
        return NULL;
    }
    r->element = v;
    r->elements = n;
    return r;
}

static void *on_integer(const redisReadTask *t, long long v)
{
    if (!account(t->privdata, t, sizeof(redisReply)))
        return NULL;
    redisReply *r = new_obj(t, REDIS_REPLY_INTEGER);
    if (r)
        r->integer = v;
    return r;
}

static void *on_nil(const redisReadTask *t)
{
    if (!account(t->privdata, t, sizeof(redisReply)))
        return NULL;
    return new_obj(t, REDIS_REPLY_NIL);
}

static redisReplyObjectFunctions bounded_fns = {
    .createString = on_string,
    .createArray = on_array,
    .createInteger = on_integer,
    .createNil = on_nil,
    .freeObject = freeReplyObject,
};

void tg__rbound_attach_reader(struct tg__rbound *b, redisReader *r)
{
    b->why = TG__RB_NONE;
    b->msg[0] = '\0';
    b->held = 0;
    b->waiting = NULL;
    if (r) {
        r->fn = &bounded_fns;
        r->privdata = b;
    }
}

void tg__rbound_attach(struct tg__rbound *b, redisContext *c)
{
    tg__rbound_attach_reader(b, c ? c->reader : NULL);
}

void tg__rbound_attach_async(struct tg__rbound *b, redisAsyncContext *ac)
{
    tg__rbound_attach(b, ac ? &ac->c : NULL);
    b->waiting = ac ? &ac->replies : NULL;
}

/* Put r in error for the refusal; returns REDIS_ERR. */
static int fail_reader(struct tg__rbound *b, redisReader *r)
{
    if (!b->why)
        return REDIS_ERR; /* hiredis's own error, already in r */
    if (r->reply) {       /* free what the reply holds now, not when the context goes */
        r->fn->freeObject(r->reply);
        r->reply = NULL;
    }
    r->err = REDIS_ERR_PROTOCOL;
    snprintf(r->errstr, sizeof r->errstr, "reply refused: %s", b->msg);
    return REDIS_ERR;
}

/* The same for c and its reader. */
static int fail_ctx(struct tg__rbound *b, redisContext *c)
{
    if (!b->why)
        return REDIS_ERR;
    fail_reader(b, c->reader);
    c->err = REDIS_ERR_PROTOCOL;
    snprintf(c->errstr, sizeof c->errstr, "reply refused: %s", b->msg);
    return REDIS_ERR;
}

int tg__rbound_check_pending(struct tg__rbound *b, redisContext *c)
{
    return tg__rbound_check_reader(b, c->reader) == 0 ? 0 : fail_ctx(b, c);
}

int tg__rbound_check_reader(struct tg__rbound *b, redisReader *r)
{
    if (b->why)
        return fail_reader(b, r);
    if (r->err)
        return 0; /* hiredis's own error: the owner sees it */
    size_t n = r->len - r->pos;
    const char *p = r->buf + r->pos;
    /* The unparsed bytes are the unfinished item (the reader parses every complete one), its
     * type byte already taken. Digits and a CRLF: a bulk string waiting for its bytes (a line
     * item would have completed); anything else without a CRLF: a line still coming. */
    size_t k = 0;
    unsigned long long len = 0;
    while (k < n && k < 20 && p[k] >= '0' && p[k] <= '9')
        len = len * 10 + (unsigned)(p[k++] - '0');
    if (k > 0 && k + 1 < n && p[k] == '\r' && p[k + 1] == '\n') {
        if (k == 20 || len > b->lim.max_bulk) {
            refuse(b, TG__RB_BULK, "a bulk string of %llu bytes (limit %zu)", len, b->lim.max_bulk);
            return fail_reader(b, r);
        }
        size_t held = r->reply ? b->held : 0; /* r->reply: the aggregate it belongs to */
        if (len + sizeof(redisReply) + 1 > b->lim.max_reply - held) {
            refuse(b, TG__RB_REPLY, "a reply of more than %zu bytes (limit %zu)",
                   held + (size_t)len, b->lim.max_reply);
            return fail_reader(b, r);
        }
        return 0;
    }
    if (n > b->lim.max_line) {
        refuse(b, TG__RB_LINE, "a line of more than %zu bytes (limit %zu)", n, b->lim.max_line);
        return fail_reader(b, r);
    }
    return 0;
}

int tg__rbound_get_reply(struct tg__rbound *b, redisContext *c, redisReply **reply)
{
    void *aux = NULL;
    *reply = NULL;
    if (redisGetReplyFromReader(c, &aux) != REDIS_OK)
        return fail_ctx(b, c);
    if (!aux) {
        int done = 0;
        do {
            if (redisBufferWrite(c, &done) != REDIS_OK)
                return REDIS_ERR;
        } while (!done);
        while (!aux) {
            if (redisBufferRead(c) != REDIS_OK)
                return REDIS_ERR;
            if (redisGetReplyFromReader(c, &aux) != REDIS_OK)
                return fail_ctx(b, c);
            if (!aux && tg__rbound_check_pending(b, c) != 0)
                return REDIS_ERR;
        }
    }
    *reply = aux;
    return REDIS_OK;
}

redisReply *tg__rbound_argv(struct tg__rbound *b, redisContext *c, int argc, const char **argv,
                            const size_t *lens)
{
    redisReply *r;
    if (redisAppendCommandArgv(c, argc, argv, lens) != REDIS_OK ||
        tg__rbound_get_reply(b, c, &r) != REDIS_OK)
        return NULL;
    return r;
}

redisReply *tg__rbound_vcmd(struct tg__rbound *b, redisContext *c, const char *fmt, va_list ap)
{
    redisReply *r;
    if (redisvAppendCommand(c, fmt, ap) != REDIS_OK || tg__rbound_get_reply(b, c, &r) != REDIS_OK)
        return NULL;
    return r;
}

redisReply *tg__rbound_cmd(struct tg__rbound *b, redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = tg__rbound_vcmd(b, c, fmt, ap);
    va_end(ap);
    return r;
}

enum tg__rbound_why tg__rbound_why(const struct tg__rbound *b)
{
    return b->why;
}

const char *tg__rbound_errstr(const struct tg__rbound *b, const char *fallback)
{
    return b->why ? b->msg : fallback;
}
