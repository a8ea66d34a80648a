/*
 * conv_fields: typed fields (strings, integers) inside a conversation's data.
 *
 * The data blob (see conv.c) holds "tgf1" followed by one record per field:
 *   type ('s' or 'i'), name length (1 byte), name, NUL, value length (4 bytes, little
 *   endian), value, NUL
 * Integers are stored as decimal text. The NULs make names and values C strings in place,
 * so getters return pointers into the loaded data without copying. The data comes from a
 * storage another process may have written (Redis), so every length is checked against the
 * end before it is used and a malformed blob reads as "no such field", never past the end.
 * Writes rebuild the blob in the handler's arena and store it through tg_conv_set.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "bot/dispatch/dispatch_int.h"
#include "core/str.h"

#define FIELDS_MAGIC     "tgf1"
#define FIELDS_MAGIC_LEN 4
#define NAME_MAX_LEN     64

struct field {
    char type;
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
    size_t size; /* bytes of the whole record */
};

/* The record at p (n bytes left); false when it is malformed. */
static bool read_field(const unsigned char *p, size_t n, struct field *f)
{
    if (n < 2 || (p[0] != 's' && p[0] != 'i') || p[1] == 0)
        return false;
    size_t nl = p[1];
    if (n < 2 + nl + 1 + 4 || p[2 + nl] != 0)
        return false;
    const unsigned char *q = p + 2 + nl + 1;
    size_t vl = (size_t)q[0] | (size_t)q[1] << 8 | (size_t)q[2] << 16 | (size_t)q[3] << 24;
    size_t head = 2 + nl + 1 + 4;
    if (vl > n - head - 1 || q[4 + vl] != 0)
        return false;
    f->type = (char)p[0];
    f->name = (const char *)p + 2;
    f->name_len = nl;
    f->value = (const char *)q + 4;
    f->value_len = vl;
    f->size = head + vl + 1;
    return true;
}

/* Is data (len bytes) a fields blob? Empty data counts as one with no fields. */
static bool is_fields(const unsigned char *data, size_t len)
{
    return len == 0 ||
           (len >= FIELDS_MAGIC_LEN && memcmp(data, FIELDS_MAGIC, FIELDS_MAGIC_LEN) == 0);
}

/* Find field name in the conversation's data; false when absent or the blob is malformed. */
static bool find_field(const tg_hctx *h, const char *name, struct field *out)
{
    size_t len;
    const unsigned char *d = tg_conv_data(h, &len);
    if (!d || !name || !is_fields(d, len) || len == 0)
        return false;
    size_t nlen = strlen(name);
    for (size_t off = FIELDS_MAGIC_LEN; off < len;) {
        struct field f;
        if (!read_field(d + off, len - off, &f))
            return false;
        if (f.name_len == nlen && memcmp(f.name, name, nlen) == 0) {
            *out = f;
            return true;
        }
        off += f.size;
    }
    return false;
}

const char *tg_conv_get_str(const tg_hctx *h, const char *name)
{
    struct field f;
    return find_field(h, name, &f) && f.type == 's' ? f.value : NULL;
}

bool tg_conv_get_int(const tg_hctx *h, const char *name, int64_t *out)
{
    struct field f;
    int64_t v;
    if (!find_field(h, name, &f) || f.type != 'i' || tg__parse_i64(f.value, f.value_len, &v) != 0)
        return false;
    if (out)
        *out = v;
    return true;
}

static bool name_valid(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > NAME_MAX_LEN)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr("_.:-", c)))
            return false;
    }
    return true;
}

static void put_record(unsigned char *p, char type, const char *name, const char *value, size_t vl)
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

/*
 * Store the data with field name replaced by (type, value) — or removed when type is 0 —
 * in the current state.
 */
static tg_status rewrite(tg_hctx *h, const char *name, char type, const char *value, size_t vl)
{
    if (!name_valid(name))
        return tg_hctx_fail(h, TG_ERR_INVALID,
                            "conversation: field name \"%.64s\" is not 1..64 of [A-Za-z0-9_.:-]",
                            name ? name : "(null)");
    const char *state = tg_conv_state(h);
    if (!state)
        return tg_hctx_fail(h, TG_ERR_INVALID,
                            "conversation: no conversation to keep field \"%s\" in; enter a "
                            "state first (tg_conv_enter)",
                            name);
    size_t len;
    const unsigned char *d = tg_conv_data(h, &len);
    if (!is_fields(d, len))
        return tg_hctx_fail(h, TG_ERR_INVALID,
                            "conversation: its data is a blob from tg_conv_set, not fields");
    size_t nl = strlen(name), cap = (len ? len : FIELDS_MAGIC_LEN) + 2 + nl + 1 + 4 + vl + 1;
    unsigned char *out = tg_hctx_alloc(h, cap);
    if (!out)
        return tg_hctx_fail(h, TG_ERR_NOMEM, "conversation: out of memory");
    memcpy(out, FIELDS_MAGIC, FIELDS_MAGIC_LEN);
    size_t o = FIELDS_MAGIC_LEN;
    for (size_t off = FIELDS_MAGIC_LEN; off < len;) {
        struct field f;
        if (!read_field(d + off, len - off, &f))
            return tg_hctx_fail(h, TG_ERR_DECODE,
                                "conversation: stored fields are malformed at byte %zu", off);
        if (!(f.name_len == nl && memcmp(f.name, name, nl) == 0)) {
            memcpy(out + o, d + off, f.size);
            o += f.size;
        }
        off += f.size;
    }
    if (type) {
        put_record(out + o, type, name, value, vl);
        o += 2 + nl + 1 + 4 + vl + 1;
    }
    char st[TG__CONV_STATE_MAX + 1];
    snprintf(st, sizeof st, "%s", state);
    return tg_conv_set(h, st, out, o);
}

tg_status tg_conv_set_str(tg_hctx *h, const char *name, const char *value)
{
    if (!value)
        return tg_hctx_fail(h, TG_ERR_INVALID, "conversation: field \"%.64s\": NULL value",
                            name ? name : "(null)");
    size_t vl = strlen(value);
    if (vl > UINT32_MAX)
        return tg_hctx_fail(h, TG_ERR_TOO_BIG, "conversation: field value too long");
    return rewrite(h, name, 's', value, vl);
}

tg_status tg_conv_set_int(tg_hctx *h, const char *name, int64_t value)
{
    char buf[24];
    int n = snprintf(buf, sizeof buf, "%" PRId64, value);
    return rewrite(h, name, 'i', buf, (size_t)n);
}

tg_status tg_conv_unset(tg_hctx *h, const char *name)
{
    return rewrite(h, name, 0, NULL, 0);
}

tg_status tg_conv_enter(tg_hctx *h, const char *state)
{
    size_t len = 0;
    const void *d = tg_conv_state(h) ? tg_conv_data(h, &len) : NULL;
    return tg_conv_set(h, state, d, len);
}
