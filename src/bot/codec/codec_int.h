/*
 * codec_int: helpers shared by the codec's decode, encode and walk files (internal).
 * Thread-safety: none needed; pure functions of their arguments.
 */
#ifndef TGKIT_BOT_CODEC_INT_H
#define TGKIT_BOT_CODEC_INT_H

#include "bot/codec/codec.h"
#include "tgbot/types.h"

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
/* Is the value of f at base present (top: uploads of top-level params are multipart parts)?
 * Inline: the encoder asks this for every field of every object it writes. */
static inline bool tg__codec_present(const tg__field *f, const unsigned char *base, bool top)
{
    const unsigned char *p = base + f->off;
    bool opt = (f->flags & TG__F_OPT) != 0;
    if (f->flags & (TG__F_ARR | TG__F_ARR2))
        return *(const void *const *)(const void *)p != NULL;
    switch (f->kind) {
    case TG__K_BOOL:
        return !opt || ((const tg_opt_bool *)(const void *)p)->has;
    case TG__K_TRUE:
        return !opt || *(const bool *)p;
    case TG__K_I64:
        return !opt || ((const tg_opt_i64 *)(const void *)p)->has;
    case TG__K_F64:
        return !opt || ((const tg_opt_double *)(const void *)p)->has;
    case TG__K_STR:
    case TG__K_OBJ:
        return *(const void *const *)(const void *)p != NULL;
    case TG__K_ENUM: {
        int32_t id = ((const tg_strenum *)(const void *)p)->id;
        return id != TG_ENUM_ABSENT && id != TG_ENUM_NONE;
    }
    case TG__K_UNION:
        return ((const tg__union_head *)(const void *)p)->kind != TG_UNION_ABSENT;
    case TG__K_CHATID:
        return ((const tg_chat_id *)(const void *)p)->kind != TG_CHAT_ID_NONE;
    case TG__K_FILE: {
        const tg_input_file *fl = (const tg_input_file *)(const void *)p;
        return fl->kind != TG_INPUT_FILE_NONE && !(top && tg_input_file_is_upload(fl));
    }
    default:
        return true; /* TG__K_CONST */
    }
}

/* Size of one array element of f. */
size_t tg__codec_elem_size(const tg__field *f);

#endif
