/*
 * webapp: Mini App initData and Login Widget checks (tgbot/webapp.h).
 *
 * The input comes from the network (a Mini App's request to its backend), so the query
 * string is parsed with bounds on everything: at most 16 KiB, 64 fields, keys of at most
 * 64 bytes; a field without '=', bad percent-encoding or a repeated key is refused with its
 * position. The checks themselves are OpenSSL's (HMAC-SHA256, SHA-256, Ed25519 through
 * EVP); hashes are compared with CRYPTO_memcmp. Parsed strings live in the result's arena.
 * Fuzzed by fuzz/bot_webapp.
 */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bot/json/json.h"
#include "core/alloc.h"
#include "core/arena.h"
#include "core/sized.h"
#include "core/str.h"
#include "tgbot/webapp.h"

#define INPUT_MAX   16384
#define FIELDS_MAX  64
#define KEY_MAX     64
#define DEFAULT_AGE 86400
#define SKEW_S      60 /* auth_date may be this far ahead of our clock */

static _Thread_local char werr[256];

static tg_status fail(tg_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static tg_status fail(tg_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(werr, sizeof werr, fmt, ap);
    va_end(ap);
    return st;
}

const char *tg_webapp_errmsg(void)
{
    return werr;
}

struct field {
    char *key, *val;
    size_t vlen;
};

struct fields {
    tg__arena arena;
    struct field f[FIELDS_MAX];
    size_t n;
};

/* Percent-decode s[0..n) into the arena ('+' is a space, as URLSearchParams reads it). */
static char *decode(tg__arena *a, const char *s, size_t n, size_t *out_len, size_t *bad)
{
    char *o = tg__arena_alloc(a, n + 1);
    size_t k = 0;
    if (!o)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%') {
            if (i + 2 >= n || tg__hexval((unsigned char)s[i + 1]) < 0 ||
                tg__hexval((unsigned char)s[i + 2]) < 0) {
                *bad = i;
                return NULL;
            }
            o[k++] = (char)(tg__hexval((unsigned char)s[i + 1]) << 4 |
                            tg__hexval((unsigned char)s[i + 2]));
            i += 2;
        } else {
            o[k++] = s[i] == '+' ? ' ' : s[i];
        }
    }
    o[k] = '\0';
    *out_len = k;
    return o;
}

static tg_status parse_query(struct fields *fs, const char *q, const char *what)
{
    size_t len = strlen(q);
    if (len > INPUT_MAX)
        return fail(TG_ERR_TOO_BIG, "%s: %zu bytes, at most %d", what, len, INPUT_MAX);
    for (size_t pos = 0; pos < len;) {
        const char *p = q + pos, *amp = memchr(p, '&', len - pos);
        size_t n = amp ? (size_t)(amp - p) : len - pos;
        const char *eq = memchr(p, '=', n);
        if (!eq || eq == p)
            return fail(TG_ERR_INVALID, "%s: byte %zu: a field without a key=value", what, pos);
        if (fs->n == FIELDS_MAX)
            return fail(TG_ERR_TOO_BIG, "%s: more than %d fields", what, FIELDS_MAX);
        size_t kl, vl, bad = 0;
        char *k = decode(&fs->arena, p, (size_t)(eq - p), &kl, &bad);
        char *v = k ? decode(&fs->arena, eq + 1, n - (size_t)(eq - p) - 1, &vl, &bad) : NULL;
        if (!k || !v)
            return fail(TG_ERR_INVALID, "%s: byte %zu: bad percent-encoding", what,
                        pos + bad + (k ? (size_t)(eq - p) + 1 : 0));
        if (kl == 0 || kl > KEY_MAX || strlen(k) != kl || strlen(v) != vl)
            return fail(TG_ERR_INVALID,
                        "%s: byte %zu: a key of 1..%d bytes without NUL, and "
                        "a value without NUL",
                        what, pos, KEY_MAX);
        for (size_t i = 0; i < fs->n; i++)
            if (strcmp(fs->f[i].key, k) == 0)
                return fail(TG_ERR_INVALID, "%s: field \"%s\" appears twice", what, k);
        fs->f[fs->n++] = (struct field){k, v, vl};
        pos += n + 1;
    }
    return TG_OK;
}

