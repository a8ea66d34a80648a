/*
 * test_doctor: `tgproxy doctor` against local servers only. A CA and a certificate for
 * "localhost" made by the openssl CLI; an HTTPS fronting host (libmicrohttpd, GnuTLS)
 * whose Date header the test sets, so the clock can be made wrong; the fake DC from
 * tests/support; ports held busy for the bind check. The CA reaches tgproxy through
 * SSL_CERT_FILE, as it would reach any OpenSSL program.
 */
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "proxy/config/config.h"
#include "proxy/daemon/cli.h"
#include "proxy/daemon/doctor.h"
#include "doh_server.h"
#include "proxy_fakedc.h"
#include "proxy_util.h"
#include "socks5_server.h"
#include "tgtest.h"
#include "wait.h"

#define KEY_HEX "0123456789abcdef0123456789abcdef"
#define DOMAIN  "localhost"
#define OK      "\u2713 "
#define BAD     "\u2717 "
#define WARN    "! "

struct fx {
    char dir[64];
    char ca[128], ca_key[128], crt[128], key[128], conf[128];
    char *crt_pem, *key_pem;
    struct MHD_Daemon *https;
    uint16_t https_port;
    _Atomic long date_offset_s; /* added to the Date header (read by the server thread) */
    struct fakedc *dc;
    uint16_t dc_port;
    char out[8192];
};

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *buf = calloc(1, 16384);
    assert_non_null(buf);
    size_t n = fread(buf, 1, 16383, f);
    fclose(f);
    assert_true(n > 0);
    return buf;
}

__attribute__((format(printf, 1, 2))) static int sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return system(cmd);
}

/* A CA, and a certificate for DOMAIN it signed. */
static void make_pki(struct fx *f)
{
    assert_int_equal(sh("cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 "
                        "-nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=doctor-test-ca "
                        "-addext basicConstraints=critical,CA:TRUE "
                        "-addext keyUsage=critical,keyCertSign >/dev/null 2>&1",
                        f->dir),
                     0);
    assert_int_equal(sh("cd %s && openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
                        "-keyout leaf.key -out leaf.csr -subj /CN=" DOMAIN " >/dev/null 2>&1 && "
                        "printf 'subjectAltName=DNS:" DOMAIN "\\n' > leaf.ext && "
                        "openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
                        "-days 2 -extfile leaf.ext -out leaf.pem >/dev/null 2>&1",
                        f->dir),
                     0);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *size, void **ctx)
{
    (void)method, (void)version, (void)data, (void)size, (void)ctx;
    struct fx *f = cls;
    /* access lists for the acl check; every other path is the fronting site */
    const char *body = strcmp(url, "/list.netset") == 0  ? "198.51.100.0/24\n203.0.113.7\n"
                       : strcmp(url, "/bad.netset") == 0 ? "198.51.100.0/24\nnot-an-address\n"
                                                         : "";
    unsigned status = strcmp(url, "/gone") == 0 ? MHD_HTTP_NOT_FOUND : MHD_HTTP_OK;
    char date[64];
    time_t t = time(NULL) + f->date_offset_s;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_DATE, date);
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    snprintf(f->dir, sizeof f->dir, "/tmp/tgtest-doctor-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->ca, sizeof f->ca, "%s/ca.pem", f->dir);
    snprintf(f->crt, sizeof f->crt, "%s/leaf.pem", f->dir);
    snprintf(f->key, sizeof f->key, "%s/leaf.key", f->dir);
    snprintf(f->conf, sizeof f->conf, "%s/t.toml", f->dir);
    make_pki(f);
    f->crt_pem = slurp(f->crt);
    f->key_pem = slurp(f->key);
    struct sockaddr_in sa = psock_addr(0);
    f->https = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_TLS, 0, NULL, NULL,
                                on_request, f, MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_HTTPS_MEM_CERT,
                                f->crt_pem, MHD_OPTION_HTTPS_MEM_KEY, f->key_pem,
                                MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
    assert_non_null(f->https);
    f->https_port = MHD_get_daemon_info(f->https, MHD_DAEMON_INFO_BIND_PORT)->port;
    f->dc = fakedc_start(&f->dc_port);
    assert_non_null(f->dc);
    setenv("SSL_CERT_FILE", f->ca, 1);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    MHD_stop_daemon(f->https);
    fakedc_stop(f->dc);
    free(f->crt_pem);
    free(f->key_pem);
    sh("rm -rf %s", f->dir);
    unsetenv("SSL_CERT_FILE");
    free(f);
    return 0;
}

/* A free port on 127.0.0.1 (bound, then released). */
static uint16_t free_port(void)
{
    uint16_t port = 0;
    int fd = psock_listen(&port, 1);
    assert_true(fd >= 0);
    close(fd);
    return port;
}

