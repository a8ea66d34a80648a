/* mpframe: middle-proxy frames (mpframe.h). */
#include "proxy/wire/mpframe.h"

#include <string.h>

static uint32_t crc_table[256];

/* The table is a pure function of the polynomial: fill it once, racing writers agree. */
static const uint32_t *table(void)
{
    static _Atomic int ready;
    if (!ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
            __atomic_store_n(&crc_table[i], c, __ATOMIC_RELAXED);
        }
        ready = 1;
    }
    return crc_table;
}

uint32_t mpframe_crc32(uint32_t crc, const void *p, size_t n)
{
    const uint32_t *t = table();
    const uint8_t *s = p;
    crc = ~crc;
    for (size_t i = 0; i < n; i++)
        crc = __atomic_load_n(&t[(crc ^ s[i]) & 0xff], __ATOMIC_RELAXED) ^ (crc >> 8);
    return ~crc;
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void wr32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16),
    p[3] = (uint8_t)(v >> 24);
}

int mpframe_parse(const uint8_t *b, size_t n, size_t max_len, struct mpframe *out, const char **why)
{
    static const char *none = "";
    const char *dummy;
    if (why == NULL)
        why = &dummy;
    *why = none;
    memset(out, 0, sizeof *out);
    if (max_len == 0 || max_len > MPFRAME_MAX)
        max_len = MPFRAME_MAX;
    size_t at = 0;
    while (n - at >= 4 && rd32(b + at) == MPFRAME_PAD_WORD)
        at += 4;
    out->consumed = at;
    if (n - at < 4)
        return MPFRAME_MORE;
    uint32_t len = rd32(b + at);
    if (len % 4 != 0) {
        *why = "frame length not a multiple of 4";
        return MPFRAME_BAD;
    }
    if (len < MPFRAME_OVERHEAD) {
        *why = "frame length under 12";
        return MPFRAME_BAD;
    }
    if (len > max_len) {
        *why = "frame length over the limit";
        return MPFRAME_BAD;
    }
    if (n - at < len)
        return MPFRAME_MORE;
    uint32_t crc = mpframe_crc32(0, b + at, len - 4);
    if (crc != rd32(b + at + len - 4)) {
        *why = "frame CRC32 mismatch";
        return MPFRAME_BAD;
    }
    out->seq = (int32_t)rd32(b + at + 4);
    out->off = at + 8;
    out->len = len - MPFRAME_OVERHEAD;
    out->consumed = at + len;
    return MPFRAME_OK;
}

size_t mpframe_size(size_t n, bool pad16)
{
    size_t s = n + MPFRAME_OVERHEAD;
    return pad16 ? (s + 15) & ~(size_t)15 : s;
}

size_t mpframe_build(uint8_t *out, size_t cap, int32_t seq, const void *payload, size_t n,
                     bool pad16)
{
    if (n % 4 != 0 || n > MPFRAME_MAX - MPFRAME_OVERHEAD)
        return 0;
    size_t total = mpframe_size(n, pad16);
    if (cap < total)
        return 0;
    if (payload != out + 8)
        memmove(out + 8, payload, n);
    wr32(out, (uint32_t)(n + MPFRAME_OVERHEAD));
    wr32(out + 4, (uint32_t)seq);
    wr32(out + 8 + n, mpframe_crc32(0, out, n + 8));
    for (size_t at = n + MPFRAME_OVERHEAD; at < total; at += 4)
        wr32(out + at, MPFRAME_PAD_WORD);
    return total;
}
