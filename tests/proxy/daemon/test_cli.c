/*
 * test_cli: tgproxy's command line (src/proxy/daemon/cli.c) and links (src/proxy/daemon/links.c).
 *
 * cli_main() is driven in-process with temporary files as stdout/stderr for every command
 * that returns by itself; the built binary (TGKIT_BINARY_DIR/tgproxy) is run for --version,
 * a usage error, a bind failure and a full run that stops cleanly on SIGTERM.
 */
#include "tgtest.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <qrencode.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/buf.h"
#include "proxy/daemon/cli.h"
#include "proxy/daemon/links.h"
#include "proxy/wire/secret.h"
#include "proxy_util.h"

#define EE_A        "eeb00ebb678bf4d454a4ae053927ceb06e6578616d706c652e636f6d"
#define KEY_A       "b00ebb678bf4d454a4ae053927ceb06e"
#define TGPROXY_BIN TGKIT_BINARY_DIR "/tgproxy"

struct run {
    int code;
    char out[16384];
    char err[4096];
};

static void slurp(FILE *f, char *buf, size_t cap)
{
    rewind(f);
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* cli_main with argv given as a NULL-terminated list after "tgproxy". */
static void cli(struct run *r, const char *const *args)
{
    char *argv[16];
    int argc = 0;
    argv[argc++] = (char *)"tgproxy";
    for (; args[argc - 1] && argc < 15; argc++)
        argv[argc] = (char *)args[argc - 1];
    argv[argc] = NULL;
    FILE *out = tmpfile();
    FILE *err = tmpfile();
    assert_non_null(out);
    assert_non_null(err);
    r->code = cli_main(argc, argv, out, err);
    slurp(out, r->out, sizeof r->out);
    slurp(err, r->err, sizeof r->err);
}

static char *write_config(const char *text)
{
    static char paths[8][64];
    static int next;
    char *path = paths[next++ % 8];
    snprintf(path, sizeof paths[0], "/tmp/tgproxy-test-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    close(fd);
    return path;
}

static void test_help_version_usage(void **state)
{
    (void)state;
    struct run r;
    cli(&r, (const char *[]){"--version", NULL});
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "tgproxy " TGPROXY_VERSION "\n");
    cli(&r, (const char *[]){"--help", NULL});
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "generate-secret [--hex|--base64] DOMAIN"));
    cli(&r, (const char *[]){"access", "--help", NULL});
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "usage: tgproxy"));

    static const struct {
        const char *args[6];
        const char *msg;
    } usage[] = {
        {{NULL}, "missing command"},
        {{"serve", NULL}, "unknown command 'serve'"},
        {{"run", NULL}, "run: expected a configuration file"},
        {{"run", "a.toml", "b.toml", NULL}, "unexpected argument 'b.toml'"},
        {{"run", "--fast", "a.toml", NULL}, "unknown option '--fast'"},
        {{"run", "a.toml", EE_A, NULL}, "unexpected extra argument (a secret, not shown)"},
        {{"simple-run", "--secret=" EE_A, NULL}, "unknown option '--secret'"},
        {{"generate-secret", NULL}, "expected a DOMAIN"},
        {{"generate-secret", "--hex", "--base64", "a.com", NULL}, "exclude each other"},
        {{"generate-secret", "--hex=1", "a.com", NULL}, "takes no value"},
        {{"access", "x.toml", "--port", NULL}, "--port needs a value"},
        {{"simple-run", "127.0.0.1:1", NULL}, "expected HOST:PORT and SECRET"},
        {{"simple-run", "localhost:1", EE_A, NULL}, "HOST:PORT: "},
        {{"simple-run", "127.0.0.1:1", EE_A, "--workers", "x", NULL}, "--workers: expected an"},
        /* a secret typed where a value or a command goes is never repeated */
        {{"simple-run", "127.0.0.1:1", EE_A, "--workers", EE_A, NULL}, "(value not shown)"},
        {{"simple-run", "127.0.0.1:1", EE_A, "--concurrency=" EE_A, NULL}, "(value not shown)"},
        {{"simple-run", "127.0.0.1:1", EE_A, "--public-port", KEY_A, NULL}, "(value not shown)"},
        {{EE_A, NULL}, "unknown command (a secret, not shown)"},
        {{"simple-run", "127.0.0.1:1", EE_A, "--fronting-host", "7rAOu2eL9NRUpK4F/SfOsA", NULL},
         "--fronting-host: not a host name or IP address (value not shown"},
        {{"simple-run", EE_A, "127.0.0.1:1", NULL}, "parses as a secret (not shown)"},
        {{"simple-run", "127.0.0.1:1", EE_A, "--secret-file", "f", NULL}, "exclude each other"},
        {{"simple-run", "127.0.0.1:1", EE_A, "--prefer-ip=ipv5", NULL}, "--prefer-ip"},
        {{"simple-run", "127.0.0.1:1", EE_A, "--workers", "1024", NULL},
         "expected an integer 0..256"},
        {{"simple-run", "127.0.0.1:1", EE_A, "--fronting-port", "0", NULL}, "1..65535"},
        {{"simple-run", "127.0.0.1:1", EE_A, "--no-fast-mode=yes", NULL}, "takes no value"},
    };
    for (size_t i = 0; i < sizeof usage / sizeof usage[0]; i++) {
        cli(&r, usage[i].args);
        if (r.code != 64 || !strstr(r.err, usage[i].msg) || !strstr(r.err, "tgproxy --help"))
            fail_msg("usage case %zu: code %d, stderr \"%s\"", i, r.code, r.err);
        assert_string_equal(r.out, "");
        assert_null(strstr(r.err, KEY_A)); /* SECRET arguments never echoed */
        assert_null(strstr(r.err, "SfOsA"));
    }
}

