/*
 * emu_bot: a bot inside the test process, long polling a tgbot-emulator (or any Bot API at
 * url) on its own thread with router r, for tests that script users against it.
 * Stop it before freeing the router; stop frees the dispatcher and the bot.
 */
#ifndef TGKIT_TEST_EMU_BOT_H
#define TGKIT_TEST_EMU_BOT_H

#include <pthread.h>

#include "tgbot/tgbot.h"

typedef struct tgtest_emu_bot {
    tg_bot *bot;
    tg_dispatcher *d;
    pthread_t th;
} tgtest_emu_bot;

/* Start polling (fails the test when it cannot). */
void tgtest_emu_bot_start(tgtest_emu_bot *b, const char *token, const char *url, tg_router *r,
                          unsigned workers);
/* Stop polling, wait for it, free the dispatcher and the bot. */
void tgtest_emu_bot_stop(tgtest_emu_bot *b);

#endif
