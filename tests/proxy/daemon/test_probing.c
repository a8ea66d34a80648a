/*
 * Active probing: what a prober sees from a local web site directly, and from the same site
 * through tgproxy (domain fronting), must be the same (issue 10). Each probe runs twice,
 * against the site at 127.0.0.2 and against tgproxy at 127.0.0.1, and the two results are
 * compared: the bytes (exactly; for TLS answers, whose randoms and signatures differ per
 * connection, the record types and alerts), how the connection ended (FIN, reset, or still
 * open) and a coarse timing class (at once, at the site's own timer, later).
 *
 * The sites (tests/support/proxy_site.c) are real: OpenSSL with a self-signed certificate, a
 * plain HTTP server, one that resets, and one that answers junk at once as nginx does (an
 * HTTP 400, a TLS alert). Deadlines are short in the configs (the site's
 * idle timer SITE_IDLE_MS, tgproxy's handshake HS_MS), so no probe waits long; nothing
 * sleeps to let a deadline pass except where the probe itself is silent.
 */
#include "tgtest.h"

#include "proxy/config/config.h"
#include "proxy/daemon/server.h"
#include "proxy/wire/probekind.h"
#include "proxy/wire/tlsflight.h"
#include "proxy_client.h"
#include "proxy_harness.h"
#include "proxy_probe.h"
#include "proxy_site.h"

#include <arpa/inet.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#define SITE_IP      "127.0.0.2"
#define PROXY_IP     "127.0.0.1"
#define SITE_IDLE_MS 600   /* the sites' timer for a silent or incomplete client */
/* tgproxy's handshake deadline: long enough that each timing class below keeps about 1 s
   of slack on a loaded machine (under ASan with CI's load, closes at the site's 600 ms
   timer came 0.2-0.6 s late with 1200) */
#define HS_MS        3000
#define IDLE_MS      60000 /* tgproxy's relay idle timeout: far beyond any probe */
#define WAIT_MS      (SITE_IDLE_MS + HS_MS + 1000)
#define DOMAIN       "example.com"

struct via {
    struct config cfg;
    struct server *srv;
    uint16_t port;
};

struct site {
    struct psite *s;
    uint16_t port;
    struct via via;
};

static struct {
    uint8_t key[16];
    struct site tls, http, reset;
    struct site tls_dd; /* the TLS site again, through a tgproxy that also serves dd */
    struct site wild;   /* a TLS site at the port of a wildcard tgproxy listener */
    struct site loud, loud_dd; /* the site that answers junk at once: ee only, ee + dd */
} g;

/* tgproxy on listen fronting to the site; one ee secret (and a dd one with dd). */
static int via_start(struct via *v, const char *listen, uint16_t site_port, bool dd)
{
    struct config *cfg = &v->cfg;
    config_init(cfg);
    cfg->tls_front.enabled = false; /* no probes to the stand-in front */
    char err[256], text[64];
    struct secret sec = {.kind = SECRET_EE, .domain = DOMAIN, .domain_len = sizeof DOMAIN - 1};
    memcpy(sec.key, g.key, 16);
    if (config_add_listen(cfg, listen, strlen(listen), err, sizeof err) < 0 ||
        config_add_secret(cfg, "tls", &sec, err, sizeof err) < 0) {
        config_cleanup(cfg);
        return -1;
    }
    sec.kind = SECRET_DD;
    if (dd && config_add_secret(cfg, "dd", &sec, err, sizeof err) < 0)
        return -1;
    struct value_hostport hp;
    snprintf(text, sizeof text, SITE_IP ":%u", (unsigned)site_port);
    if (value_hostport_parse(text, strlen(text), &hp, err, sizeof err) < 0)
        return -1;
    memcpy(cfg->fronting.host, hp.host, sizeof hp.host);
    cfg->fronting.port = hp.port;
    cfg->fronting.resolved = true;
    cfg->fronting.addr = hp.addr;
    cfg->fronting.addr_len = hp.addr_len;
    cfg->timeout.handshake_ms = HS_MS;
    cfg->timeout.idle_ms = IDLE_MS;
    cfg->workers = 1;
    if (server_start(cfg, &v->srv) < 0) {
        config_cleanup(cfg);
        return -1;
    }
    v->port = server_port(v->srv, 0);
    return 0;
}

