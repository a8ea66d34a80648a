/*
 * tgbot.h: the umbrella header of libtgbot, the Telegram Bot API library of tgkit.
 * Include this one header; it pulls in every public part of the library.
 *
 * Conventions used by every header (each function states where it differs):
 *  - A tg_bot is created once and shared by any number of threads.
 *  - A tg_ctx is used by one thread at a time; everything decoded through it lives in its
 *    arena until tg_ctx_reset() or tg_ctx_free().
 *  - Pointers passed in are borrowed for the call and not retained, unless stated.
 *
 * ABI and versions (the whole policy: docs/abi.md):
 *  - Stable within a SOVERSION: every exported function and its signature (the committed
 *    list abi/libtgbot.symbols is checked by CI), the values of tg_status and the other
 *    hand-written enums (append only), and the layout of the hand-written structs.
 *  - A Bot API regeneration may change generated struct layouts (tgbot/api.h) and add
 *    functions and enum values; a release that changes a layout bumps the SOVERSION.
 *  - SOVERSION: "0.MINOR" before 1.0 (libtgbot.so.0.1), MAJOR from 1.0 on. tg_version_num()
 *    against TG_VERSION_NUM detects a header/library mismatch.
 *  - Option and statistics structs grow only at the end. The functions taking them are
 *    macros that pass sizeof(struct) as your header declares it: fields your build lacks
 *    read as zero (their default), and a newer build's fields are refused unless zero.
 *    Always zero-initialize them (designated initializers or {0}).
 */
#ifndef TGBOT_TGBOT_H
#define TGBOT_TGBOT_H

#include "tgbot/common.h"
#include "tgbot/types.h"
#include "tgbot/api.h"
#include "tgbot/client.h"
#include "tgbot/async.h"
#include "tgbot/broadcast.h"
#include "tgbot/codec.h"
#include "tgbot/storage.h"
#include "tgbot/dispatch.h"
#include "tgbot/jobs.h"
#include "tgbot/menu.h"
#include "tgbot/webapp.h"
#include "tgbot/updates.h"
#include "tgbot/keyboard.h"
#include "tgbot/text.h"
#include "tgbot/links.h"
#include "tgbot/i18n.h"
#include "tgbot/fleet.h"

#endif
