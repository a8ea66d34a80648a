/*
 * json_int: helpers shared by the files of the JSON codec (tokenizer, accessors, path/errors,
 * writer). Private to src/bot/json/; not part of the contract in json.h.
 *
 * Thread-safety: all functions are reentrant.
 */
#ifndef TGKIT_BOT_JSON_INT_H
#define TGKIT_BOT_JSON_INT_H

#include <stddef.h>
#include <stdint.h>

#include "bot/json/json.h"

/* Value of a hex digit, or -1. */
static inline int tg__json_hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Encode code point cp (valid scalar value) as UTF-8 into out (4 bytes). Returns the length. */
static inline size_t tg__json_utf8_put(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/*
 * Decode the escape sequence at raw[0] == '\\' (already validated by the tokenizer) into out
 * (at least 4 bytes). *used receives the raw bytes consumed. Returns the bytes written.
 */
size_t tg__json_unescape1(const char *raw, char *out, size_t *used);

/*
 * Length of the UTF-8 sequence starting at s[0] if it is a valid scalar value (no overlong,
 * no surrogate, <= U+10FFFF) fully inside s[0..n); 0 if it is not.
 */
size_t tg__json_utf8_valid1(const unsigned char *s, size_t n);

/* Describe input byte s[pos] for messages ("'x'", "byte 0x1f", "end of input") into out. */
void tg__json_describe(const char *s, size_t len, size_t pos, char *out, size_t cap);

#endif
