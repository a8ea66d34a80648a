/* doctor_mp: doctor's middle-proxy checks (doctor_mp.h). */
#include "proxy/daemon/doctor_mp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "proxy/services/mpsource.h"
#include "proxy/wire/crypto.h"
#include "proxy/wire/mpsess.h"

#define MP_CLOCK_S     30   /* the middle proxies refuse a nonce further off */
#define MP_TIMEOUT_MAX 5000 /* ms: no single check waits longer */
#define MP_DCS_MAX     16   /* DCs whose handshake is tried */

struct mpdoc {
    const struct config *cfg;
    doctor_line_fn line;
    void *ud;
    struct mpdocs *docs; /* what `run` would start with */
    int64_t date;        /* the first URL answer's Date header; 0 = none */
    char date_from[CONFIG_SOURCE_MAX];
};

__attribute__((format(printf, 4, 5))) static void say(struct mpdoc *m, enum doctor_mark k,
                                                      const char *what, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    m->line(m->ud, k, what, text);
}

static unsigned cap_ms(uint32_t ms)
{
    return ms && ms < MP_TIMEOUT_MAX ? ms : MP_TIMEOUT_MAX;
}

/* ---- the sources ---- */

static const char *source_of(const struct config *cfg, enum mpsource_kind k)
{
    return k == MPSRC_SECRET    ? cfg->mp.secret_path
           : k == MPSRC_CONFIG  ? cfg->mp.config_path
           : k == MPSRC_CONFIG6 ? cfg->mp.config6_path
                                : cfg->mp.ip_url;
}

/* Check document b of kind k and take it into m->docs. 0, or -1 with err. */
static int take(struct mpdoc *m, enum mpsource_kind k, const struct mpsource_body *b,
                char *detail, size_t dlen, char *err, size_t errlen)
{
    struct mpdocs *d = m->docs;
    int family = 0;
    uint8_t ip[16];
    switch (k) {
    case MPSRC_SECRET:
        if (mpsource_check_secret(b->data, b->len, err, errlen) != 0)
            return -1;
        memcpy(d->secret, b->data, b->len);
        d->secret_len = b->len;
        snprintf(detail, dlen, "%zu bytes", b->len);
        return 0;
    case MPSRC_CONFIG:
    case MPSRC_CONFIG6: {
        struct mpconf *c = k == MPSRC_CONFIG ? &d->v4 : &d->v6;
        if (mpconf_parse((const char *)b->data, b->len, c, err, errlen) != 0)
            return -1;
        *(k == MPSRC_CONFIG ? &d->has_v4 : &d->has_v6) = true;
        snprintf(detail, dlen, "%zu middle proxies", c->n);
        return 0;
    }
    default:
        if (mpsource_parse_ip(b->data, b->len, &family, ip, err, errlen) != 0)
            return -1;
        d->has_ip4 = family == AF_INET, d->has_ip6 = family == AF_INET6;
        memcpy(family == AF_INET ? d->ip4 : d->ip6, ip, family == AF_INET ? 4 : 16);
        char t[64];
        inet_ntop(family, ip, t, sizeof t);
        snprintf(detail, dlen, "answers %s", t);
        return 0;
    }
}

