/*
 * proxy/engine/keyscan: the hint table and the scan budget that bound what a FakeTLS hello
 * without SNI costs (issue 21, item 14), and a hint outliving a reload with 1,000 secrets
 * sharing one domain (issue 25). Time is passed in, so nothing waits.
 */
#include "tgtest.h"

#include "proxy/engine/keyscan.h"
#include "proxy_client.h"

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
    assert_int_equal(keyscan_hint_get(t, a), 0); /* nothing known */
    keyscan_hint_put(t, a, 200);
    assert_int_equal(keyscan_hint_get(t, a), 200);
    assert_int_equal(keyscan_hint_get(t, b), 0); /* another address */
    keyscan_hint_put(t, a, 7);
    assert_int_equal(keyscan_hint_get(t, a), 7); /* the last key wins */
    keyscan_hint_put(t, a, 0);                   /* no id: ignored */
    assert_int_equal(keyscan_hint_get(t, a), 7);
    /* lossy, never wrong: after many other addresses, a's hint is its own or gone */
    for (unsigned i = 0; i < 4 * KEYSCAN_HINT_SLOTS; i++) {
        uint8_t o[16] = {0x20, 0x01, 0x0d, 0xb8, (uint8_t)(i >> 8), (uint8_t)i};
        keyscan_hint_put(t, o, 9);
    }
    uint32_t h = keyscan_hint_get(t, a);
    assert_true(h == 0 || h == 7);
    /* a key's id: its bytes and its domain (case-folded), never 0 */
    uint8_t k1[16] = {1}, k2[16] = {2};
    assert_int_equal(keyscan_key_id(k1, "a.example", 9), keyscan_key_id(k1, "A.Example", 9));
    assert_int_not_equal(keyscan_key_id(k1, "a.example", 9), keyscan_key_id(k2, "a.example", 9));
    assert_int_not_equal(keyscan_key_id(k1, "a.example", 9), keyscan_key_id(k1, "b.example", 9));
    assert_int_not_equal(keyscan_key_id(k1, NULL, 0), 0);
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


#define NSAME 1000
#define NOW   1700000000

struct same {
    uint8_t k[NSAME + 10][16];
    struct faketls_key a[NSAME], b[NSAME + 10];
};

static void key_of(struct same *x, size_t i, struct faketls_key *out)
{
    memset(x->k[i], 0, 16);
    memcpy(x->k[i], &i, sizeof i);
    x->k[i][15] = 0xee;
    *out = (struct faketls_key){.domain = "shared.example", .domain_len = 14};
    out->domain_hash = faketls_domain_hash(out->domain, out->domain_len);
    memcpy(out->key, x->k[i], 16);
    out->id = keyscan_key_id(out->key, out->domain, out->domain_len);
}

static enum faketls_verdict check(struct keyscan_hints *t, struct keyscan_budget *b,
                                  const uint8_t ip[16], const uint8_t *hello, size_t len,
                                  const struct faketls_key *keys, size_t n, size_t *hmacs)
{
    struct faketls_hello h;
    assert_int_equal(faketls_parse_hello(hello, len, &h, NULL), FAKETLS_OK);
    struct faketls_policy pol = {.now = NOW, .past_s = 120, .future_s = 120};
    struct faketls_match m;
    bool capped;
    size_t ncand = faketls_candidates(&h, keys, n, &pol);
    assert_int_equal(ncand, n); /* every key shares the SNI's domain */
    enum faketls_verdict v = keyscan_validate(t, b, ip, 1000, &h, keys, n, ncand, &pol, &m, &capped);
    assert_false(capped);
    *hmacs = m.digests;
    return v;
}

/* 1,000 secrets on one domain: an unknown client costs a scan of every key, a remembered one
   a single HMAC, and still one after a "reload" that lists the keys in another order with
   more beside them (the control API reloads at every change). */
static void test_hint_outlives_reload(void **state)
{
    (void)state;
    struct same *x = calloc(1, sizeof *x);
    struct keyscan_hints *t = calloc(1, sizeof *t);
    assert_non_null(x);
    assert_non_null(t);
    for (size_t i = 0; i < NSAME; i++)
        key_of(x, i, &x->a[i]);
    for (size_t i = 0; i < NSAME + 10; i++) /* reversed, 10 new ones first */
        key_of(x, NSAME + 9 - i, &x->b[i]);
    uint8_t hello[517], ip[16];
    v4(ip, 9);
    assert_int_equal(pcli_hello_sized(hello, sizeof hello, x->k[700], "shared.example", NOW, 517),
                     517);
    struct keyscan_budget b = {0};
    size_t hmacs = 0;
    assert_int_equal(check(t, &b, ip, hello, 517, x->a, NSAME, &hmacs), FAKETLS_ACCEPT);
    assert_int_equal(hmacs, NSAME); /* found by a full scan */
    assert_int_equal(check(t, &b, ip, hello, 517, x->a, NSAME, &hmacs), FAKETLS_ACCEPT);
    assert_int_equal(hmacs, 1); /* remembered */
    assert_int_equal(check(t, &b, ip, hello, 517, x->b, NSAME + 10, &hmacs), FAKETLS_ACCEPT);
    assert_int_equal(hmacs, 1); /* and across the reload */
    free(t);
    free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hints),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_hint_outlives_reload),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
