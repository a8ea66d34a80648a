/* Tests for core/log: levels, custom sink, secret scrubbing, truncation, rate limiting. */
#include "tgtest.h"

#include "core/log.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>

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

/* A secret where the line is cut to TG__LOG_LINE_MAX: scrubbed before the cut, so not even
   its first bytes remain, at every offset around the cut. */
static void test_secret_at_the_cut(void **state)
{
    (void)state;
    struct capture c = {0};
    tg__logger lg;
    tg__logger_init(&lg, TG__LOG_TRACE, sink, &c);
    const char *key = "0f1e2d3c4b5a69788796a5b4c3d2e1f0";
    assert_int_equal(tg__logger_add_secret(&lg, key, strlen(key)), 0);
    char fill[TG__LOG_LINE_MAX + 64];
    memset(fill, '.', sizeof fill);
    for (int off = TG__LOG_LINE_MAX - 40; off < TG__LOG_LINE_MAX + 4; off++) {
        tg__log(&lg, TG__LOG_INFO, "%.*s%s%.*s", off, fill, key, 40, fill);
        if (strstr(c.last, "0f1e2d"))
            fail_msg("the start of the secret survived a cut at offset %d", off);
        assert_true(strlen(c.last) < TG__LOG_LINE_MAX);
        assert_string_equal(c.last + strlen(c.last) - 3, "...");
    }
    tg__logger_cleanup(&lg);
}

/* A secret added twice takes one slot (a reload re-adds the keys it kept). */
static void test_secret_added_once(void **state)
{
    (void)state;
    tg__logger lg;
    tg__logger_init(&lg, TG__LOG_TRACE, NULL, NULL);
    char key[8];
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < 20; i++) {
            snprintf(key, sizeof key, "key%d", i);
            assert_int_equal(tg__logger_add_secret(&lg, key, strlen(key)), 0);
        }
    assert_int_equal(lg.n_secrets, 20);
    tg__logger_cleanup(&lg);
    assert_int_equal(lg.n_secrets, 0);
    assert_int_equal(tg__logger_add_secret(&lg, "key0", 4), 0); /* usable again */
    assert_int_equal(lg.n_secrets, 1);
    tg__logger_cleanup(&lg);
}

/* Test keys: 32 hex digits, like a proxy key, distinct per i and seed. */
static void make_key(char out[33], unsigned i, unsigned seed)
{
    uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull ^ seed;
    for (int j = 0; j < 32; j++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        out[j] = "0123456789abcdef"[(x >> 59) & 15];
    }
    snprintf(out + 24, 9, "%08x", i); /* the tail keeps keys distinct */
}

/* 300 secrets (past the 8 of old): each one is scrubbed from a line of its own, and a line
   naming several keeps none of them. */
static void test_many_secrets_each_scrubbed(void **state)
{
    (void)state;
    enum { N = 300 };
    struct capture c = {0};
    tg__logger lg;
    tg__logger_init(&lg, TG__LOG_TRACE, sink, &c);
    char key[33];
    for (unsigned i = 0; i < N; i++) {
        make_key(key, i, 7);
        assert_int_equal(tg__logger_add_secret(&lg, key, 32), 0);
    }
    assert_int_equal(lg.n_secrets, N);
    for (unsigned i = 0; i < N; i++) {
        make_key(key, i, 7);
        tg__log(&lg, TG__LOG_INFO, "user %u secret=%s, again ee%s6578616d706c652e636f6d", i, key,
                key);
        if (strstr(c.last, key) != NULL)
            fail_msg("secret %u was not scrubbed", i); /* never print the key itself */
        char want[128];
        snprintf(want, sizeof want,
                 "user %u secret=[REDACTED], again ee[REDACTED]6578616d706c652e636f6d", i);
        assert_string_equal(c.last, want);
    }
    char other[33];
    make_key(other, 5, 8); /* never registered: stays */
    make_key(key, 299, 7);
    tg__log(&lg, TG__LOG_INFO, "%s %s", other, key);
    assert_non_null(strstr(c.last, other));
    assert_null(strstr(c.last, key));
    tg__logger_cleanup(&lg);
}

