/*
 * `tgproxy doctor`'s middle-proxy checks (src/proxy/daemon/doctor_mp.c) against local
 * servers only: the documents and a "what is my IP" answer from an HTTPS server with its own
 * CA (tests/support/docsrv.h, whose Date header the test can set), tgproxy-fakemp behind a
 * NAT address it is told (--client-addr 203.0.113.7), and the fake DC.
 *
 *   - all good: each source downloads and parses, the clock agrees with the documents'
 *     server, the public address is the detected one, DC 2's middle proxy completes the
 *     handshake (the fake logs it);
 *   - a server clock an hour ahead: the clock fails;
 *   - another proxy secret: DC 2's handshake fails;
 *   - without public-ip-url: the socket's own address (loopback, not private) is reported,
 *     and the fake, which expects 203.0.113.7, refuses the keys;
 *   - the server gone: each source fails; with a stored copy in state-dir it is a warning.
 */
#include "tgtest.h"

#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "core/str.h"
#include "daemon_fx.h"
#include "docsrv.h"
#include "proxy/daemon/doctor.h"
#include "proxy_fakedc.h"
#include "proxy_fakemp.h"

#define OK   "\u2713 "
#define BAD  "\u2717 "
#define WARN "! "

struct env {
    struct fakedc *dc;
    uint16_t dc_port;
    struct docsrv *docs;
    struct dfx mp, d;
    char secret_path[128];
    uint8_t secret[128];
    char out[16384];
};

static void write_cfg(struct env *e, bool ip_url)
{
    char su[96], cu[96], iu[96];
    docsrv_url(e->docs, "/secret", su, sizeof su);
    docsrv_url(e->docs, "/config", cu, sizeof cu);
    docsrv_url(e->docs, "/ip", iu, sizeof iu);
    dfx_config(&e->d,
               "bind-to = \"127.0.0.1:0\"\n"
               "ad-tag = \"c0ffee00c0ffee00c0ffee00c0ffee00\"\n"
               "[secrets]\n"
               "dd = \"dd0123456789abcdef0123456789abcdef\"\n"
               "[dcs]\n"
               "default = [\"127.0.0.1:%u\"]\n"
               "[middle-proxy]\n"
               "proxy-secret = \"%s\"\n"
               "proxy-config = \"%s\"\n"
               "%s%s%s"
               "state-dir = \"%s\"\n",
               e->dc_port, su, cu, ip_url ? "public-ip-url = \"" : "", ip_url ? iu : "",
               ip_url ? "\"\n" : "", e->d.dir);
}

static int run(struct env *e)
{
    memset(e->out, 0, sizeof e->out);
    FILE *o = fmemopen(e->out, sizeof e->out - 1, "w");
    assert_non_null(o);
    int rc = doctor_run(e->d.cfg, o);
    fclose(o);
    char hex[257];
    tg__hex_encode(hex, e->secret, 16); /* never the proxy secret, not even its start */
    assert_null(strstr(e->out, hex));
    return rc;
}

static void expect(const struct env *e, const char *line)
{
    if (!strstr(e->out, line))
        fail_msg("expected \"%s\" in:\n%s", line, e->out);
}

static void serve_docs(struct env *e, int64_t date)
{
    char conf[128];
    int n = snprintf(conf, sizeof conf, "default 2;\nproxy_for 2 127.0.0.1:%u;\n", e->mp.port);
    docsrv_serve(e->docs, "/config", 200, conf, (size_t)n, date);
    docsrv_serve(e->docs, "/secret", 200, e->secret, sizeof e->secret, date);
    docsrv_serve(e->docs, "/ip", 200, "203.0.113.7\n", 12, date);
}

