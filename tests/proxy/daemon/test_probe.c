/*
 * `tgproxy probe` against real deployments on 127.0.0.1 (issue 23): the built binary probes
 * a tgproxy fronting a real TLS 1.3 site (OpenSSL's s_server with a three-certificate RSA
 * chain, tests/support/tls_front.c) and compares it with the site reached directly. A good
 * deployment must come out indistinguishable (exit 0); three bad ones must exit 1 and name
 * what gives them away:
 *   off    fronting off: tgproxy's fronting host refuses connections (a domain that does
 *          not resolve, a site that is down), so failed handshakes are closed, not relayed;
 *   wrong  fronting to the wrong site: another TLS server (RSA-3072 chain) than the one the
 *          secret's domain names;
 *   fixed  the FakeTLS answer not learned from the site ([defense.tls-front] enabled =
 *          false): the fixed shape (key_share first, 2500..4700 random bytes) against a
 *          site that sends supported_versions first and 2810 encrypted bytes.
 * The good one and the first two learn their answer from their fronting target
 * ([defense.tls-front], the default); each probe starts once that first refresh ended.
 * Two more are good ones with a PROXY protocol setup, probed with `--config` (their file):
 *   pp     the site is behind [domain-fronting] proxy-protocol (tests/support/pp_site: it
 *          closes a connection without a v2 header): the probe's direct connections carry
 *          the header as tgproxy's fronted ones do, else the site refuses them all;
 *   ppl    tgproxy's listener expects a PROXY header (proxy-protocol-listener, as behind a
 *          balancer): the probe sends one to the proxy, none to the site.
 * Each deployment has its own s_server (it serves one connection at a time), so the four
 * probes run at once. The secret reaches the probe in a file and must appear in no output.
 */
#include "tgtest.h"

#include "proxy/config/config.h"
#include "proxy/daemon/cli.h"
#include "proxy/daemon/server.h"
#include "proxy/services/tlsfront.h"
#include "proxy/wire/json.h"
#include "proxy/wire/secret.h"
#include "core/log.h"
#include "pp_site.h"
#include "proxy_proc.h"
#include "tls_front.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define DOMAIN  "example.com"
#define WAIT    "1s" /* each probe's bound: past tgproxy's early fronting (500 ms) */
#define TGPROXY TGKIT_BINARY_DIR "/tgproxy"

/* the four deployments, and more for the JSON output, a wrong secret and --strict */
enum { GOOD, OFF, WRONG, FIXED, JSON, BADKEY, STRICT, PP, PPL, NDEPLOY };
static const char *const names[NDEPLOY] = {"good",   "off",    "wrong", "fixed", "json",
                                           "badkey", "strict", "pp",    "ppl"};

struct deploy {
    struct tfront site; /* the site the secret's domain names */
    struct config cfg;
    struct server *srv;
    uint16_t port;
    uint16_t front_port; /* what the probe's --front names: the site, or pp in front of it */
    struct pp_site pp;   /* pp: the site's PROXY protocol front */
    char cfg_file[160];  /* the config given to the probe with --config ("" none) */
    char log[160];
    char *out; /* the probe's stdout + stderr */
    int code;  /* its exit code */
};

static struct {
    struct tfront_pki pki, other_pki;
    struct tfront other; /* the wrong site */
    struct deploy d[NDEPLOY];
    struct secret secret;
    char secret_hex[128], secret_b64[128], key_hex[40];
    char secret_file[128], other_file[160], other_hex[128];
} g;

static bool learned_once(void *arg)
{
    return tlsfront_rounds(server_tlsfront(arg)) >= 1;
}

/* tgproxy fronting to 127.0.0.1:fronting_port; learned: [defense.tls-front] on (the
   default), and running only once its first refresh ended (learned or failed), so the
   probe meets the answer the deployment keeps; else the fixed answer. */
/* front_pp: [domain-fronting] proxy-protocol; listener_pp: proxy-protocol-listener; either
   writes the file to d->cfg_file for the probe's --config. */