/* One exit-code table for every command: the codes --help lists, the table in
   docs/tgproxy.md and what the commands return agree. 69 (bind) is exercised by the
   test_binary_*_exit_69 cases, 1 and 2 by tests/proxy/daemon/test_doctor.c. */
static void test_exit_code_table(void **state)
{
    (void)state;
    static const int codes[] = {0, 1, 2, 64, 65, 69, 70, 71, 74, 78};
    size_t len = 0;
    char *doc = tgtest_read_file(TGKIT_SOURCE_DIR "/docs/tgproxy.md", &len);
    assert_non_null(doc);
    const char *table = strstr(doc, "Exit codes: one table for every command");
    assert_non_null(table);
    table = strstr(table, "\n| code |");
    assert_non_null(table);
    const char *end = strstr(table, "\n\n");
    assert_non_null(end);
    int rows = 0;
    for (const char *p = table; p && p < end; p = strchr(p + 1, '\n')) {
        int code = -1;
        if (sscanf(p, "\n| %d |", &code) == 1) {
            bool known = false;
            for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
                known |= codes[i] == code;
            if (!known)
                fail_msg("docs/tgproxy.md lists exit code %d, which cli.h does not", code);
            rows++;
        }
    }
    free(doc);
    assert_int_equal(rows, (int)(sizeof codes / sizeof codes[0]));

    struct run r;
    cli(&r, (const char *[]){"--help", NULL});
    const char *line = strstr(r.out, "Exit codes (every command): ");
    assert_non_null(line);
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        char want[2][8];
        snprintf(want[0], sizeof want[0], " %d ", codes[i]);
        snprintf(want[1], sizeof want[1], "\n%d ", codes[i]);
        if (!strstr(line, want[0]) && !strstr(line, want[1]))
            fail_msg("--help does not list exit code %d:\n%s", codes[i], line);
    }

    cli(&r, (const char *[]){"--version", NULL});
    assert_int_equal(r.code, 0);
    cli(&r, (const char *[]){"frobnicate", NULL});
    assert_int_equal(r.code, 64);
    cli(&r, (const char *[]){"simple-run", "127.0.0.1:1", "not-a-secret", NULL});
    assert_int_equal(r.code, 65);
    cli(&r, (const char *[]){"run", "/nonexistent/tgproxy.toml", NULL});
    assert_int_equal(r.code, 78);
    cli(&r, (const char *[]){"doctor", "/nonexistent/tgproxy.toml", NULL});
    assert_int_equal(r.code, 78);
    FILE *full = fopen("/dev/full", "w"), *err = tmpfile();
    assert_non_null(full);
    assert_non_null(err);
    char *argv[] = {"tgproxy", "--version", NULL};
    assert_int_equal(cli_main(2, argv, full, err), 74);
    fclose(full);
    fclose(err);
}

static void test_generate_secret(void **state)
{
    (void)state;
    struct run r;
    struct secret s1, s2;
    char err[256];
    cli(&r, (const char *[]){"generate-secret", "--hex", "www.example.com", NULL});
    assert_int_equal(r.code, 0);
    size_t n = strlen(r.out);
    assert_int_equal(n, 2 + 32 + 2 * strlen("www.example.com") + 1);
    assert_int_equal(r.out[n - 1], '\n');
    assert_int_equal(secret_parse(r.out, n - 1, &s1, err, sizeof err), 0);
    assert_int_equal(s1.kind, SECRET_EE);
    assert_string_equal(s1.domain, "www.example.com");
    assert_true(strncmp(r.out, "ee", 2) == 0);

    /* Default is hex too; two secrets never share a key. */
    cli(&r, (const char *[]){"generate-secret", "www.example.com", NULL});
    assert_int_equal(r.code, 0);
    assert_int_equal(secret_parse(r.out, strlen(r.out) - 1, &s2, err, sizeof err), 0);
    assert_memory_not_equal(s1.key, s2.key, 16);

    cli(&r, (const char *[]){"generate-secret", "--base64", "www.example.com", NULL});
    assert_int_equal(r.code, 0);
    assert_int_equal(r.out[0], '7'); /* base64url of 0xee... */
    assert_null(strchr(r.out, '='));
    assert_int_equal(secret_parse(r.out, strlen(r.out) - 1, &s2, err, sizeof err), 0);
    assert_string_equal(s2.domain, "www.example.com");

    static const char *const bad[] = {"1.2.3.4", "no spaces.com", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cli(&r, (const char *[]){"generate-secret", bad[i], NULL});
        if (r.code != 65 || !strstr(r.err, "generate-secret: domain"))
            fail_msg("domain \"%s\": code %d, stderr \"%s\"", bad[i], r.code, r.err);
        assert_string_equal(r.out, "");
    }
}

