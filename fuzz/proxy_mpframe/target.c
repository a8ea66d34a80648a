/*
 * Fuzz target: the middle-proxy frame reader (mpframe_parse) over a whole plaintext stream.
 * Byte 0 sets max_len (0 = the default, else byte * 64). The stream is read frame after frame
 * as the engine does, whole and again with the input cut at every 7th byte: both readings
 * must agree on every frame and on where they stop. Every frame found is rebuilt and must come
 * back the same, and a payload must sit inside the input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/wire/mpframe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Read frames from data[0..size) offering at most `step` more bytes at a time; returns the
   bytes consumed and the last status; the CRC of all payloads in *sum. */
static size_t run(const uint8_t *data, size_t size, size_t max_len, size_t step, int *last,
                  uint32_t *sum)
{
    size_t at = 0, avail = 0;
    *sum = 0;
    *last = MPFRAME_MORE;
    for (;;) {
        struct mpframe f;
        const char *why = NULL;
        int r = mpframe_parse(data + at, avail - at, max_len, &f, &why);
        if (f.consumed > avail - at || why == NULL)
            abort();
        if (r == MPFRAME_BAD) {
            if (why[0] == '\0')
                abort();
            *last = r;
            return at;
        }
        if (r == MPFRAME_OK) {
            if (f.off + f.len > f.consumed || f.len % 4 != 0)
                abort();
            uint8_t *re = malloc(f.len + 32);
            size_t n = mpframe_build(re, f.len + 32, f.seq, data + at + f.off, f.len, false);
            if (n != f.len + 12 || memcmp(re, data + at + f.off - 8, n) != 0)
                abort();
            free(re);
            *sum = mpframe_crc32(*sum, data + at + f.off, f.len);
            at += f.consumed;
            continue;
        }
        if (avail == size) {
            *last = r;
            return at;
        }
        avail = avail + step > size ? size : avail + step;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t max_len = (size_t)data[0] * 64;
    data++, size--;
    int r1, r2;
    uint32_t s1, s2;
    size_t a = run(data, size, max_len, size ? size : 1, &r1, &s1);
    size_t b = run(data, size, max_len, 7, &r2, &s2);
    if (a != b || r1 != r2 || s1 != s2)
        abort();
    return 0;
}
