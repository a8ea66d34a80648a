/*
 * encode: generated structs -> JSON through tg__jw, driven by the descriptor tables.
 *
 * Fields are written in page order; absent optionals are omitted; required numbers and
 * booleans are always written (a required false must reach the server); required True
 * fields are always written as true; constants (discriminators) are always written.
 * Uploads: a top-level upload is left to multipart (see method.h); a nested one becomes
 * "attach://tgfileN" with N counted in encoding order.
 * Bot-wide defaults (method calls only): a field botapi-gen marked (tg__field.dflt) that the
 * caller left unset gets the bot's default; set means any value, including TG_ENUM_NONE and
 * TG_SOME(false), so an explicit value always wins. A parse mode is filled only when the text
 * it formats is there and its entities are not.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bot/codec/codec.h"
#include "bot/codec/codec_int.h"
#include "bot/codec/method.h"
#include "tgbot/client.h"

#define PATH_MAX_DEPTH 16
/* The keyboard helpers poison a keyboard they refuse with exactly these invalid values. */
#define REFUSED_HINT " (a keyboard refused by a check says why in tg_keyboard_errmsg())"

typedef struct enc {
    tg__jw *w;
    int flags;
    const tg_bot_defaults *dflt; /* NULL: none (the public codec, tools) */
    uint32_t seq;                /* next attach:// number */
    char *why;                   /* optional: the first invalid value's path and reason */
    size_t why_cap;
    struct enc_step {
        const char *name;
        long idx; /* array index under name, -1 when none */
    } path[PATH_MAX_DEPTH];
    int depth;
} enc;

static void enc_object(enc *e, const tg__type *t, const void *obj, bool top);
static void enc_union(enc *e, const tg__type *u, const void *v);

static void set_err(tg__jw *w, int err)
{
    if (!w->err)
        w->err = err;
}

/* An invalid value: -EINVAL in w, and "<path>: <reason>" in why for the first one. */
static void fail(enc *e, const char *reason)
{
    if (!e->w->err && e->why && e->why_cap) {
        size_t n = 0;
        e->why[0] = '\0';
        for (int i = 0; i < e->depth && i < PATH_MAX_DEPTH && n < e->why_cap; i++) {
            int k = snprintf(e->why + n, e->why_cap - n, "%s%s", i ? "." : "", e->path[i].name);
            n += k > 0 ? (size_t)k : 0;
            if (e->path[i].idx >= 0 && n < e->why_cap) {
                k = snprintf(e->why + n, e->why_cap - n, "[%ld]", e->path[i].idx);
                n += k > 0 ? (size_t)k : 0;
            }
        }
        if (n < e->why_cap)
            snprintf(e->why + n, e->why_cap - n, "%s%s", e->depth ? ": " : "", reason);
    }
    set_err(e->w, -EINVAL);
}

static void enc_enum(enc *e, const tg__enum *en, const tg_strenum *v)
{
    if (v->id == TG_ENUM_UNKNOWN && v->str) {
        tg__jw_str(e->w, v->str);
        return;
    }
    const char *s = tg__codec_enum_str(en, v->id);
    if (s)
        tg__jw_str(e->w, s);
    else
        fail(e, v->id == TG_ENUM_UNKNOWN ? "TG_ENUM_UNKNOWN without a string"
                                         : "not one of the set's TG_* values" REFUSED_HINT);
}

static void enc_file(enc *e, const tg_input_file *f)
{
    if (f->kind == TG_INPUT_FILE_ID || f->kind == TG_INPUT_FILE_URL) {
        tg__jw_str(e->w, f->str);
        return;
    }
    if (!tg_input_file_is_upload(f)) {
        fail(e, "not a valid tg_input_file kind");
        return;
    }
    char name[32];
    int n = snprintf(name, sizeof name, "attach://tgfile%u", (unsigned)e->seq++);
    tg__jw_strn(e->w, name, (size_t)n);
}

