/*
 * guard: who may use the browser-facing part of the emulator (the web chat and the control
 * API). Pure: headers in, a verdict out (server.c asks; fuzz/emulator_guard feeds it).
 *
 * Any web page a developer visits can send requests to 127.0.0.1 (issue 21, item 6):
 *  - a cross-origin POST with a "simple" Content-Type (text/plain, a form) goes out without
 *    a CORS preflight, so mutating control calls require application/json (415 otherwise),
 *    which a page on another origin can only send after a preflight this server never
 *    answers;
 *  - a browser names the page that sent a request in Origin: one that is not this emulator
 *    (including "null", from sandboxed documents such as the files served here) is refused
 *    (403); requests without Origin (curl, test clients, same-origin GETs) pass;
 *  - DNS rebinding points a name the attacker owns at 127.0.0.1, making the page
 *    same-origin with us; its requests still carry Host: evil.example:PORT, so Host must
 *    name this emulator (421): 127.0.0.1, localhost, [::1] or the --listen address, with
 *    the port (no port only when serving on 80); with --listen 0.0.0.0 any IP literal,
 *    since rebinding needs a name.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "emulator/server.h"

static bool span_is(const char *p, size_t n, const char *lit)
{
    return strlen(lit) == n && !strncasecmp(p, lit, n);
}

/* host[:port] (host may be a bracketed IPv6 literal) names this emulator. */
static bool authority_ok(const char *bind, uint16_t port, const char *a, size_t n)
{
    size_t hl = n;
    if (n && a[0] == '[') {
        const char *rb = memchr(a, ']', n);
        if (!rb)
            return false;
        hl = (size_t)(rb - a) + 1;
    } else {
        const char *colon = memchr(a, ':', n);
        hl = colon ? (size_t)(colon - a) : n;
    }
    unsigned p = 80;
    if (hl < n) {
        if (a[hl] != ':' || n - hl - 1 == 0 || n - hl - 1 > 5 || (a[hl + 1] == '0' && n - hl > 2))
            return false; /* no port, or not as a browser writes it */
        p = 0;
        for (size_t i = hl + 1; i < n; i++) {
            if (a[i] < '0' || a[i] > '9')
                return false;
            p = p * 10 + (unsigned)(a[i] - '0');
        }
    }
    if (p != port || hl == 0)
        return false;
    if (span_is(a, hl, "localhost") || span_is(a, hl, "127.0.0.1") || span_is(a, hl, "[::1]") ||
        (bind && span_is(a, hl, bind)))
        return true;
    if (!bind || strcmp(bind, "0.0.0.0") != 0 || hl >= 64)
        return false;
    char ip[64];
    unsigned char addr[16];
    if (a[0] == '[') {
        snprintf(ip, sizeof ip, "%.*s", (int)hl - 2, a + 1);
        return inet_pton(AF_INET6, ip, addr) == 1;
    }
    snprintf(ip, sizeof ip, "%.*s", (int)hl, a);
    return inet_pton(AF_INET, ip, addr) == 1;
}

int emu_guard(const char *bind, uint16_t port, bool control, bool mutating, const char *host,
              const char *origin, const char *ctype, const char **why)
{
    static const char http[] = "http://";
    if (host && !authority_ok(bind, port, host, strlen(host))) {
        *why = "Host does not name this emulator (127.0.0.1, localhost, [::1] or the --listen "
               "address, with its port): refused against DNS rebinding";
        return 421;
    }
    if (!control)
        return 0;
    if (origin && (strncasecmp(origin, http, sizeof http - 1) != 0 ||
                   !authority_ok(bind, port, origin + sizeof http - 1,
                                 strlen(origin) - (sizeof http - 1)))) {
        *why = "cross-origin request refused: Origin is not this emulator";
        return 403;
    }
    if (mutating) {
        size_t n = ctype ? strcspn(ctype, "; \t") : 0;
        if (!ctype || !span_is(ctype, n, "application/json")) {
            *why = "control calls that change the world take Content-Type: application/json";
            return 415;
        }
    }
    return 0;
}
