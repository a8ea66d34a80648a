/* Tests for core/str (hex, base64, ct compare, int parsing, url encoding) and core/clock. */
#include "tgtest.h"

#include "core/clock.h"
#include "core/str.h"

static void test_hex(void **state)
{
    (void)state;
    unsigned char in[] = {0x00, 0x7f, 0xab, 0xff};
    char out[9];
    tg__hex_encode(out, in, sizeof in);
    assert_string_equal(out, "007fabff");
    unsigned char back[4];
    assert_int_equal(tg__hex_decode(back, sizeof back, "007FabFF", 8), 4);
    assert_memory_equal(back, in, 4);
    assert_int_equal(tg__hex_decode(back, sizeof back, "007", 3), TG__BAD_LEN);
    assert_int_equal(tg__hex_decode(back, sizeof back, "0g", 2), TG__BAD_LEN);
    assert_int_equal(tg__hex_decode(back, 1, "0011", 4), TG__BAD_LEN);
}

static void test_base64(void **state)
{
    (void)state;
    /* RFC 4648 section 10 vectors */
    static const struct {
        const char *in, *std;
    } v[] = {{"", ""},
             {"f", "Zg=="},
             {"fo", "Zm8="},
             {"foo", "Zm9v"},
             {"foob", "Zm9vYg=="},
             {"fooba", "Zm9vYmE="},
             {"foobar", "Zm9vYmFy"}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char out[32];
        unsigned char back[32];
        size_t n = strlen(v[i].in);
        assert_int_equal(tg__b64_encode(out, sizeof out, v[i].in, n, TG__B64_STD),
                         strlen(v[i].std));
        assert_string_equal(out, v[i].std);
        assert_int_equal(tg__b64_decode(back, sizeof back, out, strlen(out)), n);
        assert_memory_equal(back, v[i].in, n);
        /* unpadded form decodes too */
        tg__b64_encode(out, sizeof out, v[i].in, n, TG__B64_NOPAD);
        assert_int_equal(tg__b64_decode(back, sizeof back, out, strlen(out)), n);
    }
    unsigned char bytes[] = {0xfb, 0xff, 0xfe};
    char out[8];
    tg__b64_encode(out, sizeof out, bytes, 3, TG__B64_URL);
    assert_string_equal(out, "-__-");
    tg__b64_encode(out, sizeof out, bytes, 3, TG__B64_STD);
    assert_string_equal(out, "+//+");
    unsigned char back[8];
    assert_int_equal(tg__b64_decode(back, sizeof back, "-__-", 4), 3);
    assert_memory_equal(back, bytes, 3);
    assert_int_equal(tg__b64_decode(back, sizeof back, "Zh==", 4), TG__BAD_LEN); /* bits */
    assert_int_equal(tg__b64_decode(back, sizeof back, "Z", 1), TG__BAD_LEN);
    assert_int_equal(tg__b64_decode(back, sizeof back, "Zm9v!", 5), TG__BAD_LEN);
    assert_int_equal(tg__b64_encode(out, 4, "foo", 3, 0), TG__BAD_LEN); /* no room for NUL */
}

static void test_ct_equal(void **state)
{
    (void)state;
    assert_true(tg__ct_equal("abcd", "abcd", 4));
    assert_false(tg__ct_equal("abcd", "abce", 4));
    assert_true(tg__ct_streq("secret", 6, "secret", 6));
    assert_false(tg__ct_streq("secre", 5, "secret", 6));
    assert_false(tg__ct_streq("secretx", 7, "secret", 6));
    assert_false(tg__ct_streq("", 0, "s", 1));
}

static void test_parse_int(void **state)
{
    (void)state;
    int64_t v;
    uint64_t u;
    assert_int_equal(tg__parse_i64("-9223372036854775808", 20, &v), 0);
    assert_true(v == INT64_MIN);
    assert_int_equal(tg__parse_i64("9223372036854775807", 19, &v), 0);
    assert_true(v == INT64_MAX);
    assert_int_equal(tg__parse_i64("9223372036854775808", 19, &v), -1);
    assert_int_equal(tg__parse_i64("-", 1, &v), -1);
    assert_int_equal(tg__parse_i64("+1", 2, &v), -1);
    assert_int_equal(tg__parse_i64(" 1", 2, &v), -1);
    assert_int_equal(tg__parse_i64("", 0, &v), -1);
    assert_int_equal(tg__parse_u64("18446744073709551615", 20, &u), 0);
    assert_true(u == UINT64_MAX);
    assert_int_equal(tg__parse_u64("18446744073709551616", 20, &u), -1);
    assert_int_equal(tg__parse_i64("-42", 3, &v), 0);
    assert_int_equal(v, -42);
}

static void test_url_encode_and_strlcpy(void **state)
{
    (void)state;
    tg__buf b;
    tg__buf_init(&b, 0);
    assert_int_equal(tg__url_encode(&b, "a b/c?d=é~", strlen("a b/c?d=é~")), 0);
    assert_string_equal(tg__buf_cstr(&b), "a%20b%2Fc%3Fd%3D%C3%A9~");
    tg__buf_cleanup(&b);
    char small[4];
    assert_int_equal(tg__strlcpy(small, "hello", sizeof small), 5);
    assert_string_equal(small, "hel");
    tg__span s = TG__SPAN_LIT("/start payload");
    assert_true(tg__span_starts_with(s, "/start"));
    assert_false(tg__span_eq(s, "/start"));
}

static void test_clock_monotonic(void **state)
{
    (void)state;
    uint64_t a = tg__now_ns();
    tg__sleep_ms(2);
    uint64_t b = tg__now_ns();
    assert_true(b >= a + 2000000u); /* slept at least 2 ms: a lower bound, never timing-flaky */
    assert_true(tg__wall_s() > 1700000000);
    assert_true(tg__now_ms() <= tg__now_ns() / 1000000u + 1);
    assert_true(tg__process_cpu_ns() > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hex),
        cmocka_unit_test(test_base64),
        cmocka_unit_test(test_ct_equal),
        cmocka_unit_test(test_parse_int),
        cmocka_unit_test(test_url_encode_and_strlcpy),
        cmocka_unit_test(test_clock_monotonic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
