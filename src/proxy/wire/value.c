/*
 * value: the value parsers the TOML loader (config.c) and the command line (cli.c) share;
 * see value.h.
 */
#include "proxy/wire/value.h"

#include "core/str.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int plain_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes the reason into err (when given) and returns -EINVAL. */
static int plain_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen > 0)
        vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

/* ---- host:port ---- */

static bool valid_hostname(const char *h, size_t n)
{
    if (n == 0 || n > 253 || h[0] == '.' || h[0] == '-')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = h[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '.' || c == '_';
        if (!ok || (c == '.' && i + 1 < n && h[i + 1] == '.'))
            return false;
    }
    return true;
}

bool value_parse_ip(const char *host, size_t n, struct sockaddr_storage *sa, socklen_t *len)
{
    char buf[INET6_ADDRSTRLEN + 1];
    if (n == 0 || n >= sizeof buf)
        return false;
    memcpy(buf, host, n);
    buf[n] = '\0';
    memset(sa, 0, sizeof *sa);
    struct sockaddr_in *v4 = (struct sockaddr_in *)(void *)sa;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)(void *)sa;
    if (inet_pton(AF_INET, buf, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        *len = sizeof *v4;
        return true;
    }
    if (inet_pton(AF_INET6, buf, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        *len = sizeof *v6;
        return true;
    }
    return false;
}

void value_set_port(struct sockaddr_storage *sa, uint16_t port)
{
    if (sa->ss_family == AF_INET)
        ((struct sockaddr_in *)(void *)sa)->sin_port = htons(port);
    else if (sa->ss_family == AF_INET6)
        ((struct sockaddr_in6 *)(void *)sa)->sin6_port = htons(port);
}

int value_host_parse(struct value_hostport *hp, const char *host, size_t n, char *err,
                     size_t errlen)
{
    memset(hp, 0, sizeof *hp);
    if (n >= VALUE_HOST_MAX)
        return plain_err(err, errlen, "host is %zu bytes, expected at most %d", n,
                         VALUE_HOST_MAX - 1);
    hp->resolved = value_parse_ip(host, n, &hp->addr, &hp->addr_len);
    if (!hp->resolved) {
        if (memchr(host, ':', n))
            return plain_err(err, errlen,
                             "'%.*s' is not a valid IPv6 address, expected e.g. "
                             "2001:db8::1",
                             (int)n, host);
        if (!valid_hostname(host, n))
            return plain_err(err, errlen,
                             "'%.*s' is not a host name or IP address, expected "
                             "letters, digits, '-' and '.'",
                             (int)(n > 64 ? 64 : n), host);
        hp->addr_len = 0;
    }
    memcpy(hp->host, host, n);
    hp->host[n] = '\0';
    return 0;
}

int value_hostport_parse(const char *text, size_t len, struct value_hostport *hp, char *err,
                         size_t errlen)
{
    memset(hp, 0, sizeof *hp);
    const char *colon = NULL, *host = text;
    size_t hlen;
    if (len > 0 && text[0] == '[') {
        const char *close = memchr(text, ']', len);
        if (!close || close + 1 >= text + len || close[1] != ':')
            return plain_err(err, errlen, "expected \"[IPv6]:PORT\"");
        host = text + 1;
        hlen = (size_t)(close - host);
        colon = close + 1;
        if (!value_parse_ip(host, hlen, &hp->addr, &hp->addr_len) || hp->addr.ss_family != AF_INET6)
            return plain_err(err, errlen,
                             "bad IPv6 address in brackets, expected "
                             "\"[2001:db8::1]:PORT\"");
    } else {
        for (size_t i = len; i > 0 && !colon; i--)
            if (text[i - 1] == ':')
                colon = text + i - 1;
        if (!colon)
            return plain_err(err, errlen, "missing port, expected \"HOST:PORT\"");
        hlen = (size_t)(colon - text);
        if (memchr(text, ':', hlen))
            return plain_err(err, errlen,
                             "IPv6 address without brackets, expected "
                             "\"[IPv6]:PORT\"");
    }
    uint64_t port;
    const char *ps = colon + 1;
    size_t pn = (size_t)(text + len - ps);
    if (pn == 0 || pn > 5 || tg__parse_u64(ps, pn, &port) != 0 || port > 65535)
        return plain_err(err, errlen, "bad port, expected a number 0..65535 after ':'");
    if (hlen == 0)
        return plain_err(err, errlen,
                         "missing host, expected \"HOST:PORT\" such as "
                         "\"0.0.0.0:443\"");
    int rc = value_host_parse(hp, host, hlen, err, errlen);
    if (rc != 0)
        return rc;
    hp->port = (uint16_t)port;
    value_set_port(&hp->addr, hp->port);
    return 0;
}

int value_format_addr(const struct sockaddr_storage *sa, char *out, size_t cap)
{
    char ip[INET6_ADDRSTRLEN];
    if (sa->ss_family == AF_INET) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)(const void *)sa;
        inet_ntop(AF_INET, &v4->sin_addr, ip, sizeof ip);
        return snprintf(out, cap, "%s:%u", ip, (unsigned)ntohs(v4->sin_port));
    }
    if (sa->ss_family == AF_INET6) {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)(const void *)sa;
        inet_ntop(AF_INET6, &v6->sin6_addr, ip, sizeof ip);
        return snprintf(out, cap, "[%s]:%u", ip, (unsigned)ntohs(v6->sin6_port));
    }
    return snprintf(out, cap, "?");
}

