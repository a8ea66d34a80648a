/*
 * defaults.c: the bot-wide defaults (tg_bot_set_defaults), owned here.
 *
 * Each tg_bot_set_defaults publishes a new immutable snapshot (the values, a copy of the link
 * preview options and of its URL and of an unknown parse mode's string) with one atomic
 * store; readers (the encoder, through tg__bot_defaults) load the pointer once per call and
 * use what they got. Replaced snapshots stay on a list until tg_bot_free, so a reader never
 * sees freed memory and no lock is taken on the call path.
 * Thread-safety: setters serialise with a compare-and-swap; readers are lock-free.
 */
#include <stdatomic.h>
#include <string.h>

#include "bot/api/api.gen.h"
#include "bot/client/client_int.h"
#include "core/alloc.h"
#include "core/sized.h"

struct tg__defaults_snap {
    tg_bot_defaults d;
    tg_link_preview_options lpo;
    char *url;
    char *parse_mode_str;
    struct tg__defaults_snap *prev;
};

static const tg_bot_defaults no_defaults;

static void snap_free(struct tg__defaults_snap *s)
{
    tg__free(s->url);
    tg__free(s->parse_mode_str);
    tg__free(s);
}

static bool parse_mode_ok(const tg_strenum *pm)
{
    if (pm->id == TG_ENUM_ABSENT || pm->id == TG_ENUM_NONE)
        return true;
    if (pm->id == TG_ENUM_UNKNOWN)
        return pm->str && pm->str[0];
    return pm->id >= 2 && (uint32_t)pm->id < tg__e_parse_mode.count + 2;
}

TG_API tg_status tg_bot_set_defaults_sized(tg_bot *bot, const tg_bot_defaults *d, size_t d_size)
{
    tg_bot_defaults in;
    if (!bot)
        return TG_ERR_INVALID;
    if (!tg__sized_in(&in, sizeof in, d, d ? d_size : 0)) {
        tg__log(&bot->log, TG_LOG_ERROR, "tg_bot_set_defaults: " TG__SIZED_ERRMSG);
        return TG_ERR_INVALID;
    }
    if (!parse_mode_ok(&in.parse_mode)) {
        tg__log(&bot->log, TG_LOG_ERROR,
                "tg_bot_set_defaults: parse_mode id %d is not one of TG_PARSE_MODE_* "
                "(or TG_ENUM_STR(\"...\") for a newer one)",
                (int)in.parse_mode.id);
        return TG_ERR_INVALID;
    }
    struct tg__defaults_snap *s = tg__calloc(1, sizeof *s);
    if (!s)
        return TG_ERR_NOMEM;
    s->d = in;
    if (in.parse_mode.id == TG_ENUM_NONE)
        s->d.parse_mode = (tg_strenum){0}; /* "no default parse mode" is no default */
    if (in.parse_mode.id == TG_ENUM_UNKNOWN) {
        s->parse_mode_str = tg__strdup(in.parse_mode.str);
        s->d.parse_mode.str = s->parse_mode_str;
    } else {
        s->d.parse_mode.str = NULL;
    }
    if (in.link_preview_options) {
        s->lpo = *in.link_preview_options;
        s->lpo.raw = (tg_raw){0};
        if (in.link_preview_options->url)
            s->url = tg__strdup(in.link_preview_options->url);
        s->lpo.url = s->url;
        s->d.link_preview_options = &s->lpo;
    }
    if ((in.parse_mode.id == TG_ENUM_UNKNOWN && !s->parse_mode_str) ||
        (in.link_preview_options && in.link_preview_options->url && !s->url)) {
        snap_free(s);
        return TG_ERR_NOMEM;
    }
    struct tg__defaults_snap *old = atomic_load_explicit(&bot->defaults, memory_order_acquire);
    do
        s->prev = old;
    while (!atomic_compare_exchange_weak_explicit(&bot->defaults, &old, s, memory_order_acq_rel,
                                                  memory_order_acquire));
    return TG_OK;
}

const tg_bot_defaults *tg__bot_defaults(const tg_bot *bot)
{
    struct tg__defaults_snap *s =
        bot ? atomic_load_explicit(&((tg_bot *)bot)->defaults, memory_order_acquire) : NULL;
    if (!s)
        return NULL;
    const tg_bot_defaults *d = &s->d;
    bool any = d->parse_mode.id != TG_ENUM_ABSENT || d->link_preview_options ||
               d->protect_content.has || d->disable_notification.has;
    return any ? d : NULL;
}

TG_API const tg_bot_defaults *tg_bot_get_defaults(const tg_bot *bot)
{
    const tg_bot_defaults *d = tg__bot_defaults(bot);
    return d ? d : &no_defaults;
}

void tg__bot_defaults_free(tg_bot *bot)
{
    struct tg__defaults_snap *s = atomic_exchange(&bot->defaults, NULL);
    while (s) {
        struct tg__defaults_snap *prev = s->prev;
        snap_free(s);
        s = prev;
    }
}
