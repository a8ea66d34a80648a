/*
 * api: the Bot API side of the emulator. emu_api_call() runs one method for one bot and
 * writes Telegram's envelope ({"ok":true,"result":...} or {"ok":false,"error_code":..,
 * "description":..,"parameters":{..}}). The pipeline is api.c; the one method table is
 * methods.c (handlers.h); the handlers live in api_msg.c (messages, updates, callbacks,
 * inline), api_chat.c (chats, members, commands), api_media.c (files and media) and
 * webhook.c (webhooks); the helpers every send shares in send.c.
 *
 * Every method of the generated model is known: emulated ones act on the state, the others
 * answer 400 "Bad Request: method X is not emulated by tgbot-emulator"; a name that is no
 * Bot API method gets 404 "Not Found", as Telegram answers.
 * Thread-safety: takes e->mu for the call (a long poll waits on e->cv, releasing it).
 */
#ifndef TGKIT_EMULATOR_API_H
#define TGKIT_EMULATOR_API_H

#include <stdarg.h>

#include "emulator/emu.h"

typedef struct emu_req {
    emu *e;
    emu_bot *b;
    const tg__method *m;
    const void *p;        /* the decoded params struct (NULL for none) */
    const emu_form *form; /* the request's form (uploads), or NULL */
    tg__arena *a;         /* everything of this request */
    tg__buf res;          /* the result value's JSON */
    tg__jw w;             /* writes into res */
    int code;             /* error: HTTP status / error_code */
    char desc[320];       /* error: description */
    int64_t retry_after, migrate_to;
} emu_req;

typedef int (*emu_handler)(emu_req *r);

typedef struct emu_method_entry {
    const char *name;
    emu_handler fn;
} emu_method_entry;

/* Run method (case-insensitive Bot API name) for token with the parameters in json
 * (an object), or when json is NULL in form (query, urlencoded or multipart fields; its
 * uploads serve attach:// and InputFile parameters). form may be NULL. Writes the response body to
 * out and returns the HTTP status. */
int emu_api_call(emu *e, const char *token, const char *method, const char *json, size_t len,
                 const emu_form *form, tg__buf *out);

/* Whether method (exact Bot API name) is emulated. */
bool emu_api_emulated(const char *method);

/* Set an error: code 400 "Bad Request: ...", 403 "Forbidden: ...", others as given. -1. */
int emu_fail(emu_req *r, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Helpers shared by the handler files. */
emu_chat *emu_req_chat(emu_req *r, const tg_chat_id *id, bool to_send);
int emu_write_msg(emu_req *r, const emu_msg *m);
bool emu_is_admin(const emu_chat *c, int64_t user_id, emu_bits right);
int emu_check_text(emu_req *r, const char *text, int32_t parse_mode, const tg_message_entity *ents,
                   size_t nents, bool caption, char **out_text, const tg_message_entity **out_ents,
                   size_t *out_n);

/* reply_parameters of a send: the message replied to, put on m. 0 or -1 (emu_fail). */
int emu_apply_reply(emu_req *r, emu_chat *c, const tg_reply_parameters *rp, tg_message *m);
/* An inline keyboard's buttons are ones Telegram accepts. 0 or -1 (emu_fail). */
int emu_check_inline_kb(emu_req *r, const tg_inline_keyboard_markup *kb);
/* reply_markup of a send: inline keyboards on m, reply keyboards on c. 0 or -1. */
int emu_apply_markup(emu_req *r, emu_chat *c, const tg_reply_markup *rm, tg_message *m);
/* Store m as sent by the bot in c and write it as the result. 0 or -1. */
int emu_finish_send(emu_req *r, emu_chat *c, tg_message *m);

#endif