static void via_stop(struct via *v)
{
    server_stop(v->srv);
    config_cleanup(&v->cfg);
    memset(v, 0, sizeof *v);
}

static int site_start(struct site *s, enum psite_mode mode, bool dd)
{
    s->s = psite_start(&(struct psite_opts){.addr = SITE_IP, .mode = mode, .idle_ms = SITE_IDLE_MS},
                       &s->port);
    return s->s && via_start(&s->via, "127.0.0.1:0", s->port, dd) == 0 ? 0 : -1;
}

/* The TLS site on 127.0.0.2:P and tgproxy on the wildcard 0.0.0.0:P, as the quick start
   configures it (issue 10: this used to turn fronting off). Another socket may hold P on
   127.0.0.1 (tests run in parallel): then both start again on a new port. */
static int wild_start(struct site *s)
{
    for (int attempt = 0; attempt < 20; attempt++) {
        s->s = psite_start(
            &(struct psite_opts){.addr = SITE_IP, .mode = PSITE_TLS, .idle_ms = SITE_IDLE_MS},
            &s->port);
        char listen[32];
        snprintf(listen, sizeof listen, "0.0.0.0:%u", (unsigned)s->port);
        if (s->s && via_start(&s->via, listen, s->port, false) == 0)
            return 0;
        psite_stop(s->s);
        s->s = NULL;
    }
    return -1;
}

static int setup(void **state)
{
    (void)state;
    RAND_bytes(g.key, sizeof g.key);
    if (site_start(&g.tls, PSITE_TLS, false) < 0 || site_start(&g.http, PSITE_HTTP, false) < 0 ||
        site_start(&g.reset, PSITE_RESET, false) < 0 ||
        site_start(&g.tls_dd, PSITE_TLS, true) < 0 || wild_start(&g.wild) < 0 ||
        site_start(&g.loud, PSITE_LOUD, false) < 0 || site_start(&g.loud_dd, PSITE_LOUD, true) < 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    struct site *all[] = {&g.tls, &g.http, &g.reset, &g.tls_dd, &g.wild, &g.loud, &g.loud_dd};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        via_stop(&all[i]->via);
        psite_stop(all[i]->s);
    }
    return 0;
}

/* ---- comparing ---- */

enum tclass { T_NOW, T_SITE, T_LATE, T_OPEN };
static const char *const tclass_names[] = {"at once", "at the site's timer", "late", "open"};

static enum tclass tclass_ms(long ms)
{
    if (ms < SITE_IDLE_MS / 2)
        return T_NOW;
    return ms < SITE_IDLE_MS + HS_MS / 2 ? T_SITE : T_LATE;
}

static enum tclass tclass(const struct pprobe_result *r)
{
    return r->end == PPROBE_OPEN ? T_OPEN : tclass_ms(r->end_ms);
}

/* The TLS record types of b[0..n), alerts in full: "16 14 17 17 | 15:0228". Answers differ
   per connection in randoms, key shares and signature lengths, not in this. */
static void tls_shape(const uint8_t *b, size_t n, char *out, size_t cap)
{
    size_t at = 0, o = 0;
    out[0] = '\0';
    while (at + 5 <= n && o + 16 < cap) {
        size_t len = (size_t)b[at + 3] << 8 | b[at + 4];
        o += (size_t)snprintf(out + o, cap - o, "%02x", b[at]);
        if (b[at] == 0x15 && at + 5 + len <= n)
            for (size_t i = 0; i < len && o + 4 < cap; i++)
                o += (size_t)snprintf(out + o, cap - o, "%s%02x", i ? "" : ":", b[at + 5 + i]);
        o += (size_t)snprintf(out + o, cap - o, " ");
        at += 5 + len;
    }
    if (at != n && o + 8 < cap)
        snprintf(out + o, cap - o, "+%zu", n - at); /* a partial record or plain bytes */
}

