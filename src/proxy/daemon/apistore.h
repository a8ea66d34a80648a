/*
 * apistore: the secrets the control API owns, kept in their own JSON file ([api] state-file)
 * and merged into the configuration file's at every load (start, SIGHUP, API change).
 *
 * Why a file of its own instead of rewriting the operator's TOML (docs/api.md "Persistence"):
 * the configuration file stays the operator's alone, comments and layout untouched, and an
 * API change can never interleave with a hand edit; the state file is small, machine-written
 * and replaced atomically (core/atomicfile.h, mode 0600: it holds secrets).
 *
 * Merge rules (apistore_merge):
 *   - an entry with a secret the file does not name is added as a secret of its own, with
 *     its limits;
 *   - the file wins a label clash: the entry is shadowed (kept in the state file, not
 *     served) and a warning says so; the API refuses to create a label the file has;
 *   - `disabled` applies to either kind: the secret is left out of the generation, so its
 *     handshakes fail as bad ones do (fronted). A file secret's entry carries only that flag.
 *
 * State file format: {"revision":N,"secrets":[{"label":..,"secret":"hex"?,"disabled":bool,
 * "revision":N,"ad-tag":"hex"|""?,"limits":{"max-connections":..,"max-unique-ips":..,"unique-ips-window":..,
 * "quota":..,"quota-reset":..,"expires":..}},...]}. Parsed strictly (fuzz/proxy_json).
 *
 * Ownership: struct apistore is caller storage; apistore_cleanup frees its entries (wiping
 * keys). Thread-safety: none; the API serialises its users with the server's reload lock.
 */
#ifndef TGPROXY_APISTORE_H
#define TGPROXY_APISTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "proxy/config/config.h"

#define APISTORE_MAX CONFIG_MAX_SECRETS /* entries */

struct apistore_entry {
    char label[CONFIG_LABEL_MAX];
    bool has_secret; /* false: an override (disabled) of a secret the config file has */
    struct secret secret;
    struct config_limits limits;
    bool disabled;
    int8_t ad_tag_mode; /* as config_secret's: 0 the top-level ad-tag, 1 ad_tag, -1 none */
    uint8_t ad_tag[16];
    uint64_t revision; /* bumped by every change of this entry */
};

struct apistore {
    struct apistore_entry *e;
    size_t n;
    uint64_t revision; /* bumped by every change of the store */
};

void apistore_init(struct apistore *st);
void apistore_cleanup(struct apistore *st);
/* Deep copy; 0 or -ENOMEM. dst must be initialised (its old entries are freed). */
int apistore_copy(struct apistore *dst, const struct apistore *src);

/* Parse a state file's text; name for messages. 0, -EINVAL (err "name: offset N: ...", never
   quoting a secret) or -ENOMEM. st must be fresh. */
int apistore_parse(struct apistore *st, const char *name, const char *text, size_t len, char *err,
                   size_t errlen);
/* Read path (a missing file is an empty store: 0). As apistore_parse, plus -errno. */
int apistore_load(struct apistore *st, const char *path, char *err, size_t errlen);
/* The state file's text. 0 or -ENOMEM. Holds secrets: never log it. */
int apistore_format(const struct apistore *st, tg__buf *out);
/* limits as the state file and the API write them: a JSON object of the [limits.LABEL] keys. */
int apistore_put_limits(tg__buf *b, const struct config_limits *l);
/* Format and write atomically (0600). 0 or -errno with err. */
int apistore_save(const struct apistore *st, const char *path, char *err, size_t errlen);

/* An "ad-tag" value: "" (none: mode -1) or 32 hex digits (mode 1). 0 or -EINVAL. */
int apistore_ad_tag(const char *s, size_t n, int8_t *mode, uint8_t tag[16]);
/* A config label: 1..CONFIG_LABEL_MAX-1 bytes of [A-Za-z0-9_.-] (n bytes at s). */
bool apistore_label_ok(const char *s, size_t n);
struct apistore_entry *apistore_find(struct apistore *st, const char *label);
/* A new entry at the end (zeroed, label set). NULL on -ENOMEM or when full. */
struct apistore_entry *apistore_add(struct apistore *st, const char *label);
void apistore_del(struct apistore *st, struct apistore_entry *e);

/* Merge st into cfg (rules above); warnings for shadowed entries go to warn (NULL: log).
   0, -EINVAL (err says why) or -ENOMEM. */
int apistore_merge(const struct apistore *st, struct config *cfg, char *err, size_t errlen,
                   config_warn_fn warn, void *warn_user);
/* config_load_file, then cfg->api.state_file (when [api] is enabled) merged in. */
int apistore_config_load(struct config *cfg, const char *path, char *err, size_t errlen,
                         config_warn_fn warn, void *warn_user);

#endif
