/*
 * test_abi: option and statistics structs cross the ABI boundary by the caller's size
 * (docs/abi.md, "Structs that grow"): an older caller's smaller struct gets defaults for what
 * it lacks, a newer caller's larger one is refused when it sets something unknown, and stats
 * never write past the caller's struct.
 */
#include "tgtest.h"

#include <stddef.h>
#include <string.h>

#include "core/sized.h"
#include "tgbot/tgbot.h"

#define TOKEN "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_"

static void test_sized_in_older_caller(void **state)
{
    (void)state;
    /* An "older" caller knows only the first field: the rest must read as zero. */
    uint64_t src[1] = {7};
    uint64_t dst[3] = {1, 2, 3};
    assert_true(tg__sized_in(dst, sizeof dst, src, sizeof src));
    assert_int_equal(dst[0], 7);
    assert_int_equal(dst[1], 0);
    assert_int_equal(dst[2], 0);
    assert_true(tg__sized_in(dst, sizeof dst, NULL, 0));
    assert_int_equal(dst[0], 0);
}

static void test_sized_in_newer_caller(void **state)
{
    (void)state;
    uint64_t src[3] = {7, 0, 0};
    uint64_t dst[1];
    assert_true(tg__sized_in(dst, sizeof dst, src, sizeof src)); /* unknown tail is zero */
    assert_int_equal(dst[0], 7);
    src[2] = 1;
    assert_false(tg__sized_in(dst, sizeof dst, src, sizeof src)); /* sets an unknown field */
}

static void test_bot_new_refuses_unknown_options(void **state)
{
    (void)state;
    struct {
        tg_bot_options o;
        uint32_t newer_field;
    } big;
    memset(&big, 0, sizeof big);
    big.newer_field = 1;
    tg_bot *bot = tg_bot_new_sized(TOKEN, &big.o, sizeof big);
    assert_null(bot);
    assert_non_null(strstr(tg_bot_new_errmsg(), "does not know"));
    big.newer_field = 0;
    bot = tg_bot_new_sized(TOKEN, &big.o, sizeof big);
    assert_non_null(bot);
    tg_bot_free(bot);
    /* An older caller whose struct ends before timeout_ms: the default applies. */
    tg_bot_options small = {.base_url = "http://127.0.0.1:1"};
    bot = tg_bot_new_sized(TOKEN, &small, offsetof(tg_bot_options, timeout_ms));
    assert_non_null(bot);
    tg_bot_free(bot);
}

static void test_stats_write_no_more_than_asked(void **state)
{
    (void)state;
    tg_bot *bot = tg_bot_new(TOKEN, NULL);
    assert_non_null(bot);
    tg_ctx *ctx = tg_ctx_new(bot);
    unsigned char buf[sizeof(tg_ctx_stats) + 8];
    memset(buf, 0xAB, sizeof buf);
    tg_ctx_get_stats_sized(ctx, (tg_ctx_stats *)(void *)buf, sizeof(uint64_t));
    static const unsigned char zero[sizeof(uint64_t)];
    assert_memory_equal(buf, zero, sizeof zero); /* calls = 0 */
    for (size_t i = sizeof(uint64_t); i < sizeof buf; i++)
        assert_int_equal(buf[i], 0xAB);
    tg_ctx_free(ctx);
    tg_bot_free(bot);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sized_in_older_caller),
        cmocka_unit_test(test_sized_in_newer_caller),
        cmocka_unit_test(test_bot_new_refuses_unknown_options),
        cmocka_unit_test(test_stats_write_no_more_than_asked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