/* One value at p (OBJ: pointer slot, or the struct itself when inplace). */
static void enc_one(enc *e, const tg__field *f, const unsigned char *p, bool opt, bool inplace)
{
    switch (f->kind) {
    case TG__K_BOOL:
        tg__jw_bool(e->w, opt ? ((const tg_opt_bool *)(const void *)p)->v : *(const bool *)p);
        break;
    case TG__K_TRUE:
        tg__jw_bool(e->w, opt ? *(const bool *)p : true);
        break;
    case TG__K_I64:
        tg__jw_i64(e->w, opt ? ((const tg_opt_i64 *)(const void *)p)->v
                             : *(const int64_t *)(const void *)p);
        break;
    case TG__K_F64:
        tg__jw_double(e->w, opt ? ((const tg_opt_double *)(const void *)p)->v
                                : *(const double *)(const void *)p);
        break;
    case TG__K_STR:
        tg__jw_str(e->w, *(const char *const *)(const void *)p);
        break;
    case TG__K_ENUM:
        enc_enum(e, f->sub, (const tg_strenum *)(const void *)p);
        break;
    case TG__K_OBJ: {
        const void *obj = inplace ? p : *(const void *const *)(const void *)p;
        if (obj)
            enc_object(e, f->sub, obj, false);
        else
            tg__jw_null(e->w);
        break;
    }
    case TG__K_UNION:
        enc_union(e, f->sub, p);
        break;
    case TG__K_CHATID: {
        const tg_chat_id *c = (const tg_chat_id *)(const void *)p;
        if (c->kind == TG_CHAT_ID_INT)
            tg__jw_i64(e->w, c->id);
        else if (c->kind == TG_CHAT_ID_USERNAME && c->username && c->username[0])
            tg__jw_str(e->w, c->username);
        else if (c->kind == TG_CHAT_ID_USERNAME)
            fail(e, "a username chat id without a username (tg_chat_id_username(NULL) or \"\")");
        else
            fail(e, "not a valid chat id kind (use tg_chat_id_int or tg_chat_id_username)");
        break;
    }
    case TG__K_FILE:
        enc_file(e, (const tg_input_file *)(const void *)p);
        break;
    default:
        tg__jw_str(e->w, f->sub);
    }
}

static void enc_array(enc *e, const tg__field *f, const void *items, size_t count, int depth)
{
    size_t esz = depth > 1 ? sizeof(tg__list) : tg__codec_elem_size(f);
    const unsigned char *a = items;
    tg__jw_arr_begin(e->w);
    for (size_t i = 0; i < count && !e->w->err; i++) {
        if (e->depth > 0 && e->depth <= PATH_MAX_DEPTH)
            e->path[e->depth - 1].idx = (long)i;
        if (depth > 1) {
            const tg__list *row = (const tg__list *)(const void *)(a + i * esz);
            enc_array(e, f, row->items, row->items ? row->count : 0, 1);
        } else {
            enc_one(e, f, a + i * esz, false, true);
        }
    }
    tg__jw_arr_end(e->w);
}

/* The bot's default for f, or NULL when it has none (dflt: the bot's defaults). */
static const void *default_value(const tg_bot_defaults *d, const tg__field *f)
{
    switch (f->dflt) {
    case TG__D_PARSE_MODE:
        return d->parse_mode.id != TG_ENUM_ABSENT && d->parse_mode.id != TG_ENUM_NONE
                   ? &d->parse_mode
                   : NULL;
    case TG__D_LINK_PREVIEW:
        return d->link_preview_options ? &d->link_preview_options : NULL;
    case TG__D_PROTECT:
        return d->protect_content.has ? &d->protect_content : NULL;
    case TG__D_SILENT:
        return d->disable_notification.has ? &d->disable_notification : NULL;
    default:
        return NULL;
    }
}

