/* Tests for core/log: levels, custom sink, secret scrubbing, truncation, rate limiting. */
#include "tgtest.h"

#include "core/log.h"

#include <errno.h>

struct capture {
    int n;
    int level;
    char last[2048];
};

static void sink(void *user, int level, const char *msg)
{
    struct capture *c = user;
    c->n++;
    c->level = level;
    snprintf(c->last, sizeof c->last, "%s", msg);
}

static void test_levels_and_sink(void **state)
{
    (void)state;
    struct capture c = {0};
    tg__logger lg;
    tg__logger_init(&lg, TG__LOG_INFO, sink, &c);
    tg__log(&lg, TG__LOG_DEBUG, "hidden %d", 1);
    assert_int_equal(c.n, 0);
    tg__log(&lg, TG__LOG_WARN, "shown %d", 2);
    assert_int_equal(c.n, 1);
    assert_int_equal(c.level, TG__LOG_WARN);
    assert_string_equal(c.last, "shown 2");
    assert_true(tg__log_enabled(&lg, TG__LOG_ERROR));
    assert_false(tg__log_enabled(&lg, TG__LOG_TRACE));
    tg__logger_cleanup(&lg);
}

static void test_secret_never_printed(void **state)
{
    (void)state;
    struct capture c = {0};
    tg__logger lg;
    tg__logger_init(&lg, TG__LOG_TRACE, sink, &c);
    const char *token = "123456:ABCdefGHIjklMNOpqrSTUvwxYZ0123456789";
    assert_int_equal(tg__logger_add_secret(&lg, token, strlen(token)), 0);
    assert_int_equal(tg__logger_add_secret(&lg, "ab", 2), -EINVAL);
    tg__log(&lg, TG__LOG_ERROR, "GET https://api.telegram.org/bot%s/getMe failed; again %s!", token,
            token);
    assert_null(strstr(c.last, token));
    assert_null(strstr(c.last, "ABCdefGHI"));
    assert_string_equal(
        c.last, "GET https://api.telegram.org/bot[REDACTED]/getMe failed; again [REDACTED]!");
    tg__logger_cleanup(&lg);
}

static void test_short_secret_grows_without_overflow(void **state)
{
    (void)state;
    struct capture c = {0};
    tg__logger lg;
    tg__logger_init(&lg, TG__LOG_TRACE, sink, &c);
    assert_int_equal(tg__logger_add_secret(&lg, "k3y!", 4), 0);
    char big[1500];
    size_t off = 0;
    while (off + 4 < sizeof big - 1) {
        memcpy(big + off, "k3y!", 4);
        off += 4;
    }
    big[off] = '\0';
    tg__log(&lg, TG__LOG_INFO, "%s", big);
    assert_null(strstr(c.last, "k3y!"));
    assert_true(strlen(c.last) < TG__LOG_LINE_MAX + 64);
    tg__logger_cleanup(&lg);
}

/* A secret added twice takes one slot (a reload re-adds the keys it kept), so the slots
   last for the keys a reload adds; past TG__LOG_MAX_SECRETS, -ENOSPC. */
static void test_secret_added_once(void **state)
{
    (void)state;
    tg__logger lg;
    tg__logger_init(&lg, TG__LOG_TRACE, NULL, NULL);
    char key[8];
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < TG__LOG_MAX_SECRETS; i++) {
            snprintf(key, sizeof key, "key%d", i);
            assert_int_equal(tg__logger_add_secret(&lg, key, strlen(key)), 0);
        }
    assert_int_equal(lg.n_secrets, TG__LOG_MAX_SECRETS);
    assert_int_equal(tg__logger_add_secret(&lg, "key-new", 7), -ENOSPC);
    tg__logger_cleanup(&lg);
}

static void test_level_parse(void **state)
{
    (void)state;
    assert_int_equal(tg__log_level_parse("DEBUG"), TG__LOG_DEBUG);
    assert_int_equal(tg__log_level_parse("warning"), TG__LOG_WARN);
    assert_int_equal(tg__log_level_parse("loud"), -1);
    assert_string_equal(tg__log_level_name(TG__LOG_ERROR), "error");
    assert_string_equal(tg__log_level_name(99), "?");
}

static void test_ratelimit(void **state)
{
    (void)state;
    tg__ratelimit rl;
    tg__ratelimit_init(&rl, 2.0, 3.0);
    int allowed = 0;
    for (int i = 0; i < 10; i++)
        allowed += tg__ratelimit_allow(&rl, 1000);
    assert_int_equal(allowed, 3);
    assert_int_equal(rl.dropped, 7);
    assert_true(tg__ratelimit_allow(&rl, 1500)); /* half a second refills one token */
    assert_false(tg__ratelimit_allow(&rl, 1500));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levels_and_sink),
        cmocka_unit_test(test_secret_never_printed),
        cmocka_unit_test(test_short_secret_grows_without_overflow),
        cmocka_unit_test(test_secret_added_once),
        cmocka_unit_test(test_level_parse),
        cmocka_unit_test(test_ratelimit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
