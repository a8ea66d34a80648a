/*
 * webapp: signed Mini App initData for emulated users (see webapp.h).
 */
#include "emulator/webapp.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bot/json/json.h"
#include "core/str.h"

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static EVP_PKEY *key;
static char key_hex[65];

static void make_key(void)
{
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, NULL);
    unsigned char pub[32];
    size_t n = sizeof pub;
    if (c && EVP_PKEY_keygen_init(c) == 1 && EVP_PKEY_keygen(c, &key) == 1 &&
        EVP_PKEY_get_raw_public_key(key, pub, &n) == 1 && n == 32)
        tg__hex_encode(key_hex, pub, sizeof pub);
    EVP_PKEY_CTX_free(c);
}

const char *emu_webapp_public_key(void)
{
    pthread_once(&key_once, make_key);
    return key_hex[0] ? key_hex : NULL;
}

struct kv {
    const char *k;
    char *v; /* malloc'ed */
};

static int by_key(const void *a, const void *b)
{
    return strcmp(((const struct kv *)a)->k, ((const struct kv *)b)->k);
}

/* The sorted key=value lines of f[0..n) after prefix, into b. */
static void check_string(tg__buf *b, const char *prefix, struct kv *f, size_t n)
{
    struct kv s[8];
    memcpy(s, f, n * sizeof *f);
    qsort(s, n, sizeof *s, by_key);
    tg__buf_reset(b);
    tg__buf_puts(b, prefix);
    for (size_t i = 0; i < n; i++) {
        if (i)
            tg__buf_putc(b, '\n');
        tg__buf_puts(b, s[i].k);
        tg__buf_putc(b, '=');
        tg__buf_puts(b, s[i].v);
    }
}

static char *user_json(const emu_user *u)
{
    tg__buf b;
    tg__jw w;
    tg__buf_init(&b, 4096);
    tg__jw_init(&w, &b);
    tg__jw_obj_begin(&w);
    TG__JW_KEY(&w, "id");
    tg__jw_i64(&w, u->id);
    const char *names[] = {"first_name", "last_name", "username", "language_code"};
    const char *vals[] = {u->first_name, u->last_name, u->username, u->language_code};
    for (int i = 0; i < 4; i++)
        if (vals[i]) {
            tg__jw_key(&w, names[i], strlen(names[i]));
            tg__jw_str(&w, vals[i]);
        }
    TG__JW_KEY(&w, "allows_write_to_pm");
    tg__jw_bool(&w, true);
    tg__jw_obj_end(&w);
    size_t len;
    return w.err ? (tg__buf_cleanup(&b), NULL) : tg__buf_detach(&b, &len);
}

int emu_webapp_init_data(const emu_bot *b, const emu_user *u, const char *start_param,
                         const char *chat_type, int64_t auth_date, tg__buf *out, char *err,
                         size_t errcap)
{
    if (!emu_webapp_public_key()) {
        snprintf(err, errcap, "no Ed25519 key for signing");
        return -1;
    }
    struct kv f[8];
    size_t n = 0;
    char qid[40], date[24];
    unsigned char r[12];
    if (RAND_bytes(r, sizeof r) != 1) {
        snprintf(err, errcap, "no random bytes for a query_id");
        return -1;
    }
    snprintf(qid, sizeof qid, "AAE");
    for (size_t i = 0; i < sizeof r; i++)
        snprintf(qid + 3 + 2 * i, 3, "%02x", r[i]);
    snprintf(date, sizeof date, "%lld", (long long)auth_date);
    f[n++] = (struct kv){"query_id", strdup(qid)};
    f[n++] = (struct kv){"user", user_json(u)};
    f[n++] = (struct kv){"auth_date", strdup(date)};
    if (start_param)
        f[n++] = (struct kv){"start_param", strdup(start_param)};
    if (chat_type)
        f[n++] = (struct kv){"chat_type", strdup(chat_type)};
    tg__buf dcs;
    tg__buf_init(&dcs, 65536);
    int rc = -1;
    for (size_t i = 0; i < n; i++)
        if (!f[i].v)
            goto out;
    /* signature first: Telegram's hash covers it */
    char prefix[40];
    snprintf(prefix, sizeof prefix, "%lld:WebAppData\n", (long long)b->u.id);
    check_string(&dcs, prefix, f, n);
    unsigned char sig[64];
    size_t sl = sizeof sig;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    bool ok = md && EVP_DigestSignInit(md, NULL, NULL, NULL, key) == 1 &&
              EVP_DigestSign(md, sig, &sl, (const unsigned char *)tg__buf_cstr(&dcs), dcs.len) == 1;
    EVP_MD_CTX_free(md);
    if (!ok || sl != 64)
        goto out;
    char s64[90]; /* base64url without padding, as Telegram writes it */
    tg__b64_encode(s64, sizeof s64, sig, sizeof sig, TG__B64_URL | TG__B64_NOPAD);
    f[n++] = (struct kv){"signature", strdup(s64)};
    if (!f[n - 1].v)
        goto out;
    unsigned char secret[32], mac[32];
    unsigned int ml = 32;
    check_string(&dcs, "", f, n);
    if (!HMAC(EVP_sha256(), "WebAppData", 10, (const unsigned char *)b->token, strlen(b->token),
              secret, &ml) ||
        !HMAC(EVP_sha256(), secret, 32, (const unsigned char *)tg__buf_cstr(&dcs), dcs.len, mac,
              &ml))
        goto out;
    tg__buf_reset(out);
    for (size_t i = 0; i < n; i++) {
        if (i)
            tg__buf_putc(out, '&');
        tg__buf_puts(out, f[i].k);
        tg__buf_putc(out, '=');
        tg__url_encode(out, f[i].v, strlen(f[i].v));
    }
    char hex[65];
    tg__hex_encode(hex, mac, sizeof mac);
    tg__buf_puts(out, "&hash=");
    tg__buf_puts(out, hex);
    rc = 0;
out:
    if (rc != 0)
        snprintf(err, errcap, "cannot sign the initData (out of memory or no Ed25519)");
    for (size_t i = 0; i < n; i++)
        free(f[i].v);
    tg__buf_cleanup(&dcs);
    return rc;
}
