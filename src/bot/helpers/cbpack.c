/*
 * cbpack: typed callback data "prefix:field:field" within Telegram's 64 bytes (see
 * tgbot/keyboard.h). Pure functions; unpack reads data a client sent, so it checks every
 * length against the buffers it is given.
 */
#include <stdio.h>
#include <string.h>

#include "bot/helpers/keyboard_int.h"
#include "core/str.h"
#include "tgbot/keyboard.h"

#define CALLBACK_MAX 64 /* bytes Telegram carries in callback_data */

tg_status tg_callback_pack(char *out, size_t cap, const char *prefix, const char *const *fields,
                           size_t n)
{
    if (!out || !cap || !prefix || (!fields && n)) {
        tg__keyboard_seterr("callback_pack: NULL argument");
        return TG_ERR_INVALID;
    }
    size_t len = strlen(prefix);
    if (strchr(prefix, ':') || len == 0) {
        tg__keyboard_seterr("callback_pack: prefix \"%.64s\" must be non-empty without ':'",
                            prefix);
        return TG_ERR_INVALID;
    }
    for (size_t i = 0; i < n; i++) {
        if (!fields[i] || strchr(fields[i], ':')) {
            tg__keyboard_seterr("callback_pack: field %zu (\"%.64s\") is NULL or holds ':'", i,
                                fields[i] ? fields[i] : "(null)");
            return TG_ERR_INVALID;
        }
        len += 1 + strlen(fields[i]);
    }
    if (len > CALLBACK_MAX || len >= cap) {
        tg__keyboard_seterr("callback_pack: %zu bytes; Telegram allows 1 to 64 (use "
                            "tg_hctx_callback_put for more)",
                            len);
        return TG_ERR_TOO_BIG;
    }
    size_t o = (size_t)snprintf(out, cap, "%s", prefix);
    for (size_t i = 0; i < n; i++)
        o += (size_t)snprintf(out + o, cap - o, ":%s", fields[i]);
    return TG_OK;
}

int tg_callback_unpack(const char *data, const char *prefix, char *buf, size_t cap,
                       const char **fields, size_t max)
{
    if (!data || !prefix || !buf || !fields)
        return -1;
    size_t pl = strlen(prefix), dl = strlen(data);
    if (dl < pl || memcmp(data, prefix, pl) != 0 || (data[pl] != ':' && data[pl] != '\0') ||
        dl - pl >= cap)
        return -1;
    if (data[pl] == '\0')
        return 0;
    memcpy(buf, data + pl + 1, dl - pl); /* with the NUL */
    size_t n = 0;
    for (char *p = buf;; p++) {
        if (n == max)
            return -1;
        fields[n++] = p;
        p = strchr(p, ':');
        if (!p)
            break;
        *p = '\0';
    }
    return (int)n;
}

bool tg_callback_field_int(const char *field, int64_t *out)
{
    int64_t v;
    if (!field || tg__parse_i64(field, strlen(field), &v) != 0)
        return false;
    if (out)
        *out = v;
    return true;
}
