/*
 * Issue 12's operator features over IPv6 loopback, through the built daemon (`tgproxy run`):
 * listener and metrics page on [::1], clients from ::1. One run walks them in turn:
 *   - an allowlist file holding ::1 lets the clients in; a secret's max-connections fronts
 *     the connection over it; the page (scraped over [::1] by the strict parser) counts
 *     both relays, the limit hit and the list's range;
 *   - SIGHUP with the allowlist moved to 2001:db8::/32: the next client from ::1 is closed at
 *     accept, unread, while both relays from before carry on byte for byte; the page counts
 *     the refusal and the applied reload;
 *   - SIGTERM with the relays closed: exit 0 after "every connection ended".
 */
#include "tgtest.h"

#include "core/str.h"
#include "daemon_fx.h"
#include "prom.h"
#include "proxy_client.h"
#include "proxy_fakedc.h"
#include "proxy_front.h"
#include "proxy_util.h"

#include <errno.h>
#include <math.h>
#include <openssl/rand.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PHASE (16 * 1024)

struct v6 {
    struct fakedc *dc;
    struct pfront *front;
    uint16_t dc_port, front_port, port, mport;
    struct dfx d; /* the daemon */
    char list[96], url[64];
    uint8_t key[16];
    char page[65536];
};

static void write_cfg(struct v6 *v)
{
    char hex[33], dom[23], text[1024];
    tg__hex_encode(hex, v->key, 16);
    tg__hex_encode(dom, "example.com", 11);
    snprintf(text, sizeof text,
             "bind-to = \"[::1]:0\"\nworkers = 2\nlog-level = \"info\"\n"
             "[dcs]\ndefault = [\"127.0.0.1:%u\"]\n"
             "[domain-fronting]\nhost = \"127.0.0.1\"\nport = %u\n"
             "[defense.tls-front]\nenabled = false\n" /* no probes to the stand-in front */
             "[secrets]\na = \"ee%s%s\"\n"
             "[limits.a]\nmax-connections = 2\n"
             "[defense.allowlist]\nenabled = true\nfiles = [\"%s\"]\n"
             "[stats.prometheus]\nenabled = true\nbind-to = \"[::1]:0\"\n",
             v->dc_port, v->front_port, hex, dom, v->list);
    dfx_write(v->d.cfg, text);
}

static void start(struct v6 *v)
{
    memset(v, 0, sizeof *v);
    v->dc = fakedc_start(&v->dc_port);
    v->front = pfront_start(&v->front_port);
    assert_non_null(v->dc);
    assert_non_null(v->front);
    dfx_init(&v->d, "v6");
    dfx_path(&v->d, "allow.netset", v->list, sizeof v->list);
    assert_int_equal(RAND_bytes(v->key, 16), 1);
    dfx_write(v->list, "# the test's clients\n::1\n");
    write_cfg(v);
    /* ports the kernel chose (bind-to :0), from the log: no free-port race with others */
    dfx_run(&v->d, DFX_TGPROXY);
    v->port = v->d.port;
    v->mport = dfx_log_port(&v->d, "[stats.prometheus] serving");
    snprintf(v->url, sizeof v->url, "http://[::1]:%u/", v->mport);
}

static void stop(struct v6 *v)
{
    assert_int_equal(dfx_stop(&v->d, SIGTERM), 0);
    assert_int_equal(dfx_log_count(&v->d, "every connection ended"), 1);
    char hex[33];
    tg__hex_encode(hex, v->key, 16);
    assert_int_equal(dfx_log_count(&v->d, hex), 0); /* no secret in the log */
    dfx_done(&v->d);
    fakedc_stop(v->dc);
    pfront_stop(v->front);
}

static struct pcli_opts opts(const struct v6 *v)
{
    return (struct pcli_opts){.mode = PCLI_TLS,
                              .key = v->key,
                              .sni = "example.com",
                              .dc = 2,
                              .timeout_ms = 10000,
                              .src_ip = "::1"};
}