static const char *get(const struct fields *fs, const char *key)
{
    for (size_t i = 0; i < fs->n; i++)
        if (strcmp(fs->f[i].key, key) == 0)
            return fs->f[i].val;
    return NULL;
}

static int by_key(const void *a, const void *b)
{
    return strcmp((*(const struct field *const *)a)->key, (*(const struct field *const *)b)->key);
}

/* prefix + the sorted "key=value" lines but skip1/skip2, joined by '\n'; in the arena. */
static char *check_string(struct fields *fs, const char *prefix, const char *skip1,
                          const char *skip2, size_t *len)
{
    const struct field *sorted[FIELDS_MAX];
    size_t n = 0, total = strlen(prefix);
    for (size_t i = 0; i < fs->n; i++)
        if (strcmp(fs->f[i].key, skip1) != 0 && (!skip2 || strcmp(fs->f[i].key, skip2) != 0)) {
            sorted[n++] = &fs->f[i];
            total += strlen(fs->f[i].key) + 1 + fs->f[i].vlen + 1;
        }
    qsort(sorted, n, sizeof *sorted, by_key);
    char *s = tg__arena_alloc(&fs->arena, total + 1), *o = s;
    if (!s)
        return NULL;
    o += sprintf(o, "%s", prefix);
    for (size_t i = 0; i < n; i++) {
        size_t kl = strlen(sorted[i]->key);
        memcpy(o, sorted[i]->key, kl);
        o += kl;
        *o++ = '=';
        memcpy(o, sorted[i]->val, sorted[i]->vlen);
        o += sorted[i]->vlen;
        if (i + 1 < n)
            *o++ = '\n';
    }
    *o = '\0';
    *len = (size_t)(o - s);
    return s;
}

static bool unhex(const char *s, unsigned char *out, size_t n)
{
    return strlen(s) == 2 * n && tg__hex_decode(out, n, s, 2 * n) == n;
}

/* base64url (either alphabet, padding optional), exactly n bytes. */
static bool unbase64url(const char *s, unsigned char *out, size_t n)
{
    return tg__b64_decode(out, n, s, strlen(s)) == n;
}

static bool hmac_sha256(const void *key, size_t kl, const void *msg, size_t ml,
                        unsigned char out[32])
{
    unsigned int n = 32;
    return HMAC(EVP_sha256(), key, (int)kl, msg, ml, out, &n) && n == 32;
}

/* hash (hex) against HMAC-SHA256(secret, dcs). */
static tg_status check_hash(const char *what, const char *hash, const unsigned char secret[32],
                            const char *dcs, size_t dl)
{
    unsigned char want[32], got[32];
    if (!unhex(hash, got, 32))
        return fail(TG_ERR_INVALID, "%s: hash is not 64 hex digits", what);
    if (!hmac_sha256(secret, 32, dcs, dl, want))
        return fail(TG_ERR_NOMEM, "%s: HMAC-SHA256 failed", what);
    if (CRYPTO_memcmp(want, got, 32) != 0)
        return fail(TG_ERR_API,
                    "%s: hash does not match: not signed with this bot's token, or "
                    "changed on the way",
                    what);
    return TG_OK;
}

