/* emu_bot: a polling bot on its own thread for emulator tests (see emu_bot.h). */
#include "emu_bot.h"

#include "tgtest.h"

static void *poll_thread(void *d)
{
    tg_run_polling(d, NULL);
    return NULL;
}

void tgtest_emu_bot_start(tgtest_emu_bot *b, const char *token, const char *url, tg_router *r,
                          unsigned workers)
{
    b->bot = tg_bot_new(token, &(tg_bot_options){.base_url = url});
    assert_non_null(b->bot);
    b->d = tg_dispatcher_new(b->bot, r, &(tg_dispatcher_options){.workers = workers});
    if (!b->d)
        fail_msg("dispatcher: %s", tg_dispatcher_errmsg(NULL));
    assert_int_equal(pthread_create(&b->th, NULL, poll_thread, b->d), 0);
}

void tgtest_emu_bot_stop(tgtest_emu_bot *b)
{
    tg_dispatcher_stop(b->d);
    pthread_join(b->th, NULL);
    tg_dispatcher_free(b->d);
    tg_bot_free(b->bot);
    b->d = NULL;
    b->bot = NULL;
}
