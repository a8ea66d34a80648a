/*
 * broadcast_int.h: the progress file's parser (broadcast.c), apart so that it can be fuzzed
 * (fuzz/bot_broadcast_progress).
 *
 * text[0..len) must start with header exactly (the list's "tgbot-broadcast 1 <n> <hash>\n");
 * then each whole line "S <i>" sets started[i] and "D <i> <outcome>" sets state[i] (the
 * first outcome recorded wins), for i < n and 0 < outcome < TG_BCAST_NOUTCOMES. Anything
 * else (a torn last line of a process that died mid-write, garbage) is skipped. No I/O, no
 * allocation. Returns 0, or -1 when the header differs (another list).
 */
#ifndef TGKIT_BOT_CLIENT_BROADCAST_INT_H
#define TGKIT_BOT_CLIENT_BROADCAST_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tgbot/broadcast.h"

int tg__bcast_progress_parse(const char *text, size_t len, const char *header, size_t n,
                             uint8_t *state, bool *started);

#endif
