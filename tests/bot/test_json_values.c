/*
 * Tests of the JSON accessors (strings, integers, doubles, booleans) and of the writer
 * (commas, escaping, numbers, sticky errors, depth), plus write -> parse round trips of
 * doubles and of the shared Bot API fixtures.
 */
#include "tgtest.h"

#include <inttypes.h>

#include <errno.h>
#include <locale.h>
#include <math.h>

#include <jansson.h>

#include "bot/json/json.h"
#include "core/alloc.h"

static tg__jdoc doc;
static tg__arena arena;

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

static void parse_n(const char *s, size_t n)
{
    tg__jerr err;
    if (tg__json_parse(&doc, s, n, &err) != 0)
        fail_msg("parse of %.*s failed: %s", (int)n, s, err.msg);
}

static void parse_ok(const char *s)
{
    parse_n(s, strlen(s));
}

struct scase {
    const char *json;
    const char *want;
    size_t want_len;
};

#define S(j, w)                                                                                    \
    {                                                                                              \
        (j), (w), sizeof(w) - 1                                                                    \
    }

static const struct scase strings[] = {
    S("\"\"", ""),
    S("\"plain\"", "plain"),
    S("\"a\\\"b\"", "a\"b"),
    S("\"\\\\\\/\\b\\f\\n\\r\\t\"", "\\/\b\f\n\r\t"),
    S("\"\\u0041\\u00e9\\u20AC\"", "A\xc3\xa9\xe2\x82\xac"),
    S("\"\\u0000x\"", "\0x"),
    S("\"\\ud83d\\ude00!\"", "\xf0\x9f\x98\x80!"),
    S("\"\\uDBFF\\uDFFF\"", "\xf4\x8f\xbf\xbf"),
    S("\"\\ud800\\udc00\"", "\xf0\x90\x80\x80"),
    S("\"\\u07ff\\u0800\\uffff\"", "\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf"),
    S("\"caf\xc3\xa9 \\n end\"", "caf\xc3\xa9 \n end"),
};

static void test_strings(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) {
        const struct scase *c = &strings[i];
        parse_ok(c->json);
        size_t n = 12345;
        char *s = tg__json_str_dup(&doc, 0, &arena, &n);
        assert_non_null(s);
        assert_int_equal(n, c->want_len);
        assert_memory_equal(s, c->want, n);
        assert_int_equal(s[n], '\0');
        assert_true(tg__json_str_eq(&doc, 0, c->want, c->want_len));
        if (c->want_len > 0) {
            assert_false(tg__json_str_eq(&doc, 0, c->want, c->want_len - 1));
            char alt[64];
            memcpy(alt, c->want, c->want_len);
            alt[c->want_len - 1] ^= 1;
            assert_false(tg__json_str_eq(&doc, 0, alt, c->want_len));
        }
        assert_false(tg__json_str_eq(&doc, 0, "zzzzzzzzzzzzzzzzzzzz", 20));
        char out[64];
        assert_int_equal(tg__json_str_copy(&doc, 0, out, sizeof out), (long)c->want_len);
        assert_memory_equal(out, c->want, c->want_len);
        assert_int_equal(out[c->want_len], '\0');
        /* Exactly enough room for the NUL fits; one byte less does not. */
        assert_int_equal(tg__json_str_copy(&doc, 0, out, c->want_len + 1), (long)c->want_len);
        assert_int_equal(tg__json_str_copy(&doc, 0, out, c->want_len), -1);
    }
    parse_ok("[1]");
    assert_null(tg__json_str_dup(&doc, 0, &arena, NULL));
    assert_false(tg__json_str_eq(&doc, 1, "1", 1));
    assert_int_equal(tg__json_str_copy(&doc, 1, (char[4]){0}, 4), -1);
}

struct icase {
    const char *json;
    int rc64;
    int64_t v64;
    int rc32;
    const char *msg32; /* substring of the int32 error, or NULL */
};