static void deploy_start_pp(struct deploy *d, uint16_t fronting_port, bool learned, bool front_pp,
                            bool listener_pp)
{
    char doc[1024], err[256];
    snprintf(doc, sizeof doc,
             "secret = \"%s\"\n"
             "bind-to = \"127.0.0.1:0\"\n"
             "workers = 1\n"
             "proxy-protocol-listener = %s\n"
             "[domain-fronting]\n"
             "host = \"127.0.0.1\"\n"
             "port = %u\n"
             "proxy-protocol = %s\n"
             "[defense.tls-front]\n"
             "enabled = %s\n",
             g.secret_hex, listener_pp ? "true" : "false", (unsigned)fronting_port,
             front_pp ? "true" : "false", learned ? "true" : "false");
    d->front_port = fronting_port;
    if (front_pp || listener_pp) {
        snprintf(d->cfg_file, sizeof d->cfg_file, "%s/%s.toml", g.pki.dir, names[d - g.d]);
        int fd = open(d->cfg_file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, doc, strlen(doc)), (ssize_t)strlen(doc));
        close(fd);
    }
    config_init(&d->cfg);
    if (config_parse(&d->cfg, "probe.toml", doc, strlen(doc), err, sizeof err, NULL, NULL) != 0)
        fail_msg("config: %s", err);
    memset(doc, 0, sizeof doc);
    assert_int_equal(server_start(&d->cfg, &d->srv), 0);
    d->port = server_port(d->srv, 0);
    if (learned)
        assert_true(tgtest_wait_until(learned_once, d->srv, 30000));
}

static void deploy_start(struct deploy *d, uint16_t fronting_port, bool learned)
{
    deploy_start_pp(d, fronting_port, learned, false, false);
    d->front_port = d->site.port;
}

static int setup(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN);
    tfront_pki_make(&g.pki, DOMAIN, 2048);
    tfront_pki_make(&g.other_pki, DOMAIN, 3072);
    g.secret.kind = SECRET_EE;
    RAND_bytes(g.secret.key, sizeof g.secret.key);
    memcpy(g.secret.domain, DOMAIN, sizeof DOMAIN);
    g.secret.domain_len = sizeof DOMAIN - 1;
    assert_true(secret_format(&g.secret, false, g.secret_hex, sizeof g.secret_hex) > 0);
    assert_true(secret_format(&g.secret, true, g.secret_b64, sizeof g.secret_b64) > 0);
    for (int i = 0; i < 16; i++)
        snprintf(g.key_hex + 2 * i, 3, "%02x", g.secret.key[i]);
    snprintf(g.secret_file, sizeof g.secret_file, "%s/secret", g.pki.dir);
    int fd = open(g.secret_file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, g.secret_hex, strlen(g.secret_hex)), (ssize_t)strlen(g.secret_hex));
    close(fd);
    /* another secret of the same domain */
    struct secret o = g.secret;
    o.key[0] ^= 0xff;
    assert_true(secret_format(&o, false, g.other_hex, sizeof g.other_hex) > 0);
    memset(&o, 0, sizeof o);
    snprintf(g.other_file, sizeof g.other_file, "%s/other-secret", g.pki.dir);
    fd = open(g.other_file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, g.other_hex, strlen(g.other_hex)), (ssize_t)strlen(g.other_hex));
    assert_int_equal(write(fd, "\n", 1), 1);
    close(fd);
    tg__logger_set_level(tg__log_default(), TG__LOG_WARN); /* the servers' per-connection lines */
    tfront_start(&g.other, &g.other_pki, false);
    for (int i = 0; i < NDEPLOY; i++) {
        tfront_start(&g.d[i].site, &g.pki, false);
        snprintf(g.d[i].log, sizeof g.d[i].log, "%s/probe-%s.log", g.pki.dir, names[i]);
    }
    int closed = tgtest_listen_port(); /* nothing listens there */
    assert_true(closed > 0);
    deploy_start(&g.d[GOOD], g.d[GOOD].site.port, true);
    deploy_start(&g.d[OFF], (uint16_t)closed, true);
    deploy_start(&g.d[WRONG], g.other.port, true);
    deploy_start(&g.d[FIXED], g.d[FIXED].site.port, false);
    deploy_start(&g.d[JSON], g.d[JSON].site.port, false);
    deploy_start(&g.d[BADKEY], g.d[BADKEY].site.port, true);
    deploy_start(&g.d[STRICT], g.d[STRICT].site.port, true);
    pp_site_start(&g.d[PP].pp, g.d[PP].site.port);
    deploy_start_pp(&g.d[PP], g.d[PP].pp.port, true, true, false);
    deploy_start_pp(&g.d[PPL], g.d[PPL].site.port, true, false, true);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < NDEPLOY; i++) {
        server_stop(g.d[i].srv);
        config_cleanup(&g.d[i].cfg);
        if (i == PP)
            pp_site_stop(&g.d[i].pp);
        tfront_stop(&g.d[i].site);
        free(g.d[i].out);
    }
    tfront_stop(&g.other);
    tfront_pki_free(&g.other_pki);
    tfront_pki_free(&g.pki);
    memset(&g.secret, 0, sizeof g.secret);
    return 0;
}

