/*
 * walk: the codec's read-only walks over descriptors: union member choice, enum strings,
 * missing required parameters, uploads reachable from params, keys the API does not know.
 *
 * tg__codec_foreach_file() must visit uploads in exactly the order encode.c writes them
 * (fields in page order, arrays in order, union members), so attach:// names agree.
 */
#include <stdio.h>
#include <string.h>

#include "bot/codec/codec.h"
#include "bot/codec/codec_int.h"
#include "bot/codec/method.h"

/* ---- enums ---- */

/* s is counted and may hold a NUL; the values are C strings. Lengths first (strnlen never
 * reads past a value's terminator), then bytes: "HTML\0x" is not "HTML". */
int32_t tg__codec_enum_id(const tg__enum *e, const char *s, size_t n)
{
    for (uint32_t i = 0; i < e->count; i++) {
        const char *v = e->values[i];
        if (n && v[0] != s[0])
            continue;
        if (strnlen(v, n + 1) == n && memcmp(v, s, n) == 0)
            return (int32_t)i + 2;
    }
    return TG_ENUM_UNKNOWN;
}

const char *tg__codec_enum_str(const tg__enum *e, int32_t id)
{
    if (id < 2 || (uint32_t)(id - 2) >= e->count)
        return NULL;
    return e->values[id - 2];
}

/* ---- union member choice ---- */

/* Value of the LAST member named key (decoding lets a repeated key win the same way). */
static uint32_t find_key(const tg__jdoc *d, uint32_t obj, const char *key)
{
    size_t n = strlen(key);
    uint32_t k = obj + 1, found = UINT32_MAX;
    for (uint32_t i = 0; i < d->toks[obj].count; i++) {
        if (tg__json_str_eq(d, k, key, n))
            found = k + 1;
        k = d->toks[k + 1].next;
    }
    return found;
}

/* Number of mt's required fields among the keys of the object at tok. */
static uint32_t required_present(const tg__type *mt, const tg__jdoc *d, uint32_t tok)
{
    uint32_t n = 0, k = tok + 1;
    for (uint32_t i = 0; i < d->toks[tok].count; i++) {
        const tg__field *f = tg__codec_lookup_tok(mt, d, k);
        if (f && !(f->flags & TG__F_OPT))
            n++;
        k = d->toks[k + 1].next;
    }
    return n;
}

/* Among members accepted by ok[] (all if ok is NULL): all required fields present, the
 * member with the most required fields wins. */
static int pick_presence(const tg__type *u, const tg__jdoc *d, uint32_t tok, const bool *ok)
{
    int best = -1;
    for (uint16_t i = 0; i < u->nmembers; i++) {
        const tg__type *mt = u->members[i];
        if (ok && !ok[i])
            continue;
        if (required_present(mt, d, tok) < mt->nrequired)
            continue;
        if (best < 0 || mt->nrequired > u->members[best]->nrequired)
            best = i;
    }
    return best;
}

static int pick_discrim(const tg__type *u, const tg__jdoc *d, uint32_t tok)
{
    uint32_t v = find_key(d, tok, u->disc);
    if (v == UINT32_MAX || d->toks[v].type != TG__J_STRING)
        return -1;
    bool ok[256] = {false};
    int first = -1, hits = 0;
    for (uint16_t i = 0; i < u->nmembers && i < 256; i++) {
        if (tg__json_str_eq(d, v, u->values[i], strlen(u->values[i]))) {
            ok[i] = true;
            hits++;
            if (first < 0)
                first = i;
        }
    }
    if (hits <= 1)
        return first;
    int m = pick_presence(u, d, tok, ok);
    return m >= 0 ? m : first;
}

static int pick_date0(const tg__type *u, const tg__jdoc *d, uint32_t tok)
{
    /* without an integer date the two members cannot be told apart: keep it unknown */
    uint32_t v = find_key(d, tok, "date");
    if (v == UINT32_MAX || d->toks[v].type != TG__J_NUMBER || (d->toks[v].flags & TG__JF_FRAC))
        return -1;
    int64_t date;
    tg__jerr err;
    if (tg__json_get_i64(d, v, &date, &err) != 0)
        return -1;
    bool zero = date == 0; /* also "-0" */
    for (uint16_t i = 0; i < u->nmembers; i++)
        if ((u->values[i] != NULL) == zero)
            return i;
    return -1;
}