static void test_doctor_midproxy(void **state)
{
    (void)state;
    struct env e;
    memset(&e, 0, sizeof e);
    e.dc = fakedc_start(&e.dc_port);
    assert_non_null(e.dc);
    e.docs = docsrv_start();
    dfx_init(&e.mp, "docmp-fakemp");
    dfx_init(&e.d, "docmp");
    dfx_path(&e.mp, "proxy-secret", e.secret_path, sizeof e.secret_path);
    for (int i = 0; i < 128; i++)
        e.secret[i] = (uint8_t)(i * 31 + 11);
    pfmp_secret(e.secret_path, e.secret, sizeof e.secret);
    const char *nat[] = {"--client-addr", "203.0.113.7", NULL};
    pfmp_start(&e.mp, e.secret_path, e.dc_port, 0, nat);
    serve_docs(&e, 0);
    write_cfg(&e, true);
    char dc2[64];
    snprintf(dc2, sizeof dc2, OK "middle-proxy DC 2: 127.0.0.1:%u: handshake in ", e.mp.port);

    /* all good */
    run(&e);
    expect(&e, OK "middle-proxy proxy-secret: https://127.0.0.1:");
    expect(&e, "128 bytes (downloaded in ");
    expect(&e, OK "middle-proxy proxy-config: https://127.0.0.1:");
    expect(&e, ": 1 middle proxies");
    expect(&e, OK "middle-proxy public-ip-url: https://127.0.0.1:");
    expect(&e, "answers 203.0.113.7");
    /* in step with the server's clock: "0 s", or "1 s" when a second ticked between the
       Date header (whole seconds) and the reading here — both pass */
    expect(&e, OK "middle-proxy clock: ");
    expect(&e, OK "middle-proxy public address: 203.0.113.7 (from public-ip-url)");
    expect(&e, dc2);
    dfx_wait_log(&e.mp, "handshake ok from 127.0.0.1:", 1);

    /* the documents' server an hour ahead */
    serve_docs(&e, (int64_t)time(NULL) + 3600);
    run(&e);
    expect(&e, BAD "middle-proxy clock: ");
    expect(&e, " s behind the Date header of https://127.0.0.1:");
    expect(&e, "every handshake will be refused");
    serve_docs(&e, 0);

    /* another proxy secret than the middle proxy's */
    uint8_t other[128];
    for (int i = 0; i < 128; i++)
        other[i] = (uint8_t)(i * 7 + 1);
    docsrv_serve(e.docs, "/secret", 200, other, sizeof other, 0);
    run(&e);
    expect(&e, OK "middle-proxy proxy-secret: ");
    expect(&e, BAD "middle-proxy DC 2: 127.0.0.1:");
    serve_docs(&e, 0);

    /* no public-ip-url: the socket's own address, which the fake (behind NAT) refuses */
    write_cfg(&e, false);
    int failed = dfx_log_count(&e.mp, "handshake failed");
    run(&e);
    expect(&e, OK "middle-proxy public address: 127.0.0.1 (this server's own address");
    expect(&e, BAD "middle-proxy DC 2: 127.0.0.1:");
    expect(&e, "public address is wrong");
    dfx_wait_log(&e.mp, "handshake failed", failed + 1);
    write_cfg(&e, true);

    /* the server gone: failures; a stored copy of the secret turns that one into a warning */
    docsrv_stop(e.docs);
    e.docs = NULL;
    char path[160];
    dfx_path(&e.d, "proxy-secret", path, sizeof path);
    run(&e);
    expect(&e, BAD "middle-proxy proxy-secret: https://127.0.0.1:");
    expect(&e, "(and no stored copy in state-dir)");
    expect(&e, BAD "middle-proxy handshakes: not tried: no proxy secret");
    pfmp_secret(path, e.secret, sizeof e.secret);
    run(&e);
    expect(&e, WARN "middle-proxy proxy-secret: https://127.0.0.1:");
    expect(&e, "`run` would start from the stored copy");
    expect(&e, BAD "middle-proxy proxy-config: https://127.0.0.1:");

    dfx_done(&e.d);
    assert_int_equal(dfx_stop(&e.mp, SIGTERM), 0);
    dfx_done(&e.mp);
    fakedc_stop(e.dc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_doctor_midproxy),
    };
    return tgtest_result(cmocka_run_group_tests(tests, NULL, NULL));
}
