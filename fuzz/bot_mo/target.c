/*
 * fuzz target: the gettext .mo catalog parser and the Plural-Forms formula compiler
 * (src/bot/helpers/mo.c, plural.c), which read translation files. Any input must parse or
 * fail with a message; a parsed catalog must find every one of its keys, give each entry's
 * forms inside the file copy, and evaluate its formula to an index below nplurals. The
 * input is also compiled as a bare formula.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bot/helpers/mo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_catalog(const struct tg__mo *mo)
{
    for (size_t i = 0; i < mo->count; i++) {
        const struct tg__mo_entry *e = &mo->entries[i];
        const struct tg__mo_entry *f = tg__mo_find(mo, e->orig, e->orig_len);
        if (!f || f->orig_len != e->orig_len || memcmp(f->orig, e->orig, e->orig_len) != 0)
            abort();
        for (unsigned k = 0; k < 8; k++) {
            const char *s = tg__mo_form(e, k);
            if (s && (s < mo->data || s >= mo->data + mo->len))
                abort();
        }
    }
    static const uint64_t ns[] = {0, 1, 2, 5, 11, 21, 101, 1000000, UINT64_MAX};
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        unsigned k = tg__plural_eval(&mo->plural, ns[i]);
        if (mo->plural.count && k >= mo->plural.nplurals)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct tg__mo mo;
    char err[400];
    int rc = tg__mo_parse(&mo, data, size, err, sizeof err);
    if (rc == 0)
        check_catalog(&mo);
    else if (rc == -1 && err[0] == '\0')
        abort(); /* a refusal always says why */
    tg__mo_cleanup(&mo);

    struct tg__plural p;
    if (tg__plural_parse(&p, (const char *)data, size, err, sizeof err) == 0) {
        if (p.nplurals < 1 || p.nplurals > 100 || p.count == 0)
            abort();
        for (uint64_t n = 0; n < 200; n++)
            if (tg__plural_eval(&p, n) >= p.nplurals)
                abort();
    } else if (strncmp(err, "Plural-Forms: ", 14) != 0) {
        abort();
    }
    return 0;
}