static void test_links_vectors(void **state)
{
    (void)state;
    struct secret s;
    char err[256];
    tg__buf b;
    tg__buf_init(&b, 4096);
    static const struct {
        const char *secret, *host;
        uint16_t port;
        bool base64;
        enum links_kind kind;
        const char *want;
    } v[] = {
        {KEY_A, "203.0.113.7", 443, false, LINKS_TG,
         "tg://proxy?server=203.0.113.7&port=443&secret=" KEY_A},
        {"dd" KEY_A, "203.0.113.7", 443, false, LINKS_TME,
         "https://t.me/proxy?server=203.0.113.7&port=443&secret=dd" KEY_A},
        {EE_A, "203.0.113.7", 443, false, LINKS_TG,
         "tg://proxy?server=203.0.113.7&port=443&secret=" EE_A},
        {EE_A, "proxy.example.org", 8443, true, LINKS_TME,
         "https://t.me/proxy?server=proxy.example.org&port=8443&secret="
         "7rAOu2eL9NRUpK4FOSfOsG5leGFtcGxlLmNvbQ"},
        {EE_A, "2001:db8::1", 443, false, LINKS_TG,
         "tg://proxy?server=2001%3Adb8%3A%3A1&port=443&secret=" EE_A},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        assert_int_equal(secret_parse(v[i].secret, strlen(v[i].secret), &s, err, sizeof err), 0);
        tg__buf_reset(&b);
        assert_int_equal(links_format(&b, v[i].kind, v[i].host, v[i].port, &s, v[i].base64), 0);
        assert_string_equal(tg__buf_cstr(&b), v[i].want);
    }
    assert_int_equal(links_format(&b, LINKS_TG, "", 443, &s, false), -EINVAL);
    assert_int_equal(links_format(&b, LINKS_TG, "h", 0, &s, false), -EINVAL);
    tg__buf_cleanup(&b);
}

/* Decode the half-block drawing back into modules and compare with libqrencode's own. */
static void test_qr_rendering(void **state)
{
    (void)state;
    const char *text = "https://t.me/proxy?server=203.0.113.7&port=443&secret=" EE_A;
    tg__buf b;
    tg__buf_init(&b, 1 << 20);
    assert_int_equal(links_qr(&b, text), 0);
    QRcode *qr = QRcode_encodeString(text, 0, QR_ECLEVEL_M, QR_MODE_8, 1);
    assert_non_null(qr);
    int side = qr->width + 2 * LINKS_QR_QUIET;
    const char *p = tg__buf_cstr(&b);
    int rows = 0;
    for (int y = 0; y < side; y += 2, rows++) {
        for (int x = 0; x < side; x++) {
            bool top_light, bottom_light;
            if (*p == ' ') {
                top_light = bottom_light = false;
                p++;
            } else {
                assert_memory_equal(p, "\xE2\x96", 2);
                top_light = p[2] == '\x80' || p[2] == '\x88';
                bottom_light = p[2] == '\x84' || p[2] == '\x88';
                assert_true(top_light || bottom_light);
                p += 3;
            }
            for (int half = 0; half < 2; half++) {
                int yy = y + half - LINKS_QR_QUIET, xx = x - LINKS_QR_QUIET;
                bool inside = xx >= 0 && yy >= 0 && xx < qr->width && yy < qr->width;
                bool want_light = !inside || !(qr->data[yy * qr->width + xx] & 1);
                assert_int_equal(half ? bottom_light : top_light, want_light);
            }
        }
        assert_int_equal(*p++, '\n');
    }
    assert_int_equal(*p, '\0');
    assert_int_equal(rows, (side + 1) / 2);
    QRcode_free(qr);
    /* Too long for any QR version. */
    char *huge = calloc(8000, 1);
    memset(huge, 'x', 7999);
    assert_int_equal(links_qr(&b, huge), -ERANGE);
    free(huge);
    tg__buf_cleanup(&b);
}

static void test_access(void **state)
{
    (void)state;
    struct run r;
    char *path = write_config("bind-to = \"0.0.0.0:443\"\npublic-host = \"203.0.113.7\"\n"
                              "[secrets]\nmain = \"" EE_A "\"\nold = \"" KEY_A "\"\n");
    cli(&r, (const char *[]){"access", path, "--no-qr", NULL});
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out,
                        "main: FakeTLS (ee), domain example.com\n"
                        "tg://proxy?server=203.0.113.7&port=443&secret=" EE_A "\n"
                        "https://t.me/proxy?server=203.0.113.7&port=443&secret=" EE_A "\n\n"
                        "old: classic obfuscated2\n"
                        "tg://proxy?server=203.0.113.7&port=443&secret=" KEY_A "\n"
                        "https://t.me/proxy?server=203.0.113.7&port=443&secret=" KEY_A "\n\n");
    assert_string_equal(r.err, "");

    cli(&r, (const char *[]){"access", "--base64", "--host", "proxy.example.org", "--port=8443",
                             path, NULL});
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "https://t.me/proxy?server=proxy.example.org&port=8443&"
                                  "secret=7rAOu2eL9NRUpK4FOSfOsG5leGFtcGxlLmNvbQ\n"));
    assert_non_null(strstr(r.out, "\xE2\x96\x88")); /* a QR code follows each link pair */
    unlink(path);

    /* No public-host and a wildcard bind-to: the operator must say where clients connect. */
    path = write_config("bind-to = \"[::]:443\"\nsecret = \"" EE_A "\"\n");
    cli(&r, (const char *[]){"access", path, "--no-qr", NULL});
    assert_int_equal(r.code, 78);
    assert_non_null(strstr(r.err, "wildcard"));
    cli(&r, (const char *[]){"access", path, "--no-qr", "--host", "2001:db8::1", NULL});
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "default: FakeTLS"));
    assert_non_null(strstr(r.out, "server=2001%3Adb8%3A%3A1&port=443&"));
    unlink(path);

    /* A specific bind-to address is used as is. */
    path = write_config("bind-to = \"127.0.0.1:8443\"\nsecret = \"" EE_A "\"\n");
    cli(&r, (const char *[]){"access", path, "--no-qr", NULL});
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "tg://proxy?server=127.0.0.1&port=8443&secret=" EE_A "\n"));
    assert_string_equal(r.err, ""); /* mkstemp made it 0600 */
    /* A config other users can read gets a warning (it holds secrets), not a refusal. */
    assert_int_equal(chmod(path, 0644), 0);
    cli(&r, (const char *[]){"access", path, "--no-qr", NULL});
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.err, "is readable by other users and holds secrets"));
    unlink(path);
}