static void print_result(const char *who, const struct pprobe_result *r)
{
    printf("    %-7s %3zu bytes (first at %ld ms), %s at %ld ms (%s)%s\n", who, r->n, r->first_ms,
           pprobe_end_name(r->end), r->end_ms, tclass_names[tclass(r)],
           r->reset_after_eof ? ", reset after EOF" : "");
}

/* Run p against the site directly and through its tgproxy; assert they look the same. */
static void probe_both(const char *name, struct site *s, const struct pprobe *p, bool tls)
{
    struct pprobe_result d, v;
    assert_int_equal(pprobe_run(SITE_IP, s->port, p, &d), 0);
    assert_int_equal(pprobe_run(PROXY_IP, s->via.port, p, &v), 0);
    printf("  probe %s\n", name);
    print_result("direct", &d);
    print_result("tgproxy", &v);
    if (tls) {
        char sd[512], sv[512];
        tls_shape(d.bytes, d.n, sd, sizeof sd);
        tls_shape(v.bytes, v.n, sv, sizeof sv);
        assert_string_equal(sd, sv);
    } else {
        assert_int_equal(d.n, v.n);
        assert_memory_equal(d.bytes, v.bytes, d.n < PPROBE_MAX_BYTES ? d.n : PPROBE_MAX_BYTES);
    }
    assert_int_equal(d.end, v.end);
    assert_int_equal(tclass(&d), tclass(&v));
    if (d.first_ms >= 0 && v.first_ms >= 0) /* the answer's first byte, too */
        assert_int_equal(tclass_ms(d.first_ms), tclass_ms(v.first_ms));
    assert_int_equal(d.reset_after_eof, v.reset_after_eof);
}

static void probe_bytes(const char *name, struct site *s, const void *b, size_t n, bool tls)
{
    struct pprobe p = {.bytes = b, .n = n, .wait_ms = WAIT_MS};
    probe_both(name, s, &p, tls);
}

/* ---- TLS probes (the site is an HTTPS server, as fronting sites are) ---- */

static int64_t now_s(void)
{
    return (int64_t)time(NULL);
}

/* The bytes of the probe kind called name: the probing suite `tgproxy probe` sends
   (src/proxy/wire/probekind.c), into out (PROBEKIND_BYTES_MAX bytes). */
static size_t kind(const char *name, uint8_t *out)
{
    uint8_t rnd[TLSFLIGHT_HELLO_RND];
    RAND_bytes(rnd, sizeof rnd);
    struct probekind_ctx c = {DOMAIN, g.key, now_s(), rnd};
    for (size_t i = 0; i < probekind_count(); i++)
        if (strcmp(probekind_get(i)->name, name) == 0) {
            size_t n = probekind_bytes(i, &c, out, PROBEKIND_BYTES_MAX);
            assert_true(n != (size_t)-1);
            return n;
        }
    fail_msg("no probe kind '%s'", name);
    return 0;
}

static void test_hellos_that_fail_validation(void **state)
{
    (void)state;
    uint8_t hello[1024], other[16];
    RAND_bytes(other, sizeof other);
    size_t n = pcli_hello(hello, sizeof hello, other, DOMAIN, now_s());
    probe_bytes("wrong key", &g.tls, hello, n, true);
    n = pcli_hello(hello, sizeof hello, g.key, "www.other.example", now_s());
    probe_bytes("wrong SNI", &g.tls, hello, n, true);
    n = pcli_hello(hello, sizeof hello, g.key, DOMAIN, now_s() - 3600);
    probe_bytes("stale timestamp", &g.tls, hello, n, true);
    n = pcli_hello(hello, sizeof hello, g.key, DOMAIN, now_s() + 3600);
    probe_bytes("future timestamp", &g.tls, hello, n, true);
}