/* Did the caller leave f unset (not even an explicit none)? Only for defaultable kinds. */
static bool unset(const tg__field *f, const unsigned char *base)
{
    const unsigned char *p = base + f->off;
    switch (f->kind) {
    case TG__K_ENUM:
        return ((const tg_strenum *)(const void *)p)->id == TG_ENUM_ABSENT;
    case TG__K_BOOL:
        return !((const tg_opt_bool *)(const void *)p)->has;
    case TG__K_OBJ:
        return *(const void *const *)(const void *)p == NULL;
    default:
        return false;
    }
}

/* The default for f at base, when one applies (see the file comment), else NULL. The value
 * has f's storage shape (tg_strenum, tg_opt_bool, or a pointer slot), so enc_one writes it. */
const void *tg__codec_default_for(const tg_bot_defaults *d, const tg__type *t, const tg__field *f,
                                  const unsigned char *base)
{
    if (!d || !f->dflt || !(f->flags & TG__F_OPT) || (f->flags & (TG__F_ARR | TG__F_ARR2)))
        return NULL;
    if (base && !unset(f, base))
        return NULL;
    if (base && f->pair && f->pair <= t->nfields &&
        tg__codec_present(&t->fields[f->pair - 1], base, false))
        return NULL;
    if (base && f->subj && f->subj <= t->nfields &&
        !tg__codec_present(&t->fields[f->subj - 1], base, false))
        return NULL;
    return default_value(d, f);
}

static void enc_field(enc *e, const tg__type *t, const tg__field *f, const unsigned char *base,
                      bool top)
{
    bool arr = (f->flags & (TG__F_ARR | TG__F_ARR2)) != 0;
    if (e->dflt && f->dflt) {
        const void *dv = tg__codec_default_for(e->dflt, t, f, base);
        if (dv) {
            tg__jw_key(e->w, f->name, f->name_len);
            if (e->depth < PATH_MAX_DEPTH)
                e->path[e->depth] = (struct enc_step){f->name, -1};
            e->depth++;
            enc_one(e, f, dv, true, false);
            e->depth--;
            return;
        }
    }
    if (!tg__codec_present(f, base, top)) {
        if (arr && !(f->flags & TG__F_OPT)) {
            tg__jw_key(e->w, f->name, f->name_len);
            tg__jw_arr_begin(e->w);
            tg__jw_arr_end(e->w);
        }
        return;
    }
    tg__jw_key(e->w, f->name, f->name_len);
    if (e->depth < PATH_MAX_DEPTH)
        e->path[e->depth] = (struct enc_step){f->name, -1};
    e->depth++;
    if (arr) {
        const void *items = *(const void *const *)(const void *)(base + f->off);
        size_t count = *(const size_t *)(const void *)(base + f->cnt_off);
        enc_array(e, f, items, count, (f->flags & TG__F_ARR2) ? 2 : 1);
    } else {
        enc_one(e, f, base + f->off, (f->flags & TG__F_OPT) != 0, false);
    }
    e->depth--;
}

/* Re-emit the members of raw that t does not know (tool mode, TG__ENC_KEEP_UNKNOWN). */
static void enc_unknown(enc *e, const tg__type *t, const tg_raw *raw)
{
    tg__jdoc d;
    tg__jerr err;
    tg__jdoc_init(&d, NULL);
    if (tg__json_parse(&d, raw->json, raw->len, &err) == 0 && d.toks[0].type == TG__J_OBJECT) {
        uint32_t key = 1;
        for (uint32_t i = 0; i < d.toks[0].count; i++) {
            uint32_t val = key + 1;
            if (!tg__codec_lookup_tok(t, &d, key)) {
                size_t n;
                const char *v = tg__json_raw(&d, val, &n);
                tg__jw_key(e->w, d.src + d.toks[key].start, d.toks[key].len);
                tg__jw_raw(e->w, v, n);
            }
            key = d.toks[val].next;
        }
    }
    tg__jdoc_cleanup(&d);
}

