/*
 * conv_fields: typed fields (strings, integers) inside a conversation's data.
 *
 * The records (fields.h) are read in place, so getters return pointers into the loaded data
 * without copying; a malformed blob reads as "no such field". Writes rebuild the blob in the
 * handler's arena and store it through tg_conv_set.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "bot/dispatch/dispatch_int.h"
#include "bot/dispatch/fields.h"
#include "core/str.h"

/* Find field name in the conversation's data; false when absent or the blob is malformed. */
static bool find_field(const tg_hctx *h, const char *name, struct tg__field *out)
{
    size_t len;
    const unsigned char *d = tg_conv_data(h, &len);
    return d && name && tg__fields_find(d, len, name, strlen(name), out);
}

const char *tg_conv_get_str(const tg_hctx *h, const char *name)
{
    struct tg__field f;
    return find_field(h, name, &f) && f.type == 's' ? f.value : NULL;
}

bool tg_conv_get_int(const tg_hctx *h, const char *name, int64_t *out)
{
    struct tg__field f;
    int64_t v;
    if (!find_field(h, name, &f) || f.type != 'i' || tg__parse_i64(f.value, f.value_len, &v) != 0)
        return false;
    if (out)
        *out = v;
    return true;
}

/*
 * Store the data with field name replaced by (type, value) — or removed when type is 0 —
 * in the current state.
 */
static tg_status rewrite(tg_hctx *h, const char *name, char type, const char *value, size_t vl)
{
    if (!tg__conv_name_valid(name))
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
    if (!tg__fields_is(d, len))
        return tg_hctx_fail(h, TG_ERR_INVALID,
                            "conversation: its data is a blob from tg_conv_set, not fields");
    size_t nl = strlen(name), bad = 0;
    unsigned char *out = tg_hctx_alloc(h, tg__fields_put_cap(len, nl, vl));
    if (!out)
        return tg_hctx_fail(h, TG_ERR_NOMEM, "conversation: out of memory");
    size_t o = tg__fields_put(out, d, len, name, nl, type, value, vl, &bad);
    if (!o)
        return tg_hctx_fail(h, TG_ERR_DECODE,
                            "conversation: stored fields are malformed at byte %zu", bad);
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
