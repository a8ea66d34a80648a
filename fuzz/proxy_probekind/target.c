/*
 * Fuzz target: `tgproxy probe`'s reading of peers' answers (proxy/wire/probekind.h,
 * probeshape.h): what a proxy and a site sent back to one probe.
 *
 * Input: byte 0 picks the probe kind and the end kinds; bytes 1..2 are where the rest is
 * cut into the site's answer and the proxy's. Both are normalised (probekind_shape: always
 * terminated within its buffer), compared both ways (the same differences either way, none
 * for an answer against itself), checked as a FakeTLS answer (never genuine for a key that
 * did not sign it), and parsed as recorded flights whose shapes are then compared (rows
 * always terminated; an answer against itself differs in nothing).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/wire/probekind.h"
#include "proxy/wire/probeshape.h"
#include "proxy/wire/tlsflight.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void shape(const uint8_t *p, size_t n, bool tls)
{
    char text[PROBEKIND_SHAPE_MAX];
    probekind_shape(p, n, tls, text, sizeof text);
    if (!memchr(text, '\0', sizeof text))
        abort();
    char small[8];
    probekind_shape(p, n, tls, small, sizeof small);
    if (!memchr(small, '\0', sizeof small))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    const struct probekind *k = probekind_get(data[0] % probekind_count());
    size_t cut = (size_t)data[1] << 8 | data[2];
    const uint8_t *in = data + 3;
    size_t n = size - 3;
    if (cut > n)
        cut = n;
    struct probekind_obs s = {in, cut,          cut,  (enum probekind_end)(data[0] % 3),
                              10, cut ? 5 : -1, false};
    struct probekind_obs p = {in + cut,
                              n - cut,
                              n - cut,
                              (enum probekind_end)(data[0] / 3 % 3),
                              700,
                              n - cut ? 600 : -1,
                              (data[0] & 0x80) != 0};
    shape(s.bytes, s.n, true);
    shape(p.bytes, p.n, false);
    unsigned d1 = probekind_compare(k, &s, &p, 500), d2 = probekind_compare(k, &p, &s, 500);
    if (d1 != d2 || probekind_compare(k, &s, &s, 500) != 0 || probekind_compare(k, &p, &p, 500))
        abort();
    static const uint8_t key[16] = {1};
    if (probekind_answer_genuine(in, cut, in + cut, n - cut, key) &&
        !probekind_answer_genuine(in, cut, in + cut, n - cut, key))
        abort();
    static struct tlsflight fs, fp;
    char err[160];
    if (tlsflight_parse(s.bytes, s.n, NULL, 0, NULL, 0, &fs, err, sizeof err) != 0 ||
        tlsflight_parse(p.bytes, p.n, NULL, 0, NULL, 0, &fp, err, sizeof err) != 0)
        return 0;
    struct probeshape_row rows[PROBESHAPE_ROWS];
    probeshape_compare(&fs, 1, &fp, 1, rows);
    for (size_t i = 0; i < PROBESHAPE_ROWS; i++)
        if (!memchr(rows[i].site, '\0', sizeof rows[i].site) ||
            !memchr(rows[i].proxy, '\0', sizeof rows[i].proxy))
            abort();
    if (probeshape_compare(&fs, 1, &fs, 1, rows) != 0)
        abort();
    return 0;
}
