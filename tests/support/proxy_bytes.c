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

void pb_server_hello(struct pbytes *b, const uint8_t sid[32], bool ks_first, uint16_t cipher)
{
    struct pbytes e = {0};
    for (int k = 0; k < 2; k++) {
        if ((k == 0) == ks_first) {
            pb_put16(&e, 51), pb_put16(&e, 36), pb_put16(&e, 0x001d), pb_put16(&e, 32);
            for (int i = 0; i < 32; i++)
                pb_put8(&e, 0xa0 + i);
        } else {
            pb_put16(&e, 43), pb_put16(&e, 2), pb_put16(&e, 0x0304);
        }
    }
    size_t body = 2 + 32 + 1 + 32 + 2 + 1 + 2 + e.n;
    pb_put8(b, 22), pb_put16(b, 0x0303), pb_put16(b, 4 + body);
    pb_put8(b, 2), pb_put8(b, 0), pb_put16(b, body);
    pb_put16(b, 0x0303);
    for (int i = 0; i < 32; i++)
        pb_put8(b, 0x55);
    pb_put8(b, 32), pb_put(b, sid, 32);
    pb_put16(b, cipher), pb_put8(b, 0);
    pb_put16(b, e.n), pb_put(b, e.b, e.n);
}
