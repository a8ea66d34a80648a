/*
 * Callback data of any size (tg_hctx_callback_put) and typed packing (tg_callback_pack):
 * short text kept as is, long and binary data swapped for a token and back on press (so
 * callback filters match the original), the per-process bound dropping the least recently
 * used (and its stored copy), expiry, limits; pack/unpack tables.
 */
#include "tgtest.h"

#include "core/clock.h"
#include "tgbot/dispatch.h"
#include "tgbot/keyboard.h"

static char tokens[8][80];
static int ntokens;
static char seen[4096];
static size_t seen_len;
static bool seen_lost;
static int presses;

static const char *long_data(void)
{
    static char d[301];
    memcpy(d, "order:", 6);
    for (int i = 6; i < 300; i++)
        d[i] = (char)('a' + i % 26);
    d[300] = '\0';
    return d;
}

/* /put N: puts variant N and keeps what the button would carry. */
static tg_status h_put(tg_hctx *h, void *user)
{
    (void)user;
    const char *arg = tg_hctx_arg(h, 0);
    const char *t = NULL;
    if (strcmp(arg, "short") == 0)
        t = tg_hctx_callback_put(h, "order:1", 7);
    else if (strcmp(arg, "long") == 0)
        t = tg_hctx_callback_put(h, long_data(), 300);
    else if (strcmp(arg, "binary") == 0)
        t = tg_hctx_callback_put(h, "bin\0ary", 7);
    else if (strcmp(arg, "tilde") == 0)
        t = tg_hctx_callback_put(h, "~not a token", 12);
    else
        t = tg_hctx_callback_put(h, long_data(), 300);
    if (!t)
        return TG_ERR_TOO_BIG;
    snprintf(tokens[ntokens++ % 8], sizeof tokens[0], "%s", t);
    return TG_OK;
}

static tg_status h_order(tg_hctx *h, void *user)
{
    (void)user;
    const void *d = tg_hctx_callback_data(h, &seen_len);
    memcpy(seen, d, seen_len < sizeof seen ? seen_len : sizeof seen);
    assert_string_equal(tg_hctx_event(h)->data, seen); /* the event sees the data too */
    seen_lost = tg_hctx_callback_lost(h);
    presses++;
    return TG_OK;
}

static tg_status h_other_press(tg_hctx *h, void *user)
{
    (void)user;
    const void *d = tg_hctx_callback_data(h, &seen_len);
    memcpy(seen, d, seen_len < sizeof seen ? seen_len : sizeof seen);
    seen_lost = tg_hctx_callback_lost(h);
    presses++;
    return TG_OK;
}

static tg_dispatcher *make(tg_router **r, tg_storage *s, size_t max_entries, uint64_t ttl,
                           size_t max_bytes)
{
    *r = tg_router_new();
    tg_router_on_command(*r, "put", h_put, NULL);
    tg_router_on_callback(*r, "order:", h_order, NULL);
    tg_router_on_kind(*r, TG_UPDATE_CALLBACK_QUERY, h_other_press, NULL);
    tg_dispatcher *d =
        tg_dispatcher_new(NULL, *r,
                          &(tg_dispatcher_options){.workers = 1,
                                                   .storage = s,
                                                   .callback_max_entries = max_entries,
                                                   .callback_ttl_ms = ttl,
                                                   .callback_max_bytes = max_bytes});
    assert_non_null(d);
    ntokens = 0;
    return d;
}

static tg_status put(tg_dispatcher *d, const char *what)
{
    char j[256];
    snprintf(j, sizeof j,
             "{\"update_id\":1,\"message\":{\"message_id\":1,\"date\":0,\"chat\":{\"id\":5,"
             "\"type\":\"private\"},\"from\":{\"id\":5},\"text\":\"/put %s\"}}",
             what);
    return tg_dispatcher_run_one(d, j, strlen(j));
}

static void press(tg_dispatcher *d, const char *data)
{
    char j[512];
    snprintf(j, sizeof j,
             "{\"update_id\":2,\"callback_query\":{\"id\":\"q\",\"from\":{\"id\":5},"
             "\"message\":{\"message_id\":9,\"date\":0,\"chat\":{\"id\":5,\"type\":\"private\"}},"
             "\"chat_instance\":\"c\",\"data\":\"%s\"}}",
             data);
    seen_len = 0;
    seen_lost = false;
    int before = presses;
    assert_int_equal(tg_dispatcher_run_one(d, j, strlen(j)), TG_OK);
    assert_int_equal(presses, before + 1);
}

static bool stored(tg_storage *s, const char *token)
{
    char key[64], buf[512];
    size_t len;
    bool found;
    snprintf(key, sizeof key, "cb:%s", token + 1);
    return tg_storage_get(s, key, buf, sizeof buf, &len, &found) == TG_OK && found;
}

