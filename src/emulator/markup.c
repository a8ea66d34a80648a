/*
 * markup: parse_mode text (HTML, MarkdownV2) into plain text plus MessageEntity values, and
 * the entities Telegram finds on its own in plain text (bot commands, mentions, hashtags,
 * URLs, e-mail addresses). Pure: text in, text and entities out (in the caller's arena).
 *
 * Offsets and lengths are in UTF-16 code units, as the Bot API counts them. Errors carry
 * Telegram's wording: "can't parse entities: Unsupported start tag "x" at byte offset 3".
 * Entities of length zero are dropped, as Telegram does. Nesting depth is capped.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/str.h"
#include "emulator/emu.h"

#define MAX_OPEN 16  /* nesting depth */
#define MAX_ENTS 256 /* entities per text */

size_t emu_utf16_len(const char *s, size_t n)
{
    size_t u = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c & 0xC0) != 0x80)
            u += c >= 0xF0 ? 2 : 1;
    }
    return u;
}

typedef struct open_ent {
    int32_t type;
    size_t start; /* utf-16 */
    size_t at;    /* byte offset in the input, for errors */
    char tag[16];
    const char *url, *lang;
} open_ent;

typedef struct mk {
    tg__arena *a;
    tg__buf out;
    size_t u16;
    open_ent open[MAX_OPEN];
    int nopen;
    tg_message_entity ents[MAX_ENTS];
    size_t nents;
    char *err;
    size_t errcap;
} mk;