/* Start `tgproxy probe` against deployment d; its output goes to d->log. */
static pid_t probe_spawn(struct deploy *d, const char *secret_file, bool json, bool strict)
{
    char target[32], front[32];
    snprintf(target, sizeof target, "127.0.0.1:%u", (unsigned)d->port);
    snprintf(front, sizeof front, "127.0.0.1:%u", (unsigned)d->front_port);
    char *argv[18];
    int n = 0;
    argv[n++] = TGPROXY;
    argv[n++] = "probe";
    argv[n++] = target;
    argv[n++] = "--front";
    argv[n++] = front;
    argv[n++] = "--wait";
    argv[n++] = WAIT;
    if (secret_file) {
        argv[n++] = "--secret-file";
        argv[n++] = (char *)secret_file;
    } else {
        argv[n++] = "--sni";
        argv[n++] = DOMAIN;
    }
    if (json)
        argv[n++] = "--json";
    if (strict)
        argv[n++] = "--strict";
    if (d->cfg_file[0]) {
        argv[n++] = "--config";
        argv[n++] = d->cfg_file;
    }
    argv[n] = NULL;
    unlink(d->log);
    pid_t pid = pproc_spawn_logged(argv, d->log);
    assert_true(pid > 0);
    return pid;
}

static void probe_wait(struct deploy *d, pid_t pid)
{
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid); /* the probe bounds its own time */
    assert_true(WIFEXITED(st));
    d->code = WEXITSTATUS(st);
    size_t len = 0;
    free(d->out);
    d->out = tgtest_read_file(d->log, &len);
    assert_non_null(d->out);
}

static void assert_no_secret(const char *out)
{
    assert_null(strstr(out, g.secret_hex));
    assert_null(strstr(out, g.secret_b64));
    assert_null(strstr(out, g.key_hex));
    assert_null(strstr(out, g.other_hex));
}

/* The line of out that starts with prefix (after blanks), or NULL. */
static const char *line_with(const char *out, const char *prefix)
{
    for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, prefix, strlen(prefix)) == 0)
            return p;
    }
    return NULL;
}

static void expect(const char *out, const char *prefix)
{
    if (!line_with(out, prefix))
        fail_msg("no line starting '%s' in:\n%s", prefix, out);
}

/* --json: one document with the same verdict, the rows and the handshake shape. */
static void check_json(struct deploy *d)
{
    assert_int_equal(d->code, 1);
    struct json_doc doc;
    char err[256];
    if (json_parse(&doc, d->out, strlen(d->out), err, sizeof err) != 0)
        fail_msg("not JSON (%s):\n%s", err, d->out);
    json_doc_free(&doc);
    assert_non_null(strstr(d->out, "\"verdict\":\"distinguishable\""));
    assert_non_null(strstr(d->out, "\"feature\":\"extensions (type/len)\""));
    assert_non_null(strstr(d->out, "\"accepted\":5"));
}

