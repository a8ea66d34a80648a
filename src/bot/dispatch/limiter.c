/*
 * limiter: an inbound rate limit as middleware (tg_router_use_limiter, tgbot/dispatch.h).
 *
 * One fixed window per key (user or chat id) in a locked hash table: the first update after
 * a window ended starts the next one. Memory is bounded by max_keys: when the table is full
 * it first drops keys whose window has ended; a key that still finds no room passes
 * unlimited (a limiter must never stop a bot from answering because it is busy counting).
 * The reply to a flooding chat is sent once per window, outside the lock.
 */
#include <pthread.h>
#include <string.h>

#include "bot/dispatch/dispatch_int.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "core/sized.h"

struct lkey {
    struct lkey *next;
    int64_t id;
    uint64_t start_ms;
    uint32_t count;
    bool replied;
};

struct tg__limiter {
    tg_limiter_options o;
    char *reply;
    pthread_mutex_t mu;
    struct lkey **map;
    size_t nmap, count;
};

static uint64_t now_of(const struct tg__limiter *l)
{
    return l->o.clock_ms ? l->o.clock_ms(l->o.clock_user) : tg__now_ms();
}

static size_t bucket(const struct tg__limiter *l, int64_t id)
{
    uint64_t h = (uint64_t)id * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 32) & (l->nmap - 1);
}

/* Drop the keys whose window ended (called with the lock held). */
static void sweep(struct tg__limiter *l, uint64_t now)
{
    for (size_t i = 0; i < l->nmap; i++)
        for (struct lkey **pp = &l->map[i]; *pp;) {
            struct lkey *k = *pp;
            if (now - k->start_ms >= l->o.window_ms) {
                *pp = k->next;
                tg__free(k);
                l->count--;
            } else {
                pp = &k->next;
            }
        }
}

/* 0: let through; 1: stop; 2: stop and send the reply. */
static int count_one(struct tg__limiter *l, int64_t id)
{
    uint64_t now = now_of(l);
    int verdict = 0;
    pthread_mutex_lock(&l->mu);
    struct lkey *k = l->map[bucket(l, id)];
    while (k && k->id != id)
        k = k->next;
    if (!k) {
        if (l->count >= l->o.max_keys)
            sweep(l, now);
        if (l->count < l->o.max_keys && (k = tg__calloc(1, sizeof *k)) != NULL) {
            k->id = id;
            k->start_ms = now;
            k->next = l->map[bucket(l, id)];
            l->map[bucket(l, id)] = k;
            l->count++;
        }
    }
    if (k) {
        if (now - k->start_ms >= l->o.window_ms) {
            k->start_ms = now;
            k->count = 0;
            k->replied = false;
        }
        if (++k->count > l->o.limit) {
            verdict = 1;
            if (l->reply && !k->replied) {
                k->replied = true;
                verdict = 2;
            }
        }
    }
    pthread_mutex_unlock(&l->mu);
    return verdict;
}

static tg_next before(tg_hctx *h, void *user)
{
    struct tg__limiter *l = user;
    const tg_event *ev = tg_hctx_event(h);
    bool has = l->o.key == TG_LIMIT_CHAT ? ev->has_chat : ev->has_user;
    if (!has)
        return TG_NEXT;
    int v = count_one(l, l->o.key == TG_LIMIT_CHAT ? ev->chat_id : ev->user_id);
    if (v == 2 && ev->has_chat && tg_hctx_ctx(h))
        tg_send(h, l->reply); /* best effort: a failed reply is the handler's error text */
    return v ? TG_STOP : TG_NEXT;
}

static void limiter_free(struct tg__limiter *l)
{
    for (size_t i = 0; l->map && i < l->nmap; i++)
        for (struct lkey *k = l->map[i], *next; k; k = next) {
            next = k->next;
            tg__free(k);
        }
    tg__free(l->map);
    tg__free(l->reply);
    pthread_mutex_destroy(&l->mu);
    tg__free(l);
}

void tg__router_limiters_free(tg_router *r)
{
    for (size_t i = 0; i < r->nlimiters; i++)
        limiter_free(r->limiters[i]);
    tg__free(r->limiters);
    r->limiters = NULL;
    r->nlimiters = 0;
}

tg_status tg_router_use_limiter_sized(tg_router *r, const tg_limiter_options *opts,
                                      size_t opts_size)
{
    tg_limiter_options o;
    if (!r)
        return TG_ERR_INVALID;
    if (!tg__sized_in(&o, sizeof o, opts, opts_size))
        return tg__router_fail(r, TG_ERR_INVALID, "limiter: options: " TG__SIZED_ERRMSG);
    if (o.key != TG_LIMIT_USER && o.key != TG_LIMIT_CHAT)
        return tg__router_fail(r, TG_ERR_INVALID, "limiter: key %d is not a tg_limit_key",
                               (int)o.key);
    struct tg__limiter *l = tg__calloc(1, sizeof *l);
    struct tg__limiter **nl = l ? tg__realloc(r->limiters, (r->nlimiters + 1) * sizeof *nl) : NULL;
    if (!nl) {
        tg__free(l);
        return tg__router_fail(r, TG_ERR_NOMEM, "limiter: out of memory");
    }
    r->limiters = nl;
    pthread_mutex_init(&l->mu, NULL);
    l->o = o;
    l->o.limit = o.limit ? o.limit : 5;
    l->o.window_ms = o.window_ms ? o.window_ms : 10000;
    l->o.max_keys = o.max_keys ? o.max_keys : 100000;
    for (l->nmap = 64; l->nmap < l->o.max_keys / 4 && l->nmap < 65536;)
        l->nmap <<= 1; /* chains of about four keys when full */
    l->map = tg__calloc(l->nmap, sizeof *l->map);
    l->reply = o.reply ? tg__strdup(o.reply) : NULL;
    if (!l->map || (o.reply && !l->reply)) {
        limiter_free(l);
        return tg__router_fail(r, TG_ERR_NOMEM, "limiter: out of memory");
    }
    r->limiters[r->nlimiters++] = l;
    return tg_router_use(r, before, NULL, l);
}