int tg__codec_union_pick(const tg__type *u, const tg__jdoc *d, uint32_t tok)
{
    if (d->toks[tok].type != TG__J_OBJECT)
        return -1;
    switch (u->strategy) {
    case TG__U_DISCRIM:
        return pick_discrim(u, d, tok);
    case TG__U_PRESENCE:
        return pick_presence(u, d, tok, NULL);
    case TG__U_DATE0:
        return pick_date0(u, d, tok);
    default:
        return -1;
    }
}

/* ---- required parameters ---- */

const char *tg__codec_missing_param(const tg__method *m, const void *params)
{
    const tg__type *t = m->params_desc;
    if (!t)
        return NULL;
    for (uint16_t i = 0; i < t->nfields; i++) {
        const tg__field *f = &t->fields[i];
        if (f->flags & TG__F_OPT)
            continue;
        if (!params)
            return f->name;
        if (f->kind == TG__K_FILE) {
            const tg_input_file *fl =
                (const tg_input_file *)(const void *)((const unsigned char *)params + f->off);
            if (fl->kind == TG_INPUT_FILE_NONE)
                return f->name;
            continue;
        }
        if (!tg__codec_present(f, params, false))
            return f->name;
    }
    return NULL;
}

/* ---- uploads ---- */

typedef struct fwalk {
    tg__file_cb cb;
    void *ud;
    uint32_t seq;
} fwalk;

static int files_object(fwalk *w, const tg__type *t, const unsigned char *base, bool top);

static int files_one(fwalk *w, const tg__field *f, const unsigned char *p, bool inplace, bool top)
{
    if (f->kind == TG__K_FILE) {
        const tg_input_file *fl = (const tg_input_file *)(const void *)p;
        if (!tg_input_file_is_upload(fl))
            return 0;
        if (top)
            return w->cb(w->ud, f->name, fl);
        char part[32];
        snprintf(part, sizeof part, "tgfile%u", (unsigned)w->seq++);
        return w->cb(w->ud, part, fl);
    }
    if (f->kind == TG__K_OBJ) {
        const void *obj = inplace ? (const void *)p : *(const void *const *)(const void *)p;
        return obj ? files_object(w, f->sub, obj, false) : 0;
    }
    if (f->kind == TG__K_UNION) {
        const tg__type *u = f->sub;
        const tg__union_head *h = (const tg__union_head *)(const void *)p;
        if (h->kind >= 2 && h->kind < u->nmembers + 2 && h->ptr)
            return files_object(w, u->members[h->kind - 2], h->ptr, false);
    }
    return 0;
}

static int files_array(fwalk *w, const tg__field *f, const void *items, size_t count, int depth)
{
    size_t esz = depth > 1 ? sizeof(tg__list) : tg__codec_elem_size(f);
    const unsigned char *a = items;
    for (size_t i = 0; items && i < count; i++) {
        int rc;
        if (depth > 1) {
            const tg__list *row = (const tg__list *)(const void *)(a + i * esz);
            rc = files_array(w, f, row->items, row->count, 1);
        } else {
            rc = files_one(w, f, a + i * esz, true, false);
        }
        if (rc)
            return rc;
    }
    return 0;
}

static int files_object(fwalk *w, const tg__type *t, const unsigned char *base, bool top)
{
    for (uint16_t i = 0; i < t->nfields; i++) {
        const tg__field *f = &t->fields[i];
        if (f->kind != TG__K_FILE && f->kind != TG__K_OBJ && f->kind != TG__K_UNION)
            continue;
        int rc;
        if (f->flags & (TG__F_ARR | TG__F_ARR2)) {
            const void *items = *(const void *const *)(const void *)(base + f->off);
            size_t count = *(const size_t *)(const void *)(base + f->cnt_off);
            rc = files_array(w, f, items, count, (f->flags & TG__F_ARR2) ? 2 : 1);
        } else {
            rc = files_one(w, f, base + f->off, false, top);
        }
        if (rc)
            return rc;
    }
    return 0;
}

