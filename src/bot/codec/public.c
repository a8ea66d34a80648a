/*
 * public: the codec functions exported to library users that need no ctx (declared in
 * tgbot/types.h and tgbot/codec.h). Decoding and encoding live in src/bot/client/codec_api.c.
 */
#include "bot/codec/codec.h"
#include "core/buf.h"
#include "tgbot/codec.h"

struct unknown_ctx {
    tg_unknown_key_fn key_cb;  /* tg_unknown_keys: keys only */
    tg_unknown_path_fn any_cb; /* tg_unknown_visit: keys and variants */
    void *ud;
    tg__buf path;
};

/* path: built by the walk on its way down (one step per level), never searched from the
 * root for each key: listing n keys of one object is O(n), not O(n^2). */
static void on_unknown(void *ud, const tg__jdoc *d, uint32_t tok, bool variant, const char *path)
{
    struct unknown_ctx *c = ud;
    (void)d;
    (void)tok;
    if ((variant && !c->any_cb) || !path)
        return;
    if (c->any_cb)
        c->any_cb(c->ud, path, variant);
    else
        c->key_cb(c->ud, path);
}

static size_t unknown_walk(const char *type, tg_raw raw, struct unknown_ctx *c)
{
    const tg__type *t = type ? tg__codec_type_by_name(type) : NULL;
    if (!t || !raw.json || raw.len == 0)
        return 0;
    tg__jdoc d;
    tg__jerr err;
    size_t n = 0;
    tg__jdoc_init(&d, NULL);
    tg__buf_init(&c->path, 0);
    if (tg__json_parse(&d, raw.json, raw.len, &err) == 0)
        n = tg__codec_unknown_keys(t, &d, 0, c->key_cb || c->any_cb ? on_unknown : NULL, c,
                                   &c->path);
    tg__buf_cleanup(&c->path);
    tg__jdoc_cleanup(&d);
    return n;
}

size_t tg_unknown_keys(const char *type, tg_raw raw, tg_unknown_key_fn cb, void *ud)
{
    struct unknown_ctx c = {.key_cb = cb, .ud = ud};
    return unknown_walk(type, raw, &c);
}

size_t tg_unknown_visit(const char *type, tg_raw raw, tg_unknown_path_fn cb, void *ud)
{
    struct unknown_ctx c = {.any_cb = cb, .ud = ud};
    return unknown_walk(type, raw, &c);
}

const char *tg_type_name(size_t i)
{
    return i < tg__type_count ? tg__types[i]->name : NULL;
}