static void test_deployments(void **state)
{
    (void)state;
    pid_t pid[NDEPLOY];
    for (int i = 0; i < NDEPLOY; i++)
        pid[i] = probe_spawn(&g.d[i], i == BADKEY ? g.other_file : g.secret_file, i == JSON,
                             i == STRICT);
    for (int i = 0; i < NDEPLOY; i++) {
        probe_wait(&g.d[i], pid[i]);
        printf("---- tgproxy probe, %s deployment: exit %d\n%s", names[i], g.d[i].code, g.d[i].out);
        fflush(stdout);
        assert_no_secret(g.d[i].out);
    }
    /* fronting off: the hellos the site answers get nothing from the proxy */
    assert_int_equal(g.d[OFF].code, 1);
    expect(g.d[OFF].out, "DIFFERS  ClientHello, unknown key");
    expect(g.d[OFF].out, "verdict: distinguishable");
    /* the wrong site: its certificate chain is longer, so the site's handshake records are */
    assert_int_equal(g.d[WRONG].code, 1);
    expect(g.d[WRONG].out, "DIFFERS  ClientHello, unknown key");
    assert_non_null(
        strstr(line_with(g.d[WRONG].out, "verdict:"), "ClientHello, unknown key (bytes"));
    expect(g.d[WRONG].out, "DIFFERS  encrypted bytes");
    /* the fixed answer: every probe the same (fronting works), the handshake is not */
    assert_int_equal(g.d[FIXED].code, 1);
    for (const char *p = g.d[FIXED].out; (p = strstr(p, "DIFFERS  ")) != NULL; p++)
        assert_true(strncmp(p, "DIFFERS  extensions", 19) == 0 ||
                    strncmp(p, "DIFFERS  encrypted bytes", 24) == 0);
    expect(g.d[FIXED].out, "DIFFERS  extensions (type/len)");
    expect(g.d[FIXED].out, "DIFFERS  encrypted bytes");
    const char *v = line_with(g.d[FIXED].out, "verdict: distinguishable");
    assert_non_null(v);
    assert_non_null(strstr(v, "handshake extensions"));
    /* the good one: nothing gives it away, neither the probes nor the handshakes, but for
       what no FakeTLS answer can copy (s_server's four encrypted records: clients take one) */
    expect(g.d[GOOD].out, "verdict: indistinguishable");
    assert_int_equal(g.d[GOOD].code, 0);
    assert_null(strstr(g.d[GOOD].out, "DIFFERS"));
    expect(g.d[GOOD].out, "limit    encrypted records        4");
    expect(g.d[GOOD].out, "same     extensions (type/len)    43/2 51/36");
    expect(g.d[GOOD].out, "same     encrypted bytes");
    check_json(&g.d[JSON]);
    /* --strict: the limit counts */
    assert_int_equal(g.d[STRICT].code, 1);
    v = line_with(g.d[STRICT].out, "verdict: distinguishable (1)");
    assert_non_null(v);
    assert_non_null(strstr(v, "handshake encrypted records (front 4, proxy 1)"));
    /* another secret of the domain: the proxy fronts its hellos, and the probe says so */
    assert_int_equal(g.d[BADKEY].code, 1);
    expect(g.d[BADKEY].out, "DIFFERS  the proxy did not accept the secret");
    /* a PROXY protocol front: the direct probes carried the header (the site refuses a
       connection without one, and none came), so the site answered them as it answers
       tgproxy's fronted connections */
    expect(g.d[PP].out, "tgproxy probe: proxy 127.0.0.1:");
    assert_non_null(strstr(g.d[PP].out, "(PROXY v2 header), SNI"));
    expect(g.d[PP].out, "verdict: indistinguishable");
    assert_int_equal(g.d[PP].code, 0);
    unsigned with = 0, without = 0;
    pp_site_counts(&g.d[PP].pp, &with, &without, NULL);
    assert_int_equal(without, 0);
    assert_true(with >= 2 * 5); /* at least the handshakes, direct and fronted */
    /* a listener behind a balancer: the header goes to the proxy, which takes it */
    expect(g.d[PPL].out, "verdict: indistinguishable");
    assert_int_equal(g.d[PPL].code, 0);
    assert_null(strstr(g.d[PPL].out, "DIFFERS"));
}