static const struct icase ints[] = {
    {"0", 0, 0, 0, NULL},
    {"-0", 0, 0, 0, NULL},
    {"42", 0, 42, 0, NULL},
    {"-42", 0, -42, 0, NULL},
    {"2147483647", 0, 2147483647, 0, NULL},
    {"-2147483648", 0, -2147483647 - 1, 0, NULL},
    {"2147483648", 0, 2147483648, -1, "integer: 2147483648 is out of range for int32"},
    {"-2147483649", 0, -2147483649, -1, "out of range for int32"},
    {"-100123456789", 0, -100123456789, -1, "out of range for int32"},
    {"9223372036854775807", 0, INT64_MAX, -1, "out of range for int32"},
    {"-9223372036854775808", 0, INT64_MIN, -1, "out of range for int32"},
    {"9223372036854775808", -1, 0, -1, "out of range for int32"},
    {"-9223372036854775809", -1, 0, -1, "out of range for int32"},
    {"99999999999999999999999", -1, 0, -1, "out of range for int32"},
    {"1.0", -1, 0, -1, "value: expected integer, found number 1.0"},
    {"1e2", -1, 0, -1, "expected integer, found number 1e2"},
    {"\"1\"", -1, 0, -1, "value: expected integer, found string"},
    {"true", -1, 0, -1, "value: expected integer, found true"},
    {"null", -1, 0, -1, "value: expected integer, found null"},
};

static void test_integers(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        const struct icase *c = &ints[i];
        parse_ok(c->json);
        tg__jerr err;
        memset(&err, 0, sizeof err);
        int64_t v = 777;
        int rc = tg__json_get_i64(&doc, 0, &v, &err);
        if (rc != c->rc64 || (rc == 0 && v != c->v64))
            fail_msg("i64 %s: rc %d v %lld (%s)", c->json, rc, (long long)v, err.msg);
        if (rc != 0) {
            assert_int_equal(err.tok, 0);
            assert_true(err.msg[0] != '\0');
        }
        int32_t v32 = 777;
        memset(&err, 0, sizeof err);
        rc = tg__json_get_i32(&doc, 0, &v32, &err);
        assert_int_equal(rc, c->rc32);
        if (rc == 0)
            assert_int_equal(v32, c->v64);
        else if (!strstr(err.msg, c->msg32))
            fail_msg("i32 %s: message \"%s\" lacks \"%s\"", c->json, err.msg, c->msg32);
        else
            assert_int_equal(v32, 777); /* untouched on failure */
    }
}

static void check_double(const char *json, double want)
{
    parse_ok(json);
    double v = 12345.0;
    tg__jerr err;
    if (tg__json_get_double(&doc, 0, &v, &err) != 0)
        fail_msg("double %s: %s", json, err.msg);
    if (memcmp(&v, &want, sizeof v) != 0)
        fail_msg("double %s: got %.17g want %.17g", json, v, want);
}

static void test_doubles(void **state)
{
    (void)state;
    check_double("0", 0.0);
    check_double("-0", -0.0);
    check_double("-0.0", -0.0);
    check_double("0.1", 0.1);
    check_double("1.5", 1.5);
    check_double("-2.5e-3", -2.5e-3);
    check_double("1e22", 1e22);
    check_double("1e23", 1e23);
    check_double("123456789012345", 123456789012345.0);
    check_double("9007199254740993", 9007199254740993.0);
    check_double("0.30000000000000004", 0.30000000000000004);
    check_double("2.2250738585072014e-308", 2.2250738585072014e-308);
    check_double("4.9406564584124654e-324", 4.9406564584124654e-324);
    check_double("1.7976931348623157e308", 1.7976931348623157e308);
    check_double("0.1000000000000000055511151231257827021181583404541015625", 0.1);
    check_double("1e-400", 0.0);
    check_double("0e999999", 0.0);
    check_double("100000000000000000000000000000000000000000000000000000000000000000000000"
                 "000000000000000000000000000000000000000000000000000000000000000000000000"
                 "00000000000000000000000000000000",
                 1e175);
    check_double("1E+2", 100.0);
    check_double("0.000001", 1e-6);
    check_double("-9223372036854775808", -9223372036854775808.0);
    parse_ok("1e400");
    double v;
    tg__jerr err;
    assert_int_equal(tg__json_get_double(&doc, 0, &v, &err), -1);
    assert_non_null(strstr(err.msg, "out of range for double"));
    parse_ok("\"1.5\"");
    assert_int_equal(tg__json_get_double(&doc, 0, &v, &err), -1);
    assert_string_equal(err.msg, "value: expected number, found string");
}

