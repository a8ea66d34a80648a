/*
 * json_path: names a token by its position in the document ("result.entities[2].offset") and
 * formats parse/decode errors with that path.
 *
 * The walk goes down from the root, skipping whole subtrees through tok.next, so it costs
 * O(depth x siblings) and is only paid when an error is reported. It relies only on
 * "next > index" and the counts, which also hold for the truncated tree a failed parse leaves
 * (see json.c), so parse errors get a path too. Every loop is bounded by ntok.
 *
 * Keys that are identifiers ([A-Za-z_][A-Za-z0-9_]*) are written as .key; any other key is
 * written as ["raw"], with its JSON escapes kept as they are in the input.
 *
 * Thread-safety: reentrant.
 */
#include "bot/json/json.h"

#include <errno.h>
#include <string.h>

static bool is_ident(const char *s, size_t n)
{
    if (n == 0 || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c | 0x20) >= 'a' && (c | 0x20) <= 'z') && !(c >= '0' && c <= '9') && c != '_')
            return false;
    }
    return true;
}

_Thread_local uint64_t tg__json_steps;

int tg__json_path_key(const tg__jdoc *d, uint32_t key, bool first, tg__buf *out)
{
    const tg__jtok *k = &d->toks[key];
    const char *s = d->src + k->start;
    int rc;
    if (is_ident(s, k->len)) {
        if (!first && (rc = tg__buf_putc(out, '.')) != 0)
            return rc;
        return tg__buf_append(out, s, k->len);
    }
    if ((rc = tg__buf_append(out, "[\"", 2)) != 0 || (rc = tg__buf_append(out, s, k->len)) != 0)
        return rc;
    return tg__buf_append(out, "\"]", 2);
}

int tg__json_path_index(uint32_t i, tg__buf *out)
{
    return tg__buf_printf(out, "[%u]", (unsigned)i);
}

/* One step down from object cur toward tok. Returns the child to continue from, or
 * UINT32_MAX if tok is not inside (malformed request). */
static uint32_t step_object(const tg__jdoc *d, uint32_t cur, uint32_t tok, bool first, tg__buf *out,
                            int *rc)
{
    uint32_t k = cur + 1;
    for (uint32_t i = 0; i < d->toks[cur].count && k < d->ntok; i++) {
        tg__json_steps++;
        uint32_t v = k + 1;
        uint32_t end = v < d->ntok ? d->toks[v].next : d->ntok;
        if (tok == k || tok < end) {
            *rc = tg__json_path_key(d, k, first, out);
            return tok == k ? tok : v;
        }
        k = end;
    }
    return UINT32_MAX;
}

static uint32_t step_array(const tg__jdoc *d, uint32_t cur, uint32_t tok, tg__buf *out, int *rc)
{
    uint32_t e = cur + 1;
    for (uint32_t i = 0; i < d->toks[cur].count && e < d->ntok; i++) {
        tg__json_steps++;
        if (tok < d->toks[e].next) {
            *rc = tg__json_path_index(i, out);
            return e;
        }
        e = d->toks[e].next;
    }
    return UINT32_MAX;
}

int tg__json_path(const tg__jdoc *d, uint32_t tok, tg__buf *out)
{
    if (!d || tok >= d->ntok)
        return -EINVAL;
    uint32_t cur = 0;
    bool first = true;
    int rc = 0;
    while (cur != tok && rc == 0) {
        uint8_t type = d->toks[cur].type;
        uint32_t nxt = UINT32_MAX;
        if (type == TG__J_OBJECT)
            nxt = step_object(d, cur, tok, first, out, &rc);
        else if (type == TG__J_ARRAY)
            nxt = step_array(d, cur, tok, out, &rc);
        if (nxt == UINT32_MAX || nxt <= cur)
            return rc ? rc : -EINVAL;
        cur = nxt;
        first = false;
    }
    return rc;
}

int tg__json_errmsg(const tg__jdoc *d, const tg__jerr *err, tg__buf *out)
{
    size_t mark = out->len;
    int rc = 0;
    if (d && err->tok != UINT32_MAX && err->tok < d->ntok) {
        rc = tg__json_path(d, err->tok, out);
        if (rc != 0) { /* no path then, but still the message */
            out->len = mark;
            if (out->data)
                out->data[mark] = '\0';
        } else if (out->len > mark && (rc = tg__buf_append(out, ": ", 2)) != 0) {
            return rc;
        }
    }
    return tg__buf_printf(out, "%s (at byte %zu)", err->msg, err->offset);
}
