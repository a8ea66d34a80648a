/*
 * fuzz emulator_markup: parse_mode text (byte 0: even = HTML, odd = MarkdownV2) into plain
 * text and entities, then the entities Telegram finds in plain text. Every entity must lie
 * inside the text (UTF-16 offsets) and every failure must say why.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "emulator/emu.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const char *text, const tg_message_entity *e, size_t n)
{
    size_t len = emu_utf16_len(text, strlen(text));
    for (size_t i = 0; i < n; i++)
        if (e[i].offset < 0 || e[i].length <= 0 || (size_t)(e[i].offset + e[i].length) > len)
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char *in = strndup((const char *)data + 1, size - 1);
    if (!in)
        return 0;
    tg__arena a;
    tg__arena_init(&a, 0, 0);
    char *text, err[200] = "";
    tg_message_entity *ents = NULL;
    size_t n = 0;
    int mode = (data[0] & 1) ? TG_PARSE_MODE_MARKDOWN_V2 : TG_PARSE_MODE_HTML;
    if (emu_markup_parse(mode, in, &a, &text, &ents, &n, err, sizeof err) == 0) {
        check(text, ents, n);
        if (emu_auto_entities(text, &a, &ents, &n) == 0)
            check(text, ents, n);
    } else if (!err[0]) {
        abort();
    }
    tg__arena_cleanup(&a);
    free(in);
    return 0;
}
