/*
 * Differential test of the JSON tokenizer against jansson as an independent oracle.
 *
 * Corpus: hand-written edge documents, the shared Bot API fixtures, randomly generated valid
 * documents, and random mutations of all of those (xorshift with a fixed seed, bounded count,
 * so every run sees the same inputs). For each input both parsers must agree on accept or
 * reject; for accepted ones the structure, every string's bytes and every number's value
 * must agree.
 *
 * jansson is called with JSON_DECODE_ANY (scalars at the top level) and JSON_ALLOW_NUL
 * (RFC 8259 allows "\u0000"); duplicate keys are allowed by both (jansson keeps the last
 * one, so objects are compared last-wins). Cases where the two legitimately differ are
 * skipped and counted, never silently:
 *  - integer literals beyond int64 ("too big integer"): RFC 8259 leaves range to the
 *    implementation; the tokenizer accepts them and tg__json_get_i64 reports the range;
 *  - reals that overflow a double ("real number overflow"): same, tg__json_get_double errs;
 *  - "\u0000" inside an object key: jansson cannot store it ("NUL byte in object key");
 *  - nesting deeper than our limit (64): jansson allows 2048;
 *  - a NUL byte after the top-level value: jansson takes it as the end of the input and
 *    ignores what follows; RFC 8259 has no such rule, so we reject it.
 */
#include "tgtest.h"

#include <jansson.h>

#include "bot/json/json.h"

static tg__jdoc doc;
static tg__arena arena;

struct stats {
    unsigned accepted, rejected, skipped, total;
};

static uint64_t rng_state;

static uint64_t rnd(void)
{
    return tgtest_xorshift64(&rng_state);
}

static size_t rnd_below(size_t n)
{
    return n ? (size_t)(rnd() % n) : 0;
}

static void dump(const char *what, const char *s, size_t n)
{
    char out[600];
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < sizeof out; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7F && c != '\\')
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, sizeof out - o, "\\x%02x", c);
    }
    out[o] = '\0';
    print_message("%s: %s\n", what, out);
}

static bool same(uint32_t t, json_t *j, int depth);

/* Last-wins comparison of object members. */
static bool same_object(uint32_t t, json_t *j, int depth)
{
    const tg__jtok *o = &doc.toks[t];
    size_t distinct = 0;
    for (uint32_t k = t + 1; k < o->next; k = doc.toks[k + 1].next) {
        size_t n;
        char *key = tg__json_str_dup(&doc, k, &arena, &n);
        if (!key)
            return false;
        bool last = true;
        for (uint32_t l = doc.toks[k + 1].next; l < o->next && last; l = doc.toks[l + 1].next)
            last = !tg__json_str_eq(&doc, l, key, n);
        if (!last)
            continue;
        distinct++;
        json_t *v = json_object_getn(j, key, n);
        if (!v || !same(k + 1, v, depth + 1))
            return false;
    }
    return distinct == json_object_size(j);
}

static bool same_number(uint32_t t, json_t *j)
{
    if (doc.toks[t].flags & TG__JF_FRAC) {
        double v;
        if (!json_is_real(j) || tg__json_get_double(&doc, t, &v, NULL) != 0)
            return false;
        double w = json_real_value(j);
        return memcmp(&v, &w, sizeof v) == 0;
    }
    int64_t v;
    return json_is_integer(j) && tg__json_get_i64(&doc, t, &v, NULL) == 0 &&
           v == (int64_t)json_integer_value(j);
}

static bool same(uint32_t t, json_t *j, int depth)
{
    const tg__jtok *k = &doc.toks[t];
    if (depth > 100)
        return false;
    switch (k->type) {
    case TG__J_OBJECT:
        return json_is_object(j) && same_object(t, j, depth);
    case TG__J_ARRAY: {
        if (!json_is_array(j) || json_array_size(j) != k->count)
            return false;
        size_t i = 0;
        for (uint32_t c = t + 1; c < k->next; c = doc.toks[c].next, i++)
            if (!same(c, json_array_get(j, i), depth + 1))
                return false;
        return true;
    }
    case TG__J_STRING: {
        size_t n;
        char *s = tg__json_str_dup(&doc, t, &arena, &n);
        return json_is_string(j) && s && json_string_length(j) == n &&
               memcmp(json_string_value(j), s, n) == 0;
    }
    case TG__J_NUMBER:
        return same_number(t, j);
    case TG__J_TRUE:
        return json_is_true(j);
    case TG__J_FALSE:
        return json_is_false(j);
    case TG__J_NULL:
        return json_is_null(j);
    default:
        return false;
    }
}

