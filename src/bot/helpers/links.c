/*
 * links: deep links (t.me/<bot>?start=<payload>), base64url for payloads carrying bytes,
 * and webhook secret tokens. Pure string work except the secret, which takes its bytes from
 * OpenSSL's CSPRNG.
 */
#include <string.h>

#include <openssl/rand.h>

#include "tgbot/links.h"

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static bool payload_char(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

bool tg_deep_link_payload_valid(const char *payload)
{
    if (!payload)
        return false;
    size_t n = 0;
    for (; payload[n]; n++)
        if (n == TG_DEEP_LINK_PAYLOAD_MAX || !payload_char((unsigned char)payload[n]))
            return false;
    return n > 0;
}

static bool username_valid(const char *u)
{
    size_t n = 0;
    if (!u)
        return false;
    for (; u[n]; n++)
        if (n == 32 || u[n] == '-' || !payload_char((unsigned char)u[n]))
            return false;
    return n >= 5;
}

tg_status tg_deep_link(char *out, size_t cap, const char *bot, const char *payload, bool group)
{
    if (out && cap)
        out[0] = '\0';
    if (!out || !username_valid(bot) || !tg_deep_link_payload_valid(payload))
        return TG_ERR_INVALID;
    const char *param = group ? "?startgroup=" : "?start=";
    size_t need = strlen("https://t.me/") + strlen(bot) + strlen(param) + strlen(payload) + 1;
    if (need > cap)
        return TG_ERR_TOO_BIG;
    strcpy(out, "https://t.me/");
    strcat(out, bot);
    strcat(out, param);
    strcat(out, payload);
    return TG_OK;
}

tg_status tg_base64url_encode(char *out, size_t cap, const void *data, size_t len)
{
    const unsigned char *p = data;
    if (out && cap)
        out[0] = '\0';
    if (!out || (!data && len))
        return TG_ERR_INVALID;
    if (len > (SIZE_MAX - 3) / 4 || (len * 4 + 2) / 3 + 1 > cap)
        return TG_ERR_TOO_BIG;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        size_t left = len - i;
        if (left > 1)
            v |= (uint32_t)p[i + 1] << 8;
        if (left > 2)
            v |= p[i + 2];
        out[o++] = b64url[(v >> 18) & 63];
        out[o++] = b64url[(v >> 12) & 63];
        if (left > 1)
            out[o++] = b64url[(v >> 6) & 63];
        if (left > 2)
            out[o++] = b64url[v & 63];
    }
    out[o] = '\0';
    return TG_OK;
}

static int b64url_value(unsigned char c)
{
    const char *p = c ? strchr(b64url, c) : NULL;
    return p ? (int)(p - b64url) : -1;
}

tg_status tg_base64url_decode(void *out, size_t cap, const char *s, size_t *len)
{
    unsigned char *o = out;
    if (len)
        *len = 0;
    if (!out || !s || !len)
        return TG_ERR_INVALID;
    size_t n = strlen(s);
    if (n % 4 == 1)
        return TG_ERR_INVALID; /* 6 bits cannot end a byte */
    if (n / 4 * 3 + (n % 4 ? n % 4 - 1 : 0) > cap)
        return TG_ERR_TOO_BIG;
    size_t k = 0;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t v = 0;
        size_t chunk = n - i < 4 ? n - i : 4;
        for (size_t j = 0; j < 4; j++) {
            int d = j < chunk ? b64url_value((unsigned char)s[i + j]) : 0;
            if (d < 0)
                return TG_ERR_INVALID;
            v = v << 6 | (uint32_t)d;
        }
        o[k++] = (unsigned char)(v >> 16);
        if (chunk > 2)
            o[k++] = (unsigned char)(v >> 8);
        if (chunk > 3)
            o[k++] = (unsigned char)v;
    }
    *len = k;
    return TG_OK;
}

tg_status tg_webhook_secret_generate(char *out, size_t cap, size_t len)
{
    if (out && cap)
        out[0] = '\0';
    if (len == 0)
        len = 64;
    if (!out || len > TG_WEBHOOK_SECRET_MAX)
        return TG_ERR_INVALID;
    if (len + 1 > cap)
        return TG_ERR_TOO_BIG;
    unsigned char rnd[TG_WEBHOOK_SECRET_MAX];
    if (RAND_bytes(rnd, (int)len) != 1)
        return TG_ERR_IO;
    for (size_t i = 0; i < len; i++)
        out[i] = b64url[rnd[i] & 63]; /* 64 symbols: 6 bits each, no bias */
    out[len] = '\0';
    OPENSSL_cleanse(rnd, sizeof rnd);
    return TG_OK;
}
