/*
 * keyboard: the checks behind the keyboard macros of tgbot/keyboard.h.
 *
 * The macros build the generated structs in compound literals; these functions only read
 * them. A keyboard that breaks a rule of the Bot API page is swapped for a poisoned value
 * the encoder refuses (an inline button whose style id is out of range; a reply markup of
 * unknown kind without JSON), so the call fails with TG_ERR_INVALID before anything is sent
 * rather than sending a keyboard Telegram would reject or, worse, silently drop.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "bot/helpers/keyboard_int.h"
#include "tgbot/keyboard.h"

static _Thread_local char kb_err[256];

static tg_status fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static tg_status fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(kb_err, sizeof kb_err, fmt, ap);
    va_end(ap);
    return TG_ERR_INVALID;
}

const char *tg_keyboard_errmsg(void)
{
    return kb_err;
}

void tg__keyboard_seterr(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(kb_err, sizeof kb_err, fmt, ap);
    va_end(ap);
}

/* The encoder refuses an enum id below 2 other than 0 (absent), 1 with a string and -1
 * (TG_ENUM_NONE, not sent): see encode.c enc_enum. */
static const tg_inline_keyboard_button poison_button = {
    .text = "invalid keyboard", .callback_data = "invalid", .style = {-2, NULL}};
static const tg_inline_keyboard_button_list poison_row = {&poison_button, 1};
static const tg_inline_keyboard_markup poison_inline = {.inline_keyboard = &poison_row,
                                                        .inline_keyboard_count = 1};

/* How many actions an inline button has (the Bot API wants exactly one). */
static int inline_actions(const tg_inline_keyboard_button *b)
{
    return (b->url != NULL) + (b->callback_data != NULL) + (b->web_app != NULL) +
           (b->login_url != NULL) + (b->switch_inline_query != NULL) +
           (b->switch_inline_query_current_chat != NULL) +
           (b->switch_inline_query_chosen_chat != NULL) + (b->copy_text != NULL) +
           (b->callback_game != NULL) + (b->pay.has && b->pay.v);
}

static tg_status check_inline_button(const tg_inline_keyboard_button *b, size_t r, size_t c)
{
    if (!b->text || !*b->text)
        return fail("inline keyboard: row %zu, button %zu: text is empty", r + 1, c + 1);
    int n = inline_actions(b);
    if (n != 1)
        return fail("inline keyboard: row %zu, button %zu (\"%.40s\"): has %d actions; "
                    "Telegram wants exactly one (callback_data, url, web_app, ...)",
                    r + 1, c + 1, b->text, n);
    if (b->callback_data) {
        size_t len = strlen(b->callback_data);
        if (len < 1 || len > TG_CALLBACK_DATA_MAX)
            return fail("inline keyboard: row %zu, button %zu (\"%.40s\"): callback_data is "
                        "%zu bytes; Telegram allows 1 to %d",
                        r + 1, c + 1, b->text, len, TG_CALLBACK_DATA_MAX);
    }
    if ((b->callback_game || (b->pay.has && b->pay.v)) && (r != 0 || c != 0))
        return fail("inline keyboard: row %zu, button %zu (\"%.40s\"): a %s button must be "
                    "the first button of the first row",
                    r + 1, c + 1, b->text, b->callback_game ? "game" : "pay");
    if (b->copy_text && (!b->copy_text->text || !*b->copy_text->text))
        return fail("inline keyboard: row %zu, button %zu: copy_text is empty", r + 1, c + 1);
    return TG_OK;
}

tg_status tg_inline_keyboard_validate(const tg_inline_keyboard_markup *kb)
{
    kb_err[0] = '\0';
    if (!kb)
        return fail("inline keyboard: none given");
    if (kb->inline_keyboard_count && !kb->inline_keyboard)
        return fail("inline keyboard: %zu rows but no row array", kb->inline_keyboard_count);
    for (size_t r = 0; r < kb->inline_keyboard_count; r++) {
        const tg_inline_keyboard_button_list *row = &kb->inline_keyboard[r];
        if (row->count == 0 || !row->items)
            return fail("inline keyboard: row %zu is empty", r + 1);
        for (size_t c = 0; c < row->count; c++) {
            tg_status st = check_inline_button(&row->items[c], r, c);
            if (st != TG_OK)
                return st;
        }
    }
    return TG_OK;
}

static tg_status check_key(const tg_keyboard_button *b, size_t r, size_t c)
{
    if (!b->text || !*b->text)
        return fail("reply keyboard: row %zu, button %zu: text is empty", r + 1, c + 1);
    int n = (b->request_users != NULL) + (b->request_chat != NULL) +
            (b->request_managed_bot != NULL) + (b->request_contact.has && b->request_contact.v) +
            (b->request_location.has && b->request_location.v) + (b->request_poll != NULL) +
            (b->web_app != NULL);
    if (n > 1)
        return fail("reply keyboard: row %zu, button %zu (\"%.40s\"): requests %d things; "
                    "Telegram allows at most one",
                    r + 1, c + 1, b->text, n);
    return TG_OK;
}

tg_status tg_reply_keyboard_validate(const tg_reply_keyboard_markup *kb)
{
    kb_err[0] = '\0';
    if (!kb)
        return fail("reply keyboard: none given");
    if (kb->keyboard_count == 0 || !kb->keyboard)
        return fail("reply keyboard: no rows");
    for (size_t r = 0; r < kb->keyboard_count; r++) {
        const tg_keyboard_button_list *row = &kb->keyboard[r];
        if (row->count == 0 || !row->items)
            return fail("reply keyboard: row %zu is empty", r + 1);
        for (size_t c = 0; c < row->count; c++) {
            tg_status st = check_key(&row->items[c], r, c);
            if (st != TG_OK)
                return st;
        }
    }
    return TG_OK;
}

const tg_inline_keyboard_markup *tg_inline_keyboard_check(const tg_inline_keyboard_markup *kb)
{
    return tg_inline_keyboard_validate(kb) == TG_OK ? kb : &poison_inline;
}

tg_reply_markup tg_reply_keyboard_check(const tg_reply_keyboard_markup *kb)
{
    if (tg_reply_keyboard_validate(kb) == TG_OK)
        return tg_reply_markup_from_reply_keyboard_markup(kb);
    tg_reply_markup poisoned = {.kind = TG_REPLY_MARKUP_UNKNOWN};
    return poisoned;
}

tg_reply_markup tg_reply_markup_inline(const tg_inline_keyboard_markup *kb)
{
    if (!kb) {
        fail("inline keyboard: none given");
        kb = &poison_inline;
    }
    return tg_reply_markup_from_inline_keyboard_markup(kb);
}