/* strtod on its own would read "1,5"-style numbers under a comma locale. */
static void test_doubles_ignore_locale(void **state)
{
    (void)state;
    const char *loc = setlocale(LC_NUMERIC, "de_DE.UTF-8");
    if (!loc)
        loc = setlocale(LC_NUMERIC, "fr_FR.UTF-8");
    if (!loc)
        fail_msg("no de_DE.UTF-8 or fr_FR.UTF-8 locale: ctest's bot/comma_locale makes one "
                 "(localedef, Debian package locales) and passes it in LOCPATH");
    assert_string_equal(localeconv()->decimal_point, ","); /* really a comma locale */
    check_double("1.25e-7", 1.25e-7);
    check_double("3.14159265358979323846", 3.14159265358979323846);
    tg__buf b;
    tg__buf_init(&b, 0);
    tg__jw w;
    tg__jw_init(&w, &b);
    tg__jw_double(&w, 0.1);
    setlocale(LC_NUMERIC, "C");
    assert_int_equal(w.err, 0);
    assert_string_equal(tg__buf_cstr(&b), "0.1");
    tg__buf_cleanup(&b);
}

static void test_bools(void **state)
{
    (void)state;
    parse_ok("[true,false,null,0]");
    bool b = false;
    tg__jerr err;
    assert_int_equal(tg__json_get_bool(&doc, 1, &b, &err), 0);
    assert_true(b);
    assert_int_equal(tg__json_get_bool(&doc, 2, &b, &err), 0);
    assert_false(b);
    assert_int_equal(tg__json_get_bool(&doc, 3, &b, &err), -1);
    assert_string_equal(err.msg, "value: expected boolean, found null");
    assert_int_equal(err.tok, 3);
    assert_int_equal(err.offset, 12);
    assert_int_equal(tg__json_get_bool(&doc, 4, &b, &err), -1);
    assert_string_equal(err.msg, "value: expected boolean, found number 0");
}

static void test_fail_and_errmsg(void **state)
{
    (void)state;
    parse_ok("{\"result\":{\"entities\":[{\"offset\":1},{\"offset\":\"x\"}]}}");
    uint32_t r = tg__json_obj_get(&doc, 0, "result");
    uint32_t e = tg__json_obj_get(&doc, r, "entities");
    uint32_t second = doc.toks[e + 1].next;
    uint32_t off = tg__json_obj_get(&doc, second, "offset");
    assert_int_not_equal(off, UINT32_MAX);
    tg__jerr err;
    int32_t v;
    assert_int_equal(tg__json_get_i32(&doc, off, &v, &err), -1);
    tg__buf b;
    tg__buf_init(&b, 0);
    assert_int_equal(tg__json_errmsg(&doc, &err, &b), 0);
    assert_string_equal(tg__buf_cstr(&b), "result.entities[1].offset: value: expected integer, "
                                          "found string (at byte 46)");
    tg__buf_reset(&b);
    assert_int_equal(tg__json_fail(&doc, e, &err, "object"), -1);
    assert_int_equal(tg__json_errmsg(&doc, &err, &b), 0);
    assert_string_equal(tg__buf_cstr(&b),
                        "result.entities: value: expected object, found array (at byte 22)");
    tg__buf_cleanup(&b);
    assert_string_equal(tg__json_type_name(TG__J_FALSE), "false");
    assert_string_equal(tg__json_type_name((tg__jtype)99), "unknown");
}

/* ---- writer ---- */

static tg__buf wbuf;
static tg__jw w;

static int wsetup(void **state)
{
    setup(state);
    tg__buf_init(&wbuf, 0);
    tg__jw_init(&w, &wbuf);
    return 0;
}

static int wteardown(void **state)
{
    teardown(state);
    tg__buf_cleanup(&wbuf);
    return 0;
}

