/*
 * Fuzz target: the stored tls-front profiles (proxy/wire/tlsprofile.h), a file in the state
 * directory that tgproxy reads at start.
 *
 * The input is the file. When it parses: every profile is within its bounds, formatting the
 * profiles and parsing the text again gives the same profiles (the stored form round-trips),
 * and the answer each profile builds for a fixed ClientHello is a flight the recorded-flight
 * parser reads back with the profile's cipher, extensions in order, key share, a CCS and
 * exactly one encrypted record.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/wire/faketls.h"
#include "proxy/wire/tlsprofile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CAP 4

static bool same(const struct tlsprofile *a, const struct tlsprofile *b)
{
    if (strcmp(a->domain, b->domain) || a->learned_s != b->learned_s || a->probes != b->probes ||
        a->legacy_version != b->legacy_version || a->cipher != b->cipher ||
        a->sid_echo != b->sid_echo || a->ccs != b->ccs || a->next != b->next ||
        a->group != b->group || a->key_len != b->key_len || a->selected != b->selected ||
        a->nenc_min != b->nenc_min || a->nenc_max != b->nenc_max || a->nlens != b->nlens ||
        a->ncuts != b->ncuts || strcmp(a->pattern, b->pattern))
        return false;
    for (size_t i = 0; i < a->next; i++)
        if (a->ext[i].type != b->ext[i].type || a->ext[i].len != b->ext[i].len)
            return false;
    return memcmp(a->lens, b->lens, a->nlens * sizeof a->lens[0]) == 0 &&
           memcmp(a->cuts, b->cuts, a->ncuts * sizeof a->cuts[0]) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct tlsprofile p[CAP], q[CAP];
    static char text[CAP * 2048];
    static uint8_t answer[TLSPROFILE_ANSWER_MAX];
    size_t n = 0, m = 0;
    char err[160];
    if (tlsprofile_parse((const char *)data, size, p, CAP, &n, err, sizeof err) != 0) {
        if (n != 0 || !memchr(err, '\0', sizeof err))
            abort();
        return 0;
    }
    if (n > CAP)
        abort();
    size_t len = tlsprofile_format(p, n, text, sizeof text);
    if (len == 0)
        abort();
    if (tlsprofile_parse(text, len, q, CAP, &m, err, sizeof err) != 0 || m != n)
        abort();
    for (size_t i = 0; i < n; i++) {
        if (!same(&p[i], &q[i]))
            abort();
        size_t l = tlsprofile_draw_len(&p[i], (uint32_t)i * 2654435761u);
        if (l < 1 || l > FAKETLS_RECORD_MAX_OUT)
            abort();
        struct faketls_hello h;
        memset(&h, 0, sizeof h);
        h.session_id_len = 32;
        memset(h.session_id, 0x5a, 32);
        h.cipher = 0x1301;
        static const uint8_t key[16] = {1, 2, 3};
        size_t cuts[TLSPROFILE_MAX_CUTS], ncuts = 0;
        int k = tlsprofile_answer(&p[i], &h, key, answer, sizeof answer, cuts, &ncuts);
        if (k < 0)
            abort();
        for (size_t c = 0; c < ncuts; c++)
            if (cuts[c] == 0 || cuts[c] >= (size_t)k || (c && cuts[c] <= cuts[c - 1]))
                abort();
        struct tlsflight f;
        if (tlsflight_parse(answer, (size_t)k, NULL, 0, h.session_id, 32, &f, err, sizeof err) !=
                0 ||
            !f.ccs || f.nenc != 1 || f.nrec != 3 || f.truncated)
            abort();
        size_t e = 0;
        for (size_t j = 0; j < p[i].next; j++) {
            uint16_t t = p[i].ext[j].type;
            if (t != TLSFLIGHT_EXT_KEY_SHARE && t != TLSFLIGHT_EXT_SUPPORTED_VERSIONS)
                continue;
            if (e >= f.next || f.ext[e].type != t || f.ext[e].len != p[i].ext[j].len)
                abort();
            e++;
        }
        if (e != f.next || f.group != p[i].group || (p[i].group && f.key_len != p[i].key_len) ||
            (p[i].sid_echo && !f.sid_echo))
            abort();
    }
    return 0;
}
