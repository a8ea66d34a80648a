/*
 * rconn: hiredis with cluster redirections, reconnects and cached scripts. See rconn.h.
 *
 * Nodes are learnt, never configured: node 0 is the configured address, and each MOVED
 * answer adds its node (if new) and points the slot at it. Slots not learnt yet go to node 0,
 * which answers MOVED for them. The slot table exists only once a MOVED has been seen.
 */
#include "bot/fleet/rconn.h"

#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include "core/alloc.h"
#include "core/rbound.h"

#define MAX_REDIRECTS 5

struct rnode {
    char *host;
    uint16_t port;
    redisContext *c;
    struct tg__rbound rb; /* what one reply may hold (core/rbound.h): attached at connect */
};

struct tg__rconn {
    const struct tg__rcfg *cfg;
    struct rnode nodes[TG__RCONN_MAX_NODES];
    unsigned nnodes;
    uint8_t *slots; /* slot -> node index + 1 (0 = not learnt); NULL until the first MOVED */
    char err[256];
};

void tg__rscript_init(struct tg__rscript *s, const char *src)
{
    unsigned char md[SHA_DIGEST_LENGTH];
    SHA1((const unsigned char *)src, strlen(src), md);
    s->src = src;
    for (int i = 0; i < SHA_DIGEST_LENGTH; i++)
        snprintf(s->sha + 2 * i, 3, "%02x", md[i]);
}

bool tg__reply_is_err(const redisReply *r, const char *prefix)
{
    size_t n = strlen(prefix);
    return r && r->type == REDIS_REPLY_ERROR && r->len >= n && memcmp(r->str, prefix, n) == 0;
}

tg__rconn *tg__rconn_new(const struct tg__rcfg *cfg)
{
    tg__rconn *c = tg__calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->cfg = cfg;
    c->nodes[0].host = tg__strdup(cfg->host);
    c->nodes[0].port = cfg->port;
    c->nnodes = 1;
    if (!c->nodes[0].host) {
        tg__free(c);
        return NULL;
    }
    return c;
}

void tg__rconn_free(tg__rconn *c)
{
    if (!c)
        return;
    for (unsigned i = 0; i < c->nnodes; i++) {
        if (c->nodes[i].c)
            redisFree(c->nodes[i].c);
        tg__free(c->nodes[i].host);
    }
    tg__free(c->slots);
    tg__free(c);
}

const char *tg__rconn_err(const tg__rconn *c)
{
    return c->err;
}

bool tg__rconn_cluster(const tg__rconn *c)
{
    return c->slots != NULL;
}

static void drop(struct rnode *n)
{
    if (n->c)
        redisFree(n->c);
    n->c = NULL;
}

/* A setup command (AUTH, SELECT) that must answer OK. */
static bool setup_cmd(tg__rconn *c, struct rnode *n, const char *what, int argc, const char **argv)
{
    redisReply *r = tg__rbound_argv(&n->rb, n->c, argc, argv, NULL);
    bool ok = r && r->type != REDIS_REPLY_ERROR;
    if (!ok)
        snprintf(c->err, sizeof c->err, "redis %s:%u: %s: %s", n->host, n->port, what,
                 r ? r->str : n->c->errstr);
    if (r)
        freeReplyObject(r);
    return ok;
}

static redisContext *node_ctx(tg__rconn *c, struct rnode *n)
{
    if (n->c)
        return n->c;
    uint32_t ms = c->cfg->timeout_ms;
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (suseconds_t)(ms % 1000) * 1000};
    n->c = redisConnectWithTimeout(n->host, n->port, tv);
    if (!n->c || n->c->err) {
        snprintf(c->err, sizeof c->err, "redis %s:%u: connect: %s", n->host, n->port,
                 n->c ? n->c->errstr : "out of memory");
        drop(n);
        return NULL;
    }
    tg__rbound_init(&n->rb, NULL);
    tg__rbound_attach(&n->rb, n->c);
    redisSetTimeout(n->c, tv);
    redisEnableKeepAlive(n->c);
    char db[16];
    snprintf(db, sizeof db, "%d", c->cfg->db);
    const char *auth[] = {"AUTH", c->cfg->password};
    const char *sel[] = {"SELECT", db};
    if ((c->cfg->password && !setup_cmd(c, n, "AUTH", 2, auth)) ||
        (c->cfg->db && !setup_cmd(c, n, "SELECT", 2, sel))) {
        drop(n);
        return NULL;
    }
    return n->c;
}

int tg__rconn_ping(tg__rconn *c)
{
    const char *argv[] = {"PING"};
    redisReply *r = tg__rconn_cmd(c, NULL, 1, argv, NULL);
    if (!r)
        return -1;
    bool ok = r->type == REDIS_REPLY_STATUS;
    if (!ok)
        tg__rconn_fail(c, r, "PING");
    else
        freeReplyObject(r);
    return ok ? 0 : -1;
}

redisReply *tg__rconn_fail(tg__rconn *c, redisReply *r, const char *what)
{
    if (r && r->type == REDIS_REPLY_ERROR)
        snprintf(c->err, sizeof c->err, "redis: %s: %.*s", what, (int)(r->len > 160 ? 160 : r->len),
                 r->str);
    else
        snprintf(c->err, sizeof c->err, "redis: %s: unexpected reply type %d", what,
                 r ? r->type : -1);
    if (r)
        freeReplyObject(r);
    return NULL;
}

