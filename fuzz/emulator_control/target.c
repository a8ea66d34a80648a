/*
 * fuzz emulator_control: the emulator's control API and Bot API request paths, minus the
 * socket, on a fresh world per input (one bot, one user, one group with both in it).
 * The input is "NAME\nBODY" for /control/NAME (POST, or GET when NAME starts with '?'),
 * or "/METHOD\nBODY" for a Bot API call with a JSON body. Waits are capped at 1 ms.
 * Any input must end in an answer: no crash, no leak, no hang.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "emulator/api.h"
#include "emulator/server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define TOKEN "7000001:AAHfuzzTokenAAAAAAAAAAAAAAAAAAAAAA"

static emu *world(void)
{
    char err[128];
    emu *e = emu_new(&(emu_options){.max_wait_ms = 1}, err, sizeof err);
    if (!e)
        return NULL;
    tg__buf out;
    tg__buf_init(&out, 0);
    emu_form q;
    emu_form_init(&q);
    static const char *const setup[][2] = {
        {"bots", "{\"token\":\"" TOKEN "\"}"},
        {"chats", "{\"type\":\"supergroup\",\"title\":\"g\",\"owner_id\":100000001}"},
        {"join", "{\"chat_id\":-1000000001001,\"user_id\":7000001,\"admin\":true}"},
        {"send", "{\"text\":\"/start\"}"},
    };
    for (size_t i = 0; i < sizeof setup / sizeof setup[0]; i++) {
        emu_control(e, setup[i][0], "POST", &q, setup[i][1], strlen(setup[i][1]), &out);
        tg__buf_reset(&out);
    }
    emu_form_cleanup(&q);
    tg__buf_cleanup(&out);
    return e;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    const char *nl = memchr(s, '\n', size);
    if (!nl || nl == s || nl - s > 64)
        return 0;
    char name[72];
    memcpy(name, s, (size_t)(nl - s));
    name[nl - s] = '\0';
    if (strchr(name, '\0') != name + (nl - s))
        return 0;
    const char *body = nl + 1;
    size_t blen = size - (size_t)(nl - s) - 1;
    emu *e = world();
    if (!e)
        return 0;
    tg__buf out;
    tg__buf_init(&out, 0);
    emu_form q;
    emu_form_init(&q);
    if (name[0] == '/')
        emu_api_call(e, TOKEN, name + 1, blen ? body : NULL, blen, NULL, &out);
    else if (name[0] == '?')
        emu_control(e, name + 1, "GET", &q, body, blen, &out);
    else
        emu_control(e, name, "POST", &q, body, blen, &out);
    emu_form_cleanup(&q);
    tg__buf_cleanup(&out);
    emu_free(e);
    return 0;
}
