/*
 * rbound: bounds on what one Redis reply may make us hold, for every hiredis context of both
 * products (the bot fleet, conversation storage, the proxy's fleet link).
 *
 * hiredis 0.14 believes the server: "*1170000000\r\n" (13 bytes) makes its default reader
 * calloc 9.3 GB for the element pointers, elements streamed behind it are kept until the
 * reply ends, and "$4000000000\r\n" makes its buffer grow with whatever follows. A hostile
 * or man-in-the-middle Redis (the link is plain TCP) exhausts memory that way.
 *
 * tg__rbound_attach() gives a context's reader our own reply object functions (the same
 * redisReply trees, freed by freeReplyObject) that refuse, BEFORE allocating:
 *  - an aggregate announcing more than max_elements elements;
 *  - an aggregate nested deeper than max_depth;
 *  - a reply whose objects, strings and element vectors would pass max_reply bytes.
 * tg__rbound_check_pending() looks at the bytes the reader holds but could not parse yet
 * (they are always the one unfinished item): a bulk string announcing more than max_bulk
 * bytes (or more than max_reply with what the reply already holds) is refused as soon as its
 * header is in, and a line (status, error, header) longer than max_line without its CRLF
 * (hiredis looks for the CRLF from the line's start at every read: a long line is also
 * quadratic time).
 * So the reader never holds more than about max_reply + max_bulk + one read (16 KiB).
 *
 * A refusal is sticky for the connection: the reply in progress is freed, the reader (and so
 * the context) is in error with err = REDIS_ERR_PROTOCOL and errstr naming the bound, e.g.
 * "reply refused: an array of 1170000000 elements (limit 65536)", and the owner drops the
 * connection and reconnects (with a fresh attach). tg__rbound_why() tells which bound.
 *
 * Async contexts: tg__rbound_attach_async() also refuses a reply for which no command is
 * waiting (hiredis 0.14 asserts on one in a context that is not subscribed).
 *
 * Thread-safety: a tg__rbound belongs to its context; use both from one thread at a time.
 */
#ifndef TGKIT_CORE_RBOUND_H
#define TGKIT_CORE_RBOUND_H

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* Defaults (a field left 0 takes its default). */
#define TG__RBOUND_ELEMENTS 65536u             /* elements of one aggregate */
#define TG__RBOUND_DEPTH    6u                 /* nested aggregates (1 = a flat array) */
#define TG__RBOUND_BULK     (16u << 20)        /* bytes of one bulk string */
#define TG__RBOUND_LINE     (64u << 10)        /* bytes of one status, error or header line */
#define TG__RBOUND_REPLY    ((size_t)64 << 20) /* bytes one whole reply may hold */

struct tg__rlimits {
    uint32_t max_elements;
    uint32_t max_depth;
    size_t max_bulk;
    size_t max_line; /* hiredis scans an unfinished line from its start at every read */
    size_t max_reply;
};

enum tg__rbound_why {
    TG__RB_NONE = 0,
    TG__RB_ELEMENTS,    /* an aggregate announced too many elements */
    TG__RB_DEPTH,       /* aggregates nested too deep */
    TG__RB_BULK,        /* a bulk string too long */
    TG__RB_LINE,        /* a status, error or header line too long */
    TG__RB_REPLY,       /* the whole reply too large */
    TG__RB_UNSOLICITED, /* async: a reply no command waits for */
};

struct tg__rbound {
    struct tg__rlimits lim;           /* with the defaults filled in */
    size_t held;                      /* bytes the reply being read holds so far */
    const redisCallbackList *waiting; /* async: the commands waiting for replies */
    enum tg__rbound_why why;          /* the first bound crossed since attach */
    char msg[100];                    /* what crossed it ("an array of N elements (limit M)") */
};

/* Limits of b (lim NULL or fields 0 = defaults); b refuses nothing yet. */
void tg__rbound_init(struct tg__rbound *b, const struct tg__rlimits *lim);
/* Give c's reader the bounded reply functions. b must outlive c's reader; call again after
 * every (re)connect. Clears a previous refusal. */
void tg__rbound_attach(struct tg__rbound *b, redisContext *c);
void tg__rbound_attach_async(struct tg__rbound *b, redisAsyncContext *ac);
/* The same for a bare reader (redisReaderCreate: the fuzz target). */
void tg__rbound_attach_reader(struct tg__rbound *b, redisReader *r);

/* After bytes reached c's reader and it parsed what it could: 0, or -1 when the unparsed
 * rest crosses a bound (then c is in error as described above). */
int tg__rbound_check_pending(struct tg__rbound *b, redisContext *c);
/* The same for a bare reader: call it after redisReaderGetReply, whatever it returned (a
 * refusal inside the reply functions reaches hiredis as "Out of memory"; this names it). */
int tg__rbound_check_reader(struct tg__rbound *b, redisReader *r);

/* Blocking contexts: flush what was appended (redisAppendCommand*) and read one reply under
 * the bounds. REDIS_OK with *reply, or REDIS_ERR with c->err/c->errstr set. */
int tg__rbound_get_reply(struct tg__rbound *b, redisContext *c, redisReply **reply);
/* redisCommandArgv and redisvCommand under the bounds: the reply, or NULL (c->errstr). */
redisReply *tg__rbound_argv(struct tg__rbound *b, redisContext *c, int argc, const char **argv,
                            const size_t *lens);
redisReply *tg__rbound_cmd(struct tg__rbound *b, redisContext *c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
redisReply *tg__rbound_vcmd(struct tg__rbound *b, redisContext *c, const char *fmt, va_list ap);

enum tg__rbound_why tg__rbound_why(const struct tg__rbound *b);
/* "array of N elements (limit M)"-style text of the refusal, or fallback when none. */
const char *tg__rbound_errstr(const struct tg__rbound *b, const char *fallback);

#endif