static tg_status check_signature(struct fields *fs, const tg_webapp_check *c)
{
    const char *sig = get(fs, "signature");
    if (!sig)
        return fail(TG_ERR_INVALID, "initData: signature is missing (bot_id asks for the "
                                    "third-party check)");
    unsigned char raw[64], key[32];
    if (!unbase64url(sig, raw, 64))
        return fail(TG_ERR_INVALID, "initData: signature is not 64 bytes of base64url");
    const char *hex = c->public_key_hex     ? c->public_key_hex
                      : c->test_environment ? TG_WEBAPP_PUBLIC_KEY_TEST
                                            : TG_WEBAPP_PUBLIC_KEY_PRODUCTION;
    if (!unhex(hex, key, 32))
        return fail(TG_ERR_INVALID, "initData: public_key_hex is not 64 hex digits");
    char prefix[40];
    snprintf(prefix, sizeof prefix, "%lld:WebAppData\n", (long long)c->bot_id);
    size_t ml;
    char *msg = check_string(fs, prefix, "hash", "signature", &ml);
    EVP_PKEY *pk = msg ? EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, key, 32) : NULL;
    EVP_MD_CTX *md = pk ? EVP_MD_CTX_new() : NULL;
    int ok = md && EVP_DigestVerifyInit(md, NULL, NULL, NULL, pk) == 1
                 ? EVP_DigestVerify(md, raw, 64, (const unsigned char *)msg, ml)
                 : -1;
    EVP_MD_CTX_free(md);
    EVP_PKEY_free(pk);
    if (ok < 0)
        return fail(TG_ERR_NOMEM, "initData: Ed25519 is not available");
    if (ok != 1)
        return fail(TG_ERR_API, "initData: signature does not verify with %s for bot %lld",
                    c->public_key_hex     ? "the given public key"
                    : c->test_environment ? "Telegram's test key"
                                          : "Telegram's production key",
                    (long long)c->bot_id);
    return TG_OK;
}

static tg_status check_age(const char *what, const char *auth, const tg_webapp_check *c,
                           int64_t *out)
{
    int64_t t;
    if (!auth || tg__parse_i64(auth, strlen(auth), &t) != 0 || t <= 0)
        return fail(TG_ERR_INVALID, "%s: auth_date is %s", what,
                    auth ? "not a Unix time" : "missing");
    *out = t;
    int64_t now = c->now_s ? c->now_s : (int64_t)time(NULL);
    uint64_t max = c->max_age_s ? c->max_age_s : DEFAULT_AGE;
    if (max == UINT64_MAX)
        return TG_OK;
    if (t > now + SKEW_S)
        return fail(TG_ERR_TIMEOUT, "%s: auth_date is %lld s in the future", what,
                    (long long)(t - now));
    if (now - t > 0 && (uint64_t)(now - t) > max)
        return fail(TG_ERR_TIMEOUT, "%s: auth_date is %lld s old, at most %llu allowed", what,
                    (long long)(now - t), (unsigned long long)max);
    return TG_OK;
}

/* ---- JSON members ---- */

static const char *jstr(const tg__jdoc *d, uint32_t obj, const char *key, tg__arena *a)
{
    uint32_t t = tg__json_obj_get(d, obj, key);
    return t != UINT32_MAX && d->toks[t].type == TG__J_STRING ? tg__json_str_dup(d, t, a, NULL)
                                                              : NULL;
}

static bool jbool(const tg__jdoc *d, uint32_t obj, const char *key)
{
    uint32_t t = tg__json_obj_get(d, obj, key);
    bool v = false;
    tg__jerr je;
    return t != UINT32_MAX && tg__json_get_bool(d, t, &v, &je) == 0 && v;
}

/* Parse JSON text as an object; its id into *id (required). */
static tg_status jobject(tg__jdoc *doc, const char *field, const char *text, int64_t *id)
{
    tg__jerr je;
    if (tg__json_parse(doc, text, strlen(text), &je) != 0 || doc->toks[0].type != TG__J_OBJECT)
        return fail(TG_ERR_INVALID, "initData: %s is not a JSON object", field);
    uint32_t t = tg__json_obj_get(doc, 0, "id");
    if (t == UINT32_MAX || tg__json_get_i64(doc, t, id, &je) != 0)
        return fail(TG_ERR_INVALID, "initData: %s has no integer id", field);
    return TG_OK;
}

