/*
 * webapp: the emulator opens a Mini App for a user: the initData a real Telegram client
 * would hand the Mini App, signed the way Telegram signs it, so a bot's Mini App backend
 * (tgbot/webapp.h or any other checker) can be tested offline.
 *
 * hash: HMAC-SHA256 with the bot's token, exactly as Telegram computes it, so a checker
 * given the token accepts it. signature: Ed25519 over "<bot_id>:WebAppData\n..." as
 * Telegram's, but with the emulator's own key (Telegram's private key is Telegram's): a
 * checker must be given emu_webapp_public_key() instead of Telegram's published key. The
 * key pair is made once per process from a secure random source.
 */
#ifndef TGKIT_EMULATOR_WEBAPP_H
#define TGKIT_EMULATOR_WEBAPP_H

#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "emulator/emu.h"

/* initData for user u opening bot b's Mini App into out: query_id, user (JSON), auth_date,
 * start_param and chat_type when given (NULL = left out), signature, hash. 0, or -1 with
 * err. */
int emu_webapp_init_data(const emu_bot *b, const emu_user *u, const char *start_param,
                         const char *chat_type, int64_t auth_date, tg__buf *out, char *err,
                         size_t errcap);
/* The emulator's Ed25519 public key, 64 hex digits; NULL when no key could be made. */
const char *emu_webapp_public_key(void);

#endif
