/*
 * value: parsers for the values the TOML loader (config.c) and the command line (cli.c)
 * both read: host:port, bare hosts and IP literals, durations ("1m30s") and sizes ("16KiB").
 *
 * Pure functions over (pointer, length) text that need not be NUL-terminated: no I/O, no
 * DNS, no allocation. Errors: -EINVAL, with a reason in err when err is given (the text is
 * not secret, so reasons may quote it). Thread-safety: reentrant.
 */
#ifndef TGPROXY_VALUE_H
#define TGPROXY_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define VALUE_HOST_MAX 256 /* bytes, including the NUL: a DNS name or IP literal */

/* A host:port that may still need DNS (the engine resolves it when first needed). */
struct value_hostport {
    char host[VALUE_HOST_MAX]; /* as written, without brackets; "" = unset */
    uint16_t port;
    bool resolved;                /* host was an IP literal: addr/addr_len are valid */
    struct sockaddr_storage addr; /* port already set, network byte order */
    socklen_t addr_len;
};

/*
 * "host:port", "[v6]:port" into hp (no DNS; the port is 0..65535; an IPv6 literal must be
 * in brackets). Returns 0 or -EINVAL with a reason in err.
 */
int value_hostport_parse(const char *text, size_t len, struct value_hostport *hp, char *err,
                         size_t errlen);

/*
 * A bare host (a host name of letters, digits, '-', '_' and '.', or an IP literal, IPv6
 * without brackets) into hp with port 0. Returns 0 or -EINVAL with a reason in err (err may
 * be NULL).
 */
int value_host_parse(struct value_hostport *hp, const char *host, size_t n, char *err,
                     size_t errlen);

/* An IP literal in host[0..n) into sa (port 0) and *len. false if it is not one. */
bool value_parse_ip(const char *host, size_t n, struct sockaddr_storage *sa, socklen_t *len);

/* Set the port (host byte order) of an AF_INET / AF_INET6 address; others are left alone. */
void value_set_port(struct sockaddr_storage *sa, uint16_t port);

/* "1.2.3.4:443" / "[::1]:443" for an address, "?" for another family (snprintf's return). */
int value_format_addr(const struct sockaddr_storage *sa, char *out, size_t cap);

/* Whether sa (AF_INET or AF_INET6) is a loopback address: 127.0.0.0/8, ::1, or 127/8
   mapped into IPv6 (::ffff:127.0.0.0/104). The one test the config, the engine and doctor
   share. */
bool value_addr_loopback(const struct sockaddr *sa);

/*
 * Durations as mtg writes them (Go syntax): one or more <number>[.<fraction>]<unit> with
 * unit ns, us, ms, s, m or h ("10s", "1m30s", "1.5s", "500ms"). Result in milliseconds,
 * truncated. Returns 0 or -EINVAL (malformed, no unit, overflow).
 */
int value_duration_ms(const char *s, size_t n, uint64_t *out_ms);

/*
 * Sizes as mtg writes them: <digits>[unit], unit b, k/kb/kib, m/mb/mib, g/gb/gib (any case;
 * every k is 1024). Returns 0 or -EINVAL.
 */
int value_size_bytes(const char *s, size_t n, uint64_t *out);

/*
 * An RFC 3339 date-time ("2026-12-31T23:59:59Z", "...T12:00:00.5+02:00"; 'T' or 't' or a
 * space between date and time; 'Z' or 'z' or a +hh:mm / -hh:mm offset; fraction truncated)
 * or a full date ("2026-12-31", meaning its 00:00:00 UTC). Years 1970..9999; a leap second
 * (:60) counts as :59. Result: seconds since the Unix epoch, UTC. Returns 0 or -EINVAL
 * (malformed, out-of-range field, day past the month's end, trailing bytes).
 */
int value_rfc3339(const char *s, size_t n, int64_t *out_s);

#endif
