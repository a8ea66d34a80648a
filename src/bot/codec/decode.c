/*
 * decode: JSON tokens -> generated structs, driven by the descriptor tables.
 *
 * One pass over the tokens: each object is allocated zeroed in the arena, each key is looked
 * up in the type's hash index, unknown keys are skipped in O(1) (tok.next) and stay
 * reachable through the object's raw span. JSON null means "absent" (except as an element
 * of an array of objects); a required string or object that is absent fails the decode, so
 * callers never find NULL where the page promises a value. Union members are chosen as
 * codec.h describes; a member we cannot tell is kept as TG_UNION_UNKNOWN with its raw JSON,
 * never an error. Recursion depth is bounded by the tokenizer's depth limit.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bot/codec/codec.h"
#include "bot/codec/codec_int.h"
#include "bot/codec/method.h"

/* The address used for present-but-empty arrays (items != NULL means present). */
static const max_align_t empty_items;

typedef struct dec {
    const tg__jdoc *d;
    tg__arena *a;
    tg__jerr *err;
    int nomem;
} dec;

static int dec_object(dec *x, const tg__type *t, uint32_t tok, void *obj);
static int dec_union(dec *x, const tg__type *u, uint32_t tok, void *dst);

static int fail_type(dec *x, uint32_t tok, const char *expected)
{
    const tg__jtok *t = &x->d->toks[tok];
    x->err->offset = t->type == TG__J_STRING ? t->start - 1 : t->start;
    x->err->tok = tok;
    snprintf(x->err->msg, sizeof x->err->msg, "expected %s, found %s", expected,
             tg__json_type_name((tg__jtype)t->type));
    return -1;
}

static int fail_missing(dec *x, uint32_t tok, const tg__field *f)
{
    x->err->offset = x->d->toks[tok].start;
    x->err->tok = tok;
    snprintf(x->err->msg, sizeof x->err->msg, "missing required field \"%s\"", f->name);
    return -1;
}

/* A string whose decoded text holds U+0000 (only a \u0000 escape can put one there, and the
 * tokenizer flags it: TG__JF_NUL). The typed structs hold NUL-terminated strings with no
 * length: kept, "a\u0000b" would read as "a", silently. So it is refused, naming the field. */
static int fail_nul(dec *x, uint32_t tok, const char *enum_name)
{
    x->err->offset = x->d->toks[tok].start - 1;
    x->err->tok = tok;
    snprintf(x->err->msg, sizeof x->err->msg,
             "expected a %s%sstring without \\u0000, found one holding it (decoded strings are "
             "NUL-terminated: it would cut the text)",
             enum_name ? enum_name : "", enum_name ? " " : "");
    return -1;
}

static int fail_nomem(dec *x, uint32_t tok)
{
    x->nomem = 1;
    x->err->offset = x->d->toks[tok].start;
    x->err->tok = tok;
    snprintf(x->err->msg, sizeof x->err->msg, "out of memory (arena)");
    x->err->nomem = true;
    return -1;
}

const tg__field *tg__codec_lookup_slow(const tg__type *t, const tg__jdoc *d, uint32_t key)
{
    const tg__jtok *k = &d->toks[key];
    if (!(k->flags & TG__JF_ESCAPED))
        return tg__codec_lookup(t, d->src + k->start, k->len);
    char buf[256];
    long n = tg__json_str_copy(d, key, buf, sizeof buf);
    return n < 0 ? NULL : tg__codec_lookup(t, buf, (size_t)n);
}

size_t tg__codec_elem_size(const tg__field *f)
{
    switch (f->kind) {
    case TG__K_BOOL:
    case TG__K_TRUE:
        return sizeof(bool);
    case TG__K_I64:
        return sizeof(int64_t);
    case TG__K_F64:
        return sizeof(double);
    case TG__K_STR:
        return sizeof(char *);
    case TG__K_ENUM:
        return sizeof(tg_strenum);
    case TG__K_OBJ:
    case TG__K_UNION:
        return ((const tg__type *)f->sub)->size;
    case TG__K_CHATID:
        return sizeof(tg_chat_id);
    case TG__K_FILE:
        return sizeof(tg_input_file);
    default:
        return 0;
    }
}