static void test_writer_structure(void **state)
{
    (void)state;
    tg__jw_obj_begin(&w);
    tg__jw_key(&w, "chat_id", 7);
    tg__jw_i64(&w, -100123456789);
    tg__jw_key(&w, "text", 4);
    tg__jw_str(&w, "hi");
    tg__jw_key(&w, "list", 4);
    tg__jw_arr_begin(&w);
    tg__jw_i64(&w, 1);
    tg__jw_arr_begin(&w);
    tg__jw_arr_end(&w);
    tg__jw_obj_begin(&w);
    tg__jw_obj_end(&w);
    tg__jw_null(&w);
    tg__jw_bool(&w, true);
    tg__jw_bool(&w, false);
    tg__jw_raw(&w, "{\"x\":[1]}", 9);
    tg__jw_str(&w, NULL);
    tg__jw_arr_end(&w);
    tg__jw_key(&w, "o", 1);
    tg__jw_obj_begin(&w);
    tg__jw_key(&w, "a", 1);
    tg__jw_double(&w, 0.5);
    tg__jw_obj_end(&w);
    tg__jw_obj_end(&w);
    assert_int_equal(w.err, 0);
    assert_int_equal(w.depth, 0);
    assert_string_equal(tg__buf_cstr(&wbuf),
                        "{\"chat_id\":-100123456789,\"text\":\"hi\",\"list\":[1,[],{},null,true,"
                        "false,{\"x\":[1]},null],\"o\":{\"a\":0.5}}");
}

static void test_writer_appends_after_content(void **state)
{
    (void)state;
    assert_int_equal(tg__buf_puts(&wbuf, "prefix:"), 0);
    tg__jw_arr_begin(&w);
    tg__jw_i64(&w, 1);
    tg__jw_i64(&w, 2);
    tg__jw_arr_end(&w);
    assert_int_equal(w.err, 0);
    assert_string_equal(tg__buf_cstr(&wbuf), "prefix:[1,2]");
}

static void test_writer_escaping(void **state)
{
    (void)state;
    const char in[] = "q\"b\\s/\b\f\n\r\t\x01\x1f\x7f caf\xc3\xa9 \xf0\x9f\x98\x80\xe2\x80\xa8";
    tg__jw_arr_begin(&w);
    tg__jw_strn(&w, in, sizeof in - 1);
    tg__jw_strn(&w, "a\0b", 3);
    tg__jw_arr_end(&w);
    assert_int_equal(w.err, 0);
    assert_string_equal(tg__buf_cstr(&wbuf),
                        "[\"q\\\"b\\\\s/\\b\\f\\n\\r\\t\\u0001\\u001f\x7f caf\xc3\xa9 "
                        "\xf0\x9f\x98\x80\xe2\x80\xa8\",\"a\\u0000b\"]");
    /* The output parses back to the same bytes. */
    parse_n(wbuf.data, wbuf.len);
    assert_true(tg__json_str_eq(&doc, 1, in, sizeof in - 1));
    assert_true(tg__json_str_eq(&doc, 2, "a\0b", 3));
}

