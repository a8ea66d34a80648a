/*
 * tgbot/webapp.h: checking data that claims to come from Telegram: a Mini App's initData
 * and the Login Widget's authorization data.
 *
 * Every Mini App backend must check Telegram.WebApp.initData before trusting the user in
 * it, and every site with a Login Widget the fields the widget hands over. Both are query
 * strings of fields; Telegram signs them:
 *  - initData's hash: HMAC-SHA256 keyed with HMAC-SHA256("WebAppData", bot token) over the
 *    data-check-string (every field but hash, sorted by key, "key=value" lines joined by
 *    "\n"). Needs the bot's token.
 *  - initData's signature (third parties, who must not know the token): Ed25519 by
 *    Telegram over "<bot_id>:WebAppData\n" and the data-check-string without hash and
 *    signature; checked with Telegram's published public key (production or test).
 *  - the Login Widget's hash: HMAC-SHA256 keyed with SHA256(bot token) over its
 *    data-check-string.
 * Then auth_date must be recent: stolen data stays signed forever.
 *
 *   tg_webapp_data *d;
 *   tg_status st = tg_webapp_validate(init_data, &d, &(tg_webapp_check){.bot_token = token});
 *   if (st != TG_OK)
 *       return http_403(tg_webapp_errmsg());          "initData: hash does not match ..."
 *   printf("user %lld, start %s\n", (long long)d->user.id, d->start_param);
 *   tg_webapp_data_free(d);
 *
 * Comparisons run in constant time. Errors never contain the token.
 * Thread-safety: every function may be called from any thread; errors are thread-local.
 */
#ifndef TGBOT_WEBAPP_H
#define TGBOT_WEBAPP_H

#include "tgbot/common.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Telegram's Ed25519 public keys for initData signatures (hex, as published). */
#define TG_WEBAPP_PUBLIC_KEY_PRODUCTION                                                            \
    "e7bf03a2fa4602af4580703d88dda5bb59f32ed8b02a56c187fe7d34caed242d"
#define TG_WEBAPP_PUBLIC_KEY_TEST "40055058a4ee38156a06562e52eece92a771bcd8346a8c4615cb7376eddf72ec"

/* What to check. At least one of bot_token and bot_id; both given: both must pass. */
typedef struct tg_webapp_check {
    const char *bot_token;      /* check hash with the bot's token (a secret: never logged) */
    int64_t bot_id;             /* check signature for this bot (the token's number) */
    bool test_environment;      /* signature by Telegram's test key, not production's */
    const char *public_key_hex; /* another Ed25519 key (64 hex digits): tgbot-emulator's */
    uint64_t max_age_s;         /* auth_date older than this is refused; 0 = 86400;
                                   UINT64_MAX = no age check (old published examples) */
    int64_t now_s;              /* "now" for the age check; 0 = the system clock */
} tg_webapp_check;

/* A user in initData (WebAppUser) or in Login Widget data. Strings NULL when absent. */
typedef struct tg_webapp_user {
    int64_t id;
    bool is_bot, is_premium, added_to_attachment_menu, allows_write_to_pm;
    const char *first_name, *last_name, *username, *language_code, *photo_url;
} tg_webapp_user;

/* A chat in initData (WebAppChat). */
typedef struct tg_webapp_chat {
    int64_t id;
    const char *type, *title, *username, *photo_url;
} tg_webapp_chat;

/* Checked initData. Strings NULL when absent; everything lives until tg_webapp_data_free. */
typedef struct tg_webapp_data {
    const char *query_id;
    bool has_user, has_receiver, has_chat;
    tg_webapp_user user, receiver;
    tg_webapp_chat chat;
    const char *chat_type, *chat_instance, *start_param;
    int64_t can_send_after; /* 0 when absent */
    int64_t auth_date;
    bool signature_checked; /* the Ed25519 signature was checked (bot_id was given) */
} tg_webapp_data;

/*
 * Check init_data (the query string, as Telegram.WebApp.initData has it) and parse it.
 * *out (freed with tg_webapp_data_free) on TG_OK. Errors:
 *   TG_ERR_INVALID  nothing to check with, a missing hash/signature/auth_date, a duplicate
 *                   field, bad percent-encoding, bad JSON in user/receiver/chat;
 *   TG_ERR_API      the hash or the signature does not match (not from Telegram, changed,
 *                   or for another bot);
 *   TG_ERR_TIMEOUT  auth_date older than max_age_s (or more than a minute in the future);
 *   TG_ERR_TOO_BIG  more than 16 KiB;  TG_ERR_NOMEM.
 * tg_webapp_errmsg() says which field and why.
 */
TG_API tg_status tg_webapp_validate_sized(const char *init_data, tg_webapp_data **out,
                                          const tg_webapp_check *chk, size_t chk_size);
#define tg_webapp_validate(init_data, out, ...)                                                    \
    tg_webapp_validate_sized((init_data), (out), (__VA_ARGS__), sizeof(tg_webapp_check))
/* A field of checked data by name, percent-decoded (also fields this header has no member
 * for); NULL when absent. Lives as long as d. */
TG_API const char *tg_webapp_field(const tg_webapp_data *d, const char *name);
TG_API void tg_webapp_data_free(tg_webapp_data *d); /* NULL-safe */

/* Checked Login Widget data. */
typedef struct tg_login_data {
    tg_webapp_user user; /* id, first_name, last_name, username, photo_url */
    int64_t auth_date;
} tg_login_data;

/* Check the Login Widget's fields, given as a query string (what its data-auth-url
 * redirect carries: id=..&first_name=..&auth_date=..&hash=..). Uses bot_token, max_age_s
 * and now_s of chk. Errors as tg_webapp_validate. */
TG_API tg_status tg_login_validate_sized(const char *query, tg_login_data **out,
                                         const tg_webapp_check *chk, size_t chk_size);
#define tg_login_validate(query, out, ...)                                                         \
    tg_login_validate_sized((query), (out), (__VA_ARGS__), sizeof(tg_webapp_check))
TG_API void tg_login_data_free(tg_login_data *d); /* NULL-safe */

/* Why the last tg_webapp_ / tg_login_ call on this thread failed ("" after success). */
TG_API const char *tg_webapp_errmsg(void);

#ifdef __cplusplus
}
#endif

#endif
