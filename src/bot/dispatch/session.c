/*
 * session: per-user and per-chat data (tg_hctx_user_data, tg_hctx_chat_data). See
 * tgbot/dispatch.h.
 *
 * Each scope is one fields blob (fields.h) in the storage. It is read on first use in an
 * update into the handler's arena; setters build a new blob there (the old one stays
 * valid, so strings handed out earlier live until the handler returns) and mark the scope
 * dirty only when the bytes change; tg__session_flush, run by the dispatcher after the
 * router, writes each dirty scope once (or deletes it when it holds no field any more).
 * The blob may come from another process (SQLite, Redis), so a damaged one is refused with
 * its key and offset, never overwritten.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "bot/dispatch/dispatch_int.h"
#include "bot/dispatch/fields.h"
#include "core/str.h"

void tg__session_reset(struct tg_hctx *h)
{
    h->udata = (struct tg_data){.h = h, .what = "user data"};
    h->cdata = (struct tg_data){.h = h, .what = "chat data"};
}

static tg_data *load(struct tg_hctx *h, struct tg_data *d, bool has, char scope, int64_t id)
{
    if (d->loaded)
        return d->ok ? d : NULL;
    d->loaded = true;
    if (!has)
        return NULL;
    snprintf(d->key, sizeof d->key, "%s%c%lld", h->d->session_prefix, scope, (long long)id);
    size_t cap = h->d->o.session_max_bytes + 64, len = 0;
    unsigned char *buf = tg__arena_alloc(&h->arena, cap);
    bool found = false;
    if (!buf) {
        tg_hctx_fail(h, TG_ERR_NOMEM, "%s %s: out of memory", d->what, d->key);
        return NULL;
    }
    tg_status st = tg_storage_get(h->d->storage, d->key, buf, cap, &len, &found);
    if (st != TG_OK) {
        tg_hctx_fail(h, st, "%s %s: storage get failed: %s", d->what, d->key,
                     tg_storage_errmsg()[0] ? tg_storage_errmsg() : tg_strerror(st));
        return NULL;
    }
    if (found && (len < TG__FIELDS_MAGIC_LEN || !tg__fields_is(buf, len))) {
        tg_hctx_fail(h, TG_ERR_DECODE, "%s %s: the stored value is not fields", d->what, d->key);
        return NULL;
    }
    d->stored = found;
    d->blob = buf;
    d->len = found ? len : 0;
    d->ok = true;
    return d;
}

tg_data *tg_hctx_user_data(tg_hctx *h)
{
    return load(h, &h->udata, h->ev.has_user, 'u', h->ev.user_id);
}

tg_data *tg_hctx_chat_data(tg_hctx *h)
{
    return load(h, &h->cdata, h->ev.has_chat, 'c', h->ev.chat_id);
}

static bool find(const tg_data *d, const char *name, struct tg__field *f)
{
    return d && name && tg__fields_find(d->blob, d->len, name, strlen(name), f);
}

const char *tg_data_get_str(const tg_data *d, const char *name)
{
    struct tg__field f;
    return find(d, name, &f) && f.type == 's' ? f.value : NULL;
}

int64_t tg_data_get_int(const tg_data *d, const char *name, int64_t dflt)
{
    struct tg__field f;
    int64_t v;
    if (!find(d, name, &f) || f.type != 'i' || tg__parse_i64(f.value, f.value_len, &v) != 0)
        return dflt;
    return v;
}

bool tg_data_has(const tg_data *d, const char *name)
{
    struct tg__field f;
    return find(d, name, &f);
}

void tg_data_each(const tg_data *d, tg_data_each_fn fn, void *user)
{
    if (!d || !fn)
        return;
    for (size_t off = TG__FIELDS_MAGIC_LEN; off < d->len;) {
        struct tg__field f;
        if (!tg__field_read(d->blob + off, d->len - off, &f))
            return;
        fn(user, f.name, f.value, f.type == 'i');
        off += f.size;
    }
}

/* Replace field name by (type, value), or remove it (type 0); dirty only on a change. */
static tg_status put(tg_data *d, const char *name, char type, const char *value, size_t vl)
{
    if (!d)
        return TG_ERR_INVALID;
    struct tg_hctx *h = d->h;
    if (!tg__conv_name_valid(name))
        return tg_hctx_fail(h, TG_ERR_INVALID,
                            "%s: field name \"%.64s\" is not 1..64 of [A-Za-z0-9_.:-]", d->what,
                            name ? name : "(null)");
    struct tg__field f;
    bool had = tg__fields_find(d->blob, d->len, name, strlen(name), &f);
    if (type ? had && f.type == type && f.value_len == vl && memcmp(f.value, value, vl) == 0 : !had)
        return TG_OK; /* no change: nothing to write back */
    size_t nl = strlen(name), bad = 0;
    size_t cap = tg__fields_put_cap(d->len, nl, vl);
    unsigned char *out = tg_hctx_alloc(h, cap);
    if (!out)
        return tg_hctx_fail(h, TG_ERR_NOMEM, "%s %s: out of memory", d->what, d->key);
    size_t n = tg__fields_put(out, d->blob, d->len, name, nl, type, value, vl, &bad);
    if (!n)
        return tg_hctx_fail(h, TG_ERR_DECODE, "%s %s: stored fields are malformed at byte %zu",
                            d->what, d->key, bad);
    if (n > h->d->o.session_max_bytes)
        return tg_hctx_fail(h, TG_ERR_TOO_BIG,
                            "%s %s: field \"%s\" makes it %zu bytes, at most %zu", d->what, d->key,
                            name, n, h->d->o.session_max_bytes);
    d->blob = out;
    d->len = n > TG__FIELDS_MAGIC_LEN ? n : 0;
    d->dirty = true;
    return TG_OK;
}