bool value_addr_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return ((const uint8_t *)&((const struct sockaddr_in *)(const void *)sa)->sin_addr)[0] ==
               127;
    if (sa->sa_family != AF_INET6)
        return false;
    const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
}

/* ---- durations and sizes ---- */

static int unit_ns(const char *s, size_t n, size_t *i, uint64_t *ns)
{
    static const struct {
        const char *name;
        uint64_t ns;
    } units[] = {
        {"ns", 1ULL},         {"us", 1000ULL},       {"\xC2\xB5s", 1000ULL},  {"ms", 1000000ULL},
        {"s", 1000000000ULL}, {"m", 60000000000ULL}, {"h", 3600000000000ULL},
    };
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
        size_t l = strlen(units[u].name);
        if (*i + l > n || memcmp(s + *i, units[u].name, l) != 0)
            continue;
        /* "ms" must not match as "m" followed by junk: a unit ends the string or a digit
         * follows. */
        if (*i + l == n || (s[*i + l] >= '0' && s[*i + l] <= '9')) {
            *i += l;
            *ns = units[u].ns;
            return 0;
        }
    }
    return -EINVAL;
}

int value_duration_ms(const char *s, size_t n, uint64_t *out_ms)
{
    size_t i = 0;
    uint64_t total_ns = 0;
    if (n == 0)
        return -EINVAL;
    while (i < n) {
        uint64_t whole = 0, frac = 0, scale = 1, unit;
        size_t digits = 0;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
            if (whole > (UINT64_MAX - 9) / 10)
                return -EINVAL;
            whole = whole * 10 + (uint64_t)(s[i] - '0');
        }
        if (i < n && s[i] == '.') {
            for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++, digits++)
                if (scale < 1000000000ULL) {
                    frac = frac * 10 + (uint64_t)(s[i] - '0');
                    scale *= 10;
                }
        }
        if (digits == 0 || unit_ns(s, n, &i, &unit) != 0)
            return -EINVAL;
        if (whole > UINT64_MAX / unit)
            return -EINVAL;
        uint64_t frac_ns = frac * (unit / scale);
        if (frac_ns > UINT64_MAX - whole * unit)
            return -EINVAL;
        uint64_t part = whole * unit + frac_ns;
        if (total_ns > UINT64_MAX - part)
            return -EINVAL;
        total_ns += part;
    }
    *out_ms = total_ns / 1000000ULL;
    return 0;
}

