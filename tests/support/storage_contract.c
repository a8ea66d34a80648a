/* storage_contract: one contract for every tg_storage (see storage_contract.h). */
#include "storage_contract.h"

#include "tgtest.h"

#include "core/clock.h"

struct seen {
    int n;
    bool a, b, other;
};

static bool count_scan(void *user, const char *key, const void *val, size_t len)
{
    struct seen *s = user;
    s->n++;
    if (strcmp(key, "scan:a") == 0 && len == 2 && memcmp(val, "A\0", 2) == 0)
        s->a = true;
    else if (strcmp(key, "scan:b") == 0 && len == 0)
        s->b = true;
    else
        s->other = true;
    return true;
}

static bool stop_at_first(void *user, const char *key, const void *val, size_t len)
{
    (void)key, (void)val, (void)len;
    ++*(int *)user;
    return false;
}

static void scan_contract(tg_storage *s)
{
    assert_int_equal(tg_storage_set(s, "scan:a", "A\0", 2, 0), TG_OK);
    assert_int_equal(tg_storage_set(s, "scan:b", "", 0, 0), TG_OK);
    assert_int_equal(tg_storage_set(s, "scan;c", "x", 1, 0), TG_OK); /* ';' follows ':' */
    assert_int_equal(tg_storage_set(s, "scan:*", "gone", 4, 1), TG_OK);
    tg__sleep_ms(20); /* "scan:*" expires; it is a glob character in Redis, too */
    struct seen seen = {0};
    assert_int_equal(tg_storage_scan(s, "scan:", count_scan, &seen), TG_OK);
    assert_int_equal(seen.n, 2);
    assert_true(seen.a && seen.b && !seen.other);
    int calls = 0;
    assert_int_equal(tg_storage_scan(s, "scan", stop_at_first, &calls), TG_OK);
    assert_int_equal(calls, 1);
    seen = (struct seen){0};
    assert_int_equal(tg_storage_scan(s, "scan:zz", count_scan, &seen), TG_OK);
    assert_int_equal(seen.n, 0);
    assert_int_equal(tg_storage_scan(s, "scan:", NULL, NULL), TG_ERR_INVALID);
    for (const char *k = "scan:a\0scan:b\0scan;c\0"; *k; k += strlen(k) + 1)
        assert_int_equal(tg_storage_del(s, k), TG_OK);
}

void tgtest_storage_contract(tg_storage *s)
{
    char buf[16];
    size_t len;
    bool found = true;
    assert_int_equal(tg_storage_get(s, "k1", buf, sizeof buf, &len, &found), TG_OK);
    assert_false(found);
    assert_int_equal(tg_storage_set(s, "k1", "a\0b", 3, 0), TG_OK);
    assert_int_equal(tg_storage_get(s, "k1", buf, sizeof buf, &len, &found), TG_OK);
    assert_true(found);
    assert_int_equal(len, 3);
    assert_memory_equal(buf, "a\0b", 3);
    assert_int_equal(tg_storage_set(s, "k1", "0123456789abcdefXYZ", 19, 0), TG_OK);
    assert_int_equal(tg_storage_get(s, "k1", buf, sizeof buf, &len, &found), TG_ERR_TOO_BIG);
    assert_int_equal(len, 19);
    assert_int_equal(tg_storage_del(s, "k1"), TG_OK);
    assert_int_equal(tg_storage_del(s, "k1"), TG_OK); /* absent: still fine */
    assert_int_equal(tg_storage_get(s, "k1", buf, sizeof buf, &len, &found), TG_OK);
    assert_false(found);
    assert_int_equal(tg_storage_set(s, "k2", "v", 1, 1), TG_OK); /* 1 ms TTL */
    tg__sleep_ms(20);
    assert_int_equal(tg_storage_get(s, "k2", buf, sizeof buf, &len, &found), TG_OK);
    assert_false(found);
    assert_int_equal(tg_storage_set(s, "k3", "", 0, 0), TG_OK); /* an empty value exists */
    assert_int_equal(tg_storage_get(s, "k3", buf, sizeof buf, &len, &found), TG_OK);
    assert_true(found);
    assert_int_equal(len, 0);
    for (int i = 0; i < 500; i++) { /* growth keeps every key */
        char k[32];
        snprintf(k, sizeof k, "many:%d", i);
        assert_int_equal(tg_storage_set(s, k, k, strlen(k), 0), TG_OK);
    }
    assert_int_equal(tg_storage_get(s, "many:321", buf, sizeof buf, &len, &found), TG_OK);
    assert_true(found);
    assert_memory_equal(buf, "many:321", 8);
    assert_int_equal(tg_storage_set(NULL, "k", "v", 1, 0), TG_ERR_INVALID);
    scan_contract(s);
}
