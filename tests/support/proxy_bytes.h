/*
 * proxy_bytes: a byte buffer that tests build wire messages in (TLS records, flights), with
 * big-endian puts; an overflow fails the test.
 */
#ifndef TGKIT_TEST_PROXY_BYTES_H
#define TGKIT_TEST_PROXY_BYTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pbytes {
    uint8_t b[16384];
    size_t n;
};

void pb_put(struct pbytes *b, const void *p, size_t n);
void pb_put8(struct pbytes *b, unsigned v);
void pb_put16(struct pbytes *b, unsigned v);

/* A TLS 1.3 ServerHello record as sites send it: legacy version 0303, a random of 0x55
   bytes, the 32-byte session id sid echoed, cipher, no compression, and two extensions:
   supported_versions (43: 0304) and key_share (51: x25519 with a 32-byte key), key_share
   first when ks_first. */
void pb_server_hello(struct pbytes *b, const uint8_t sid[32], bool ks_first, uint16_t cipher);

#endif
