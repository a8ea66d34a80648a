/*
 * A consumer of the installed test helper (tgbot/testing.h, libtgbot_testing): an
 * in-process emulator, a user writing to the bot, libtgbot answering through the emulator's
 * URL, and the helper seeing the answer. Public headers only.
 */
#include <stdio.h>
#include <stdlib.h>

#include <tgbot/testing.h>
#include <tgbot/tgbot.h>

int main(void)
{
    tg_test *t = tg_test_start();
    if (!t)
        return 1;
    int rc = 0;
    tg_bot *bot = tg_bot_new(tg_test_token(t), &(tg_bot_options){.base_url = tg_test_url(t)});
    tg_ctx *ctx = bot ? tg_ctx_new(bot) : NULL;
    tg_message *m;
    if (!ctx || tg_test_send(t, 0, 0, "/start") < 0) {
        rc = 2;
    } else if (tg_send_message(
                   ctx,
                   &(tg_send_message_params){.chat_id = tg_chat_id_int(tg_test_user_id(t)),
                                             .text = "installed"},
                   &m) != TG_OK) {
        fprintf(stderr, "sendMessage: %s\n", tg_ctx_errmsg(ctx));
        rc = 3;
    } else {
        char *j = tg_test_wait_message(t, 0, 0, "installed", 5000);
        if (!j)
            fprintf(stderr, "%s\n", tg_test_errmsg(t));
        rc = j ? 0 : 4;
        free(j);
    }
    tg_ctx_free(ctx);
    tg_bot_free(bot);
    tg_test_free(t);
    if (rc == 0)
        puts("testing consumer: ok");
    return rc;
}