/* Secrets that overlap in a line are covered by one marker: no tail of either survives. */
static void test_overlapping_secrets_merge(void **state)
{
    (void)state;
    struct capture c = {0};
    tg__logger lg;
    tg__logger_init(&lg, TG__LOG_TRACE, sink, &c);
    assert_int_equal(tg__logger_add_secret(&lg, "abcd1234", 8), 0);
    assert_int_equal(tg__logger_add_secret(&lg, "1234wxyz", 8), 0);
    assert_int_equal(tg__logger_add_secret(&lg, "abcd", 4), 0); /* a prefix of the first */
    tg__log(&lg, TG__LOG_INFO, "x abcd1234wxyz y abcd z");
    assert_string_equal(c.last, "x [REDACTED] y [REDACTED] z");
    tg__logger_cleanup(&lg);
}

/* The store's cap: TG__LOG_MAX_SECRETS entries, then -ENOSPC; scrubbing still works. */
static void test_secret_store_cap(void **state)
{
    (void)state;
    struct capture c = {0};
    tg__logger lg;
    tg__logger_init(&lg, TG__LOG_TRACE, sink, &c);
    char key[16], first[16];
    for (unsigned i = 0; i < TG__LOG_MAX_SECRETS; i++) {
        /* distinct (an odd multiplier is a bijection) and varied in the first bytes */
        snprintf(key, sizeof key, "%08x", i * 2654435761u);
        if (tg__logger_add_secret(&lg, key, 8) != 0)
            fail_msg("add %u failed", i);
    }
    snprintf(first, sizeof first, "%08x", 0u);
    assert_int_equal(tg__logger_add_secret(&lg, "k-past-the-cap", 14), -ENOSPC);
    assert_int_equal(tg__logger_add_secret(&lg, first, 8), 0); /* a duplicate is fine */
    tg__log(&lg, TG__LOG_INFO, "first %s last %s other k-past-the-cap", first, key);
    assert_string_equal(c.last, "first [REDACTED] last [REDACTED] other k-past-the-cap");
    tg__logger_cleanup(&lg);
}

/* One thread adds secrets (crossing several chunks) while another logs lines quoting the
   last one added: a secret whose add returned before the line was formatted is scrubbed,
   and the lock-free readers race with nothing (run under TSan in CI). */
enum { RACE_N = 1500 };

struct race {
    tg__logger lg;
    unsigned added; /* secrets whose add returned; release by the adder */
};

static void *race_adder(void *p)
{
    struct race *r = p;
    char key[33];
    for (unsigned i = 0; i < RACE_N; i++) {
        make_key(key, i, 9);
        if (tg__logger_add_secret(&r->lg, key, 32) != 0)
            break;
        __atomic_store_n(&r->added, i + 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void test_add_while_logging(void **state)
{
    (void)state;
    static struct race r;
    struct capture c = {0};
    tg__logger_init(&r.lg, TG__LOG_TRACE, sink, &c);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, race_adder, &r), 0);
    char key[33];
    unsigned k = 0;
    for (unsigned it = 0; it < 1000000 && k < RACE_N; it++) { /* the adder ends long before */
        k = __atomic_load_n(&r.added, __ATOMIC_ACQUIRE);
        if (k == 0) {
            sched_yield();
            continue;
        }
        make_key(key, k - 1, 9);
        tg__log(&r.lg, TG__LOG_INFO, "k=%s", key);
        if (strcmp(c.last, "k=[REDACTED]") != 0)
            fail_msg("secret %u of %u was not scrubbed", k - 1, RACE_N);
    }
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(__atomic_load_n(&r.added, __ATOMIC_ACQUIRE), RACE_N);
    tg__logger_cleanup(&r.lg);
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
        cmocka_unit_test(test_secret_at_the_cut),
        cmocka_unit_test(test_secret_added_once),
        cmocka_unit_test(test_many_secrets_each_scrubbed),
        cmocka_unit_test(test_overlapping_secrets_merge),
        cmocka_unit_test(test_secret_store_cap),
        cmocka_unit_test(test_add_while_logging),
        cmocka_unit_test(test_level_parse),
        cmocka_unit_test(test_ratelimit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
