/*
 * commands: the router's command menu and its publication through setMyCommands.
 *
 * The router keeps, per command, a default description, translations by language code and
 * a mask of scope kinds. Publishing builds the generated tg_set_my_commands_params for one
 * (scope, language) pair and calls it on the caller's ctx; the arrays live on the heap for
 * the call only.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "bot/dispatch/dispatch_int.h"
#include "core/alloc.h"
#include "tgbot/api.h"
#include "tgbot/i18n.h"
#include "tgbot/text.h"

#define MAX_COMMANDS 100 /* Telegram's limit per list */

void tg__router_commands_free(tg_router *r)
{
    for (size_t i = 0; i < r->ncmds; i++) {
        struct tg__command *c = &r->cmds[i];
        for (size_t j = 0; j < c->ntr; j++) {
            tg__free(c->tr[j].lang);
            tg__free(c->tr[j].description);
        }
        tg__free(c->tr);
        tg__free(c->name);
        tg__free(c->description);
    }
    tg__free(r->cmds);
}

static bool name_valid(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (n == 32 ||
            !((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '_'))
            return false;
    return n > 0;
}

static tg_status check(tg_router *r, const char *name, const char *lang, const char *desc)
{
    if (!name || !name_valid(name))
        return tg__router_fail(r, TG_ERR_INVALID,
                               "command \"%.40s\": a name is 1 to 32 of a-z, 0-9 and '_' (no '/')",
                               name ? name : "(null)");
    size_t units = desc ? tg_utf16_len(desc, strlen(desc)) : 0;
    if (units < 1 || units > 256)
        return tg__router_fail(r, TG_ERR_INVALID,
                               "command \"%s\": a description is 1 to 256 characters, not %zu",
                               name, units);
    if (lang && (!*lang || strlen(lang) > 35 ||
                 strspn(lang, "abcdefghijklmnopqrstuvwxyz"
                              "ABCDEFGHIJKLMNOPQRSTUVWXYZ-_") != strlen(lang)))
        return tg__router_fail(r, TG_ERR_INVALID,
                               "command \"%s\": \"%.40s\" is not a language code", name, lang);
    return TG_OK;
}

static struct tg__command *find(const tg_router *r, const char *name)
{
    for (size_t i = 0; i < r->ncmds; i++)
        if (strcmp(r->cmds[i].name, name) == 0)
            return &r->cmds[i];
    return NULL;
}

/* The command named name, added (without description) when new; NULL on out of memory. */
static struct tg__command *find_or_add(tg_router *r, const char *name)
{
    struct tg__command *c = find(r, name);
    if (c)
        return c;
    struct tg__command *n = tg__realloc(r->cmds, (r->ncmds + 1) * sizeof *n);
    if (!n)
        return NULL;
    r->cmds = n;
    c = &n[r->ncmds];
    memset(c, 0, sizeof *c);
    c->name = tg__strdup(name);
    if (!c->name)
        return NULL;
    r->ncmds++;
    return c;
}

/* Replace *slot with a copy of s. */
static bool set_str(char **slot, const char *s)
{
    char *copy = tg__strdup(s);
    if (!copy)
        return false;
    tg__free(*slot);
    *slot = copy;
    return true;
}

static bool set_translation(struct tg__command *c, const char *lang, const char *desc)
{
    for (size_t i = 0; i < c->ntr; i++)
        if (strcasecmp(c->tr[i].lang, lang) == 0)
            return set_str(&c->tr[i].description, desc);
    struct tg__command_tr *n = tg__realloc(c->tr, (c->ntr + 1) * sizeof *n);
    if (!n)
        return false;
    c->tr = n;
    n[c->ntr] = (struct tg__command_tr){0};
    if (!set_str(&n[c->ntr].lang, lang) || !set_str(&n[c->ntr].description, desc)) {
        tg__free(n[c->ntr].lang);
        return false;
    }
    c->ntr++;
    return true;
}

tg_status tg_router_describe_command(tg_router *r, const char *name, const char *lang,
                                     const char *description)
{
    if (!r)
        return TG_ERR_INVALID;
    tg_status st = check(r, name, lang, description);
    if (st != TG_OK)
        return st;
    struct tg__command *c = find_or_add(r, name);
    bool ok =
        c && (lang ? set_translation(c, lang, description) : set_str(&c->description, description));
    return ok ? TG_OK : tg__router_fail(r, TG_ERR_NOMEM, "command \"%s\": out of memory", name);
}

tg_status tg_router_command(tg_router *r, const char *name, const char *description,
                            tg_handler_fn fn, void *user)
{
    tg_status st = tg_router_describe_command(r, name, NULL, description);
    return st == TG_OK ? tg_router_on_command(r, name, fn, user) : st;
}

tg_status tg_router_translate_commands(tg_router *r, const tg_i18n *tr, const char *lang,
                                       size_t *count)
{
    if (count)
        *count = 0;
    if (!r || !tr || !lang)
        return TG_ERR_INVALID;
    for (size_t i = 0; i < r->ncmds; i++) {
        const char *def = r->cmds[i].description;
        const char *s = def ? tg_i18n_get(tr, lang, def) : NULL;
        if (!s || s == def)
            continue; /* not translated: the default stands */
        tg_status st = tg_router_describe_command(r, r->cmds[i].name, lang, s);
        if (st != TG_OK)
            return st;
        if (count)
            (*count)++;
    }
    return TG_OK;
}

tg_status tg_router_command_scopes(tg_router *r, const char *name, uint32_t scopes)
{
    if (!r || !name)
        return TG_ERR_INVALID;
    struct tg__command *c = find(r, name);
    if (!c)
        return tg__router_fail(r, TG_ERR_INVALID, "command \"%.40s\" is not described", name);
    c->scopes = scopes;
    return TG_OK;
}

static const char *description_for(const struct tg__command *c, const char *lang)
{
    for (size_t i = 0; lang && i < c->ntr; i++)
        if (strcasecmp(c->tr[i].lang, lang) == 0)
            return c->tr[i].description;
    return c->description;
}

tg_status tg_router_publish_commands(const tg_router *r, tg_ctx *ctx,
                                     const tg_bot_command_scope *scope, const char *lang)
{
    if (!r || !ctx)
        return TG_ERR_INVALID;
    int kind = scope ? (int)scope->kind : TG_BOT_COMMAND_SCOPE_DEFAULT;
    tg_bot_command *list = tg__calloc(r->ncmds ? r->ncmds : 1, sizeof *list);
    if (!list)
        return TG_ERR_NOMEM;
    size_t n = 0;
    for (size_t i = 0; i < r->ncmds; i++) {
        const struct tg__command *c = &r->cmds[i];
        const char *desc = description_for(c, lang);
        if (desc && (c->scopes == 0 || (kind < 32 && (c->scopes & TG_SCOPE_BIT(kind)))))
            list[n++] = (tg_bot_command){.command = c->name, .description = desc};
    }
    tg_status st = TG_ERR_INVALID;
    if (n <= MAX_COMMANDS) {
        tg_set_my_commands_params p = {
            .commands = list, .commands_count = n, .language_code = lang};
        if (scope)
            p.scope = *scope;
        st = tg_set_my_commands(ctx, &p);
    }
    tg__free(list);
    return st;
}

tg_status tg_router_publish_all_commands(const tg_router *r, tg_ctx *ctx,
                                         const tg_bot_command_scope *scope)
{
    tg_status st = tg_router_publish_commands(r, ctx, scope, NULL);
    for (size_t i = 0; st == TG_OK && r && i < r->ncmds; i++) {
        for (size_t j = 0; st == TG_OK && j < r->cmds[i].ntr; j++) {
            const char *lang = r->cmds[i].tr[j].lang;
            bool seen = false; /* published already for an earlier command? */
            for (size_t k = 0; k <= i && !seen; k++)
                for (size_t m = 0; m < r->cmds[k].ntr && !seen; m++)
                    seen = (k < i || m < j) && strcasecmp(r->cmds[k].tr[m].lang, lang) == 0;
            if (!seen)
                st = tg_router_publish_commands(r, ctx, scope, lang);
        }
    }
    return st;
}
