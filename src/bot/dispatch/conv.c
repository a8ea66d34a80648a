/*
 * conv: per (chat, user) conversations over a tg_storage. See tgbot/dispatch.h.
 *
 * Stored value: "tgc1\n<deadline>\n<state>\n<data bytes>", where deadline is wall-clock
 * milliseconds (0 = none) so several processes sharing a Redis store agree on it. The
 * storage TTL is the timeout plus a grace minute: long enough for the next update to notice
 * the timeout and run the timeout handler, short enough that abandoned conversations vanish.
 *
 * Loading is lazy: an update whose handlers never look at the conversation costs no storage
 * round trip (unless a timeout handler or a cancel command is configured).
 */
#include <stdio.h>
#include <string.h>

#include "bot/dispatch/dispatch_int.h"
#include "core/clock.h"
#include "core/str.h"

#define CONV_MAGIC    "tgc1\n"
#define CONV_GRACE_MS 60000

static bool parse_value(struct tg__conv *c, unsigned char *v, size_t n)
{
    size_t m = sizeof CONV_MAGIC - 1;
    if (n < m || memcmp(v, CONV_MAGIC, m) != 0)
        return false;
    unsigned char *p = v + m, *end = v + n;
    unsigned char *nl = memchr(p, '\n', (size_t)(end - p));
    uint64_t deadline;
    if (!nl || tg__parse_u64((const char *)p, (size_t)(nl - p), &deadline) != 0)
        return false;
    p = nl + 1;
    nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl || nl == p || (size_t)(nl - p) > TG__CONV_STATE_MAX)
        return false;
    memcpy(c->state, p, (size_t)(nl - p));
    c->state[nl - p] = '\0';
    c->data = nl + 1;
    c->len = (size_t)(end - (nl + 1));
    c->timed_out = deadline && tg__wall_ms() >= deadline;
    c->has = !c->timed_out;
    return true;
}

tg_status tg__conv_load(struct tg_hctx *h)
{
    struct tg__conv *c = &h->conv;
    if (c->loaded)
        return TG_OK;
    c->loaded = true;
    if (!h->ev.has_chat || !h->ev.has_user)
        return TG_OK;
    snprintf(c->key, sizeof c->key, "%s%lld:%lld", h->d->conv_prefix, (long long)h->ev.chat_id,
             (long long)h->ev.user_id);
    size_t cap = h->d->o.conv_max_bytes + 128, len;
    unsigned char *buf = tg__arena_alloc(&h->arena, cap);
    bool found;
    if (!buf)
        return tg_hctx_fail(h, TG_ERR_NOMEM, "conversation: out of memory");
    tg_status st = tg_storage_get(h->d->storage, c->key, buf, cap, &len, &found);
    if (st != TG_OK)
        return tg_hctx_fail(h, st, "conversation %s: storage get failed: %s", c->key,
                            tg_storage_errmsg()[0] ? tg_storage_errmsg() : tg_strerror(st));
    if (found && !parse_value(c, buf, len))
        return tg_hctx_fail(h, TG_ERR_DECODE, "conversation %s: stored value is malformed", c->key);
    return TG_OK;
}

bool tg__conv_name_valid(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > TG__CONV_STATE_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              strchr("_.:-", ch)))
            return false;
    }
    return true;
}

tg_status tg_conv_set(tg_hctx *h, const char *state, const void *data, size_t len)
{
    if (!tg__conv_name_valid(state))
        return tg_hctx_fail(h, TG_ERR_INVALID,
                            "conversation: state \"%.64s\" is not 1..64 "
                            "of [A-Za-z0-9_.:-]",
                            state ? state : "(null)");
    if (len > h->d->o.conv_max_bytes)
        return tg_hctx_fail(h, TG_ERR_TOO_BIG, "conversation: %zu bytes of data, at most %zu", len,
                            h->d->o.conv_max_bytes);
    tg_status st = tg__conv_load(h);
    if (st != TG_OK)
        return st;
    struct tg__conv *c = &h->conv;
    if (!c->key[0])
        return tg_hctx_fail(h, TG_ERR_INVALID, "conversation: a %s update has no chat and user",
                            h->ev.kind_name);
    uint64_t tmo = h->d->o.conv_timeout_ms;
    char head[128];
    int hn = snprintf(head, sizeof head, CONV_MAGIC "%llu\n%s\n",
                      (unsigned long long)(tmo ? tg__wall_ms() + tmo : 0), state);
    unsigned char *v = tg__arena_alloc(&h->arena, (size_t)hn + len + 1);
    if (!v)
        return tg_hctx_fail(h, TG_ERR_NOMEM, "conversation: out of memory");
    memcpy(v, head, (size_t)hn);
    if (len)
        memcpy(v + hn, data, len);
    st = tg_storage_set(h->d->storage, c->key, v, (size_t)hn + len, tmo ? tmo + CONV_GRACE_MS : 0);
    if (st != TG_OK)
        return tg_hctx_fail(h, st, "conversation %s: storage set failed: %s", c->key,
                            tg_storage_errmsg()[0] ? tg_storage_errmsg() : tg_strerror(st));
    parse_value(c, v, (size_t)hn + len);
    return TG_OK;
}

tg_status tg_conv_end(tg_hctx *h)
{
    tg_status st = tg__conv_load(h);
    if (st != TG_OK || !h->conv.key[0])
        return st;
    st = tg_storage_del(h->d->storage, h->conv.key);
    if (st != TG_OK)
        return tg_hctx_fail(h, st, "conversation %s: storage delete failed", h->conv.key);
    h->conv.has = false;
    h->conv.timed_out = false;
    h->conv.state[0] = '\0';
    h->conv.data = NULL;
    h->conv.len = 0;
    return TG_OK;
}

const char *tg_conv_state(const tg_hctx *hc)
{
    tg_hctx *h = (tg_hctx *)hc; /* loading is a cache fill, not a visible change */
    if (tg__conv_load(h) != TG_OK || !(h->conv.has || h->conv.in_timeout))
        return NULL;
    return h->conv.state;
}

const void *tg_conv_data(const tg_hctx *hc, size_t *len)
{
    tg_hctx *h = (tg_hctx *)hc;
    bool has = tg__conv_load(h) == TG_OK && (h->conv.has || h->conv.in_timeout);
    if (len)
        *len = has ? h->conv.len : 0;
    return has ? h->conv.data : NULL;
}

static bool is_cancel(const struct tg_hctx *h)
{
    const char *cc = h->d->cancel_command;
    const tg_event *ev = &h->ev;
    return cc && ev->command && ev->command_for_me && strlen(cc) == ev->command_len &&
           memcmp(cc, ev->command, ev->command_len) == 0;
}

bool tg__conv_pre_route(struct tg_hctx *h)
{
    struct tg_dispatcher *d = h->d;
    bool cancel = is_cancel(h);
    if (!cancel && !d->o.on_timeout)
        return false;
    if (tg__conv_load(h) != TG_OK)
        return false;
    if (h->conv.timed_out) {
        h->conv.in_timeout = true; /* the old state stays readable for the handler */
        if (d->o.on_timeout)
            d->o.on_timeout(h, d->o.conv_user);
        h->conv.in_timeout = false;
        tg_conv_end(h);
        return false;
    }
    if (!cancel || !h->conv.has)
        return false;
    tg_conv_end(h);
    if (d->o.on_cancel)
        d->o.on_cancel(h, d->o.conv_user);
    return true;
}
