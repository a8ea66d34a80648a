/*
 * secret: the proxy secret in its three forms (brief section 1).
 *
 *   classic  K                 16 bytes    obfs2, tags efefefef / eeeeeeee
 *   dd       0xdd || K         17 bytes    obfs2, tag dddddddd
 *   ee       0xee || K || D    17+len(D)   FakeTLS with SNI D, then obfs2 tag dddddddd
 *
 * Only the 16 bytes of K are ever used for cryptography; the prefix and the domain never are.
 *
 * Text forms accepted by secret_parse (brief 1.2, the tdlib/mtg order): hex (either case) is
 * tried first and, when the text is valid hex, there is no fallback; otherwise base64url or
 * standard base64, padding optional, non-zero trailing bits rejected. The bytes are then
 * classified by length and first byte. An ee domain must be a DNS name of 1..182 bytes
 * (tdlib's cap, so we never emit a secret clients refuse), not an IP literal.
 *
 * Errors never echo the secret text or bytes. Thread-safety: pure functions, reentrant.
 */
#ifndef TGPROXY_SECRET_H
#define TGPROXY_SECRET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum secret_kind { SECRET_CLASSIC = 0, SECRET_DD = 1, SECRET_EE = 2 };

#define SECRET_KEY_LEN    16
#define SECRET_DOMAIN_MAX 182 /* longest ee domain tgproxy accepts / emits */

struct secret {
    enum secret_kind kind;
    uint8_t key[16];
    char domain[254]; /* ee only: SNI domain, NUL-terminated; "" otherwise */
    uint8_t domain_len;
};

/* Parse any accepted text form (hex of classic/dd/ee, base64 or base64url of ee, padded or
   not). 0, or -EINVAL with a message in err (never echoing the secret). err may be NULL. */
int secret_parse(const char *text, size_t len, struct secret *out, char *err, size_t errlen);

/* Text form: hex (all kinds) or base64url without padding (ee). Returns length or -1.
   out receives a NUL-terminated string; cap must include room for the NUL. base64 is
   accepted for every kind (it is what mtg emits for all of them). */
int secret_format(const struct secret *s, bool base64, char *out, size_t cap);

/* Binary form (prefix || K || D) into out; returns its length or -1 if cap is short. */
int secret_bytes(const struct secret *s, uint8_t *out, size_t cap);

/* Text forms of s that a log line could carry, for the log's scrub list: the hex of K in
   both cases (every hex form of every kind contains it) and, in both base64 alphabets
   without padding, the classic, dd and (for ee) the configured ee form. Each out[i] is
   NUL-terminated; returns the count (<= SECRET_FORMS_MAX). Wipe out after use. */
#define SECRET_FORMS_MAX 8
#define SECRET_FORM_CAP  272 /* base64 of 0xee || K || a 182-byte domain, with NUL */
size_t secret_scrub_forms(const struct secret *s, char out[SECRET_FORMS_MAX][SECRET_FORM_CAP]);

/* Replace, in place, every part of the NUL-terminated text that could be a secret or a
   piece of one by "[REDACTED]": a word (a run of hex and base64 characters) that
   secret_parse accepts and that mixes character classes (so "tolerate-time-skewness", which
   decodes as base64, stays), a run of 16 or more hex digits holding letters and digits, or a
   run of 20 or more base64url characters holding digits and both cases. For messages about
   text a user typed (config errors): a secret pasted in the wrong place is not in the log's
   scrub list yet. Returns how many parts were replaced. */
size_t secret_redact(char *text);

/* Whether s[0..n) holds a part secret_redact would replace. */
bool secret_lookalike(const char *s, size_t n);

/* Check that d[0..n) is an acceptable ee domain (DNS name, not an IP literal, 1..182 bytes).
   Returns NULL if fine, else a static reason. Used by secret_parse and by config code that
   takes key and domain separately. */
const char *secret_domain_problem(const char *d, size_t n);

#endif
