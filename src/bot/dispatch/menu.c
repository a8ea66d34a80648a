/*
 * menu: inline-keyboard menus (tgbot/menu.h).
 *
 * A menu is a tree built before the dispatcher starts; tg_router_add_menu flattens it into
 * the router's list (ids must be unique there) and adds one route, "menu:" callbacks,
 * whose handler finds the menu by id and does what the pressed button says:
 *   menu:<id>:s:<page>    show <id> at page            (page buttons, back, submenus)
 *   menu:<id>:b<i>:<page> button i of <id>: its handler, or its submenu
 *   menu:<id>:i<k>:<page> item k of <id>'s list
 * then redraws in place with editMessageText (a "message is not modified" answer, when
 * nothing changed, is no error) and answers the callback query unless the handler did.
 * Presses carry everything needed: no state is kept between them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bot/dispatch/dispatch_int.h"
#include "core/alloc.h"
#include "tgbot/menu.h"

#define ID_MAX     16
#define PAGE_MAX   20
#define MARKUP_MAX (64 << 10)

struct item {
    char *label;
    tg_handler_fn fn;
    void *user;
    tg_menu *sub;
    bool row_before; /* starts a new row */
};

struct tg_menu {
    char id[ID_MAX + 1];
    char *text;
    tg_menu_text_fn text_fn;
    void *text_user;
    struct item *items;
    size_t nitems;
    bool next_row;
    tg_menu *parent;
    size_t per_page;
    tg_menu_count_fn count;
    tg_menu_label_fn label;
    tg_menu_item_fn on_item;
    void *list_user;
    bool added; /* owned by a router now */
};

static bool id_ok(const char *id)
{
    size_t n = id ? strlen(id) : 0;
    if (n == 0 || n > ID_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' && id[i] <= '9') || id[i] == '_'))
            return false;
    return true;
}

tg_menu *tg_menu_new(const char *id, const char *text)
{
    if (!id_ok(id))
        return NULL;
    tg_menu *m = tg__calloc(1, sizeof *m);
    if (!m || !(m->text = tg__strdup(text ? text : id))) {
        tg__free(m);
        return NULL;
    }
    snprintf(m->id, sizeof m->id, "%s", id);
    return m;
}

void tg_menu_free(tg_menu *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->nitems; i++) {
        tg__free(m->items[i].label);
        tg_menu_free(m->items[i].sub);
    }
    tg__free(m->items);
    tg__free(m->text);
    tg__free(m);
}

void tg_menu_text(tg_menu *m, tg_menu_text_fn fn, void *user)
{
    if (m) {
        m->text_fn = fn;
        m->text_user = user;
    }
}

static tg_status add_item(tg_menu *m, const char *label, tg_handler_fn fn, void *user, tg_menu *sub)
{
    if (!m || !label || !*label || m->added)
        return TG_ERR_INVALID;
    struct item *it = tg__realloc(m->items, (m->nitems + 1) * sizeof *it);
    if (!it)
        return TG_ERR_NOMEM;
    m->items = it;
    it = &m->items[m->nitems];
    *it = (struct item){.fn = fn, .user = user, .sub = sub, .row_before = m->next_row};
    if (!(it->label = tg__strdup(label)))
        return TG_ERR_NOMEM;
    m->next_row = false;
    m->nitems++;
    return TG_OK;
}

tg_status tg_menu_add_button(tg_menu *m, const char *label, tg_handler_fn fn, void *user)
{
    return add_item(m, label, fn, user, NULL);
}

tg_status tg_menu_add_submenu(tg_menu *m, const char *label, tg_menu *sub)
{
    if (!sub || sub->parent || sub->added)
        return TG_ERR_INVALID;
    for (const tg_menu *a = m; a; a = a->parent)
        if (a == sub) /* m is inside sub: a cycle */
            return TG_ERR_INVALID;
    tg_status st = add_item(m, label, NULL, NULL, sub);
    if (st == TG_OK)
        sub->parent = m;
    return st;
}

tg_status tg_menu_add_row(tg_menu *m)
{
    if (!m)
        return TG_ERR_INVALID;
    m->next_row = m->nitems > 0;
    return TG_OK;
}

tg_status tg_menu_add_list(tg_menu *m, size_t per_page, tg_menu_count_fn count,
                           tg_menu_label_fn label, tg_menu_item_fn on_item, void *user)
{
    if (!m || !count || !label || per_page == 0 || per_page > PAGE_MAX)
        return TG_ERR_INVALID;
    m->per_page = per_page;
    m->count = count;
    m->label = label;
    m->on_item = on_item;
    m->list_user = user;
    return TG_OK;
}

