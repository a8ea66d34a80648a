/*
 * apistore: the API's own secrets and their merge into a loaded config. See apistore.h.
 * Invariant: labels in a store are unique and valid config labels; an entry without a
 * secret is an override of a file secret and carries only `disabled`.
 */
#include "proxy/daemon/apistore.h"

#include "core/alloc.h"
#include "core/atomicfile.h"
#include "core/log.h"
#include "core/readfile.h"
#include "core/str.h"
#include "proxy/wire/crypto.h"
#include "proxy/wire/json.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STATE_MAX_BYTES (4u << 20)

void apistore_init(struct apistore *st)
{
    memset(st, 0, sizeof *st);
}

void apistore_cleanup(struct apistore *st)
{
    if (!st)
        return;
    if (st->e)
        crypto_wipe(st->e, st->n * sizeof *st->e);
    tg__free(st->e);
    apistore_init(st);
}

int apistore_copy(struct apistore *dst, const struct apistore *src)
{
    apistore_cleanup(dst);
    dst->revision = src->revision;
    if (!src->n)
        return 0;
    dst->e = tg__malloc(src->n * sizeof *dst->e);
    if (!dst->e)
        return -ENOMEM;
    memcpy(dst->e, src->e, src->n * sizeof *dst->e);
    dst->n = src->n;
    return 0;
}

struct apistore_entry *apistore_find(struct apistore *st, const char *label)
{
    for (size_t i = 0; i < st->n; i++)
        if (strcmp(st->e[i].label, label) == 0)
            return &st->e[i];
    return NULL;
}

struct apistore_entry *apistore_add(struct apistore *st, const char *label)
{
    if (st->n >= APISTORE_MAX || strlen(label) >= CONFIG_LABEL_MAX)
        return NULL;
    struct apistore_entry *e = tg__realloc(st->e, (st->n + 1) * sizeof *e);
    if (!e)
        return NULL;
    st->e = e;
    e = &st->e[st->n++];
    memset(e, 0, sizeof *e);
    tg__strlcpy(e->label, label, sizeof e->label);
    return e;
}

void apistore_del(struct apistore *st, struct apistore_entry *e)
{
    size_t i = (size_t)(e - st->e);
    crypto_wipe(e, sizeof *e);
    memmove(&st->e[i], &st->e[i + 1], (st->n - i - 1) * sizeof *e);
    st->n--;
}

bool apistore_label_ok(const char *s, size_t n)
{
    if (n == 0 || n >= CONFIG_LABEL_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '.' || s[i] == '-'))
            return false;
    return true;
}

int apistore_ad_tag(const char *s, size_t n, int8_t *mode, uint8_t tag[16])
{
    if (n == 0) {
        *mode = -1;
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') ||
              (s[i] >= 'A' && s[i] <= 'F')))
            return -EINVAL;
    if (n != 32 || tg__hex_decode(tag, 16, s, n) != 16)
        return -EINVAL;
    *mode = 1;
    return 0;
}

static int uint_member(const struct json_val *o, const char *key, uint64_t max, uint64_t *out)
{
    const struct json_val *v = json_get(o, key);
    if (!v)
        return 0;
    if (v->type != JSON_NUMBER || !v->is_int || v->i < 0 || (uint64_t)v->i > max)
        return -EINVAL;
    *out = (uint64_t)v->i;
    return 0;
}

static int parse_limits(const struct json_val *o, struct config_limits *l)
{
    uint64_t v[6] = {l->max_connections, l->max_unique_ips, l->unique_ips_window_s,
                     l->quota,           l->quota_reset_s,  (uint64_t)l->expires};
    if (uint_member(o, "max-connections", UINT32_MAX, &v[0]) ||
        uint_member(o, "max-unique-ips", UINT32_MAX, &v[1]) ||
        uint_member(o, "unique-ips-window", 366u * 86400, &v[2]) ||
        uint_member(o, "quota", INT64_MAX, &v[3]) ||
        uint_member(o, "quota-reset", 366u * 86400, &v[4]) ||
        uint_member(o, "expires", INT64_MAX / 2, &v[5]))
        return -EINVAL;
    l->max_connections = (uint32_t)v[0];
    l->max_unique_ips = (uint32_t)v[1];
    l->unique_ips_window_s = (uint32_t)v[2];
    l->quota = v[3];
    l->quota_reset_s = (uint32_t)v[4];
    l->expires = (int64_t)v[5];
    return 0;
}

