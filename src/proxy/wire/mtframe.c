/* mtframe: MTProto transport framing (mtframe.h). */
#include "proxy/wire/mtframe.h"

#include <string.h>

#include "proxy/wire/obfs2.h"

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int bad(const char **why, const char *what)
{
    *why = what;
    return MTFRAME_BAD;
}

int mtframe_next(uint32_t tag, const uint8_t *b, size_t n, size_t max_len, struct mtframe_pkt *out,
                 const char **why)
{
    const char *dummy;
    if (why == NULL)
        why = &dummy;
    *why = "";
    memset(out, 0, sizeof *out);
    if (max_len == 0 || max_len > MTFRAME_MAX)
        max_len = MTFRAME_MAX;
    size_t head, len;
    bool padded = false;
    if (tag == OBFS2_TAG_ABRIDGED) {
        if (n < 1)
            return MTFRAME_MORE;
        out->quickack = (b[0] & 0x80) != 0;
        len = b[0] & 0x7f;
        head = 1;
        if (len == 0x7f) {
            if (n < 4)
                return MTFRAME_MORE;
            len = (size_t)b[1] | (size_t)b[2] << 8 | (size_t)b[3] << 16;
            head = 4;
            if (len < 0x7f)
                return bad(why, "abridged length in an overlong encoding");
        }
        if (len == 0)
            return bad(why, "zero packet length");
        if (len > max_len / 4)
            return bad(why, "packet over the length limit");
        len *= 4;
    } else if (tag == OBFS2_TAG_INTERMEDIATE || tag == OBFS2_TAG_PADDED) {
        if (n < 4)
            return MTFRAME_MORE;
        uint32_t w = rd32(b);
        out->quickack = (w & 0x80000000u) != 0;
        len = w & 0x7fffffffu;
        head = 4;
        padded = tag == OBFS2_TAG_PADDED;
        if (len == 0)
            return bad(why, "zero packet length");
        if (!padded && len % 4 != 0)
            return bad(why, "packet length not a multiple of 4");
        if (len > max_len + (padded ? 3 : 0))
            return bad(why, "packet over the length limit");
        if (padded && len < 4)
            return bad(why, "padded packet under 4 bytes");
    } else {
        return bad(why, "unknown transport tag");
    }
    if (n - head < len)
        return MTFRAME_MORE;
    out->off = head;
    out->len = padded ? len & ~(size_t)3 : len;
    out->consumed = head + len;
    return MTFRAME_OK;
}

size_t mtframe_head(uint32_t tag, size_t len, size_t pad, uint8_t out[MTFRAME_HEAD_MAX])
{
    if (len == 0 || len % 4 != 0 || len > MTFRAME_MAX)
        return 0;
    if (tag == OBFS2_TAG_ABRIDGED) {
        if (pad != 0)
            return 0;
        size_t words = len / 4;
        if (words < 0x7f) {
            out[0] = (uint8_t)words;
            return 1;
        }
        out[0] = 0x7f;
        out[1] = (uint8_t)words, out[2] = (uint8_t)(words >> 8), out[3] = (uint8_t)(words >> 16);
        return 4;
    }
    if (tag == OBFS2_TAG_INTERMEDIATE && pad != 0)
        return 0;
    if (tag != OBFS2_TAG_INTERMEDIATE && tag != OBFS2_TAG_PADDED)
        return 0;
    if (pad > 3)
        return 0;
    size_t total = len + pad;
    out[0] = (uint8_t)total, out[1] = (uint8_t)(total >> 8);
    out[2] = (uint8_t)(total >> 16), out[3] = (uint8_t)(total >> 24);
    return 4;
}

void mtframe_ack(uint32_t tag, uint32_t confirm, uint8_t out[4])
{
    /* confirm is a little-endian word on the middle proxy's side; an abridged client reads
       the token big-endian */
    if (tag == OBFS2_TAG_ABRIDGED) {
        out[0] = (uint8_t)(confirm >> 24), out[1] = (uint8_t)(confirm >> 16);
        out[2] = (uint8_t)(confirm >> 8), out[3] = (uint8_t)confirm;
    } else {
        out[0] = (uint8_t)confirm, out[1] = (uint8_t)(confirm >> 8);
        out[2] = (uint8_t)(confirm >> 16), out[3] = (uint8_t)(confirm >> 24);
    }
}
