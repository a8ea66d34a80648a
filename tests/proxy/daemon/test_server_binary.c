/*
 * End-to-end test of the built daemon: `tgproxy run CONFIG` with a temporary TOML config
 * whose [dcs] default points at the fake DC and whose fronting host is the local stand-in.
 * Checks a FakeTLS transfer, a fronted probe, exit status 0 on SIGTERM, and that the log
 * never contains the secret.
 */
#include "tgtest.h"

#include "core/str.h"
#include "daemon_fx.h"
#include "proxy_client.h"
#include "proxy_expect.h"
#include "proxy_fakedc.h"
#include "proxy_front.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/rand.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static void write_config(const struct dfx *d, const uint8_t key[16], uint16_t dc_port,
                         uint16_t front_port)
{
    char hex[33], dom[2 * 11 + 1];
    tg__hex_encode(hex, key, 16);
    tg__hex_encode(dom, "example.com", 11);
    dfx_config(d,
               "bind-to = \"127.0.0.1:0\"\n" /* the kernel's choice, read from the log */
               "workers = 2\n"
               "log-level = \"info\"\n"
               "[secrets]\n"
               "main = \"ee%s%s\"\n"
               "[dcs]\n"
               "default = [\"127.0.0.1:%u\"]\n"
               "[domain-fronting]\n"
               "host = \"127.0.0.1\"\n"
               "port = %u\n"
               "[network.timeout]\n"
               "handshake = \"2s\"\n",
               hex, dom, dc_port, front_port);
}

static void test_daemon_end_to_end(void **state)
{
    (void)state;
    uint16_t dc_port = 0, front_port = 0;
    struct fakedc *dc = fakedc_start(&dc_port);
    struct pfront *front = pfront_start(&front_port);
    assert_non_null(dc);
    assert_non_null(front);

    struct dfx d;
    dfx_init(&d, "e2e");
    uint8_t key[16];
    assert_int_equal(RAND_bytes(key, sizeof key), 1);
    write_config(&d, key, dc_port, front_port);
    dfx_run(&d, DFX_TGPROXY);

    struct pcli c;
    struct pcli_opts o = {
        .mode = PCLI_TLS, .key = key, .sni = "example.com", .dc = 2, .timeout_ms = 10000};
    assert_int_equal(pcli_connect(&c, d.port, &o), 0);
    assert_int_equal(pcli_echo(&c, 42, 3 << 20, 0), 0);
    pcli_close(&c);
    assert_int_equal(fakedc_counters(dc).headers_ok, 1);

    static const char probe_req[] = "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n";
    pexpect_fronted(front, d.port, NULL, probe_req, sizeof probe_req - 1, PEXPECT_NEXT);

    assert_int_equal(dfx_stop(&d, SIGTERM), 0);
    char *log = dfx_log(&d);
    assert_non_null(log);
    char hex[33];
    tg__hex_encode(hex, key, 16);
    assert_null(strstr(log, hex));               /* the secret never reaches the log */
    assert_non_null(strstr(log, "secret=main")); /* but the label of the connection does */
    free(log);
    dfx_done(&d);
    fakedc_stop(dc);
    pfront_stop(front);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_daemon_end_to_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