static void check_source(struct mpdoc *m, enum mpsource_kind k)
{
    const char *src = source_of(m->cfg, k);
    if (!src[0])
        return;
    char what[64], err[512], detail[128];
    snprintf(what, sizeof what, "middle-proxy %s", k == MPSRC_IP ? "public-ip-url" : mpsource_name(k));
    struct mpsource_body b;
    bool url = config_is_url(src);
    int rc = mpsource_fetch(src, cap_ms(m->cfg->timeout.http_ms), &b, err, sizeof err);
    if (url && b.date && !m->date) { /* even an error answer carries the server's clock */
        m->date = b.date;
        snprintf(m->date_from, sizeof m->date_from, "%s", src);
    }
    if (rc == 0)
        rc = take(m, k, &b, detail, sizeof detail, err, sizeof err);
    if (rc == 0) {
        if (url)
            say(m, DOCTOR_OK, what, "%.300s: %s (downloaded in %.2f s)", src, detail, b.elapsed_s);
        else
            say(m, DOCTOR_OK, what, "%.300s: %s", src, detail);
        mpsource_body_free(&b);
        return;
    }
    mpsource_body_free(&b);
    char path[CONFIG_FILE_MAX + 32], e2[512];
    snprintf(path, sizeof path, "%s/%s", m->cfg->mp.state_dir, mpsource_name(k));
    struct mpsource_body st;
    if (url && mpsource_fetch(path, 0, &st, e2, sizeof e2) == 0 &&
        take(m, k, &st, detail, sizeof detail, e2, sizeof e2) == 0) {
        say(m, DOCTOR_WARN, what,
            "%.300s: %s; `run` would start from the stored copy %s (%s, %.0f s old) and retry",
            src, err, path, detail, (double)(tg__wall_s() - st.date));
        mpsource_body_free(&st);
        return;
    }
    mpsource_body_free(&st);
    say(m, DOCTOR_FAIL, what, "%.300s: %s%s", src, err,
        url ? " (and no stored copy in state-dir)" : "");
}

static void check_clock(struct mpdoc *m)
{
    if (!m->date) {
        say(m, DOCTOR_WARN, "middle-proxy clock",
            "no URL source answered with a Date header; keep the clock within %d s (NTP): the "
            "middle proxies refuse a handshake further off",
            MP_CLOCK_S);
        return;
    }
    long long skew = (long long)tg__wall_s() - (long long)m->date;
    bool ok = skew <= MP_CLOCK_S - 1 && skew >= -(MP_CLOCK_S - 1); /* whole seconds: one off */
    say(m, ok ? DOCTOR_OK : DOCTOR_FAIL, "middle-proxy clock",
        "%lld s %s the Date header of %.300s (the middle proxies allow %d s)%s",
        skew < 0 ? -skew : skew, skew < 0 ? "behind" : "ahead of", m->date_from, MP_CLOCK_S,
        ok ? "" : ": every handshake will be refused; fix the clock (NTP)");
}

/* ---- the handshakes ---- */

/* The public address `run` would use for family f (configured, else detected), or false. */
static bool public_of(const struct mpdoc *m, int f, uint8_t ip[16])
{
    const char *conf = f == AF_INET ? m->cfg->public_ipv4 : m->cfg->public_ipv6;
    if (conf[0] && inet_pton(f, conf, ip) == 1)
        return true;
    if (f == AF_INET && m->docs->has_ip4) {
        memcpy(ip, m->docs->ip4, 4);
        return true;
    }
    if (f == AF_INET6 && m->docs->has_ip6) {
        memcpy(ip, m->docs->ip6, 16);
        return true;
    }
    return false;
}

struct hs {
    int fd;
    long deadline;
};

static long ms_now(void)
{
    return (long)tg__now_ms();
}

static int wait_fd(const struct hs *h, short ev)
{
    struct pollfd p = {.fd = h->fd, .events = ev};
    long left = h->deadline - ms_now();
    if (left <= 0)
        return -ETIMEDOUT;
    int r = poll(&p, 1, (int)left);
    return r > 0 ? 0 : r == 0 ? -ETIMEDOUT : -errno;
}

static int hs_send(void *ud, const uint8_t *p, size_t n)
{
    struct hs *h = ud;
    while (n) {
        ssize_t w = send(h->fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (wait_fd(h, POLLOUT) != 0)
                return -1;
            continue;
        }
        if (w <= 0)
            return -1;
        p += w, n -= (size_t)w;
    }
    return 0;
}

static int hs_msg(void *ud, const struct mprpc_msg *msg, const uint8_t *p, size_t n)
{
    (void)ud, (void)msg, (void)p, (void)n;
    return 0;
}

