/*
 * mo: parse a GNU gettext .mo catalog (see mo.h for the layout). Every offset and length
 * read from the file is checked against its size before use, so any byte string either
 * parses or yields one error line; the file is copied and entries point into the copy.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bot/helpers/mo.h"
#include "bot/helpers/utf8.h"
#include "core/alloc.h"

#define MO_MAGIC 0x950412deu

static uint32_t rd32(const unsigned char *p, bool swap)
{
    uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    return swap ? __builtin_bswap32(v) : v;
}

static int fail(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return -1;
}

/* String i of the table at toff: checked, NUL-terminated inside the file. */
static int string_at(const unsigned char *d, size_t len, uint32_t toff, uint32_t i, bool swap,
                     const char *table, const char **s, size_t *slen, char *err, size_t cap)
{
    uint64_t at = (uint64_t)toff + (uint64_t)i * 8;
    if (at + 8 > len)
        return fail(err, cap, "entry %u of the %s table is outside the file (%zu bytes)", i, table,
                    len);
    uint32_t n = rd32(d + at, swap), off = rd32(d + at + 4, swap);
    if ((uint64_t)off + n >= len || d[off + n] != '\0')
        return fail(err, cap,
                    "string %u of the %s table runs past the end of the file or lacks its NUL "
                    "(offset %u, length %u, file %zu bytes)",
                    i, table, off, n, len);
    if (!tg__utf8_valid((const char *)d + off, n, NULL))
        return fail(err, cap, "string %u of the %s table is not UTF-8", i, table);
    *s = (const char *)d + off;
    *slen = n;
    return 0;
}

static int cmp_entry(const void *a, const void *b)
{
    const struct tg__mo_entry *x = a, *y = b;
    size_t n = x->orig_len < y->orig_len ? x->orig_len : y->orig_len;
    int c = memcmp(x->orig, y->orig, n);
    return c ? c : (x->orig_len > y->orig_len) - (x->orig_len < y->orig_len);
}

/* The value of header field name ("Plural-Forms") up to its end of line, or NULL. */
static const char *header_field(const char *h, size_t hlen, const char *name, size_t *n)
{
    size_t k = strlen(name);
    for (size_t i = 0; i < hlen;) {
        const char *line = h + i;
        const char *nl = memchr(line, '\n', hlen - i);
        size_t ll = nl ? (size_t)(nl - line) : hlen - i;
        if (ll > k && strncasecmp(line, name, k) == 0 && line[k] == ':') {
            *n = ll - k - 1;
            return line + k + 1;
        }
        i += ll + 1;
    }
    return NULL;
}

static int read_header(struct tg__mo *mo, char *err, size_t cap)
{
    const struct tg__mo_entry *h = tg__mo_find(mo, "", 0);
    if (!h)
        return 0;
    size_t n;
    const char *ct = header_field(h->tr, strlen(h->tr), "Content-Type", &n);
    const char *cs = ct ? memmem(ct, n, "charset=", 8) : NULL;
    if (cs) {
        size_t rest = n - (size_t)(cs + 8 - ct);
        if (!((rest >= 5 && strncasecmp(cs + 8, "UTF-8", 5) == 0) ||
              (rest >= 5 && strncasecmp(cs + 8, "ASCII", 5) == 0) ||
              (rest >= 7 && strncasecmp(cs + 8, "CHARSET", 7) == 0)))
            return fail(err, cap,
                        "header: charset is not UTF-8 (\"%.*s\"); recompile the .po "
                        "as UTF-8 (msgconv -t UTF-8)",
                        (int)(rest < 20 ? rest : 20), cs + 8);
    }
    const char *pf = header_field(h->tr, strlen(h->tr), "Plural-Forms", &n);
    if (pf && tg__plural_parse(&mo->plural, pf, n, err, cap) != 0)
        return -1;
    return 0;
}

int tg__mo_parse(struct tg__mo *mo, const void *data, size_t len, char *err, size_t cap)
{
    memset(mo, 0, sizeof *mo);
    const unsigned char *d = data;
    if (len < 28)
        return fail(err, cap, "not a .mo file: %zu bytes is shorter than its header", len);
    uint32_t magic = rd32(d, false);
    bool swap = magic == __builtin_bswap32(MO_MAGIC);
    if (magic != MO_MAGIC && !swap)
        return fail(err, cap, "not a .mo file: magic 0x%08x, expected 0x950412de", magic);
    uint32_t rev = rd32(d + 4, swap), n = rd32(d + 8, swap);
    uint32_t ooff = rd32(d + 12, swap), toff = rd32(d + 16, swap);
    if (rev >> 16 > 1)
        return fail(err, cap, "unsupported .mo revision %u.%u", rev >> 16, rev & 0xffff);
    if ((uint64_t)n * 8 > len)
        return fail(err, cap, "%u strings cannot fit in %zu bytes", n, len);
    mo->data = tg__memdup(data, len);
    mo->entries = tg__calloc(n ? n : 1, sizeof *mo->entries);
    if (!mo->data || !mo->entries) {
        tg__mo_cleanup(mo);
        return -2;
    }
    mo->len = len;
    d = (const unsigned char *)mo->data;
    for (uint32_t i = 0; i < n; i++) {
        struct tg__mo_entry *e = &mo->entries[i];
        if (string_at(d, len, ooff, i, swap, "original", &e->orig, &e->orig_len, err, cap) ||
            string_at(d, len, toff, i, swap, "translation", &e->tr, &e->tr_len, err, cap)) {
            tg__mo_cleanup(mo);
            return -1;
        }
        e->orig_len = strlen(e->orig); /* the key stops at a plural's NUL */
    }
    mo->count = n;
    qsort(mo->entries, n, sizeof *mo->entries, cmp_entry);
    if (read_header(mo, err, cap) != 0) {
        tg__mo_cleanup(mo);
        return -1;
    }
    return 0;
}

void tg__mo_cleanup(struct tg__mo *mo)
{
    tg__free(mo->data);
    tg__free(mo->entries);
    memset(mo, 0, sizeof *mo);
}

const struct tg__mo_entry *tg__mo_find(const struct tg__mo *mo, const char *key, size_t n)
{
    struct tg__mo_entry k = {.orig = key, .orig_len = n};
    return mo->count ? bsearch(&k, mo->entries, mo->count, sizeof k, cmp_entry) : NULL;
}

const char *tg__mo_form(const struct tg__mo_entry *e, unsigned i)
{
    const char *p = e->tr, *end = e->tr + e->tr_len;
    for (; i > 0 && p < end; i--)
        p += strlen(p) + 1;
    return p < end && *p ? p : NULL;
}
