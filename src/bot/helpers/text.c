/*
 * text: the formatted-text builder (tgbot/text.h).
 *
 * The text grows in a tg__buf; alongside it the builder counts UTF-16 code units, the unit
 * of entity offsets. tg_text_begin reserves the entity's slot at once, so entities come out
 * sorted by offset with an outer span before the spans it contains, and tg_text_end fills
 * in the length. URLs, languages, emoji ids and users live in an arena that dies with the
 * builder. The first error sticks; later calls are no-ops.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "bot/helpers/utf8.h"
#include "core/alloc.h"
#include "core/arena.h"
#include "core/buf.h"
#include "tgbot/text.h"

#define MAX_DEPTH 32 /* open spans at once */

struct tg_text {
    tg__buf text;
    size_t units; /* UTF-16 code units in text */
    tg_message_entity *ents;
    size_t nents, cap;
    size_t open[MAX_DEPTH]; /* slots of the open spans, innermost last */
    size_t depth;
    tg__arena arena;
    tg_status st;
    char err[160];
};

tg_text *tg_text_new(void)
{
    tg_text *t = tg__calloc(1, sizeof *t);
    if (!t)
        return NULL;
    tg__buf_init(&t->text, 0);
    tg__arena_init(&t->arena, 1024, 0);
    return t;
}

void tg_text_free(tg_text *t)
{
    if (!t)
        return;
    tg__buf_cleanup(&t->text);
    tg__arena_cleanup(&t->arena);
    tg__free(t->ents);
    tg__free(t);
}

void tg_text_clear(tg_text *t)
{
    if (!t)
        return;
    tg__buf_reset(&t->text);
    tg__arena_reset(&t->arena);
    t->units = t->nents = t->depth = 0;
    t->st = TG_OK;
    t->err[0] = '\0';
}

static tg_text *fail(tg_text *t, tg_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static tg_text *fail(tg_text *t, tg_status st, const char *fmt, ...)
{
    if (t->st != TG_OK)
        return t;
    t->st = st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->err, sizeof t->err, fmt, ap);
    va_end(ap);
    return t;
}

static bool usable(tg_text *t)
{
    return t && t->st == TG_OK;
}

static tg_text *append(tg_text *t, const char *s, size_t n)
{
    size_t bad;
    if (!tg__utf8_valid(s, n, &bad))
        return fail(t, TG_ERR_INVALID, "text: invalid UTF-8 at byte %zu of \"%.*s\"", bad,
                    (int)(n < 40 ? n : 40), s);
    if (tg__buf_append(&t->text, s, n) != 0)
        return fail(t, TG_ERR_NOMEM, "text: out of memory");
    t->units += tg_utf16_len(s, n);
    return t;
}

tg_text *tg_text_plain(tg_text *t, const char *s)
{
    if (!usable(t))
        return t;
    if (!s)
        return fail(t, TG_ERR_INVALID, "text: NULL string");
    return append(t, s, strlen(s));
}

tg_text *tg_text_printf(tg_text *t, const char *fmt, ...)
{
    if (!usable(t))
        return t;
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return fail(t, TG_ERR_INVALID, "text: bad format \"%s\"", fmt);
    if ((size_t)n < sizeof small)
        return append(t, small, (size_t)n);
    char *big = tg__malloc((size_t)n + 1);
    if (!big)
        return fail(t, TG_ERR_NOMEM, "text: out of memory");
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    append(t, big, (size_t)n);
    tg__free(big);
    return t;
}

/* Reserve the next entity slot for a span opening here. */
static tg_message_entity *open_span(tg_text *t, int32_t type)
{
    if (!usable(t))
        return NULL;
    if (t->depth == MAX_DEPTH) {
        fail(t, TG_ERR_INVALID, "text: more than %d spans open at once", MAX_DEPTH);
        return NULL;
    }
    if (t->nents == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 8;
        tg_message_entity *e = tg__realloc(t->ents, cap * sizeof *e);
        if (!e) {
            fail(t, TG_ERR_NOMEM, "text: out of memory");
            return NULL;
        }
        t->ents = e;
        t->cap = cap;
    }
    tg_message_entity *e = &t->ents[t->nents];
    memset(e, 0, sizeof *e);
    e->type.id = type;
    e->offset = (int64_t)t->units;
    t->open[t->depth++] = t->nents++;
    return e;
}

tg_text *tg_text_begin(tg_text *t, int32_t type)
{
    if (usable(t) && !tg_message_entity_type_to_str((tg_message_entity_type){type, NULL}))
        return fail(t, TG_ERR_INVALID, "text: %d is not an entity type", (int)type);
    open_span(t, type);
    return t;
}

/* A copy of s in the arena ("" for NULL); false after recording out of memory. */
static bool keep(tg_text *t, const char *s, const char **out)
{
    *out = tg__arena_strdup(&t->arena, s ? s : "");
    if (!*out)
        fail(t, TG_ERR_NOMEM, "text: out of memory");
    return *out != NULL;
}

tg_text *tg_text_begin_pre(tg_text *t, const char *language)
{
    tg_message_entity *e = open_span(t, TG_MESSAGE_ENTITY_TYPE_PRE);
    if (e && language && *language)
        keep(t, language, &e->language);
    return t;
}

