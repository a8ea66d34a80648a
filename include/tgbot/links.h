/*
 * tgbot/links.h: deep links to the bot and webhook secret tokens.
 *
 *   char link[TG_DEEP_LINK_MAX];
 *   tg_deep_link(link, sizeof link, "my_bot", "ref_42", false);
 *       -> "https://t.me/my_bot?start=ref_42"; the bot then sees "/start ref_42"
 *          (tg_hctx_payload() returns "ref_42").
 *   char payload[TG_DEEP_LINK_PAYLOAD_MAX + 1];
 *   tg_base64url_encode(payload, sizeof payload, bytes, 16);   arbitrary bytes as a payload
 *
 * Payload rules (Bot API, "Deep linking"): 1 to 64 characters of A-Z, a-z, 0-9, '_' and '-'.
 * Bot usernames: 5 to 32 characters of A-Z, a-z, 0-9 and '_' (given without '@').
 * Webhook secret tokens (setWebhook secret_token): 1 to 256 characters of the same set as
 * payloads.
 *
 * Ownership: every function writes into the caller's buffer (cap bytes, NUL-terminated on
 * success and set to "" on failure); inputs are borrowed for the call.
 * Thread-safety: all functions are safe from any thread (the secret generator uses
 * OpenSSL's RAND_bytes, which is thread-safe).
 */
#ifndef TGBOT_LINKS_H
#define TGBOT_LINKS_H

#include "tgbot/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TG_DEEP_LINK_PAYLOAD_MAX 64  /* characters */
#define TG_WEBHOOK_SECRET_MAX    256 /* characters */
/* Room for the longest link: "https://t.me/" + 32 + "?startgroup=" + 64 + NUL. */
#define TG_DEEP_LINK_MAX 128

/* True when payload is a valid start parameter (1..64 of [A-Za-z0-9_-]). */
TG_API bool tg_deep_link_payload_valid(const char *payload);

/*
 * Write "https://t.me/<bot>?start=<payload>" (group: "?startgroup=", which asks the user
 * for a group to add the bot to) into out. bot is the username without '@'. Returns TG_OK,
 * TG_ERR_INVALID (bad username or payload) or TG_ERR_TOO_BIG (cap too small).
 */
TG_API tg_status tg_deep_link(char *out, size_t cap, const char *bot, const char *payload,
                              bool group);

/*
 * Base64url without padding (RFC 4648 section 5), the alphabet payloads allow: 48 bytes
 * become at most 64 characters. encode: TG_OK or TG_ERR_TOO_BIG (cap needs
 * (len * 4 + 2) / 3 + 1). decode: TG_OK with *len bytes in out, TG_ERR_INVALID for a
 * character outside the alphabet or an impossible length, TG_ERR_TOO_BIG when out is short.
 */
TG_API tg_status tg_base64url_encode(char *out, size_t cap, const void *data, size_t len);
TG_API tg_status tg_base64url_decode(void *out, size_t cap, const char *s, size_t *len);

/*
 * A fresh webhook secret token of len characters (1..256; 0 = 64) from a secure random
 * source, uniform over [A-Za-z0-9_-]; out needs len + 1 bytes. TG_OK, TG_ERR_INVALID (bad
 * len), TG_ERR_TOO_BIG (cap) or TG_ERR_IO (no randomness available).
 */
TG_API tg_status tg_webhook_secret_generate(char *out, size_t cap, size_t len);

#ifdef __cplusplus
}
#endif

#endif
