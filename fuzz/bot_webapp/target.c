/*
 * fuzz target: Mini App initData and Login Widget data (src/bot/helpers/webapp.c), which a
 * Mini App backend reads from any client on the network. Any input must be checked or
 * refused with a message, never read past its end or leak; a result must come with TG_OK
 * only.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tgbot/webapp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    tg_webapp_check chk = {
        .bot_token = "123456:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
        .bot_id = 123456,
        .public_key_hex = "ef8e63de05c8163584cac771e06f4bf7171d295d83bd813f1224148c994fb8a2",
        .max_age_s = UINT64_MAX};
    tg_webapp_data *d = (tg_webapp_data *)1;
    tg_status st = tg_webapp_validate(s, &d, &chk);
    if ((st == TG_OK) != (d != NULL) || (st != TG_OK && !tg_webapp_errmsg()[0]))
        abort();
    tg_webapp_data_free(d);
    tg_login_data *l = (tg_login_data *)1;
    st = tg_login_validate(s, &l, &chk);
    if ((st == TG_OK) != (l != NULL))
        abort();
    tg_login_data_free(l);
    free(s);
    return 0;
}