tg_text *tg_text_begin_link(tg_text *t, const char *url)
{
    if (usable(t) && (!url || !*url))
        return fail(t, TG_ERR_INVALID, "text: a text link needs a URL");
    tg_message_entity *e = open_span(t, TG_MESSAGE_ENTITY_TYPE_TEXT_LINK);
    if (e)
        keep(t, url, &e->url);
    return t;
}

tg_text *tg_text_begin_user(tg_text *t, int64_t user_id)
{
    tg_message_entity *e = open_span(t, TG_MESSAGE_ENTITY_TYPE_TEXT_MENTION);
    if (!e)
        return t;
    tg_user *u = tg__arena_zalloc(&t->arena, sizeof *u);
    if (!u)
        return fail(t, TG_ERR_NOMEM, "text: out of memory");
    u->id = user_id;
    u->first_name = ""; /* required by the type; Telegram goes by the id */
    e->user = u;
    return t;
}

static tg_text *begin_emoji(tg_text *t, const char *id)
{
    if (usable(t) && (!id || !*id))
        return fail(t, TG_ERR_INVALID, "text: a custom emoji needs its custom_emoji_id");
    tg_message_entity *e = open_span(t, TG_MESSAGE_ENTITY_TYPE_CUSTOM_EMOJI);
    if (e)
        keep(t, id, &e->custom_emoji_id);
    return t;
}

tg_text *tg_text_end(tg_text *t)
{
    if (!usable(t))
        return t;
    if (t->depth == 0)
        return fail(t, TG_ERR_INVALID, "text: tg_text_end without an open span");
    size_t slot = t->open[--t->depth];
    tg_message_entity *e = &t->ents[slot];
    e->length = (int64_t)t->units - e->offset;
    if (e->length == 0) /* empty: everything after the slot is empty and already gone */
        t->nents = slot;
    return t;
}

static tg_text *spanned(tg_text *t, const char *s)
{
    if (usable(t) && t->depth && !s)
        return fail(t, TG_ERR_INVALID, "text: NULL string");
    tg_text_plain(t, s);
    return tg_text_end(t);
}

tg_text *tg_text_span(tg_text *t, int32_t type, const char *s)
{
    return spanned(tg_text_begin(t, type), s);
}

tg_text *tg_text_bold(tg_text *t, const char *s)
{
    return tg_text_span(t, TG_MESSAGE_ENTITY_TYPE_BOLD, s);
}

tg_text *tg_text_italic(tg_text *t, const char *s)
{
    return tg_text_span(t, TG_MESSAGE_ENTITY_TYPE_ITALIC, s);
}

tg_text *tg_text_underline(tg_text *t, const char *s)
{
    return tg_text_span(t, TG_MESSAGE_ENTITY_TYPE_UNDERLINE, s);
}

tg_text *tg_text_strikethrough(tg_text *t, const char *s)
{
    return tg_text_span(t, TG_MESSAGE_ENTITY_TYPE_STRIKETHROUGH, s);
}

tg_text *tg_text_spoiler(tg_text *t, const char *s)
{
    return tg_text_span(t, TG_MESSAGE_ENTITY_TYPE_SPOILER, s);
}

tg_text *tg_text_code(tg_text *t, const char *s)
{
    return tg_text_span(t, TG_MESSAGE_ENTITY_TYPE_CODE, s);
}

tg_text *tg_text_blockquote(tg_text *t, const char *s)
{
    return tg_text_span(t, TG_MESSAGE_ENTITY_TYPE_BLOCKQUOTE, s);
}

tg_text *tg_text_pre(tg_text *t, const char *s, const char *language)
{
    return spanned(tg_text_begin_pre(t, language), s);
}

tg_text *tg_text_link(tg_text *t, const char *s, const char *url)
{
    return spanned(tg_text_begin_link(t, url), s);
}

tg_text *tg_text_mention(tg_text *t, const char *s)
{
    if (usable(t) && (!s || s[0] != '@' || !s[1]))
        return fail(t, TG_ERR_INVALID, "text: a mention is \"@username\", not \"%.40s\"",
                    s ? s : "(null)");
    return tg_text_span(t, TG_MESSAGE_ENTITY_TYPE_MENTION, s);
}

tg_text *tg_text_user(tg_text *t, const char *s, int64_t user_id)
{
    return spanned(tg_text_begin_user(t, user_id), s);
}

tg_text *tg_text_custom_emoji(tg_text *t, const char *s, const char *custom_emoji_id)
{
    return spanned(begin_emoji(t, custom_emoji_id), s);
}

const char *tg_text_str(const tg_text *t)
{
    return t ? tg__buf_cstr(&t->text) : "";
}

size_t tg_text_len(const tg_text *t)
{
    return t ? t->text.len : 0;
}

size_t tg_text_utf16_len(const tg_text *t)
{
    return t ? t->units : 0;
}

const tg_message_entity *tg_text_entities(const tg_text *t)
{
    return t && t->nents ? t->ents : NULL;
}

size_t tg_text_entity_count(const tg_text *t)
{
    return t ? t->nents : 0;
}

tg_status tg_text_status(const tg_text *t)
{
    if (!t)
        return TG_ERR_INVALID;
    if (t->st == TG_OK && t->depth)
        return TG_ERR_INVALID;
    return t->st;
}

const char *tg_text_errmsg(const tg_text *t)
{
    if (!t)
        return "text: no builder";
    if (t->st == TG_OK && t->depth)
        return "text: a span is still open (tg_text_begin without tg_text_end)";
    return t->err;
}
