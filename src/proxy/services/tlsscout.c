/* tlsscout: see tlsscout.h. */
#include "proxy/services/tlsscout.h"

#include "core/alloc.h"
#include "core/clock.h"
#include "proxy/services/probeconn.h"
#include "proxy/wire/crypto.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <linux/tcp.h> /* tcpi_data_segs_in, which <netinet/tcp.h> lacks */
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int left_ms(uint64_t deadline)
{
    uint64_t now = tg__now_ms();
    return now >= deadline ? 0 : (int)(deadline - now);
}

/* Data segments received on fd so far (Linux's tcpi_data_segs_in), or -1 when TCP_INFO does
   not say; *mss = the MSS this end announced (the most a full segment of the site holds). */
static long segs_in(int fd, uint32_t *mss)
{
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    memset(&ti, 0, sizeof ti);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
        len < offsetof(struct tcp_info, tcpi_data_segs_in) + sizeof ti.tcpi_data_segs_in)
        return -1;
    *mss = ti.tcpi_advmss;
    return (long)ti.tcpi_data_segs_in;
}

/* Read what the site sends: one entry in seg per read that returned bytes, and in wire the
   most TCP segments that read can hold: the count after it less the count before the
   previous read (never too few, however segments pile up between reads on a busy host).
   base = the count before the ClientHello went out; *mss = 0 when a count failed. */
static int record(int fd, uint8_t *buf, size_t *n, uint32_t *seg, uint32_t *wire, size_t *nseg,
                  uint32_t *mss, long base, int quiet_ms, uint64_t deadline)
{
    *n = 0;
    *nseg = 0;
    long before_prev = base;
    bool counted = base >= 0;
    for (;;) {
        int wait = left_ms(deadline);
        if (*n > 0 && wait > quiet_ms)
            wait = quiet_ms;
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int rc = poll(&pf, 1, wait);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc < 0)
            return -errno;
        if (rc == 0)
            return *n > 0 ? 0 : -ETIMEDOUT; /* the quiet gap (or nothing at all) */
        uint32_t m = 0;
        long before = segs_in(fd, &m);
        ssize_t k = recv(fd, buf + *n, TLSFLIGHT_RECORDING_MAX - *n, 0);
        if (k == 0)
            return *n > 0 ? 0 : -ECONNRESET; /* closed without a word */
        if (k < 0) {
            if (errno == EAGAIN || errno == EINTR)
                continue;
            return *n > 0 ? 0 : -errno; /* a reset after the flight still leaves it */
        }
        long after = segs_in(fd, &m);
        counted = counted && before >= 0 && after >= before_prev;
        uint32_t w = counted ? (uint32_t)(after - before_prev) : 0;
        *mss = counted ? m : 0;
        before_prev = before;
        if (*nseg == TLSFLIGHT_MAX_SEG) {
            seg[*nseg - 1] += (uint32_t)k; /* beyond what is kept: the last read grows */
            wire[*nseg - 1] += w;
        } else {
            wire[*nseg] = w;
            seg[(*nseg)++] = (uint32_t)k;
        }
        *n += (size_t)k;
        if (*n == TLSFLIGHT_RECORDING_MAX)
            return 0;
    }
}

int tlsscout_exchange(const struct sockaddr *addr, socklen_t addr_len, const uint8_t *hello,
                      size_t hl, const char *what, const struct tlsscout_opts *o, uint8_t *rec,
                      size_t *rec_n, struct tlsflight *out, char *err, size_t errlen)
{
    int timeout = o && o->timeout_ms > 0 ? o->timeout_ms : 5000;
    int quiet = o && o->quiet_ms > 0 ? o->quiet_ms : TLSSCOUT_QUIET_MS;
    uint64_t deadline = tg__now_ms() + (uint64_t)timeout;
    uint32_t seg[TLSFLIGHT_MAX_SEG], wire[TLSFLIGHT_MAX_SEG], mss = 0;
    size_t nseg = 0;
    *rec_n = 0;
    const char *step = "connect";
    int rc = probeconn_dial(addr, addr_len, left_ms(deadline)), fd = rc;
    if (fd >= 0 && o && o->proxy_v2) {
        step = "send the PROXY header";
        rc = probeconn_send_proxy_v2(fd, deadline);
    }
    if (fd >= 0 && rc >= 0) {
        step = "send ClientHello";
        long base = segs_in(fd, &mss); /* a TLS site says nothing before the hello */
        rc = probeconn_send(fd, hello, hl, deadline);
        if (rc == 0) {
            step = "read the answer";
            rc = record(fd, rec, rec_n, seg, wire, &nseg, &mss, base, quiet, deadline);
        }
    }
    if (fd >= 0)
        close(fd);
    if (rc < 0) {
        snprintf(err, errlen, "tls-front probe of %s: %s: %s", what, step, strerror(-rc));
        return rc;
    }
    /* the session id the hello carried (legacy_session_id at offset 43) */
    size_t sid_len = hl > 43 && hello[43] <= 32 && hl >= 44u + hello[43] ? hello[43] : 0;
    char why[160];
    rc = tlsflight_parse(rec, *rec_n, seg, nseg, hello + 44, sid_len, out, why, sizeof why);
    if (rc == 0)
        tlsflight_mark_merged(out, wire, mss);
    if (rc < 0)
        snprintf(err, errlen, "tls-front probe of %s: %s", what, why);
    return rc;
}

int tlsscout_probe(const struct sockaddr *addr, socklen_t addr_len, const char *sni,
                   const struct tlsscout_opts *o, struct tlsflight *out, char *err, size_t errlen)
{
    uint8_t rnd[TLSFLIGHT_HELLO_RND], hello[TLSFLIGHT_HELLO_LEN];
    if (crypto_random(rnd, sizeof rnd) != 0) {
        snprintf(err, errlen, "tls-front probe: no random bytes");
        return -EIO;
    }
    size_t hl = tlsflight_client_hello(hello, sizeof hello, sni, rnd);
    if (hl == 0) {
        snprintf(err, errlen, "tls-front probe: server name too long for a ClientHello");
        return -EINVAL;
    }
    uint8_t *buf = tg__malloc(TLSFLIGHT_RECORDING_MAX);
    if (!buf) {
        snprintf(err, errlen, "tls-front probe: out of memory");
        return -ENOMEM;
    }
    size_t n = 0;
    int rc = tlsscout_exchange(addr, addr_len, hello, hl, sni ? sni : "(no SNI)", o, buf, &n, out,
                               err, errlen);
    tg__free(buf);
    return rc;
}
