/*
 * router: handlers in groups, middleware and the error handler. See tgbot/dispatch.h.
 *
 * Routes are kept sorted by group (stable: registration order within a group), so running an
 * update is one pass over the array: in each group the first route whose filter matches
 * runs, then the pass jumps to the next group. A handler error ends the pass (later groups
 * do not run) and goes to the error handler. The router is read-only while dispatching.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "bot/dispatch/dispatch_int.h"
#include "core/alloc.h"

tg_status tg__router_fail(tg_router *r, tg_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    return st;
}

tg_router *tg_router_new(void)
{
    return tg__calloc(1, sizeof(tg_router));
}

void tg_router_free(tg_router *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nroutes; i++)
        tg_filter_free(r->routes[i].filter);
    tg__router_commands_free(r);
    tg__router_menus_free(r);
    tg__router_limiters_free(r);
    tg__free(r->routes);
    tg__free(r->mw);
    tg__free(r->username);
    tg__free(r);
}

const char *tg_router_errmsg(const tg_router *r)
{
    return r ? r->err : "router is NULL";
}

tg_status tg_router_set_username(tg_router *r, const char *username)
{
    if (!r || !username)
        return TG_ERR_INVALID;
    if (username[0] == '@')
        username++;
    char *copy = tg__strdup(username);
    if (!copy)
        return tg__router_fail(r, TG_ERR_NOMEM, "set_username: out of memory");
    tg__free(r->username);
    r->username = copy;
    return TG_OK;
}

tg_status tg_router_add(tg_router *r, int group, tg_filter *filter, tg_handler_fn fn, void *user)
{
    if (!r) {
        tg_filter_free(filter);
        return TG_ERR_INVALID;
    }
    if (!filter)
        return tg__router_fail(r, TG_ERR_INVALID, "router_add: no filter (%s)",
                               tg_filter_errmsg()[0] ? tg_filter_errmsg() : "NULL given");
    if (!fn) {
        tg_filter_free(filter);
        return tg__router_fail(r, TG_ERR_INVALID, "router_add: handler is NULL");
    }
    if (r->nroutes == r->cap) {
        size_t ncap = r->cap ? r->cap * 2 : 16;
        struct route *nr = tg__realloc(r->routes, ncap * sizeof *nr);
        if (!nr) {
            tg_filter_free(filter);
            return tg__router_fail(r, TG_ERR_NOMEM, "router_add: out of memory");
        }
        r->routes = nr;
        r->cap = ncap;
    }
    size_t at = r->nroutes;
    while (at > 0 && r->routes[at - 1].group > group) {
        r->routes[at] = r->routes[at - 1];
        at--;
    }
    r->routes[at] = (struct route){.group = group, .filter = filter, .fn = fn, .user = user};
    r->nroutes++;
    return TG_OK;
}

tg_status tg_router_on_kind(tg_router *r, tg_update_kind kind, tg_handler_fn fn, void *user)
{
    return tg_router_add(r, 0, tg_filter_kind(kind), fn, user);
}

tg_status tg_router_on_command(tg_router *r, const char *name, tg_handler_fn fn, void *user)
{
    return tg_router_add(r, 0, tg_filter_command(name), fn, user);
}

tg_status tg_router_on_text(tg_router *r, const char *pattern, tg_handler_fn fn, void *user)
{
    return tg_router_add(r, 0, tg_filter_regex(pattern), fn, user);
}

tg_status tg_router_on_callback(tg_router *r, const char *prefix, tg_handler_fn fn, void *user)
{
    return tg_router_add(r, 0, tg_filter_callback_prefix(prefix), fn, user);
}

tg_status tg_router_use(tg_router *r, tg_before_fn before, tg_after_fn after, void *user)
{
    if (!r || (!before && !after))
        return TG_ERR_INVALID;
    struct middleware *m = tg__realloc(r->mw, (r->nmw + 1) * sizeof *m);
    if (!m)
        return tg__router_fail(r, TG_ERR_NOMEM, "router_use: out of memory");
    r->mw = m;
    r->mw[r->nmw++] = (struct middleware){before, after, user};
    return TG_OK;
}

void tg_router_on_error(tg_router *r, tg_error_fn fn, void *user)
{
    if (r) {
        r->on_error = fn;
        r->error_user = user;
    }
}

/* Run one handler; report an error to the error handler. */
static tg_status run_handler(tg_router *r, const struct route *rt, struct tg_hctx *h)
{
    tg_status st = rt->fn(h, rt->user);
    if (st != TG_OK) {
        if (!h->err[0])
            snprintf(h->err, sizeof h->err, "handler failed: %s", tg_strerror(st));
        if (r->on_error)
            r->on_error(h, st, h->err, r->error_user);
    }
    return st;
}

/* Commands are the common route: match them inline, without a call per route. */
static inline bool route_matches(const tg_filter *f, struct tg_hctx *h)
{
    if (f->type != F_COMMAND)
        return tg__filter_eval(f, h);
    const tg_event *ev = &h->ev;
    return ev->command_len == f->len && ev->command && ev->command_for_me &&
           memcmp(ev->command, f->str, f->len) == 0;
}

/* One pass: routes are sorted by group, so once a group has run a handler the rest of that
 * group is skipped by comparing the group number. */
static tg_status run_groups(tg_router *r, struct tg_hctx *h, bool *handled)
{
    bool group_done = false;
    int done_group = 0;
    for (size_t i = 0; i < r->nroutes; i++) {
        const struct route *rt = &r->routes[i];
        if (group_done && rt->group == done_group)
            continue;
        if (!route_matches(rt->filter, h))
            continue;
        *handled = true;
        group_done = true;
        done_group = rt->group;
        tg_status st = run_handler(r, rt, h);
        if (st != TG_OK)
            return st;
    }
    return TG_OK;
}

tg_status tg__router_run(tg_router *r, struct tg_hctx *h, bool *handled)
{
    *handled = false;
    size_t entered = 0;
    bool stopped = false;
    for (; entered < r->nmw; entered++) {
        const struct middleware *m = &r->mw[entered];
        if (m->before && m->before(h, m->user) == TG_STOP) {
            stopped = true;
            break;
        }
    }
    tg_status st = TG_OK;
    /* Conversation pre-routing (the cancel command, on_timeout) runs inside the middleware,
     * like any handler: a middleware that stops an update stops those too. */
    if (!stopped && tg__conv_pre_route(h))
        *handled = true;
    else if (!stopped)
        st = run_groups(r, h, handled);
    for (size_t i = entered; i-- > 0;)
        if (r->mw[i].after)
            r->mw[i].after(h, st, *handled, r->mw[i].user);
    return st;
}
