/*
 * buf: growable byte buffer with a cap. See buf.h.
 * Invariant: data == NULL or data[len] == '\0' and len < cap <= max + 1.
 */
#include "core/buf.h"

#include "core/alloc.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

void tg__buf_init(tg__buf *b, size_t max_bytes)
{
    b->data = NULL;
    b->len = b->cap = 0;
    b->max = max_bytes ? max_bytes : TG__BUF_DEFAULT_MAX;
}

void tg__buf_cleanup(tg__buf *b)
{
    if (!b)
        return;
    tg__free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

int tg__buf_reserve(tg__buf *b, size_t extra)
{
    if (extra > b->max || b->len > b->max - extra)
        return -E2BIG;
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    if (cap > b->max + 1)
        cap = b->max + 1;
    char *d = tg__realloc(b->data, cap);
    if (!d)
        return -ENOMEM;
    b->data = d;
    b->cap = cap;
    return 0;
}

int tg__buf_append(tg__buf *b, const void *p, size_t n)
{
    int rc = tg__buf_reserve(b, n);
    if (rc)
        return rc;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int tg__buf_puts(tg__buf *b, const char *s)
{
    return tg__buf_append(b, s, strlen(s));
}

int tg__buf_putc(tg__buf *b, char c)
{
    return tg__buf_append(b, &c, 1);
}

int tg__buf_vprintf(tg__buf *b, const char *fmt, va_list ap)
{
    va_list cp;
    va_copy(cp, ap);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, cp);
    va_end(cp);
    if (n < 0)
        return -EINVAL;
    if ((size_t)n < sizeof small)
        return tg__buf_append(b, small, (size_t)n);
    int rc = tg__buf_reserve(b, (size_t)n);
    if (rc)
        return rc;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return 0;
}

int tg__buf_printf(tg__buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = tg__buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

void tg__buf_consume(tg__buf *b, size_t n)
{
    if (n >= b->len) {
        tg__buf_reset(b);
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}

const char *tg__buf_cstr(const tg__buf *b)
{
    return b->data ? b->data : "";
}

char *tg__buf_detach(tg__buf *b, size_t *len)
{
    char *d = b->data;
    if (!d)
        d = tg__strndup("", 0);
    if (len)
        *len = b->len;
    b->data = NULL;
    b->len = b->cap = 0;
    return d;
}
