/*
 * params: a Bot API request's parameters, from whichever encoding the bot used (query string,
 * x-www-form-urlencoded, multipart/form-data or JSON), decoded by the generated codec into
 * the method's params struct. Checks as Telegram does: a required parameter that is absent
 * (or null) is "<name> is empty"; a value of the wrong type names the parameter.
 *
 * Form values are typed by the method's descriptor: numbers and booleans stay literals,
 * objects and arrays are JSON text, anything else a string. An uploaded part given for an
 * InputFile parameter reads back as the file id "attach://<part>" (resolved by the caller).
 * Thread-safety: uses only its arguments.
 */
#ifndef TGKIT_EMULATOR_PARAMS_H
#define TGKIT_EMULATOR_PARAMS_H

#include "emulator/emu.h"

/* The JSON object equivalent of form f for method m, into out. 0 or -1 (err set). */
int emu_params_form_json(const tg__method *m, const emu_form *f, tg__buf *out, char *err,
                         size_t errcap);

/* A JSON body as Telegram reads it: a string given for a number, boolean, object or array
 * parameter is read as that value's text ("123", "True", "[\"message\"]"), as clients
 * such as python-telegram-bot send them; unknown keys are dropped. 0 or -1 (err set). */
int emu_params_normalize(const tg__method *m, const char *json, size_t len, tg__buf *out, char *err,
                         size_t errcap);

/* Decode json (an object) as the params of m into a struct in a (*out; NULL for methods
 * without parameters). 0, or -1 with err holding Telegram's description (without the
 * "Bad Request: " prefix). */
int emu_params_decode(const tg__method *m, const char *json, size_t len, tg__arena *a, void **out,
                      char *err, size_t errcap);

#endif
