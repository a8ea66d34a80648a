/*
 * Tests of the JSON tokenizer: RFC 8259 accept/reject table, token structure, limits,
 * error messages and paths, allocation behaviour (warm parse is malloc-free, OOM is clean).
 * Accessors and the writer are in test_json_values.c, jansson differential in
 * test_json_diff.c.
 */
#include "tgtest.h"

#include "bot/json/json.h"
#include "core/alloc.h"
#include "core/arena.h"

struct acase {
    const char *in;
    size_t len;
    bool ok;
};

/* The table reads best packed by topic. */
/* clang-format off */
#define OK(s)  {(s), sizeof(s) - 1, true}
#define BAD(s) {(s), sizeof(s) - 1, false}

static const struct acase cases[] = {
    /* scalars and numbers */
    OK("0"), OK("-0"), OK("1"), OK("-1"), OK("123"), OK("0.5"), OK("-0.5"), OK("1e5"),
    OK("1E5"), OK("1e+5"), OK("1e-5"), OK("1.5e10"), OK("0e0"), OK("-0.0e-0"),
    OK("9223372036854775808"), OK("1e400"), OK("123456789012345678901234567890"),
    OK("true"), OK("false"), OK("null"),
    /* whitespace: exactly space, tab, LF, CR */
    OK(" 1 "), OK("\t\n\r 1\t\n\r "), OK(" [ 1 , 2 ] "), OK("{ \"a\" : 1 }"),
    /* strings */
    OK("\"\""), OK("\"abc\""), OK("\"\\u0000\""), OK("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\""),
    OK("\"\\u00e9\""), OK("\"\\uD83D\\uDE00\""), OK("\"\\ud83d\\ude00\""), OK("\"\\u0041\""),
    OK("\"\\uFFFF\""), OK("\"\\uE000\""), OK("\"\\uDBFF\\uDFFF\""), OK("\"\xc3\xa9\""),
    OK("\"\xe2\x82\xac\""), OK("\"\xf0\x9f\x98\x80\""), OK("\"\xef\xbf\xbf\""),
    OK("\"\xf4\x8f\xbf\xbf\""), OK("\"\xee\x80\x80\""), OK("\"\xed\x9f\xbf\""),
    OK("\"\x7f\""), OK("\"\xe2\x80\xa8\""), OK("\"/\""),
    OK("\"a long string that spans several 8-byte words\""),
    OK("\"0123456\\\"89abcdef\\\\0123\""), OK("\"01234567\xc3\xa9" "89abcdef\""),
    /* containers */
    OK("[]"), OK("{}"), OK("[[]]"), OK("[{}]"), OK("[1,[2,[3]]]"),
    OK("{\"a\":{\"b\":{\"c\":[]}}}"), OK("[true,false,null]"), OK("{\"\":0}"),
    OK("{\"a\":1,\"a\":2}"), OK("[\"a\",{\"b\":[1,\"c\"]},-2.5e-3]"),
    /* empty or nothing but whitespace */
    BAD(""), BAD(" "), BAD("\n\t"),
    /* trailing and missing commas */
    BAD("[1,]"), BAD("{\"a\":1,}"), BAD("[,1]"), BAD("{,}"), BAD("[1,,2]"), BAD("[1 2]"),
    BAD("{\"a\":1 \"b\":2}"),
    /* comments */
    BAD("/*c*/1"), BAD("1 //c"), BAD("# c\n1"), BAD("[1/*c*/]"),
    /* numbers */
    BAD("01"), BAD("-01"), BAD("00"), BAD("-"), BAD("1."), BAD(".5"), BAD("1e"), BAD("1e+"),
    BAD("1.e5"), BAD("+1"), BAD("0x10"), BAD("NaN"), BAD("Infinity"), BAD("-Infinity"),
    BAD("--1"), BAD("1e5.5"), BAD("1.5.5"), BAD("-.5"), BAD("[-]"), BAD("1E"), BAD("1ee5"),
    /* literals */
    BAD("tru"), BAD("truee"), BAD("nul"), BAD("True"), BAD("NULL"), BAD("fals"),
    /* garbage after the value */
    BAD("1 2"), BAD("[1] x"), BAD("{} {}"), BAD("[1]]"), BAD("\"a\"\"b\""), BAD("1\0"),
    /* strings: quoting and escapes */
    BAD("'a'"), BAD("\"abc"), BAD("\"\\x\""), BAD("\"\\u12\""), BAD("\"\\u12g4\""),
    BAD("\"\\U0041\""), BAD("\"\\"), BAD("\"\\u"), BAD("\"\\'\""), BAD("\"\\a\""),
    /* lone surrogate escapes */
    BAD("\"\\ud800\""), BAD("\"\\udc00\""), BAD("\"\\ud800\\u0041\""), BAD("\"\\ud800x\""),
    BAD("\"\\ud800\\\"\""), BAD("\"\\udc00\\ud800\""), BAD("\"\\ud800\\ud800\""),
    BAD("\"\\uDBFF\""), BAD("\"\\ud800\\u"), BAD("\"\\ud800\\udc0\""),
    /* raw control characters in strings */
    BAD("\"a\x01" "b\""), BAD("\"\x1f\""), BAD("\"a\tb\""), BAD("\"a\nb\""), BAD("\"\0\""),
    /* invalid UTF-8 */
    BAD("\"\xc0\xaf\""), BAD("\"\xe0\x80\xaf\""), BAD("\"\xf0\x80\x80\xaf\""),
    BAD("\"\xc1\xbf\""), BAD("\"\xed\xa0\x80\""), BAD("\"\xed\xbf\xbf\""),
    BAD("\"\xf4\x90\x80\x80\""), BAD("\"\xf5\x80\x80\x80\""), BAD("\"\xff\""), BAD("\"\x80\""),
    BAD("\"\xc3\""), BAD("\"\xe2\x82\""), BAD("\"\xf0\x9f\x98\""), BAD("\"\xe2\x28\xa1\""),
    BAD("\"\xc3\xa9\xa9\""), BAD("\"0123456789\xfe\""), BAD("\xc3\xa9"),
    /* structure */
    BAD("[1"), BAD("["), BAD("{"), BAD("{\"a\""), BAD("{\"a\":"), BAD("{\"a\":1"),
    BAD("{1:2}"), BAD("{\"a\" 1}"), BAD("{\"a\"::1}"), BAD("[1:2]"), BAD("{\"a\",1}"),
    BAD("]"), BAD("}"), BAD("[}"), BAD("{]"), BAD("{\"a\":1]"), BAD("[{]}"), BAD(","),
    BAD(":"), BAD("{null:1}"),
    /* whitespace that RFC 8259 does not allow */
    BAD("\x0b" "1"), BAD("\x0c" "1"), BAD("\xc2\xa0" "1"), BAD("\xef\xbb\xbf" "1"),
};
/* clang-format on */