/* A string member at path ("ipv4/tg_url") of doc, or NULL. */
static const char *jstr(json_t *doc, const char *path)
{
    char key[64];
    json_t *cur = doc;
    while (cur && *path) {
        size_t n = strcspn(path, "/");
        snprintf(key, sizeof key, "%.*s", (int)n, path);
        cur = json_object_get(cur, key);
        path += n + (path[n] == '/');
    }
    return json_string_value(cur);
}

static json_t *parse_json(const char *text)
{
    json_error_t e;
    json_t *doc = json_loads(text, 0, &e);
    if (!doc)
        fail_msg("not JSON (%s, line %d):\n%s", e.text, e.line, text);
    return doc;
}

/* access --json prints what mtg's `access` prints: "ipv4"/"ipv6" {ip, port, tg_url,
   tg_qrcode, tme_url, tme_qrcode}, "secret" {hex, base64} of the first secret by name, and
   "secrets" by name when there are several. */
static void test_access_json(void **state)
{
    (void)state;
    struct run r;
    char *path = write_config("bind-to = \"0.0.0.0:443\"\n[secrets]\nzeta = \"" KEY_A "\"\n"
                              "main = \"" EE_A "\"\n[network.public-ip]\nipv4 = \"203.0.113.7\"\n"
                              "ipv6 = \"2001:db8::7\"\n");
    cli(&r, (const char *[]){"access", path, "--json", NULL});
    assert_int_equal(r.code, 0);
    assert_string_equal(r.err, "");
    json_t *doc = parse_json(r.out);
    assert_string_equal(jstr(doc, "ipv4/ip"), "203.0.113.7");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(doc, "ipv4"), "port")),
                     443);
    assert_string_equal(jstr(doc, "ipv4/tg_url"),
                        "tg://proxy?server=203.0.113.7&port=443&secret=" EE_A);
    assert_string_equal(jstr(doc, "ipv4/tme_url"),
                        "https://t.me/proxy?server=203.0.113.7&port=443&secret=" EE_A);
    assert_string_equal(jstr(doc, "ipv4/tg_qrcode"),
                        "https://api.qrserver.com/v1/create-qr-code?data=tg%3A%2F%2Fproxy%3F"
                        "server%3D203.0.113.7%26port%3D443%26secret%3D" EE_A "&format=svg&qzone=4");
    assert_non_null(strstr(jstr(doc, "ipv4/tme_qrcode"), "data=https%3A%2F%2Ft.me%2Fproxy"));
    assert_string_equal(jstr(doc, "ipv6/ip"), "2001:db8::7");
    assert_string_equal(jstr(doc, "ipv6/tg_url"),
                        "tg://proxy?server=2001%3Adb8%3A%3A7&port=443&secret=" EE_A);
    assert_null(json_object_get(doc, "host"));
    assert_string_equal(jstr(doc, "secret/hex"), EE_A); /* "main" sorts before "zeta" */
    assert_string_equal(jstr(doc, "secret/base64"), "7rAOu2eL9NRUpK4FOSfOsG5leGFtcGxlLmNvbQ");
    assert_string_equal(jstr(doc, "secrets/zeta/hex"), KEY_A);
    assert_string_equal(jstr(doc, "secrets/main/hex"), EE_A);
    assert_int_equal(json_object_size(doc), 4);
    json_decref(doc);
    assert_non_null(
        strstr(r.out, "{\n  \"ipv4\": {\n    \"ip\": \"203.0.113.7\",\n")); /* mtg's indent */

    /* --ipv4 / --host override; a host name goes under "host"; --no-qr drops the QR URLs;
       --base64 puts base64url secrets in the links. */
    cli(&r, (const char *[]){"access", path, "--json", "--ipv4", "198.51.100.1", "--host",
                             "proxy.example.org", "--port", "8443", "--no-qr", "--base64", NULL});
    assert_int_equal(r.code, 0);
    doc = parse_json(r.out);
    assert_string_equal(jstr(doc, "ipv4/ip"), "198.51.100.1");
    assert_string_equal(jstr(doc, "host/ip"), "proxy.example.org");
    assert_string_equal(jstr(doc, "host/tme_url"),
                        "https://t.me/proxy?server=proxy.example.org&port=8443&"
                        "secret=7rAOu2eL9NRUpK4FOSfOsG5leGFtcGxlLmNvbQ");
    assert_null(json_object_get(json_object_get(doc, "ipv4"), "tg_qrcode"));
    json_decref(doc);
    cli(&r, (const char *[]){"access", path, "--json", "--ipv4", "2001:db8::1", NULL});
    assert_int_equal(r.code, 64);
    cli(&r, (const char *[]){"access", path, "--ipv4", "198.51.100.1", NULL});
    assert_int_equal(r.code, 64); /* --ipv4 belongs to --json */
    unlink(path);

    /* Nowhere to point links: the secrets alone, a warning, exit 0 (as mtg without a public
       address); one secret: no "secrets" object. */
    path = write_config("bind-to = \"[::]:443\"\nsecret = \"" EE_A "\"\n");
    cli(&r, (const char *[]){"access", path, "--json", NULL});
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.err, "no address for links"));
    doc = parse_json(r.out);
    assert_int_equal(json_object_size(doc), 1);
    assert_string_equal(jstr(doc, "secret/hex"), EE_A);
    json_decref(doc);
    unlink(path);

    /* mtg's own example file, unchanged. */
    size_t len = 0;
    char *text = tgtest_read_file(tgtest_data_path("fixtures/mtg/example.config.toml"), &len);
    assert_non_null(text);
    path = write_config(text);
    free(text);
    cli(&r, (const char *[]){"access", path, "--json", "--ipv4", "203.0.113.7", NULL});
    assert_int_equal(r.code, 0);
    doc = parse_json(r.out);
    static const char mtg_secret[] =
        "ee367a189aee18fa31c190054efd4a8e9573746f726167652e676f6f676c65617069732e636f6d";
    assert_string_equal(jstr(doc, "secret/hex"), mtg_secret);
    assert_string_equal(jstr(doc, "secret/base64"),
                        "7jZ6GJruGPoxwZAFTv1KjpVzdG9yYWdlLmdvb2dsZWFwaXMuY29t");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(doc, "ipv4"), "port")),
                     3128);
    json_decref(doc);
    unlink(path);
}

