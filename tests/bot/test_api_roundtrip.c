/*
 * Generated round trips for every Bot API type, walking the descriptor tables:
 *  - "full": a value with every field present (nested objects down to a depth limit,
 *    two elements per array, union members rotating), encode -> decode -> encode, the two
 *    encodings must be byte-identical and the decode must find no unknown key;
 *  - "required": the same with only the required fields.
 * Also checks the descriptor tables themselves: every field is found by its key through
 * the hash index, and sizes/offsets stay inside their struct.
 */
#include "tgtest.h"

#include "bot/codec/codec.h"
#include "bot/codec/codec_int.h"
#include "core/arena.h"
#include "core/buf.h"
#include "tgbot/api.h"

#define MAX_DEPTH 3

typedef struct filler {
    tg__arena *a;
    bool required_only;
    uint32_t seq;
} filler;

static void fill_object(filler *f, const tg__type *t, void *obj, int depth);
static void fill_union(filler *f, const tg__type *u, void *dst, int depth);

static const char *text(filler *f)
{
    /* escapes, UTF-8 and a long tail exercise the writer and the unescaper */
    static const char *const samples[] = {"plain", "quote \" and \\ slash", "tab\tnew\nline",
                                          "caf\xc3\xa9 \xe2\x9d\xa4 \xf0\x9f\x8e\xb2", ""};
    return samples[f->seq++ % 5];
}

/* Returns false when nothing could be made (object beyond the depth limit). */
static bool fill_one(filler *f, const tg__field *fd, unsigned char *p, bool inplace, int depth)
{
    bool opt = (fd->flags & TG__F_OPT) && !inplace;
    uint32_t s = f->seq++;
    switch (fd->kind) {
    case TG__K_BOOL:
        if (opt)
            *(tg_opt_bool *)(void *)p = (tg_opt_bool){true, s % 2 == 0};
        else
            *(bool *)p = s % 2 == 0;
        return true;
    case TG__K_TRUE:
        *(bool *)p = true;
        return true;
    case TG__K_I64: {
        int64_t v = (s % 3 == 0) ? -(int64_t)1002003004005006 - s : (int64_t)s * 977;
        if (opt)
            *(tg_opt_i64 *)(void *)p = (tg_opt_i64){true, v};
        else
            *(int64_t *)(void *)p = v;
        return true;
    }
    case TG__K_F64: {
        double v = (double)s * 0.1 + 1.0 / 3.0;
        if (opt)
            *(tg_opt_double *)(void *)p = (tg_opt_double){true, v};
        else
            *(double *)(void *)p = v;
        return true;
    }
    case TG__K_STR:
        *(const char **)(void *)p = text(f);
        return true;
    case TG__K_ENUM: {
        const tg__enum *e = fd->sub;
        tg_strenum *v = (tg_strenum *)(void *)p;
        if (s % 4 == 3) {
            v->id = TG_ENUM_UNKNOWN;
            v->str = "value_from_the_future";
        } else {
            v->id = (int32_t)(2 + s % e->count);
        }
        return true;
    }
    case TG__K_CHATID:
        *(tg_chat_id *)(void *)p =
            s % 2 ? tg_chat_id_int(-100123456789) : tg_chat_id_username("@chan");
        return true;
    case TG__K_FILE:
        *(tg_input_file *)(void *)p =
            s % 2 ? tg_input_file_id("AgADfile") : tg_input_file_url("https://x.test/a.jpg");
        return true;
    case TG__K_OBJ: {
        const tg__type *st = fd->sub;
        if (depth >= MAX_DEPTH && opt)
            return false;
        if (depth > MAX_DEPTH + 16)
            fail_msg("%s: required objects nest without end", st->name);
        void *obj = inplace ? (void *)p : tg__arena_zalloc(f->a, st->size);
        assert_non_null(obj);
        fill_object(f, st, obj, depth + 1);
        if (!inplace)
            *(void **)(void *)p = obj;
        return true;
    }
    case TG__K_UNION:
        if (depth >= MAX_DEPTH && opt)
            return false;
        if (depth > MAX_DEPTH + 16)
            fail_msg("%s: required unions nest without end", ((const tg__type *)fd->sub)->name);
        fill_union(f, fd->sub, p, depth + 1);
        return true;
    default:
        return true;
    }
}

static bool fill_array(filler *f, const tg__field *fd, const void **items, size_t *count, int rows,
                       int depth)
{
    /* deep down, required arrays are present but empty, so the value stays finite */
    size_t n = depth >= MAX_DEPTH ? 0 : 2;
    size_t esz = rows ? sizeof(tg__list) : tg__codec_elem_size(fd);
    unsigned char *arr = tg__arena_zalloc(f->a, n ? n * esz : 1);
    assert_non_null(arr);
    for (size_t i = 0; i < n; i++) {
        if (rows) {
            tg__list *row = (tg__list *)(void *)(arr + i * esz);
            if (!fill_array(f, fd, &row->items, &row->count, 0, depth))
                return false;
        } else if (!fill_one(f, fd, arr + i * esz, true, depth)) {
            return false;
        }
    }
    *items = arr;
    *count = n;
    return true;
}

static void fill_object(filler *f, const tg__type *t, void *obj, int depth)
{
    unsigned char *base = obj;
    for (uint16_t i = 0; i < t->nfields; i++) {
        const tg__field *fd = &t->fields[i];
        bool req_only = f->required_only || depth >= MAX_DEPTH;
        if (fd->kind == TG__K_CONST || (req_only && (fd->flags & TG__F_OPT)))
            continue;
        if (fd->flags & (TG__F_ARR | TG__F_ARR2)) {
            const void **items = (const void **)(void *)(base + fd->off);
            size_t *count = (size_t *)(void *)(base + fd->cnt_off);
            if (!fill_array(f, fd, items, count, (fd->flags & TG__F_ARR2) ? 1 : 0, depth)) {
                *items = NULL;
                *count = 0;
            }
            continue;
        }
        fill_one(f, fd, base + fd->off, false, depth);
    }
}