static void test_accept_reject_table(void **state)
{
    (void)state;
    tg__jdoc d;
    tg__jdoc_init(&d, NULL);
    size_t n = sizeof cases / sizeof cases[0];
    assert_true(n >= 80);
    for (size_t i = 0; i < n; i++) {
        tg__jerr err;
        memset(&err, 0, sizeof err);
        int rc = tg__json_parse(&d, cases[i].in, cases[i].len, &err);
        if ((rc == 0) != cases[i].ok)
            fail_msg("case %zu (%.*s): expected %s, got %s (%s)", i, (int)cases[i].len, cases[i].in,
                     cases[i].ok ? "accept" : "reject", rc ? "reject" : "accept",
                     rc ? err.msg : "-");
        if (rc != 0) {
            assert_true(err.msg[0] != '\0');
            assert_non_null(strstr(err.msg, ": expected "));
            assert_true(err.offset <= cases[i].len);
        }
    }
    tg__jdoc_cleanup(&d);
}

static tg__jdoc doc;

static int setup(void **state)
{
    (void)state;
    tg__jdoc_init(&doc, NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tg__jdoc_cleanup(&doc);
    return 0;
}

static void parse_ok(const char *s)
{
    tg__jerr err;
    if (tg__json_parse(&doc, s, strlen(s), &err) != 0)
        fail_msg("parse of %s failed: %s", s, err.msg);
}

static void test_token_structure(void **state)
{
    (void)state;
    const char *s = "{\"a\":[1,-2.5,{\"b\":null}],\"c\":\"x\\ny\",\"d\":true}";
    parse_ok(s);
    assert_int_equal(doc.ntok, 12);
    const tg__jtok *t = doc.toks;
    assert_int_equal(t[0].type, TG__J_OBJECT);
    assert_int_equal(t[0].count, 3);
    assert_int_equal(t[0].next, 12);
    assert_int_equal(t[0].start, 0);
    assert_int_equal(t[0].len, strlen(s));
    assert_int_equal(t[1].type, TG__J_STRING);
    assert_int_equal(t[1].start, 2);
    assert_int_equal(t[1].len, 1);
    assert_int_equal(t[2].type, TG__J_ARRAY);
    assert_int_equal(t[2].count, 3);
    assert_int_equal(t[2].next, 8);
    assert_int_equal(t[3].type, TG__J_NUMBER);
    assert_int_equal(t[3].flags, 0);
    assert_int_equal(t[4].flags, TG__JF_NEG | TG__JF_FRAC);
    assert_int_equal(t[4].len, 4);
    assert_int_equal(t[5].type, TG__J_OBJECT);
    assert_int_equal(t[5].count, 1);
    assert_int_equal(t[5].next, 8);
    assert_int_equal(t[7].type, TG__J_NULL);
    assert_int_equal(t[9].type, TG__J_STRING);
    assert_int_equal(t[9].flags, TG__JF_ESCAPED);
    assert_int_equal(t[9].len, 4);
    assert_int_equal(t[11].type, TG__J_TRUE);
    size_t n;
    const char *raw = tg__json_raw(&doc, 9, &n);
    assert_int_equal(n, 6);
    assert_memory_equal(raw, "\"x\\ny\"", 6);
    raw = tg__json_raw(&doc, 2, &n);
    assert_int_equal(n, strlen("[1,-2.5,{\"b\":null}]"));
    assert_memory_equal(raw, "[1,-2.5,{\"b\":null}]", n);
    assert_int_equal(tg__json_obj_get(&doc, 0, "d"), 11);
    assert_int_equal(tg__json_obj_get(&doc, 0, "c"), 9);
    assert_int_equal(tg__json_obj_get(&doc, 0, "zz"), UINT32_MAX);
    assert_int_equal(tg__json_obj_get(&doc, 2, "a"), UINT32_MAX);
}

/* Issue 21 item 12: "a\u0000b" is valid JSON (RFC 8259) and tokenizes, flagged TG__JF_NUL;
 * the string accessors keep its length (the codec, whose structs hold NUL-terminated strings,
 * refuses it: test_api_decode.c). No other escape sets the flag. */
static void test_nul_escape_is_flagged(void **state)
{
    (void)state;
    parse_ok("[\"a\\u0000b\",\"\\u0000\",\"a\\u0001\",\"\\ud83d\\ude00\",\"x\\n\",\"00\\\\u0000\","
             "\"ok\"]");
    const tg__jtok *t = doc.toks;
    assert_int_equal(t[1].flags, TG__JF_ESCAPED | TG__JF_NUL);
    assert_int_equal(t[2].flags, TG__JF_ESCAPED | TG__JF_NUL);
    assert_int_equal(t[3].flags, TG__JF_ESCAPED);
    assert_int_equal(t[4].flags, TG__JF_ESCAPED);
    assert_int_equal(t[5].flags, TG__JF_ESCAPED);
    assert_int_equal(t[6].flags, TG__JF_ESCAPED); /* "00\\u0000": a backslash, then text */
    assert_int_equal(t[7].flags, 0);
    tg__arena a;
    tg__arena_init(&a, 0, 0);
    size_t n;
    char *s = tg__json_str_dup(&doc, 1, &a, &n);
    assert_non_null(s);
    assert_int_equal(n, 3);
    assert_memory_equal(s, "a\0b", 4);
    char buf[8];
    assert_int_equal(tg__json_str_copy(&doc, 1, buf, sizeof buf), 3);
    assert_memory_equal(buf, "a\0b", 4);
    assert_true(tg__json_str_eq(&doc, 1, "a\0b", 3));
    assert_false(tg__json_str_eq(&doc, 1, "a", 1));
    tg__arena_cleanup(&a);
}

/* next is always past the subtree, and skipping children by next visits exactly count. */
static void test_next_and_count_invariants(void **state)
{
    (void)state;
    parse_ok("[[1,[2,3],{}],{\"k\":[[],[[]]],\"l\":{\"m\":{}}},\"s\",[]]");
    for (uint32_t i = 0; i < doc.ntok; i++) {
        const tg__jtok *t = &doc.toks[i];
        assert_true(t->next > i && t->next <= doc.ntok);
        if (t->type != TG__J_OBJECT && t->type != TG__J_ARRAY) {
            assert_int_equal(t->next, i + 1);
            continue;
        }
        uint32_t c = i + 1, seen = 0, per = t->type == TG__J_OBJECT ? 2 : 1;
        while (c < t->next && seen < doc.ntok) {
            c = doc.toks[c].next;
            seen++;
        }
        assert_int_equal(c, t->next);
        assert_int_equal(seen, t->count * per);
    }
}

static void check_err(const char *in, const char *msg, size_t offset, const char *full)
{
    tg__jerr err;
    assert_int_equal(tg__json_parse(&doc, in, strlen(in), &err), -1);
    if (strcmp(err.msg, msg) != 0)
        fail_msg("%s: got \"%s\", want \"%s\"", in, err.msg, msg);
    assert_int_equal(err.offset, offset);
    tg__buf b;
    tg__buf_init(&b, 0);
    assert_int_equal(tg__json_errmsg(&doc, &err, &b), 0);
    if (strcmp(tg__buf_cstr(&b), full) != 0)
        fail_msg("%s: got \"%s\", want \"%s\"", in, tg__buf_cstr(&b), full);
    tg__buf_cleanup(&b);
}

static void test_error_messages(void **state)
{
    (void)state;
    check_err("", "value: expected a JSON value, found end of input", 0,
              "value: expected a JSON value, found end of input (at byte 0)");
    check_err("[1,]", "value: expected a JSON value, found ']'", 3,
              "value: expected a JSON value, found ']' (at byte 3)");
    check_err("{\"a\":1,}", "object: expected a '\"' starting a member name, found '}'", 7,
              "object: expected a '\"' starting a member name, found '}' (at byte 7)");
    check_err("012", "number: expected no leading zeros, found a digit after '0'", 1,
              "number: expected no leading zeros, found a digit after '0' (at byte 1)");
    check_err("{\"result\":{\"entities\":[{\"offset\":1},{\"x\":[1,}]}}",
              "value: expected a JSON value, found '}'", 44,
              "result.entities[1].x: value: expected a JSON value, found '}' (at byte 44)");
    check_err("{\"ok\":true,\"result\":{\"a b\":[1 2]}}", "array: expected ',' or ']', found '2'",
              30, "result[\"a b\"]: array: expected ',' or ']', found '2' (at byte 30)");
    check_err("{\"a\":\"x\x01\"}",
              "string: expected '\\u00XX' escape for a control character, "
              "found byte 0x01",
              7,
              "string: expected '\\u00XX' escape for a control character, found byte 0x01 "
              "(at byte 7)");
    check_err("[\"\xed\xa0\x80\"]", "string: expected valid UTF-8, found byte 0xed", 2,
              "string: expected valid UTF-8, found byte 0xed (at byte 2)");
    check_err("1 x", "document: expected end of input after the value, found 'x'", 2,
              "document: expected end of input after the value, found 'x' (at byte 2)");
    check_err("[tru]", "literal: expected 'true', found ']'", 4,
              "literal: expected 'true', found ']' (at byte 4)");

    /* err.tok: the innermost open container, UINT32_MAX outside any. */
    tg__jerr err;
    assert_int_equal(tg__json_parse(&doc, "{\"a\":[1,}", 10, &err), -1);
    assert_int_equal(err.tok, 2);
    assert_int_equal(doc.ntok, 4);
    assert_int_equal(doc.toks[0].next, 4);
    assert_int_equal(doc.toks[2].next, 4);
    assert_int_equal(tg__json_parse(&doc, "1 x", 3, &err), -1);
    assert_int_equal(err.tok, UINT32_MAX);
    assert_int_equal(tg__json_parse(&doc, "[]]", 3, &err), -1);
    assert_int_equal(err.tok, UINT32_MAX);
}

static void check_path(const char *json, uint32_t tok, const char *want)
{
    parse_ok(json);
    tg__buf b;
    tg__buf_init(&b, 0);
    assert_int_equal(tg__json_path(&doc, tok, &b), 0);
    if (strcmp(tg__buf_cstr(&b), want) != 0)
        fail_msg("path of %u in %s: got \"%s\", want \"%s\"", tok, json, tg__buf_cstr(&b), want);
    tg__buf_cleanup(&b);
}

static void test_paths(void **state)
{
    (void)state;
    const char *j = "{\"ok\":true,\"result\":{\"entities\":[{\"offset\":1},{\"offset\":2},"
                    "{\"type\":\"x\",\"offset\":3}]}}";
    /* tokens: 0 {, 1 ok, 2 true, 3 result, 4 {, 5 entities, 6 [, 7 {, 8 offset, 9 1,
     * 10 {, 11 offset, 12 2, 13 {, 14 type, 15 "x", 16 offset, 17 3 */
    check_path(j, 0, "");
    check_path(j, 2, "ok");
    check_path(j, 6, "result.entities");
    check_path(j, 13, "result.entities[2]");
    check_path(j, 17, "result.entities[2].offset");
    check_path(j, 16, "result.entities[2].offset"); /* a key names its member */
    check_path(j, 12, "result.entities[1].offset");
    check_path("[[1,2],[3,[4,5]]]", 8, "[1][1][1]");
    check_path("{\"a b\":{\"x.y\":[0,{\"\":1}]}}", 8, "[\"a b\"][\"x.y\"][1][\"\"]");
    check_path("{\"q\\\"k\":1}", 2, "[\"q\\\"k\"]");
    check_path("{\"_a1\":{\"1a\":0}}", 4, "_a1[\"1a\"]");
    tg__buf b;
    tg__buf_init(&b, 0);
    assert_int_not_equal(tg__json_path(&doc, doc.ntok, &b), 0);
    tg__buf_cleanup(&b);
}

static void test_depth_limit(void **state)
{
    (void)state;
    char buf[300];
    for (int depth = 63; depth <= 66; depth++) {
        size_t n = 0;
        for (int i = 0; i < depth; i++)
            buf[n++] = '[';
        for (int i = 0; i < depth; i++)
            buf[n++] = ']';
        tg__jerr err;
        int rc = tg__json_parse(&doc, buf, n, &err);
        if (depth <= 64) {
            assert_int_equal(rc, 0);
            assert_int_equal(doc.ntok, depth);
        } else {
            assert_int_equal(rc, -1);
            assert_int_equal(err.offset, 64);
            assert_string_equal(err.msg,
                                "array: expected nesting depth at most 64, found depth 65");
        }
    }
    tg__jdoc small;
    tg__jdoc_init(&small, &(tg__jlimits){.max_depth = 2});
    tg__jerr err;
    assert_int_equal(tg__json_parse(&small, "{\"a\":[1]}", 9, &err), 0);
    assert_int_equal(tg__json_parse(&small, "{\"a\":[{}]}", 10, &err), -1);
    assert_string_equal(err.msg, "object: expected nesting depth at most 2, found depth 3");
    tg__jdoc_cleanup(&small);
}

static void test_size_and_token_limits(void **state)
{
    (void)state;
    tg__jdoc d;
    tg__jdoc_init(&d, &(tg__jlimits){.max_bytes = 8, .max_tokens = 3});
    tg__jerr err;
    assert_int_equal(tg__json_parse(&d, "[1,2]", 5, &err), 0);
    assert_int_equal(tg__json_parse(&d, "[1,2,3]", 7, &err), -1);
    assert_string_equal(err.msg, "document: expected fewer tokens, found more (limit 3)");
    assert_int_equal(tg__json_parse(&d, "\"123456789\"", 11, &err), -1);
    assert_string_equal(err.msg, "document: expected at most 8 bytes, found 11 bytes");
    assert_int_equal(err.offset, 0);
    tg__jdoc_cleanup(&d);
    tg__jdoc_cleanup(NULL); /* NULL-safe */

    tg__jdoc zeroed; /* never init'ed: parse falls back to the default limits */
    memset(&zeroed, 0, sizeof zeroed);
    assert_int_equal(tg__json_parse(&zeroed, "[[1],{}]", 8, &err), 0);
    assert_int_equal(zeroed.ntok, 4);
    assert_int_equal(zeroed.lim.max_depth, 64);
    tg__jdoc_cleanup(&zeroed);
}

static void test_warm_parse_allocates_nothing(void **state)
{
    (void)state;
    size_t len;
    char *src = tgtest_read_file(tgtest_data_path("fixtures/botapi/large_update.json"), &len);
    assert_non_null(src);
    tg__jdoc d;
    tg__jdoc_init(&d, NULL);
    tg__jerr err;
    assert_int_equal(tg__json_parse(&d, src, len, &err), 0);
    uint64_t before = tg__alloc_calls();
    for (int i = 0; i < 10; i++)
        assert_int_equal(tg__json_parse(&d, src, len, &err), 0);
    assert_int_equal(tg__alloc_calls() - before, 0);
    tg__jdoc_cleanup(&d);
    free(src);
}

static void test_oom_is_clean(void **state)
{
    (void)state;
    const char *s = "[1,2,3]";
    tg__jdoc d;
    tg__jdoc_init(&d, NULL);
    tg__jerr err;
    tg__alloc_fail_at(1);
    assert_int_equal(tg__json_parse(&d, s, strlen(s), &err), -1);
    assert_true(tg__alloc_failed());
    assert_non_null(strstr(err.msg, "out of memory"));
    tg__alloc_fail_at(0);
    assert_int_equal(tg__json_parse(&d, s, strlen(s), &err), 0);
    assert_int_equal(d.ntok, 4);
    tg__jdoc_cleanup(&d);
}

/* A doc grows its token array on demand and keeps it across parses. */
static void test_growth_and_reuse(void **state)
{
    (void)state;
    enum { N = 5000 };
    char *big = malloc(N * 2 + 2);
    assert_non_null(big);
    size_t n = 0;
    big[n++] = '[';
    for (int i = 0; i < N; i++) {
        big[n++] = '0';
        big[n++] = i + 1 < N ? ',' : ']';
    }
    tg__jerr err;
    assert_int_equal(tg__json_parse(&doc, big, n, &err), 0);
    assert_int_equal(doc.ntok, N + 1);
    assert_int_equal(doc.toks[0].count, N);
    uint32_t cap = doc.cap;
    parse_ok("[]");
    assert_int_equal(doc.cap, cap);
    assert_int_equal(doc.ntok, 1);
    free(big);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accept_reject_table),
        cmocka_unit_test_setup_teardown(test_token_structure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nul_escape_is_flagged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_next_and_count_invariants, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_messages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_paths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_depth_limit, setup, teardown),
        cmocka_unit_test(test_size_and_token_limits),
        cmocka_unit_test(test_warm_parse_allocates_nothing),
        cmocka_unit_test(test_oom_is_clean),
        cmocka_unit_test_setup_teardown(test_growth_and_reuse, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