/* Reference escaping, byte by byte (the writer scans eight bytes at a time). */
static size_t ref_escape(const char *in, size_t n, char *out)
{
    size_t o = 0;
    out[o++] = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)in[i];
        const char *short_form = c == '"'    ? "\\\""
                                 : c == '\\' ? "\\\\"
                                 : c == '\b'  ? "\\b"
                                 : c == '\f'  ? "\\f"
                                 : c == '\n'  ? "\\n"
                                 : c == '\r'  ? "\\r"
                                 : c == '\t'  ? "\\t"
                                               : NULL;
        if (short_form) {
            memcpy(out + o, short_form, 2);
            o += 2;
        } else if (c < 0x20) {
            o += (size_t)sprintf(out + o, "\\u%04x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    out[o++] = '"';
    out[o] = '\0';
    return o;
}

/* Every kind of special byte at every position of a 24-byte string, across the writer's
   8-byte words and its byte-by-byte tail. */
static void test_writer_escape_positions(void **state)
{
    (void)state;
    static const char *const specials[] = {"\"", "\\", "\n", "\x01", "\x1f", "\x00",
                                           "\xc3\xa9", "\xe2\x80\xa8", "\x7f", "/"};
    for (size_t k = 0; k < sizeof specials / sizeof specials[0]; k++) {
        size_t sl = k == 5 ? 1 : strlen(specials[k]);
        for (size_t pos = 0; pos + sl <= 24; pos++) {
            char in[24], want[24 * 6 + 3];
            memset(in, 'a' + (int)(pos % 26), sizeof in);
            memcpy(in + pos, specials[k], sl);
            size_t wl = ref_escape(in, sizeof in, want);
            tg__buf_reset(&wbuf);
            tg__jw_init(&w, &wbuf);
            tg__jw_strn(&w, in, sizeof in);
            assert_int_equal(w.err, 0);
            assert_int_equal(wbuf.len, wl);
            assert_memory_equal(wbuf.data, want, wl);
            parse_n(wbuf.data, wbuf.len);
            assert_true(tg__json_str_eq(&doc, 0, in, sizeof in));
        }
    }
}

static void test_writer_escaped_keys(void **state)
{
    (void)state;
    tg__jw_obj_begin(&w);
    tg__jw_key_escaped(&w, "a \"b\"", 5);
    tg__jw_i64(&w, 1);
    tg__jw_key_escaped(&w, "\n\0", 2);
    tg__jw_arr_begin(&w);
    tg__jw_arr_end(&w);
    tg__jw_key(&w, "plain", 5);
    tg__jw_null(&w);
    tg__jw_obj_end(&w);
    assert_int_equal(w.err, 0);
    assert_string_equal(tg__buf_cstr(&wbuf),
                        "{\"a \\\"b\\\"\":1,\"\\n\\u0000\":[],\"plain\":null}");
    parse_n(wbuf.data, wbuf.len);
    assert_true(tg__json_str_eq(&doc, 1, "a \"b\"", 5));
    assert_true(tg__json_str_eq(&doc, 3, "\n\0", 2));
    tg__jw_key_escaped(&w, "x", 1); /* depth 0: no object to put it in */
    assert_int_equal(w.err, -EINVAL);
    tg__buf_reset(&wbuf);
    tg__jw_init(&w, &wbuf);
    tg__jw_obj_begin(&w);
    tg__jw_key_escaped(&w, "\xff", 1);
    assert_int_equal(w.err, -EINVAL);
}

static void test_writer_rejects_invalid_utf8(void **state)
{
    (void)state;
    const char *bad[] = {"\xc0\xaf", "\xed\xa0\x80", "abc\xff", "\xe2\x82", "\x80"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tg__buf_reset(&wbuf);
        tg__jw_init(&w, &wbuf);
        tg__jw_str(&w, bad[i]);
        assert_int_equal(w.err, -EINVAL);
    }
}

static void test_writer_integers(void **state)
{
    (void)state;
    const int64_t vals[] = {0, 1, -1, 9, 10, 99, 100, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN};
    tg__jw_arr_begin(&w);
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++)
        tg__jw_i64(&w, vals[i]);
    tg__jw_arr_end(&w);
    assert_int_equal(w.err, 0);
    assert_string_equal(tg__buf_cstr(&wbuf),
                        "[0,1,-1,9,10,99,100,2147483647,-2147483648,9223372036854775807,"
                        "-9223372036854775808]");
    parse_n(wbuf.data, wbuf.len);
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        int64_t v;
        assert_int_equal(tg__json_get_i64(&doc, (uint32_t)i + 1, &v, NULL), 0);
        assert_true(v == vals[i]);
    }
    /* every digit count, both signs, against printf */
    int64_t v = 1;
    for (int digits = 1; digits <= 18; digits++, v = v * 10 + digits % 10) {
        for (int sign = -1; sign <= 1; sign += 2) {
            char want[32];
            snprintf(want, sizeof want, "%" PRId64, sign * v);
            tg__buf_reset(&wbuf);
            tg__jw_init(&w, &wbuf);
            tg__jw_i64(&w, sign * v);
            assert_string_equal(tg__buf_cstr(&wbuf), want);
        }
    }
}

