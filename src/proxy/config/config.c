/*
 * config: TOML tree -> struct config, with full validation (see config.h).
 *
 * The loader walks the parsed tree table by table. Each table has a rule list of the keys
 * it accepts; a key outside the list is an error that names the key, its position and the
 * keys that would have been accepted. mtg keys are handled in three ways, as documented in
 * docs/tgproxy.md: mapped onto our fields, accepted and ignored with a warning (features we
 * do not have but whose absence is harmless), or rejected (silently ignoring them would
 * change who can connect or where traffic goes: ad tags).
 *
 * Deprecated mtg spellings (domain-fronting-port, public-ipv4, ...) are collected on the
 * side and applied at the end, so the newer spelling wins wherever it appears in the file.
 *
 * Nothing here does I/O except config_load_file() reading the file; host names are kept
 * as text for the engine to resolve when a connection needs them.
 */
#include "proxy/config/config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/log.h"
#include "core/readfile.h"
#include "core/str.h"
#include "proxy/config/dohurl.h"
#include "proxy/config/toml.h"
#include "proxy/wire/netset.h"

struct loader {
    struct config *cfg;
    const char *name;
    char *err;
    size_t errlen;
    config_warn_fn warn;
    void *warn_user;
    char prefix[96]; /* dotted path of the table being walked; "" at the top */
    bool log_level_set;
    bool debug;
    bool fronting_host_set, fronting_port_set, fronting_pp_set, public_host_set;
    char dep_fronting_host[CONFIG_HOST_MAX]; /* top-level domain-fronting-ip */
    int dep_fronting_port;                   /* top-level domain-fronting-port, -1 unset */
    int dep_fronting_pp;                     /* domain-fronting-proxy-protocol, -1 unset */
    char pub_v4[CONFIG_HOST_MAX], pub_v6[CONFIG_HOST_MAX];
    const struct toml_kv *window_kv;  /* [defense.anti-replay] window, if given */
    const struct toml_kv *skew_kv;    /* tolerate-time-skewness, if given */
    const struct toml_kv *limits_kv;  /* [limits], applied once every secret is known */
    const struct toml_kv *ad_tags_kv; /* [ad-tags], applied once every secret is known */
    bool mp_config_set, mp_config6_set; /* [middle-proxy] proxy-config(-v6) given */
    struct config_limits *lim;        /* the [limits.LABEL] being walked */
    struct config_iplist *iplist;     /* the [defense.blocklist/allowlist] being walked */
};

typedef int (*key_fn)(struct loader *ld, const struct toml_kv *kv);
/* A key whose value is a string: called with it checked (get_str: a string, no NUL). */
typedef int (*str_key_fn)(struct loader *ld, const struct toml_kv *kv, const char *s, size_t n);

/* How a key's value is stored: by a function, or straight into a field of the struct the
   table fills (its base). */
enum rule_kind { R_FN = 0, R_BOOL, R_U32, R_MS, R_SECONDS, R_SIZE, R_STR };
enum rule_base {
    B_CONFIG = 0, /* struct config (ld->cfg) */
    B_LIMITS,     /* the [limits.LABEL] being walked (ld->lim) */
    B_LIST,       /* the [defense.blocklist/allowlist] being walked (ld->iplist) */
};

struct key_rule {
    const char *name;
    key_fn fn; /* R_FN */
    enum rule_kind kind;
    size_t offset;     /* of the bool / uint32_t field in the base struct */
    uint64_t min, max; /* R_U32: value; R_MS: milliseconds; R_SECONDS: seconds; R_SIZE: bytes */
    enum rule_base base;
    str_key_fn sfn; /* R_STR */
};

/* Offset of a field of struct st, refusing to compile unless the field has type's size. */
#define FIELD_IN(st, field, type)                                                                  \
    (offsetof(st, field) + 0 * sizeof(char[sizeof(((st *)0)->field) == sizeof(type) ? 1 : -1]))
#define RULE_IN(st, base, name, kind, type, field, lo, hi)                                         \
    {                                                                                              \
        (name), NULL, (kind), FIELD_IN(st, field, type), (lo), (hi), (base), NULL                  \
    }
#define RULE_FIELD(name, kind, type, field, lo, hi)                                                \
    RULE_IN(struct config, B_CONFIG, name, kind, type, field, lo, hi)
#define FN_KEY(name, fn)                                                                           \
    {                                                                                              \
        (name), (fn), R_FN, 0, 0, 0, B_CONFIG, NULL                                                \
    }
#define STR_KEY(name, fn)                                                                          \
    {                                                                                              \
        (name), NULL, R_STR, 0, 0, 0, B_CONFIG, (fn)                                               \
    }
#define BOOL_KEY(name, field)            RULE_FIELD(name, R_BOOL, bool, field, 0, 1)
#define U32_KEY(name, field, lo, hi)     RULE_FIELD(name, R_U32, uint32_t, field, lo, hi)
#define MS_KEY(name, field, lo, hi)      RULE_FIELD(name, R_MS, uint32_t, field, lo, hi)
#define SECONDS_KEY(name, field, lo, hi) RULE_FIELD(name, R_SECONDS, uint32_t, field, lo, hi)
#define SIZE_KEY(name, field, lo, hi)    RULE_FIELD(name, R_SIZE, uint32_t, field, lo, hi)
/* Fields of a [limits.LABEL] table and of an access list. */
#define LIM_U32_KEY(name, field, lo, hi)                                                           \
    RULE_IN(struct config_limits, B_LIMITS, name, R_U32, uint32_t, field, lo, hi)
#define LIM_SECONDS_KEY(name, field, lo, hi)                                                       \
    RULE_IN(struct config_limits, B_LIMITS, name, R_SECONDS, uint32_t, field, lo, hi)
#define LIST_BOOL_KEY(name, field)                                                                 \
    RULE_IN(struct config_iplist, B_LIST, name, R_BOOL, bool, field, 0, 1)
#define LIST_U32_KEY(name, field, lo, hi)                                                          \
    RULE_IN(struct config_iplist, B_LIST, name, R_U32, uint32_t, field, lo, hi)
#define LIST_SECONDS_KEY(name, field, lo, hi)                                                      \
    RULE_IN(struct config_iplist, B_LIST, name, R_SECONDS, uint32_t, field, lo, hi)

/* ---- messages ---- */

