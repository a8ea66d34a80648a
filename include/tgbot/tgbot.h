/*
 * tgbot.h: the umbrella header of libtgbot, the Telegram Bot API library of tgkit.
 * Include this one header; it pulls in every public part of the library.
 *
 * Conventions used by every header (each function states where it differs):
 *  - A tg_bot is created once and shared by any number of threads.
 *  - A tg_ctx is used by one thread at a time; everything decoded through it lives in its
 *    arena until tg_ctx_reset() or tg_ctx_free().
 *  - Pointers passed in are borrowed for the call and not retained, unless stated.
 */
#ifndef TGBOT_TGBOT_H
#define TGBOT_TGBOT_H

#include "tgbot/common.h"
#include "tgbot/types.h"
#include "tgbot/api.h"
#include "tgbot/client.h"
#include "tgbot/dispatch.h"
#include "tgbot/updates.h"
#include "tgbot/keyboard.h"
#include "tgbot/text.h"
#include "tgbot/links.h"

#endif