/* ---- the router's side ---- */

void tg__router_menus_free(tg_router *r)
{
    size_t roots = 0; /* roots free their trees: keep them first, then free */
    for (size_t i = 0; i < r->nmenus; i++)
        if (!r->menus[i]->parent)
            r->menus[roots++] = r->menus[i];
    for (size_t i = 0; i < roots; i++)
        tg_menu_free(r->menus[i]);
    tg__free(r->menus);
    r->menus = NULL;
    r->nmenus = 0;
}

static const tg_menu *find(const tg_router *r, const char *id, size_t n)
{
    for (size_t i = 0; i < r->nmenus; i++)
        if (strlen(r->menus[i]->id) == n && memcmp(r->menus[i]->id, id, n) == 0)
            return r->menus[i];
    return NULL;
}

/* Append m and its submenus to the router's list. */
static tg_status collect(tg_router *r, tg_menu *m)
{
    if (find(r, m->id, strlen(m->id)))
        return tg__router_fail(r, TG_ERR_INVALID, "menu \"%s\": the id is used already", m->id);
    tg_menu **nm = tg__realloc(r->menus, (r->nmenus + 1) * sizeof *nm);
    if (!nm)
        return tg__router_fail(r, TG_ERR_NOMEM, "menu: out of memory");
    r->menus = nm;
    r->menus[r->nmenus++] = m;
    m->added = true;
    for (size_t i = 0; i < m->nitems; i++)
        if (m->items[i].sub) {
            tg_status st = collect(r, m->items[i].sub);
            if (st != TG_OK)
                return st;
        }
    return TG_OK;
}

/* ---- drawing ---- */

static void button(tg__jw *w, const char *label, const char *id, const char *op, size_t page)
{
    char data[64];
    snprintf(data, sizeof data, "menu:%s:%s:%zu", id, op, page);
    tg__jw_obj_begin(w);
    TG__JW_KEY(w, "text");
    tg__jw_str(w, label);
    TG__JW_KEY(w, "callback_data");
    tg__jw_str(w, data);
    tg__jw_obj_end(w);
}

/* The list's rows for page (already clamped by draw). */
static void draw_list(tg_hctx *h, const tg_menu *m, tg__jw *w, size_t page, size_t n)
{
    size_t pages = (n + m->per_page - 1) / m->per_page;
    for (size_t k = page * m->per_page; k < n && k < (page + 1) * m->per_page; k++) {
        char op[24];
        snprintf(op, sizeof op, "i%zu", k);
        const char *label = m->label(h, k, m->list_user);
        tg__jw_arr_begin(w);
        button(w, label && *label ? label : "?", m->id, op, page);
        tg__jw_arr_end(w);
    }
    if (pages > 1) {
        tg__jw_arr_begin(w);
        if (page > 0)
            button(w, "\xe2\x80\xb9 Prev", m->id, "s", page - 1);
        if (page + 1 < pages)
            button(w, "Next \xe2\x80\xba", m->id, "s", page + 1);
        tg__jw_arr_end(w);
    }
}

/* "reply_markup":{...} of m at page into b (members without the outer braces). */
static bool markup(tg_hctx *h, const tg_menu *m, size_t page, size_t n, tg__buf *b)
{
    tg__jw w;
    tg__jw_init(&w, b);
    tg__jw_obj_begin(&w);
    TG__JW_KEY(&w, "reply_markup");
    tg__jw_obj_begin(&w);
    TG__JW_KEY(&w, "inline_keyboard");
    tg__jw_arr_begin(&w);
    if (m->count)
        draw_list(h, m, &w, page, n);
    bool open = false;
    for (size_t i = 0; i < m->nitems; i++) {
        if (open && m->items[i].row_before) {
            tg__jw_arr_end(&w);
            open = false;
        }
        if (!open) {
            tg__jw_arr_begin(&w);
            open = true;
        }
        char op[24];
        snprintf(op, sizeof op, "b%zu", i);
        button(&w, m->items[i].label, m->id, op, page);
    }
    if (open)
        tg__jw_arr_end(&w);
    if (m->parent) {
        tg__jw_arr_begin(&w);
        button(&w, "\xc2\xab Back", m->parent->id, "s", 0);
        tg__jw_arr_end(&w);
    }
    tg__jw_arr_end(&w);
    tg__jw_obj_end(&w);
    tg__jw_obj_end(&w);
    return !w.err;
}

