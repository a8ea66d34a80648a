/*
 * Fuzz target for libtgbot's JSON codec: tokenize any bytes, then
 *  - on failure: format the error with its path (walks the truncated tree a failed parse
 *    leaves) and check the offset is inside the input;
 *  - on success: check the token invariants, run every accessor and tg__json_path on every
 *    token, re-encode the document with the writer, re-parse it (must succeed with the same
 *    shape and values) and re-encode again (must be byte-identical: a fixed point).
 * Also: the raw input written as one string value must parse back to the same bytes.
 * Violations call abort() so libFuzzer (and the corpus replay under ctest) reports them.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bot/json/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tg__jdoc d1, d2, tight; /* tight: small limits, to reach the limit error paths */
static tg__arena arena;
static tg__buf out1, out2, scratch;
static int ready;

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

static void init_once(void)
{
    if (ready)
        return;
    tg__jdoc_init(&d1, NULL);
    tg__jdoc_init(&d2, NULL);
    tg__jdoc_init(&tight, &(tg__jlimits){.max_depth = 3, .max_bytes = 512, .max_tokens = 24});
    tg__arena_init(&arena, 0, 0);
    tg__buf_init(&out1, 0);
    tg__buf_init(&out2, 0);
    tg__buf_init(&scratch, 0);
    ready = 1;
}

static void encode(const tg__jdoc *d, uint32_t t, tg__jw *w)
{
    const tg__jtok *k = &d->toks[t];
    size_t n;
    switch (k->type) {
    case TG__J_OBJECT:
        tg__jw_obj_begin(w);
        for (uint32_t c = t + 1; c < k->next; c = d->toks[c + 1].next) {
            char *key = tg__json_str_dup(d, c, &arena, &n);
            CHECK(key);
            tg__jw_key_escaped(w, key, n);
            encode(d, c + 1, w);
        }
        tg__jw_obj_end(w);
        break;
    case TG__J_ARRAY:
        tg__jw_arr_begin(w);
        for (uint32_t c = t + 1; c < k->next; c = d->toks[c].next)
            encode(d, c, w);
        tg__jw_arr_end(w);
        break;
    case TG__J_STRING: {
        char *s = tg__json_str_dup(d, t, &arena, &n);
        CHECK(s);
        tg__jw_strn(w, s, n);
        break;
    }
    case TG__J_NUMBER: {
        int64_t i;
        double v;
        const char *raw = tg__json_raw(d, t, &n);
        /* "-0" goes through the double path so its sign survives the round trip. */
        if (tg__json_get_i64(d, t, &i, NULL) == 0 && !(i == 0 && (k->flags & TG__JF_NEG)))
            tg__jw_i64(w, i);
        else if (tg__json_get_double(d, t, &v, NULL) == 0)
            tg__jw_double(w, v);
        else
            tg__jw_raw(w, raw, n);
        break;
    }
    case TG__J_TRUE:
    case TG__J_FALSE:
        tg__jw_bool(w, k->type == TG__J_TRUE);
        break;
    default:
        tg__jw_null(w);
        break;
    }
}

/* Every accessor on every token; strings must compare equal to their own decoding. */
static void walk(const tg__jdoc *d)
{
    for (uint32_t i = 0; i < d->ntok; i++) {
        const tg__jtok *t = &d->toks[i];
        CHECK(t->next > i && t->next <= d->ntok);
        CHECK(t->type >= TG__J_OBJECT && t->type <= TG__J_NULL);
        tg__buf_reset(&scratch);
        CHECK(tg__json_path(d, i, &scratch) == 0);
        tg__jerr err;
        int64_t i64;
        int32_t i32;
        double dv;
        bool b;
        size_t n;
        if (t->type == TG__J_STRING) {
            char *s = tg__json_str_dup(d, i, &arena, &n);
            CHECK(s && n <= t->len);
            CHECK(tg__json_str_eq(d, i, s, n));
            char small[16];
            long c = tg__json_str_copy(d, i, small, sizeof small);
            CHECK(c == (n < sizeof small ? (long)n : -1));
        } else if (t->type == TG__J_NUMBER) {
            int r64 = tg__json_get_i64(d, i, &i64, &err);
            int r32 = tg__json_get_i32(d, i, &i32, &err);
            CHECK(r32 != 0 || (r64 == 0 && i64 == i32));
            if (tg__json_get_double(d, i, &dv, &err) == 0 && r64 == 0 && i64 > -(1LL << 53) &&
                i64 < (1LL << 53))
                CHECK(dv == (double)i64);
        } else if (t->type == TG__J_TRUE || t->type == TG__J_FALSE) {
            CHECK(tg__json_get_bool(d, i, &b, &err) == 0 && b == (t->type == TG__J_TRUE));
        } else {
            CHECK(tg__json_get_bool(d, i, &b, &err) == -1);
            tg__buf_reset(&scratch);
            CHECK(tg__json_errmsg(d, &err, &scratch) == 0);
        }
    }
}

/* Same shape and values in two documents. */
static void same(const tg__jdoc *a, const tg__jdoc *b)
{
    CHECK(a->ntok == b->ntok);
    for (uint32_t i = 0; i < a->ntok; i++) {
        const tg__jtok *x = &a->toks[i], *y = &b->toks[i];
        CHECK(x->type == y->type && x->next == y->next && x->count == y->count);
        if (x->type == TG__J_STRING) {
            size_t n;
            char *s = tg__json_str_dup(a, i, &arena, &n);
            CHECK(s && tg__json_str_eq(b, i, s, n));
        }
    }
}

/* The input as one string value: the writer must escape it into JSON that parses back to
 * the same bytes, or refuse it (-EINVAL: not UTF-8). */
static void string_round_trip(const uint8_t *data, size_t size)
{
    tg__jw w;
    tg__jerr err;
    tg__buf_reset(&out1);
    tg__jw_init(&w, &out1);
    tg__jw_strn(&w, (const char *)data, size);
    if (w.err != 0) {
        CHECK(w.err == -EINVAL);
        return;
    }
    CHECK(tg__json_parse(&d2, out1.data, out1.len, &err) == 0);
    CHECK(d2.ntok == 1 && d2.toks[0].type == TG__J_STRING);
    CHECK(tg__json_str_eq(&d2, 0, (const char *)data, size));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 20))
        return 0;
    init_once();
    tg__arena_reset(&arena);
    string_round_trip(data, size);
    tg__jerr err;
    if (tg__json_parse(&tight, (const char *)data, size, &err) != 0) {
        tg__buf_reset(&scratch);
        CHECK(tg__json_errmsg(&tight, &err, &scratch) == 0);
    } else {
        CHECK(tight.ntok <= 24);
    }
    if (tg__json_parse(&d1, (const char *)data, size, &err) != 0) {
        CHECK(err.offset <= size && err.msg[0]);
        tg__buf_reset(&scratch);
        CHECK(tg__json_errmsg(&d1, &err, &scratch) == 0);
        return 0;
    }
    walk(&d1);
    tg__jw w;
    tg__buf_reset(&out1);
    tg__jw_init(&w, &out1);
    encode(&d1, 0, &w);
    CHECK(w.err == 0 && w.depth == 0);
    CHECK(tg__json_parse(&d2, out1.data, out1.len, &err) == 0);
    same(&d1, &d2);
    tg__buf_reset(&out2);
    tg__jw_init(&w, &out2);
    encode(&d2, 0, &w);
    CHECK(w.err == 0 && out1.len == out2.len && memcmp(out1.data, out2.data, out1.len) == 0);
    return 0;
}