/* A valid hello is answered by tgproxy itself once; the same bytes again are a replay. */
static void test_replayed_hello(void **state)
{
    (void)state;
    uint8_t hello[1024];
    size_t n = pcli_hello(hello, sizeof hello, g.key, DOMAIN, now_s());
    struct pprobe_result r;
    struct pprobe first = {.bytes = hello, .n = n, .wait_ms = 300};
    assert_int_equal(pprobe_run(PROXY_IP, g.tls.via.port, &first, &r), 0);
    assert_true(r.n > 5 && r.bytes[0] == 0x16); /* our ServerHello: the hello was genuine */
    probe_bytes("replayed valid hello", &g.tls, hello, n, true);
}

static void test_malformed_records(void **state)
{
    (void)state;
    static uint8_t b[PROBEKIND_BYTES_MAX];
    probe_bytes("16 KiB bad hello", &g.tls, b, kind("16 KiB junk hello", b), true);
    probe_bytes("record length 511", &g.tls, b, kind("hello record length 511", b), true);
    probe_bytes("record length 16385", &g.tls, b, kind("hello record length 16385", b), true);
    probe_bytes("ApplicationData first", &g.tls, b, kind("ApplicationData first", b), true);
    probe_bytes("one random byte", &g.tls, b, kind("one byte 42", b), true);
    probe_bytes("HTTP GET to the TLS port", &g.tls, b, kind("HTTP GET /", b), true);
}

/* A hello cut short by a half-close. */
static void test_half_close(void **state)
{
    (void)state;
    static uint8_t b[PROBEKIND_BYTES_MAX];
    size_t n = kind("partial hello, half-close", b);
    assert_int_equal(n, 100); /* of a 517-byte record */
    struct pprobe p = {.bytes = b, .n = n, .shut_wr = true, .wait_ms = WAIT_MS};
    probe_both("partial hello, then half-close", &g.tls, &p, true);
}

/* ---- probes that cannot be decided at once ---- */

/* A TLS record header that promises a 512-byte hello, then silence: the site's own timer
   ends it, directly and through tgproxy (whose early fronting connection lets the site's
   timer run from the client's accept, not from tgproxy's handshake deadline). */
static void test_stalled_hello_prefix(void **state)
{
    (void)state;
    static const uint8_t pre[] = {0x16, 0x03, 0x01, 0x02, 0x00};
    probe_bytes("bare 16 03 01 02 00", &g.tls, pre, sizeof pre, true);
    probe_bytes("bare 16 03 01 02 00, dd served too", &g.tls_dd, pre, sizeof pre, true);
    struct stats st;
    server_stats(g.tls.via.srv, &st);
    assert_true(st.front_early >= 1);
}

/* A prober that connects and says nothing: the site's idle timer closes it. Through
   tgproxy the site is reached once the client stayed silent a moment (CONN_SILENT_MS, here
   a quarter of the handshake deadline), so the close comes that much later: the same
   class, not the same millisecond. */
static void test_silent_prober(void **state)
{
    (void)state;
    struct pprobe p = {.wait_ms = WAIT_MS};
    probe_both("silent", &g.tls, &p, true);
    probe_both("silent, dd served", &g.tls_dd, &p, true);
}

/* With a dd secret, bytes shorter than an obfs2 header: what can never start one (an HTTP
   request, brief 2.1's reserved first words) is fronted at once; the rest waits with an
   early connection, so the site's timer ends it either way. */
