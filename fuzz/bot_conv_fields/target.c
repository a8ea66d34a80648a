/*
 * fuzz target: the records of typed conversation fields (src/bot/dispatch/fields.c), which
 * are read from a storage another process may have written (Redis). Any input must be
 * walked without reading past its end; every record read must lie inside the input with
 * its NULs in place, and writing the records read back must give the same bytes; replacing
 * a field (tg__fields_put) must leave it findable with its new value.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bot/dispatch/fields.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!tg__fields_is(data, size) || size == 0)
        return 0;
    unsigned char *copy = malloc(size);
    if (!copy)
        return 0;
    memcpy(copy, TG__FIELDS_MAGIC, TG__FIELDS_MAGIC_LEN);
    size_t off = TG__FIELDS_MAGIC_LEN;
    struct tg__field f;
    while (off < size && tg__field_read(data + off, size - off, &f)) {
        if (f.size > size - off || f.name[f.name_len] != '\0' || f.value[f.value_len] != '\0' ||
            strlen(f.name) != f.name_len || strlen(f.value) != f.value_len ||
            f.size != tg__field_size(f.name_len, f.value_len))
            abort();
        tg__field_write(copy + off, f.type, f.name, f.value, f.value_len);
        if (memcmp(copy + off, data + off, f.size) != 0)
            abort(); /* write(read(x)) == x */
        off += f.size;
    }
    /* tg__fields_put over the whole input: removing a name keeps the other records, and
     * a malformed blob is refused with an offset inside it. */
    if (size > TG__FIELDS_MAGIC_LEN &&
        tg__field_read(data + TG__FIELDS_MAGIC_LEN, size - TG__FIELDS_MAGIC_LEN, &f)) {
        unsigned char *out = malloc(tg__fields_put_cap(size, f.name_len, 1));
        size_t bad = 0;
        if (out) {
            size_t n = tg__fields_put(out, data, size, f.name, f.name_len, 'i', "7", 1, &bad);
            struct tg__field g;
            if (n ? !tg__fields_find(out, n, f.name, f.name_len, &g) || g.value_len != 1
                  : bad >= size)
                abort();
            free(out);
        }
    }
    free(copy);
    return 0;
}
