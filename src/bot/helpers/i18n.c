/*
 * i18n: catalogs by language and the lookup with fallbacks (tgbot/i18n.h).
 *
 * Languages are kept normalised (lower case, '-' between subtags). A lookup walks the
 * language from its full form to its first subtag and returns the first catalog that has the
 * message; nothing is allocated on the lookup path, so any number of threads may look up
 * at once once loading is done.
 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bot/helpers/mo.h"
#include "core/alloc.h"
#include "core/readfile.h"
#include "tgbot/i18n.h"

#define LANG_MAX     36          /* bytes of a normalised language code */
#define MO_MAX_BYTES (64u << 20) /* a catalog file larger than this is refused */

struct catalog {
    char lang[LANG_MAX];
    struct tg__mo mo;
};

struct tg_i18n {
    char default_lang[LANG_MAX];
    struct catalog *cats;
    size_t ncats;
    char err[512];
};

static tg_status fail(tg_i18n *tr, tg_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static tg_status fail(tg_i18n *tr, tg_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tr->err, sizeof tr->err, fmt, ap);
    va_end(ap);
    return st;
}

/* Lower case, '_' -> '-', only [a-z0-9-]; false when lang does not fit or has other bytes. */
static bool normalise(const char *lang, char out[LANG_MAX])
{
    size_t n = lang ? strlen(lang) : 0;
    if (n == 0 || n >= LANG_MAX)
        return false;
    for (size_t i = 0; i <= n; i++) {
        char c = lang[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        else if (c == '_')
            c = '-';
        else if (c && !((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
            return false;
        out[i] = c;
    }
    return out[0] != '-';
}

tg_i18n *tg_i18n_new(const char *default_lang)
{
    tg_i18n *tr = tg__calloc(1, sizeof *tr);
    if (tr && !normalise(default_lang ? default_lang : "en", tr->default_lang))
        snprintf(tr->default_lang, sizeof tr->default_lang, "en");
    return tr;
}

void tg_i18n_free(tg_i18n *tr)
{
    if (!tr)
        return;
    for (size_t i = 0; i < tr->ncats; i++)
        tg__mo_cleanup(&tr->cats[i].mo);
    tg__free(tr->cats);
    tg__free(tr);
}

const char *tg_i18n_errmsg(const tg_i18n *tr)
{
    return tr ? tr->err : "no i18n";
}

static struct catalog *find_catalog(const tg_i18n *tr, const char *lang, size_t n)
{
    for (size_t i = 0; i < tr->ncats; i++)
        if (strlen(tr->cats[i].lang) == n && memcmp(tr->cats[i].lang, lang, n) == 0)
            return &tr->cats[i];
    return NULL;
}

tg_status tg_i18n_load_mem(tg_i18n *tr, const char *lang, const void *data, size_t len,
                           const char *name)
{
    if (!tr)
        return TG_ERR_INVALID;
    tr->err[0] = '\0';
    char norm[LANG_MAX];
    if (!normalise(lang, norm))
        return fail(tr, TG_ERR_INVALID, "%s: \"%.40s\" is not a language code",
                    name ? name : "catalog", lang ? lang : "(null)");
    struct tg__mo mo;
    char err[400];
    int rc = tg__mo_parse(&mo, data, len, err, sizeof err);
    if (rc == -2)
        return fail(tr, TG_ERR_NOMEM, "%s: out of memory", name ? name : "catalog");
    if (rc != 0)
        return fail(tr, TG_ERR_DECODE, "%s: %s", name ? name : "catalog", err);
    struct catalog *c = find_catalog(tr, norm, strlen(norm));
    if (!c) {
        struct catalog *n = tg__realloc(tr->cats, (tr->ncats + 1) * sizeof *n);
        if (!n) {
            tg__mo_cleanup(&mo);
            return fail(tr, TG_ERR_NOMEM, "%s: out of memory", name ? name : "catalog");
        }
        tr->cats = n;
        c = &n[tr->ncats++];
        memcpy(c->lang, norm, sizeof norm);
    } else {
        tg__mo_cleanup(&c->mo);
    }
    c->mo = mo;
    return TG_OK;
}

tg_status tg_i18n_load_file(tg_i18n *tr, const char *lang, const char *path)
{
    if (!tr || !path)
        return TG_ERR_INVALID;
    char *buf;
    size_t len;
    int rc = tg__read_file(path, MO_MAX_BYTES, 0, &buf, &len, NULL, tr->err, sizeof tr->err);
    if (rc != 0)
        return rc == -EFBIG ? TG_ERR_TOO_BIG : rc == -ENOMEM ? TG_ERR_NOMEM : TG_ERR_IO;
    tg_status st = tg_i18n_load_mem(tr, lang, buf, len, path);
    tg__free(buf);
    return st;
}

tg_status tg_i18n_load_dir(tg_i18n *tr, const char *dir, const char *domain, size_t *count)
{
    if (count)
        *count = 0;
    if (!tr || !dir || !domain || !*domain || strchr(domain, '/'))
        return TG_ERR_INVALID;
    DIR *dh = opendir(dir);
    if (!dh)
        return fail(tr, TG_ERR_IO, "%s: cannot open: %s", dir, strerror(errno));
    tg_status st = TG_OK;
    struct dirent *de;
    while (st == TG_OK && (de = readdir(dh)) != NULL) {
        char norm[LANG_MAX], path[4096];
        if (de->d_name[0] == '.' || !normalise(de->d_name, norm))
            continue;
        int n = snprintf(path, sizeof path, "%s/%s/LC_MESSAGES/%s.mo", dir, de->d_name, domain);
        if (n < 0 || (size_t)n >= sizeof path || access(path, F_OK) != 0)
            continue;
        st = tg_i18n_load_file(tr, de->d_name, path);
        if (st == TG_OK && count)
            (*count)++;
    }
    closedir(dh);
    return st;
}

/* The catalog entry for key along lang's chain of subtags; *cat gets its catalog. */
static const struct tg__mo_entry *chain(const tg_i18n *tr, const char *lang, const char *key,
                                        size_t klen, const struct catalog **cat)
{
    char norm[LANG_MAX];
    if (!normalise(lang, norm))
        return NULL;
    for (size_t n = strlen(norm); n > 0;) {
        const struct catalog *c = find_catalog(tr, norm, n);
        const struct tg__mo_entry *e = c ? tg__mo_find(&c->mo, key, klen) : NULL;
        if (e && e->tr_len) {
            *cat = c;
            return e;
        }
        while (n > 0 && norm[n - 1] != '-') /* drop the last subtag */
            n--;
        if (n > 0)
            n--;
    }
    return NULL;
}

/* lang's chain, then the default language's (for catalogs keyed by ids, not English). */
static const struct tg__mo_entry *lookup(const tg_i18n *tr, const char *lang, const char *key,
                                         size_t klen, const struct catalog **cat)
{
    if (!tr || !key)
        return NULL;
    const struct tg__mo_entry *e = chain(tr, lang, key, klen, cat);
    return e ? e : chain(tr, tr->default_lang, key, klen, cat);
}

const char *tg_i18n_get(const tg_i18n *tr, const char *lang, const char *msgid)
{
    const struct catalog *c;
    const struct tg__mo_entry *e =
        msgid && *msgid ? lookup(tr, lang, msgid, strlen(msgid), &c) : NULL;
    const char *s = e ? tg__mo_form(e, 0) : NULL;
    return s ? s : msgid;
}

const char *tg_i18n_pget(const tg_i18n *tr, const char *lang, const char *context,
                         const char *msgid)
{
    if (!context || !msgid)
        return msgid;
    char key[1024];
    int n = snprintf(key, sizeof key, "%s\004%s", context, msgid);
    if (n < 0 || (size_t)n >= sizeof key)
        return msgid;
    const struct catalog *c;
    const struct tg__mo_entry *e = lookup(tr, lang, key, (size_t)n, &c);
    const char *s = e ? tg__mo_form(e, 0) : NULL;
    return s ? s : msgid;
}

const char *tg_i18n_nget(const tg_i18n *tr, const char *lang, const char *msgid,
                         const char *msgid_plural, uint64_t n)
{
    const char *untranslated = n == 1 || !msgid_plural ? msgid : msgid_plural;
    const struct catalog *c;
    const struct tg__mo_entry *e =
        msgid && *msgid ? lookup(tr, lang, msgid, strlen(msgid), &c) : NULL;
    const char *s = e ? tg__mo_form(e, tg__plural_eval(&c->mo.plural, n)) : NULL;
    return s ? s : untranslated;
}

const char *tg_i18n_resolve(const tg_i18n *tr, const char *lang, const char *msgid)
{
    const struct catalog *c;
    return msgid && lookup(tr, lang, msgid, strlen(msgid), &c) ? c->lang : NULL;
}