/* Connect to p and run the nonce and handshake. 0 (ms set), or -1 with why. local: the
   socket's own address (for the public-address check), when it connected. */
static int handshake(const struct mpdoc *m, const struct mpconf_proxy *p, unsigned timeout_ms,
                     long *ms, struct sockaddr_storage *local, bool *have_local, char *why,
                     size_t wlen)
{
    struct sockaddr_storage ss;
    socklen_t len;
    memset(&ss, 0, sizeof ss);
    if (p->family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)(void *)&ss;
        a->sin6_family = AF_INET6, a->sin6_port = htons(p->port);
        memcpy(&a->sin6_addr, p->ip, 16);
        len = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)(void *)&ss;
        a->sin_family = AF_INET, a->sin_port = htons(p->port);
        memcpy(&a->sin_addr, p->ip, 4);
        len = sizeof *a;
    }
    long start = ms_now();
    struct hs h = {.fd = socket(p->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0),
                   .deadline = start + (long)timeout_ms};
    struct mpsess s;
    memset(&s, 0, sizeof s);
    int rc = -1, err = 0;
    socklen_t el = sizeof err, ml = sizeof *local;
    if (h.fd < 0) {
        snprintf(why, wlen, "socket: %s", strerror(errno));
        return -1;
    }
    if (connect(h.fd, (struct sockaddr *)&ss, len) != 0 && errno != EINPROGRESS) {
        snprintf(why, wlen, "connect: %s", strerror(errno));
        goto out;
    }
    if ((err = -wait_fd(&h, POLLOUT)) != 0 ||
        getsockopt(h.fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) {
        snprintf(why, wlen, "connect: %s", strerror(err ? err : errno));
        goto out;
    }
    if (getsockname(h.fd, (struct sockaddr *)local, &ml) != 0) {
        snprintf(why, wlen, "getsockname: %s", strerror(errno));
        goto out;
    }
    *have_local = true;
    struct mpsess_cfg sc = {.secret = m->docs->secret,
                            .secret_len = m->docs->secret_len,
                            .now = (uint32_t)tg__wall_s()};
    mpcrypto_end_from(&sc.local, local);
    mpcrypto_end_from(&sc.remote, &ss);
    uint8_t pub[16];
    if (public_of(m, sc.local.family, pub))
        memcpy(sc.local.ip, pub, sc.local.family == AF_INET ? 4 : 16);
    crypto_random(sc.nonce, sizeof sc.nonce);
    mprpc_pid(sc.pid, sc.local.ip, sc.local.port, (uint16_t)getpid(), sc.now);
    uint8_t first[64], buf[4096];
    size_t n = 0;
    if (mpsess_start(&s, &sc, first, sizeof first, &n) != 0 || hs_send(&h, first, n) != 0) {
        snprintf(why, wlen, "cannot send the nonce");
        goto out;
    }
    struct mpsess_sink sink = {.ud = &h, .send = hs_send, .msg = hs_msg};
    while (s.state != MPSESS_READY) {
        if ((err = -wait_fd(&h, POLLIN)) != 0) {
            snprintf(why, wlen, "%s while %s", err == ETIMEDOUT ? "no answer" : strerror(err),
                     s.state == MPSESS_NONCE_SENT ? "waiting for its nonce"
                                                   : "waiting for its handshake");
            goto out;
        }
        ssize_t r = recv(h.fd, buf, sizeof buf, 0);
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (r <= 0) {
            snprintf(why, wlen, "it closed the connection %s%s",
                     s.state == MPSESS_NONCE_SENT ? "after our nonce" : "after the handshake",
                     s.state == MPSESS_NONCE_SENT
                         ? " (a wrong proxy secret, or a clock more than 30 s off)"
                         : " (the proxy secret or the public address is wrong)");
            goto out;
        }
        if (mpsess_feed(&s, buf, (size_t)r, &sink) != 0) {
            snprintf(why, wlen, "%s%s", mpsess_why_name(s.why),
                     s.why == MPSESS_E_KEYS
                         ? ": its answer does not decrypt: the proxy secret or the public "
                           "address is wrong"
                         : "");
            goto out;
        }
    }
    *ms = ms_now() - start;
    rc = 0;
out:
    mpsess_cleanup(&s);
    close(h.fd);
    return rc;
}