static bool legit_difference(const tg__jerr *ours, int our_rc, const json_error_t *theirs,
                             bool they_ok)
{
    if (our_rc == 0 && !they_ok)
        return strstr(theirs->text, "too big") || strstr(theirs->text, "real number overflow") ||
               strstr(theirs->text, "NUL byte in object key");
    if (our_rc != 0 && they_ok)
        return strstr(ours->msg, "nesting depth") != NULL ||
               strcmp(ours->msg, "document: expected end of input after the value, "
                                 "found byte 0x00") == 0;
    return false;
}

/* Compare one input; returns false on a real disagreement (after printing it). */
static bool check(const char *s, size_t n, struct stats *st)
{
    tg__jerr err;
    json_error_t je;
    st->total++;
    tg__arena_reset(&arena);
    int rc = tg__json_parse(&doc, s, n, &err);
    json_t *j = json_loadb(s, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    bool ok = true;
    if ((rc == 0) != (j != NULL)) {
        if (legit_difference(&err, rc, &je, j != NULL)) {
            st->skipped++;
        } else {
            dump("disagreement on", s, n);
            print_message("ours: %s; jansson: %s\n", rc ? err.msg : "accept",
                          j ? "accept" : je.text);
            ok = false;
        }
    } else if (rc == 0) {
        st->accepted++;
        if (!same(0, j, 0)) {
            dump("different values for", s, n);
            ok = false;
        }
    } else {
        st->rejected++;
    }
    json_decref(j);
    return ok;
}

/* clang-format off */
static const char *const edge_docs[] = {
    "0", "-0", "-0.0", "1e5", "1E-5", "123456789012345678", "9223372036854775807",
    "-9223372036854775808", "9223372036854775808", "1e400", "1e-400", "0.1", "[]", "{}",
    "\"\"", "\"\\u0000\"", "{\"\\u0000\":1}", "{\"a\\u0000b\":1}", "\"\\ud83d\\ude00\"",
    "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"\xed\xa0\x80\"", "\"\xc0\xaf\"",
    "\"\xf4\x90\x80\x80\"", "\"\xf4\x8f\xbf\xbf\"", "\"\xe2\x82\"", "[1,]", "{\"a\":1,}",
    "01", "-", "1.", ".5", "1e", "+1", "[1 2]", "{\"a\" 1}", "\"a\tb\"", "\"\\x\"",
    "{\"a\":1,\"a\":2}", "{\"a\":1,\"b\":2,\"a\":3}", " \t\r\n[ ]\r\n", "\0131",
    "[\"\\/\",\"\\b\\f\\n\\r\\t\"]", "truex", "nul", "[true,false,null]", "{\"\":\"\"}",
    "[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]", "\"\x7f\"", "\"\xef\xbb\xbf\"",
    "\xef\xbb\xbf{}", "/**/1", "[1e+2,-3E-4,5.5e0]", "\"\\uFFFE\\uFFFF\"",
};
/* clang-format on */

static const char *const fixtures[] = {
    "small_update.json",   "large_update.json",    "sendmessage_response.json",
    "getme_response.json", "dispatch_update.json",
};

static const char interesting[] = "{}[],:\"\\ \t\n0123456789-+.eEtfnu/\x01\x1f\x7f\x80\xbf"
                                  "\xc0\xc3\xe2\xed\xf0\xf4\xff";

static size_t mutate(const char *in, size_t n, char *out, size_t cap)
{
    if (n > cap / 2)
        n = cap / 2;
    memcpy(out, in, n);
    int rounds = 1 + (int)rnd_below(3);
    for (int r = 0; r < rounds; r++) {
        size_t pos = rnd_below(n + 1);
        char c = (rnd() & 1) ? interesting[rnd_below(sizeof interesting - 1)] : (char)rnd();
        switch (rnd_below(6)) {
        case 0: /* replace */
            if (pos < n)
                out[pos] = c;
            break;
        case 1: /* delete */
            if (pos < n) {
                memmove(out + pos, out + pos + 1, n - pos - 1);
                n--;
            }
            break;
        case 2: /* insert */
            if (n < cap) {
                memmove(out + pos + 1, out + pos, n - pos);
                out[pos] = c;
                n++;
            }
            break;
        case 3: { /* duplicate a slice */
            size_t from = rnd_below(n + 1), len = rnd_below(16);
            if (from + len > n)
                len = n - from;
            if (n + len <= cap) {
                char slice[16];
                memcpy(slice, out + from, len);
                memmove(out + pos + len, out + pos, n - pos);
                memcpy(out + pos, slice, len);
                n += len;
            }
            break;
        }
        case 4: /* truncate */
            n = pos;
            break;
        default: { /* swap */
            size_t q = rnd_below(n + 1);
            if (pos < n && q < n) {
                char t = out[pos];
                out[pos] = out[q];
                out[q] = t;
            }
            break;
        }
        }
    }
    return n;
}

/* ---- generator of valid documents (independent of our writer) ---- */

static void gen_ws(tg__buf *b)
{
    static const char ws[] = " \t\r\n";
    while (rnd_below(4) == 0)
        tg__buf_putc(b, ws[rnd_below(4)]);
}

static void gen_string(tg__buf *b)
{
    static const char *const pieces[] = {
        "a",
        "Z",
        " ",
        "\\\"",
        "\\\\",
        "\\/",
        "\\b",
        "\\f",
        "\\n",
        "\\r",
        "\\t",
        "\\u0041",
        "\\u00e9",
        "\\u20ac",
        "\\ud83d\\ude00",
        "\\uDBFF\\uDFFF",
        "\\u0000",
        "\\u001f",
        "\xc3\xa9",
        "\xe2\x82\xac",
        "\xf0\x9f\x98\x80",
        "\xf4\x8f\xbf\xbf",
        "\xed\x9f\xbf",
        "\xee\x80\x80",
        "\x7f",
        "long ascii run of text",
        "\\uffff",
    };
    tg__buf_putc(b, '"');
    size_t n = rnd_below(6);
    for (size_t i = 0; i < n; i++)
        tg__buf_puts(b, pieces[rnd_below(sizeof pieces / sizeof pieces[0])]);
    tg__buf_putc(b, '"');
}

static void gen_number(tg__buf *b)
{
    if (rnd() & 1)
        tg__buf_putc(b, '-');
    if (rnd_below(4) == 0)
        tg__buf_putc(b, '0');
    else
        tg__buf_printf(b, "%llu", (unsigned long long)(rnd() >> rnd_below(64)));
    if (rnd_below(3) == 0)
        tg__buf_printf(b, ".%0*llu", (int)(1 + rnd_below(5)),
                       (unsigned long long)rnd_below(100000));
    if (rnd_below(4) == 0)
        tg__buf_printf(b, "%c%s%d", rnd() & 1 ? 'e' : 'E',
                       rnd() & 1     ? "-"
                       : (rnd() & 1) ? "+"
                                     : "",
                       (int)rnd_below(330));
}

static void gen_value(tg__buf *b, int depth)
{
    size_t kind = rnd_below(depth > 6 ? 5 : 7);
    gen_ws(b);
    switch (kind) {
    case 0:
        gen_string(b);
        break;
    case 1:
        gen_number(b);
        break;
    case 2:
        tg__buf_puts(b, "true");
        break;
    case 3:
        tg__buf_puts(b, rnd() & 1 ? "false" : "null");
        break;
    case 4:
        gen_number(b);
        break;
    case 5: {
        size_t n = rnd_below(5);
        tg__buf_putc(b, '[');
        for (size_t i = 0; i < n; i++) {
            if (i)
                tg__buf_putc(b, ',');
            gen_value(b, depth + 1);
        }
        gen_ws(b);
        tg__buf_putc(b, ']');
        break;
    }
    default: {
        size_t n = rnd_below(5);
        tg__buf_putc(b, '{');
        for (size_t i = 0; i < n; i++) {
            if (i)
                tg__buf_putc(b, ',');
            gen_ws(b);
            gen_string(b);
            gen_ws(b);
            tg__buf_putc(b, ':');
            gen_value(b, depth + 1);
        }
        gen_ws(b);
        tg__buf_putc(b, '}');
        break;
    }
    }
    gen_ws(b);
}

static void test_edge_documents(void **state)
{
    (void)state;
    struct stats st = {0};
    unsigned bad = 0;
    for (size_t i = 0; i < sizeof edge_docs / sizeof edge_docs[0]; i++)
        bad += !check(edge_docs[i], strlen(edge_docs[i]), &st);
    print_message("edge: %u inputs, %u accepted, %u rejected, %u skipped\n", st.total, st.accepted,
                  st.rejected, st.skipped);
    assert_int_equal(bad, 0);
    assert_true(st.accepted >= 20 && st.rejected >= 20);
    assert_true(st.skipped <= 6);
}

static void test_fixtures_and_mutations(void **state)
{
    (void)state;
    struct stats st = {0};
    unsigned bad = 0;
    char *mut = malloc(8192);
    assert_non_null(mut);
    rng_state = 0x2545F4914F6CDD1DULL;
    for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) {
        char rel[128];
        snprintf(rel, sizeof rel, "fixtures/botapi/%s", fixtures[f]);
        size_t len;
        char *src = tgtest_read_file(tgtest_data_path(rel), &len);
        assert_non_null(src);
        bad += !check(src, len, &st);
        for (int i = 0; i < 6000 && bad < 5; i++) {
            size_t n = mutate(src, len, mut, 8192);
            bad += !check(mut, n, &st);
        }
        free(src);
    }
    for (size_t e = 0; e < sizeof edge_docs / sizeof edge_docs[0]; e++)
        for (int i = 0; i < 200 && bad < 5; i++) {
            size_t n = mutate(edge_docs[e], strlen(edge_docs[e]), mut, 8192);
            bad += !check(mut, n, &st);
        }
    free(mut);
    print_message("mutations: %u inputs, %u accepted, %u rejected, %u skipped\n", st.total,
                  st.accepted, st.rejected, st.skipped);
    assert_int_equal(bad, 0);
    assert_true(st.accepted >= 1000 && st.rejected >= 10000);
}

