/*
 * fuzz bot_broadcast_progress: the broadcast's progress file parser
 * (tg__bcast_progress_parse in src/bot/client/broadcast.c). The first byte is the list's
 * length n (0..255); the rest is the file, whose header must be that list's. The state and
 * started arrays have exactly n entries (a write past them is caught), and every state left
 * must be an outcome this version knows.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bot/client/broadcast_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t n = data[0];
    char header[64];
    snprintf(header, sizeof header, "tgbot-broadcast 1 %zu 0123456789abcdef\n", n);
    uint8_t *state = calloc(n ? n : 1, 1);
    bool *started = calloc(n ? n : 1, sizeof *started);
    if (!state || !started)
        abort();
    tg__bcast_progress_parse((const char *)data + 1, size - 1, header, n, state, started);
    for (size_t i = 0; i < n; i++)
        if (state[i] >= TG_BCAST_NOUTCOMES)
            abort();
    free(state);
    free(started);
    return 0;
}