static tg_status parse_user(const char *field, const char *text, tg_webapp_user *u, tg__arena *a)
{
    tg__jdoc doc;
    tg__jdoc_init(&doc, NULL);
    tg_status st = jobject(&doc, field, text, &u->id);
    if (st == TG_OK) {
        u->first_name = jstr(&doc, 0, "first_name", a);
        u->last_name = jstr(&doc, 0, "last_name", a);
        u->username = jstr(&doc, 0, "username", a);
        u->language_code = jstr(&doc, 0, "language_code", a);
        u->photo_url = jstr(&doc, 0, "photo_url", a);
        u->is_bot = jbool(&doc, 0, "is_bot");
        u->is_premium = jbool(&doc, 0, "is_premium");
        u->added_to_attachment_menu = jbool(&doc, 0, "added_to_attachment_menu");
        u->allows_write_to_pm = jbool(&doc, 0, "allows_write_to_pm");
    }
    tg__jdoc_cleanup(&doc);
    return st;
}

static tg_status parse_chat(const char *text, tg_webapp_chat *c, tg__arena *a)
{
    tg__jdoc doc;
    tg__jdoc_init(&doc, NULL);
    tg_status st = jobject(&doc, "chat", text, &c->id);
    if (st == TG_OK) {
        c->type = jstr(&doc, 0, "type", a);
        c->title = jstr(&doc, 0, "title", a);
        c->username = jstr(&doc, 0, "username", a);
        c->photo_url = jstr(&doc, 0, "photo_url", a);
    }
    tg__jdoc_cleanup(&doc);
    return st;
}

/* ---- Mini App ---- */

struct tg__webapp {
    tg_webapp_data pub; /* first: the public view */
    struct fields fs;
};

static tg_status fill(struct tg__webapp *w)
{
    struct fields *fs = &w->fs;
    tg_webapp_data *d = &w->pub;
    const char *v;
    tg_status st = TG_OK;
    d->query_id = get(fs, "query_id");
    d->chat_type = get(fs, "chat_type");
    d->chat_instance = get(fs, "chat_instance");
    d->start_param = get(fs, "start_param");
    if ((v = get(fs, "can_send_after")) && tg__parse_i64(v, strlen(v), &d->can_send_after) != 0)
        return fail(TG_ERR_INVALID, "initData: can_send_after is not an integer");
    if ((v = get(fs, "user")) && (st = parse_user("user", v, &d->user, &fs->arena)) == TG_OK)
        d->has_user = true;
    if (st == TG_OK && (v = get(fs, "receiver")) &&
        (st = parse_user("receiver", v, &d->receiver, &fs->arena)) == TG_OK)
        d->has_receiver = true;
    if (st == TG_OK && (v = get(fs, "chat")) && (st = parse_chat(v, &d->chat, &fs->arena)) == TG_OK)
        d->has_chat = true;
    return st;
}

static tg_status webapp_run(struct tg__webapp *w, const char *init_data, const tg_webapp_check *c)
{
    if (!c->bot_token && !c->bot_id)
        return fail(TG_ERR_INVALID, "initData: give bot_token (hash) or bot_id (signature)");
    tg_status st = parse_query(&w->fs, init_data, "initData");
    if (st != TG_OK)
        return st;
    if (c->bot_token) {
        const char *hash = get(&w->fs, "hash");
        if (!hash)
            return fail(TG_ERR_INVALID, "initData: hash is missing");
        unsigned char secret[32];
        size_t dl;
        char *dcs = check_string(&w->fs, "", "hash", NULL, &dl);
        if (!dcs || !hmac_sha256("WebAppData", 10, c->bot_token, strlen(c->bot_token), secret))
            return fail(TG_ERR_NOMEM, "initData: out of memory");
        st = check_hash("initData", hash, secret, dcs, dl);
        OPENSSL_cleanse(secret, sizeof secret);
        if (st != TG_OK)
            return st;
    }
    if (c->bot_id && (st = check_signature(&w->fs, c)) != TG_OK)
        return st;
    w->pub.signature_checked = c->bot_id != 0;
    if ((st = check_age("initData", get(&w->fs, "auth_date"), c, &w->pub.auth_date)) != TG_OK)
        return st;
    return fill(w);
}