static void test_config_errors_exit_78(void **state)
{
    (void)state;
    struct run r;
    cli(&r, (const char *[]){"run", "/nonexistent/tgproxy.toml", NULL});
    assert_int_equal(r.code, 78);
    assert_non_null(strstr(r.err, "tgproxy: /nonexistent/tgproxy.toml: cannot open"));

    char *path = write_config("bind-to = \"127.0.0.1:1\"\n[secrets]\nmain = \"ee" KEY_A "\"\n");
    cli(&r, (const char *[]){"run", path, NULL});
    assert_int_equal(r.code, 78);
    char where[128];
    snprintf(where, sizeof where, "tgproxy: %s:3:8: secrets.main: bad secret", path);
    assert_non_null(strstr(r.err, where));
    assert_null(strstr(r.err, KEY_A));
    cli(&r, (const char *[]){"access", path, NULL});
    assert_int_equal(r.code, 78);
    unlink(path);

    path = write_config("bind-to = \"127.0.0.1:1\"\n");
    cli(&r, (const char *[]){"run", path, NULL});
    assert_int_equal(r.code, 78);
    assert_non_null(strstr(r.err, "no secret"));
    unlink(path);

    /* Warnings for ignored mtg keys reach stderr with their position. */
    path = write_config("bind-to = \"127.0.0.1:1\"\nsecret = \"" EE_A "\"\nauto-update = false\n"
                        "[defense.allowlist]\nenabled = true\n");
    cli(&r, (const char *[]){"access", path, NULL});
    assert_int_equal(r.code, 78);
    assert_non_null(strstr(r.err, ":3:1: auto-update: accepted for mtg compatibility"));
    assert_non_null(strstr(r.err, "defense.allowlist"));
    unlink(path);

    cli(&r, (const char *[]){"simple-run", "127.0.0.1:1", "ee" KEY_A, NULL});
    assert_int_equal(r.code, 65);
    assert_non_null(strstr(r.err, "simple-run: bad SECRET"));
    assert_null(strstr(r.err, KEY_A));
}

/* ---- the binary ---- */

struct child {
    pid_t pid;
    int err_fd; /* read end of the child's stderr */
};

/* Run the binary with args; envp NULL = this environment; nofile (if any) is the child's
   open-files limit. */
static void spawn_ex(struct child *c, const char *const *args, const char *const *envp,
                     const struct rlimit *nofile)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    c->pid = fork();
    assert_true(c->pid >= 0);
    if (c->pid == 0) {
        dup2(fds[1], 2);
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        close(fds[0]);
        if (nofile && setrlimit(RLIMIT_NOFILE, nofile) != 0)
            _exit(126);
        if (envp)
            execve(TGPROXY_BIN, (char *const *)args, (char *const *)envp);
        else
            execv(TGPROXY_BIN, (char *const *)args);
        _exit(127);
    }
    close(fds[1]);
    c->err_fd = fds[0];
}

static void spawn(struct child *c, const char *const *args)
{
    spawn_ex(c, args, NULL, NULL);
}

