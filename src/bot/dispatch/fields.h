/*
 * fields: the record format of typed fields: conversation fields (conv_fields.c) and
 * sessions (session.c). Pure functions over bytes, fuzzed by fuzz/bot_conv_fields.
 *
 * A fields blob is "tgf1" followed by one record per field:
 *   type ('s' string, 'i' integer as decimal text), name length (1 byte, 1..255), name,
 *   NUL, value length (4 bytes, little endian), value, NUL
 * The NULs make names and values C strings in place. The blob comes from a storage another
 * process may have written (Redis), so the reader checks every length against the end.
 */
#ifndef TGKIT_BOT_DISPATCH_FIELDS_H
#define TGKIT_BOT_DISPATCH_FIELDS_H

#include <stdbool.h>
#include <stddef.h>

#define TG__FIELDS_MAGIC     "tgf1"
#define TG__FIELDS_MAGIC_LEN 4

struct tg__field {
    char type;
    const char *name; /* NUL-terminated in place */
    size_t name_len;
    const char *value; /* NUL-terminated in place */
    size_t value_len;
    size_t size; /* bytes of the whole record */
};

/* Bytes of a record with a name of nl and a value of vl bytes. */
static inline size_t tg__field_size(size_t nl, size_t vl)
{
    return 2 + nl + 1 + 4 + vl + 1;
}

/* The record at p (n bytes left); false when it is malformed, runs past n, or has a NUL
 * inside its name or value. */
bool tg__field_read(const unsigned char *p, size_t n, struct tg__field *f);
/* Is data (len bytes) a fields blob? Empty data counts as one with no fields. */
bool tg__fields_is(const unsigned char *data, size_t len);
/* Write a record at p (tg__field_size(strlen(name), vl) bytes); name is 1..255 bytes. */
void tg__field_write(unsigned char *p, char type, const char *name, const char *value, size_t vl);

/* Field name (nl bytes) of the fields blob d (len bytes); false when absent, or when the
 * blob is malformed before it. */
bool tg__fields_find(const unsigned char *d, size_t len, const char *name, size_t nl,
                     struct tg__field *out);
/* Bytes tg__fields_put may write for a blob of len bytes and a new field of nl + vl. */
static inline size_t tg__fields_put_cap(size_t len, size_t nl, size_t vl)
{
    return (len ? len : TG__FIELDS_MAGIC_LEN) + tg__field_size(nl, vl);
}
/*
 * Write into out (tg__fields_put_cap bytes) the blob d (len bytes; empty = no fields) with
 * field name (nl bytes) replaced by (type, value) at the end, or removed when type is 0.
 * Returns the new length; 0 when d is malformed (*bad gets the offset of the bad record).
 */
size_t tg__fields_put(unsigned char *out, const unsigned char *d, size_t len, const char *name,
                      size_t nl, char type, const char *value, size_t vl, size_t *bad);

#endif