static int find_node(tg__rconn *c, const char *host, size_t hlen, uint16_t port)
{
    for (unsigned i = 0; i < c->nnodes; i++)
        if (c->nodes[i].port == port && strlen(c->nodes[i].host) == hlen &&
            memcmp(c->nodes[i].host, host, hlen) == 0)
            return (int)i;
    if (c->nnodes == TG__RCONN_MAX_NODES)
        return -1;
    char *h = tg__strndup(host, hlen);
    if (!h)
        return -1;
    c->nodes[c->nnodes] = (struct rnode){.host = h, .port = port};
    return (int)c->nnodes++;
}

/* "MOVED 3999 127.0.0.1:6381" or "ASK ...": the node index, or -1 when malformed. */
static int redirect_node(tg__rconn *c, const redisReply *r, unsigned *slot)
{
    char host[256];
    uint16_t port;
    if (tg__redis_redirect(r->str, r->len, slot, host, sizeof host, &port) != 0)
        return -1;
    return find_node(c, host, strlen(host), port);
}

static unsigned pick(const tg__rconn *c, const char *key)
{
    if (!c->slots || !key)
        return 0;
    uint8_t n = c->slots[tg__redis_slot(key, strlen(key))];
    return n ? n - 1u : 0u;
}

/* Learn from a MOVED/ASK reply. Returns the node to retry on, or -1. */
static int follow(tg__rconn *c, const redisReply *r, bool moved)
{
    unsigned slot;
    int n = redirect_node(c, r, &slot);
    if (n < 0) {
        snprintf(c->err, sizeof c->err, "redis: bad redirection \"%.80s\"", r->str);
        return -1;
    }
    if (moved) {
        if (!c->slots && !(c->slots = tg__calloc(TG__REDIS_SLOTS, 1))) {
            snprintf(c->err, sizeof c->err, "redis: out of memory");
            return -1;
        }
        c->slots[slot] = (uint8_t)(n + 1);
    }
    return n;
}

static redisReply *node_cmd(tg__rconn *c, unsigned ni, bool asking, int argc, const char **argv,
                            const size_t *lens)
{
    struct rnode *n = &c->nodes[ni];
    redisContext *ctx = node_ctx(c, n);
    if (!ctx)
        return NULL;
    if (asking) {
        redisReply *a = tg__rbound_cmd(&n->rb, ctx, "ASKING");
        if (a)
            freeReplyObject(a);
    }
    redisReply *r = tg__rbound_argv(&n->rb, ctx, argc, argv, lens);
    if (!r) {
        snprintf(c->err, sizeof c->err, "redis %s:%u: %s: %s", n->host, n->port, argv[0],
                 ctx->errstr[0] ? ctx->errstr : "connection lost");
        drop(n);
        if (c->slots) /* the cluster may have failed over: relearn from node 0 */
            memset(c->slots, 0, TG__REDIS_SLOTS);
    }
    return r;
}

redisReply *tg__rconn_cmd(tg__rconn *c, const char *key, int argc, const char **argv,
                          const size_t *lens)
{
    unsigned ni = pick(c, key);
    bool asking = false;
    for (int hop = 0; hop <= MAX_REDIRECTS; hop++) {
        redisReply *r = node_cmd(c, ni, asking, argc, argv, lens);
        if (!r)
            return NULL;
        bool moved = tg__reply_is_err(r, "MOVED ");
        if (!moved && !tg__reply_is_err(r, "ASK "))
            return r;
        int next = follow(c, r, moved);
        freeReplyObject(r);
        if (next < 0)
            return NULL;
        ni = (unsigned)next;
        asking = !moved;
    }
    snprintf(c->err, sizeof c->err, "redis: %s: too many cluster redirections", argv[0]);
    return NULL;
}

redisReply *tg__rconn_eval(tg__rconn *c, const struct tg__rscript *s, int nkeys, const char **keys,
                           int nargs, const char **args, const size_t *lens)
{
    enum { MAX_ARGS = 16 };
    const char *argv[3 + MAX_ARGS];
    size_t alen[3 + MAX_ARGS];
    char nk[8];
    if (nkeys + nargs > MAX_ARGS) {
        snprintf(c->err, sizeof c->err, "redis: script with too many arguments");
        return NULL;
    }
    snprintf(nk, sizeof nk, "%d", nkeys);
    argv[0] = "EVALSHA";
    argv[1] = s->sha;
    argv[2] = nk;
    for (int i = 0; i < nkeys; i++)
        argv[3 + i] = keys[i];
    for (int i = 0; i < nargs; i++)
        argv[3 + nkeys + i] = args[i];
    int argc = 3 + nkeys + nargs;
    for (int i = 0; i < argc; i++) {
        int ai = i - 3 - nkeys;
        alen[i] = ai >= 0 && lens ? lens[ai] : strlen(argv[i]);
    }
    const char *key = nkeys ? keys[0] : NULL;
    redisReply *r = tg__rconn_cmd(c, key, argc, argv, alen);
    if (!tg__reply_is_err(r, "NOSCRIPT"))
        return r;
    freeReplyObject(r);
    argv[0] = "EVAL";
    argv[1] = s->src;
    alen[0] = 4;
    alen[1] = strlen(s->src);
    return tg__rconn_cmd(c, key, argc, argv, alen);
}
