/*
 * tgbot/i18n.h: translated strings chosen by the user's language, from gettext catalogs.
 *
 * Catalogs are GNU gettext .mo files (compiled with msgfmt from .po files, the format every
 * translation tool and service reads and writes); plural forms come from each catalog's
 * own "Plural-Forms" formula. libtgbot reads the files itself instead of calling glibc's
 * gettext(), whose language is process-wide (setlocale / LANGUAGE): a bot answers many
 * users in many languages at once, from several threads.
 *
 *   tg_i18n *tr = tg_i18n_new("en");             the language of the msgids in the code
 *   tg_i18n_load_dir(tr, "locale", "mybot");      locale/<lang>/LC_MESSAGES/mybot.mo
 *   ...in a handler:
 *   const char *lang = tg_hctx_event(h)->language_code;       "pt-BR", "de", NULL, ...
 *   tg_reply(h, tg_i18n_get(tr, lang, "Hello!"));
 *   snprintf(buf, sizeof buf, tg_i18n_nget(tr, lang, "%d apple", "%d apples", n), n);
 *
 * Language choice: the code is lower-cased with '_' read as '-', then tried as is and with
 * its last subtag removed until one catalog has the message: "pt-BR" -> "pt-br" -> "pt".
 * When none has it, the default language's chain is tried the same way (a catalog for it is
 * only needed when msgids are keys such as "menu.greeting" rather than text), and then the
 * msgid itself is returned (for nget: msgid when n == 1, else msgid_plural). A NULL or ""
 * lang (users whose client sends none) starts at the default language.
 *
 * Errors: loading refuses a file that is not a well-formed .mo (bad magic, a table or string
 * outside the file, a string without its NUL, a charset other than UTF-8, a plural formula
 * that does not parse) with TG_ERR_DECODE, and tg_i18n_errmsg() says which file and what:
 * "locale/de/LC_MESSAGES/bot.mo: string 3 of the translation table runs past the end of the
 * file (offset 912, length 40, file 900 bytes)". A refused file changes nothing.
 *
 * Ownership: tg_i18n_new / tg_i18n_free; catalogs are copied in. Returned strings point into
 * the catalogs (or are the msgid passed in) and stay valid until tg_i18n_free.
 * Thread-safety: load every catalog before sharing; after that, the lookups may run on any
 * number of threads at once (they only read). Loading is not safe concurrently with lookups.
 */
#ifndef TGBOT_I18N_H
#define TGBOT_I18N_H

#include "tgbot/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_i18n tg_i18n;

/* default_lang: the language of the msgids ("en"); NULL = "en". NULL on out of memory. */
TG_API tg_i18n *tg_i18n_new(const char *default_lang);
TG_API void tg_i18n_free(tg_i18n *tr); /* NULL-safe */

/* Load the catalog for lang from a .mo file (replacing an earlier one for that language).
 * TG_OK, TG_ERR_IO (cannot read), TG_ERR_DECODE (not a valid .mo), TG_ERR_INVALID (bad
 * language code) or TG_ERR_NOMEM. */
TG_API tg_status tg_i18n_load_file(tg_i18n *tr, const char *lang, const char *path);
/* The same from memory (copied). name is used in error messages. */
TG_API tg_status tg_i18n_load_mem(tg_i18n *tr, const char *lang, const void *data, size_t len,
                                  const char *name);
/* Load <dir>/<lang>/LC_MESSAGES/<domain>.mo for every <lang> directory of dir that has one
 * (the layout msgfmt and gettext use). Stops at the first bad file. *count (optional) gets
 * the number loaded. */
TG_API tg_status tg_i18n_load_dir(tg_i18n *tr, const char *dir, const char *domain, size_t *count);
/* Why the last load failed ("" when it did not). */
TG_API const char *tg_i18n_errmsg(const tg_i18n *tr);

/* The translation of msgid for lang (see "Language choice"); never NULL for non-NULL msgid. */
TG_API const char *tg_i18n_get(const tg_i18n *tr, const char *lang, const char *msgid);
/* The same with a context (msgctxt), for one English word with two meanings. */
TG_API const char *tg_i18n_pget(const tg_i18n *tr, const char *lang, const char *context,
                                const char *msgid);
/* The plural form for n, by the catalog's Plural-Forms formula. */
TG_API const char *tg_i18n_nget(const tg_i18n *tr, const char *lang, const char *msgid,
                                const char *msgid_plural, uint64_t n);
/* The catalog language lang resolves to for msgid ("pt" for "pt-BR" when only pt has it), or
 * NULL when the msgid would be used. For logs and tests. */
TG_API const char *tg_i18n_resolve(const tg_i18n *tr, const char *lang, const char *msgid);

#ifdef __cplusplus
}
#endif

#endif