/* Integers of up to 18 digits without fraction or exponent: the tokenizer has validated the
 * syntax, so summing digits is exact. Anything else goes to tg__json_get_i64. */
static inline int fast_i64(const tg__jdoc *d, uint32_t tok, int64_t *out)
{
    const tg__jtok *t = &d->toks[tok];
    if ((t->flags & TG__JF_FRAC) || t->len > 18)
        return -1;
    const char *p = d->src + t->start, *end = p + t->len;
    bool neg = *p == '-';
    p += neg;
    int64_t v = 0;
    while (p < end)
        v = v * 10 + (*p++ - '0');
    *out = neg ? -v : v;
    return 0;
}

/* Copy of a string token without escapes (the common case): one memcpy. */
static inline char *fast_str(dec *x, uint32_t tok, size_t *len)
{
    const tg__jtok *t = &x->d->toks[tok];
    if (t->flags & TG__JF_ESCAPED)
        return tg__json_str_dup(x->d, tok, x->a, len);
    char *s = tg__arena_alloc_align(x->a, (size_t)t->len + 1, 1);
    if (s) {
        memcpy(s, x->d->src + t->start, t->len);
        s[t->len] = '\0';
        *len = t->len;
    }
    return s;
}

static int dec_number(dec *x, const tg__field *f, uint32_t tok, void *dst, bool opt)
{
    if (x->d->toks[tok].type != TG__J_NUMBER)
        return fail_type(x, tok, f->kind == TG__K_I64 ? "integer" : "number");
    if (f->kind == TG__K_I64) {
        int64_t v;
        if (fast_i64(x->d, tok, &v) != 0 && tg__json_get_i64(x->d, tok, &v, x->err))
            return -1;
        if (opt)
            *(tg_opt_i64 *)dst = (tg_opt_i64){true, v};
        else
            *(int64_t *)dst = v;
        return 0;
    }
    double v;
    if (tg__json_get_double(x->d, tok, &v, x->err))
        return -1;
    if (opt)
        *(tg_opt_double *)dst = (tg_opt_double){true, v};
    else
        *(double *)dst = v;
    return 0;
}

static int dec_string_like(dec *x, const tg__field *f, uint32_t tok, void *dst)
{
    const tg__jtok *t = &x->d->toks[tok];
    if (f->kind == TG__K_CHATID && t->type == TG__J_NUMBER) {
        tg_chat_id *c = dst;
        c->kind = TG_CHAT_ID_INT;
        return tg__json_get_i64(x->d, tok, &c->id, x->err);
    }
    if (t->type != TG__J_STRING)
        return fail_type(x, tok, f->kind == TG__K_CHATID ? "integer or string" : "string");
    if (t->flags & TG__JF_NUL)
        return fail_nul(x, tok, f->kind == TG__K_ENUM ? ((const tg__enum *)f->sub)->name : NULL);
    if (f->kind == TG__K_ENUM) {
        tg_strenum *e = dst;
        const tg__enum *en = f->sub;
        e->id = (t->flags & TG__JF_ESCAPED) ? TG_ENUM_UNKNOWN
                                            : tg__codec_enum_id(en, x->d->src + t->start, t->len);
        if (e->id >= 2) {
            e->str = en->values[e->id - 2];
            return 0;
        }
    }
    size_t n;
    char *s = fast_str(x, tok, &n);
    if (!s)
        return fail_nomem(x, tok);
    switch (f->kind) {
    case TG__K_ENUM: {
        tg_strenum *e = dst;
        e->str = s;
        if (t->flags & TG__JF_ESCAPED)
            e->id = tg__codec_enum_id(f->sub, s, n);
        break;
    }
    case TG__K_CHATID:
        ((tg_chat_id *)dst)->kind = TG_CHAT_ID_USERNAME;
        ((tg_chat_id *)dst)->username = s;
        break;
    case TG__K_FILE:
        ((tg_input_file *)dst)->kind = TG_INPUT_FILE_ID;
        ((tg_input_file *)dst)->str = s;
        break;
    default:
        *(const char **)dst = s;
    }
    return 0;
}

