/* proxy_bytes: see proxy_bytes.h. */
#include "proxy_bytes.h"

#include "tgtest.h"

void pb_put(struct pbytes *b, const void *p, size_t n)
{
    assert_true(b->n + n <= sizeof b->b);
    memcpy(b->b + b->n, p, n);
    b->n += n;
}

void pb_put8(struct pbytes *b, unsigned v)
{
    uint8_t c = (uint8_t)v;
    pb_put(b, &c, 1);
}

void pb_put16(struct pbytes *b, unsigned v)
{
    pb_put8(b, v >> 8);
    pb_put8(b, v);
}
