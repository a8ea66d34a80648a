/*
 * Mini App initData and Login Widget checks (tgbot/webapp.h) against
 * tests/vectors/webapp.json, computed by gen_webapp_vectors.py with Python's hmac and
 * cryptography (never with the code under test): valid, tampered, wrong bot, expired, from
 * the future, missing fields, duplicates, bad encoding, Ed25519 valid and invalid, a
 * published worked example; then the parsed fields, Telegram's own keys wired in, and no
 * token in any message.
 */
#include "tgtest.h"

#include <jansson.h>

#include "tgbot/webapp.h"

static json_t *vectors;

static int setup(void **state)
{
    (void)state;
    json_error_t e;
    vectors = json_load_file(tgtest_data_path("vectors/webapp.json"), 0, &e);
    if (!vectors)
        fprintf(stderr, "webapp.json: %s (line %d)\n", e.text, e.line);
    return vectors ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    json_decref(vectors);
    return 0;
}

static const char *vstr(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static tg_webapp_check check_for(json_t *c)
{
    const char *how = vstr(c, "check");
    tg_webapp_check chk = {.now_s = (int64_t)json_integer_value(json_object_get(vectors, "now"))};
    if (strcmp(how, "signature") != 0)
        chk.bot_token = vstr(c, "token") ? vstr(c, "token") : vstr(vectors, "token");
    if (strcmp(how, "token") != 0) {
        chk.bot_id = json_integer_value(json_object_get(vectors, "bot_id"));
        chk.public_key_hex = vstr(vectors, "public_key_hex");
    }
    if (json_object_get(c, "max_age"))
        chk.max_age_s = UINT64_MAX;
    return chk;
}

static const struct {
    const char *expect;
    tg_status st;
    const char *says;
} outcomes[] = {
    {"ok", TG_OK, ""},
    {"hash", TG_ERR_API, "hash does not match"},
    {"signature", TG_ERR_API, "signature does not verify"},
    {"expired", TG_ERR_TIMEOUT, "s old, at most 86400"},
    {"future", TG_ERR_TIMEOUT, "in the future"},
    {"missing", TG_ERR_INVALID, "is missing"},
    {"duplicate", TG_ERR_INVALID, "appears twice"},
    {"encoding", TG_ERR_INVALID, "bad percent-encoding"},
};

static void test_webapp_vectors(void **state)
{
    (void)state;
    json_t *cases = json_object_get(vectors, "webapp");
    size_t i;
    json_t *c;
    int n = 0;
    json_array_foreach(cases, i, c)
    {
        tg_webapp_check chk = check_for(c);
        tg_webapp_data *d = NULL;
        tg_status st = tg_webapp_validate(vstr(c, "init_data"), &d, &chk);
        bool matched = false;
        for (size_t k = 0; k < sizeof outcomes / sizeof outcomes[0]; k++)
            if (strcmp(outcomes[k].expect, vstr(c, "expect")) == 0) {
                matched = true;
                if (st != outcomes[k].st || !strstr(tg_webapp_errmsg(), outcomes[k].says))
                    fail_msg("%s: %s (\"%s\"), want %s (\"%s\")", vstr(c, "name"), tg_strerror(st),
                             tg_webapp_errmsg(), tg_strerror(outcomes[k].st), outcomes[k].says);
            }
        assert_true(matched);
        assert_null(strstr(tg_webapp_errmsg(), "AAHdqTcv")); /* never the token */
        assert_true((st == TG_OK) == (d != NULL));
        tg_webapp_data_free(d);
        n++;
    }
    assert_true(n >= 16);
}

static void test_webapp_parsed(void **state)
{
    (void)state;
    json_t *c = json_array_get(json_object_get(vectors, "webapp"), 0); /* "valid" */
    tg_webapp_check chk = check_for(c);
    tg_webapp_data *d;
    assert_int_equal(tg_webapp_validate(vstr(c, "init_data"), &d, &chk), TG_OK);
    assert_true(d->signature_checked);
    assert_true(d->has_user);
    assert_false(d->has_chat || d->has_receiver);
    assert_int_equal(d->user.id, 279058397);
    assert_string_equal(d->user.first_name, "Vlad \xc3\xa9 + & = %");
    assert_string_equal(d->user.language_code, "ru");
    assert_true(d->user.is_premium && d->user.allows_write_to_pm && !d->user.is_bot);
    assert_string_equal(d->user.photo_url, "https://t.me/i/userpic/320/x.svg");
    assert_string_equal(d->query_id, "AAHdF6IQAAAAAN0XohDhrOrc");
    assert_string_equal(d->start_param, "ref_42");
    assert_string_equal(d->chat_type, "sender");
    assert_string_equal(d->chat_instance, "-3788475317572404878");
    assert_int_equal(d->can_send_after, 5);
    assert_int_equal(d->auth_date, chk.now_s - 60);
    assert_non_null(tg_webapp_field(d, "signature"));
    assert_null(tg_webapp_field(d, "nope"));
    tg_webapp_data_free(d);

    /* chat and receiver */
    json_t *cases = json_object_get(vectors, "webapp");
    size_t i;
    json_array_foreach(cases, i, c)
    {
        if (strcmp(vstr(c, "name"), "chat and receiver") != 0)
            continue;
        chk = check_for(c);
        assert_int_equal(tg_webapp_validate(vstr(c, "init_data"), &d, &chk), TG_OK);
        assert_true(d->has_chat && d->has_receiver);
        assert_int_equal(d->chat.id, -1001234567890LL);
        assert_string_equal(d->chat.type, "supergroup");
        assert_string_equal(d->chat.title, "Pizza fans");
        assert_int_equal(d->receiver.id, 7);
        assert_string_equal(d->receiver.first_name, "Bob");
        tg_webapp_data_free(d);
    }
}

/* The vectors are signed by our own key: Telegram's keys (production, test) must refuse them,
 * which shows which key each option picks. */
static void test_telegram_keys(void **state)
{
    (void)state;
    json_t *c = json_array_get(json_object_get(vectors, "webapp"), 0);
    tg_webapp_check chk = check_for(c);
    chk.public_key_hex = NULL;
    tg_webapp_data *d;
    assert_int_equal(tg_webapp_validate(vstr(c, "init_data"), &d, &chk), TG_ERR_API);
    assert_non_null(strstr(tg_webapp_errmsg(), "Telegram's production key for bot 123456"));
    chk.test_environment = true;
    assert_int_equal(tg_webapp_validate(vstr(c, "init_data"), &d, &chk), TG_ERR_API);
    assert_non_null(strstr(tg_webapp_errmsg(), "Telegram's test key"));
    chk.public_key_hex = "zz";
    assert_int_equal(tg_webapp_validate(vstr(c, "init_data"), &d, &chk), TG_ERR_INVALID);
    /* nothing to check with */
    assert_int_equal(tg_webapp_validate("auth_date=1", &d, &(tg_webapp_check){0}), TG_ERR_INVALID);
    assert_non_null(strstr(tg_webapp_errmsg(), "give bot_token"));
    /* a field without '=' and an oversized input */
    assert_int_equal(tg_webapp_validate("a=1&b", &d, &(tg_webapp_check){.bot_token = "1:x"}),
                     TG_ERR_INVALID);
    assert_non_null(strstr(tg_webapp_errmsg(), "byte 4"));
    char *big = malloc(20000);
    memset(big, 'a', 19999);
    big[19999] = '\0';
    assert_int_equal(tg_webapp_validate(big, &d, &(tg_webapp_check){.bot_token = "1:x"}),
                     TG_ERR_TOO_BIG);
    free(big);
}

static void test_login_vectors(void **state)
{
    (void)state;
    json_t *cases = json_object_get(vectors, "login");
    size_t i;
    json_t *c;
    tg_webapp_check chk = {.bot_token = vstr(vectors, "token"),
                           .now_s = (int64_t)json_integer_value(json_object_get(vectors, "now"))};
    json_array_foreach(cases, i, c)
    {
        tg_login_data *d = NULL;
        tg_status st = tg_login_validate(vstr(c, "query"), &d, &chk);
        bool ok = strcmp(vstr(c, "expect"), "ok") == 0;
        if (ok ? st != TG_OK : st != TG_ERR_API)
            fail_msg("%s: %s (%s)", vstr(c, "name"), tg_strerror(st), tg_webapp_errmsg());
        if (ok) {
            assert_int_equal(d->user.id, 279058397);
            assert_string_equal(d->user.first_name, "Vlad");
            assert_string_equal(d->user.username, "vdk");
            assert_int_equal(d->auth_date, chk.now_s - 10);
        }
        tg_login_data_free(d);
    }
    tg_login_data *d;
    chk.now_s += 200000;
    assert_int_equal(tg_login_validate(vstr(json_array_get(cases, 0), "query"), &d, &chk),
                     TG_ERR_TIMEOUT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_webapp_vectors),
        cmocka_unit_test(test_webapp_parsed),
        cmocka_unit_test(test_telegram_keys),
        cmocka_unit_test(test_login_vectors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