/* The secret is refused on the command line (ps shows argv) and never echoed; nothing
   listening is exit 69; an IP front without a name for the SNI is a usage error. */
static void test_secret_and_errors(void **state)
{
    (void)state;
    struct deploy *d = &g.d[GOOD];
    char target[32];
    snprintf(target, sizeof target, "127.0.0.1:%u", (unsigned)d->port);
    char *argv[] = {TGPROXY, "probe", target, "--secret", g.secret_hex, NULL};
    unlink(d->log);
    pid_t pid = pproc_spawn_logged(argv, d->log);
    probe_wait(d, pid);
    assert_int_equal(d->code, 64);
    assert_non_null(strstr(d->out, "--secret-file"));
    assert_no_secret(d->out);
    /* nothing listens: 69, naming the proxy */
    int closed = tgtest_listen_port();
    char gone[32], front[32];
    snprintf(gone, sizeof gone, "127.0.0.1:%d", closed);
    snprintf(front, sizeof front, "127.0.0.1:%u", (unsigned)d->site.port);
    char *argv2[] = {TGPROXY, "probe", gone, "--front", front, "--sni", DOMAIN, NULL};
    unlink(d->log);
    probe_wait(d, pproc_spawn_logged(argv2, d->log));
    assert_int_equal(d->code, 69);
    assert_non_null(strstr(d->out, "cannot connect to the proxy"));
    /* an IP front without a name to send as SNI: a usage error */
    char *argv3[] = {TGPROXY, "probe", target, "--front", front, NULL};
    unlink(d->log);
    probe_wait(d, pproc_spawn_logged(argv3, d->log));
    assert_int_equal(d->code, 64);
}

/* cli_main with standard input fed from text; the exit code, stderr into err. */
static int cli_with_stdin(char **argv, int argc, const char *text, char *err, size_t cap)
{
    int pfd[2], saved = dup(0);
    assert_int_equal(pipe(pfd), 0);
    assert_int_equal(write(pfd[1], text, strlen(text)), (ssize_t)strlen(text));
    close(pfd[1]);
    dup2(pfd[0], 0);
    close(pfd[0]);
    FILE *out = tmpfile(), *ef = tmpfile();
    int code = cli_main(argc, argv, out, ef);
    dup2(saved, 0);
    close(saved);
    rewind(ef);
    size_t n = fread(err, 1, cap - 1, ef);
    err[n] = '\0';
    fclose(out);
    fclose(ef);
    return code;
}

/* --secret-file - reads the first line of standard input: a bad one is 65, a good one goes
   on to the probe (here a proxy that is not there: 69), and neither is echoed. */
static void test_secret_on_stdin(void **state)
{
    (void)state;
    int closed = tgtest_listen_port();
    char gone[32], err[1024], line[160];
    snprintf(gone, sizeof gone, "127.0.0.1:%d", closed);
    char *argv[] = {"tgproxy", "probe", gone, "--front", "127.0.0.1:1", "--secret-file", "-", NULL};
    assert_int_equal(cli_with_stdin(argv, 7, "ee-not-a-secret\n", err, sizeof err), 65);
    assert_null(strstr(err, "ee-not-a-secret"));
    snprintf(line, sizeof line, "%s\nsecond line\n", g.secret_hex);
    assert_int_equal(cli_with_stdin(argv, 7, line, err, sizeof err), 69);
    assert_non_null(strstr(err, "cannot connect"));
    assert_no_secret(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deployments),
        cmocka_unit_test(test_secret_and_errors),
        cmocka_unit_test(test_secret_on_stdin),
    };
    return tgtest_result(cmocka_run_group_tests(tests, setup, teardown));
}