/* Write the config: everything pointed at the fixture unless a field says otherwise. */
struct conf {
    const char *extra;    /* top-level lines */
    uint16_t dc_port;     /* 0 = the fake DC */
    const char *front_ip; /* NULL = 127.0.0.1 */
    uint16_t front_port;  /* 0 = the HTTPS server */
    uint16_t bind_port;   /* 0 = port 0 (bindable whatever else runs) */
    unsigned concurrency; /* 0 = 64 */
    const char *secrets;  /* more lines in [secrets] */
    bool tls_front;       /* [defense.tls-front] on (its default); off here unless asked */
};

static void write_conf(struct fx *f, const struct conf *c)
{
    FILE *o = fopen(f->conf, "w");
    assert_non_null(o);
    char dom_hex[2 * sizeof DOMAIN];
    for (size_t i = 0; i < sizeof DOMAIN - 1; i++)
        snprintf(dom_hex + 2 * i, 3, "%02x", (unsigned)DOMAIN[i]);
    fprintf(o,
            "bind-to = \"127.0.0.1:%u\"\nconcurrency = %u\ntolerate-time-skewness = \"60s\"\n%s"
            "[secrets]\nmain = \"ee" KEY_HEX "%s\"\n%s"
            "[dcs]\ndefault = \"127.0.0.1:%u\"\n"
            "[domain-fronting]\nip = \"%s\"\nport = %u\n%s",
            c->bind_port, c->concurrency ? c->concurrency : 64, c->extra ? c->extra : "", dom_hex,
            c->secrets ? c->secrets : "", c->dc_port ? c->dc_port : f->dc_port,
            c->front_ip ? c->front_ip : "127.0.0.1", c->front_port ? c->front_port : f->https_port,
            c->tls_front ? "" : "[defense.tls-front]\nenabled = false\n");
    fclose(o);
    chmod(f->conf, 0600);
}

/* Run the doctor on the fixture's file; its output into f->out. */
static int run(struct fx *f)
{
    FILE *o = fmemopen(f->out, sizeof f->out - 1, "w");
    assert_non_null(o);
    int rc = doctor_run(f->conf, o);
    fclose(o);
    assert_null(strstr(f->out, KEY_HEX)); /* never the secret */
    return rc;
}

static void expect(const struct fx *f, const char *line)
{
    if (!strstr(f->out, line))
        fail_msg("expected \"%s\" in:\n%s", line, f->out);
}

/* Loader findings, as doctor sorts them. */
struct findings {
    int n, harmless;
    char all[4096];
};

static void collect(void *user, const char *msg)
{
    struct findings *w = user;
    w->n++;
    w->harmless += config_warning_harmless(msg);
    size_t used = strlen(w->all);
    snprintf(w->all + used, sizeof w->all - used, "%s\n", msg);
}

