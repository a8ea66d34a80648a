/*
 * fuzz emulator_form: the emulator's pure request-body parsers and what follows them.
 * Byte 0 picks the encoding: even = x-www-form-urlencoded body, odd = multipart/form-data
 * whose first line is the Content-Type header (boundary included) and the rest the body.
 * The fields are then turned into a method's params JSON (byte 1 picks the method) and
 * decoded by the generated codec, as a Bot API request would be. Any input must end in a
 * clean error or fields that keep their invariants: no crash, no leak, no hang.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "emulator/form.h"
#include "emulator/params.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_fields(const emu_form *f)
{
    for (size_t i = 0; i < f->count; i++) {
        const emu_field *x = &f->fields[i];
        if (!x->name || !*x->name || !x->value || x->value[x->value_len] != '\0')
            abort();
        if (x->is_file != (x->filename != NULL))
            abort();
    }
}

static void to_params(const emu_form *f, uint8_t pick)
{
    const tg__method *m = tg__methods[pick % tg__method_count];
    tg__buf json;
    tg__buf_init(&json, 0);
    char err[300];
    if (emu_params_form_json(m, f, &json, err, sizeof err) == 0) {
        tg__arena a;
        tg__arena_init(&a, 0, 0);
        void *p;
        tg__buf norm;
        tg__buf_init(&norm, 0);
        if (emu_params_normalize(m, json.data, json.len, &norm, err, sizeof err) == 0)
            (void)emu_params_decode(m, norm.data, norm.len, &a, &p, err, sizeof err);
        tg__buf_cleanup(&norm);
        tg__arena_cleanup(&a);
    }
    tg__buf_cleanup(&json);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    const char *s = (const char *)data + 2;
    size_t n = size - 2;
    emu_form f;
    emu_form_init(&f);
    int rc;
    if (data[0] & 1) {
        const char *nl = memchr(s, '\n', n);
        size_t hl = nl ? (size_t)(nl - s) : n;
        char *ct = strndup(s, hl);
        if (!ct) {
            emu_form_cleanup(&f);
            return 0;
        }
        rc = emu_form_multipart(&f, ct, nl ? nl + 1 : s + n, nl ? n - hl - 1 : 0);
        free(ct);
    } else {
        rc = emu_form_urlencoded(&f, s, n);
    }
    if (rc == 0) {
        check_fields(&f);
        to_params(&f, data[1]);
    } else if (!f.err[0]) {
        abort(); /* an error always says why */
    }
    emu_form_cleanup(&f);
    return 0;
}