/* Read the child's stderr until needle shows up or the pipe closes. */
static bool read_until(const struct child *c, const char *needle, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    while (used + 1 < cap) {
        ssize_t n = read(c->err_fd, buf + used, cap - 1 - used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        used += (size_t)n;
        buf[used] = '\0';
        if (strstr(buf, needle))
            return true;
    }
    return false;
}

static int wait_exit(struct child *c)
{
    int status;
    pid_t w;
    do
        w = waitpid(c->pid, &status, 0);
    while (w < 0 && errno == EINTR);
    close(c->err_fd);
    assert_int_equal(w, c->pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void test_binary_version_and_usage(void **state)
{
    (void)state;
    struct child c;
    char buf[1024];
    spawn(&c, (const char *[]){TGPROXY_BIN, "--bogus", NULL});
    assert_true(read_until(&c, "try 'tgproxy --help'", buf, sizeof buf));
    assert_int_equal(wait_exit(&c), 64);
    spawn(&c, (const char *[]){TGPROXY_BIN, "--version", NULL});
    assert_int_equal(wait_exit(&c), 0);
}

/* `tgproxy run path`, which must stop during its start: its stderr into buf, its exit code,
   or -1 when it never said "cannot serve" (then it is killed, never left behind). */
static int run_refused(const char *path, char *buf, size_t cap)
{
    struct child c;
    spawn(&c, (const char *[]){TGPROXY_BIN, "run", path, NULL});
    bool said = read_until(&c, "cannot serve", buf, cap);
    if (!said)
        kill(c.pid, SIGKILL);
    int code = wait_exit(&c);
    return said ? code : -1;
}

static void test_binary_bind_failure_exit_69(void **state)
{
    (void)state;
    /* Hold a port without SO_REUSEPORT so the proxy cannot bind it. */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(s, (struct sockaddr *)&sin, sizeof sin), 0);
    assert_int_equal(listen(s, 1), 0);
    socklen_t len = sizeof sin;
    assert_int_equal(getsockname(s, (struct sockaddr *)&sin, &len), 0);
    char text[256];
    snprintf(text, sizeof text, "bind-to = \"127.0.0.1:%u\"\nsecret = \"" EE_A "\"\n",
             (unsigned)ntohs(sin.sin_port));
    char *path = write_config(text);
    char buf[4096];
    int code = run_refused(path, buf, sizeof buf);
    close(s);
    unlink(path);
    if (code != 69)
        fail_msg("exit %d, stderr: %s", code, buf);
    assert_null(strstr(buf, KEY_A));
}

/* The metrics page's address in use: the start stops as for a listen address (exit 69),
   naming [stats.prometheus] and the address, with no stray libmicrohttpd "port 0" line. */
static void test_binary_metrics_bind_failure_exit_69(void **state)
{
    (void)state;
    uint16_t port = 0;
    int s = psock_listen(&port, 1); /* no SO_REUSEPORT: the proxy cannot bind it */
    assert_true(s >= 0);
    char text[256], want[96];
    snprintf(text, sizeof text,
             "bind-to = \"127.0.0.1:0\"\nsecret = \"" EE_A "\"\n"
             "[stats.prometheus]\nenabled = true\nbind-to = \"127.0.0.1:%u\"\n",
             (unsigned)port);
    snprintf(want, sizeof want, "[stats.prometheus] bind-to 127.0.0.1:%u: ", (unsigned)port);
    char *path = write_config(text);
    char buf[4096];
    int code = run_refused(path, buf, sizeof buf);
    close(s);
    unlink(path);
    if (code != 69 || !strstr(buf, want) || strstr(buf, "port 0"))
        fail_msg("exit %d, stderr: %s (want \"%s\")", code, buf, want);
}

/* A bad access-list file stops the start: its path:line on stderr, exit 78 (config). */
static void test_binary_bad_list_exit_78(void **state)
{
    (void)state;
    char *list = write_config("# blocklist\n10.0.0.0/8\n10.0.0.0/99\n");
    char text[256];
    snprintf(text, sizeof text,
             "bind-to = \"127.0.0.1:0\"\nsecret = \"" EE_A "\"\n"
             "[defense.blocklist]\nenabled = true\nfiles = [\"%s\"]\n",
             list);
    char *path = write_config(text);
    char buf[4096];
    int code = run_refused(path, buf, sizeof buf);
    unlink(path);
    char want[128];
    snprintf(want, sizeof want, "blocklist: %s:3: \"10.0.0.0/99\": prefix length", list);
    unlink(list);
    if (code != 78 || !strstr(buf, want))
        fail_msg("exit %d, stderr: %s (want \"%s\")", code, buf, want);
}

static void test_binary_run_and_sigterm(void **state)
{
    (void)state;
    char *path = write_config("bind-to = \"127.0.0.1:0\"\nworkers = 1\nlog-level = \"debug\"\n"
                              "[secrets]\nmain = \"" EE_A "\"\n");
    struct child c;
    char buf[4096];
    spawn(&c, (const char *[]){TGPROXY_BIN, "run", path, NULL});
    bool up = read_until(&c, "listening on", buf, sizeof buf);
    kill(c.pid, up ? SIGTERM : SIGKILL);
    int code = wait_exit(&c);
    unlink(path);
    if (!up || code != 0)
        fail_msg("up %d, exit %d, stderr: %s", up, code, buf);
    assert_null(strstr(buf, KEY_A));
}

/* simple-run with extra options until the listening line containing want, then SIGTERM. */
static void simple_run_says(const char *extra, const char *want)
{
    struct child c;
    char buf[4096];
    spawn(&c, (const char *[]){TGPROXY_BIN, "simple-run", "127.0.0.1:0", EE_A, "--workers", "1",
                               "--fronting-host", "127.0.0.1", "--fronting-port=9", extra, NULL});
    bool up = read_until(&c, want, buf, sizeof buf);
    kill(c.pid, up ? SIGTERM : SIGKILL);
    int code = wait_exit(&c);
    if (!up || code != 0)
        fail_msg("up %d, exit %d, stderr: %s", up, code, buf);
    assert_non_null(strstr(buf, "listening on 127.0.0.1:"));
    assert_null(strstr(buf, KEY_A));
}

static void test_binary_simple_run(void **state)
{
    (void)state;
    simple_run_says(NULL, "workers, fast-mode on");
    simple_run_says("--no-fast-mode", "workers, fast-mode off");
}

/* A SIGHUP while the daemon is still starting (as `systemctl reload` right after a start
   can send it) does not kill it: it is taken as a reload once serving. The secret file is a
   FIFO, so the daemon is held inside its start, reading it, when the signal comes. */
struct fifo_open {
    const char *path;
    int fd;
};

static bool fifo_opened(void *arg)
{
    struct fifo_open *f = arg;
    f->fd = open(f->path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    return f->fd >= 0;
}

static void test_binary_sighup_while_starting(void **state)
{
    (void)state;
    char dir[] = "/tmp/tgproxy-hup-XXXXXX", fifo[64], opt[96];
    assert_non_null(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/secret", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    snprintf(opt, sizeof opt, "--secret-file=%s", fifo);
    struct child c;
    char buf[4096];
    spawn(&c, (const char *[]){TGPROXY_BIN, "simple-run", "127.0.0.1:0", opt, "--workers", "1",
                               "--log-level", "info", NULL});
    struct fifo_open fo = {fifo, -1}; /* opens once the daemon has it open for reading */
    assert_true(tgtest_wait_until(fifo_opened, &fo, 10000));
    int fd = fo.fd;
    assert_int_equal(kill(c.pid, SIGHUP), 0); /* the daemon is blocked reading its secret */
    assert_int_equal(write(fd, EE_A "\n", sizeof EE_A), (ssize_t)sizeof EE_A);
    close(fd);
    bool taken = read_until(&c, "SIGHUP: nothing to re-read", buf, sizeof buf);
    kill(c.pid, taken ? SIGTERM : SIGKILL);
    int code = wait_exit(&c);
    unlink(fifo);
    rmdir(dir);
    if (!taken || code != 0)
        fail_msg("exit %d, stderr: %s", code, buf);
}

/* Does /proc/PID/<what> (cmdline, environ: NUL-separated) contain needle? */
static bool proc_has(pid_t pid, const char *what, const char *needle)
{
    char path[64], buf[65536];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, what);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    assert_true(n >= 0);
    for (ssize_t i = 0; i < n; i++)
        buf[i] = buf[i] ? buf[i] : '\n';
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

/* simple-run with the secret from a file, the environment or the command line: it serves,
   and once it listens the secret is in neither /proc/PID/cmdline nor /proc/PID/environ. */
static void secret_source_case(const char *const *args, const char *const *envp, bool argv_warn)
{
    struct child c;
    char buf[4096];
    spawn_ex(&c, args, envp, NULL);
    bool up = read_until(&c, "listening on", buf, sizeof buf);
    bool in_cmdline = up && proc_has(c.pid, "cmdline", KEY_A);
    bool in_environ = up && proc_has(c.pid, "environ", KEY_A);
    kill(c.pid, up ? SIGTERM : SIGKILL);
    int code = wait_exit(&c);
    if (!up || code != 0 || in_cmdline || in_environ)
        fail_msg("up %d exit %d cmdline %d environ %d, stderr: %s", up, code, in_cmdline,
                 in_environ, buf);
    assert_null(strstr(buf, KEY_A));
    assert_int_equal(strstr(buf, "warning: SECRET on the command line") != NULL, argv_warn);
}

static void test_binary_secret_sources(void **state)
{
    (void)state;
    char *path = write_config(EE_A "\n");
    assert_int_equal(chmod(path, 0600), 0);
    secret_source_case((const char *[]){TGPROXY_BIN, "simple-run", "127.0.0.1:0", "--workers", "1",
                                        "--secret-file", path, NULL},
                       NULL, false);
    unlink(path);
    secret_source_case(
        (const char *[]){TGPROXY_BIN, "simple-run", "127.0.0.1:0", "--workers", "1", NULL},
        (const char *[]){"TGPROXY_SECRET=" EE_A, "LC_ALL=C", NULL}, false);
    /* on the command line it still works, with a warning, and argv is blanked */
    secret_source_case(
        (const char *[]){TGPROXY_BIN, "simple-run", "127.0.0.1:0", EE_A, "--workers", "1", NULL},
        NULL, true);
}

/* Secret-file and environment failures: clear exit codes, nothing of the secret shown. */
static void test_secret_file_errors(void **state)
{
    (void)state;
    struct run r;
    cli(&r, (const char *[]){"simple-run", "127.0.0.1:1", "--secret-file", "/nonexistent/s", NULL});
    assert_int_equal(r.code, 78);
    assert_non_null(strstr(r.err, "--secret-file /nonexistent/s: cannot open"));
    cli(&r, (const char *[]){"simple-run", "127.0.0.1:1", "--secret-file", EE_A, NULL});
    assert_int_equal(r.code, 78);
    assert_non_null(strstr(r.err, "(a secret, not shown): cannot open"));
    assert_null(strstr(r.err, KEY_A));
    char *path = write_config("\n" EE_A "\n");
    cli(&r, (const char *[]){"simple-run", "127.0.0.1:1", "--secret-file", path, NULL});
    assert_int_equal(r.code, 78);
    assert_non_null(strstr(r.err, "empty first line"));
    unlink(path);
    path = write_config("ee" KEY_A "\n"); /* ee without a domain: malformed */
    cli(&r, (const char *[]){"simple-run", "127.0.0.1:1", "--secret-file", path, NULL});
    assert_int_equal(r.code, 65);
    assert_non_null(strstr(r.err, "bad SECRET"));
    assert_null(strstr(r.err, KEY_A));
    unlink(path);
    /* the environment variable, read and then wiped from this process */
    assert_int_equal(setenv("TGPROXY_SECRET", "ee" KEY_A, 1), 0);
    cli(&r, (const char *[]){"simple-run", "127.0.0.1:1", NULL});
    assert_int_equal(r.code, 65);
    assert_null(strstr(r.err, KEY_A));
    assert_null(getenv("TGPROXY_SECRET"));
    cli(&r, (const char *[]){"simple-run", "127.0.0.1:1", NULL});
    assert_int_equal(r.code, 64);
    assert_non_null(strstr(r.err, "or TGPROXY_SECRET in the environment"));
}

/* scripts/run.sh (`make run`) in dir with TGPROXY_PORT=port (NULL: unset), stdout and
   stderr into buf until tgproxy listens; then SIGTERM. */
static void run_script(const char *dir, const char *port, char *buf, size_t cap)
{
    int fds[2];
    struct child c;
    assert_int_equal(pipe(fds), 0);
    c.pid = fork();
    assert_true(c.pid >= 0);
    if (c.pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        if (chdir(dir) != 0)
            _exit(126);
        if (port)
            setenv("TGPROXY_PORT", port, 1);
        else
            unsetenv("TGPROXY_PORT");
        execl("/bin/bash", "bash", TGKIT_SOURCE_DIR "/scripts/run.sh", TGKIT_BINARY_DIR,
              (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    c.err_fd = fds[0];
    bool up = read_until(&c, "listening on", buf, cap);
    kill(c.pid, up ? SIGTERM : SIGKILL);
    int code = wait_exit(&c);
    if (!up || code != 0)
        fail_msg("run.sh: up %d, exit %d, output: %s", up, code, buf);
}

/* With run/tgproxy.toml already there, `make run` serves what the file says and says that
   a TGPROXY_PORT given now was not applied, instead of printing it as the port. */
static void test_run_script_existing_config(void **state)
{
    (void)state;
    char dir[] = "/tmp/tgproxy-run-XXXXXX", path[128], buf[8192];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/run", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/run/secret", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(EE_A "\n", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/run/tgproxy.toml", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("bind-to = \"127.0.0.1:0\"\npublic-port = 8443\nworkers = 1\n"
          "[secrets]\nmain = \"" EE_A "\"\n",
          f);
    fclose(f);
    assert_int_equal(chmod(path, 0600), 0);
    run_script(dir, "9443", buf, sizeof buf);
    assert_non_null(strstr(buf, "run: TGPROXY_PORT=9443 not applied: run/tgproxy.toml already "
                                "exists (bind-to = \"127.0.0.1:0\")"));
    assert_non_null(strstr(buf, "run: serving on 127.0.0.1:0;"));
    assert_null(strstr(buf, "9443;"));
    run_script(dir, NULL, buf, sizeof buf); /* nothing asked, nothing to explain */
    assert_null(strstr(buf, "not applied"));
    assert_non_null(strstr(buf, "run: serving on 127.0.0.1:0;"));
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* The soft open-files limit of a running process, from /proc/PID/limits. */
static long soft_nofile(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/limits", (int)pid);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    long soft = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "Max open files", 14) == 0)
            soft = strtol(line + 14, NULL, 10);
    fclose(f);
    return soft;
}

/* Under a low soft limit the proxy raises it to the hard one, and warns when even that
   cannot hold `concurrency` connections. */
static void nofile_case(const char *concurrency, bool warns)
{
    const struct rlimit lim = {.rlim_cur = 64, .rlim_max = 200};
    struct child c;
    char buf[4096];
    spawn_ex(&c,
             (const char *[]){TGPROXY_BIN, "simple-run", "127.0.0.1:0", EE_A, "--workers", "1",
                              "--concurrency", concurrency, NULL},
             NULL, &lim);
    bool up = read_until(&c, "listening on", buf, sizeof buf);
    long soft = up ? soft_nofile(c.pid) : -1;
    kill(c.pid, up ? SIGTERM : SIGKILL);
    int code = wait_exit(&c);
    if (!up || code != 0 || soft != 200)
        fail_msg("up %d, exit %d, soft limit %ld, stderr: %s", up, code, soft, buf);
    bool warned =
        strstr(buf, "open files limit 200 (hard limit 200) cannot hold concurrency") != NULL;
    if (warned != warns)
        fail_msg("concurrency %s: warning %d, stderr: %s", concurrency, warned, buf);
    if (warns)
        assert_non_null(strstr(buf, "concurrency = 1000 connections"));
}

static void test_binary_nofile_limit(void **state)
{
    (void)state;
    nofile_case("1000", true); /* 2 x 1000 descriptors > 200 */
    nofile_case("50", false);  /* 2 x 50 + listeners + slack < 200 */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_version_usage),
        cmocka_unit_test(test_generate_secret),
        cmocka_unit_test(test_links_vectors),
        cmocka_unit_test(test_qr_rendering),
        cmocka_unit_test(test_access),
        cmocka_unit_test(test_access_json),
        cmocka_unit_test(test_exit_code_table),
        cmocka_unit_test(test_config_errors_exit_78),
        cmocka_unit_test(test_binary_version_and_usage),
        cmocka_unit_test(test_binary_bind_failure_exit_69),
        cmocka_unit_test(test_binary_metrics_bind_failure_exit_69),
        cmocka_unit_test(test_binary_sighup_while_starting),
        cmocka_unit_test(test_binary_bad_list_exit_78),
        cmocka_unit_test(test_binary_run_and_sigterm),
        cmocka_unit_test(test_binary_simple_run),
        cmocka_unit_test(test_binary_nofile_limit),
        cmocka_unit_test(test_binary_secret_sources),
        cmocka_unit_test(test_secret_file_errors),
        cmocka_unit_test(test_run_script_existing_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