static void test_generated_documents(void **state)
{
    (void)state;
    struct stats st = {0};
    unsigned bad = 0;
    tg__buf b;
    tg__buf_init(&b, 1 << 20);
    char *mut = malloc(8192);
    assert_non_null(mut);
    rng_state = 0x853C49E6748FEA9BULL;
    for (int i = 0; i < 5000 && bad < 5; i++) {
        tg__buf_reset(&b);
        gen_value(&b, 0);
        unsigned acc = st.accepted, skip = st.skipped;
        bad += !check(b.data, b.len, &st);
        if (st.accepted == acc && st.skipped == skip) {
            dump("generated document rejected", b.data, b.len);
            bad++;
        }
        for (int m = 0; m < 4 && bad < 5; m++) {
            size_t n = mutate(b.data, b.len, mut, 8192);
            bad += !check(mut, n, &st);
        }
    }
    tg__buf_cleanup(&b);
    free(mut);
    print_message("generated: %u inputs, %u accepted, %u rejected, %u skipped\n", st.total,
                  st.accepted, st.rejected, st.skipped);
    assert_int_equal(bad, 0);
    assert_true(st.accepted >= 4000);
}

static int setup(void **state)
{
    (void)state;
    tg__jdoc_init(&doc, NULL);
    tg__arena_init(&arena, 0, 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tg__jdoc_cleanup(&doc);
    tg__arena_cleanup(&arena);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_edge_documents),
        cmocka_unit_test(test_fixtures_and_mutations),
        cmocka_unit_test(test_generated_documents),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