static void set_err(char *err, size_t errlen, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

static void set_err(char *err, size_t errlen, const char *fmt, va_list ap)
{
    if (err && errlen > 0)
        vsnprintf(err, errlen, fmt, ap);
}

static int plain_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int plain_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_err(err, errlen, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

/* plain_err with another return code (-ENOSPC, -ENOMEM). */
static int code_err(int code, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int code_err(int code, char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_err(err, errlen, fmt, ap);
    va_end(ap);
    return code;
}

/* "file:line:col: path.key: <what>" */
static void vformat_at(const struct loader *ld, const struct toml_kv *kv, struct toml_pos at,
                       char *out, size_t cap, const char *fmt, va_list ap)
    __attribute__((format(printf, 6, 0)));

static void vformat_at(const struct loader *ld, const struct toml_kv *kv, struct toml_pos at,
                       char *out, size_t cap, const char *fmt, va_list ap)
{
    int at_len = snprintf(out, cap, "%s:%u:%u: ", ld->name, (unsigned)at.line, (unsigned)at.col);
    if (at_len < 0 || (size_t)at_len >= cap)
        return;
    int n = snprintf(out + at_len, cap - (size_t)at_len, "%s%s%.*s: ", ld->prefix,
                     ld->prefix[0] ? "." : "", (int)(kv->key_len > 64 ? 64 : kv->key_len), kv->key);
    if (n >= 0 && (size_t)(at_len + n) < cap)
        vsnprintf(out + at_len + n, cap - (size_t)(at_len + n), fmt, ap);
    /* keys and the values a message quotes may be a secret pasted in the wrong place, not
       in the log's scrub list yet (a reload logs this before its secrets are known) */
    secret_redact(out + at_len);
}

static int key_err(struct loader *ld, const struct toml_kv *kv, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int key_err(struct loader *ld, const struct toml_kv *kv, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (ld->err && ld->errlen > 0)
        vformat_at(ld, kv, kv->pos, ld->err, ld->errlen, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

/* Like key_err, pointing at a value (an array element, say) rather than the key. */
static int val_err(struct loader *ld, const struct toml_kv *kv, const struct toml_value *v,
                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int val_err(struct loader *ld, const struct toml_kv *kv, const struct toml_value *v,
                   const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (ld->err && ld->errlen > 0)
        vformat_at(ld, kv, v->pos, ld->err, ld->errlen, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

/* The endings of the harmless warnings (config_warning_harmless): an mtg key tgproxy
   ignores, and an old mtg spelling of a key it maps. */
#define IGNORED_TEXT                                                                               \
    ": accepted for mtg compatibility but ignored: tgproxy has no such setting (see "              \
    "docs/tgproxy.md)"
#define DEPRECATED_TEXT ": deprecated mtg spelling: write `"
#define DEPRECATED_END  "` in [domain-fronting] instead"
#define AFTER_SEP(lit)  (&(lit)[2]) /* the text after its leading ": " (warn_key adds one) */

static void warn_key(struct loader *ld, const struct toml_kv *kv, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void warn_key(struct loader *ld, const struct toml_kv *kv, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vformat_at(ld, kv, kv->pos, msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ld->warn)
        ld->warn(ld->warn_user, msg);
    else
        tg__log(NULL, TG__LOG_WARN, "%s", msg);
}

static int type_err(struct loader *ld, const struct toml_kv *kv, const char *want)
{
    return val_err(ld, kv, kv->value, "expected %s, got %s", want, toml_type_name(kv->value->type));
}

/* ---- typed getters ---- */

/* Getters set their outputs before any check so no caller ever reads garbage. */
static int get_bool(struct loader *ld, const struct toml_kv *kv, bool *out)
{
    *out = false;
    if (kv->value->type != TOML_BOOL)
        return type_err(ld, kv, "true or false");
    *out = kv->value->u.boolean;
    return 0;
}

static int get_uint(struct loader *ld, const struct toml_kv *kv, int64_t min, int64_t max,
                    uint32_t *out)
{
    *out = 0;
    if (kv->value->type != TOML_INTEGER)
        return type_err(ld, kv, "an integer");
    int64_t v = kv->value->u.integer;
    if (v < min || v > max)
        return val_err(ld, kv, kv->value, "%lld is out of range, expected %lld..%lld", (long long)v,
                       (long long)min, (long long)max);
    *out = (uint32_t)v;
    return 0;
}

/* A string without embedded NUL (from \u0000), which C consumers would silently cut. */
static int get_str(struct loader *ld, const struct toml_kv *kv, const struct toml_value *v,
                   const char **s, size_t *n)
{
    *s = "";
    *n = 0;
    if (v->type != TOML_STRING)
        return val_err(ld, kv, v, "expected a string, got %s", toml_type_name(v->type));
    if (memchr(v->u.str.ptr, '\0', v->u.str.len))
        return val_err(ld, kv, v, "string contains a NUL character, expected text");
    *s = v->u.str.ptr;
    *n = v->u.str.len;
    return 0;
}

/* A duration string ("10s", "1m") or an integer number of seconds. */
static int get_duration(struct loader *ld, const struct toml_kv *kv, uint64_t min_ms,
                        uint64_t max_ms, uint64_t *out_ms)
{
    const struct toml_value *v = kv->value;
    uint64_t ms = 0;
    if (v->type == TOML_INTEGER) {
        if (v->u.integer < 0 || (uint64_t)v->u.integer > max_ms / 1000)
            return val_err(ld, kv, v, "out of range, expected %llu..%llu seconds",
                           (unsigned long long)(min_ms / 1000),
                           (unsigned long long)(max_ms / 1000));
        ms = (uint64_t)v->u.integer * 1000;
    } else {
        const char *s = NULL;
        size_t n = 0;
        if (v->type != TOML_STRING)
            return type_err(ld, kv, "a duration such as \"10s\" or an integer of seconds");
        if (get_str(ld, kv, v, &s, &n) != 0)
            return -EINVAL;
        if (value_duration_ms(s, n, &ms) != 0)
            return val_err(ld, kv, v,
                           "bad duration, expected a number and a unit such as "
                           "\"500ms\", \"10s\", \"5m\" or \"1h\"");
    }
    if (ms < min_ms || ms > max_ms)
        return val_err(ld, kv, v, "duration out of range, expected %llums..%llums",
                       (unsigned long long)min_ms, (unsigned long long)max_ms);
    *out_ms = ms;
    return 0;
}

static int get_duration32(struct loader *ld, const struct toml_kv *kv, uint64_t min_ms,
                          uint64_t max_ms, uint32_t *out_ms)
{
    uint64_t ms = 0;
    if (get_duration(ld, kv, min_ms, max_ms, &ms) != 0)
        return -EINVAL;
    *out_ms = (uint32_t)ms;
    return 0;
}

/* Whole seconds from a duration (keep-alive, skewness). */
static int get_seconds(struct loader *ld, const struct toml_kv *kv, uint32_t min_s, uint32_t max_s,
                       uint32_t *out_s)
{
    uint64_t ms = 0;
    if (get_duration(ld, kv, (uint64_t)min_s * 1000, (uint64_t)max_s * 1000, &ms) != 0)
        return -EINVAL;
    if (ms % 1000 != 0)
        return val_err(ld, kv, kv->value, "expected a whole number of seconds");
    *out_s = (uint32_t)(ms / 1000);
    return 0;
}

static int get_size(struct loader *ld, const struct toml_kv *kv, uint64_t min, uint64_t max,
                    uint32_t *out)
{
    const struct toml_value *v = kv->value;
    uint64_t n = 0;
    if (v->type == TOML_INTEGER) {
        n = v->u.integer < 0 ? UINT64_MAX : (uint64_t)v->u.integer;
    } else if (v->type == TOML_STRING) {
        const char *s = NULL;
        size_t len = 0;
        if (get_str(ld, kv, v, &s, &len) != 0)
            return -EINVAL;
        if (value_size_bytes(s, len, &n) != 0)
            return val_err(ld, kv, v,
                           "bad size, expected bytes such as 16384, \"16kib\" or "
                           "\"1mib\"");
    } else {
        return type_err(ld, kv, "a size such as \"16kib\" or an integer of bytes");
    }
    if (n < min || n > max)
        return val_err(ld, kv, v, "size out of range, expected %llu..%llu bytes",
                       (unsigned long long)min, (unsigned long long)max);
    *out = (uint32_t)n;
    return 0;
}

static int get_table(struct loader *ld, const struct toml_kv *kv, const struct toml_table **out)
{
    static const struct toml_table empty;
    *out = &empty;
    if (kv->value->type != TOML_TABLE)
        return type_err(ld, kv, "a table");
    *out = kv->value->u.table;
    return 0;
}

/* ---- walking tables ---- */

/* Levenshtein distance of two short keys (longer keys are simply "far"). */
static size_t edit_distance(const char *a, size_t an, const char *b, size_t bn)
{
    size_t row[65];
    if (an > 64 || bn > 64)
        return SIZE_MAX;
    for (size_t j = 0; j <= bn; j++)
        row[j] = j;
    for (size_t i = 1; i <= an; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= bn; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[bn];
}

#define LIST_MAX_RULES 10 /* longer rule lists point to the docs instead */

static int unknown_key(struct loader *ld, const struct toml_kv *kv, const struct key_rule *rules,
                       size_t nrules)
{
    char list[300], hint[96] = "";
    size_t o = 0, best = SIZE_MAX;
    const char *near = NULL;
    for (size_t i = 0; i < nrules; i++) {
        size_t d = edit_distance(kv->key, kv->key_len, rules[i].name, strlen(rules[i].name));
        if (d < best) {
            best = d;
            near = rules[i].name;
        }
        if (nrules <= LIST_MAX_RULES && o < sizeof list)
            o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", i ? ", " : "", rules[i].name);
    }
    if (near && best <= 2)
        snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
    if (nrules > LIST_MAX_RULES)
        snprintf(list, sizeof list, "a key documented in docs/tgproxy.md");
    return key_err(ld, kv, "unknown key%s, expected %s%s", hint,
                   nrules > LIST_MAX_RULES ? "" : "one of: ", list);
}

static int apply_rule(struct loader *ld, const struct key_rule *r, const struct toml_kv *kv)
{
    char *base = r->base == B_LIMITS ? (char *)ld->lim
                 : r->base == B_LIST ? (char *)ld->iplist
                                     : (char *)ld->cfg;
    void *field = base + r->offset;
    switch (r->kind) {
    case R_FN:
        return r->fn(ld, kv);
    case R_BOOL:
        return get_bool(ld, kv, field);
    case R_U32:
        return get_uint(ld, kv, (int64_t)r->min, (int64_t)r->max, field);
    case R_MS:
        return get_duration32(ld, kv, r->min, r->max, field);
    case R_SECONDS:
        return get_seconds(ld, kv, (uint32_t)r->min, (uint32_t)r->max, field);
    case R_SIZE:
        return get_size(ld, kv, r->min, r->max, field);
    case R_STR: {
        const char *s = NULL;
        size_t n = 0;
        return get_str(ld, kv, kv->value, &s, &n) != 0 ? -EINVAL : r->sfn(ld, kv, s, n);
    }
    }
    return -EINVAL;
}

static int walk_table(struct loader *ld, const struct toml_table *t, const struct key_rule *rules,
                      size_t nrules)
{
    int rc = 0;
    for (const struct toml_kv *kv = t->first; kv && rc == 0; kv = kv->next) {
        size_t i = 0;
        while (i < nrules && !(strlen(rules[i].name) == kv->key_len &&
                               memcmp(rules[i].name, kv->key, kv->key_len) == 0))
            i++;
        rc = i < nrules ? apply_rule(ld, &rules[i], kv) : unknown_key(ld, kv, rules, nrules);
    }
    return rc;
}

/* Walk the table held by self, with self's key appended to the message prefix. */
static int walk(struct loader *ld, const struct toml_kv *self, const struct key_rule *rules,
                size_t nrules)
{
    const struct toml_table *t = NULL;
    if (get_table(ld, self, &t) != 0)
        return -EINVAL;
    size_t used = strlen(ld->prefix);
    snprintf(ld->prefix + used, sizeof ld->prefix - used, "%s%.*s", used ? "." : "",
             (int)self->key_len, self->key);
    int rc = walk_table(ld, t, rules, nrules);
    ld->prefix[used] = '\0';
    return rc;
}

#define WALK(ld, kv, rules) walk((ld), (kv), (rules), sizeof(rules) / sizeof((rules)[0]))

/* ---- builders ---- */

static int grow(void **arr, size_t n, size_t elem)
{
    void *p = tg__realloc(*arr, (n + 1) * elem);
    if (!p)
        return -ENOMEM;
    *arr = p;
    memset((char *)p + n * elem, 0, elem);
    return 0;
}

int config_add_listen(struct config *cfg, const char *text, size_t len, char *err, size_t errlen)
{
    struct value_hostport hp;
    int rc = value_hostport_parse(text, len, &hp, err, errlen);
    if (rc != 0)
        return rc;
    if (!hp.resolved)
        return plain_err(err, errlen,
                         "'%s' is a host name, expected an IP address to listen "
                         "on such as 0.0.0.0 or [::]",
                         hp.host);
    if (cfg->nlisten >= CONFIG_MAX_LISTEN)
        return code_err(-ENOSPC, err, errlen, "too many listen addresses, expected at most %d",
                        CONFIG_MAX_LISTEN);
    char text_form[sizeof cfg->listen[0].text];
    value_format_addr(&hp.addr, text_form, sizeof text_form);
    for (size_t i = 0; i < cfg->nlisten; i++)
        if (strcmp(cfg->listen[i].text, text_form) == 0)
            return plain_err(err, errlen, "%s is listed twice, expected each address once",
                             text_form);
    if (grow((void **)&cfg->listen, cfg->nlisten, sizeof cfg->listen[0]) != 0)
        return code_err(-ENOMEM, err, errlen, "out of memory");
    struct config_listen *l = &cfg->listen[cfg->nlisten++];
    l->addr = hp.addr;
    l->addr_len = hp.addr_len;
    memcpy(l->text, text_form, sizeof l->text);
    return 0;
}

static bool valid_label(const char *s, size_t n)
{
    if (n == 0 || n >= CONFIG_LABEL_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return false;
    }
    return true;
}

static int add_secret(struct config *cfg, const char *label, const struct secret *s, char *err,
                      size_t errlen, bool check_unique);

int config_add_secret(struct config *cfg, const char *label, const struct secret *s, char *err,
                      size_t errlen)
{
    return add_secret(cfg, label, s, err, errlen, true);
}

int config_append_secret(struct config *cfg, const char *label, const struct secret *s, char *err,
                         size_t errlen)
{
    return add_secret(cfg, label, s, err, errlen, false);
}

static int add_secret(struct config *cfg, const char *label, const struct secret *s, char *err,
                      size_t errlen, bool check_unique)
{
    size_t n = strlen(label);
    if (!valid_label(label, n))
        return plain_err(err, errlen,
                         "bad label, expected 1..%d of letters, digits, '_', "
                         "'-', '.'",
                         CONFIG_LABEL_MAX - 1);
    if (cfg->nsecrets >= CONFIG_MAX_SECRETS)
        return code_err(-ENOSPC, err, errlen, "too many secrets, expected at most %d",
                        CONFIG_MAX_SECRETS);
    for (size_t i = 0; check_unique && i < cfg->nsecrets; i++)
        if (strcmp(cfg->secrets[i].label, label) == 0)
            return plain_err(err, errlen,
                             "label '%s' is used twice, expected unique labels"
                             " (mtg's top-level 'secret' is labelled 'default')",
                             label);
    if (grow((void **)&cfg->secrets, cfg->nsecrets, sizeof cfg->secrets[0]) != 0)
        return code_err(-ENOMEM, err, errlen, "out of memory");
    struct config_secret *cs = &cfg->secrets[cfg->nsecrets++];
    memcpy(cs->label, label, n + 1);
    cs->secret = *s;
    return 0;
}

/* ---- top-level keys ---- */

static int add_listen_value(struct loader *ld, const struct toml_kv *kv, const struct toml_value *v)
{
    char why[256];
    const char *s = NULL;
    size_t n = 0;
    if (get_str(ld, kv, v, &s, &n) != 0)
        return -EINVAL;
    int rc = config_add_listen(ld->cfg, s, n, why, sizeof why);
    if (rc == -ENOMEM)
        return rc;
    return rc == 0 ? 0 : val_err(ld, kv, v, "%s", why);
}

static int k_bind_to(struct loader *ld, const struct toml_kv *kv)
{
    const struct toml_value *v = kv->value;
    if (v->type == TOML_STRING)
        return add_listen_value(ld, kv, v);
    if (v->type != TOML_ARRAY)
        return type_err(ld, kv, "\"IP:PORT\" or an array of them");
    if (v->u.array.n == 0)
        return val_err(ld, kv, v, "empty array, expected at least one \"IP:PORT\"");
    for (const struct toml_value *e = v->u.array.first; e; e = e->next) {
        int rc = add_listen_value(ld, kv, e);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Parse one secret value and add it under label. Errors never quote the value. */
static int parse_secret_text(struct loader *ld, const struct toml_kv *kv, struct secret *out)
{
    char why[256];
    const char *s = NULL;
    size_t n = 0;
    if (get_str(ld, kv, kv->value, &s, &n) != 0)
        return -EINVAL;
    if (secret_parse(s, n, out, why, sizeof why) != 0)
        return val_err(ld, kv, kv->value,
                       "bad secret (%s), expected hex or base64 of a "
                       "classic, dd or ee secret, e.g. from 'tgproxy generate-secret'",
                       why);
    return 0;
}

static const struct key_rule secret_table_rules[] = {
    FN_KEY("key", NULL),
    FN_KEY("domain", NULL),
};

static int secret_table_fields(struct loader *ld, const struct toml_table *t,
                               const struct toml_kv *key, const struct toml_kv *dom,
                               struct secret *out)
{
    for (const struct toml_kv *kv = t->first; kv; kv = kv->next)
        if (kv != key && kv != dom)
            return unknown_key(ld, kv, secret_table_rules, 2);
    if (parse_secret_text(ld, key, out) != 0)
        return -EINVAL;
    if (out->kind != SECRET_CLASSIC)
        return val_err(ld, key, key->value,
                       "expected the 16-byte key alone (32 hex digits), "
                       "without a dd or ee prefix");
    if (!dom)
        return 0;
    const char *d = NULL;
    size_t dn = 0;
    if (get_str(ld, dom, dom->value, &d, &dn) != 0)
        return -EINVAL;
    const char *problem = secret_domain_problem(d, dn);
    if (problem)
        return val_err(ld, dom, dom->value, "%s, expected a DNS name such as www.example.com",
                       problem);
    out->kind = SECRET_EE;
    memcpy(out->domain, d, dn + 1);
    out->domain_len = (uint8_t)dn;
    return 0;
}

/* { key = "<the 16-byte key>", domain = "example.com" }: the brief's "key and domain
 * separately" (section 1.2). With a domain the secret is ee, without it classic. */
static int secret_from_table(struct loader *ld, const struct toml_kv *self, struct secret *out)
{
    const struct toml_table *t = self->value->u.table;
    const struct toml_kv *key = toml_table_find(t, "key", 3);
    const struct toml_kv *dom = toml_table_find(t, "domain", 6);
    if (!key)
        return val_err(ld, self, self->value,
                       "no key, expected { key = \"32 hex digits\", "
                       "domain = \"www.example.com\" }");
    size_t used = strlen(ld->prefix);
    snprintf(ld->prefix + used, sizeof ld->prefix - used, "%s%.*s", used ? "." : "",
             (int)self->key_len, self->key);
    int rc = secret_table_fields(ld, t, key, dom, out);
    ld->prefix[used] = '\0';
    return rc;
}

/* Parse one secret (text or table) and add it under label. Errors never quote it. */
static int add_secret_value(struct loader *ld, const struct toml_kv *kv, const char *label)
{
    char why[256];
    struct secret sec;
    int rc;
    memset(&sec, 0, sizeof sec);
    if (kv->value->type == TOML_TABLE)
        rc = secret_from_table(ld, kv, &sec);
    else
        rc = parse_secret_text(ld, kv, &sec);
    if (rc == 0) {
        rc = config_add_secret(ld->cfg, label, &sec, why, sizeof why);
        if (rc != 0 && rc != -ENOMEM)
            rc = key_err(ld, kv, "%s", why);
    }
    memset(&sec, 0, sizeof sec);
    return rc;
}

static int k_secret(struct loader *ld, const struct toml_kv *kv)
{
    return add_secret_value(ld, kv, "default");
}

static int k_secrets(struct loader *ld, const struct toml_kv *self)
{
    const struct toml_table *t = NULL;
    if (get_table(ld, self, &t) != 0)
        return -EINVAL;
    size_t saved = strlen(ld->prefix);
    snprintf(ld->prefix + saved, sizeof ld->prefix - saved, "%ssecrets", saved ? "." : "");
    int rc = 0;
    for (const struct toml_kv *kv = t->first; kv && rc == 0; kv = kv->next) {
        if (!valid_label(kv->key, kv->key_len))
            rc = key_err(ld, kv,
                         "bad label, expected 1..%d of letters, digits, '_', '-', "
                         "'.'",
                         CONFIG_LABEL_MAX - 1);
        else if (secret_lookalike(kv->key, kv->key_len))
            rc = key_err(ld, kv,
                         "this label looks like a secret (labels are shown in logs, metrics "
                         "and links), expected a name such as \"alice\" = \"<the secret>\"");
        else
            rc = add_secret_value(ld, kv, kv->key);
    }
    ld->prefix[saved] = '\0';
    return rc;
}

static int k_public_host(struct loader *ld, const struct toml_kv *kv, const char *s, size_t n)
{
    char why[256];
    struct value_hostport hp;
    if (value_host_parse(&hp, s, n, why, sizeof why) != 0)
        return val_err(ld, kv, kv->value, "%s", why);
    memcpy(ld->cfg->public_host, hp.host, sizeof hp.host);
    ld->public_host_set = true;
    return 0;
}

static int k_public_port(struct loader *ld, const struct toml_kv *kv)
{
    uint32_t v = 0;
    if (get_uint(ld, kv, 1, 65535, &v) != 0)
        return -EINVAL;
    ld->cfg->public_port = (uint16_t)v;
    return 0;
}

/* mtg public-ipv4 / public-ipv6 (and [network.public-ip] ipv4 / ipv6): "" means unset. */
static int public_ip(struct loader *ld, const struct toml_kv *kv, int family, char *out)
{
    const char *s = NULL;
    size_t n = 0;
    struct sockaddr_storage sa;
    socklen_t len;
    if (get_str(ld, kv, kv->value, &s, &n) != 0)
        return -EINVAL;
    if (n == 0)
        return 0;
    if (!value_parse_ip(s, n, &sa, &len) || sa.ss_family != family)
        return val_err(ld, kv, kv->value, "expected an %s address",
                       family == AF_INET ? "IPv4" : "IPv6");
    memcpy(out, s, n + 1);
    return 0;
}

static int k_public_ipv4(struct loader *ld, const struct toml_kv *kv)
{
    return public_ip(ld, kv, AF_INET, ld->pub_v4);
}

static int k_public_ipv6(struct loader *ld, const struct toml_kv *kv)
{
    return public_ip(ld, kv, AF_INET6, ld->pub_v6);
}

static int k_prefer_ip(struct loader *ld, const struct toml_kv *kv, const char *s, size_t n)
{
    for (int p = CONFIG_PREFER_IPV4; p <= CONFIG_ONLY_IPV6; p++) {
        if (strcmp(s, config_prefer_ip_name((enum config_prefer_ip)p)) == 0) {
            ld->cfg->prefer_ip = (enum config_prefer_ip)p;
            return 0;
        }
    }
    return val_err(ld, kv, kv->value,
                   "unknown value, expected \"prefer-ipv4\", "
                   "\"prefer-ipv6\", \"only-ipv4\" or \"only-ipv6\"");
}

static int k_log_level(struct loader *ld, const struct toml_kv *kv, const char *s, size_t n)
{
    int level = tg__log_level_parse(s);
    if (level < 0)
        return val_err(ld, kv, kv->value,
                       "unknown level, expected \"trace\", \"debug\", "
                       "\"info\", \"warn\", \"error\" or \"off\"");
    ld->cfg->log_level = level;
    ld->log_level_set = true;
    return 0;
}

static int k_debug(struct loader *ld, const struct toml_kv *kv)
{
    return get_bool(ld, kv, &ld->debug);
}

static int k_dep_fronting_port(struct loader *ld, const struct toml_kv *kv)
{
    uint32_t v = 0;
    if (get_uint(ld, kv, 1, 65535, &v) != 0)
        return -EINVAL;
    ld->dep_fronting_port = (int)v;
    warn_key(ld, kv, "%s", AFTER_SEP(DEPRECATED_TEXT "port" DEPRECATED_END));
    return 0;
}

static int k_dep_fronting_ip(struct loader *ld, const struct toml_kv *kv, const char *s, size_t n)
{
    struct sockaddr_storage sa;
    socklen_t len;
    if (!value_parse_ip(s, n, &sa, &len))
        return val_err(ld, kv, kv->value, "expected an IPv4 or IPv6 address");
    memcpy(ld->dep_fronting_host, s, n + 1);
    warn_key(ld, kv, "%s", AFTER_SEP(DEPRECATED_TEXT "ip" DEPRECATED_END));
    return 0;
}

static int k_dep_fronting_pp(struct loader *ld, const struct toml_kv *kv)
{
    bool b = false;
    if (get_bool(ld, kv, &b) != 0)
        return -EINVAL;
    ld->dep_fronting_pp = b;
    warn_key(ld, kv, "%s", AFTER_SEP(DEPRECATED_TEXT "proxy-protocol" DEPRECATED_END));
    return 0;
}

/* mtg keys whose absence is harmless: accepted, ignored, reported. */
static int k_ignore(struct loader *ld, const struct toml_kv *kv)
{
    warn_key(ld, kv, "%s", AFTER_SEP(IGNORED_TEXT));
    return 0;
}

/* An ad tag: 32 hex digits (as @MTProxybot gives it), or "" for none (*set = false). */
static int ad_tag_value(struct loader *ld, const struct toml_kv *kv, uint8_t out[16], bool *set)
{
    const char *s = NULL;
    size_t n = 0;
    if (get_str(ld, kv, kv->value, &s, &n) != 0)
        return -EINVAL;
    *set = n != 0;
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') ||
              (s[i] >= 'A' && s[i] <= 'F')))
            return val_err(ld, kv, kv->value,
                           "expected 32 hex digits (the tag @MTProxybot gives), or \"\" for none");
    if (n != 32)
        return val_err(ld, kv, kv->value, "%zu hex digits, expected 32 (16 bytes)", n);
    for (size_t i = 0; i < 16; i++) {
        char b[3] = {s[2 * i], s[2 * i + 1], 0};
        out[i] = (uint8_t)strtoul(b, NULL, 16);
    }
    return 0;
}

static int k_ad_tag(struct loader *ld, const struct toml_kv *kv)
{
    return ad_tag_value(ld, kv, ld->cfg->ad_tag, &ld->cfg->has_ad_tag);
}

static int k_ad_tags(struct loader *ld, const struct toml_kv *kv)
{
    const struct toml_table *t = NULL;
    if (get_table(ld, kv, &t) != 0)
        return -EINVAL;
    ld->ad_tags_kv = kv;
    return 0;
}

/* [ad-tags] label = "tag" | "": each label's own tag, or none (direct). */
static int apply_ad_tags(struct loader *ld)
{
    const struct toml_table *t = NULL;
    if (!ld->ad_tags_kv || get_table(ld, ld->ad_tags_kv, &t) != 0)
        return 0;
    snprintf(ld->prefix, sizeof ld->prefix, "ad-tags");
    int rc = 0;
    for (const struct toml_kv *kv = t->first; kv && rc == 0; kv = kv->next) {
        struct config_secret *cs = NULL;
        for (size_t i = 0; i < ld->cfg->nsecrets && !cs; i++)
            if (strlen(ld->cfg->secrets[i].label) == kv->key_len &&
                memcmp(ld->cfg->secrets[i].label, kv->key, kv->key_len) == 0)
                cs = &ld->cfg->secrets[i];
        if (!cs) {
            rc = key_err(ld, kv, "no secret has this label, expected one of [secrets]");
            break;
        }
        bool set = false;
        rc = ad_tag_value(ld, kv, cs->ad_tag, &set);
        cs->ad_tag_mode = set ? 1 : -1;
    }
    ld->prefix[0] = '\0';
    return rc;
}

const uint8_t *config_ad_tag(const struct config *cfg, size_t i)
{
    if (i >= cfg->nsecrets)
        return NULL;
    const struct config_secret *cs = &cfg->secrets[i];
    if (cs->ad_tag_mode > 0)
        return cs->ad_tag;
    if (cs->ad_tag_mode == 0 && cfg->has_ad_tag)
        return cfg->ad_tag;
    return NULL;
}

/* [middle-proxy] sources: an https:// URL (downloaded by services/mpsource.c, never at load)
   or a local file path; allow_empty: "" turns the source off (proxy-config-v6). */
static int mp_source(struct loader *ld, const struct toml_kv *kv, char *out, bool allow_empty)
{
    const char *s = NULL;
    size_t n = 0;
    if (get_str(ld, kv, kv->value, &s, &n) != 0)
        return -EINVAL;
    if ((n == 0 && !allow_empty) || n >= CONFIG_SOURCE_MAX)
        return val_err(ld, kv, kv->value, "expected an https:// URL or a file path of 1..%d bytes",
                       CONFIG_SOURCE_MAX - 1);
    if (n > 7 && memcmp(s, "http://", 7) == 0)
        return val_err(ld, kv, kv->value,
                       "expected https:// (the documents decide where clients' traffic goes; "
                       "plain HTTP could be rewritten on the way)");
    if (strstr(s, "://") && !(n > 8 && memcmp(s, "https://", 8) == 0))
        return val_err(ld, kv, kv->value, "expected an https:// URL or a file path");
    memcpy(out, s, n);
    out[n] = '\0';
    return 0;
}

static int k_mp_secret(struct loader *ld, const struct toml_kv *kv)
{
    return mp_source(ld, kv, ld->cfg->mp.secret_path, false);
}

static int k_mp_config(struct loader *ld, const struct toml_kv *kv)
{
    ld->mp_config_set = true;
    return mp_source(ld, kv, ld->cfg->mp.config_path, false);
}

static int k_mp_config6(struct loader *ld, const struct toml_kv *kv)
{
    ld->mp_config6_set = true;
    return mp_source(ld, kv, ld->cfg->mp.config6_path, true);
}

static int k_mp_ip_url(struct loader *ld, const struct toml_kv *kv)
{
    int rc = mp_source(ld, kv, ld->cfg->mp.ip_url, true);
    if (rc == 0 && ld->cfg->mp.ip_url[0] && !config_is_url(ld->cfg->mp.ip_url))
        return val_err(ld, kv, kv->value, "expected an https:// URL (or \"\": off)");
    return rc;
}

static int k_mp_state_dir(struct loader *ld, const struct toml_kv *kv, const char *s, size_t n)
{
    if (n == 0 || n >= CONFIG_FILE_MAX - 32 || s[0] != '/')
        return val_err(ld, kv, kv->value, "expected an absolute directory path of 1..%d bytes",
                       CONFIG_FILE_MAX - 33);
    memcpy(ld->cfg->mp.state_dir, s, n + 1);
    return 0;
}

static const struct key_rule mp_rules[] = {
    FN_KEY("proxy-secret", k_mp_secret),
    FN_KEY("proxy-config", k_mp_config),
    FN_KEY("proxy-config-v6", k_mp_config6),
    FN_KEY("public-ip-url", k_mp_ip_url),
    STR_KEY("state-dir", k_mp_state_dir),
    SECONDS_KEY("update-each", mp.update_s, 1, 30 * 86400),
    U32_KEY("connections", mp.connections, 1, 16),
    BOOL_KEY("fallback-direct", mp.fallback_direct),
    SIZE_KEY("client-buffer", mp.client_buffer, 64 << 10, 64u << 20),
    SIZE_KEY("buffer-total", mp.buffer_total, 1u << 20, 4095u << 20),
};

static int k_middle_proxy(struct loader *ld, const struct toml_kv *kv)
{
    ld->cfg->mp.enabled = true;
    return WALK(ld, kv, mp_rules);
}

bool config_is_url(const char *source)
{
    return strncmp(source, "https://", 8) == 0;
}

static int read_file(const char *path, char **out, size_t *len, mode_t *mode, char *err,
                     size_t errlen);

/* One proxy list given as a file: read and parsed now (a bad one fails the load). */
static int load_mp_list(struct loader *ld, const char *key, const char *path, struct mpconf *out)
{
    if (!path[0] || config_is_url(path))
        return 0;
    char *text = NULL, why[256];
    size_t len = 0;
    mode_t mode;
    int rc = read_file(path, &text, &len, &mode, why, sizeof why);
    if (rc != 0)
        return code_err(rc, ld->err, ld->errlen, "%s: middle-proxy.%s: %s", ld->name, key, why);
    rc = mpconf_parse(text, len, out, why, sizeof why);
    tg__free(text);
    if (rc != 0)
        return plain_err(ld->err, ld->errlen, "%s: middle-proxy.%s: %s: %s", ld->name, key, path,
                         why);
    return 0;
}

/* Tags need the middle-proxy table. Sources that are files are read now (a bad file fails
   the load, not the first client); URLs are left to services/mpsource.c (loading never
   touches the network). */
static int load_midproxy(struct loader *ld)
{
    struct config *cfg = ld->cfg;
    bool tags = false;
    for (size_t i = 0; i < cfg->nsecrets; i++)
        tags |= config_ad_tag(cfg, i) != NULL;
    if (!cfg->mp.enabled) {
        if (tags)
            return plain_err(ld->err, ld->errlen,
                             "%s: ad tags need middle-proxy mode, expected a [middle-proxy] table "
                             "(docs/tgproxy.md)",
                             ld->name);
        return 0;
    }
    if (!cfg->mp.secret_path[0])
        tg__strlcpy(cfg->mp.secret_path, CONFIG_MP_SECRET_URL, sizeof cfg->mp.secret_path);
    if (!ld->mp_config_set)
        tg__strlcpy(cfg->mp.config_path, CONFIG_MP_CONFIG_URL, sizeof cfg->mp.config_path);
    if (!ld->mp_config6_set && strcmp(cfg->mp.config_path, CONFIG_MP_CONFIG_URL) == 0)
        tg__strlcpy(cfg->mp.config6_path, CONFIG_MP_CONFIG6_URL, sizeof cfg->mp.config6_path);
    if (!cfg->mp.state_dir[0]) {
        const char *sd = getenv("STATE_DIRECTORY"); /* systemd's StateDirectory= */
        if (sd && sd[0] == '/' && !strchr(sd, ':') && strlen(sd) < CONFIG_FILE_MAX - 32)
            tg__strlcpy(cfg->mp.state_dir, sd, sizeof cfg->mp.state_dir);
        else
            tg__strlcpy(cfg->mp.state_dir, "/var/lib/tgproxy", sizeof cfg->mp.state_dir);
    }
    if (!config_is_url(cfg->mp.secret_path)) {
        char *text = NULL, why[256];
        size_t len = 0;
        mode_t mode;
        int rc = read_file(cfg->mp.secret_path, &text, &len, &mode, why, sizeof why);
        if (rc != 0)
            return code_err(rc, ld->err, ld->errlen, "%s: middle-proxy.proxy-secret: %s",
                            ld->name, why);
        if (len < 32 || len > sizeof cfg->mp.secret) {
            memset(text, 0, len);
            tg__free(text);
            return plain_err(ld->err, ld->errlen,
                             "%s: middle-proxy.proxy-secret: %s: %zu bytes, expected 32..256 "
                             "(Telegram's file is 128 bytes, binary)",
                             ld->name, cfg->mp.secret_path, len);
        }
        memcpy(cfg->mp.secret, text, len);
        cfg->mp.secret_len = len;
        memset(text, 0, len);
        tg__free(text);
    }
    int rc = load_mp_list(ld, "proxy-config", cfg->mp.config_path, &cfg->mp.conf);
    if (rc == 0)
        rc = load_mp_list(ld, "proxy-config-v6", cfg->mp.config6_path, &cfg->mp.conf6);
    return rc;
}

/* ---- [domain-fronting] ---- */

static int fronting_host(struct loader *ld, const struct toml_kv *kv, bool require_ip)
{
    char why[256];
    const char *s = NULL;
    size_t n = 0;
    struct value_hostport hp;
    if (get_str(ld, kv, kv->value, &s, &n) != 0)
        return -EINVAL;
    if (ld->fronting_host_set)
        return key_err(ld, kv, "both host and ip are set, expected only one of them");
    if (value_host_parse(&hp, s, n, why, sizeof why) != 0)
        return val_err(ld, kv, kv->value, "%s", why);
    if (require_ip && !hp.resolved)
        return val_err(ld, kv, kv->value,
                       "expected an IPv4 or IPv6 address (use 'host' for "
                       "names)");
    memcpy(ld->cfg->fronting.host, hp.host, sizeof hp.host);
    ld->cfg->fronting.resolved = hp.resolved;
    ld->cfg->fronting.addr = hp.addr;
    ld->cfg->fronting.addr_len = hp.addr_len;
    ld->fronting_host_set = true;
    return 0;
}

static int k_fr_host(struct loader *ld, const struct toml_kv *kv)
{
    return fronting_host(ld, kv, false);
}

static int k_fr_ip(struct loader *ld, const struct toml_kv *kv)
{
    return fronting_host(ld, kv, true);
}

static int k_fr_port(struct loader *ld, const struct toml_kv *kv)
{
    uint32_t v = 0;
    if (get_uint(ld, kv, 1, 65535, &v) != 0)
        return -EINVAL;
    ld->cfg->fronting.port = (uint16_t)v;
    ld->fronting_port_set = true;
    return 0;
}

static int k_fr_pp(struct loader *ld, const struct toml_kv *kv)
{
    ld->fronting_pp_set = true;
    return get_bool(ld, kv, &ld->cfg->fronting.proxy_protocol);
}

static const struct key_rule fronting_rules[] = {
    FN_KEY("host", k_fr_host),
    FN_KEY("ip", k_fr_ip),
    FN_KEY("port", k_fr_port),
    FN_KEY("proxy-protocol", k_fr_pp),
};

static int k_fronting(struct loader *ld, const struct toml_kv *kv)
{
    return WALK(ld, kv, fronting_rules);
}

/* ---- [network] ---- */

static const struct key_rule timeout_rules[] = {
    MS_KEY("tcp", timeout.tcp_ms, 100, 600000),
    MS_KEY("idle", timeout.idle_ms, 1000, 86400000),
    MS_KEY("handshake", timeout.handshake_ms, 100, 600000),
    MS_KEY("fronting", timeout.fronting_ms, 100, 600000),
    MS_KEY("http", timeout.http_ms, 100, 600000),
};

static int k_ka_disabled(struct loader *ld, const struct toml_kv *kv)
{
    bool disabled = false;
    if (get_bool(ld, kv, &disabled) != 0)
        return -EINVAL;
    ld->cfg->keepalive.enabled = !disabled;
    return 0;
}

static const struct key_rule keepalive_rules[] = {
    FN_KEY("disabled", k_ka_disabled),
    SECONDS_KEY("idle", keepalive.idle_s, 1, 7200),
    SECONDS_KEY("interval", keepalive.interval_s, 1, 7200),
    U32_KEY("count", keepalive.count, 1, 100),
};

static const struct key_rule public_ip_rules[] = {
    FN_KEY("ipv4", k_public_ipv4),
    FN_KEY("ipv6", k_public_ipv6),
};

/* One socks5:// URL of [network] proxies into cfg->proxies. */
static int add_proxy(struct loader *ld, const struct toml_kv *kv, const struct toml_value *e,
                     const char *s, size_t n)
{
    struct config *cfg = ld->cfg;
    if (cfg->nproxies >= CONFIG_MAX_PROXIES)
        return val_err(ld, kv, e, "too many upstream proxies, expected at most %d",
                       CONFIG_MAX_PROXIES);
    struct socks5_upstream up;
    char why[192];
    if (socks5_url_parse(s, n, &up, why, sizeof why) != 0)
        return val_err(ld, kv, e, "%s", why); /* why never quotes the user info */
    if (!up.addr.resolved) {
        memset(&up, 0, sizeof up);
        return val_err(ld, kv, e,
                       "the upstream proxy must be an IP address (host names are not "
                       "resolved for upstreams), expected socks5://[user:pass@]IP:PORT");
    }
    if (grow((void **)&cfg->proxies, cfg->nproxies, sizeof cfg->proxies[0]) != 0) {
        memset(&up, 0, sizeof up);
        return -ENOMEM;
    }
    cfg->proxies[cfg->nproxies++] = up;
    memset(&up, 0, sizeof up);
    return 0;
}

/* [network] dns: a DNS-over-HTTPS URL ("" = the system resolver). */
static int k_dns(struct loader *ld, const struct toml_kv *kv, const char *s, size_t n)
{
    struct config *cfg = ld->cfg;
    char why[256];
    if (n && doh_url_parse(s, n, cfg->dns.url, cfg->dns.host, &cfg->dns.port, why, sizeof why))
        return val_err(ld, kv, kv->value, "%s", why); /* why never quotes user info */
    return 0;
}

/* [network] doh-ip: the DoH server's address (mtg's older key; "" = unset). */
static int k_doh_ip(struct loader *ld, const struct toml_kv *kv, const char *s, size_t n)
{
    char why[128];
    if (n && doh_ip_parse(s, n, ld->cfg->dns.ip, why, sizeof why) != 0)
        return val_err(ld, kv, kv->value, "%s", why);
    return 0;
}

/* [network] proxies: mtg's list of socks5:// URLs; "" entries are skipped, as mtg does. */
static int k_proxies(struct loader *ld, const struct toml_kv *kv)
{
    const struct toml_value *v = kv->value;
    if (v->type != TOML_ARRAY)
        return type_err(ld, kv, "an array");
    for (const struct toml_value *e = v->u.array.first; e; e = e->next) {
        const char *s = NULL;
        size_t n = 0;
        if (get_str(ld, kv, e, &s, &n) != 0)
            return -EINVAL;
        int rc = n > 0 ? add_proxy(ld, kv, e, s, n) : 0;
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int k_timeout(struct loader *ld, const struct toml_kv *kv)
{
    return WALK(ld, kv, timeout_rules);
}

static int k_keepalive(struct loader *ld, const struct toml_kv *kv)
{
    return WALK(ld, kv, keepalive_rules);
}

static int k_public_ip_table(struct loader *ld, const struct toml_kv *kv)
{
    return WALK(ld, kv, public_ip_rules);
}

static const struct key_rule network_rules[] = {
    FN_KEY("timeout", k_timeout),
    FN_KEY("keep-alive", k_keepalive),
    FN_KEY("public-ip", k_public_ip_table),
    FN_KEY("proxies", k_proxies),
    STR_KEY("doh-ip", k_doh_ip),
    STR_KEY("dns", k_dns),
};

static int k_network(struct loader *ld, const struct toml_kv *kv)
{
    return WALK(ld, kv, network_rules);
}

/* ---- [defense] and [stats] ---- */

static int k_window(struct loader *ld, const struct toml_kv *kv)
{
    ld->window_kv = kv;
    return get_seconds(ld, kv, 10, 86400, &ld->cfg->antireplay.window_s);
}

static const struct key_rule antireplay_rules[] = {
    BOOL_KEY("enabled", antireplay.enabled),
    U32_KEY("max-entries", antireplay.max_entries, 1024, 64 << 20),
    FN_KEY("window", k_window),
    FN_KEY("max-size", k_ignore),
    FN_KEY("error-rate", k_ignore),
};

static int k_antireplay(struct loader *ld, const struct toml_kv *kv)
{
    return WALK(ld, kv, antireplay_rules);
}

/* One source of ld->iplist: a path, or (from urls) an https:// URL. */
static int add_source(struct loader *ld, const struct toml_kv *kv, const struct toml_value *e,
                      bool from_urls)
{
    const char *s = NULL;
    size_t n = 0;
    if (get_str(ld, kv, e, &s, &n) != 0)
        return -EINVAL;
    struct config_iplist *l = ld->iplist;
    bool url = from_urls && n >= 8 && strncasecmp(s, "https://", 8) == 0;
    if (from_urls && n >= 7 && strncasecmp(s, "http://", 7) == 0)
        return val_err(ld, kv, e,
                       "plain http:// lists could be changed in transit, expected an "
                       "https:// URL or a local file path");
    if (n == 0 || n >= CONFIG_SOURCE_MAX)
        return val_err(ld, kv, e, "expected a %s of 1..%d bytes", url ? "URL" : "file path",
                       CONFIG_SOURCE_MAX - 1);
    if (l->nsources >= CONFIG_MAX_SOURCES)
        return val_err(ld, kv, e, "too many lists, expected at most %d files and urls",
                       CONFIG_MAX_SOURCES);
    if (grow((void **)&l->sources, l->nsources, sizeof l->sources[0]) != 0)
        return -ENOMEM;
    l->sources[l->nsources].is_url = url;
    memcpy(l->sources[l->nsources].text, s, n);
    l->sources[l->nsources++].text[n] = '\0';
    return 0;
}

static int iplist_sources(struct loader *ld, const struct toml_kv *kv, bool from_urls)
{
    if (kv->value->type != TOML_ARRAY)
        return type_err(ld, kv, "an array of strings");
    int rc = 0;
    for (const struct toml_value *e = kv->value->u.array.first; e && rc == 0; e = e->next)
        rc = add_source(ld, kv, e, from_urls);
    return rc;
}

/* urls: mtg's list, where an entry that is not an URL is a local file (as mtg reads it). */
static int k_iplist_urls(struct loader *ld, const struct toml_kv *kv)
{
    return iplist_sources(ld, kv, true);
}

static int k_iplist_files(struct loader *ld, const struct toml_kv *kv)
{
    return iplist_sources(ld, kv, false);
}

static const struct key_rule iplist_rules[] = {
    LIST_BOOL_KEY("enabled", enabled),
    FN_KEY("files", k_iplist_files),
    FN_KEY("urls", k_iplist_urls),
    LIST_U32_KEY("download-concurrency", download_concurrency, 1, 64),
    LIST_SECONDS_KEY("update-each", update_each_s, 1, 30 * 86400),
};

/* [defense.blocklist] / [defense.allowlist]: an enabled list needs something to read. */
static int iplist_table(struct loader *ld, const struct toml_kv *kv, struct config_iplist *l)
{
    ld->iplist = l;
    int rc = WALK(ld, kv, iplist_rules);
    if (rc == 0 && l->enabled && l->nsources == 0)
        return key_err(ld, kv,
                       "enabled with no lists, expected files = [\"PATH\", ...] and/or "
                       "urls = [\"https://...\", ...]");
    return rc;
}

static int k_blocklist(struct loader *ld, const struct toml_kv *kv)
{
    return iplist_table(ld, kv, &ld->cfg->blocklist);
}

static int k_allowlist(struct loader *ld, const struct toml_kv *kv)
{
    return iplist_table(ld, kv, &ld->cfg->allowlist);
}

/* One url of [defense.doppelganger]: https only (the point is the site's TLS records),
   printable ASCII without spaces, shorter than CONFIG_DOPPEL_ULEN. */
static int add_doppel_url(struct loader *ld, const struct toml_kv *kv, const struct toml_value *e)
{
    const char *s = NULL;
    size_t n = 0;
    if (get_str(ld, kv, e, &s, &n) != 0)
        return -EINVAL;
    if (ld->cfg->doppel.nurls >= CONFIG_DOPPEL_URLS)
        return val_err(ld, kv, e, "too many urls, expected at most %d", CONFIG_DOPPEL_URLS);
    bool ok = n > 8 && n < CONFIG_DOPPEL_ULEN && memcmp(s, "https://", 8) == 0;
    for (size_t i = 0; ok && i < n; i++)
        ok = s[i] > 0x20 && s[i] < 0x7f;
    if (!ok)
        return val_err(ld, kv, e,
                       "expected an https:// URL of at most %d printable characters without "
                       "spaces",
                       CONFIG_DOPPEL_ULEN - 1);
    memcpy(ld->cfg->doppel.urls[ld->cfg->doppel.nurls], s, n);
    ld->cfg->doppel.urls[ld->cfg->doppel.nurls++][n] = '\0';
    return 0;
}

static int k_doppel_urls(struct loader *ld, const struct toml_kv *kv)
{
    if (kv->value->type != TOML_ARRAY)
        return type_err(ld, kv, "an array");
    for (const struct toml_value *e = kv->value->u.array.first; e; e = e->next)
        if (add_doppel_url(ld, kv, e) != 0)
            return -EINVAL;
    return 0;
}

static const struct key_rule doppel_rules[] = {
    BOOL_KEY("enabled", doppel.enabled),
    FN_KEY("urls", k_doppel_urls),
    U32_KEY("repeats-per-raid", doppel.repeats, 1, 1000),
    SECONDS_KEY("raid-each", doppel.raid_s, 1, 30 * 86400),
    BOOL_KEY("drs", doppel.drs),
    MS_KEY("max-delay", doppel.delay_ms, 1, 1000),
};

/* The table turns shaping on (as mtg, which shapes whenever it is configured). */
static int k_doppel(struct loader *ld, const struct toml_kv *kv)
{
    ld->cfg->doppel.enabled = true;
    int rc = WALK(ld, kv, doppel_rules);
    /* drs turns dynamic record sizing on; top-level keys (dynamic-record-sizing) precede
       every table in TOML, so they were read already */
    if (rc == 0 && ld->cfg->doppel.enabled && ld->cfg->doppel.drs)
        ld->cfg->dynamic_records = true;
    return rc;
}

static int k_tls_front_state(struct loader *ld, const struct toml_kv *kv);

static const struct key_rule tls_front_rules[] = {
    BOOL_KEY("enabled", tls_front.enabled),
    SECONDS_KEY("refresh", tls_front.refresh_s, 60, 30 * 86400),
    U32_KEY("connections", tls_front.connections, 1, 64),
    MS_KEY("timeout", tls_front.timeout_ms, 100, 60000),
    FN_KEY("state-file", k_tls_front_state),
};

static int k_tls_front(struct loader *ld, const struct toml_kv *kv)
{
    return WALK(ld, kv, tls_front_rules);
}

/* mss-clamp: false (off), true (CONFIG_MSS_CLAMP_DEFAULT) or a segment size in bytes: at
   least Linux's floor (88, TCP_MIN_MSS), at most an Ethernet MSS (1460; more clamps
   nothing). */
static int k_mss_clamp(struct loader *ld, const struct toml_kv *kv)
{
    if (kv->value->type == TOML_BOOL) {
        ld->cfg->mss_clamp = kv->value->u.boolean ? CONFIG_MSS_CLAMP_DEFAULT : 0;
        return 0;
    }
    if (kv->value->type != TOML_INTEGER)
        return type_err(ld, kv, "a boolean or a segment size in bytes (88..1460)");
    return get_uint(ld, kv, 88, 1460, &ld->cfg->mss_clamp);
}

static const struct key_rule defense_rules[] = {
    FN_KEY("mss-clamp", k_mss_clamp),    BOOL_KEY("mss-clamp-loopback", mss_clamp_loopback),
    FN_KEY("anti-replay", k_antireplay), FN_KEY("blocklist", k_blocklist),
    FN_KEY("allowlist", k_allowlist),    FN_KEY("doppelganger", k_doppel),
    FN_KEY("tls-front", k_tls_front),
};

static int k_defense(struct loader *ld, const struct toml_kv *kv)
{
    return WALK(ld, kv, defense_rules);
}

/* A metric prefix: what Prometheus allows at the start of a name. */
static int get_prefix(struct loader *ld, const struct toml_kv *kv, char *out)
{
    const char *s = NULL;
    size_t n = 0;
    if (get_str(ld, kv, kv->value, &s, &n) != 0)
        return -EINVAL;
    bool ok = n > 0 && n < CONFIG_PREFIX_MAX && !(s[0] >= '0' && s[0] <= '9');
    for (size_t i = 0; ok && i < n; i++)
        ok = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
             (s[i] >= '0' && s[i] <= '9') || s[i] == '_';
    if (!ok)
        return val_err(ld, kv, kv->value,
                       "expected 1..%d characters of [A-Za-z0-9_], not starting with a digit",
                       CONFIG_PREFIX_MAX - 1);
    memcpy(out, s, n);
    out[n] = '\0';
    return 0;
}

/* A numeric "IP:PORT" (a metrics socket is bound or sent to without DNS). */
static int get_numeric_hostport(struct loader *ld, const struct toml_kv *kv,
                                struct value_hostport *out)
{
    char why[256];
    const char *s = NULL;
    size_t n = 0;
    if (get_str(ld, kv, kv->value, &s, &n) != 0)
        return -EINVAL;
    if (value_hostport_parse(s, n, out, why, sizeof why) != 0)
        return val_err(ld, kv, kv->value, "%s", why);
    if (!out->resolved)
        return val_err(ld, kv, kv->value, "expected an IP address such as 127.0.0.1:3129");
    return 0;
}

static int k_st_address(struct loader *ld, const struct toml_kv *kv)
{
    return get_numeric_hostport(ld, kv, &ld->cfg->statsd.addr);
}

static int k_st_prefix(struct loader *ld, const struct toml_kv *kv)
{
    return get_prefix(ld, kv, ld->cfg->statsd.prefix);
}

static int k_st_tags(struct loader *ld, const struct toml_kv *kv, const char *s, size_t n)
{
    static const char *const names[] = {"datadog", "influxdb", "graphite"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == n && memcmp(names[i], s, n) == 0) {
            ld->cfg->statsd.tag_format = (enum config_tag_format)i;
            return 0;
        }
    return val_err(ld, kv, kv->value, "expected \"datadog\", \"influxdb\" or \"graphite\"");
}

static const struct key_rule statsd_rules[] = {
    BOOL_KEY("enabled", statsd.enabled),
    FN_KEY("address", k_st_address),
    FN_KEY("metric-prefix", k_st_prefix),
    STR_KEY("tag-format", k_st_tags),
    MS_KEY("flush-interval", statsd.flush_ms, 100, 3600000),
};

static int k_pr_bind(struct loader *ld, const struct toml_kv *kv)
{
    return get_numeric_hostport(ld, kv, &ld->cfg->prometheus.bind);
}

static int k_pr_path(struct loader *ld, const struct toml_kv *kv, const char *s, size_t n)
{
    bool ok = n > 0 && n < CONFIG_PATH_MAX && s[0] == '/';
    for (size_t i = 0; ok && i < n; i++)
        ok = s[i] > ' ' && s[i] < 0x7f && s[i] != '?' && s[i] != '#';
    if (!ok)
        return val_err(ld, kv, kv->value,
                       "expected a URL path such as \"/metrics\" (at most %d bytes)",
                       CONFIG_PATH_MAX - 1);
    memcpy(ld->cfg->prometheus.path, s, n);
    ld->cfg->prometheus.path[n] = '\0';
    return 0;
}

static int k_pr_prefix(struct loader *ld, const struct toml_kv *kv)
{
    return get_prefix(ld, kv, ld->cfg->prometheus.prefix);
}

/* names: "tgproxy" (ours only) or "mtg" (mtg's names and labels too, beside ours). */
static int k_pr_names(struct loader *ld, const struct toml_kv *kv, const char *s, size_t n)
{
    if (n == 7 && memcmp(s, "tgproxy", 7) == 0)
        ld->cfg->prometheus.mtg_names = false;
    else if (n == 3 && memcmp(s, "mtg", 3) == 0)
        ld->cfg->prometheus.mtg_names = true;
    else
        return val_err(ld, kv, kv->value,
                       "expected \"tgproxy\" (tgproxy's metric names) or \"mtg\" (mtg's "
                       "names and labels too, beside tgproxy's)");
    return 0;
}

static const struct key_rule prometheus_rules[] = {
    BOOL_KEY("enabled", prometheus.enabled),
    FN_KEY("bind-to", k_pr_bind),
    STR_KEY("http-path", k_pr_path),
    FN_KEY("metric-prefix", k_pr_prefix),
    STR_KEY("names", k_pr_names),
};

static int k_statsd(struct loader *ld, const struct toml_kv *kv)
{
    int rc = WALK(ld, kv, statsd_rules);
    if (rc == 0 && ld->cfg->statsd.enabled && !ld->cfg->statsd.addr.resolved)
        return key_err(ld, kv, "enabled without an address, expected address = \"IP:PORT\"");
    return rc;
}

static int k_prometheus(struct loader *ld, const struct toml_kv *kv)
{
    return WALK(ld, kv, prometheus_rules);
}

static const struct key_rule stats_rules[] = {
    FN_KEY("statsd", k_statsd),
    FN_KEY("prometheus", k_prometheus),
};

static int k_stats(struct loader *ld, const struct toml_kv *kv)
{
    return WALK(ld, kv, stats_rules);
}

/* ---- [dcs] ---- */

static int dc_id(struct loader *ld, const struct toml_kv *kv, struct config_dc *dc)
{
    int64_t id;
    if (kv->key_len == 7 && memcmp(kv->key, "default", 7) == 0) {
        dc->is_default = true;
        dc->id = 0;
    } else if (tg__parse_i64(kv->key, kv->key_len, &id) != 0 || id == 0 || id < -32767 ||
               id > 32767) {
        return key_err(ld, kv,
                       "bad DC id, expected \"default\" or a non-zero integer such "
                       "as 2, -2 or 10002");
    } else {
        dc->id = (int32_t)id;
    }
    for (size_t i = 0; i < ld->cfg->ndcs; i++) {
        const struct config_dc *o = &ld->cfg->dcs[i];
        if (o->is_default == dc->is_default && o->id == dc->id)
            return key_err(ld, kv, "DC listed twice, expected each DC id once");
    }
    return 0;
}

static int dc_addr(struct loader *ld, const struct toml_kv *kv, const struct toml_value *v,
                   struct config_dc *dc)
{
    char why[256];
    const char *s = NULL;
    size_t n = 0;
    if (get_str(ld, kv, v, &s, &n) != 0)
        return -EINVAL;
    if (dc->naddrs >= CONFIG_MAX_DC_ADDRS)
        return val_err(ld, kv, v, "too many addresses, expected at most %d", CONFIG_MAX_DC_ADDRS);
    struct value_hostport *hp = &dc->addrs[dc->naddrs];
    if (value_hostport_parse(s, n, hp, why, sizeof why) != 0)
        return val_err(ld, kv, v, "%s", why);
    if (hp->port == 0)
        return val_err(ld, kv, v, "port 0, expected a port 1..65535");
    dc->naddrs++;
    return 0;
}

static int dc_entry(struct loader *ld, const struct toml_kv *kv, struct config_dc *dc)
{
    const struct toml_value *v = kv->value;
    if (dc_id(ld, kv, dc) != 0)
        return -EINVAL;
    if (v->type == TOML_STRING)
        return dc_addr(ld, kv, v, dc);
    if (v->type != TOML_ARRAY)
        return type_err(ld, kv, "an array of \"HOST:PORT\"");
    if (v->u.array.n == 0)
        return val_err(ld, kv, v, "empty array, expected at least one \"HOST:PORT\"");
    for (const struct toml_value *e = v->u.array.first; e; e = e->next)
        if (dc_addr(ld, kv, e, dc) != 0)
            return -EINVAL;
    return 0;
}

static int k_dcs(struct loader *ld, const struct toml_kv *self)
{
    const struct toml_table *t = NULL;
    if (get_table(ld, self, &t) != 0)
        return -EINVAL;
    size_t used = strlen(ld->prefix);
    snprintf(ld->prefix + used, sizeof ld->prefix - used, "%sdcs", used ? "." : "");
    int rc = 0;
    for (const struct toml_kv *kv = t->first; kv && rc == 0; kv = kv->next) {
        struct config *cfg = ld->cfg;
        if (cfg->ndcs >= CONFIG_MAX_DCS) {
            rc = key_err(ld, kv, "too many DC entries, expected at most %d", CONFIG_MAX_DCS);
        } else if (grow((void **)&cfg->dcs, cfg->ndcs, sizeof cfg->dcs[0]) != 0) {
            rc = -ENOMEM;
        } else {
            rc = dc_entry(ld, kv, &cfg->dcs[cfg->ndcs]);
            if (rc == 0)
                cfg->ndcs++;
        }
    }
    ld->prefix[used] = '\0';
    return rc;
}

/* ---- the root ---- */

static int k_skew(struct loader *ld, const struct toml_kv *kv)
{
    ld->skew_kv = kv;
    return get_seconds(ld, kv, 1, 3600, &ld->cfg->tolerate_time_skewness_s);
}

/* ---- [limits.LABEL] ---- */

static int k_root_limits(struct loader *ld, const struct toml_kv *kv)
{
    const struct toml_table *t = NULL;
    ld->limits_kv = kv;
    return get_table(ld, kv, &t); /* walked by apply_limits once [secrets] is read */
}

static int k_lim_quota(struct loader *ld, const struct toml_kv *kv)
{
    const struct toml_value *v = kv->value;
    uint64_t n = 0;
    if (v->type == TOML_INTEGER) {
        n = v->u.integer > 0 ? (uint64_t)v->u.integer : 0;
    } else if (v->type == TOML_STRING) {
        const char *s = NULL;
        size_t len = 0;
        if (get_str(ld, kv, v, &s, &len) != 0)
            return -EINVAL;
        if (value_size_bytes(s, len, &n) != 0)
            n = 0;
    } else {
        return type_err(ld, kv, "a size such as \"10gib\" or an integer of bytes");
    }
    if (n == 0 || n > (1ull << 60))
        return val_err(ld, kv, v, "bad quota, expected 1 byte..1 EiB such as \"10gib\"");
    ld->lim->quota = n;
    return 0;
}

static int k_lim_expires(struct loader *ld, const struct toml_kv *kv)
{
    const char *s = NULL;
    size_t n = 0;
    if (kv->value->type != TOML_STRING)
        return type_err(ld, kv, "an RFC 3339 time or date string such as \"2027-01-31\"");
    if (get_str(ld, kv, kv->value, &s, &n) != 0)
        return -EINVAL;
    if (value_rfc3339(s, n, &ld->lim->expires) != 0 || ld->lim->expires <= 0)
        return val_err(ld, kv, kv->value,
                       "bad time, expected RFC 3339 such as \"2027-01-31T12:00:00Z\", "
                       "\"2027-01-31T12:00:00+02:00\" or a date \"2027-01-31\"");
    return 0;
}

static const struct key_rule limit_rules[] = {
    LIM_U32_KEY("max-connections", max_connections, 1, 10000000),
    FN_KEY("expires", k_lim_expires),
    LIM_U32_KEY("max-unique-ips", max_unique_ips, 1, 100000),
    LIM_SECONDS_KEY("unique-ips-window", unique_ips_window_s, 1, 30 * 86400),
    FN_KEY("quota", k_lim_quota),
    LIM_SECONDS_KEY("quota-reset", quota_reset_s, 1, 366 * 86400),
};

/* A file path string of at most CONFIG_FILE_MAX - 1 bytes into out. */
static int get_path(struct loader *ld, const struct toml_kv *kv, char *out)
{
    const char *s = NULL;
    size_t n = 0;
    if (kv->value->type != TOML_STRING)
        return type_err(ld, kv, "a file path string");
    if (get_str(ld, kv, kv->value, &s, &n) != 0)
        return -EINVAL;
    if (n >= CONFIG_FILE_MAX)
        return val_err(ld, kv, kv->value, "path too long, expected at most %d bytes",
                       CONFIG_FILE_MAX - 1);
    memcpy(out, s, n);
    out[n] = '\0';
    return 0;
}

/* [defense.tls-front] state-file: "" = $STATE_DIRECTORY/tls-front (services/tlsfront.c). */
static int k_tls_front_state(struct loader *ld, const struct toml_kv *kv)
{
    return get_path(ld, kv, ld->cfg->tls_front.state_file);
}

/* [limits] state-file / state-interval: the keys of [limits] that are not a label's table. */
static int limits_option(struct loader *ld, const struct toml_kv *kv)
{
    if (kv->key_len == 14 && memcmp(kv->key, "state-interval", 14) == 0)
        return get_duration32(ld, kv, 1000, 86400000, &ld->cfg->limits_state_interval_ms);
    if (kv->key_len != 10 || memcmp(kv->key, "state-file", 10) != 0)
        return key_err(ld, kv, "expected a [limits.LABEL] table, state-file or state-interval");
    return get_path(ld, kv, ld->cfg->limits_state_file); /* "" = no state file, the default */
}

/* [limits.LABEL] tables: LABEL must name a secret of [secrets]. */
static int apply_limits(struct loader *ld)
{
    const struct toml_table *t = NULL;
    if (!ld->limits_kv || get_table(ld, ld->limits_kv, &t) != 0)
        return 0;
    int rc = 0;
    snprintf(ld->prefix, sizeof ld->prefix, "limits");
    for (const struct toml_kv *kv = t->first; kv && rc == 0; kv = kv->next) {
        if (kv->value->type != TOML_TABLE) {
            rc = limits_option(ld, kv);
            continue;
        }
        struct config_secret *cs = NULL;
        for (size_t i = 0; i < ld->cfg->nsecrets && !cs; i++)
            if (strlen(ld->cfg->secrets[i].label) == kv->key_len &&
                memcmp(ld->cfg->secrets[i].label, kv->key, kv->key_len) == 0)
                cs = &ld->cfg->secrets[i];
        if (!cs) {
            rc = key_err(ld, kv, "no secret has this label, expected a label of [secrets]");
            break;
        }
        ld->lim = &cs->limits;
        rc = WALK(ld, kv, limit_rules);
    }
    ld->prefix[0] = '\0';
    return rc;
}

/* ---- [fleet] ---- */

/* redis://[[user]:password@]IP[:PORT] into cfg->fleet (the password is never quoted). */
static int fleet_tcp(struct loader *ld, const struct toml_kv *kv, const char *p, const char *end)
{
    struct config *cfg = ld->cfg;
    const char *at = NULL;
    for (const char *q = p; q < end; q++)
        at = *q == '@' ? q : at;
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        size_t ul = colon ? (size_t)(colon - p) : 0, pl = colon ? (size_t)(at - colon - 1) : 0;
        if (!colon || ul >= sizeof cfg->fleet.user || pl == 0 || pl >= sizeof cfg->fleet.password)
            return val_err(ld, kv, kv->value,
                           "expected user:password@ or :password@ before the address (a "
                           "password of 1..%zu bytes)",
                           sizeof cfg->fleet.password - 1);
        memcpy(cfg->fleet.user, p, ul);
        cfg->fleet.user[ul] = '\0';
        memcpy(cfg->fleet.password, colon + 1, pl);
        cfg->fleet.password[pl] = '\0';
        p = at + 1;
    }
    char text[CONFIG_HOST_MAX + 16], why[256];
    size_t n = (size_t)(end - p);
    const char *rb = memchr(p, ']', n);
    bool has_port = memchr(rb ? rb : p, ':', n - (size_t)(rb ? rb - p : 0)) != NULL;
    if (n == 0 || n >= CONFIG_HOST_MAX)
        return val_err(ld, kv, kv->value, "expected redis://IP:PORT");
    snprintf(text, sizeof text, "%.*s%s", (int)n, p, has_port ? "" : ":6379");
    struct value_hostport hp;
    if (value_hostport_parse(text, strlen(text), &hp, why, sizeof why) != 0)
        return val_err(ld, kv, kv->value, "%s", why);
    if (!hp.resolved || hp.port == 0)
        return val_err(ld, kv, kv->value,
                       "expected an IP address and a port such as redis://127.0.0.1:6379 (host "
                       "names are not looked up)");
    memcpy(cfg->fleet.host, hp.host, sizeof cfg->fleet.host);
    cfg->fleet.port = hp.port;
    return 0;
}

static int k_fleet_redis(struct loader *ld, const struct toml_kv *kv, const char *s, size_t n)
{
    struct config *cfg = ld->cfg;
    cfg->fleet.enabled = true;
    if (n > 8 && memcmp(s, "redis://", 8) == 0)
        return fleet_tcp(ld, kv, s + 8, s + n);
    if (n > 8 && memcmp(s, "unix:///", 8) == 0) {
        size_t pl = n - 7; /* the path, from its leading '/' */
        if (pl >= sizeof((struct sockaddr_un *)0)->sun_path)
            return val_err(ld, kv, kv->value, "expected a socket path of at most %zu bytes",
                           sizeof((struct sockaddr_un *)0)->sun_path - 1);
        memcpy(cfg->fleet.host, s + 7, pl);
        cfg->fleet.host[pl] = '\0';
        cfg->fleet.unix_socket = true;
        cfg->fleet.port = 0;
        return 0;
    }
    return val_err(ld, kv, kv->value,
                   "expected redis://IP:PORT (optionally redis://user:password@IP:PORT) or "
                   "unix:///path/to/redis.sock");
}

static int k_fleet_prefix(struct loader *ld, const struct toml_kv *kv, const char *s, size_t n)
{
    bool ok = n > 0 && n < CONFIG_PREFIX_MAX;
    for (size_t i = 0; ok && i < n; i++)
        ok = s[i] > ' ' && s[i] < 0x7f;
    if (!ok)
        return val_err(ld, kv, kv->value, "expected 1..%d printable characters without spaces",
                       CONFIG_PREFIX_MAX - 1);
    memcpy(ld->cfg->fleet.prefix, s, n);
    ld->cfg->fleet.prefix[n] = '\0';
    return 0;
}

static const struct key_rule fleet_rules[] = {
    STR_KEY("redis", k_fleet_redis),
    MS_KEY("timeout", fleet.timeout_ms, 1, 1000),
    MS_KEY("lease", fleet.lease_ms, 1000, 600000),
    STR_KEY("key-prefix", k_fleet_prefix),
};

static int k_fleet(struct loader *ld, const struct toml_kv *kv)
{
    return WALK(ld, kv, fleet_rules);
}

/* ---- [api] ---- */

static int k_api_bind(struct loader *ld, const struct toml_kv *kv)
{
    return get_numeric_hostport(ld, kv, &ld->cfg->api.bind);
}

static int k_api_token(struct loader *ld, const struct toml_kv *kv)
{
    return get_path(ld, kv, ld->cfg->api.token_file);
}

static int k_api_state(struct loader *ld, const struct toml_kv *kv)
{
    return get_path(ld, kv, ld->cfg->api.state_file);
}

/* allow: an array of CIDRs or addresses, each checked by the netset parser. */
static int k_api_allow(struct loader *ld, const struct toml_kv *kv)
{
    if (kv->value->type != TOML_ARRAY)
        return type_err(ld, kv, "an array of CIDR strings such as [\"127.0.0.0/8\", \"::1/128\"]");
    char *out = ld->cfg->api.allow;
    size_t used = 0;
    out[0] = '\0';
    for (const struct toml_value *e = kv->value->u.array.first; e; e = e->next) {
        const char *s = NULL;
        size_t n = 0;
        char why[256];
        if (get_str(ld, kv, e, &s, &n) != 0)
            return -EINVAL;
        struct netset *ns = netset_new();
        if (!ns)
            return -ENOMEM;
        int rc = n && !memchr(s, '\n', n) && !memchr(s, '#', n)
                     ? netset_parse(ns, "allow", s, n, why, sizeof why)
                     : -EINVAL;
        netset_free(ns);
        if (rc == -ENOMEM)
            return rc;
        if (rc != 0)
            return val_err(ld, kv, e, "expected an address or CIDR such as \"10.0.0.0/8\"");
        if (used + n + 2 > sizeof ld->cfg->api.allow)
            return val_err(ld, kv, e, "allow list too long, expected at most %d bytes",
                           CONFIG_API_ALLOW_MAX - 2);
        memcpy(out + used, s, n);
        used += n;
        out[used++] = '\n';
        out[used] = '\0';
    }
    return 0;
}

static const struct key_rule api_rules[] = {
    BOOL_KEY("enabled", api.enabled),
    FN_KEY("bind-to", k_api_bind),
    FN_KEY("token-file", k_api_token),
    FN_KEY("state-file", k_api_state),
    FN_KEY("allow", k_api_allow),
    SIZE_KEY("max-body", api.max_body, 1024, 1 << 20),
    U32_KEY("auth-failures-per-minute", api.auth_failures, 1, 100000),
};

uint32_t config_listen_clamp(const struct config *cfg, const struct config_listen *l)
{
    if (!cfg->mss_clamp || (!cfg->mss_clamp_loopback && value_addr_loopback((const struct sockaddr *)&l->addr)))
        return 0;
    return cfg->mss_clamp;
}

static int k_api(struct loader *ld, const struct toml_kv *kv)
{
    int rc = WALK(ld, kv, api_rules);
    struct config *cfg = ld->cfg;
    if (rc == 0 && cfg->api.enabled && !cfg->api.state_file[0])
        return key_err(ld, kv,
                       "enabled without a state-file, expected state-file = "
                       "\"/var/lib/tgproxy/api.json\" (where the API keeps the secrets it makes)");
    if (rc == 0 && cfg->api.enabled && !cfg->api.token_file[0] &&
        !value_addr_loopback((const struct sockaddr *)&cfg->api.bind.addr))
        return key_err(ld, kv,
                       "bind-to beyond loopback without a token-file: anyone who reaches it "
                       "could manage the proxy; expected token-file = \"/etc/tgproxy/api.token\" "
                       "(a 0600 file) or a 127.0.0.1 / ::1 bind-to");
    return rc;
}

static const struct key_rule root_rules[] = {
    FN_KEY("api", k_api),
    FN_KEY("limits", k_root_limits),
    FN_KEY("bind-to", k_bind_to),
    FN_KEY("secret", k_secret),
    FN_KEY("secrets", k_secrets),
    STR_KEY("public-host", k_public_host),
    FN_KEY("public-port", k_public_port),
    FN_KEY("public-ipv4", k_public_ipv4),
    FN_KEY("public-ipv6", k_public_ipv6),
    U32_KEY("workers", workers, 0, CONFIG_MAX_WORKERS),
    U32_KEY("concurrency", concurrency, 1, 10000000),
    MS_KEY("drain-timeout", drain_timeout_ms, 0, 3600000),
    STR_KEY("prefer-ip", k_prefer_ip),
    FN_KEY("tolerate-time-skewness", k_skew),
    BOOL_KEY("allow-fallback-on-unknown-dc", allow_fallback_on_unknown_dc),
    BOOL_KEY("fast-mode", fast_mode),
    BOOL_KEY("dynamic-record-sizing", dynamic_records),
    BOOL_KEY("proxy-protocol-listener", proxy_protocol_listener),
    STR_KEY("log-level", k_log_level),
    FN_KEY("debug", k_debug),
    BOOL_KEY("test-dcs", use_test_dcs),
    SIZE_KEY("buffer-size", buffer_size, 1024, 1 << 20),
    SIZE_KEY("max-inflight", max_inflight, 16 << 10, 256u << 20),
    SIZE_KEY("bulk-budget", bulk_budget, 0, 256u << 20),
    FN_KEY("dcs", k_dcs),
    FN_KEY("domain-fronting", k_fronting),
    FN_KEY("network", k_network),
    FN_KEY("defense", k_defense),
    FN_KEY("stats", k_stats),
    FN_KEY("domain-fronting-port", k_dep_fronting_port),
    FN_KEY("cloak-port", k_dep_fronting_port),
    STR_KEY("domain-fronting-ip", k_dep_fronting_ip),
    FN_KEY("domain-fronting-proxy-protocol", k_dep_fronting_pp),
    FN_KEY("auto-update", k_ignore),
    FN_KEY("tcp-buffer", k_ignore),
    FN_KEY("ad-tag", k_ad_tag),
    FN_KEY("ad-tags", k_ad_tags),
    FN_KEY("middle-proxy", k_middle_proxy),
    FN_KEY("fleet", k_fleet),
};

/* Apply deprecated spellings where the current one was not given; derive the rest. */
static void finalize(struct loader *ld)
{
    struct config *cfg = ld->cfg;
    if (!ld->fronting_host_set && ld->dep_fronting_host[0]) {
        struct value_hostport hp;
        if (value_host_parse(&hp, ld->dep_fronting_host, strlen(ld->dep_fronting_host), NULL, 0) ==
            0) {
            memcpy(cfg->fronting.host, hp.host, sizeof hp.host);
            cfg->fronting.resolved = hp.resolved;
            cfg->fronting.addr = hp.addr;
            cfg->fronting.addr_len = hp.addr_len;
        }
    }
    if (!ld->fronting_port_set && ld->dep_fronting_port > 0)
        cfg->fronting.port = (uint16_t)ld->dep_fronting_port;
    if (!ld->fronting_pp_set && ld->dep_fronting_pp >= 0)
        cfg->fronting.proxy_protocol = ld->dep_fronting_pp != 0;
    if (cfg->fronting.resolved)
        value_set_port(&cfg->fronting.addr, cfg->fronting.port);
    tg__strlcpy(cfg->public_ipv4, ld->pub_v4, sizeof cfg->public_ipv4);
    tg__strlcpy(cfg->public_ipv6, ld->pub_v6, sizeof cfg->public_ipv6);
    if (!ld->public_host_set && ld->pub_v4[0])
        tg__strlcpy(cfg->public_host, ld->pub_v4, sizeof cfg->public_host);
    else if (!ld->public_host_set && ld->pub_v6[0])
        tg__strlcpy(cfg->public_host, ld->pub_v6, sizeof cfg->public_host);
    if (!ld->log_level_set && ld->debug)
        cfg->log_level = TG__LOG_DEBUG;
    if (cfg->dns.ip[0] && !cfg->dns.url[0]) { /* doh-ip alone: mtg's https://IP */
        bool v6 = strchr(cfg->dns.ip, ':') != NULL;
        snprintf(cfg->dns.url, sizeof cfg->dns.url, "https://%s%s%s/dns-query", v6 ? "[" : "",
                 cfg->dns.ip, v6 ? "]" : "");
        tg__strlcpy(cfg->dns.host, cfg->dns.ip, sizeof cfg->dns.host);
        cfg->dns.port = 443;
    }
}

/* The replay window must outlast every replay the clock check accepts (see
   config_replay_window_min): derive it when not given, refuse a shorter explicit one. */
static int replay_window(struct loader *ld)
{
    struct config *cfg = ld->cfg;
    uint32_t skew = cfg->tolerate_time_skewness_s, need = config_replay_window_min(skew);
    if (!cfg->antireplay.enabled || cfg->antireplay.window_s >= need)
        return 0;
    if (!ld->window_kv) {
        cfg->antireplay.window_s = need;
        return 0;
    }
    char skew_at[CONFIG_HOST_MAX + 16] = "default";
    if (ld->skew_kv)
        snprintf(skew_at, sizeof skew_at, "%.200s:%u", ld->name, (unsigned)ld->skew_kv->pos.line);
    snprintf(ld->prefix, sizeof ld->prefix, "defense.anti-replay");
    int rc = key_err(ld, ld->window_kv,
                     "%u s is too short: with tolerate-time-skewness = %u s (%s) a captured "
                     "hello is accepted for up to 2 x %u s after it was first seen, so a replay "
                     "after %u s would be answered; expected a window of at least %us (or a "
                     "smaller tolerate-time-skewness)",
                     cfg->antireplay.window_s, skew, skew_at, skew, cfg->antireplay.window_s, need);
    ld->prefix[0] = '\0';
    return rc;
}

/* ---- public API ---- */

void config_init(struct config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    tg__strlcpy(cfg->source, "<config>", sizeof cfg->source);
    cfg->prefer_ip = CONFIG_PREFER_IPV6;
    cfg->tolerate_time_skewness_s = 120;
    cfg->fast_mode = true;
    cfg->dynamic_records = true;
    cfg->mp.connections = 2;
    cfg->mp.fallback_direct = true;
    cfg->mp.client_buffer = 8u << 20;
    cfg->mp.update_s = 86400;
    cfg->mp.buffer_total = 256u << 20;
    cfg->concurrency = 8192;
    cfg->drain_timeout_ms = 30000;
    cfg->limits_state_interval_ms = 60000;
    cfg->fronting.port = 443;
    cfg->timeout.tcp_ms = 10000;
    cfg->timeout.idle_ms = 300000;
    cfg->timeout.handshake_ms = 10000;
    cfg->timeout.fronting_ms = 5000;
    cfg->timeout.http_ms = 10000;
    cfg->keepalive.enabled = true;
    cfg->keepalive.idle_s = 15;
    cfg->keepalive.interval_s = 15;
    cfg->keepalive.count = 9;
    cfg->antireplay.enabled = true;
    cfg->mss_clamp = CONFIG_MSS_CLAMP_DEFAULT;
    cfg->antireplay.max_entries = 1u << 20;
    cfg->antireplay.window_s = 300;
    cfg->log_level = TG__LOG_INFO;
    cfg->buffer_size = 16384;
    cfg->max_inflight = 1u << 20;
    cfg->bulk_budget = 4u << 20;
    cfg->prometheus.enabled = false;
    (void)value_hostport_parse("127.0.0.1:3129", 14, &cfg->prometheus.bind, NULL, 0);
    tg__strlcpy(cfg->prometheus.path, "/", sizeof cfg->prometheus.path);
    tg__strlcpy(cfg->prometheus.prefix, "tgproxy", sizeof cfg->prometheus.prefix);
    tg__strlcpy(cfg->statsd.prefix, "tgproxy", sizeof cfg->statsd.prefix);
    cfg->statsd.tag_format = CONFIG_TAGS_DATADOG;
    cfg->statsd.flush_ms = 10000;
    cfg->blocklist.download_concurrency = cfg->allowlist.download_concurrency = 1;
    cfg->blocklist.update_each_s = cfg->allowlist.update_each_s = 6 * 3600;
    cfg->doppel.repeats = 10;
    cfg->doppel.raid_s = 6 * 3600;
    cfg->doppel.delay_ms = 20;
    cfg->tls_front.enabled = true;
    cfg->tls_front.refresh_s = 6 * 3600;
    cfg->tls_front.connections = 8;
    cfg->tls_front.timeout_ms = 5000;
    cfg->fleet.port = 6379;
    cfg->fleet.timeout_ms = 50;
    cfg->fleet.lease_ms = 15000;
    tg__strlcpy(cfg->fleet.prefix, "tgproxy:", sizeof cfg->fleet.prefix);
    (void)value_hostport_parse("127.0.0.1:9443", 14, &cfg->api.bind, NULL, 0);
    tg__strlcpy(cfg->api.allow, "127.0.0.0/8\n::1/128\n", sizeof cfg->api.allow);
    cfg->api.max_body = 65536;
    cfg->api.auth_failures = 10;
}

void config_cleanup(struct config *cfg)
{
    if (!cfg)
        return;
    if (cfg->secrets)
        memset(cfg->secrets, 0, cfg->nsecrets * sizeof cfg->secrets[0]);
    tg__free(cfg->listen);
    tg__free(cfg->secrets);
    tg__free(cfg->dcs);
    if (cfg->proxies)
        memset(cfg->proxies, 0, cfg->nproxies * sizeof cfg->proxies[0]);
    tg__free(cfg->proxies);
    tg__free(cfg->blocklist.sources);
    tg__free(cfg->allowlist.sources);
    memset(cfg, 0, sizeof *cfg);
}

const char *config_prefer_ip_name(enum config_prefer_ip p)
{
    switch (p) {
    case CONFIG_PREFER_IPV4:
        return "prefer-ipv4";
    case CONFIG_PREFER_IPV6:
        return "prefer-ipv6";
    case CONFIG_ONLY_IPV4:
        return "only-ipv4";
    case CONFIG_ONLY_IPV6:
        return "only-ipv6";
    }
    return "?";
}

int config_validate(const struct config *cfg, char *err, size_t errlen)
{
    if (cfg->nlisten == 0)
        return plain_err(err, errlen,
                         "%s: no listen address, expected bind-to = "
                         "\"0.0.0.0:443\" (or an array of addresses)",
                         cfg->source);
    if (cfg->nsecrets == 0)
        return plain_err(err, errlen,
                         "%s: no secret, expected a [secrets] table with "
                         "label = \"ee...\" or a top-level secret = \"...\" (see "
                         "'tgproxy generate-secret')",
                         cfg->source);
    if (cfg->concurrency == 0 || cfg->buffer_size == 0 || cfg->max_inflight < cfg->buffer_size)
        return plain_err(err, errlen,
                         "%s: max-inflight (%u) is below buffer-size (%u), "
                         "expected max-inflight >= buffer-size",
                         cfg->source, cfg->max_inflight, cfg->buffer_size);
    uint32_t need = config_replay_window_min(cfg->tolerate_time_skewness_s);
    if (cfg->antireplay.enabled && cfg->antireplay.window_s < need)
        return plain_err(err, errlen,
                         "%s: anti-replay window %u s is shorter than 2 x "
                         "tolerate-time-skewness + 2 s = %u s, expected a window of at least %u s",
                         cfg->source, cfg->antireplay.window_s, need, need);
    return 0;
}

const struct config_dc *config_dc_find(const struct config *cfg, int32_t id)
{
    const struct config_dc *fallback = NULL;
    for (size_t i = 0; i < cfg->ndcs; i++) {
        if (cfg->dcs[i].is_default)
            fallback = &cfg->dcs[i];
        else if (cfg->dcs[i].id == id)
            return &cfg->dcs[i];
    }
    return fallback;
}

int config_parse(struct config *cfg, const char *name, const char *text, size_t len, char *err,
                 size_t errlen, config_warn_fn warn, void *warn_user)
{
    struct toml_doc doc;
    int rc;
    name = name ? name : "<config>";
    enum toml_status st = toml_parse(&doc, name, text, len, err, errlen);
    if (st != TOML_OK) {
        rc = st == TOML_NOMEM ? -ENOMEM : -EINVAL;
        goto out;
    }
    tg__strlcpy(cfg->source, name, sizeof cfg->source);
    struct loader ld = {
        .cfg = cfg,
        .name = doc.name,
        .err = err,
        .errlen = errlen,
        .warn = warn,
        .warn_user = warn_user,
        .dep_fronting_port = -1,
        .dep_fronting_pp = -1,
    };
    rc = walk_table(&ld, doc.root, root_rules, sizeof root_rules / sizeof root_rules[0]);
    if (rc == -ENOMEM)
        plain_err(err, errlen, "%s: out of memory", name);
    if (rc == 0)
        rc = apply_limits(&ld);
    if (rc == 0)
        rc = apply_ad_tags(&ld);
    if (rc == 0)
        rc = load_midproxy(&ld);
    if (rc != 0)
        goto out;
    finalize(&ld);
    rc = replay_window(&ld);
    if (rc == 0)
        rc = config_validate(cfg, err, errlen);
out:
    toml_doc_cleanup(&doc);
    if (rc != 0) {
        config_cleanup(cfg);
        config_init(cfg);
    }
    return rc;
}

/* Whole file into a tg__malloc'ed buffer, at most TOML_MAX_INPUT bytes; its mode in *mode.
   core/readfile opens it non-blocking: a FIFO at the path would otherwise hold the caller
   (the main thread, on a reload) in open() until some writer appears. Only a regular file
   is read. */
static int read_file(const char *path, char **out, size_t *len, mode_t *mode, char *err,
                     size_t errlen)
{
    struct stat st;
    int rc = tg__read_file(path, TOML_MAX_INPUT, 0, out, len, &st, err, errlen);
    if (rc == 0)
        *mode = st.st_mode;
    return rc;
}

static bool ends_with(const char *s, const char *end)
{
    size_t n = strlen(s), m = strlen(end);
    return n >= m && memcmp(s + n - m, end, m) == 0;
}

bool config_warning_harmless(const char *msg)
{
    const char *dep = strstr(msg, DEPRECATED_TEXT);
    return ends_with(msg, IGNORED_TEXT) || (dep && ends_with(dep, DEPRECATED_END));
}

/* Warnings already reported by this process, by 64-bit FNV-1a hash of their text. */
#define SEEN_MAX 256
static pthread_mutex_t seen_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t seen[SEEN_MAX];
static size_t nseen;

bool config_warning_first(const char *msg)
{
    uint64_t h = 14695981039346656037ull;
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    bool first = true;
    pthread_mutex_lock(&seen_mu);
    for (size_t i = 0; i < nseen && first; i++)
        first = seen[i] != h;
    if (first && nseen < SEEN_MAX) /* past SEEN_MAX distinct warnings, repeats show again */
        seen[nseen++] = h;
    pthread_mutex_unlock(&seen_mu);
    return first;
}

int config_load_file(struct config *cfg, const char *path, char *err, size_t errlen,
                     config_warn_fn warn, void *warn_user)
{
    char *text = NULL;
    size_t len = 0;
    mode_t mode = 0;
    int rc = read_file(path, &text, &len, &mode, err, errlen);
    if (rc != 0 || !text)
        return rc != 0 ? rc : -EIO;
    rc = config_parse(cfg, path, text, len, err, errlen, warn, warn_user);
    memset(text, 0, len); /* the file holds secrets */
    tg__free(text);
    if (rc == 0 && (mode & (S_IRGRP | S_IROTH))) {
        char msg[CONFIG_FILE_MAX + 96];
        snprintf(msg, sizeof msg, "%s is readable by other users and holds secrets; chmod 600 it",
                 path);
        if (warn)
            warn(warn_user, msg);
        else
            tg__log(NULL, TG__LOG_WARN, "%s", msg);
    }
    return rc;
}

/* ---- the key tables, for tools (the tgproxy.toml(5) generator) ---- */

/* Every rule table and where in the file it applies. A table missing here is caught by
   ctest install/man_toml_keys, which compares this list with the key_rule tables above. */
#define SECTION(path, rules)                                                                       \
    {                                                                                              \
        (path), #rules, (rules), sizeof(rules) / sizeof((rules)[0])                                \
    }
static const struct {
    const char *path, *table;
    const struct key_rule *rules;
    size_t n;
} key_sections[] = {
    SECTION("", root_rules),
    SECTION("secrets.LABEL", secret_table_rules),
    SECTION("middle-proxy", mp_rules),
    SECTION("domain-fronting", fronting_rules),
    SECTION("network", network_rules),
    SECTION("network.timeout", timeout_rules),
    SECTION("network.keep-alive", keepalive_rules),
    SECTION("network.public-ip", public_ip_rules),
    SECTION("defense", defense_rules),
    SECTION("defense.anti-replay", antireplay_rules),
    SECTION("defense.blocklist", iplist_rules),
    SECTION("defense.allowlist", iplist_rules),
    SECTION("defense.doppelganger", doppel_rules),
    SECTION("defense.tls-front", tls_front_rules),
    SECTION("stats", stats_rules),
    SECTION("stats.statsd", statsd_rules),
    SECTION("stats.prometheus", prometheus_rules),
    SECTION("limits.LABEL", limit_rules),
    SECTION("fleet", fleet_rules),
    SECTION("api", api_rules),
};

int config_keys_foreach(config_key_fn fn, void *arg)
{
    static const char *const kinds[] = {"", "bool", "integer", "duration", "seconds", "size", ""};
    for (size_t s = 0; s < sizeof key_sections / sizeof key_sections[0]; s++)
        for (size_t i = 0; i < key_sections[s].n; i++) {
            const struct key_rule *r = &key_sections[s].rules[i];
            struct config_key k = {key_sections[s].path,
                                   key_sections[s].table,
                                   r->name,
                                   kinds[r->kind],
                                   r->min,
                                   r->max,
                                   0};
            if (r->fn == k_ignore)
                k.note = CONFIG_KEY_IGNORED;
            else if (r->fn == k_dep_fronting_port || r->sfn == k_dep_fronting_ip ||
                     r->fn == k_dep_fronting_pp)
                k.note = CONFIG_KEY_DEPRECATED;
            int rc = fn(&k, arg);
            if (rc)
                return rc;
        }
    return 0;
}
