/*
 * links: proxy links and terminal QR codes (see links.h).
 */
#include "proxy/daemon/links.h"

#include <errno.h>
#include <qrencode.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/str.h"

static const char *const link_prefix[] = {
    [LINKS_TG] = "tg://proxy?server=",
    [LINKS_TME] = "https://t.me/proxy?server=",
};

#define SECRET_TEXT_MAX (2 * (1 + SECRET_KEY_LEN + 255) + 1)

int links_format(tg__buf *b, enum links_kind kind, const char *host, uint16_t port,
                 const struct secret *s, bool base64)
{
    char text[SECRET_TEXT_MAX];
    if (!host || !host[0] || port == 0 || (kind != LINKS_TG && kind != LINKS_TME))
        return -EINVAL;
    int n = secret_format(s, base64, text, sizeof text);
    if (n < 0)
        return -EINVAL;
    int rc = tg__buf_puts(b, link_prefix[kind]);
    if (rc == 0)
        rc = tg__url_encode(b, host, strlen(host));
    if (rc == 0)
        rc = tg__buf_printf(b, "&port=%u&secret=", (unsigned)port);
    if (rc == 0)
        rc = tg__url_encode(b, text, (size_t)n);
    memset(text, 0, sizeof text);
    return rc;
}

/* Module (x, y) of the symbol plus its quiet zone: true when light. */
static bool light(const QRcode *qr, int x, int y)
{
    x -= LINKS_QR_QUIET;
    y -= LINKS_QR_QUIET;
    if (x < 0 || y < 0 || x >= qr->width || y >= qr->width)
        return true;
    return (qr->data[y * qr->width + x] & 1) == 0;
}

int links_qr(tg__buf *b, const char *text)
{
    static const char *const glyph[4] = {
        " ",            /* both dark */
        "\xE2\x96\x84", /* lower half light: U+2584 */
        "\xE2\x96\x80", /* upper half light: U+2580 */
        "\xE2\x96\x88", /* both light: U+2588 */
    };
    if (!text)
        return -EINVAL;
    errno = 0;
    QRcode *qr = QRcode_encodeString(text, 0, QR_ECLEVEL_M, QR_MODE_8, 1);
    if (!qr)
        return errno == ERANGE ? -ERANGE : errno == ENOMEM ? -ENOMEM : -EINVAL;
    int side = qr->width + 2 * LINKS_QR_QUIET;
    int rc = 0;
    for (int y = 0; y < side && rc == 0; y += 2) {
        for (int x = 0; x < side && rc == 0; x++) {
            int top = light(qr, x, y) ? 2 : 0;
            int bottom = (y + 1 >= side || light(qr, x, y + 1)) ? 1 : 0;
            rc = tg__buf_puts(b, glyph[top | bottom]);
        }
        if (rc == 0)
            rc = tg__buf_putc(b, '\n');
    }
    QRcode_free(qr);
    return rc;
}

/* ---- access --json ---- */

/* A JSON string: quotes, backslashes and control characters escaped. */
static int json_str(tg__buf *b, const char *s)
{
    int rc = tg__buf_putc(b, '"');
    for (; rc == 0 && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            rc = tg__buf_printf(b, "\\%c", c);
        else if (c < 0x20)
            rc = tg__buf_printf(b, "\\u%04x", c);
        else
            rc = tg__buf_putc(b, (char)c);
    }
    return rc == 0 ? tg__buf_putc(b, '"') : rc;
}

/* `"key": ` at indent (spaces), after a comma unless first. */
static int json_key(tg__buf *b, int indent, bool first, const char *key)
{
    int rc = tg__buf_printf(b, "%s\n%*s", first ? "" : ",", indent, "");
    if (rc == 0)
        rc = json_str(b, key);
    return rc == 0 ? tg__buf_puts(b, ": ") : rc;
}

/* mtg's QR image URL of link: api.qrserver.com, data then format=svg and qzone=4. */
static int qr_url(tg__buf *b, const char *link)
{
    tg__buf u;
    tg__buf_init(&u, 1 << 16);
    int rc = tg__buf_puts(&u, "https://api.qrserver.com/v1/create-qr-code?data=");
    if (rc == 0)
        rc = tg__url_encode(&u, link, strlen(link));
    if (rc == 0)
        rc = tg__buf_puts(&u, "&format=svg&qzone=4");
    if (rc == 0)
        rc = json_str(b, tg__buf_cstr(&u));
    if (u.data)
        memset(u.data, 0, u.len);
    tg__buf_cleanup(&u);
    return rc;
}