static void test_writer_doubles(void **state)
{
    (void)state;
    struct {
        double v;
        const char *text;
    } cases[] = {
        {0.0, "0"},
        {-0.0, "-0"},
        {0.1, "0.1"},
        {1.5, "1.5"},
        {-2.5e-3, "-0.0025"},
        {1e21, "1e+21"},
        {100.0, "100"},
        {1.0 / 3, "0.3333333333333333"},
        {5e-324, "5e-324"},
        {-1e-310, "-1e-310"},
        {1.7976931348623157e308, "1.7976931348623157e+308"},
        {0.30000000000000004, "0.30000000000000004"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg__buf_reset(&wbuf);
        tg__jw_init(&w, &wbuf);
        tg__jw_double(&w, cases[i].v);
        assert_int_equal(w.err, 0);
        assert_string_equal(tg__buf_cstr(&wbuf), cases[i].text);
    }
    const double bad[] = {NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < 3; i++) {
        tg__buf_reset(&wbuf);
        tg__jw_init(&w, &wbuf);
        tg__jw_double(&w, bad[i]);
        assert_int_equal(w.err, -EINVAL);
        assert_int_equal(wbuf.len, 0);
    }
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* Random bit patterns: every finite double written reads back bit-exact. */
static void test_double_round_trip(void **state)
{
    (void)state;
    uint64_t seed = 0x9E3779B97F4A7C15ULL;
    int checked = 0;
    for (int i = 0; i < 20000; i++) {
        uint64_t bits = rng_next(&seed);
        double v;
        if (i % 4 == 0) /* also short decimals, the common case */
            v = (double)(int64_t)(bits % 2000001 - 1000000) / 1000.0;
        else
            memcpy(&v, &bits, sizeof v);
        if (!isfinite(v))
            continue;
        tg__buf_reset(&wbuf);
        tg__jw_init(&w, &wbuf);
        tg__jw_double(&w, v);
        assert_int_equal(w.err, 0);
        parse_n(wbuf.data, wbuf.len);
        double back;
        assert_int_equal(tg__json_get_double(&doc, 0, &back, NULL), 0);
        if (memcmp(&back, &v, sizeof v) != 0)
            fail_msg("%s read back as %.17g", wbuf.data, back);
        checked++;
    }
    assert_true(checked > 19000);
}

static void test_writer_sticky_errors_and_depth(void **state)
{
    (void)state;
    for (int i = 0; i < 64; i++)
        tg__jw_arr_begin(&w);
    assert_int_equal(w.err, 0);
    tg__jw_arr_begin(&w);
    assert_int_equal(w.err, -EINVAL);
    size_t len = wbuf.len;
    tg__jw_i64(&w, 1);
    tg__jw_arr_end(&w);
    assert_int_equal(wbuf.len, len); /* no-ops after the first error */
    assert_int_equal(w.err, -EINVAL);

    tg__buf_reset(&wbuf);
    tg__jw_init(&w, &wbuf);
    tg__jw_arr_end(&w); /* unbalanced */
    assert_int_equal(w.err, -EINVAL);

    tg__buf small;
    tg__buf_init(&small, 8);
    tg__jw_init(&w, &small);
    tg__jw_str(&w, "0123456789");
    assert_int_equal(w.err, -E2BIG);
    tg__jw_null(&w);
    assert_int_equal(w.err, -E2BIG);
    tg__buf_cleanup(&small);

    tg__buf_init(&small, 0);
    tg__jw_init(&w, &small);
    tg__alloc_fail_at(1);
    tg__jw_str(&w, "x");
    tg__alloc_fail_at(0);
    assert_int_equal(w.err, -ENOMEM);
    tg__buf_cleanup(&small);
}

/* Re-encode a parsed document with the writer (keys through str_dup + jw_key). */
static void encode_tok(uint32_t t, tg__jw *out)
{
    const tg__jtok *k = &doc.toks[t];
    switch (k->type) {
    case TG__J_OBJECT:
        tg__jw_obj_begin(out);
        for (uint32_t c = t + 1; c < k->next; c = doc.toks[c + 1].next) {
            size_t n;
            char *key = tg__json_str_dup(&doc, c, &arena, &n);
            assert_non_null(key);
            tg__jw_key(out, key, n);
            encode_tok(c + 1, out);
        }
        tg__jw_obj_end(out);
        break;
    case TG__J_ARRAY:
        tg__jw_arr_begin(out);
        for (uint32_t c = t + 1; c < k->next; c = doc.toks[c].next)
            encode_tok(c, out);
        tg__jw_arr_end(out);
        break;
    case TG__J_STRING: {
        size_t n;
        char *s = tg__json_str_dup(&doc, t, &arena, &n);
        tg__jw_strn(out, s, n);
        break;
    }
    case TG__J_NUMBER: {
        int64_t i;
        double d;
        if (tg__json_get_i64(&doc, t, &i, NULL) == 0)
            tg__jw_i64(out, i);
        else if (tg__json_get_double(&doc, t, &d, NULL) == 0)
            tg__jw_double(out, d);
        break;
    }
    case TG__J_TRUE:
    case TG__J_FALSE:
        tg__jw_bool(out, k->type == TG__J_TRUE);
        break;
    default:
        tg__jw_null(out);
        break;
    }
}

static void test_fixture_round_trips(void **state)
{
    (void)state;
    const char *names[] = {"small_update.json", "large_update.json", "sendmessage_response.json",
                           "getme_response.json", "dispatch_update.json"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "fixtures/botapi/%s", names[i]);
        size_t len;
        char *src = tgtest_read_file(tgtest_data_path(rel), &len);
        assert_non_null(src);
        parse_n(src, len);
        tg__buf_reset(&wbuf);
        tg__jw_init(&w, &wbuf);
        encode_tok(0, &w);
        assert_int_equal(w.err, 0);
        json_error_t je;
        json_t *a = json_loadb(src, len, 0, &je);
        json_t *b = json_loadb(wbuf.data, wbuf.len, 0, &je);
        assert_non_null(a);
        assert_non_null(b);
        if (!json_equal(a, b))
            fail_msg("%s re-encoded differs: %s", names[i], wbuf.data);
        json_decref(a);
        json_decref(b);
        /* Compact fixtures come back byte-identical. */
        if (!memchr(src, '\n', len))
            assert_string_equal(wbuf.data, src);
        free(src);
    }
}

/* Fail the Nth allocation for N = 1, 2, ... through parse, string decoding and writing:
 * every step either succeeds or reports a clean error, and nothing leaks (ASan checks). */
static void test_oom_sweep(void **state)
{
    (void)state;
    size_t len;
    char *src = tgtest_read_file(tgtest_data_path("fixtures/botapi/large_update.json"), &len);
    assert_non_null(src);
    bool clean_run = false;
    for (uint64_t nth = 1; nth <= 200 && !clean_run; nth++) {
        tg__jdoc d;
        tg__arena a;
        tg__buf b;
        tg__jw jw;
        tg__jdoc_init(&d, NULL);
        tg__arena_init(&a, 256, 0);
        tg__buf_init(&b, 0);
        tg__jw_init(&jw, &b);
        tg__alloc_fail_at(nth);
        tg__jerr err;
        int rc = tg__json_parse(&d, src, len, &err);
        bool all = rc == 0;
        if (rc != 0)
            assert_non_null(strstr(err.msg, "out of memory"));
        tg__jw_arr_begin(&jw);
        for (uint32_t t = 0; rc == 0 && t < d.ntok; t++) {
            if (d.toks[t].type != TG__J_STRING)
                continue;
            size_t n;
            char *s = tg__json_str_dup(&d, t, &a, &n);
            all = all && s;
            if (s)
                tg__jw_strn(&jw, s, n);
        }
        tg__jw_arr_end(&jw);
        assert_true(jw.err == 0 || jw.err == -ENOMEM);
        all = all && jw.err == 0;
        clean_run = !tg__alloc_failed();
        tg__alloc_fail_at(0);
        if (clean_run)
            assert_true(all);
        tg__buf_cleanup(&b);
        tg__arena_cleanup(&a);
        tg__jdoc_cleanup(&d);
    }
    assert_true(clean_run);
    free(src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_strings, setup, teardown),
        cmocka_unit_test_setup_teardown(test_integers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_doubles, setup, teardown),
        cmocka_unit_test_setup_teardown(test_doubles_ignore_locale, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bools, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fail_and_errmsg, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_structure, wsetup, wteardown),
        cmocka_unit_test_setup_teardown(test_writer_appends_after_content, wsetup, wteardown),
        cmocka_unit_test_setup_teardown(test_writer_escaping, wsetup, wteardown),
        cmocka_unit_test_setup_teardown(test_writer_escape_positions, wsetup, wteardown),
        cmocka_unit_test_setup_teardown(test_writer_escaped_keys, wsetup, wteardown),
        cmocka_unit_test_setup_teardown(test_writer_rejects_invalid_utf8, wsetup, wteardown),
        cmocka_unit_test_setup_teardown(test_writer_integers, wsetup, wteardown),
        cmocka_unit_test_setup_teardown(test_writer_doubles, wsetup, wteardown),
        cmocka_unit_test_setup_teardown(test_writer_sticky_errors_and_depth, wsetup, wteardown),
    };
    const struct CMUnitTest rt[] = {
        cmocka_unit_test(test_double_round_trip),
        cmocka_unit_test(test_fixture_round_trips),
        cmocka_unit_test(test_oom_sweep),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    return tgtest_result(rc | cmocka_run_group_tests(rt, wsetup, wteardown));
}