static void test_short_probes_with_dd_secret(void **state)
{
    (void)state;
    static const char get[] = "GET / HTTP/1.1\r\nHost: " DOMAIN "\r\n\r\n";
    probe_bytes("HTTP GET, dd served", &g.tls_dd, get, sizeof get - 1, true);
    static const char post[] = "POST /x HTTP/1.1\r\n\r\n";
    probe_bytes("HTTP POST, dd served", &g.tls_dd, post, sizeof post - 1, true);
    static const uint8_t one[] = {0x42};
    probe_bytes("one random byte, dd served", &g.tls_dd, one, 1, true);
    static const uint8_t ef[] = {0xef, 1, 2, 3};
    probe_bytes("ef first (abridged), dd served", &g.tls_dd, ef, sizeof ef, true);
    uint8_t junk[40];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)(i * 37 + 11);
    probe_bytes("40 junk bytes, dd served", &g.tls_dd, junk, sizeof junk, true);
}

/* Issue 21: junk shorter than an obfs2 header that the site answers at once (nginx: an HTTP
   400, a TLS alert) is answered at once through tgproxy too, with a dd secret served: no
   obfs2 client waits for the server before its 64-byte header is whole, so a site that
   spoke first ends the wait (the answer used to be held until the handshake deadline). */
static void loud_probes(struct site *s, const char *who)
{
    static const struct {
        const char *name, *kind; /* the kind in src/proxy/wire/probekind.c */
        bool tls;                /* an OpenSSL answer: compare record shapes */
    } probes[] = {
        {"TLS alert record", "TLS alert first", false},
        {"PUT / HTTP/1.0", "PUT / HTTP/1.0", false},
        {"HTTP/2 preface", "HTTP/2 preface", false},
        {"ApplicationData first", "ApplicationData first", false},
        {"DELETE", "DELETE", false},
        /* a ClientHello in a TLS 1.2 record (16 03 03), no extensions: 50 bytes */
        {"TLS 1.2 record-version hello", "TLS 1.2 record hello", true},
        /* an SSLv2-compatible ClientHello offering TLS 1.0: 36 bytes */
        {"SSLv2-compatible hello", "SSLv2-compatible hello", true},
    };
    static uint8_t b[PROBEKIND_BYTES_MAX];
    char name[96];
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        snprintf(name, sizeof name, "%s, site answers at once, %s", probes[i].name, who);
        probe_bytes(name, s, b, kind(probes[i].kind, b), probes[i].tls);
    }
}

static void test_site_answers_short_junk(void **state)
{
    (void)state;
    loud_probes(&g.loud, "ee only");
    loud_probes(&g.loud_dd, "dd served");
    struct stats st;
    server_stats(g.loud_dd.via.srv, &st);
    assert_int_equal(st.handshake_timeout, 0); /* none waited for tgproxy's deadline */
    assert_true(st.front_early >= 1);          /* the site was reached before any verdict */
}

/* A wildcard listener beside the site at the same port fronts like any other. */
static void test_wildcard_listener(void **state)
{
    (void)state;
    uint8_t hello[1024], other[16];
    RAND_bytes(other, sizeof other);
    size_t n = pcli_hello(hello, sizeof hello, other, DOMAIN, now_s());
    probe_bytes("wildcard listener: wrong key", &g.wild, hello, n, true);
    static const char get[] = "GET / HTTP/1.1\r\nHost: " DOMAIN "\r\n\r\n";
    probe_bytes("wildcard listener: HTTP GET", &g.wild, get, sizeof get - 1, true);
    static const uint8_t pre[] = {0x16, 0x03, 0x01, 0x02, 0x00};
    probe_bytes("wildcard listener: bare 16 03 01 02 00", &g.wild, pre, sizeof pre, true);
    struct stats st;
    server_stats(g.wild.via.srv, &st);
    assert_int_equal(st.front_self, 0);
}

/* ---- a real TLS client (OpenSSL, as Python's ssl module) with a full session ---- */

struct tls_result {
    char body[512];
    int len;
    int end; /* SSL_get_error of the read that ended the session */
};