/* A discriminator decoded as a concrete variant must hold that variant's value: decoding
 * {"type":"photo"} as InputMediaDocument would otherwise rewrite it on the way back out. */
static int dec_const(dec *x, const tg__field *f, uint32_t tok)
{
    const tg__jtok *t = &x->d->toks[tok];
    const char *want = f->sub;
    char got[64];
    long n = t->type == TG__J_STRING ? tg__json_str_copy(x->d, tok, got, sizeof got) : -1;
    if (n >= 0 && (size_t)n == strlen(want) && memcmp(got, want, (size_t)n) == 0)
        return 0;
    if (n < 0 && t->type != TG__J_STRING)
        return fail_type(x, tok, "a string");
    x->err->offset = t->start - 1;
    x->err->tok = tok;
    snprintf(x->err->msg, sizeof x->err->msg,
             "expected \"%s\" (this type's constant), found \"%.*s\"%s", want, n < 0 ? 40 : (int)n,
             n < 0 ? x->d->src + t->start : got, n < 0 ? "..." : "");
    return -1;
}

/* One value of kind f->kind into dst (for OBJ: dst is the pointer slot, or the struct
 * itself when inplace). */
static int dec_one(dec *x, const tg__field *f, uint32_t tok, void *dst, bool opt, bool inplace)
{
    const tg__jtok *t = &x->d->toks[tok];
    switch (f->kind) {
    case TG__K_BOOL:
    case TG__K_TRUE: {
        if (t->type != TG__J_TRUE && t->type != TG__J_FALSE)
            return fail_type(x, tok, "boolean");
        bool v = t->type == TG__J_TRUE;
        if (opt && f->kind == TG__K_BOOL)
            *(tg_opt_bool *)dst = (tg_opt_bool){true, v};
        else
            *(bool *)dst = v;
        return 0;
    }
    case TG__K_I64:
    case TG__K_F64:
        return dec_number(x, f, tok, dst, opt);
    case TG__K_STR:
    case TG__K_ENUM:
    case TG__K_CHATID:
    case TG__K_FILE:
        return dec_string_like(x, f, tok, dst);
    case TG__K_OBJ: {
        const tg__type *st = f->sub;
        if (inplace)
            return dec_object(x, st, tok, dst);
        if (t->type != TG__J_OBJECT)
            return fail_type(x, tok, "object");
        void *obj = tg__arena_alloc(x->a, st->size);
        if (!obj)
            return fail_nomem(x, tok);
        *(void **)dst = obj;
        return dec_object(x, st, tok, obj);
    }
    case TG__K_UNION:
        return dec_union(x, f->sub, tok, dst);
    case TG__K_CONST:
        return dec_const(x, f, tok); /* checked, nothing stored */
    default:
        return 0;
    }
}

