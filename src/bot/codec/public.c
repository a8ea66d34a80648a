/*
 * public: the codec functions exported to library users (declared in tgbot/types.h).
 */
#include "bot/codec/codec.h"
#include "core/buf.h"

struct unknown_ctx {
    tg_unknown_key_fn cb;
    void *ud;
    tg__buf path;
};

static void on_unknown(void *ud, const tg__jdoc *d, uint32_t tok, bool variant)
{
    struct unknown_ctx *c = ud;
    if (variant)
        return; /* this function reports keys */
    tg__buf_reset(&c->path);
    if (tg__json_path(d, tok, &c->path) == 0)
        c->cb(c->ud, tg__buf_cstr(&c->path));
}

size_t tg_unknown_keys(const char *type, tg_raw raw, tg_unknown_key_fn cb, void *ud)
{
    const tg__type *t = type ? tg__codec_type_by_name(type) : NULL;
    if (!t || !raw.json || raw.len == 0)
        return 0;
    tg__jdoc d;
    tg__jerr err;
    struct unknown_ctx c = {cb, ud, {0}};
    size_t n = 0;
    tg__jdoc_init(&d, NULL);
    tg__buf_init(&c.path, 0);
    if (tg__json_parse(&d, raw.json, raw.len, &err) == 0)
        n = tg__codec_unknown_keys(t, &d, 0, cb ? on_unknown : NULL, &c);
    tg__buf_cleanup(&c.path);
    tg__jdoc_cleanup(&d);
    return n;
}