tg_status tg_webapp_validate_sized(const char *init_data, tg_webapp_data **out,
                                   const tg_webapp_check *chk, size_t chk_size)
{
    tg_webapp_check c;
    werr[0] = '\0';
    if (out)
        *out = NULL;
    if (!init_data || !out || !chk)
        return fail(TG_ERR_INVALID, "initData: NULL argument");
    if (!tg__sized_in(&c, sizeof c, chk, chk_size))
        return fail(TG_ERR_INVALID, "initData: check: " TG__SIZED_ERRMSG);
    struct tg__webapp *w = tg__calloc(1, sizeof *w);
    if (!w)
        return fail(TG_ERR_NOMEM, "initData: out of memory");
    tg__arena_init(&w->fs.arena, 0, (size_t)INPUT_MAX * 8);
    tg_status st = webapp_run(w, init_data, &c);
    if (st != TG_OK) {
        tg_webapp_data_free(&w->pub);
        return st;
    }
    *out = &w->pub;
    return TG_OK;
}

const char *tg_webapp_field(const tg_webapp_data *d, const char *name)
{
    return d && name ? get(&((const struct tg__webapp *)d)->fs, name) : NULL;
}

void tg_webapp_data_free(tg_webapp_data *d)
{
    if (!d)
        return;
    struct tg__webapp *w = (struct tg__webapp *)d;
    tg__arena_cleanup(&w->fs.arena);
    tg__free(w);
}

/* ---- Login Widget ---- */

struct tg__login {
    tg_login_data pub;
    struct fields fs;
};

static tg_status login_run(struct tg__login *l, const char *query, const tg_webapp_check *c)
{
    if (!c->bot_token)
        return fail(TG_ERR_INVALID, "login: bot_token is required");
    tg_status st = parse_query(&l->fs, query, "login");
    if (st != TG_OK)
        return st;
    const char *hash = get(&l->fs, "hash"), *id = get(&l->fs, "id");
    if (!hash)
        return fail(TG_ERR_INVALID, "login: hash is missing");
    unsigned char secret[32];
    unsigned int n = 32;
    size_t dl;
    char *dcs = check_string(&l->fs, "", "hash", NULL, &dl);
    if (!dcs || !EVP_Digest(c->bot_token, strlen(c->bot_token), secret, &n, EVP_sha256(), NULL))
        return fail(TG_ERR_NOMEM, "login: out of memory");
    st = check_hash("login", hash, secret, dcs, dl);
    OPENSSL_cleanse(secret, sizeof secret);
    if (st != TG_OK)
        return st;
    if ((st = check_age("login", get(&l->fs, "auth_date"), c, &l->pub.auth_date)) != TG_OK)
        return st;
    if (!id || tg__parse_i64(id, strlen(id), &l->pub.user.id) != 0)
        return fail(TG_ERR_INVALID, "login: id is %s", id ? "not an integer" : "missing");
    l->pub.user.first_name = get(&l->fs, "first_name");
    l->pub.user.last_name = get(&l->fs, "last_name");
    l->pub.user.username = get(&l->fs, "username");
    l->pub.user.photo_url = get(&l->fs, "photo_url");
    return TG_OK;
}

tg_status tg_login_validate_sized(const char *query, tg_login_data **out,
                                  const tg_webapp_check *chk, size_t chk_size)
{
    tg_webapp_check c;
    werr[0] = '\0';
    if (out)
        *out = NULL;
    if (!query || !out || !chk)
        return fail(TG_ERR_INVALID, "login: NULL argument");
    if (!tg__sized_in(&c, sizeof c, chk, chk_size))
        return fail(TG_ERR_INVALID, "login: check: " TG__SIZED_ERRMSG);
    struct tg__login *l = tg__calloc(1, sizeof *l);
    if (!l)
        return fail(TG_ERR_NOMEM, "login: out of memory");
    tg__arena_init(&l->fs.arena, 0, (size_t)INPUT_MAX * 4);
    tg_status st = login_run(l, query, &c);
    if (st != TG_OK) {
        tg_login_data_free(&l->pub);
        return st;
    }
    *out = &l->pub;
    return TG_OK;
}

void tg_login_data_free(tg_login_data *d)
{
    if (!d)
        return;
    struct tg__login *l = (struct tg__login *)d;
    tg__arena_cleanup(&l->fs.arena);
    tg__free(l);
}
