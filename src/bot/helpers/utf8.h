/*
 * utf8: UTF-8 validation for the helpers (text builder, catalogs). Pure functions.
 */
#ifndef TGKIT_BOT_HELPERS_UTF8_H
#define TGKIT_BOT_HELPERS_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* Length of the well-formed UTF-8 sequence at s (at most n bytes), or 0 when malformed
 * (overlong, surrogate, beyond U+10FFFF, truncated). */
size_t tg__utf8_seq(const unsigned char *s, size_t n);
/* True when s[0..n) is well-formed UTF-8; otherwise *bad (optional) = first bad byte. */
bool tg__utf8_valid(const char *s, size_t n, size_t *bad);

#endif
