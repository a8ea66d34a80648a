/*
 * links: proxy links and terminal QR codes (see links.h).
 */
#include "proxy/daemon/links.h"

#include <errno.h>
#include <qrencode.h>
#include <string.h>

#include "core/str.h"

static const char *const link_prefix[] = {
    [LINKS_TG] = "tg://proxy?server=",
    [LINKS_TME] = "https://t.me/proxy?server=",
};

int links_format(tg__buf *b, enum links_kind kind, const char *host, uint16_t port,
                 const struct secret *s, bool base64)
{
    char text[2 * (1 + SECRET_KEY_LEN + 255) + 1];
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
