/*
 * fields: read and write the records of typed fields (see fields.h).
 */
#include <string.h>

#include "bot/dispatch/fields.h"

bool tg__field_read(const unsigned char *p, size_t n, struct tg__field *f)
{
    if (n < 2 || (p[0] != 's' && p[0] != 'i') || p[1] == 0)
        return false;
    size_t nl = p[1];
    size_t head = 2 + nl + 1 + 4;
    if (n < head + 1 || p[2 + nl] != 0) /* room for the head and the value's NUL */
        return false;
    const unsigned char *q = p + 2 + nl + 1;
    size_t vl = (size_t)q[0] | (size_t)q[1] << 8 | (size_t)q[2] << 16 | (size_t)q[3] << 24;
    if (vl > n - head - 1 || q[4 + vl] != 0)
        return false;
    if (memchr(p + 2, 0, nl) || memchr(q + 4, 0, vl)) /* C strings: no NUL inside */
        return false;
    f->type = (char)p[0];
    f->name = (const char *)p + 2;
    f->name_len = nl;
    f->value = (const char *)q + 4;
    f->value_len = vl;
    f->size = head + vl + 1;
    return true;
}

bool tg__fields_is(const unsigned char *data, size_t len)
{
    return len == 0 || (len >= TG__FIELDS_MAGIC_LEN &&
                        memcmp(data, TG__FIELDS_MAGIC, TG__FIELDS_MAGIC_LEN) == 0);
}

void tg__field_write(unsigned char *p, char type, const char *name, const char *value, size_t vl)
{
    size_t nl = strlen(name);
    p[0] = (unsigned char)type;
    p[1] = (unsigned char)nl;
    memcpy(p + 2, name, nl + 1);
    unsigned char *q = p + 2 + nl + 1;
    q[0] = (unsigned char)vl;
    q[1] = (unsigned char)(vl >> 8);
    q[2] = (unsigned char)(vl >> 16);
    q[3] = (unsigned char)(vl >> 24);
    memcpy(q + 4, value, vl);
    q[4 + vl] = 0;
}

bool tg__fields_find(const unsigned char *d, size_t len, const char *name, size_t nl,
                     struct tg__field *out)
{
    if (!d || !tg__fields_is(d, len))
        return false;
    for (size_t off = TG__FIELDS_MAGIC_LEN; off < len;) {
        struct tg__field f;
        if (!tg__field_read(d + off, len - off, &f))
            return false;
        if (f.name_len == nl && memcmp(f.name, name, nl) == 0) {
            *out = f;
            return true;
        }
        off += f.size;
    }
    return false;
}

size_t tg__fields_put(unsigned char *out, const unsigned char *d, size_t len, const char *name,
                      size_t nl, char type, const char *value, size_t vl, size_t *bad)
{
    memcpy(out, TG__FIELDS_MAGIC, TG__FIELDS_MAGIC_LEN);
    size_t o = TG__FIELDS_MAGIC_LEN;
    for (size_t off = TG__FIELDS_MAGIC_LEN; off < len;) {
        struct tg__field f;
        if (!tg__field_read(d + off, len - off, &f)) {
            *bad = off;
            return 0;
        }
        if (!(f.name_len == nl && memcmp(f.name, name, nl) == 0)) {
            memcpy(out + o, d + off, f.size);
            o += f.size;
        }
        off += f.size;
    }
    if (type) {
        tg__field_write(out + o, type, name, value, vl);
        o += tg__field_size(nl, vl);
    }
    return o;
}
