/*
 * test_helpers_links: deep links, base64url and webhook secret tokens.
 * base64url is checked against RFC 4648's test vectors (section 10, in the url alphabet,
 * without padding) and by round trips of every length 0..48; the secret generator by its
 * charset, its lengths and that two secrets differ; the payload rules at their edges.
 */
#include "tgtest.h"

#include "tgbot/tgbot.h"

static void test_deep_link(void **state)
{
    (void)state;
    char out[TG_DEEP_LINK_MAX];
    assert_int_equal(tg_deep_link(out, sizeof out, "my_bot", "ref_42-x", false), TG_OK);
    assert_string_equal(out, "https://t.me/my_bot?start=ref_42-x");
    assert_int_equal(tg_deep_link(out, sizeof out, "my_bot", "g", true), TG_OK);
    assert_string_equal(out, "https://t.me/my_bot?startgroup=g");

    char p64[65], p65[66], u32[33];
    memset(p64, 'a', 64);
    p64[64] = '\0';
    memset(p65, 'a', 65);
    p65[65] = '\0';
    memset(u32, 'b', 32);
    u32[32] = '\0';
    assert_int_equal(tg_deep_link(out, sizeof out, u32, p64, true), TG_OK); /* longest fits */
    assert_int_equal(strlen(out), strlen("https://t.me/?startgroup=") + 32 + 64);
    static const struct {
        const char *bot, *payload;
    } bad[] = {{"my_bot", ""},   {"my_bot", "a b"},     {"my_bot", "a+b"}, {"my_bot", "a=b"},
               {"my_bot", NULL}, {"bot", "x"},          {"@my_bot", "x"},  {"my-bot", "x"},
               {NULL, "x"},      {"my_bot", "\xC3\xA9"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(tg_deep_link(out, sizeof out, bad[i].bot, bad[i].payload, false),
                         TG_ERR_INVALID);
        assert_string_equal(out, "");
    }
    assert_int_equal(tg_deep_link(out, sizeof out, "my_bot", p65, false), TG_ERR_INVALID);
    assert_int_equal(tg_deep_link(out, 20, "my_bot", "x", false), TG_ERR_TOO_BIG);
    assert_true(tg_deep_link_payload_valid(p64));
    assert_false(tg_deep_link_payload_valid(p65));
}

static void test_base64url(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
    } rfc[] = {{"", ""},           {"f", "Zg"},          {"fo", "Zm8"},         {"foo", "Zm9v"},
               {"foob", "Zm9vYg"}, {"fooba", "Zm9vYmE"}, {"foobar", "Zm9vYmFy"}};
    char out[128];
    unsigned char back[128];
    size_t n;
    for (size_t i = 0; i < sizeof rfc / sizeof *rfc; i++) {
        assert_int_equal(tg_base64url_encode(out, sizeof out, rfc[i].in, strlen(rfc[i].in)), TG_OK);
        assert_string_equal(out, rfc[i].out);
        assert_int_equal(tg_base64url_decode(back, sizeof back, out, &n), TG_OK);
        assert_int_equal(n, strlen(rfc[i].in));
        assert_memory_equal(back, rfc[i].in, n);
    }
    /* the url alphabet: 0xfb 0xff -> "-_8" (standard base64 would give "+/8") */
    assert_int_equal(tg_base64url_encode(out, sizeof out, "\xfb\xff", 2), TG_OK);
    assert_string_equal(out, "-_8");
    unsigned char data[48];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (unsigned char)(i * 37 + 11);
    for (size_t len = 0; len <= 48; len++) {
        assert_int_equal(tg_base64url_encode(out, sizeof out, data, len), TG_OK);
        assert_int_equal(strlen(out), (len * 4 + 2) / 3);
        if (len)
            assert_true(tg_deep_link_payload_valid(out)); /* 48 bytes fit a payload */
        assert_int_equal(tg_base64url_decode(back, len, out, &n), TG_OK); /* exact room */
        assert_int_equal(n, len);
        assert_memory_equal(back, data, len);
    }
    assert_int_equal(tg_base64url_encode(out, 5, "abcd", 4), TG_ERR_TOO_BIG); /* needs 6+1 */
    assert_int_equal(tg_base64url_decode(back, sizeof back, "Zm9v+", &n), TG_ERR_INVALID);
    assert_int_equal(tg_base64url_decode(back, sizeof back, "Zm9vY", &n), TG_ERR_INVALID);
    assert_int_equal(tg_base64url_decode(back, sizeof back, "Zm=v", &n), TG_ERR_INVALID);
    assert_int_equal(tg_base64url_decode(back, 2, "Zm9v", &n), TG_ERR_TOO_BIG);
}

static void test_secret(void **state)
{
    (void)state;
    char a[TG_WEBHOOK_SECRET_MAX + 1], b[TG_WEBHOOK_SECRET_MAX + 1];
    assert_int_equal(tg_webhook_secret_generate(a, sizeof a, 0), TG_OK);
    assert_int_equal(strlen(a), 64);
    assert_int_equal(tg_webhook_secret_generate(b, sizeof b, 0), TG_OK);
    assert_string_not_equal(a, b);
    bool seen[256] = {false};
    for (size_t len = 1; len <= TG_WEBHOOK_SECRET_MAX; len += 51) {
        assert_int_equal(tg_webhook_secret_generate(a, sizeof a, len), TG_OK);
        assert_int_equal(strlen(a), len);
        for (size_t i = 0; i < len; i++) {
            assert_non_null(
                strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-", a[i]));
            seen[(unsigned char)a[i]] = true;
        }
    }
    assert_int_equal(tg_webhook_secret_generate(a, sizeof a, 256), TG_OK);
    assert_int_equal(strlen(a), 256);
    size_t distinct = 0;
    for (size_t i = 0; i < 256; i++)
        distinct += seen[i];
    assert_true(distinct > 40); /* ~780 draws from 64 symbols: all but a few appear */
    assert_int_equal(tg_webhook_secret_generate(a, sizeof a, 257), TG_ERR_INVALID);
    assert_int_equal(tg_webhook_secret_generate(a, 10, 10), TG_ERR_TOO_BIG);
    assert_string_equal(a, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deep_link),
        cmocka_unit_test(test_base64url),
        cmocka_unit_test(test_secret),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
