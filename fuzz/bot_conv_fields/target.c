/*
 * fuzz target: the records of typed conversation fields (src/bot/dispatch/fields.c), which
 * are read from a storage another process may have written (Redis). Any input must be
 * walked without reading past its end; every record read must lie inside the input with
 * its NULs in place, and writing the records read back must give the same bytes.
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
    free(copy);
    return 0;
}
