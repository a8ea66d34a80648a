/*
 * params: request parameters -> the method's params struct (see params.h).
 */
#include "emulator/params.h"

#include <stdio.h>
#include <string.h>

#include "core/str.h"

static bool is_number(const char *s, bool integer)
{
    tg__jdoc d;
    tg__jdoc_init(&d, NULL);
    tg__jerr e;
    bool ok = *s && tg__json_parse(&d, s, strlen(s), &e) == 0 && d.toks[0].type == TG__J_NUMBER &&
              (!integer || !(d.toks[0].flags & TG__JF_FRAC));
    tg__jdoc_cleanup(&d);
    return ok;
}

static bool is_json(const char *s, size_t n)
{
    tg__jdoc d;
    tg__jdoc_init(&d, NULL);
    tg__jerr e;
    bool ok = n && tg__json_parse(&d, s, n, &e) == 0;
    tg__jdoc_cleanup(&d);
    return ok;
}

/* One form value as the JSON the descriptor's field f expects. */
static void put_value(tg__jw *w, const tg__field *f, const emu_field *x)
{
    const char *v = x->value;
    bool arr = f->flags & (TG__F_ARR | TG__F_ARR2);
    if (x->is_file && f->kind == TG__K_FILE && !arr) {
        char ref[300];
        snprintf(ref, sizeof ref, "attach://%s", x->name);
        tg__jw_str(w, ref);
        return;
    }
    if (!arr) {
        switch (f->kind) {
        case TG__K_I64:
        case TG__K_CHATID:
            if (is_number(v, true)) {
                tg__jw_raw(w, v, strlen(v));
                return;
            }
            break;
        case TG__K_F64:
            if (is_number(v, false)) {
                tg__jw_raw(w, v, strlen(v));
                return;
            }
            break;
        case TG__K_BOOL:
        case TG__K_TRUE:
            if (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "True")) {
                tg__jw_bool(w, true);
                return;
            }
            if (!strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "False")) {
                tg__jw_bool(w, false);
                return;
            }
            break;
        case TG__K_OBJ:
        case TG__K_UNION:
            if (is_json(v, x->value_len)) {
                tg__jw_raw(w, v, x->value_len);
                return;
            }
            break;
        default:
            break;
        }
    } else if (is_json(v, x->value_len)) {
        tg__jw_raw(w, v, x->value_len);
        return;
    }
    tg__jw_strn(w, v, x->value_len);
}

int emu_params_form_json(const tg__method *m, const emu_form *f, tg__buf *out, char *err,
                         size_t errcap)
{
    const tg__type *t = m->params_desc;
    tg__jw w;
    tg__jw_init(&w, out);
    tg__jw_obj_begin(&w);
    for (size_t i = 0; t && i < f->count; i++) {
        const emu_field *x = &f->fields[i];
        const tg__field *fd = tg__codec_lookup(t, x->name, strlen(x->name));
        if (!fd)
            continue; /* Telegram ignores parameters it does not know, as do we */
        if (x->is_file && fd->kind != TG__K_FILE)
            continue; /* an upload referenced by attach:// from another parameter */
        tg__jw_key(&w, fd->name, fd->name_len);
        put_value(&w, fd, x);
    }
    tg__jw_obj_end(&w);
    if (w.err) {
        snprintf(err, errcap, "request too large");
        return -1;
    }
    return 0;
}

/* Whether a string value for f holds a value of another type, as text (form style). */
static bool text_of_other_type(const tg__field *f)
{
    if (f->flags & (TG__F_ARR | TG__F_ARR2))
        return true;
    return f->kind != TG__K_STR && f->kind != TG__K_ENUM && f->kind != TG__K_FILE &&
           f->kind != TG__K_CHATID && f->kind != TG__K_CONST;
}

int emu_params_normalize(const tg__method *m, const char *json, size_t len, tg__buf *out, char *err,
                         size_t errcap)
{
    tg__jdoc d;
    tg__jdoc_init(&d, NULL);
    tg__jerr je;
    if (tg__json_parse(&d, json, len, &je) != 0 || d.toks[0].type != TG__J_OBJECT) {
        tg__jdoc_cleanup(&d);
        snprintf(err, errcap, "can't parse JSON request body");
        return -1;
    }
    const tg__type *t = m->params_desc;
    tg__arena a;
    tg__arena_init(&a, 0, 0);
    tg__jw w;
    tg__jw_init(&w, out);
    tg__jw_obj_begin(&w);
    for (uint32_t k = 1; k < d.ntok; k = d.toks[k + 1].next) {
        size_t kn;
        char *key = tg__json_str_dup(&d, k, &a, &kn);
        const tg__field *f = t && key ? tg__codec_lookup(t, key, kn) : NULL;
        if (!f)
            continue;
        tg__jw_key(&w, f->name, f->name_len);
        const tg__jtok *v = &d.toks[k + 1];
        size_t vn;
        char *text = v->type == TG__J_STRING && text_of_other_type(f)
                         ? tg__json_str_dup(&d, k + 1, &a, &vn)
                         : NULL;
        if (text) {
            emu_field x = {.name = f->name, .value = text, .value_len = vn};
            put_value(&w, f, &x);
        } else {
            const char *raw = tg__json_raw(&d, k + 1, &vn);
            tg__jw_raw(&w, raw, vn);
        }
    }
    tg__jw_obj_end(&w);
    tg__arena_cleanup(&a);
    tg__jdoc_cleanup(&d);
    if (w.err) {
        snprintf(err, errcap, "request too large");
        return -1;
    }
    return 0;
}

/* The first required parameter absent (or null) in the object at token 0, or NULL. */
static const char *missing(const tg__type *t, const tg__jdoc *d)
{
    for (uint16_t i = 0; i < t->nfields; i++) {
        const tg__field *f = &t->fields[i];
        if ((f->flags & TG__F_OPT) || f->kind == TG__K_CONST)
            continue;
        uint32_t v = tg__json_obj_get(d, 0, f->name);
        if (v == UINT32_MAX || d->toks[v].type == TG__J_NULL)
            return f->name;
        if (d->toks[v].type == TG__J_STRING && d->toks[v].len == 0 && f->kind == TG__K_STR)
            return f->name;
    }
    return NULL;
}

static void empty_msg(const char *name, char *err, size_t errcap)
{
    if (!strcmp(name, "text"))
        snprintf(err, errcap, "message text is empty");
    else
        snprintf(err, errcap, "%s is empty", name);
}

int emu_params_decode(const tg__method *m, const char *json, size_t len, tg__arena *a, void **out,
                      char *err, size_t errcap)
{
    *out = NULL;
    const tg__type *t = m->params_desc;
    tg__jdoc d;
    tg__jdoc_init(&d, NULL);
    tg__jerr je;
    int rc = -1;
    if (tg__json_parse(&d, json, len, &je) != 0 || d.toks[0].type != TG__J_OBJECT) {
        snprintf(err, errcap, "can't parse JSON request body");
        goto out;
    }
    if (!t) {
        rc = 0;
        goto out;
    }
    const char *miss = missing(t, &d);
    if (miss) {
        empty_msg(miss, err, errcap);
        goto out;
    }
    tg__buf msg;
    tg__buf_init(&msg, 512);
    if (tg__codec_decode_json(t, json, len, a, &d, out, &msg) != TG_OK) {
        snprintf(err, errcap, "invalid parameter %s", tg__buf_cstr(&msg));
        tg__buf_cleanup(&msg);
        goto out;
    }
    tg__buf_cleanup(&msg);
    rc = 0;
out:
    tg__jdoc_cleanup(&d);
    return rc;
}
