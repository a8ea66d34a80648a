/*
 * proxy_bytes: a byte buffer that tests build wire messages in (TLS records, flights), with
 * big-endian puts; an overflow fails the test.
 */
#ifndef TGKIT_TEST_PROXY_BYTES_H
#define TGKIT_TEST_PROXY_BYTES_H

#include <stddef.h>
#include <stdint.h>

struct pbytes {
    uint8_t b[16384];
    size_t n;
};

void pb_put(struct pbytes *b, const void *p, size_t n);
void pb_put8(struct pbytes *b, unsigned v);
void pb_put16(struct pbytes *b, unsigned v);

#endif