static int entry_from(struct apistore *st, const struct json_val *o, char *why, size_t cap)
{
    const struct json_val *lab = json_get(o, "label"), *sec = json_get(o, "secret"),
                          *dis = json_get(o, "disabled"), *lim = json_get(o, "limits");
    uint64_t rev = 0;
    if (o->type != JSON_OBJECT || !lab || lab->type != JSON_STRING ||
        !apistore_label_ok(lab->str, lab->len))
        return snprintf(why, cap, "an entry without a valid label"), -EINVAL;
    if (apistore_find(st, lab->str))
        return snprintf(why, cap, "label %s twice", lab->str), -EINVAL;
    if ((sec && sec->type != JSON_STRING) || (dis && dis->type != JSON_BOOL) ||
        (lim && lim->type != JSON_OBJECT) || uint_member(o, "revision", INT64_MAX, &rev))
        return snprintf(why, cap, "%s: a member of the wrong type", lab->str), -EINVAL;
    struct apistore_entry *e = apistore_add(st, lab->str);
    if (!e)
        return snprintf(why, cap, "too many entries (at most %d)", APISTORE_MAX), -ENOSPC;
    e->revision = rev;
    e->disabled = dis && dis->b;
    if (sec) {
        char serr[128];
        if (secret_parse(sec->str, sec->len, &e->secret, serr, sizeof serr) != 0)
            return snprintf(why, cap, "%s: secret: %s", lab->str, serr), -EINVAL;
        e->has_secret = true;
    }
    const struct json_val *tag = json_get(o, "ad-tag");
    if (tag && (tag->type != JSON_STRING ||
                apistore_ad_tag(tag->str, tag->len, &e->ad_tag_mode, e->ad_tag) != 0))
        return snprintf(why, cap, "%s: ad-tag: expected 32 hex digits or \"\"", lab->str), -EINVAL;
    if (lim && parse_limits(lim, &e->limits) != 0)
        return snprintf(why, cap, "%s: limits: a value out of range", lab->str), -EINVAL;
    return 0;
}

int apistore_parse(struct apistore *st, const char *name, const char *text, size_t len, char *err,
                   size_t errlen)
{
    struct json_doc doc;
    char why[256];
    int rc = json_parse(&doc, text, len, why, sizeof why);
    if (rc == -ENOMEM)
        return snprintf(err, errlen, "%s: out of memory", name), rc;
    if (rc != 0)
        return snprintf(err, errlen, "%s: %s", name, why), rc;
    const struct json_val *root = doc.root, *list = json_get(root, "secrets");
    uint64_t rev = 0;
    if (root->type != JSON_OBJECT || uint_member(root, "revision", INT64_MAX, &rev) != 0 ||
        (list && list->type != JSON_ARRAY)) {
        snprintf(err, errlen, "%s: expected {\"revision\": N, \"secrets\": [...]}", name);
        rc = -EINVAL;
    }
    st->revision = rev;
    for (const struct json_val *e = list ? list->child : NULL; e && rc == 0; e = e->next)
        if ((rc = entry_from(st, e, why, sizeof why)) != 0) {
            snprintf(err, errlen, "%s: %s", name, why);
            rc = rc == -ENOSPC ? -EINVAL : rc;
        }
    json_doc_free(&doc);
    if (rc != 0)
        apistore_cleanup(st);
    return rc;
}

int apistore_load(struct apistore *st, const char *path, char *err, size_t errlen)
{
    apistore_init(st);
    char *text;
    size_t n;
    int rc = tg__read_file(path, STATE_MAX_BYTES, 0, &text, &n, NULL, err, errlen);
    if (rc == -ENOENT)
        return 0; /* nothing made over the API yet */
    if (rc != 0)
        return rc;
    rc = apistore_parse(st, path, text, n, err, errlen);
    if (text)
        crypto_wipe(text, n);
    tg__free(text);
    return rc;
}

int apistore_put_limits(tg__buf *b, const struct config_limits *l)
{
    return tg__buf_printf(b,
                          "{\"max-connections\":%u,\"max-unique-ips\":%u,\"unique-ips-window\":%u,"
                          "\"quota\":%" PRIu64 ",\"quota-reset\":%u,\"expires\":%" PRId64 "}",
                          l->max_connections, l->max_unique_ips, l->unique_ips_window_s, l->quota,
                          l->quota_reset_s, l->expires);
}