tg_status tg_data_set_str(tg_data *d, const char *name, const char *value)
{
    if (d && !value)
        return tg_hctx_fail(d->h, TG_ERR_INVALID, "%s: field \"%.64s\": NULL value", d->what,
                            name ? name : "(null)");
    return put(d, name, 's', value, value ? strlen(value) : 0);
}

tg_status tg_data_set_int(tg_data *d, const char *name, int64_t value)
{
    char buf[24];
    int n = snprintf(buf, sizeof buf, "%" PRId64, value);
    return put(d, name, 'i', buf, (size_t)n);
}

tg_status tg_data_unset(tg_data *d, const char *name)
{
    return put(d, name, 0, NULL, 0);
}

tg_status tg_data_clear(tg_data *d)
{
    if (!d)
        return TG_ERR_INVALID;
    if (d->len) {
        d->len = 0;
        d->dirty = true;
    }
    return TG_OK;
}

static tg_status flush_one(struct tg_hctx *h, struct tg_data *d)
{
    if (!d->dirty)
        return TG_OK;
    d->dirty = false;
    tg_status st;
    if (d->len)
        st = tg_storage_set(h->d->storage, d->key, d->blob, d->len, h->d->o.session_ttl_ms);
    else
        st = d->stored ? tg_storage_del(h->d->storage, d->key) : TG_OK;
    if (st != TG_OK)
        return tg_hctx_fail(h, st, "%s %s: storage %s failed: %s", d->what, d->key,
                            d->len ? "set" : "delete",
                            tg_storage_errmsg()[0] ? tg_storage_errmsg() : tg_strerror(st));
    d->stored = d->len != 0;
    return TG_OK;
}

tg_status tg__session_flush(struct tg_hctx *h)
{
    /* Both are tried; when both fail, h->err names the user data's failure. */
    tg_status c = flush_one(h, &h->cdata);
    tg_status u = flush_one(h, &h->udata);
    return u != TG_OK ? u : c;
}
