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
#include "core/str.h"

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