/* One endpoint's object: ip, port, and each link with its QR image URL. */
static int endpoint_json(tg__buf *b, const struct links_endpoint *ep, const struct secret *s,
                         bool base64, bool qr)
{
    static const char *const keys[2][2] = {{"tg_url", "tg_qrcode"}, {"tme_url", "tme_qrcode"}};
    int rc = tg__buf_putc(b, '{');
    if (rc == 0)
        rc = json_key(b, 4, true, "ip");
    if (rc == 0)
        rc = json_str(b, ep->host);
    if (rc == 0)
        rc = json_key(b, 4, false, "port");
    if (rc == 0)
        rc = tg__buf_printf(b, "%u", (unsigned)ep->port);
    for (int k = LINKS_TG; rc == 0 && k <= LINKS_TME; k++) {
        tg__buf link;
        tg__buf_init(&link, 1 << 14);
        rc = links_format(&link, (enum links_kind)k, ep->host, ep->port, s, base64);
        if (rc == 0)
            rc = json_key(b, 4, false, keys[k][0]);
        if (rc == 0)
            rc = json_str(b, tg__buf_cstr(&link));
        if (rc == 0 && qr)
            rc = json_key(b, 4, false, keys[k][1]);
        if (rc == 0 && qr)
            rc = qr_url(b, tg__buf_cstr(&link));
        if (link.data)
            memset(link.data, 0, link.len);
        tg__buf_cleanup(&link);
    }
    return rc == 0 ? tg__buf_puts(b, "\n  }") : rc;
}

/* {"hex": ..., "base64": ...} of s at indent. */
static int secret_json(tg__buf *b, int indent, const struct secret *s)
{
    char text[SECRET_TEXT_MAX];
    int rc = tg__buf_putc(b, '{');
    for (int form = 0; rc == 0 && form < 2; form++) {
        rc = json_key(b, indent + 2, form == 0, form ? "base64" : "hex");
        if (rc == 0)
            rc = secret_format(s, form == 1, text, sizeof text) < 0 ? -EINVAL : json_str(b, text);
    }
    memset(text, 0, sizeof text);
    return rc == 0 ? tg__buf_printf(b, "\n%*s}", indent, "") : rc;
}

struct by_label {
    const char *label;
    const struct secret *secret;
};

static int by_label_cmp(const void *a, const void *b)
{
    return strcmp(((const struct by_label *)a)->label, ((const struct by_label *)b)->label);
}

int links_access_json(tg__buf *b, const struct links_endpoint ep[LINKS_WHERE_COUNT],
                      const char *const *labels, const struct secret *const *secrets, size_t n,
                      bool base64, bool qr)
{
    static const char *const where_key[LINKS_WHERE_COUNT] = {"ipv4", "ipv6", "host"};
    if (n == 0)
        return -EINVAL;
    struct by_label *sorted = tg__calloc(n, sizeof *sorted);
    if (!sorted)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        sorted[i] = (struct by_label){labels[i], secrets[i]};
    qsort(sorted, n, sizeof *sorted, by_label_cmp);
    int rc = tg__buf_putc(b, '{');
    bool first = true;
    for (int w = 0; rc == 0 && w < LINKS_WHERE_COUNT; w++) {
        if (!ep[w].host || !ep[w].host[0])
            continue;
        rc = json_key(b, 2, first, where_key[w]);
        first = false;
        if (rc == 0)
            rc = endpoint_json(b, &ep[w], sorted[0].secret, base64, qr);
    }
    if (rc == 0)
        rc = json_key(b, 2, first, "secret");
    if (rc == 0)
        rc = secret_json(b, 2, sorted[0].secret);
    if (rc == 0 && n > 1) {
        rc = json_key(b, 2, false, "secrets");
        if (rc == 0)
            rc = tg__buf_putc(b, '{');
        for (size_t i = 0; rc == 0 && i < n; i++) {
            rc = json_key(b, 4, i == 0, sorted[i].label);
            if (rc == 0)
                rc = secret_json(b, 4, sorted[i].secret);
        }
        if (rc == 0)
            rc = tg__buf_puts(b, "\n  }");
    }
    tg__free(sorted);
    return rc == 0 ? tg__buf_puts(b, "\n}\n") : rc;
}