static void test_swap(void **state)
{
    (void)state;
    tg_storage *s = tg_storage_memory_new();
    tg_router *r;
    tg_dispatcher *d = make(&r, s, 0, 0, 0);
    assert_int_equal(put(d, "short"), TG_OK);
    assert_string_equal(tokens[0], "order:1"); /* fits: kept as it is, nothing stored */
    assert_int_equal(put(d, "long"), TG_OK);
    assert_int_equal(strlen(tokens[1]), 17);
    assert_true(tokens[1][0] == '~');
    assert_true(stored(s, tokens[1]));
    assert_int_equal(put(d, "binary"), TG_OK);
    assert_int_equal(put(d, "tilde"), TG_OK);
    assert_true(tokens[3][0] == '~' && strlen(tokens[3]) == 17); /* would look like a token */

    press(d, tokens[1]); /* routed by the "order:" filter on the swapped-back data */
    assert_int_equal(seen_len, 300);
    assert_memory_equal(seen, long_data(), 300);
    assert_false(seen_lost);
    press(d, tokens[2]);
    assert_int_equal(seen_len, 7);
    assert_memory_equal(seen, "bin\0ary", 7);
    press(d, tokens[3]);
    assert_int_equal(seen_len, 12);
    press(d, "~AAAAAAAAAAAAAAAA"); /* a token nobody put */
    assert_true(seen_lost);
    press(d, "plain"); /* not a token: as it came */
    assert_int_equal(seen_len, 5);
    assert_false(seen_lost);
    tg_dispatcher_free(d);
    tg_router_free(r);
    tg_storage_free(s);
}

static void test_bounds(void **state)
{
    (void)state;
    tg_storage *s = tg_storage_memory_new();
    tg_router *r;
    tg_dispatcher *d = make(&r, s, 2, 0, 0);
    put(d, "a");
    put(d, "b");
    put(d, "c"); /* a is the least recently used: dropped, and its stored copy deleted */
    assert_false(stored(s, tokens[0]));
    press(d, tokens[0]);
    assert_true(seen_lost);
    press(d, tokens[1]); /* b pressed: now more recent than c */
    assert_false(seen_lost);
    put(d, "d"); /* c goes, not b */
    assert_false(stored(s, tokens[2]));
    assert_true(stored(s, tokens[1]));
    press(d, tokens[1]);
    assert_false(seen_lost);
    tg_dispatcher_free(d);
    tg_router_free(r);

    d = make(&r, s, 0, 1, 100); /* 1 ms to live, 100 bytes at most */
    assert_int_equal(put(d, "long"), TG_ERR_TOO_BIG);
    assert_int_equal(put(d, "binary"), TG_OK);
    tg__sleep_ms(20);
    press(d, tokens[0]);
    assert_true(seen_lost);
    tg_dispatcher_free(d);
    tg_router_free(r);
    tg_storage_free(s);
}

static void test_pack(void **state)
{
    (void)state;
    char out[65], buf[65];
    const char *f[4];
    assert_int_equal(tg_callback_pack(out, sizeof out, "buy", (const char *[]){"42", "large"}, 2),
                     TG_OK);
    assert_string_equal(out, "buy:42:large");
    assert_int_equal(tg_callback_unpack(out, "buy", buf, sizeof buf, f, 4), 2);
    assert_string_equal(f[0], "42");
    assert_string_equal(f[1], "large");
    int64_t v;
    assert_true(tg_callback_field_int(f[0], &v) && v == 42);
    assert_false(tg_callback_field_int(f[1], &v));
    assert_int_equal(tg_callback_unpack(out, "bu", buf, sizeof buf, f, 4), -1);
    assert_int_equal(tg_callback_unpack(out, "buy", buf, sizeof buf, f, 1), -1);
    assert_int_equal(tg_callback_unpack("buy", "buy", buf, sizeof buf, f, 4), 0);
    assert_int_equal(tg_callback_unpack("buy::", "buy", buf, sizeof buf, f, 4), 2);
    assert_string_equal(f[0], "");
    assert_int_equal(tg_callback_pack(out, sizeof out, "buy", (const char *[]){"a:b"}, 1),
                     TG_ERR_INVALID);
    assert_non_null(strstr(tg_keyboard_errmsg(), "field 0"));
    char big[70];
    memset(big, 'x', 69);
    big[69] = '\0';
    assert_int_equal(tg_callback_pack(out, sizeof out, "p", (const char *[]){big}, 1),
                     TG_ERR_TOO_BIG);
    assert_non_null(strstr(tg_keyboard_errmsg(), "tg_hctx_callback_put"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_swap),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_pack),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