int tg__codec_foreach_file(const tg__method *m, const void *params, tg__file_cb cb, void *ud)
{
    fwalk w = {cb, ud, 0};
    if (!m->params_desc || !params || !m->has_input_files)
        return 0;
    return files_object(&w, m->params_desc, params, true);
}

/* ---- unknown keys ---- */

typedef struct uwalk {
    tg__unknown_cb cb;
    void *ud;
    const tg__jdoc *d;
    size_t n;
    tg__buf *path; /* where the walk is (NULL: no paths) */
    int path_err;  /* a step could not be pushed: paths are off from there on */
} uwalk;

static void unknown_value(uwalk *w, const tg__type *t, uint32_t tok);

/* Push a step (key token, or array index when key is UINT32_MAX); returns the length to pop
 * back to. */
static size_t push(uwalk *w, uint32_t key, uint32_t index)
{
    if (!w->path)
        return 0;
    size_t mark = w->path->len;
    if (!w->path_err)
        w->path_err = key != UINT32_MAX ? tg__json_path_key(w->d, key, mark == 0, w->path)
                                        : tg__json_path_index(index, w->path);
    return mark;
}

static void pop(uwalk *w, size_t mark)
{
    if (w->path && !w->path_err && w->path->data) {
        w->path->len = mark;
        w->path->data[mark] = '\0';
    }
}

static void report(uwalk *w, uint32_t tok, bool variant)
{
    if (w->cb)
        w->cb(w->ud, w->d, tok, variant, w->path && !w->path_err ? tg__buf_cstr(w->path) : NULL);
}

static void unknown_field(uwalk *w, const tg__field *f, uint32_t tok, int depth)
{
    const tg__jtok *t = &w->d->toks[tok];
    if (depth > 0) {
        if (t->type != TG__J_ARRAY)
            return;
        uint32_t el = tok + 1;
        for (uint32_t i = 0; i < t->count; i++) {
            tg__json_steps++;
            size_t mark = push(w, UINT32_MAX, i);
            unknown_field(w, f, el, depth - 1);
            pop(w, mark);
            el = w->d->toks[el].next;
        }
        return;
    }
    if (f->kind == TG__K_OBJ || f->kind == TG__K_UNION)
        unknown_value(w, f->sub, tok);
}

static void unknown_value(uwalk *w, const tg__type *t, uint32_t tok)
{
    const tg__jtok *o = &w->d->toks[tok];
    if (t->is_union) {
        if (o->type == TG__J_ARRAY && (t->uflags & TG__UF_ARRAY)) {
            tg__field f = {.kind = TG__K_UNION, .sub = t};
            unknown_field(w, &f, tok, 1);
            return;
        }
        int m = tg__codec_union_pick(t, w->d, tok);
        if (m >= 0)
            unknown_value(w, t->members[m], tok);
        else if (o->type == TG__J_OBJECT)
            report(w, tok, true);
        return;
    }
    if (o->type != TG__J_OBJECT)
        return;
    uint32_t key = tok + 1;
    for (uint32_t i = 0; i < o->count; i++) {
        tg__json_steps++;
        const tg__field *f = tg__codec_lookup_tok(t, w->d, key);
        size_t mark = push(w, key, 0);
        if (!f) {
            w->n++;
            report(w, key + 1, false);
        } else {
            int depth = (f->flags & TG__F_ARR2) ? 2 : (f->flags & TG__F_ARR) ? 1 : 0;
            unknown_field(w, f, key + 1, depth);
        }
        pop(w, mark);
        key = w->d->toks[key + 1].next;
    }
}

size_t tg__codec_unknown_keys(const tg__type *t, const tg__jdoc *d, uint32_t tok, tg__unknown_cb cb,
                              void *ud, tg__buf *path)
{
    uwalk w = {cb, ud, d, 0, cb ? path : NULL, 0};
    unknown_value(&w, t, tok);
    return w.n;
}
