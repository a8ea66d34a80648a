/*
 * cbdata: callback data of any size (tg_hctx_callback_put). See tgbot/dispatch.h.
 *
 * Stored data lives in the dispatcher's storage under "cb:<16 base64url characters>" with
 * the storage's TTL (callback_ttl_ms), so every process sharing the storage can swap a
 * pressed token back. Each process also bounds its own share: an index (hash map plus a
 * doubly linked list, most recently put or pressed first) of at most callback_max_entries
 * tokens; putting one more deletes the least recently used from the storage. The index
 * holds tokens only (a few dozen bytes each), never the data. Tokens are 96 random bits,
 * so one cannot be guessed to read another chat's data.
 */
#include <openssl/rand.h>
#include <string.h>

#include "bot/dispatch/dispatch_int.h"
#include "core/alloc.h"
#include "core/str.h"

#define TOKEN_LEN 17 /* "~" + 16 base64url characters (12 random bytes) */
#define KEY_PFX   "cb:"

struct tg__cbnode {
    struct tg__cbnode *hnext, *prev, *next;
    char token[TOKEN_LEN + 1];
};

static uint64_t hash_token(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

int tg__cbindex_init(struct tg__cbindex *x)
{
    memset(x, 0, sizeof *x);
    pthread_mutex_init(&x->mu, NULL);
    x->nmap = 1024;
    x->map = tg__calloc(x->nmap, sizeof *x->map);
    if (!x->map) {
        pthread_mutex_destroy(&x->mu);
        return -1;
    }
    return 0;
}

void tg__cbindex_cleanup(struct tg__cbindex *x)
{
    if (!x->map)
        return; /* never initialized */
    for (struct tg__cbnode *n = x->head, *next; n; n = next) {
        next = n->next;
        tg__free(n);
    }
    tg__free(x->map);
    x->map = NULL;
    pthread_mutex_destroy(&x->mu);
}

static struct tg__cbnode **slot(struct tg__cbindex *x, const char *token)
{
    struct tg__cbnode **pp = &x->map[hash_token(token) & (x->nmap - 1)];
    while (*pp && strcmp((*pp)->token, token) != 0)
        pp = &(*pp)->hnext;
    return pp;
}

static void unlink_lru(struct tg__cbindex *x, struct tg__cbnode *n)
{
    if (n->prev)
        n->prev->next = n->next;
    else
        x->head = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else
        x->tail = n->prev;
    n->prev = n->next = NULL;
}

static void push_front(struct tg__cbindex *x, struct tg__cbnode *n)
{
    n->next = x->head;
    n->prev = NULL;
    if (x->head)
        x->head->prev = n;
    x->head = n;
    if (!x->tail)
        x->tail = n;
}

static void grow(struct tg__cbindex *x)
{
    size_t n = x->nmap * 2;
    struct tg__cbnode **nm = tg__calloc(n, sizeof *nm);
    if (!nm)
        return;
    for (struct tg__cbnode *c = x->head; c; c = c->next) {
        struct tg__cbnode **b = &nm[hash_token(c->token) & (n - 1)];
        c->hnext = *b;
        *b = c;
    }
    tg__free(x->map);
    x->map = nm;
    x->nmap = n;
}

/* Index token; returns the token pushed out (the caller deletes its data), or "". */
static void index_put(struct tg__cbindex *x, const char *token, size_t max, char *evicted)
{
    evicted[0] = '\0';
    struct tg__cbnode *n = tg__calloc(1, sizeof *n);
    pthread_mutex_lock(&x->mu);
    if (n) {
        memcpy(n->token, token, TOKEN_LEN + 1);
        if (x->count >= x->nmap)
            grow(x);
        struct tg__cbnode **b = &x->map[hash_token(token) & (x->nmap - 1)];
        n->hnext = *b;
        *b = n;
        push_front(x, n);
        x->count++;
    }
    if (x->count > max && x->tail) {
        struct tg__cbnode *old = x->tail, **pp = slot(x, old->token);
        *pp = old->hnext;
        unlink_lru(x, old);
        x->count--;
        memcpy(evicted, old->token, TOKEN_LEN + 1);
        tg__free(old);
    }
    pthread_mutex_unlock(&x->mu);
}

static void index_touch(struct tg__cbindex *x, const char *token)
{
    pthread_mutex_lock(&x->mu);
    struct tg__cbnode *n = *slot(x, token);
    if (n) {
        unlink_lru(x, n);
        push_front(x, n);
    }
    pthread_mutex_unlock(&x->mu);
}

/* Plain text that fits a button as it is: 1..64 bytes, no control bytes, not a token. */
static bool fits(const unsigned char *d, size_t len)
{
    if (len == 0 || len > 64 || d[0] == '~')
        return false;
    for (size_t i = 0; i < len; i++)
        if (d[i] < 0x20 || d[i] == 0x7f)
            return false;
    return true;
}

const char *tg_hctx_callback_put(tg_hctx *h, const void *data, size_t len)
{
    tg_dispatcher *d = h->d;
    if (!data && len) {
        tg_hctx_fail(h, TG_ERR_INVALID, "callback data: NULL with %zu bytes", len);
        return NULL;
    }
    if (data && fits(data, len)) {
        char *s = tg_hctx_alloc(h, len + 1);
        if (s) {
            memcpy(s, data, len);
            s[len] = '\0';
        }
        return s;
    }
    if (len > d->o.callback_max_bytes) {
        tg_hctx_fail(h, TG_ERR_TOO_BIG,
                     "callback data: %zu bytes, at most %zu (callback_max_bytes)", len,
                     d->o.callback_max_bytes);
        return NULL;
    }
    unsigned char r[12];
    char *token = tg_hctx_alloc(h, TOKEN_LEN + 1), key[sizeof KEY_PFX + TOKEN_LEN];
    if (!token || RAND_bytes(r, sizeof r) != 1) {
        tg_hctx_fail(h, TG_ERR_NOMEM, "callback data: no memory or no random bytes");
        return NULL;
    }
    token[0] = '~';
    tg__b64_encode(token + 1, TOKEN_LEN, r, sizeof r, TG__B64_URL | TG__B64_NOPAD); /* 16 */
    snprintf(key, sizeof key, KEY_PFX "%s", token + 1);
    tg_status st = tg_storage_set(d->storage, key, data ? data : "", len, d->o.callback_ttl_ms);
    if (st != TG_OK) {
        tg_hctx_fail(h, st, "callback data %s: storage set failed: %s", key,
                     tg_storage_errmsg()[0] ? tg_storage_errmsg() : tg_strerror(st));
        return NULL;
    }
    char evicted[TOKEN_LEN + 1];
    index_put(&d->cb, token, d->o.callback_max_entries, evicted);
    if (evicted[0]) {
        snprintf(key, sizeof key, KEY_PFX "%s", evicted + 1);
        tg_storage_del(d->storage, key); /* a failed delete still expires by its TTL */
    }
    return token;
}

static bool is_token(const char *s)
{
    if (!s || s[0] != '~' || strlen(s) != TOKEN_LEN)
        return false;
    for (int i = 1; i < TOKEN_LEN; i++)
        if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", s[i]))
            return false;
    return true;
}

void tg__cbdata_resolve(struct tg_hctx *h)
{
    const char *data = h->ev.data;
    h->cb_data = data;
    h->cb_len = data ? strlen(data) : 0;
    if (h->ev.kind != TG_UPDATE_CALLBACK_QUERY || !is_token(data))
        return;
    tg_dispatcher *d = h->d;
    char key[sizeof KEY_PFX + TOKEN_LEN];
    snprintf(key, sizeof key, KEY_PFX "%s", data + 1);
    size_t cap = d->o.callback_max_bytes + 1, len = 0;
    unsigned char *buf = tg__arena_alloc(&h->arena, cap);
    bool found = false;
    tg_status st = buf ? tg_storage_get(d->storage, key, buf, cap, &len, &found) : TG_ERR_NOMEM;
    if (st != TG_OK || !found) {
        h->cb_lost = true;
        if (st != TG_OK)
            tg__dispatcher_log(d, TG__LOG_WARN, "callback data %s: storage get failed: %s", key,
                               tg_storage_errmsg()[0] ? tg_storage_errmsg() : tg_strerror(st));
        return;
    }
    buf[len] = '\0';
    index_touch(&d->cb, data);
    h->ev.data = (const char *)buf; /* routing sees the data as it was put */
    h->cb_data = buf;
    h->cb_len = len;
}

const void *tg_hctx_callback_data(const tg_hctx *h, size_t *len)
{
    if (len)
        *len = h->cb_data ? h->cb_len : 0;
    return h->cb_data;
}

bool tg_hctx_callback_lost(const tg_hctx *h)
{
    return h->cb_lost;
}