static int mk_fail(mk *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int mk_fail(mk *m, const char *fmt, ...)
{
    int n = snprintf(m->err, m->errcap, "can't parse entities: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->err + n, m->errcap - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

static int put(mk *m, const char *s, size_t n)
{
    m->u16 += emu_utf16_len(s, n);
    return tg__buf_append(&m->out, s, n) == 0 ? 0 : mk_fail(m, "text is too long");
}

static int push(mk *m, int32_t type, const char *tag, size_t at)
{
    if (m->nopen == MAX_OPEN)
        return mk_fail(m, "too deep nesting at byte offset %zu", at);
    open_ent *o = &m->open[m->nopen++];
    memset(o, 0, sizeof *o);
    o->type = type;
    o->start = m->u16;
    o->at = at;
    tg__strlcpy(o->tag, tag, sizeof o->tag);
    return 0;
}

static int emit(mk *m, const open_ent *o)
{
    if (m->u16 == o->start)
        return 0;
    if (m->nents == MAX_ENTS)
        return mk_fail(m, "too many entities");
    tg_message_entity *e = &m->ents[m->nents++];
    memset(e, 0, sizeof *e);
    e->type =
        (tg_message_entity_type){o->type, tg__codec_enum_str(&tg__e_message_entity_type, o->type)};
    e->offset = (int64_t)o->start;
    e->length = (int64_t)(m->u16 - o->start);
    e->url = o->url;
    e->language = o->lang;
    return 0;
}

/* Entities sorted by offset, longer first at equal offsets, copied into the arena. */
static int finish(mk *m, char **text, tg_message_entity **ents, size_t *n)
{
    for (size_t i = 1; i < m->nents; i++) {
        tg_message_entity x = m->ents[i];
        size_t j = i;
        while (j > 0 && (m->ents[j - 1].offset > x.offset ||
                         (m->ents[j - 1].offset == x.offset && m->ents[j - 1].length < x.length))) {
            m->ents[j] = m->ents[j - 1];
            j--;
        }
        m->ents[j] = x;
    }
    *text = tg__arena_strndup(m->a, tg__buf_cstr(&m->out), m->out.len);
    *ents = m->nents ? tg__arena_memdup(m->a, m->ents, m->nents * sizeof *m->ents) : NULL;
    *n = m->nents;
    tg__buf_cleanup(&m->out);
    return *text ? 0 : mk_fail(m, "out of memory");
}

/* ---- HTML ---- */

static const struct {
    const char *tag;
    int32_t type;
} html_tags[] = {
    {"b", TG_MESSAGE_ENTITY_TYPE_BOLD},
    {"strong", TG_MESSAGE_ENTITY_TYPE_BOLD},
    {"i", TG_MESSAGE_ENTITY_TYPE_ITALIC},
    {"em", TG_MESSAGE_ENTITY_TYPE_ITALIC},
    {"u", TG_MESSAGE_ENTITY_TYPE_UNDERLINE},
    {"ins", TG_MESSAGE_ENTITY_TYPE_UNDERLINE},
    {"s", TG_MESSAGE_ENTITY_TYPE_STRIKETHROUGH},
    {"strike", TG_MESSAGE_ENTITY_TYPE_STRIKETHROUGH},
    {"del", TG_MESSAGE_ENTITY_TYPE_STRIKETHROUGH},
    {"tg-spoiler", TG_MESSAGE_ENTITY_TYPE_SPOILER},
    {"span", TG_MESSAGE_ENTITY_TYPE_SPOILER},
    {"code", TG_MESSAGE_ENTITY_TYPE_CODE},
    {"pre", TG_MESSAGE_ENTITY_TYPE_PRE},
    {"a", TG_MESSAGE_ENTITY_TYPE_TEXT_LINK},
    {"blockquote", TG_MESSAGE_ENTITY_TYPE_BLOCKQUOTE},
};

/* Value of attribute key in attrs[0..n) (quoted with ' or "), copied; NULL if absent. */
static char *attr(mk *m, const char *attrs, size_t n, const char *key)
{
    size_t kl = strlen(key);
    for (size_t i = 0; i + kl + 2 < n; i++) {
        if ((i && !isspace((unsigned char)attrs[i - 1])) || strncmp(attrs + i, key, kl) ||
            attrs[i + kl] != '=')
            continue;
        char q = attrs[i + kl + 1];
        const char *v = attrs + i + kl + 2;
        if (q != '"' && q != '\'')
            return NULL;
        const char *end = memchr(v, q, n - (size_t)(v - attrs));
        return end ? tg__arena_strndup(m->a, v, (size_t)(end - v)) : NULL;
    }
    return NULL;
}

static int html_open(mk *m, const char *name, size_t nn, const char *attrs, size_t an, size_t at)
{
    for (size_t i = 0; i < sizeof html_tags / sizeof html_tags[0]; i++) {
        if (strlen(html_tags[i].tag) != nn || strncmp(html_tags[i].tag, name, nn))
            continue;
        int32_t type = html_tags[i].type;
        char tag[16];
        snprintf(tag, sizeof tag, "%.*s", (int)nn, name);
        if (!strcmp(tag, "span")) {
            char *cls = attr(m, attrs, an, "class");
            if (!cls || strcmp(cls, "tg-spoiler"))
                return mk_fail(m, "Tag \"span\" must have class \"tg-spoiler\" at byte offset %zu",
                               at);
        }
        if (!strcmp(tag, "blockquote") && an && strstr(attrs, "expandable"))
            type = TG_MESSAGE_ENTITY_TYPE_EXPANDABLE_BLOCKQUOTE;
        if (push(m, type, tag, at))
            return -1;
        open_ent *o = &m->open[m->nopen - 1];
        if (type == TG_MESSAGE_ENTITY_TYPE_TEXT_LINK && !(o->url = attr(m, attrs, an, "href")))
            return mk_fail(m, "Can't find href of the link at byte offset %zu", at);
        if (!strcmp(tag, "code") && m->nopen > 1 &&
            m->open[m->nopen - 2].type == TG_MESSAGE_ENTITY_TYPE_PRE) {
            char *cls = attr(m, attrs, an, "class");
            if (cls && !strncmp(cls, "language-", 9))
                m->open[m->nopen - 2].lang = cls + 9;
            m->nopen--; /* <pre><code> is one pre entity */
            o = NULL;
        }
        return 0;
    }
    return mk_fail(m, "Unsupported start tag \"%.*s\" at byte offset %zu", (int)nn, name, at);
}

static int html_close(mk *m, const char *name, size_t nn, size_t at)
{
    char tag[16];
    snprintf(tag, sizeof tag, "%.*s", (int)(nn < 15 ? nn : 15), name);
    if (!strcmp(tag, "code") && m->nopen &&
        m->open[m->nopen - 1].type == TG_MESSAGE_ENTITY_TYPE_PRE)
        return 0; /* </code></pre> */
    if (m->nopen == 0 || strcmp(m->open[m->nopen - 1].tag, tag))
        return mk_fail(m,
                       "Unmatched end tag at byte offset %zu, expected \"</%s>\", found "
                       "\"</%s>\"",
                       at, m->nopen ? m->open[m->nopen - 1].tag : "", tag);
    return emit(m, &m->open[--m->nopen]);
}

static int html_entity(mk *m, const char *s, size_t n, size_t *used)
{
    static const struct {
        const char *name;
        const char *text;
    } named[] = {{"lt;", "<"}, {"gt;", ">"}, {"amp;", "&"}, {"quot;", "\""}};
    for (size_t i = 0; i < 4; i++) {
        size_t l = strlen(named[i].name);
        if (n > l && !strncmp(s + 1, named[i].name, l)) {
            *used = l + 1;
            return put(m, named[i].text, 1);
        }
    }
    if (n > 3 && s[1] == '#') {
        char *end;
        bool hex = s[2] == 'x' || s[2] == 'X';
        unsigned long cp = strtoul(s + (hex ? 3 : 2), &end, hex ? 16 : 10);
        if (end < s + n && *end == ';' && cp > 0 && cp < 0x110000 && (cp < 0xD800 || cp > 0xDFFF)) {
            char buf[4];
            *used = (size_t)(end - s) + 1;
            return put(m, buf, tg__utf8_put((uint32_t)cp, buf));
        }
    }
    *used = 1;
    return put(m, "&", 1); /* an unknown entity stays as text, as Telegram keeps it */
}

static int parse_html(mk *m, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        if (s[i] == '&') {
            size_t used;
            if (html_entity(m, s + i, n - i, &used))
                return -1;
            i += used;
            continue;
        }
        if (s[i] != '<') {
            size_t k = strcspn(s + i, "<&");
            if (put(m, s + i, k))
                return -1;
            i += k;
            continue;
        }
        const char *gt = memchr(s + i, '>', n - i);
        if (!gt)
            return mk_fail(m, "Unclosed start tag at byte offset %zu", i);
        bool close = s[i + 1] == '/';
        const char *name = s + i + 1 + close;
        size_t nn = strcspn(name, " \t\n>");
        if (nn == 0)
            return mk_fail(m, "Empty tag name at byte offset %zu", i);
        const char *attrs = name + nn;
        int rc = close ? html_close(m, name, nn, i)
                       : html_open(m, name, nn, attrs, (size_t)(gt - attrs), i);
        if (rc)
            return -1;
        i = (size_t)(gt - s) + 1;
    }
    if (m->nopen)
        return mk_fail(m, "Can't find end tag corresponding to start tag \"%s\"",
                       m->open[m->nopen - 1].tag);
    return 0;
}

/* ---- MarkdownV2 ---- */

static const char md_reserved[] = "_*[]()~`>#+-=|{}.!\\";

static int md_toggle(mk *m, int32_t type, const char *tag, size_t at)
{
    if (m->nopen && !strcmp(m->open[m->nopen - 1].tag, tag))
        return emit(m, &m->open[--m->nopen]);
    for (int i = 0; i < m->nopen; i++)
        if (!strcmp(m->open[i].tag, tag))
            return mk_fail(m, "Can't find end of %s entity at byte offset %zu", tag, m->open[i].at);
    return push(m, type, tag, at);
}

/* `code` and ```pre```: raw up to the closing backticks (\` and \\ escapes). */
static int md_code(mk *m, const char *s, size_t n, size_t *i)
{
    bool pre = n - *i >= 3 && !strncmp(s + *i, "```", 3);
    size_t at = *i, j = *i + (pre ? 3 : 1);
    const char *lang = NULL;
    if (pre) {
        size_t ln = strcspn(s + j, "\n");
        if (j + ln < n && ln > 0) {
            lang = tg__arena_strndup(m->a, s + j, ln);
            j += ln + 1;
        } else if (j + ln < n) {
            j += 1;
        }
    }
    if (push(m, pre ? TG_MESSAGE_ENTITY_TYPE_PRE : TG_MESSAGE_ENTITY_TYPE_CODE,
             pre ? "Pre" : "Code", at))
        return -1;
    m->open[m->nopen - 1].lang = lang;
    for (; j < n; j++) {
        if (s[j] == '\\' && j + 1 < n && (s[j + 1] == '`' || s[j + 1] == '\\')) {
            if (put(m, s + ++j, 1))
                return -1;
        } else if (s[j] == '`' && (!pre || (n - j >= 3 && !strncmp(s + j, "```", 3)))) {
            *i = j + (pre ? 3 : 1);
            return emit(m, &m->open[--m->nopen]);
        } else if (put(m, s + j, 1)) {
            return -1;
        }
    }
    return mk_fail(m, "Can't find end of %s entity at byte offset %zu", pre ? "Pre" : "Code", at);
}

/* "](url)" after a link's text. */
static int md_link_end(mk *m, const char *s, size_t n, size_t *i)
{
    open_ent *o = NULL;
    for (int k = m->nopen - 1; k >= 0; k--)
        if (!strcmp(m->open[k].tag, "TextUrl"))
            o = &m->open[k];
    if (!o || o != &m->open[m->nopen - 1])
        return mk_fail(m, "Character ']' is reserved and must be escaped with the preceding "
                          "'\\'");
    if (*i + 1 >= n || s[*i + 1] != '(')
        return mk_fail(m, "Can't find end of a URL at byte offset %zu", *i);
    const char *close = memchr(s + *i + 2, ')', n - *i - 2);
    if (!close)
        return mk_fail(m, "Can't find end of a URL at byte offset %zu", *i);
    o->url = tg__arena_strndup(m->a, s + *i + 2, (size_t)(close - (s + *i + 2)));
    *i = (size_t)(close - s) + 1;
    return emit(m, &m->open[--m->nopen]);
}

static int md_step(mk *m, const char *s, size_t n, size_t *i)
{
    char c = s[*i];
    size_t at = *i;
    bool two = *i + 1 < n && s[*i + 1] == c;
    switch (c) {
    case '\\':
        if (*i + 1 >= n || !((unsigned char)s[*i + 1] < 128 && s[*i + 1] > ' '))
            return mk_fail(m, "Character '\\' is reserved and must be escaped");
        *i += 2;
        return put(m, s + at + 1, 1);
    case '*':
        *i += 1;
        return md_toggle(m, TG_MESSAGE_ENTITY_TYPE_BOLD, "Bold", at);
    case '_':
        *i += two ? 2 : 1;
        return two ? md_toggle(m, TG_MESSAGE_ENTITY_TYPE_UNDERLINE, "Underline", at)
                   : md_toggle(m, TG_MESSAGE_ENTITY_TYPE_ITALIC, "Italic", at);
    case '~':
        *i += 1;
        return md_toggle(m, TG_MESSAGE_ENTITY_TYPE_STRIKETHROUGH, "Strikethrough", at);
    case '|':
        if (!two)
            break;
        *i += 2;
        return md_toggle(m, TG_MESSAGE_ENTITY_TYPE_SPOILER, "Spoiler", at);
    case '`':
        return md_code(m, s, n, i);
    case '[':
        *i += 1;
        return push(m, TG_MESSAGE_ENTITY_TYPE_TEXT_LINK, "TextUrl", at);
    case ']':
        return md_link_end(m, s, n, i);
    default:
        if (!strchr(md_reserved, c)) {
            size_t k = strcspn(s + at, md_reserved);
            *i += k;
            return put(m, s + at, k);
        }
    }
    return mk_fail(m, "Character '%c' is reserved and must be escaped with the preceding '\\'", c);
}

static int parse_md(mk *m, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;)
        if (md_step(m, s, n, &i))
            return -1;
    if (m->nopen)
        return mk_fail(m, "Can't find end of %s entity at byte offset %zu",
                       m->open[m->nopen - 1].tag, m->open[m->nopen - 1].at);
    return 0;
}

int emu_markup_parse(int32_t mode, const char *in, tg__arena *a, char **text,
                     tg_message_entity **ents, size_t *nents, char *err, size_t errcap)
{
    mk *m = tg__arena_zalloc(a, sizeof *m);
    if (!m) {
        snprintf(err, errcap, "out of memory");
        return -1;
    }
    m->a = a;
    m->err = err;
    m->errcap = errcap;
    tg__buf_init(&m->out, 1 << 20);
    int rc = mode == TG_PARSE_MODE_HTML ? parse_html(m, in) : parse_md(m, in);
    if (rc == 0)
        return finish(m, text, ents, nents);
    tg__buf_cleanup(&m->out);
    return -1;
}

/* ---- entities found in plain text ---- */

static bool word_char(unsigned char c)
{
    return isalnum(c) || c == '_' || c >= 0x80;
}

/* Length of the token at s that forms an entity of kind type, or 0. */
static size_t auto_token(const char *s, int32_t *type)
{
    size_t k;
    if (*s == '/' && (k = strspn(s + 1, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789_@")) > 0) {
        *type = TG_MESSAGE_ENTITY_TYPE_BOT_COMMAND;
        return k + 1;
    }
    if ((*s == '@' || *s == '#') &&
        (k = strspn(s + 1, "abcdefghijklmnopqrstuvwxyz"
                           "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")) >= (*s == '@' ? 4 : 1)) {
        *type = *s == '@' ? TG_MESSAGE_ENTITY_TYPE_MENTION : TG_MESSAGE_ENTITY_TYPE_HASHTAG;
        return k + 1;
    }
    if (!strncmp(s, "http://", 7) || !strncmp(s, "https://", 8)) {
        *type = TG_MESSAGE_ENTITY_TYPE_URL;
        return strcspn(s, " \t\n\"<>");
    }
    return 0;
}

int emu_auto_entities(const char *text, tg__arena *a, tg_message_entity **ents, size_t *nents)
{
    size_t n = strlen(text), count = 0;
    tg_message_entity tmp[MAX_ENTS];
    for (size_t i = 0; i < n && count < MAX_ENTS;) {
        int32_t type = 0;
        size_t k =
            (i == 0 || !word_char((unsigned char)text[i - 1])) ? auto_token(text + i, &type) : 0;
        if (k == 0) {
            i++;
            continue;
        }
        tg_message_entity *e = &tmp[count++];
        memset(e, 0, sizeof *e);
        e->type =
            (tg_message_entity_type){type, tg__codec_enum_str(&tg__e_message_entity_type, type)};
        e->offset = (int64_t)emu_utf16_len(text, i);
        e->length = (int64_t)emu_utf16_len(text + i, k);
        i += k;
    }
    if (count == 0)
        return 0;
    tg_message_entity *all = tg__arena_alloc(a, (*nents + count) * sizeof *all);
    if (!all)
        return -1;
    if (*nents)
        memcpy(all, *ents, *nents * sizeof *all);
    memcpy(all + *nents, tmp, count * sizeof *all);
    *ents = all;
    *nents += count;
    return 0;
}

/* ---- links (text_link entities, URL buttons) ----
 * Telegram checks every link a bot gives (TDLib's LinkManager::check_link) and refuses the
 * message otherwise, so a bot can never show a javascript: or data: link. What is checked
 * here, as Telegram does:
 *  - "SCHEME://...": http and https need a host; tg and ton are Telegram's own; any other
 *    scheme is "Unsupported URL protocol";
 *  - "tg:..." and "ton:..." without "//" are Telegram's too;
 *  - anything else is an http link without its scheme: HOST[:PORT][/...]. The host may not
 *    be empty ("URL host is empty"), the port must be 1..65535 ("Wrong port number specified
 *    in the URL"; so "javascript:alert(1)" fails here, as on Telegram), and the link becomes
 *    "http://HOST[:PORT]/..." (a "/" added when there is no path), as Telegram returns it;
 *  - control characters are "Wrong HTTP URL".
 * Not emulated: Telegram's refusal of some hosts (localhost in buttons) and its punycode
 * and case normalization. */

static bool scheme_char(char c)
{
    return isalnum((unsigned char)c) || c == '+' || c == '-' || c == '.';
}

static bool prefix_ci(const char *s, const char *p)
{
    return !strncasecmp(s, p, strlen(p));
}

/* HOST[:PORT] of s[0..n) (userinfo "...@" skipped): NULL if fine, else the reason. */
static const char *check_authority(const char *s, size_t n)
{
    const char *at = NULL;
    for (size_t i = 0; i < n; i++)
        if (s[i] == '@')
            at = s + i;
    if (at) {
        n -= (size_t)(at + 1 - s);
        s = at + 1;
    }
    size_t hl = n;
    if (n && s[0] == '[') {
        const char *rb = memchr(s, ']', n);
        hl = rb ? (size_t)(rb - s) + 1 : n;
    } else {
        const char *colon = memchr(s, ':', n);
        hl = colon ? (size_t)(colon - s) : n;
    }
    if (hl == 0)
        return "URL host is empty";
    if (hl < n) {
        if (s[hl] != ':')
            return "Wrong HTTP URL";
        unsigned long port = 0;
        size_t digits = n - hl - 1;
        for (size_t i = hl + 1; i < n && port <= 65535; i++) {
            if (!isdigit((unsigned char)s[i]))
                return "Wrong port number specified in the URL";
            port = port * 10 + (unsigned long)(s[i] - '0');
        }
        if (digits == 0 || port == 0 || port > 65535)
            return "Wrong port number specified in the URL";
    }
    return NULL;
}

const char *emu_link_check(const char *url, tg__arena *a, const char **out)
{
    *out = url;
    if (!url || !*url)
        return "URL host is empty";
    for (const char *p = url; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return "Wrong HTTP URL";
    if (prefix_ci(url, "tg:") || prefix_ci(url, "ton:"))
        return NULL;
    const char *sep = strstr(url, "://");
    size_t sl = sep ? (size_t)(sep - url) : 0;
    bool scheme = sl > 0 && isalpha((unsigned char)url[0]);
    for (size_t i = 0; scheme && i < sl; i++)
        scheme = scheme_char(url[i]);
    const char *rest = url;
    if (scheme) {
        if (!(sl == 4 && prefix_ci(url, "http")) && !(sl == 5 && prefix_ci(url, "https")))
            return "Unsupported URL protocol";
        rest = sep + 3;
    }
    size_t al = strcspn(rest, "/?#");
    const char *why = check_authority(rest, al);
    if (why || scheme)
        return why;
    size_t n = strlen(url);
    char *norm = tg__arena_alloc(a, n + 9);
    if (!norm)
        return "Wrong HTTP URL";
    snprintf(norm, n + 9, "http://%s%s", url, rest[al] ? "" : "/");
    *out = norm;
    return NULL;
}

int emu_links_check(tg_message_entity *ents, size_t n, tg__arena *a, char *err, size_t errcap)
{
    for (size_t i = 0; i < n; i++) {
        if (ents[i].type.id != TG_MESSAGE_ENTITY_TYPE_TEXT_LINK)
            continue;
        const char *why = emu_link_check(ents[i].url, a, &ents[i].url);
        if (why) {
            snprintf(err, errcap, "entity URL '%.200s' is invalid: %s",
                     ents[i].url ? ents[i].url : "", why);
            return -1;
        }
    }
    return 0;
}

int emu_kb_links_check(tg_inline_keyboard_markup *kb, tg__arena *a, char *err, size_t errcap)
{
    for (size_t i = 0; kb && i < kb->inline_keyboard_count; i++)
        for (size_t j = 0; j < kb->inline_keyboard[i].count; j++) {
            tg_inline_keyboard_button *b =
                (tg_inline_keyboard_button *)&kb->inline_keyboard[i].items[j];
            const char *why = b->url ? emu_link_check(b->url, a, &b->url) : NULL;
            if (why) {
                snprintf(err, errcap, "inline keyboard button URL '%.200s' is invalid: %s",
                         b->url, why);
                return -1;
            }
        }
    return 0;
}