static void set_date_zero(const tg__type *t, void *obj)
{
    const tg__field *fd = tg__codec_lookup(t, "date", 4);
    assert_non_null(fd);
    assert_int_equal(fd->kind, TG__K_I64);
    *(int64_t *)(void *)((unsigned char *)obj + fd->off) = 0;
}

static void fill_union(filler *f, const tg__type *u, void *dst, int depth)
{
    tg__union_head *h = dst;
    uint32_t s = f->seq++;
    uint32_t choices = u->nmembers + ((u->uflags & TG__UF_STRING) ? 1 : 0);
    uint32_t k = s % choices;
    if (depth >= MAX_DEPTH && (u->uflags & TG__UF_STRING))
        k = u->nmembers; /* a plain string ends RichText's recursion */
    if (k >= u->nmembers) {
        h->kind = u->nmembers + 2;
        *(const char **)(void *)((unsigned char *)dst + u->text_off) = text(f);
        return;
    }
    const tg__type *mt = u->members[k];
    void *obj = tg__arena_zalloc(f->a, mt->size);
    assert_non_null(obj);
    fill_object(f, mt, obj, depth);
    if (u->strategy == TG__U_DATE0) {
        if (u->values[k])
            set_date_zero(mt, obj);
        else
            *(int64_t *)(void *)((unsigned char *)obj + tg__codec_lookup(mt, "date", 4)->off) = 7;
    }
    h->kind = (int)k + 2;
    h->ptr = obj;
}

static void count_unknown(void *ud, const tg__jdoc *d, uint32_t tok, bool variant,
                          const char *path)
{
    (void)d;
    (void)tok;
    (void)variant;
    (void)path;
    (*(int *)ud)++;
}

static void round_trip(const tg__type *t, bool required_only)
{
    tg__arena a;
    tg__arena_init(&a, 0, 0);
    filler f = {&a, required_only, (uint32_t)t->nfields};
    void *v = tg__arena_zalloc(&a, t->size);
    assert_non_null(v);
    if (t->is_union)
        fill_union(&f, t, v, 0);
    else
        fill_object(&f, t, v, 0);

    tg__buf b1, b2, err;
    tg__buf_init(&b1, 0);
    tg__buf_init(&b2, 0);
    tg__buf_init(&err, 0);
    tg__jw w;
    tg__jw_init(&w, &b1);
    tg__codec_encode(t, v, &w, 0);
    assert_int_equal(w.err, 0);

    tg__jdoc d;
    tg__jdoc_init(&d, NULL);
    void *back = NULL;
    tg_status st = tg__codec_decode_json(t, b1.data, b1.len, &a, &d, &back, &err);
    if (st != TG_OK)
        fail_msg("%s: decode of own encoding failed: %s\n%s", t->name, tg__buf_cstr(&err), b1.data);
    int unknown = 0;
    tg__codec_unknown_keys(t, &d, 0, count_unknown, &unknown, NULL);
    if (unknown)
        fail_msg("%s: %d unknown keys in own encoding", t->name, unknown);

    tg__jw_init(&w, &b2);
    tg__codec_encode(t, back, &w, 0);
    assert_int_equal(w.err, 0);
    if (b1.len != b2.len || memcmp(b1.data, b2.data, b1.len) != 0)
        fail_msg("%s (%s): re-encoding differs\n first: %s\nsecond: %s", t->name,
                 required_only ? "required" : "full", b1.data, b2.data);

    tg__jdoc_cleanup(&d);
    tg__buf_cleanup(&err);
    tg__buf_cleanup(&b2);
    tg__buf_cleanup(&b1);
    tg__arena_cleanup(&a);
}

static void test_every_type_full(void **state)
{
    (void)state;
    assert_true(tg__type_count >= 388);
    for (size_t i = 0; i < tg__type_count; i++)
        round_trip(tg__types[i], false);
}

static void test_every_type_required_only(void **state)
{
    (void)state;
    for (size_t i = 0; i < tg__type_count; i++)
        round_trip(tg__types[i], true);
}

static void test_tables_are_consistent(void **state)
{
    (void)state;
    size_t fields = 0;
    for (size_t i = 0; i < tg__type_count; i++) {
        const tg__type *t = tg__types[i];
        if (i > 0)
            assert_true(strcmp(tg__types[i - 1]->name, t->name) < 0);
        assert_ptr_equal(tg__codec_type_by_name(t->name), t);
        assert_true((t->nslots & (t->nslots - 1)) == 0);
        for (uint16_t j = 0; j < t->nfields; j++) {
            const tg__field *fd = &t->fields[j];
            assert_ptr_equal(tg__codec_lookup(t, fd->name, fd->name_len), fd);
            assert_true(fd->off < t->size);
            fields++;
        }
        assert_null(tg__codec_lookup(t, "no_such_field_here", 18));
        if (t->is_union)
            assert_true(t->nmembers > 0);
    }
    /* 1838 fields of the page's types; unions have none of their own */
    if (strcmp(TG_BOT_API_VERSION, "10.2") == 0)
        assert_int_equal(fields, 1838);
    assert_null(tg__codec_type_by_name("NoSuchType"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tables_are_consistent),
        cmocka_unit_test(test_every_type_full),
        cmocka_unit_test(test_every_type_required_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