int value_size_bytes(const char *s, size_t n, uint64_t *out)
{
    size_t i = 0;
    uint64_t v = 0;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
        if (v > (UINT64_MAX - 9) / 10)
            return -EINVAL;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (i == 0)
        return -EINVAL;
    char unit[4] = {0};
    size_t ul = n - i;
    if (ul > 3)
        return -EINVAL;
    for (size_t k = 0; k < ul; k++)
        unit[k] = (char)(s[i + k] | 0x20); /* ASCII lower case */
    uint64_t mult;
    if (ul == 0 || strcmp(unit, "b") == 0)
        mult = 1;
    else if (strcmp(unit, "k") == 0 || strcmp(unit, "kb") == 0 || strcmp(unit, "kib") == 0)
        mult = 1ULL << 10;
    else if (strcmp(unit, "m") == 0 || strcmp(unit, "mb") == 0 || strcmp(unit, "mib") == 0)
        mult = 1ULL << 20;
    else if (strcmp(unit, "g") == 0 || strcmp(unit, "gb") == 0 || strcmp(unit, "gib") == 0)
        mult = 1ULL << 30;
    else
        return -EINVAL;
    if (v > UINT64_MAX / mult)
        return -EINVAL;
    *out = v * mult;
    return 0;
}

/* ---- RFC 3339 ---- */

/* Exactly w digits at s[*i] into *out; advances *i. */
static bool rfc_digits(const char *s, size_t n, size_t *i, int w, int *out)
{
    int v = 0;
    for (int k = 0; k < w; k++, (*i)++) {
        if (*i >= n || s[*i] < '0' || s[*i] > '9')
            return false;
        v = v * 10 + (s[*i] - '0');
    }
    *out = v;
    return true;
}

static bool rfc_sep(const char *s, size_t n, size_t *i, char c)
{
    if (*i >= n || s[*i] != c)
        return false;
    (*i)++;
    return true;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian). */
static int64_t rfc_days(int y, int m, int d)
{
    y -= m <= 2;
    int64_t era = y / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int rfc_mdays(int y, int m)
{
    static const int md[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : md[m - 1];
}

/* "hh:mm:ss[.frac](Z|+hh:mm|-hh:mm)" from s[*i] to the end: seconds of day minus offset. */
static int rfc_time(const char *s, size_t n, size_t i, int64_t *out)
{
    int hh, mm, ss, oh = 0, om = 0, sign = 0;
    if (!rfc_digits(s, n, &i, 2, &hh) || !rfc_sep(s, n, &i, ':') || !rfc_digits(s, n, &i, 2, &mm) ||
        !rfc_sep(s, n, &i, ':') || !rfc_digits(s, n, &i, 2, &ss))
        return -EINVAL;
    if (i < n && s[i] == '.') {
        size_t f = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == f)
            return -EINVAL;
    }
    if (i < n && (s[i] == 'Z' || s[i] == 'z')) {
        i++;
    } else if (i < n && (s[i] == '+' || s[i] == '-')) {
        sign = s[i++] == '-' ? -1 : 1;
        if (!rfc_digits(s, n, &i, 2, &oh) || !rfc_sep(s, n, &i, ':') ||
            !rfc_digits(s, n, &i, 2, &om) || oh > 23 || om > 59)
            return -EINVAL;
    } else {
        return -EINVAL;
    }
    if (i != n || hh > 23 || mm > 59 || ss > 60)
        return -EINVAL;
    *out = (int64_t)hh * 3600 + mm * 60 + (ss == 60 ? 59 : ss) - sign * (oh * 3600 + om * 60);
    return 0;
}

int value_rfc3339(const char *s, size_t n, int64_t *out_s)
{
    size_t i = 0;
    int y, m, d;
    int64_t tod = 0;
    if (!s || !rfc_digits(s, n, &i, 4, &y) || !rfc_sep(s, n, &i, '-') ||
        !rfc_digits(s, n, &i, 2, &m) || !rfc_sep(s, n, &i, '-') || !rfc_digits(s, n, &i, 2, &d))
        return -EINVAL;
    if (y < 1970 || m < 1 || m > 12 || d < 1 || d > rfc_mdays(y, m))
        return -EINVAL;
    if (i < n) {
        if (s[i] != 'T' && s[i] != 't' && s[i] != ' ')
            return -EINVAL;
        if (rfc_time(s, n, i + 1, &tod) != 0)
            return -EINVAL;
    }
    *out_s = rfc_days(y, m, d) * 86400 + tod;
    return 0;
}
