/*
 * tgbot/text.h: formatted text without a markup language, escaping for the two markup
 * languages, and the text an entity covers.
 *
 * Telegram formats a message with "entities": (type, offset, length) spans counted in UTF-16
 * code units (an emoji outside the Basic Multilingual Plane counts 2, "é" counts 1). The
 * builder tracks these counts for you:
 *
 *   tg_text *t = tg_text_new();
 *   tg_text_plain(t, "Hello, ");
 *   tg_text_bold(t, name);                    any UTF-8: names, emoji, CJK
 *   tg_text_plain(t, "! See ");
 *   tg_text_link(t, "the docs", "https://example.org");
 *   tg_text_begin(t, TG_MESSAGE_ENTITY_TYPE_ITALIC);   nesting: italic around bold
 *   tg_text_plain(t, " or ");
 *   tg_text_bold(t, "ask");
 *   tg_text_end(t);
 *   if (tg_text_status(t) != TG_OK) ... tg_text_errmsg(t) says why
 *   tg_send_message(ctx, &(tg_send_message_params){.chat_id = ..., .text = tg_text_str(t),
 *       .entities = tg_text_entities(t), .entities_count = tg_text_entity_count(t)}, &m);
 *   tg_text_free(t);
 *
 * No parse_mode is needed (nor allowed) with entities, so nothing in the text needs
 * escaping. For bots that build HTML or MarkdownV2 themselves, tg_escape() escapes the
 * user-supplied parts.
 *
 * Errors are sticky: the first bad input (invalid UTF-8, tg_text_end without a begin, a
 * missing URL, out of memory) is kept, later calls do nothing, and tg_text_status() /
 * tg_text_errmsg() report it. Check once before sending.
 *
 * Ownership: a tg_text is owned by its creator (tg_text_new / tg_text_free). Every string
 * passed in is copied. tg_text_str() and tg_text_entities() point into the builder and stay
 * valid until the next call that changes it, tg_text_clear() or tg_text_free().
 * Thread-safety: a tg_text is used by one thread at a time; the free functions (tg_escape,
 * tg_entity_text, tg_utf16_len) touch only their arguments.
 */
#ifndef TGBOT_TEXT_H
#define TGBOT_TEXT_H

#include "tgbot/api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_text tg_text;

TG_API tg_text *tg_text_new(void);    /* NULL on out of memory */
TG_API void tg_text_free(tg_text *t); /* NULL-safe */
/* Forget the text, entities and any error; memory is kept for reuse. */
TG_API void tg_text_clear(tg_text *t);

/* Append s (UTF-8, copied) without formatting. Every function returns t. */
TG_API tg_text *tg_text_plain(tg_text *t, const char *s);
TG_API tg_text *tg_text_printf(tg_text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * Open a span of type (TG_MESSAGE_ENTITY_TYPE_BOLD, _ITALIC, _UNDERLINE, _STRIKETHROUGH,
 * _SPOILER, _CODE, _BLOCKQUOTE, _EXPANDABLE_BLOCKQUOTE, ...): everything appended until the
 * matching tg_text_end() is covered. Spans nest. A span that ends up empty is dropped
 * (Telegram refuses zero-length entities).
 */
TG_API tg_text *tg_text_begin(tg_text *t, int32_t type);
/* Open a "pre" block with a programming language (NULL or "" = none). */
TG_API tg_text *tg_text_begin_pre(tg_text *t, const char *language);
/* Open a text link to url (required). */
TG_API tg_text *tg_text_begin_link(tg_text *t, const char *url);
/* Open a mention of a user without a username (text_mention) by id. */
TG_API tg_text *tg_text_begin_user(tg_text *t, int64_t user_id);
/* Close the innermost open span. */
TG_API tg_text *tg_text_end(tg_text *t);

/* One-call spans: open, append s, close. */
TG_API tg_text *tg_text_span(tg_text *t, int32_t type, const char *s);
TG_API tg_text *tg_text_bold(tg_text *t, const char *s);
TG_API tg_text *tg_text_italic(tg_text *t, const char *s);
TG_API tg_text *tg_text_underline(tg_text *t, const char *s);
TG_API tg_text *tg_text_strikethrough(tg_text *t, const char *s);
TG_API tg_text *tg_text_spoiler(tg_text *t, const char *s);
TG_API tg_text *tg_text_code(tg_text *t, const char *s);
TG_API tg_text *tg_text_pre(tg_text *t, const char *s, const char *language);
TG_API tg_text *tg_text_link(tg_text *t, const char *s, const char *url);
TG_API tg_text *tg_text_blockquote(tg_text *t, const char *s);
/* "@username" (type mention; s must start with '@'). */
TG_API tg_text *tg_text_mention(tg_text *t, const char *s);
/* A user by id, shown as s (type text_mention). */
TG_API tg_text *tg_text_user(tg_text *t, const char *s, int64_t user_id);
/* A custom emoji: s is its ordinary-emoji stand-in (e.g. "👍"), id its custom_emoji_id. */
TG_API tg_text *tg_text_custom_emoji(tg_text *t, const char *s, const char *custom_emoji_id);

/* The text so far, NUL-terminated UTF-8 ("" for a new builder). */
TG_API const char *tg_text_str(const tg_text *t);
/* Its length in bytes and in UTF-16 code units (Telegram's 4096 limit counts the latter). */
TG_API size_t tg_text_len(const tg_text *t);
TG_API size_t tg_text_utf16_len(const tg_text *t);
/* The entities, sorted by offset (outer spans before the spans they contain); NULL when
 * there are none. */
TG_API const tg_message_entity *tg_text_entities(const tg_text *t);
TG_API size_t tg_text_entity_count(const tg_text *t);
/* TG_OK, or the first error (TG_ERR_INVALID, TG_ERR_NOMEM); also TG_ERR_INVALID while a
 * span is still open. */
TG_API tg_status tg_text_status(const tg_text *t);
TG_API const char *tg_text_errmsg(const tg_text *t); /* "" when none */

/* ---- escaping for parse_mode ---- */

typedef enum tg_escape_mode {
    TG_ESCAPE_HTML = 0,         /* & < > " as &amp; &lt; &gt; &quot; */
    TG_ESCAPE_MARKDOWN_V2,      /* a backslash before each of _*[]()~`>#+-=|{}.!\ */
    TG_ESCAPE_MARKDOWN_V2_CODE, /* inside `code` and ```pre```: before ` and \ */
    TG_ESCAPE_MARKDOWN_V2_URL,  /* inside the (...) of a link: before ) and \ */
} tg_escape_mode;

/*
 * Escape s for mode into out (cap bytes, always NUL-terminated when cap > 0, truncated at a
 * whole escape). Returns the length the full result needs, without the NUL, as snprintf
 * does: the result was cut when the return value >= cap. out may be NULL when cap is 0.
 */
TG_API size_t tg_escape(tg_escape_mode mode, const char *s, char *out, size_t cap);

/* ---- entities of received messages ---- */

/* UTF-16 code units of the n bytes of UTF-8 at s (a malformed byte counts 1). */
TG_API size_t tg_utf16_len(const char *s, size_t n);

/*
 * The bytes of text (NUL-terminated UTF-8, e.g. message->text) that entity e covers:
 * *start and *len on TG_OK. TG_ERR_INVALID when e's offset or length falls outside text or
 * cuts a character (half of a surrogate pair). text and e are borrowed; *start points into
 * text.
 */
TG_API tg_status tg_entity_text(const char *text, const tg_message_entity *e, const char **start,
                                size_t *len);

#ifdef __cplusplus
}
#endif

#endif