static void tls_session(const char *ip, uint16_t port, struct tls_result *out)
{
    memset(out, 0, sizeof *out);
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    assert_non_null(ctx);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, ip, &a.sin_addr);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    SSL *ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    SSL_set_tlsext_host_name(ssl, DOMAIN);
    assert_int_equal(SSL_connect(ssl), 1);
    static const char get[] = "GET / HTTP/1.1\r\nHost: " DOMAIN "\r\n\r\n";
    assert_int_equal(SSL_write(ssl, get, sizeof get - 1), (int)sizeof get - 1);
    for (;;) {
        int k = SSL_read(ssl, out->body + out->len, (int)sizeof out->body - out->len);
        if (k <= 0) {
            out->end = SSL_get_error(ssl, k);
            break;
        }
        out->len += k;
    }
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    ERR_clear_error();
    close(fd);
}

static void test_full_tls_session(void **state)
{
    (void)state;
    struct tls_result d, v;
    tls_session(SITE_IP, g.tls.port, &d);
    tls_session(PROXY_IP, g.tls.via.port, &v);
    printf("  probe OpenSSL client, full session and a GET: direct %d bytes (end %d), "
           "tgproxy %d bytes (end %d)\n",
           d.len, d.end, v.len, v.end);
    assert_int_equal(d.len, (int)sizeof PSITE_HTTP_OK - 1);
    assert_memory_equal(d.body, PSITE_HTTP_OK, (size_t)d.len);
    assert_int_equal(v.len, d.len);
    assert_memory_equal(v.body, d.body, (size_t)d.len);
    assert_int_equal(v.end, d.end);
}

/* ---- resets and closes ---- */

/* The site resets on the first bytes: the client gets a reset, not a FIN. */
static void test_site_reset_reaches_client(void **state)
{
    (void)state;
    static const char get[] = "GET / HTTP/1.1\r\nHost: " DOMAIN "\r\n\r\n";
    struct pprobe p = {.bytes = get, .n = sizeof get - 1, .wait_ms = WAIT_MS};
    probe_both("site resets", &g.reset, &p, false);
    struct pprobe_result r;
    assert_int_equal(pprobe_run(PROXY_IP, g.reset.via.port, &p, &r), 0);
    assert_int_equal(r.end, PPROBE_RST); /* the comparison above cannot pass on two FINs */
}

/* The site answers and closes (FIN); bytes the client sends afterwards get a reset. */
static void test_bytes_after_site_close_get_reset(void **state)
{
    (void)state;
    static const char get[] = "GET / HTTP/1.1\r\nHost: " DOMAIN "\r\n\r\n";
    struct pprobe p = {.bytes = get,
                       .n = sizeof get - 1,
                       .after_eof = "more",
                       .after_eof_n = 4,
                       .wait_ms = WAIT_MS};
    probe_both("site closes, client sends more", &g.http, &p, false);
    struct pprobe_result r;
    assert_int_equal(pprobe_run(PROXY_IP, g.http.via.port, &p, &r), 0);
    assert_true(r.reset_after_eof);
}

/* A closed site's connection is not held until the idle timeout (60 s here): once the
   client stayed quiet for a while, tgproxy lets both sockets go, and later bytes from the
   client are still answered with a reset, as the site's closed socket does. */
static bool none_active(struct server *srv)
{
    return pharness_wait_idle(srv, 4000);
}

