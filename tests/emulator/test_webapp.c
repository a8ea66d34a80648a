/*
 * The emulator opens a Mini App for a user (POST /control/webapp, tg_test_webapp) and the
 * bot's backend checks the initData with tgbot/webapp.h: the hash with the bot's token, the
 * signature with the emulator's key, the user and start_param as the emulator knows them;
 * changed data and another bot's token are refused.
 */
#include "tgtest.h"

#include "tgbot/testing.h"
#include "tgbot/webapp.h"

static void test_open_and_check(void **state)
{
    (void)state;
    tg_test *t = tg_test_start();
    assert_non_null(t);
    int64_t ann = tg_test_add_user(t, "Ann \xc3\xa9 & Co");
    assert_true(ann > 0);
    char *init = tg_test_webapp(t, ann, "ref_7 & more");
    if (!init)
        fail_msg("%s", tg_test_errmsg(t));
    assert_non_null(tg_test_webapp_public_key());
    tg_webapp_check chk = {.bot_token = tg_test_token(t),
                           .bot_id = tg_test_bot_id(t),
                           .public_key_hex = tg_test_webapp_public_key()};
    tg_webapp_data *d;
    if (tg_webapp_validate(init, &d, &chk) != TG_OK)
        fail_msg("%s", tg_webapp_errmsg());
    assert_true(d->has_user && d->signature_checked);
    assert_int_equal(d->user.id, ann);
    assert_string_equal(d->user.first_name, "Ann \xc3\xa9 & Co");
    assert_string_equal(d->start_param, "ref_7 & more");
    assert_non_null(d->query_id);
    tg_webapp_data_free(d);
    /* Telegram's key does not know the emulator's signatures; the hash alone still holds */
    chk.public_key_hex = NULL;
    assert_int_equal(tg_webapp_validate(init, &d, &chk), TG_ERR_API);
    chk.bot_id = 0;
    assert_int_equal(tg_webapp_validate(init, &d, &chk), TG_OK);
    tg_webapp_data_free(d);
    /* another bot's token, and a changed start_param */
    chk.bot_token = "999999:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    assert_int_equal(tg_webapp_validate(init, &d, &chk), TG_ERR_API);
    chk.bot_token = tg_test_token(t);
    char *p = strstr(init, "ref_7");
    assert_non_null(p);
    p[4] = '8';
    assert_int_equal(tg_webapp_validate(init, &d, &chk), TG_ERR_API);
    free(init);
    tg_test_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_and_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