/* Echo PHASE bytes of pstream(seed) from offset off and check every byte back. */
static int echo_phase(struct pcli *c, uint32_t seed, uint64_t off)
{
    uint8_t out[PHASE], in[PHASE];
    pstream_fill(seed, off, out, sizeof out);
    int rc = pcli_send(c, out, sizeof out);
    if (rc == 0)
        rc = pcli_recv_all(c, in, sizeof in);
    if (rc == 0 && pstream_check(seed, off, in, sizeof in) >= 0)
        rc = -EBADMSG;
    return rc;
}

static void open_relay(const struct v6 *v, struct pcli *c, uint32_t seed)
{
    struct pcli_opts o = opts(v);
    uint8_t cmd[FAKEDC_CMD_LEN];
    fakedc_cmd(cmd, "ECHO", seed, 2 * PHASE);
    assert_int_equal(pcli_connect(c, v->port, &o), 0);
    assert_int_equal(pcli_send(c, cmd, sizeof cmd), 0);
    assert_int_equal(echo_phase(c, seed, 0), 0);
}

static double sample(struct v6 *v, const char *key)
{
    double x = prom_sample(v->page, key);
    if (isnan(x))
        fail_msg("no sample %s in:%s", key, v->page);
    return x;
}

static void scrape(struct v6 *v)
{
    if (prom_scrape(v->url, "tgproxy", v->page, sizeof v->page) != 0)
        fail_msg("the page at %s fails the parser", v->url);
}

/* Limits and the allowlist on ::1, then a reload that takes ::1 off the list. */
static void test_ipv6_operator_features(void **state)
{
    (void)state;
    static struct v6 v;
    start(&v);
    struct pcli r[2];
    open_relay(&v, &r[0], 61);
    open_relay(&v, &r[1], 62);
    /* a third connection of secret a is over max-connections: fronted, as a bad handshake */
    size_t fronted = pfront_count(v.front);
    struct pcli c;
    struct pcli_opts o = opts(&v);
    o.timeout_ms = 3000;
    assert_int_not_equal(pcli_connect(&c, v.port, &o), 0);
    pcli_close(&c);
    assert_int_equal(pfront_wait(v.front, fronted, 1, 10000), 0);
    scrape(&v);
    assert_true(sample(&v, "tgproxy_secret_connections_active{secret=a}") == 2);
    assert_true(sample(&v, "tgproxy_limits_hit_total{limit=max_connections}") == 1);
    assert_true(sample(&v, "tgproxy_secret_limits_hit_total{secret=a}") == 1);
    assert_true(sample(&v, "tgproxy_acl_ranges{list=allowlist}") == 1);
    assert_true(sample(&v, "tgproxy_acl_refused_connections_total{list=allowlist}") == 0);

    /* ::1 leaves the allowlist: new clients from it are closed at accept, unread */
    dfx_write(v.list, "2001:db8::/32\n");
    dfx_signal(&v.d, SIGHUP);
    dfx_wait_log(&v.d, "reload: ", 1);
    assert_int_equal(dfx_log_count(&v.d, "reload refused"), 0);
    int fd = psock_connect_from("::1", v.port, 10000);
    assert_true(fd >= 0);
    uint8_t byte;
    ssize_t got = recv(fd, &byte, 1, 0); /* EOF or a reset, before we sent anything */
    assert_true(got <= 0);
    close(fd);
    /* the relays from before keep going */
    assert_int_equal(echo_phase(&r[0], 61, PHASE), 0);
    assert_int_equal(echo_phase(&r[1], 62, PHASE), 0);
    scrape(&v);
    assert_true(sample(&v, "tgproxy_acl_refused_connections_total{list=allowlist}") == 1);
    assert_true(sample(&v, "tgproxy_acl_ranges{list=allowlist}") == 1);
    assert_true(sample(&v, "tgproxy_config_reloads_total{result=ok}") == 1);
    assert_true(sample(&v, "tgproxy_config_last_reload_successful{}") == 1);
    assert_true(sample(&v, "tgproxy_secret_connections_active{secret=a}") == 2);
    assert_true(sample(&v, "tgproxy_handshakes_total{outcome=ok}") == 2);
    pcli_close(&r[0]);
    pcli_close(&r[1]);
    stop(&v);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ipv6_operator_features),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