static int count(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

/* The fake DC accepted at least want connections in all. */
struct accepts_want {
    struct fakedc *dc;
    uint64_t want;
};

static bool accepted_all(void *arg)
{
    const struct accepts_want *w = arg;
    return fakedc_counters(w->dc).accepted >= w->want;
}

static void test_all_pass(void **state)
{
    struct fx *f = *state;
    write_conf(f, &(struct conf){0});
    uint64_t before = fakedc_counters(f->dc).accepted;
    int rc = run(f);
    if (rc != 0)
        fail_msg("doctor failed (%d):\n%s", rc, f->out);
    expect(f, OK "config: ");
    expect(f, OK "clock: ");
    expect(f, " localhost's Date header (tolerance \u00b160 s)");
    static const char *const dcs[] = {"DC 1", "DC 2", "DC 3", "DC 4", "DC 5", "DC 203"};
    for (size_t i = 0; i < sizeof dcs / sizeof dcs[0]; i++) {
        char l[64];
        snprintf(l, sizeof l, OK "%s: 127.0.0.1:%u answered", dcs[i], f->dc_port);
        expect(f, l);
    }
    expect(f, OK "fronting (localhost): 127.0.0.1:");
    expect(f, "with a certificate valid for localhost");
    expect(f, OK "SNI-DNS (localhost): resolves to 127.0.0.1");
    expect(f, OK "open files: hard limit");
    expect(f, OK "bind-to 127.0.0.1:");
    expect(f, OK "mss-clamp: left off on 127.0.0.1:");
    assert_int_equal(count(f->out, BAD), 0);
    assert_int_equal(count(f->out, "\n"), 13); /* one line per check */
    /* The DC check really connected: six DCs, one address each. Its connects complete in
       the kernel's accept queue, so the fake DC's thread may accept them only after doctor
       has returned: wait for that (bounded) rather than read the counter once. */
    struct accepts_want w = {f->dc, before + 6};
    assert_true(tgtest_wait_until(accepted_all, &w, 5000));
}

/* The mtg keys an unmodified mtg 2 file brings (tests/fixtures/mtg/example.config.toml:
   auto-update and anti-replay's max-size / error-rate) plus a deprecated spelling: printed
   as warnings, and doctor still passes; --strict gives them their own exit code. */
static const char mtg_keys[] = "auto-update = false\ncloak-port = 443\n"
                               "[defense.anti-replay]\nmax-size = \"1mib\"\nerror-rate = 0.001\n";

static void test_ignored_and_deprecated_keys(void **state)
{
    struct fx *f = *state;
    write_conf(f, &(struct conf){.extra = mtg_keys});
    int rc = run(f);
    if (rc != 0)
        fail_msg("doctor failed (%d) on harmless keys:\n%s", rc, f->out);
    expect(f, WARN "config: ");
    expect(f, ":4:1: auto-update: accepted for mtg compatibility but ignored");
    expect(f, ":5:1: cloak-port: deprecated mtg spelling");
    expect(f, ":7:1: defense.anti-replay.max-size: accepted for mtg compatibility");
    expect(f, ":8:1: defense.anti-replay.error-rate: accepted for mtg compatibility");
    assert_int_equal(count(f->out, WARN), 4);
    assert_int_equal(count(f->out, BAD), 0);
    assert_null(strstr(f->out, OK "config: ")); /* findings replace the "no findings" line */
    expect(f, OK "clock: ");                    /* the other checks still run */

    FILE *o = fmemopen(f->out, sizeof f->out - 1, "w");
    assert_non_null(o);
    assert_int_equal(doctor_check(f->conf, o, true), DOCTOR_EXIT_WARNINGS);
    fclose(o);
    assert_int_equal(count(f->out, WARN), 4); /* the same lines */

    /* A finding that is not harmless still fails, whatever else is only a warning. */
    assert_int_equal(chmod(f->conf, 0644), 0);
    assert_int_equal(run(f), DOCTOR_EXIT_FAILED);
    expect(f, BAD "config: ");
    expect(f, "is readable by other users and holds secrets");
    assert_int_equal(count(f->out, BAD), 1);
    assert_int_equal(count(f->out, WARN), 4);
}

/* mtg's own example file, unchanged: it loads, and every finding is one doctor calls
   harmless (a warning). Only the config stage: the file's other checks would reach the
   internet (its fronting domain, DoH server, DCs and blocklist URL); the test above runs
   the same keys through every check against local servers. */
static void test_mtg_example_config(void **state)
{
    struct fx *f = *state;
    char path[160];
    snprintf(path, sizeof path, "%s/mtg.toml", f->dir);
    size_t len = 0;
    char *text = tgtest_read_file(tgtest_data_path("fixtures/mtg/example.config.toml"), &len);
    assert_non_null(text);
    FILE *o = fopen(path, "w");
    assert_non_null(o);
    assert_int_equal(fwrite(text, 1, len, o), len);
    fclose(o);
    free(text);
    assert_int_equal(chmod(path, 0600), 0);
    struct config cfg;
    struct findings w = {0};
    char err[CONFIG_ERR_MAX] = "";
    config_init(&cfg);
    if (config_load_file(&cfg, path, err, sizeof err, collect, &w) != 0)
        fail_msg("mtg's example does not load: %s", err);
    config_cleanup(&cfg);
    assert_int_equal(w.n, 3);
    assert_int_equal(w.harmless, 3);
    assert_non_null(strstr(w.all, "mtg.toml:61:1: auto-update: accepted for mtg compat"));
    assert_non_null(strstr(w.all, ": defense.anti-replay.max-size: accepted for mtg compat"));
    assert_non_null(strstr(w.all, ": defense.anti-replay.error-rate: accepted for mtg compat"));
}

/* [stats.prometheus] bind-to is checked like a listen address: `run` stops when it cannot
   bind the page (exit 69), so doctor fails for it too. */
static void test_metrics_bind(void **state)
{
    struct fx *f = *state;
    uint16_t port = 0;
    int held = psock_listen(&port, 1);
    assert_true(held >= 0);
    char extra[160];
    snprintf(extra, sizeof extra,
             "[stats.prometheus]\nenabled = true\nbind-to = \"127.0.0.1:%u\"\n", port);
    write_conf(f, &(struct conf){.extra = extra});
    int rc = run(f);
    close(held);
    assert_int_equal(rc, DOCTOR_EXIT_FAILED);
    char l[160];
    snprintf(l, sizeof l, BAD "[stats.prometheus] bind-to 127.0.0.1:%u: %s", port,
             strerror(EADDRINUSE));
    expect(f, l);
    assert_int_equal(count(f->out, BAD), 1);
    assert_int_equal(run(f), 0); /* released: it can be bound now */
    snprintf(l, sizeof l, OK "[stats.prometheus] bind-to 127.0.0.1:%u: can be bound", port);
    expect(f, l);
}

/* [api]: the state file's secrets are counted, and one whose label the file also has is
   warned about as shadowed (the file wins); a broken state file fails. */
static void test_api_state(void **state)
{
    struct fx *f = *state;
    char path[128], extra[256], text[512];
    snprintf(path, sizeof path, "%s/api.json", f->dir);
    snprintf(extra, sizeof extra, "[api]\nenabled = true\nstate-file = \"%s\"\n", path);
    snprintf(text, sizeof text,
             "{\"revision\":3,\"secrets\":["
             "{\"label\":\"clash\",\"secret\":\"dd0f0e0d0c0b0a090807060504030201ff\"},"
             "{\"label\":\"mine\",\"secret\":\"dd000102030405060708090a0b0c0d0eff\"},"
             "{\"label\":\"main\",\"disabled\":true}]}");
    FILE *o = fopen(path, "w");
    assert_non_null(o);
    fputs(text, o);
    fclose(o);
    write_conf(f, &(struct conf){.extra = extra,
                                 .secrets = "clash = \"dd00112233445566778899aabbccddeeff\"\n"});
    run(f);
    expect(f, WARN "[api] state-file: secret 'clash' made over the API is shadowed");
    char l[256];
    snprintf(l, sizeof l,
             OK "[api] state-file: %s: 1 secret(s) made over the API merged with the file's, 1 "
                "disabled",
             path);
    expect(f, l);
    o = fopen(path, "w");
    assert_non_null(o);
    fputs("{\"revision\":", o);
    fclose(o);
    assert_int_equal(run(f), DOCTOR_EXIT_FAILED);
    expect(f, BAD "[api] state-file: ");
    unlink(path);
}

/* Issue 21 item 4: the [fleet] Redis link is plain TCP; one leaving the host is warned about
 * ("!" lines do not fail the run), a loopback or unix one passes. */
static void test_fleet_redis_address(void **state)
{
    struct fx *f = *state;
    static const struct {
        const char *url, *line;
        bool warned;
    } cases[] = {
        {"redis://10.1.2.3:6379", "! fleet redis: 10.1.2.3 is not on this host", true},
        {"redis://[2001:db8::7]:6379", "! fleet redis: 2001:db8::7 is not on this host", true},
        {"redis://127.0.0.1:6379", OK "fleet redis: 127.0.0.1: a loopback address", false},
        {"redis://127.8.9.10", OK "fleet redis: 127.8.9.10: a loopback address", false},
        {"redis://[::1]:6379", OK "fleet redis: ::1: a loopback address", false},
        {"unix:///run/redis/redis.sock", OK "fleet redis: unix:/run/redis/redis.sock", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char extra[128];
        snprintf(extra, sizeof extra, "[fleet]\nredis = \"%s\"\n", cases[i].url);
        write_conf(f, &(struct conf){.extra = extra});
        int rc = run(f);
        if (rc != 0)
            fail_msg("doctor failed (%d) for %s:\n%s", rc, cases[i].url, f->out);
        expect(f, cases[i].line);
        assert_int_equal(count(f->out, "! fleet redis"), cases[i].warned ? 1 : 0);
        if (cases[i].warned)
            expect(f, "tunnel it through TLS (stunnel: docs/fleet.md)");
        FILE *o = fmemopen(f->out, sizeof f->out - 1, "w"); /* a warning under --strict: 2 */
        assert_non_null(o);
        assert_int_equal(doctor_check(f->conf, o, true),
                         cases[i].warned ? DOCTOR_EXIT_WARNINGS : 0);
        fclose(o);
    }
}

/* [defense.tls-front]: doctor probes the site as the refresh thread does and says what the
   answer cannot copy: the local site (OpenSSL) writes each encrypted handshake message as a
   record of its own, and mss-clamp (on by default; on this loopback listener only with
   mss-clamp-loopback) cuts what tgproxy sends. Warnings only. */
static void test_tls_front(void **state)
{
    struct fx *f = *state;
    write_conf(f, &(struct conf){.tls_front = true});
    int rc = run(f);
    if (rc != 0)
        fail_msg("doctor failed (%d):\n%s", rc, f->out);
    expect(f, WARN "tls-front (localhost): 127.0.0.1:");
    expect(f, "what the answer cannot copy: the site spreads its encrypted handshake over "
              "several records; Telegram clients accept exactly one");
    expect(f, "a front that packs its flight into one encrypted record");
    /* this loopback listener is not clamped by default, so nothing cuts the answer */
    assert_int_equal(count(f->out, WARN "tls-front segments"), 0);
    assert_int_equal(count(f->out, WARN "tls-front"), 1);
    write_conf(f, &(struct conf){.tls_front = true,
                                 .extra = "[defense]\nmss-clamp-loopback = true\n"});
    assert_int_equal(run(f), 0);
    expect(f, WARN "tls-front segments: mss-clamp = 256 also cuts what tgproxy sends");
    assert_int_equal(count(f->out, WARN "tls-front"), 2);
    assert_int_equal(count(f->out, OK "mss-clamp: "), 0);
    write_conf(f, &(struct conf){.tls_front = true,
                                 .extra = "[defense]\nmss-clamp = false\n"
                                          "mss-clamp-loopback = true\n"});
    assert_int_equal(run(f), 0);
    assert_int_equal(count(f->out, WARN "tls-front segments"), 0);
    /* a front that is not there: a warning, the fixed answer */
    write_conf(f, &(struct conf){.tls_front = true, .front_port = (uint16_t)tgtest_listen_port()});
    run(f);
    expect(f, WARN "tls-front (localhost): the site's first flight cannot be learned");
}

static void test_wrong_clock(void **state)
{
    struct fx *f = *state;
    f->date_offset_s = 3600; /* the fronting host is an hour ahead of us */
    write_conf(f, &(struct conf){0});
    int rc = run(f);
    f->date_offset_s = 0;
    assert_int_equal(rc, DOCTOR_EXIT_FAILED);
    expect(f, BAD "clock: ");
    expect(f, " s behind localhost's Date header (tolerance \u00b160 s): FakeTLS clients will "
              "be refused");
    const char *p = strstr(f->out, BAD "clock: ") + strlen(BAD "clock: ");
    long skew = strtol(p, NULL, 10);
    assert_true(skew >= 3598 && skew <= 3602);
    assert_int_equal(count(f->out, BAD), 1);
}

static void test_dc_unreachable(void **state)
{
    struct fx *f = *state;
    uint16_t closed = 0;
    int held = psock_refusing(&closed); /* refuses until closed; nobody else can take it */
    assert_true(held >= 0);
    write_conf(f, &(struct conf){.dc_port = closed});
    int rc = run(f);
    close(held);
    assert_int_equal(rc, DOCTOR_EXIT_FAILED);
    char l[128];
    snprintf(l, sizeof l, BAD "DC 2: no address answered (127.0.0.1:%u: %s)", closed,
             strerror(ECONNREFUSED));
    expect(f, l);
    assert_int_equal(count(f->out, BAD), 6);
}

static void test_untrusted_certificate(void **state)
{
    struct fx *f = *state;
    write_conf(f, &(struct conf){0});
    /* An empty CA file: OpenSSL and libcurl trust nothing, as for a host with another CA. */
    char empty[160];
    snprintf(empty, sizeof empty, "%s/empty.pem", f->dir);
    fclose(fopen(empty, "w"));
    setenv("SSL_CERT_FILE", empty, 1);
    int rc = run(f);
    setenv("SSL_CERT_FILE", f->ca, 1);
    assert_int_equal(rc, DOCTOR_EXIT_FAILED);
    expect(f, BAD "fronting (localhost): 127.0.0.1:");
    expect(f, ": certificate refused: unable to get local issuer certificate");
    expect(f, BAD "clock: HEAD https://localhost:"); /* no trusted Date either */
    expect(f, OK "SNI-DNS (localhost)");
}

static void test_fronting_elsewhere(void **state)
{
    struct fx *f = *state;
    uint16_t closed = free_port();
    write_conf(f, &(struct conf){.front_ip = "127.0.0.2", .front_port = closed});
    assert_int_equal(run(f), DOCTOR_EXIT_FAILED);
    expect(f, BAD "SNI-DNS (localhost): resolves to 127.0.0.1 but failed handshakes go to "
                  "127.0.0.2");
    expect(f, BAD "fronting (localhost): not reachable: 127.0.0.2:");
}

/* Issue 21: a dd or classic secret gets its own line. With a fronting host fixed it passes
   and says what stays visible; without one, short probes would wait for the handshake
   timeout, and it fails. */
static void test_dd_probing(void **state)
{
    struct fx *f = *state;
    write_conf(f, &(struct conf){.secrets = "plain = \"dd" KEY_HEX "\"\n"});
    assert_int_equal(run(f), 0);
    expect(f, OK "probing (dd/classic): 1 secret(s) without TLS: short probes reach the "
                 "fronting site at once");
    expect(f, "a client's bytes are not TLS");
    FILE *o = fopen(f->conf, "w");
    assert_non_null(o);
    fprintf(o,
            "bind-to = \"127.0.0.1:0\"\n[secrets]\nplain = \"dd" KEY_HEX "\"\n"
            "[dcs]\ndefault = \"127.0.0.1:%u\"\n[network.timeout]\nhandshake = \"7s\"\n",
            f->dc_port);
    fclose(o);
    assert_int_equal(run(f), DOCTOR_EXIT_FAILED);
    expect(f, BAD "probing (dd/classic): no fronting host: a probe is read and dropped until "
                  "the handshake timeout (7 s)");
}

/* With [network] dns, names are resolved through that DoH server, as `run` would: here it
   says localhost is 127.0.0.9, which the system resolver would never say. The DoH server
   reuses the fixture's certificate for localhost; doh-ip pins its name to 127.0.0.1. */
static void test_sni_dns_through_doh(void **state)
{
    struct fx *f = *state;
    static const struct dohsrv_record elsewhere[] = {{"localhost", 1, "127.0.0.9", 60, 0}};
    static const struct dohsrv_record here[] = {{"localhost", 1, "127.0.0.1", 60, 0}};
    const struct dohsrv_record *tables[] = {elsewhere, here, here};
    for (int i = 0; i < 3; i++) { /* the third time over DNS over TLS */
        uint16_t port = 0;
        struct dohsrv *srv = dohsrv_start(&(struct dohsrv_opts){.addr = "127.0.0.1",
                                                                .crt_pem = f->crt_pem,
                                                                .key_pem = f->key_pem,
                                                                .records = tables[i],
                                                                .nrecords = 1,
                                                                .dot = true},
                                          &port);
        assert_non_null(srv);
        char extra[256];
        if (i < 2)
            snprintf(extra, sizeof extra,
                     "[network]\ndns = \"https://localhost:%u/dns-query\"\n"
                     "doh-ip = \"127.0.0.1\"\n",
                     (unsigned)port);
        else
            snprintf(extra, sizeof extra,
                     "[network]\ndns = \"tls://localhost:%u\"\ndoh-ip = \"127.0.0.1\"\n",
                     (unsigned)dohsrv_dot_port(srv));
        write_conf(f, &(struct conf){.extra = extra});
        int rc = run(f);
        if (i == 0) {
            assert_int_equal(rc, DOCTOR_EXIT_FAILED);
            expect(f, BAD "SNI-DNS (localhost): resolves (DNS over HTTPS) to 127.0.0.9 but "
                          "failed handshakes go to 127.0.0.1");
        } else {
            if (rc != 0)
                fail_msg("doctor failed (%d):\n%s", rc, f->out);
            expect(f, i == 1 ? OK "SNI-DNS (localhost): resolves (DNS over HTTPS) to 127.0.0.1"
                             : OK "SNI-DNS (localhost): resolves (DNS over TLS) to 127.0.0.1");
        }
        assert_true(dohsrv_queries_for(srv, "localhost") >= 1);
        dohsrv_stop(srv);
    }
}

static void test_bind_in_use(void **state)
{
    struct fx *f = *state;
    uint16_t port = 0;
    int held = psock_listen(&port, 1);
    assert_true(held >= 0);
    write_conf(f, &(struct conf){.bind_port = port});
    int rc = run(f);
    close(held);
    assert_int_equal(rc, DOCTOR_EXIT_FAILED);
    char l[128];
    snprintf(l, sizeof l, BAD "bind-to 127.0.0.1:%u: %s (is a proxy already running there?)", port,
             strerror(EADDRINUSE));
    expect(f, l);
    assert_int_equal(count(f->out, BAD), 1);
}

/* A hard open-files limit below what concurrency needs, in a child (limits are per process). */
static void test_open_files(void **state)
{
    struct fx *f = *state;
    write_conf(f, &(struct conf){.concurrency = 4096});
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit rl = {.rlim_cur = 512, .rlim_max = 512};
        int ok = setrlimit(RLIMIT_NOFILE, &rl) == 0;
        char path[160];
        snprintf(path, sizeof path, "%s/out.txt", f->dir);
        FILE *out = fopen(path, "w");
        _exit(ok && out ? doctor_run(f->conf, out) : 99);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    char path[160];
    snprintf(path, sizeof path, "%s/out.txt", f->dir);
    char *out = slurp(path);
    snprintf(f->out, sizeof f->out, "%s", out);
    free(out);
    assert_int_equal(WEXITSTATUS(status), DOCTOR_EXIT_FAILED);
    expect(f, BAD "open files: hard limit 512 is below the ");
    expect(f, " that concurrency = 4096 needs");
    assert_int_equal(count(f->out, BAD), 1);
}

/* With [network] proxies the DCs are checked through each upstream, never directly. */
static void test_socks5_upstream(void **state)
{
    struct fx *f = *state;
    socks5_server *ok = socks5_server_start(SOCKS5_NORMAL);
    socks5_server *refusing = socks5_server_start(SOCKS5_REFUSE_CONNECT);
    assert_non_null(ok);
    assert_non_null(refusing);
    uint16_t ok_port = socks5_server_port(ok), refusing_port = socks5_server_port(refusing);
    char extra[256];
    snprintf(extra, sizeof extra,
             "[network]\nproxies = [\"socks5://127.0.0.1:%u\", \"socks5://127.0.0.1:%u\"]\n",
             ok_port, refusing_port);
    write_conf(f, &(struct conf){.extra = extra});
    int rc = run(f);
    size_t nrec = socks5_server_nrecords(ok);
    socks5_record rec;
    assert_true(socks5_server_record(ok, 0, &rec));
    socks5_server_stop(ok);
    socks5_server_stop(refusing);
    assert_int_equal(rc, DOCTOR_EXIT_FAILED);
    char l[160];
    snprintf(l, sizeof l, OK "DC 2 via socks5://127.0.0.1:%u: 127.0.0.1:%u answered", ok_port,
             f->dc_port);
    expect(f, l);
    snprintf(l, sizeof l, BAD "DC 2 via socks5://127.0.0.1:%u: 127.0.0.1:%u: ", refusing_port,
             f->dc_port);
    expect(f, l);
    assert_int_equal(count(f->out, BAD), 6);  /* every DC through the refusing upstream */
    assert_null(strstr(f->out, OK "DC 2: ")); /* nothing direct */
    assert_int_equal(nrec, 6);                /* one CONNECT per DC, to the fake DC */
    assert_int_equal(rec.reply, 0);
    assert_int_equal(rec.port, f->dc_port);
}

/* Doctor with access lists in conf's extra lines; its output in f->out. */
static int run_lists(struct fx *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int run_lists(struct fx *f, const char *fmt, ...)
{
    char extra[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(extra, sizeof extra, fmt, ap);
    va_end(ap);
    write_conf(f, &(struct conf){.extra = extra});
    return run(f);
}

/* One line per enabled list: files read and parsed, URLs downloaded from a local HTTPS
   server (the test's CA) and parsed, as `run` loads them; each failure names the file and
   line, or the URL (user info hidden) and the HTTP or TLS reason. */
static void test_access_lists(void **state)
{
    struct fx *f = *state;
    char good[160], bad[160], empty[160], l[512];
    snprintf(good, sizeof good, "%s/good.netset", f->dir);
    snprintf(bad, sizeof bad, "%s/bad.netset", f->dir);
    snprintf(empty, sizeof empty, "%s/empty.netset", f->dir);
    assert_int_equal(sh("printf '# ok\\n127.0.0.0/8\\n::1\\n' > %s && "
                        "printf '10.0.0.0/8\\n\\n10.0.0.0/33\\n' > %s && : > %s",
                        good, bad, empty),
                     0);
    unsigned p = f->https_port;
    int rc = run_lists(f,
                       "[defense.blocklist]\nenabled = true\nfiles = [\"%s\"]\n"
                       "urls = [\"https://localhost:%u/list.netset\"]\n"
                       "[defense.allowlist]\nenabled = true\nfiles = [\"%s\"]\n",
                       good, p, good);
    if (rc != 0)
        fail_msg("doctor failed (%d):\n%s", rc, f->out);
    expect(f, OK "blocklist: 1 file and 1 URL load: 4 ranges\n");
    expect(f, OK "allowlist: 1 file and 0 URLs load: 2 ranges\n");

    /* a bad line: file and line named; the other list is still checked */
    rc = run_lists(f,
                   "[defense.blocklist]\nenabled = true\nfiles = [\"%s\", \"%s\"]\n"
                   "[defense.allowlist]\nenabled = true\nfiles = [\"%s\"]\n",
                   good, bad, good);
    assert_int_equal(rc, DOCTOR_EXIT_FAILED);
    snprintf(l, sizeof l, BAD "blocklist: %s:3: \"10.0.0.0/33\": ", bad);
    expect(f, l);
    expect(f, OK "allowlist: ");
    assert_int_equal(count(f->out, BAD), 1);

    /* a missing file, a 404 (credentials never shown), a body that does not parse */
    rc = run_lists(f, "[defense.blocklist]\nenabled = true\nfiles = [\"%s/none\"]\n", f->dir);
    assert_int_equal(rc, DOCTOR_EXIT_FAILED);
    snprintf(l, sizeof l, BAD "blocklist: %s/none: cannot open: %s", f->dir, strerror(ENOENT));
    expect(f, l);
    run_lists(
        f, "[defense.blocklist]\nenabled = true\nurls = [\"https://u:tok3n@localhost:%u/gone\"]\n",
        p);
    snprintf(l, sizeof l,
             BAD "blocklist: https://***@localhost:%u/gone: HTTP status 404, expected 200", p);
    expect(f, l);
    assert_null(strstr(f->out, "tok3n"));
    run_lists(f,
              "[defense.blocklist]\nenabled = true\nurls = [\"https://localhost:%u/bad.netset\"]\n",
              p);
    snprintf(l, sizeof l,
             BAD "blocklist: https://localhost:%u/bad.netset:2: \"not-an-address\": ", p);
    expect(f, l);

    /* a certificate this host does not trust */
    setenv("SSL_CERT_FILE", empty, 1);
    rc = run_lists(
        f, "[defense.blocklist]\nenabled = true\nurls = [\"https://localhost:%u/list.netset\"]\n",
        p);
    setenv("SSL_CERT_FILE", f->ca, 1);
    assert_int_equal(rc, DOCTOR_EXIT_FAILED);
    snprintf(l, sizeof l, BAD "blocklist: https://localhost:%u/list.netset: download failed: ", p);
    expect(f, l);
    expect(f, "certificate");

    /* a server that accepts and never answers: [network.timeout] http ends the wait */
    uint16_t silent_port = 0;
    int silent = psock_listen(&silent_port, 4);
    assert_true(silent >= 0);
    rc = run_lists(f,
                   "[network.timeout]\nhttp = \"300ms\"\n[defense.blocklist]\nenabled = true\n"
                   "urls = [\"https://localhost:%u/x\"]\n",
                   (unsigned)silent_port);
    close(silent);
    assert_int_equal(rc, DOCTOR_EXIT_FAILED);
    snprintf(l, sizeof l,
             BAD "blocklist: https://localhost:%u/x: download failed: ", (unsigned)silent_port);
    expect(f, l);
    expect(f, "timeout");

    /* an allowlist that loads nothing would refuse everyone */
    rc = run_lists(f, "[defense.allowlist]\nenabled = true\nfiles = [\"%s\"]\n", empty);
    assert_int_equal(rc, DOCTOR_EXIT_FAILED);
    expect(f, BAD "allowlist: 1 file and 0 URLs load: 0 ranges: every client would be refused");
}

static void test_bad_config(void **state)
{
    struct fx *f = *state;
    FILE *o = fopen(f->conf, "w");
    assert_non_null(o);
    fputs("bind-to = \"127.0.0.1:1\"\nconcurrenc = 5\n", o);
    fclose(o);
    assert_int_equal(run(f), 78);
    expect(f, BAD "config: ");
    expect(f, "concurrenc");
    assert_int_equal(count(f->out, "\n"), 1); /* nothing else can be checked */
}

/* Through the command line: --help documents it, a missing file is a usage error. */
static void test_cli(void **state)
{
    struct fx *f = *state;
    char out[8192] = "", err[1024] = "";
    FILE *o = fmemopen(out, sizeof out - 1, "w"), *e = fmemopen(err, sizeof err - 1, "w");
    char *help[] = {"tgproxy", "--help", NULL};
    assert_int_equal(cli_main(2, help, o, e), 0);
    fflush(o);
    assert_non_null(strstr(out, "doctor CONFIG.toml"));
    char *none[] = {"tgproxy", "doctor", NULL};
    assert_int_equal(cli_main(2, none, o, e), 64);
    write_conf(f, &(struct conf){0});
    rewind(o);
    char *ok[] = {"tgproxy", "doctor", f->conf, NULL};
    assert_int_equal(cli_main(3, ok, o, e), 0);
    fflush(o);
    assert_non_null(strstr(out, OK "bind-to 127.0.0.1:"));
    /* harmless mtg keys: 0 without --strict, 2 with it; a failed check is 1 either way */
    write_conf(f, &(struct conf){.extra = mtg_keys});
    char *strict[] = {"tgproxy", "doctor", "--strict", f->conf, NULL};
    assert_int_equal(cli_main(3, ok, o, e), 0);
    assert_int_equal(cli_main(4, strict, o, e), DOCTOR_EXIT_WARNINGS);
    assert_int_equal(DOCTOR_EXIT_WARNINGS, 2);
    write_conf(f, &(struct conf){.extra = mtg_keys, .dc_port = free_port()});
    assert_int_equal(cli_main(4, strict, o, e), DOCTOR_EXIT_FAILED);
    assert_int_equal(DOCTOR_EXIT_FAILED, 1);
    fclose(o);
    fclose(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_pass),
        cmocka_unit_test(test_ignored_and_deprecated_keys),
        cmocka_unit_test(test_fleet_redis_address),
        cmocka_unit_test(test_api_state),
        cmocka_unit_test(test_mtg_example_config),
        cmocka_unit_test(test_metrics_bind),
        cmocka_unit_test(test_tls_front),
        cmocka_unit_test(test_wrong_clock),
        cmocka_unit_test(test_dc_unreachable),
        cmocka_unit_test(test_untrusted_certificate),
        cmocka_unit_test(test_fronting_elsewhere),
        cmocka_unit_test(test_dd_probing),
        cmocka_unit_test(test_sni_dns_through_doh),
        cmocka_unit_test(test_bind_in_use),
        cmocka_unit_test(test_open_files),
        cmocka_unit_test(test_socks5_upstream),
        cmocka_unit_test(test_access_lists),
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