static void check_handshakes(struct mpdoc *m)
{
    static struct mpconf list;
    mpdocs_merge(m->docs, m->cfg->prefer_ip, &list);
    if (!m->docs->secret_len || !list.n) {
        say(m, DOCTOR_FAIL, "middle-proxy handshakes",
            "not tried: %s", !m->docs->secret_len ? "no proxy secret" : "no middle proxy listed");
        return;
    }
    int16_t done[MP_DCS_MAX];
    size_t ndone = 0;
    bool first = true;
    unsigned timeout = cap_ms(m->cfg->timeout.tcp_ms);
    for (size_t i = 0; i < list.n && ndone < MP_DCS_MAX; i++) {
        const struct mpconf_proxy *p = &list.proxies[i];
        bool seen = false;
        for (size_t k = 0; k < ndone && !seen; k++)
            seen = done[k] == p->dc;
        if (seen)
            continue;
        done[ndone++] = p->dc;
        char what[48], at[64], why[256];
        inet_ntop(p->family, p->ip, at, sizeof at);
        snprintf(what, sizeof what, "middle-proxy DC %d", p->dc);
        long ms = 0;
        struct sockaddr_storage local;
        bool have_local = false;
        int rc = handshake(m, p, timeout, &ms, &local, &have_local, why, sizeof why);
        if (first && have_local) { /* the public address, once: toward the first one */
            first = false;
            struct mpcrypto_end e;
            mpcrypto_end_from(&e, &local);
            uint8_t pub[16];
            char t[64];
            const char *conf = e.family == AF_INET ? m->cfg->public_ipv4 : m->cfg->public_ipv6;
            if (public_of(m, e.family, pub)) {
                inet_ntop(e.family, pub, t, sizeof t);
                say(m, DOCTOR_OK, "middle-proxy public address", "%s (%s)", t,
                    conf[0] ? "configured" : "from public-ip-url");
            } else {
                inet_ntop(e.family, e.ip, t, sizeof t);
                if (mpsource_ip_private(e.family, e.ip))
                    say(m, DOCTOR_FAIL, "middle-proxy public address",
                        "%s, this server's own address toward the middle proxies, is private: "
                        "behind NAT every handshake fails; set public-ipv%c or [middle-proxy] "
                        "public-ip-url",
                        t, e.family == AF_INET ? '4' : '6');
                else
                    say(m, DOCTOR_OK, "middle-proxy public address",
                        "%s (this server's own address toward the middle proxies)", t);
            }
        }
        if (rc == 0)
            say(m, DOCTOR_OK, what, "%s%s%s:%u: handshake in %ld ms", p->family == AF_INET6 ? "[" : "",
                at, p->family == AF_INET6 ? "]" : "", (unsigned)p->port, ms);
        else
            say(m, DOCTOR_FAIL, what, "%s%s%s:%u: %s", p->family == AF_INET6 ? "[" : "", at,
                p->family == AF_INET6 ? "]" : "", (unsigned)p->port, why);
    }
}

void doctor_midproxy(const struct config *cfg, doctor_line_fn line, void *ud)
{
    struct mpdoc m = {.cfg = cfg, .line = line, .ud = ud};
    if (!(m.docs = tg__calloc(1, sizeof *m.docs))) {
        line(ud, DOCTOR_FAIL, "middle-proxy", "out of memory");
        return;
    }
    for (int k = 0; k < MPSRC_N; k++)
        check_source(&m, (enum mpsource_kind)k);
    check_clock(&m);
    check_handshakes(&m);
    crypto_wipe(m.docs, sizeof *m.docs);
    tg__free(m.docs);
}