/* An array of f's kind at tok into *items / *count (depth 2: rows of tg__list). */
static int dec_array(dec *x, const tg__field *f, uint32_t tok, const void **items, size_t *count,
                     int depth)
{
    const tg__jtok *t = &x->d->toks[tok];
    if (t->type != TG__J_ARRAY)
        return fail_type(x, tok, "array");
    size_t n = t->count;
    size_t esz = depth > 1 ? sizeof(tg__list) : tg__codec_elem_size(f);
    if (n == 0) {
        *items = &empty_items;
        *count = 0;
        return 0;
    }
    if (esz == 0 || n > SIZE_MAX / esz)
        return fail_type(x, tok, "array of a known type");
    unsigned char *arr = tg__arena_alloc(x->a, n * esz);
    if (!arr)
        return fail_nomem(x, tok);
    if (depth > 1 || f->kind != TG__K_OBJ)
        memset(arr, 0, n * esz); /* structs zero themselves (and may not be null) */
    uint32_t el = tok + 1;
    for (size_t i = 0; i < n; i++) {
        int rc;
        if (depth > 1) {
            tg__list *row = (tg__list *)(void *)(arr + i * esz);
            rc = dec_array(x, f, el, &row->items, &row->count, 1);
        } else if (x->d->toks[el].type == TG__J_NULL && f->kind != TG__K_OBJ) {
            rc = 0; /* a null element stays zero; structs must be objects */
        } else {
            rc = dec_one(x, f, el, arr + i * esz, false, true);
        }
        if (rc)
            return -1;
        el = x->d->toks[el].next;
    }
    *items = arr;
    *count = n;
    return 0;
}

static int dec_field(dec *x, const tg__field *f, uint32_t tok, unsigned char *base)
{
    if (x->d->toks[tok].type == TG__J_NULL)
        return 0;
    if (f->flags & (TG__F_ARR | TG__F_ARR2))
        return dec_array(x, f, tok, (const void **)(void *)(base + f->off),
                         (size_t *)(void *)(base + f->cnt_off), (f->flags & TG__F_ARR2) ? 2 : 1);
    return dec_one(x, f, tok, base + f->off, (f->flags & TG__F_OPT) != 0, false);
}

static int dec_object(dec *x, const tg__type *t, uint32_t tok, void *obj)
{
    const tg__jtok *o = &x->d->toks[tok];
    if (o->type != TG__J_OBJECT)
        return fail_type(x, tok, "object");
    memset(obj, 0, t->size);
    unsigned char *base = obj;
    if (t->raw_off != UINT32_MAX) {
        tg_raw *raw = (tg_raw *)(void *)(base + t->raw_off);
        raw->json = tg__json_raw(x->d, tok, &raw->len);
    }
    uint32_t key = tok + 1;
    for (uint32_t i = 0; i < o->count; i++) {
        uint32_t val = key + 1;
        const tg__field *f = tg__codec_lookup_tok(t, x->d, key);
        if (f && dec_field(x, f, val, base))
            return -1;
        key = x->d->toks[val].next;
    }
    for (uint8_t i = 0; i < t->nreq_ptrs; i++) {
        const tg__field *f = &t->fields[t->req_ptrs[i]];
        if (*(void **)(void *)(base + f->off) == NULL)
            return fail_missing(x, tok, f);
    }
    return 0;
}

static int dec_union_list(dec *x, const tg__type *u, uint32_t tok, unsigned char *base)
{
    tg__field f = {.kind = TG__K_UNION, .sub = u};
    return dec_array(x, &f, tok, (const void **)(void *)(base + u->items_off),
                     (size_t *)(void *)(base + u->count_off), 1);
}

static int dec_union(dec *x, const tg__type *u, uint32_t tok, void *dst)
{
    const tg__jtok *t = &x->d->toks[tok];
    unsigned char *base = dst;
    tg__union_head *h = dst;
    memset(dst, 0, u->size);
    h->raw.json = tg__json_raw(x->d, tok, &h->raw.len);
    if (t->type == TG__J_STRING && (u->uflags & TG__UF_STRING)) {
        if (t->flags & TG__JF_NUL)
            return fail_nul(x, tok, NULL);
        char *s = tg__json_str_dup(x->d, tok, x->a, NULL);
        if (!s)
            return fail_nomem(x, tok);
        h->kind = u->nmembers + 2;
        *(const char **)(void *)(base + u->text_off) = s;
        return 0;
    }
    if (t->type == TG__J_ARRAY && (u->uflags & TG__UF_ARRAY)) {
        h->kind = u->nmembers + 3;
        return dec_union_list(x, u, tok, base);
    }
    if (t->type != TG__J_OBJECT)
        return fail_type(x, tok, "object");
    int m = tg__codec_union_pick(u, x->d, tok);
    if (m < 0) {
        h->kind = TG_UNION_UNKNOWN;
        return 0;
    }
    const tg__type *mt = u->members[m];
    void *obj = tg__arena_alloc(x->a, mt->size);
    if (!obj)
        return fail_nomem(x, tok);
    h->kind = m + 2;
    h->ptr = obj;
    return dec_object(x, mt, tok, obj);
}

