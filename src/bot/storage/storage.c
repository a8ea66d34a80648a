/* storage: the generic side of tg_storage (argument checks around the ops). */
#include "bot/storage/storage.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char storage_err[256];

void tg__storage_seterr(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(storage_err, sizeof storage_err, fmt, ap);
    va_end(ap);
}

const char *tg_storage_errmsg(void)
{
    return storage_err;
}

tg_status tg_storage_get(tg_storage *s, const char *key, void *buf, size_t cap, size_t *len,
                         bool *found)
{
    if (!s || !key || !len || !found || (!buf && cap))
        return TG_ERR_INVALID;
    storage_err[0] = '\0'; /* a failure below says why; success leaves "" */
    return s->ops->get(s, key, buf, cap, len, found);
}

tg_status tg_storage_set(tg_storage *s, const char *key, const void *val, size_t len,
                         uint64_t ttl_ms)
{
    if (!s || !key || (!val && len))
        return TG_ERR_INVALID;
    storage_err[0] = '\0';
    return s->ops->set(s, key, val ? val : "", len, ttl_ms);
}

tg_status tg_storage_del(tg_storage *s, const char *key)
{
    if (!s || !key)
        return TG_ERR_INVALID;
    storage_err[0] = '\0';
    return s->ops->del(s, key);
}

tg_status tg_storage_scan(tg_storage *s, const char *prefix, tg_storage_scan_fn fn, void *user)
{
    if (!s || !prefix || !fn)
        return TG_ERR_INVALID;
    if (!s->ops->scan) {
        tg__storage_seterr("storage: this store cannot list keys (its ops have no scan)");
        return TG_ERR_INVALID;
    }
    storage_err[0] = '\0';
    return s->ops->scan(s, prefix, fn, user);
}

void tg_storage_free(tg_storage *s)
{
    if (s && s->ops && s->ops->free)
        s->ops->free(s);
}
