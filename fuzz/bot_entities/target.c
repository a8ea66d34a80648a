/*
 * fuzz target: UTF-16 counting and entity extraction (src/bot/helpers/escape.c), which map
 * the offsets of received entities (network data) onto received text, and the escapers.
 * The first 8 bytes give an entity's offset and length (0..255 each, in UTF-16 units and
 * spanning any byte values), the rest is the text (possibly malformed UTF-8). A span
 * returned must lie inside the text and count exactly the units asked for; escaping must
 * report the length it needs and never write past cap.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tgbot/text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_escape(tg_escape_mode mode, const char *s)
{
    char small[17];
    size_t need = tg_escape(mode, s, NULL, 0);
    size_t got = tg_escape(mode, s, small, sizeof small);
    if (got != need || strlen(small) >= sizeof small ||
        (need < sizeof small && strlen(small) != need))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    tg_message_entity e = {.offset = data[0], .length = data[1]};
    char *text = malloc(size - 2 + 1);
    if (!text)
        return 0;
    memcpy(text, data + 2, size - 2);
    text[size - 2] = '\0';
    size_t n = strlen(text); /* up to the first NUL, as a C string field */
    const char *start;
    size_t len;
    if (tg_entity_text(text, &e, &start, &len) == TG_OK) {
        if (start < text || start + len > text + n)
            abort();
        if (tg_utf16_len(text, (size_t)(start - text)) != (size_t)e.offset ||
            tg_utf16_len(start, len) != (size_t)e.length)
            abort();
    } else if (e.offset == 0 && e.length == 0) {
        abort(); /* the empty span at 0 always exists */
    }
    for (int m = TG_ESCAPE_HTML; m <= TG_ESCAPE_MARKDOWN_V2_URL; m++)
        check_escape((tg_escape_mode)m, text);
    free(text);
    return 0;
}
