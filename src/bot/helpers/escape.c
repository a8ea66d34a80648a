/*
 * escape: escaping for HTML and MarkdownV2 parse modes, UTF-16 counting, and the span of a
 * received entity. Pure functions over their arguments.
 */
#include <string.h>

#include "bot/helpers/utf8.h"
#include "tgbot/text.h"

size_t tg__utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (len == 0 || c > 0xF4 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    if (len == 3 && ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] >= 0xA0)))
        return 0; /* overlong, or a UTF-16 surrogate */
    if (len == 4 && ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] >= 0x90)))
        return 0; /* overlong, or beyond U+10FFFF */
    return len;
}

bool tg__utf8_valid(const char *s, size_t n, size_t *bad)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t k = tg__utf8_seq(p + i, n - i);
        if (k == 0) {
            if (bad)
                *bad = i;
            return false;
        }
        i += k;
    }
    return true;
}

size_t tg_utf16_len(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t units = 0;
    for (size_t i = 0; i < n;) {
        size_t k = tg__utf8_seq(p + i, n - i);
        units += k == 4 ? 2 : 1;
        i += k ? k : 1;
    }
    return units;
}

/* The escape of c in mode, or NULL to copy c as is. buf holds a 2-byte escape. */
static const char *escape_of(tg_escape_mode mode, char c, char buf[3])
{
    const char *set = NULL;
    switch (mode) {
    case TG_ESCAPE_HTML:
        return c == '&'   ? "&amp;"
               : c == '<' ? "&lt;"
               : c == '>' ? "&gt;"
               : c == '"' ? "&quot;"
                          : NULL;
    case TG_ESCAPE_MARKDOWN_V2:
        set = "_*[]()~`>#+-=|{}.!\\";
        break;
    case TG_ESCAPE_MARKDOWN_V2_CODE:
        set = "`\\";
        break;
    case TG_ESCAPE_MARKDOWN_V2_URL:
        set = ")\\";
        break;
    }
    if (!set || c == '\0' || !strchr(set, c))
        return NULL;
    buf[0] = '\\';
    buf[1] = c;
    buf[2] = '\0';
    return buf;
}

size_t tg_escape(tg_escape_mode mode, const char *s, char *out, size_t cap)
{
    size_t need = 0, o = 0;
    bool room = cap > 0;
    for (; s && *s; s++) {
        char buf[3];
        const char *esc = escape_of(mode, *s, buf);
        size_t k = esc ? strlen(esc) : 1;
        if (room && o + k < cap) {
            memcpy(out + o, esc ? esc : s, k);
            o += k;
        } else {
            room = false; /* cut at a whole escape, never inside one */
        }
        need += k;
    }
    if (cap)
        out[o] = '\0';
    return need;
}

/* The byte index where UTF-16 unit `unit` starts in text[0..n), or (size_t)-1 when it is past
 * the end or inside a character. */
static size_t byte_at_unit(const char *text, size_t n, int64_t unit)
{
    const unsigned char *p = (const unsigned char *)text;
    int64_t u = 0;
    size_t i = 0;
    while (u < unit && i < n) {
        size_t k = tg__utf8_seq(p + i, n - i);
        u += k == 4 ? 2 : 1;
        i += k ? k : 1;
    }
    return u == unit ? i : (size_t)-1;
}

tg_status tg_entity_text(const char *text, const tg_message_entity *e, const char **start,
                         size_t *len)
{
    if (!text || !e || !start || !len || e->offset < 0 || e->length < 0)
        return TG_ERR_INVALID;
    size_t n = strlen(text);
    size_t a = byte_at_unit(text, n, e->offset);
    if (a == (size_t)-1)
        return TG_ERR_INVALID;
    size_t b = byte_at_unit(text + a, n - a, e->length);
    if (b == (size_t)-1)
        return TG_ERR_INVALID;
    *start = text + a;
    *len = b;
    return TG_OK;
}
