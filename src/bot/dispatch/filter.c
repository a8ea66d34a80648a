/*
 * filter: routing predicates as values (kind, command, regex, callback data, chat, user,
 * conversation state, custom) and their and/or/not combinations. See tgbot/dispatch.h.
 *
 * Regexes are compiled once here (PCRE2, UTF mode); matching uses the worker's match data,
 * so evaluating a filter allocates nothing. A successful regex leaves its captures in the
 * handler context.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "bot/dispatch/dispatch_int.h"
#include "core/alloc.h"

static _Thread_local char filter_err[256];

const char *tg_filter_errmsg(void)
{
    return filter_err;
}

static tg_filter *fail(tg_filter *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static tg_filter *fail(tg_filter *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(filter_err, sizeof filter_err, fmt, ap);
    va_end(ap);
    tg_filter_free(f);
    return NULL;
}

static tg_filter *make(enum filter_type t, const char *s)
{
    tg_filter *f = tg__calloc(1, sizeof *f);
    if (!f)
        return fail(NULL, "filter: out of memory");
    f->type = t;
    if (s) {
        f->str = tg__strdup(s);
        f->len = strlen(s);
        if (!f->str)
            return fail(f, "filter: out of memory");
    }
    return f;
}

static tg_filter *make_regex(enum filter_type t, const char *pattern)
{
    if (!pattern)
        return fail(NULL, "regex filter: pattern is NULL");
    tg_filter *f = make(t, pattern);
    if (!f)
        return NULL;
    int code;
    PCRE2_SIZE off;
    f->re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &code, &off, NULL);
    if (!f->re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(code, msg, sizeof msg);
        return fail(f, "regex filter \"%.80s\": %s at offset %zu", pattern, (const char *)msg,
                    (size_t)off);
    }
    return f;
}

tg_filter *tg_filter_kind(tg_update_kind kind)
{
    if ((unsigned)kind >= TG_UPDATE_KIND_COUNT)
        return fail(NULL, "kind filter: %d is not an update kind", (int)kind);
    return tg_filter_kinds(TG_KIND_BIT(kind));
}

tg_filter *tg_filter_kinds(uint64_t mask)
{
    tg_filter *f = make(F_KINDS, NULL);
    if (f)
        f->mask = mask;
    return f;
}

tg_filter *tg_filter_command(const char *name)
{
    if (!name || !*name || strchr(name, '/') || strchr(name, ' '))
        return fail(NULL, "command filter: \"%s\" is not a command name (no '/', no spaces)",
                    name ? name : "(null)");
    return make(F_COMMAND, name);
}

tg_filter *tg_filter_regex(const char *pattern)
{
    return make_regex(F_REGEX, pattern);
}

tg_filter *tg_filter_callback_regex(const char *pattern)
{
    return make_regex(F_CB_REGEX, pattern);
}

static tg_filter *make_str(enum filter_type t, const char *s, const char *what)
{
    if (!s)
        return fail(NULL, "%s filter: string is NULL", what);
    return make(t, s);
}

tg_filter *tg_filter_text(const char *exact)
{
    return make_str(F_TEXT, exact, "text");
}

tg_filter *tg_filter_callback_prefix(const char *prefix)
{
    return make_str(F_CB_PREFIX, prefix, "callback");
}

tg_filter *tg_filter_inline_prefix(const char *prefix)
{
    return make_str(F_INLINE_PREFIX, prefix, "inline");
}

tg_filter *tg_filter_chat_type(const char *type)
{
    return make_str(F_CHAT_TYPE, type, "chat type");
}

tg_filter *tg_filter_state(const char *state)
{
    return make(F_STATE, state);
}

tg_filter *tg_filter_chat(int64_t chat_id)
{
    tg_filter *f = make(F_CHAT, NULL);
    if (f)
        f->id = chat_id;
    return f;
}

tg_filter *tg_filter_user(int64_t user_id)
{
    tg_filter *f = make(F_USER, NULL);
    if (f)
        f->id = user_id;
    return f;
}

tg_filter *tg_filter_fn_new(tg_filter_fn fn, void *user)
{
    if (!fn)
        return fail(NULL, "function filter: fn is NULL");
    tg_filter *f = make(F_FN, NULL);
    if (f) {
        f->fn = fn;
        f->user = user;
    }
    return f;
}

static tg_filter *combine(enum filter_type t, tg_filter *a, tg_filter *b)
{
    if (!a || (t != F_NOT && !b)) {
        tg_filter_free(a);
        tg_filter_free(b);
        return NULL; /* keeps the operand's error text */
    }
    tg_filter *f = make(t, NULL);
    if (!f) {
        tg_filter_free(a);
        tg_filter_free(b);
        return NULL;
    }
    f->a = a;
    f->b = b;
    return f;
}

