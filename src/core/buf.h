/*
 * buf: a growable byte buffer with a hard cap.
 *
 * Used for encoded JSON, HTTP bodies, log lines and anything else built piece by piece.
 * Every buffer has a maximum size fixed at init (STYLE: every growable buffer gets a cap);
 * appends beyond it fail with -E2BIG and leave the buffer unchanged. The contents are always
 * followed by a NUL byte that is not counted in len, so data can be read as a C string.
 *
 * Return convention: 0 on success, -ENOMEM or -E2BIG.
 * Ownership: caller-owned struct (init/cleanup); data belongs to the buffer until
 * tg__buf_detach(). Thread-safety: none.
 */
#ifndef TGKIT_CORE_BUF_H
#define TGKIT_CORE_BUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct tg__buf {
    char *data; /* NULL until the first append */
    size_t len; /* bytes of content */
    size_t cap; /* bytes allocated (room for content + NUL) */
    size_t max; /* hard cap on len */
} tg__buf;

#define TG__BUF_DEFAULT_MAX ((size_t)64 << 20) /* 64 MiB */

/* max_bytes 0 = TG__BUF_DEFAULT_MAX. Allocates nothing. */
void tg__buf_init(tg__buf *b, size_t max_bytes);
void tg__buf_cleanup(tg__buf *b); /* NULL-safe; the buffer may be reused after init */
static inline void tg__buf_reset(tg__buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}
/* Make room for extra more bytes (plus the NUL). */
int tg__buf_reserve(tg__buf *b, size_t extra);
int tg__buf_append(tg__buf *b, const void *p, size_t n);
int tg__buf_puts(tg__buf *b, const char *s);
int tg__buf_putc(tg__buf *b, char c);
int tg__buf_printf(tg__buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int tg__buf_vprintf(tg__buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Drop the first n bytes (n > len drops all). */
void tg__buf_consume(tg__buf *b, size_t n);
/* Content as a C string; "" for an empty buffer (never NULL). */
const char *tg__buf_cstr(const tg__buf *b);
/* Hand the allocation (NUL-terminated, free with tg__free) to the caller; buffer is emptied. */
char *tg__buf_detach(tg__buf *b, size_t *len);

#endif
