/*
 * codec_int: helpers shared by the codec's decode, encode and walk files (internal).
 * Thread-safety: none needed; pure functions of their arguments.
 */
#ifndef TGKIT_BOT_CODEC_INT_H
#define TGKIT_BOT_CODEC_INT_H

#include "bot/codec/codec.h"

const tg__field *tg__codec_lookup_slow(const tg__type *t, const tg__jdoc *d, uint32_t key);

/* Field of t named by the key token (escaped keys are decoded first), or NULL. */
static inline const tg__field *tg__codec_lookup_tok(const tg__type *t, const tg__jdoc *d,
                                                    uint32_t key)
{
    const tg__jtok *k = &d->toks[key];
    if (k->flags & TG__JF_ESCAPED)
        return tg__codec_lookup_slow(t, d, key);
    return tg__codec_lookup(t, d->src + k->start, k->len);
}
/* Member index of union u for the object at tok, or -1 when no member can be told. */
int tg__codec_union_pick(const tg__type *u, const tg__jdoc *d, uint32_t tok);
/* Decode one field-shaped value (f->off / f->cnt_off relative to base). */
tg_status tg__codec_decode_value(const tg__field *f, const tg__jdoc *d, uint32_t tok, tg__arena *a,
                                 void *base, tg__jerr *err);
/* Is the value of f at p present (top: uploads of top-level params are multipart parts)? */
bool tg__codec_present(const tg__field *f, const unsigned char *base, bool top);
/* Size of one array element of f. */
size_t tg__codec_elem_size(const tg__field *f);

#endif