static void enc_object(enc *e, const tg__type *t, const void *obj, bool top)
{
    const unsigned char *base = obj;
    tg__jw_obj_begin(e->w);
    for (uint16_t i = 0; i < t->nfields; i++)
        enc_field(e, t, &t->fields[i], base, top);
    if ((e->flags & TG__ENC_KEEP_UNKNOWN) && t->raw_off != UINT32_MAX) {
        const tg_raw *raw = (const tg_raw *)(const void *)(base + t->raw_off);
        if (raw->len)
            enc_unknown(e, t, raw);
    }
    tg__jw_obj_end(e->w);
}

static void enc_union(enc *e, const tg__type *u, const void *v)
{
    const tg__union_head *h = v;
    const unsigned char *base = v;
    int k = h->kind;
    if (k == TG_UNION_ABSENT) {
        tg__jw_null(e->w);
    } else if (k == TG_UNION_UNKNOWN) {
        if (h->raw.len)
            tg__jw_raw(e->w, h->raw.json, h->raw.len);
        else
            fail(e, "an unknown union variant without raw JSON" REFUSED_HINT);
    } else if (k >= 2 && k < u->nmembers + 2) {
        if (h->ptr)
            enc_object(e, u->members[k - 2], h->ptr, false);
        else
            fail(e, "a union variant whose ptr is NULL");
    } else if (k == u->nmembers + 2 && (u->uflags & TG__UF_STRING)) {
        tg__jw_str(e->w, *(const char *const *)(const void *)(base + u->text_off));
    } else if (k == u->nmembers + 3 && (u->uflags & TG__UF_ARRAY)) {
        tg__field f = {.kind = TG__K_UNION, .sub = u};
        const void *items = *(const void *const *)(const void *)(base + u->items_off);
        size_t count = *(const size_t *)(const void *)(base + u->count_off);
        enc_array(e, &f, items, items ? count : 0, 1);
    } else {
        fail(e, "not a valid union kind");
    }
}

void tg__codec_encode_why(const tg__type *t, const void *v, tg__jw *w, int flags, char *why,
                          size_t why_cap)
{
    enc e = {.w = w, .flags = flags, .why = why, .why_cap = why_cap};
    if (why && why_cap)
        why[0] = '\0';
    if (t->is_union)
        enc_union(&e, t, v);
    else
        enc_object(&e, t, v, false);
}

void tg__codec_encode(const tg__type *t, const void *v, tg__jw *w, int flags)
{
    tg__codec_encode_why(t, v, w, flags, NULL, 0);
}

void tg__codec_encode_params(const tg__method *m, const void *params, const tg_bot_defaults *dflt,
                             tg__jw *w, char *why, size_t why_cap)
{
    enc e = {.w = w, .dflt = dflt, .why = why, .why_cap = why_cap};
    if (why && why_cap)
        why[0] = '\0';
    if (!m->params_desc) {
        tg__jw_obj_begin(w);
        tg__jw_obj_end(w);
        return;
    }
    if (!params) { /* all absent: the defaults alone */
        tg__jw_obj_begin(w);
        if (dflt)
            tg__codec_encode_defaults(m->params_desc, dflt, NULL, NULL, w);
        tg__jw_obj_end(w);
        return;
    }
    enc_object(&e, m->params_desc, params, true);
}

void tg__codec_encode_defaults(const tg__type *t, const tg_bot_defaults *dflt,
                               bool (*given)(void *ud, const char *key), void *ud, tg__jw *w)
{
    enc e = {.w = w, .dflt = dflt};
    for (uint16_t i = 0; i < t->nfields && dflt; i++) {
        const tg__field *f = &t->fields[i];
        const void *dv = tg__codec_default_for(dflt, t, f, NULL);
        if (!dv || (given && given(ud, f->name)))
            continue;
        if (f->pair && f->pair <= t->nfields && given && given(ud, t->fields[f->pair - 1].name))
            continue;
        if (f->subj && f->subj <= t->nfields && !(given && given(ud, t->fields[f->subj - 1].name)))
            continue;
        tg__jw_key(w, f->name, f->name_len);
        enc_one(&e, f, dv, true, false);
    }
}