static void test_closed_site_not_held_until_idle(void **state)
{
    (void)state;
    assert_true(none_active(g.http.via.srv));
    int fd = psock_connect(g.http.via.port, 5000);
    assert_true(fd >= 0);
    static const char get[] = "GET / HTTP/1.1\r\nHost: " DOMAIN "\r\n\r\n";
    assert_int_equal(psock_write_all(fd, get, sizeof get - 1), 0);
    char buf[256];
    size_t n = 0;
    ssize_t k;
    while ((k = recv(fd, buf + n, sizeof buf - n, 0)) > 0)
        n += (size_t)k;
    assert_int_equal(k, 0); /* the site's FIN */
    assert_int_equal(n, sizeof PSITE_HTTP_OK - 1);
    struct stats st;
    server_stats(g.http.via.srv, &st);
    assert_int_equal(st.active, 1);           /* still relayed: the client may send more */
    assert_true(none_active(g.http.via.srv)); /* within 4 s, far below idle */
    assert_true(send(fd, "x", 1, MSG_NOSIGNAL) == 1);
    struct pollfd pf = {.fd = fd, .events = 0}; /* only an error or hang-up wakes it */
    assert_int_equal(poll(&pf, 1, 2000), 1);
    int err = 0;
    socklen_t el = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
    assert_true(err == ECONNRESET || err == EPIPE); /* Linux says EPIPE in CLOSE_WAIT */
    close(fd);
}

/* ---- no TCP keepalive toward a fronted client ---- */

/* The "tr" column of /proc/net/tcp (2 = the keepalive timer runs) for the socket from
   local_port to rem_port on 127.0.0.1, or -1 when there is none. */
static int tcp_timer(uint16_t local_port, uint16_t rem_port)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    if (!f)
        return -1;
    char line[512];
    int tr = -1;
    while (tr < 0 && fgets(line, sizeof line, f)) {
        unsigned lp, rp, st, t;
        if (sscanf(line, " %*u: %*8x:%4x %*8x:%4x %2x %*8x:%*8x %2x", &lp, &rp, &st, &t) == 4 &&
            lp == local_port && rp == rem_port)
            tr = (int)t;
    }
    fclose(f);
    return tr;
}

struct timer_want {
    uint16_t local_port, rem_port;
    int want;
};

static bool timer_is(void *arg)
{
    const struct timer_want *w = arg;
    return tcp_timer(w->local_port, w->rem_port) == w->want;
}

static bool wait_timer(uint16_t local_port, uint16_t rem_port, int want)
{
    struct timer_want w = {local_port, rem_port, want};
    return tgtest_wait_until(timer_is, &w, 500);
}

static void test_no_keepalive_on_fronted_client(void **state)
{
    (void)state;
    if (tcp_timer(0, 0) == -1 && access("/proc/net/tcp", R_OK) != 0)
        tgtest_skip("/proc/net/tcp is not readable: a socket's keepalive timer cannot be seen");
    int fd = psock_connect(g.http.via.port, 5000);
    assert_true(fd >= 0);
    struct sockaddr_in me;
    socklen_t ml = sizeof me;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&me, &ml), 0);
    uint16_t cport = ntohs(me.sin_port);
    /* still in the handshake: the listener's keepalive applies (a genuine client wants it) */
    assert_true(wait_timer(g.http.via.port, cport, 2));
    static const char part[] = "GET / HTTP/1.1\r\n"; /* fronted at once; the site waits */
    assert_int_equal(psock_write_all(fd, part, sizeof part - 1), 0);
    assert_true(wait_timer(g.http.via.port, cport, 0)); /* as the site's own socket */
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hellos_that_fail_validation),
        cmocka_unit_test(test_replayed_hello),
        cmocka_unit_test(test_malformed_records),
        cmocka_unit_test(test_half_close),
        cmocka_unit_test(test_stalled_hello_prefix),
        cmocka_unit_test(test_short_probes_with_dd_secret),
        cmocka_unit_test(test_site_answers_short_junk),
        cmocka_unit_test(test_silent_prober),
        cmocka_unit_test(test_wildcard_listener),
        cmocka_unit_test(test_full_tls_session),
        cmocka_unit_test(test_site_reset_reaches_client),
        cmocka_unit_test(test_bytes_after_site_close_get_reset),
        cmocka_unit_test(test_closed_site_not_held_until_idle),
        cmocka_unit_test(test_no_keepalive_on_fronted_client),
    };
    return tgtest_result(cmocka_run_group_tests(tests, setup, teardown));
}