int apistore_format(const struct apistore *st, tg__buf *b)
{
    int rc = tg__buf_printf(b, "{\"revision\":%" PRIu64 ",\"secrets\":[", st->revision);
    for (size_t i = 0; i < st->n && rc == 0; i++) {
        const struct apistore_entry *e = &st->e[i];
        rc = tg__buf_printf(b, "%s\n{\"label\":", i ? "," : "");
        if (rc == 0)
            rc = json_put_str(b, e->label, strlen(e->label));
        if (rc == 0 && e->has_secret) {
            char text[2 * (1 + SECRET_KEY_LEN + 255) + 1];
            int n = secret_format(&e->secret, false, text, sizeof text);
            rc = n < 0 ? -EINVAL : tg__buf_puts(b, ",\"secret\":");
            if (rc == 0)
                rc = json_put_str(b, text, (size_t)n);
            crypto_wipe(text, sizeof text);
        }
        if (rc == 0 && e->ad_tag_mode) {
            char hex[33] = "";
            if (e->ad_tag_mode > 0)
                tg__hex_encode(hex, e->ad_tag, 16);
            rc = tg__buf_printf(b, ",\"ad-tag\":\"%s\"", hex);
        }
        if (rc == 0)
            rc = tg__buf_printf(b, ",\"disabled\":%s,\"revision\":%" PRIu64 ",\"limits\":",
                                e->disabled ? "true" : "false", e->revision);
        if (rc == 0)
            rc = apistore_put_limits(b, &e->limits);
        if (rc == 0)
            rc = tg__buf_putc(b, '}');
    }
    return rc ? rc : tg__buf_puts(b, "\n]}\n");
}

int apistore_save(const struct apistore *st, const char *path, char *err, size_t errlen)
{
    tg__buf b;
    tg__buf_init(&b, STATE_MAX_BYTES);
    int rc = apistore_format(st, &b);
    if (rc != 0)
        snprintf(err, errlen, "%s: out of memory", path);
    else
        rc = tg__atomic_write(path, b.data, b.len, 0600, err, errlen);
    if (b.data)
        crypto_wipe(b.data, b.len);
    tg__buf_cleanup(&b);
    return rc;
}

static void warn_line(config_warn_fn warn, void *user, const char *msg)
{
    if (warn)
        warn(user, msg);
    else
        tg__log(NULL, TG__LOG_WARN, "%s", msg);
}

/* The file's secret of label among the first n (the file's own: the store's labels are
   unique, so an entry can only clash with one of those). */
static ssize_t find_secret(const struct config *cfg, size_t n, const char *label)
{
    for (size_t i = 0; i < n && i < cfg->nsecrets; i++)
        if (strcmp(cfg->secrets[i].label, label) == 0)
            return (ssize_t)i;
    return -1;
}

int apistore_merge(const struct apistore *st, struct config *cfg, char *err, size_t errlen,
                   config_warn_fn warn, void *warn_user)
{
    char msg[2 * CONFIG_FILE_MAX + CONFIG_HOST_MAX + 256];
    size_t nfile = cfg->nsecrets; /* an override below removes one: nfile shrinks with it */
    for (size_t i = 0; i < st->n; i++) {
        const struct apistore_entry *e = &st->e[i];
        ssize_t at = find_secret(cfg, nfile, e->label);
        if (at >= 0 && e->has_secret) {
            snprintf(msg, sizeof msg,
                     "%s: secret '%s' made over the API is shadowed by the one of the same label "
                     "in %s (the file wins; delete one of them)",
                     cfg->api.state_file, e->label, cfg->source);
            warn_line(warn, warn_user, msg);
        } else if (at < 0 && e->has_secret && !e->disabled) {
            int rc = config_append_secret(cfg, e->label, &e->secret, err, errlen);
            if (rc != 0)
                return rc == -ENOSPC ? -EINVAL : rc;
            cfg->secrets[cfg->nsecrets - 1].limits = e->limits;
            cfg->secrets[cfg->nsecrets - 1].ad_tag_mode = e->ad_tag_mode;
            memcpy(cfg->secrets[cfg->nsecrets - 1].ad_tag, e->ad_tag, 16);
        }
        if (at >= 0 && e->disabled && !e->has_secret) {
            crypto_wipe(&cfg->secrets[at], sizeof cfg->secrets[at]);
            memmove(&cfg->secrets[at], &cfg->secrets[at + 1],
                    (cfg->nsecrets - (size_t)at - 1) * sizeof cfg->secrets[0]);
            cfg->nsecrets--;
            nfile--;
        }
    }
    return 0;
}

int apistore_config_load(struct config *cfg, const char *path, char *err, size_t errlen,
                         config_warn_fn warn, void *warn_user)
{
    int rc = config_load_file(cfg, path, err, errlen, warn, warn_user);
    if (rc != 0 || !cfg->api.enabled)
        return rc;
    struct apistore st;
    rc = apistore_load(&st, cfg->api.state_file, err, errlen);
    if (rc == 0)
        rc = apistore_merge(&st, cfg, err, errlen, warn, warn_user);
    if (rc == 0)
        rc = config_validate(cfg, err, errlen);
    apistore_cleanup(&st);
    if (rc != 0) {
        config_cleanup(cfg);
        config_init(cfg);
    }
    return rc;
}
