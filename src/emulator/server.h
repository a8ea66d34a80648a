/*
 * server: the emulator's HTTP side (server.c), who may use its browser-facing part
 * (guard.c), control API (control.c) and embedded web chat (web.c, generated at build time
 * from src/emulator/web/).
 */
#ifndef TGKIT_EMULATOR_SERVER_H
#define TGKIT_EMULATOR_SERVER_H

#include "emulator/emu.h"

/* Start serving on e->host:e->o.port (0 = a free port; e->port says which). 0 or -1. */
int emu_http_start(emu *e, char *err, size_t errcap);
void emu_http_stop(emu *e);

/* One control API request: name is the path after /control/, query its arguments, body
 * the JSON body (may be empty). Writes a JSON answer to out; returns the HTTP status.
 * Takes e->mu itself. */
int emu_control(emu *e, const char *name, const char *method, const emu_form *query,
                const char *body, size_t len, tg__buf *out);

/* May this request reach the web chat or (control) the control API? bind and port: where the
 * emulator listens; host, origin, ctype: the request's headers (NULL when absent); mutating:
 * a POST. 0, or the HTTP status to refuse with (421 Host, 403 Origin, 415 Content-Type) and
 * *why a static explanation. Pure (guard.c). */
int emu_guard(const char *bind, uint16_t port, bool control, bool mutating, const char *host,
              const char *origin, const char *ctype, const char **why);

/* The embedded file for url ("/" is index.html), or NULL. Static storage. */
const char *emu_web_asset(const char *url, size_t *len, const char **ctype);

/* Webhook delivery thread (webhook.c). */
int emu_webhook_start(emu *e);
void emu_webhook_stop(emu *e);

#endif
