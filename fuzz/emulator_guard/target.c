/*
 * fuzz emulator_guard: the Host / Origin / Content-Type verdict of the emulator's web chat
 * and control API (src/emulator/guard.c). The input is up to three lines: Host, Origin,
 * Content-Type ("-" alone = header absent); byte 0's low bits pick control/mutating and the
 * listen address (127.0.0.1 or 0.0.0.0). Invariants: the verdict is 0, 403, 415 or 421 with
 * an explanation, and nothing passes whose Host or Origin lacks the port (8081).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "emulator/server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096 || memchr(data, 0, size))
        return 0;
    uint8_t flags = data[0];
    char *text = malloc(size);
    if (!text)
        return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    char *line[3] = {NULL, NULL, NULL};
    char *p = text;
    for (int i = 0; i < 3 && p; i++) {
        line[i] = p;
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        p = nl ? nl + 1 : NULL;
        if (!strcmp(line[i], "-"))
            line[i] = NULL;
    }
    const char *why = NULL;
    bool control = flags & 1, mutating = flags & 2;
    int v = emu_guard(flags & 4 ? "0.0.0.0" : "127.0.0.1", 8081, control, mutating, line[0],
                      line[1], line[2], &why);
    if (v != 0 && v != 403 && v != 415 && v != 421)
        abort();
    if (v && (!why || !*why))
        abort();
    if (!v && line[0] && !strstr(line[0], ":8081"))
        abort();
    if (!v && control && line[1] && !strstr(line[1], ":8081"))
        abort();
    free(text);
    return 0;
}
