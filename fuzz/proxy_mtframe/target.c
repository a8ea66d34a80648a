/*
 * Fuzz target: the client transport splitter (mtframe_next). Byte 0 picks the transport (its
 * low two bits: abridged, intermediate, padded intermediate, an unknown tag) and byte 1 the
 * length limit (0 = default, else byte * 16). The rest is split into packets whole and again
 * fed 5 bytes at a time: both readings must agree, every packet must lie inside what was read,
 * and every packet (with no quick-ack bit and no padding) must get its own header back.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/wire/mtframe.h"
#include "proxy/wire/obfs2.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t run(uint32_t tag, const uint8_t *d, size_t size, size_t max_len, size_t step,
                  int *last, size_t *packets)
{
    size_t at = 0, avail = 0;
    *packets = 0;
    for (;;) {
        struct mtframe_pkt p;
        const char *why = NULL;
        int r = mtframe_next(tag, d + at, avail - at, max_len, &p, &why);
        if (why == NULL)
            abort();
        if (r == MTFRAME_BAD) {
            if (why[0] == '\0')
                abort();
            *last = r;
            return at;
        }
        if (r == MTFRAME_OK) {
            if (p.off + p.len > p.consumed || p.consumed > avail - at || p.len < 4 ||
                p.len % 4 != 0)
                abort();
            uint8_t h[MTFRAME_HEAD_MAX];
            size_t hl = mtframe_head(tag, p.len, 0, h);
            if (hl == 0)
                abort();
            if (!p.quickack && p.consumed == p.off + p.len &&
                (hl != p.off || memcmp(h, d + at, hl) != 0))
                abort();
            (*packets)++;
            at += p.consumed;
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
    static const uint32_t tags[4] = {OBFS2_TAG_ABRIDGED, OBFS2_TAG_INTERMEDIATE, OBFS2_TAG_PADDED,
                                     0x01020304};
    if (size < 2)
        return 0;
    uint32_t tag = tags[data[0] & 3];
    size_t max_len = (size_t)data[1] * 16;
    data += 2, size -= 2;
    int r1 = 0, r2 = 0;
    size_t n1, n2;
    size_t a = run(tag, data, size, max_len, size ? size : 1, &r1, &n1);
    size_t b = run(tag, data, size, max_len, 5, &r2, &n2);
    if (a != b || r1 != r2 || n1 != n2)
        abort();
    return 0;
}