/* A redraw that changes nothing gets "message is not modified": pressed, nothing to do. */
static tg_status edit_done(tg_hctx *h, tg_status st, const char *json, size_t len, void *user)
{
    (void)json, (void)len, (void)user;
    if (st == TG_ERR_API && strstr(tg_hctx_errmsg(h), "message is not modified")) {
        h->err[0] = '\0';
        return TG_OK;
    }
    return st;
}

static tg_status draw(tg_hctx *h, const tg_menu *m, size_t page, bool edit)
{
    size_t n = m->count ? m->count(h, m->list_user) : 0;
    size_t pages = m->count ? (n + m->per_page - 1) / m->per_page : 0;
    if (page >= pages)
        page = pages ? pages - 1 : 0;
    h->menu_page = page;
    h->menu_pages = pages;
    const char *text = m->text_fn ? m->text_fn(h, m->text_user) : m->text;
    tg__buf b;
    tg__buf_init(&b, MARKUP_MAX);
    if (!markup(h, m, page, n, &b)) {
        tg__buf_cleanup(&b);
        return tg_hctx_fail(h, TG_ERR_NOMEM, "menu %s: cannot encode its keyboard", m->id);
    }
    char *members = (char *)tg__buf_cstr(&b) + 1; /* drop the outer braces */
    members[strlen(members) - 1] = '\0';
    if (edit && h->lrun) { /* loop mode: the edit is queued; its answer is judged later */
        h->then_fn = edit_done;
        h->then_user = NULL;
    }
    tg_status st = edit ? tg_edit(h, text ? text : m->id, members)
                        : tg_send_ex(h, text ? text : m->id, members);
    h->then_fn = NULL;
    tg__buf_cleanup(&b);
    return edit ? edit_done(h, st, NULL, 0, NULL) : st;
}

size_t tg_menu_page(const tg_hctx *h, size_t *pages)
{
    if (pages)
        *pages = h->menu_pages;
    return h->menu_page;
}

tg_status tg_menu_send(tg_hctx *h, const tg_menu *m)
{
    if (!h || !m)
        return TG_ERR_INVALID;
    return draw(h, m, 0, false);
}

/* Answer the press (stops the button's spinner); st is the press's status so far: its
 * error, and error message, stay. */
static tg_status answer_press(tg_hctx *h, tg_status st)
{
    char keep[256];
    snprintf(keep, sizeof keep, "%s", h->err);
    tg_status ast = tg_answer(h, NULL);
    if (st != TG_OK)
        snprintf(h->err, sizeof h->err, "%s", keep);
    return st != TG_OK ? st : ast;
}

/* The menu route: "menu:<id>:<op>:<page>". */
static tg_status on_press(tg_hctx *h, void *user)
{
    const tg_router *r = user;
    const char *d = tg_hctx_event(h)->data + 5, *c1 = strchr(d, ':');
    const char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    const tg_menu *m = c1 ? find(r, d, (size_t)(c1 - d)) : NULL;
    if (!m || !c2)
        return tg_answer(h, "This menu is no longer available");
    size_t page = strtoul(c2 + 1, NULL, 10), k = strtoul(c1 + 2, NULL, 10);
    const tg_menu *show = m;
    tg_status st = TG_OK;
    if (c1[1] == 'b' && k < m->nitems) {
        const struct item *it = &m->items[k];
        if (it->sub) {
            show = it->sub;
            page = 0;
        } else if (it->fn) {
            st = it->fn(h, it->user);
        }
    } else if (c1[1] == 'i' && m->on_item && k < m->count(h, m->list_user)) {
        st = m->on_item(h, k, m->list_user);
        page = k / m->per_page;
    }
    if (h->lrun && !h->answered) /* loop mode: answer first, so that a redraw failing later
                                    (its calls are queued) cannot cancel the answer */
        st = answer_press(h, st);
    if (st == TG_OK)
        st = draw(h, show, page, true);
    if (!h->answered)
        st = answer_press(h, st);
    return st;
}

tg_status tg_router_add_menu(tg_router *r, tg_menu *root)
{
    if (!r || !root || root->parent || root->added)
        return TG_ERR_INVALID;
    bool first = r->nmenus == 0;
    tg_status st = collect(r, root);
    if (st != TG_OK)
        return st;
    if (first)
        st = tg_router_add(r, INT32_MIN, tg_filter_callback_prefix("menu:"), on_press, r);
    return st;
}
