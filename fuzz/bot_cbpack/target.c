/*
 * fuzz bot_cbpack: the helpers that read what a Telegram client sent a bot in a button
 * press or a deep link: tg_callback_unpack and tg_callback_field_int (callback_data, in
 * src/bot/helpers/cbpack.c), tg_base64url_decode and tg_deep_link_payload_valid (a /start
 * payload, in src/bot/helpers/links.c).
 *
 * Input: byte 0 is the prefix's length (mod 16), byte 1 the unpack buffer's size
 * (1..128), byte 2 the field limit (0..9), byte 3 the decode buffer's size (0..255); then
 * the prefix, then the data (up to its first NUL, as a C string arrives). Buffers are
 * allocated at exactly their size, so a write or read past one is caught. Checked:
 *   - unpack: at most max fields, each inside buf and without ':', and prefix ':' fields
 *     joined again is the data; tg_callback_pack of those fields, when it accepts them,
 *     gives the data back byte for byte;
 *   - field_int: a field it accepts prints back to the same value;
 *   - base64url: a decode that succeeds wrote at most cap bytes, and encoding those bytes
 *     and decoding again gives the same bytes.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tgbot/keyboard.h"
#include "tgbot/links.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *cstr(const uint8_t *p, size_t n)
{
    const uint8_t *z = memchr(p, 0, n);
    if (z)
        n = (size_t)(z - p);
    char *s = malloc(n + 1);
    if (!s)
        abort();
    memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

static void check_unpack(const char *prefix, const char *cb, size_t cap, size_t max)
{
    char *buf = malloc(cap);
    const char **fields = malloc((max ? max : 1) * sizeof *fields);
    if (!buf || !fields)
        abort();
    int n = tg_callback_unpack(cb, prefix, buf, cap, fields, max);
    if (n < -1 || n > (int)max)
        abort();
    if (n >= 0) {
        /* prefix, then ":field" for each: the data again */
        size_t pl = strlen(prefix), at = pl;
        if (strncmp(cb, prefix, pl) != 0)
            abort();
        for (int i = 0; i < n; i++) {
            const char *f = fields[i];
            if (f < buf || f >= buf + cap || strchr(f, ':'))
                abort();
            size_t fl = strlen(f);
            if (f + fl >= buf + cap || cb[at] != ':' || strncmp(cb + at + 1, f, fl) != 0)
                abort();
            at += 1 + fl;
            int64_t v;
            if (tg_callback_field_int(f, &v)) {
                char back[32];
                snprintf(back, sizeof back, "%" PRId64, v);
                int64_t again;
                if (!tg_callback_field_int(back, &again) || again != v)
                    abort();
            }
        }
        if (cb[at] != '\0')
            abort();
        char packed[128];
        if (tg_callback_pack(packed, sizeof packed, prefix, fields, (size_t)n) == TG_OK &&
            strcmp(packed, cb) != 0)
            abort();
    }
    free(fields);
    free(buf);
}

static void check_base64url(const char *s, size_t cap)
{
    unsigned char *out = malloc(cap ? cap : 1);
    if (!out)
        abort();
    size_t len = 1234;
    tg_status st = tg_base64url_decode(out, cap, s, &len);
    if (st != TG_OK) {
        if (len != 0)
            abort();
    } else {
        if (len > cap)
            abort();
        size_t ecap = (len * 4 + 2) / 3 + 1;
        char *enc = malloc(ecap);
        unsigned char *again = malloc(len ? len : 1);
        size_t len2 = 0;
        if (!enc || !again)
            abort();
        if (tg_base64url_encode(enc, ecap, out, len) != TG_OK ||
            tg_base64url_decode(again, len, enc, &len2) != TG_OK || len2 != len ||
            memcmp(again, out, len) != 0)
            abort();
        /* what encode writes is always a valid payload when it fits one */
        if (len > 0 && len <= 48 && !tg_deep_link_payload_valid(enc))
            abort();
        free(again);
        free(enc);
    }
    (void)tg_deep_link_payload_valid(s);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    size_t pl = data[0] % 16, cap = (size_t)data[1] % 128 + 1, max = data[2] % 10,
           dcap = data[3];
    data += 4;
    size -= 4;
    if (pl > size)
        pl = size;
    char *prefix = cstr(data, pl);
    char *rest = cstr(data + pl, size - pl);
    check_unpack(prefix, rest, cap, max);
    check_base64url(rest, dcap);
    free(rest);
    free(prefix);
    return 0;
}