tg_status tg__codec_decode_value(const tg__field *f, const tg__jdoc *d, uint32_t tok, tg__arena *a,
                                 void *base, tg__jerr *err)
{
    dec x = {d, a, err, 0};
    err->nomem = false;
    if (dec_field(&x, f, tok, base) == 0)
        return TG_OK;
    return x.nomem || err->nomem ? TG_ERR_NOMEM : TG_ERR_DECODE;
}

tg_status tg__codec_decode(const tg__type *t, const tg__jdoc *d, uint32_t tok, tg__arena *a,
                           void *out, tg__jerr *err)
{
    dec x = {d, a, err, 0};
    err->nomem = false;
    int rc = t->is_union ? dec_union(&x, t, tok, out) : dec_object(&x, t, tok, out);
    if (rc == 0)
        return TG_OK;
    return x.nomem || err->nomem ? TG_ERR_NOMEM : TG_ERR_DECODE;
}

tg_status tg__codec_decode_json(const tg__type *t, const char *json, size_t len, tg__arena *a,
                                tg__jdoc *doc, void **out, tg__buf *errmsg)
{
    tg__jerr err = {0, UINT32_MAX, "", false};
    *out = NULL;
    char *copy = tg__arena_alloc_align(a, len + 1, 1);
    void *obj = copy ? tg__arena_alloc(a, t->size) : NULL;
    if (!obj) {
        if (errmsg)
            tg__buf_puts(errmsg, "out of memory (arena)");
        return TG_ERR_NOMEM;
    }
    if (len)
        memcpy(copy, json, len);
    copy[len] = '\0';
    if (tg__json_parse(doc, copy, len, &err) != 0) {
        if (errmsg)
            tg__json_errmsg(doc, &err, errmsg);
        return err.nomem ? TG_ERR_NOMEM : TG_ERR_DECODE;
    }
    tg_status st = tg__codec_decode(t, doc, 0, a, obj, &err);
    if (st != TG_OK) {
        if (errmsg)
            tg__json_errmsg(doc, &err, errmsg);
        return st;
    }
    *out = obj;
    return TG_OK;
}

tg_status tg__codec_decode_result(const tg__method *m, const tg__jdoc *d, uint32_t tok,
                                  tg__arena *a, void *out, tg__jerr *err)
{
    const tg__jtok *t = &d->toks[tok];
    if (m->result_kind == TG__R_TRUE ||
        (m->result_kind == TG__R_OR_TRUE && (t->type == TG__J_TRUE || t->type == TG__J_FALSE))) {
        if (t->type != TG__J_TRUE) {
            dec x = {d, a, err, 0};
            return fail_type(&x, tok, "true"), TG_ERR_DECODE;
        }
        if (out && m->result_kind == TG__R_OR_TRUE)
            *(void **)out = NULL;
        return TG_OK;
    }
    const tg__field *f = m->result_desc;
    union {
        tg__array_out arr;
        void *ptr;
        int64_t i;
        double f;
        bool b;
        max_align_t align;
        unsigned char u[128];
    } scratch;
    void *dst = out ? out : &scratch;
    if (!out && f->kind == TG__K_UNION && ((const tg__type *)f->sub)->size > sizeof scratch)
        return TG_ERR_INVALID;
    dec x = {d, a, err, 0};
    if (t->type == TG__J_NULL)
        return fail_type(&x, tok, "a result"), TG_ERR_DECODE;
    return tg__codec_decode_value(f, d, tok, a, dst, err);
}