tg_filter *tg_filter_and(tg_filter *a, tg_filter *b)
{
    return combine(F_AND, a, b);
}

tg_filter *tg_filter_or(tg_filter *a, tg_filter *b)
{
    return combine(F_OR, a, b);
}

tg_filter *tg_filter_not(tg_filter *a)
{
    return combine(F_NOT, a, NULL);
}

void tg_filter_free(tg_filter *f)
{
    if (!f)
        return;
    tg_filter_free(f->a);
    tg_filter_free(f->b);
    if (f->re)
        pcre2_code_free(f->re);
    tg__free(f->str);
    tg__free(f);
}

static bool regex_match(const tg_filter *f, struct tg_hctx *h, const char *subject)
{
    if (!subject || !h->md)
        return false;
    size_t n = strlen(subject);
    int rc = pcre2_match(f->re, (PCRE2_SPTR)subject, n, 0, 0, h->md, NULL);
    if (rc <= 0)
        return false;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(h->md);
    unsigned ncap = pcre2_get_ovector_count(h->md);
    if (ncap > TG__MAX_CAPTURES)
        ncap = TG__MAX_CAPTURES;
    for (unsigned i = 0; i < ncap; i++) {
        bool set = i < (unsigned)rc && ov[(size_t)2 * i] != PCRE2_UNSET;
        h->cap_p[i] = set ? subject + ov[(size_t)2 * i] : NULL;
        h->cap_n[i] = set ? ov[(size_t)2 * i + 1] - ov[(size_t)2 * i] : 0;
    }
    h->ncap = (unsigned)rc < ncap ? (unsigned)rc : ncap;
    return true;
}

static bool state_match(const tg_filter *f, struct tg_hctx *h)
{
    if (tg__conv_load(h) != TG_OK)
        return false;
    if (!f->str)
        return !h->conv.has;
    if (!h->conv.has)
        return false;
    return strcmp(f->str, "*") == 0 || strcmp(f->str, h->conv.state) == 0;
}

static bool prefix_of(const tg_filter *f, const char *s)
{
    return s && strncmp(s, f->str, f->len) == 0;
}

bool tg__filter_eval(const tg_filter *f, struct tg_hctx *h)
{
    const tg_event *ev = &h->ev;
    switch (f->type) {
    case F_KINDS:
        return (f->mask & TG_KIND_BIT(ev->kind)) != 0;
    case F_COMMAND:
        return ev->command && ev->command_len == f->len && ev->command_for_me &&
               memcmp(ev->command, f->str, f->len) == 0;
    case F_REGEX:
        return (TG_KIND_BIT(ev->kind) & TG_KINDS_MESSAGES) && regex_match(f, h, ev->text);
    case F_TEXT:
        return ev->text && strcmp(ev->text, f->str) == 0;
    case F_CB_PREFIX:
        return ev->kind == TG_UPDATE_CALLBACK_QUERY && prefix_of(f, ev->data);
    case F_CB_REGEX:
        return ev->kind == TG_UPDATE_CALLBACK_QUERY && regex_match(f, h, ev->data);
    case F_INLINE_PREFIX:
        return ev->kind == TG_UPDATE_INLINE_QUERY && prefix_of(f, ev->query);
    case F_CHAT_TYPE:
        return ev->chat_type && strcmp(ev->chat_type, f->str) == 0;
    case F_CHAT:
        return ev->has_chat && ev->chat_id == f->id;
    case F_USER:
        return ev->has_user && ev->user_id == f->id;
    case F_STATE:
        return state_match(f, h);
    case F_FN:
        return f->fn(h, f->user);
    case F_AND:
        return tg__filter_eval(f->a, h) && tg__filter_eval(f->b, h);
    case F_OR:
        return tg__filter_eval(f->a, h) || tg__filter_eval(f->b, h);
    case F_NOT:
        return !tg__filter_eval(f->a, h);
    }
    return false;
}

bool tg_filter_match(const tg_filter *f, tg_hctx *h)
{
    return f && h && tg__filter_eval(f, h);
}
