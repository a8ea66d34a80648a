/*
 * proxy/engine/keyscan: the hint table and the scan budget that bound what a FakeTLS hello
 * without SNI costs (issue 21, item 14). Time is passed in, so nothing waits.
 */
#include "tgtest.h"

#include "proxy/engine/keyscan.h"

#include <stdlib.h>
#include <string.h>

static void v4(uint8_t ip[16], uint8_t last)
{
    memset(ip, 0, 16);
    ip[10] = ip[11] = 0xff;
    ip[12] = 192, ip[13] = 0, ip[14] = 2, ip[15] = last;
}

static void test_hints(void **state)
{
    (void)state;
    struct keyscan_hints *t = calloc(1, sizeof *t);
    assert_non_null(t);
    uint8_t a[16], b[16];
    v4(a, 1);
    v4(b, 2);
    assert_int_equal(keyscan_hint_get(t, a, 1), 0); /* nothing known */
    keyscan_hint_put(t, a, 1, 200);
    assert_int_equal(keyscan_hint_get(t, a, 1), 201);
    assert_int_equal(keyscan_hint_get(t, a, 2), 0); /* another generation of secrets */
    assert_int_equal(keyscan_hint_get(t, b, 1), 0); /* another address */
    keyscan_hint_put(t, a, 1, 0);
    assert_int_equal(keyscan_hint_get(t, a, 1), 1); /* the last key wins; key 0 is a hint too */
    keyscan_hint_put(t, a, 1, KEYSCAN_MAX_KEYS);    /* out of range: ignored */
    assert_int_equal(keyscan_hint_get(t, a, 1), 1);
    /* lossy, never wrong: after many other addresses, a's hint is its own or gone */
    for (unsigned i = 0; i < 4 * KEYSCAN_HINT_SLOTS; i++) {
        uint8_t o[16] = {0x20, 0x01, 0x0d, 0xb8, (uint8_t)(i >> 8), (uint8_t)i};
        keyscan_hint_put(t, o, 1, 7);
    }
    size_t h = keyscan_hint_get(t, a, 1);
    assert_true(h == 0 || h == 1);
    free(t);
}

static void test_budget(void **state)
{
    (void)state;
    struct keyscan_budget b = {0};
    uint64_t t = 5000;
    assert_true(keyscan_budget_take(&b, t, KEYSCAN_RATE)); /* starts with a second's worth */
    assert_false(keyscan_budget_take(&b, t, 1));           /* spent */
    assert_false(keyscan_budget_take(&b, t + 499, KEYSCAN_RATE / 2));
    assert_true(keyscan_budget_take(&b, t + 500, KEYSCAN_RATE / 2 - KEYSCAN_RATE / 1000));
    assert_false(keyscan_budget_take(&b, t + 500, KEYSCAN_RATE / 1000 + 1));
    /* a long quiet time refills one second's worth, no more */
    assert_false(keyscan_budget_take(&b, t + 100000, KEYSCAN_RATE + 1));
    assert_true(keyscan_budget_take(&b, t + 100000, KEYSCAN_RATE));
    /* a refused scan is not charged */
    assert_false(keyscan_budget_take(&b, t + 101000, KEYSCAN_RATE + 1));
    assert_true(keyscan_budget_take(&b, t + 101000, KEYSCAN_RATE));
    /* a clock that goes back starts afresh rather than underflow */
    assert_true(keyscan_budget_take(&b, 10, KEYSCAN_RATE));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hints),
        cmocka_unit_test(test_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
