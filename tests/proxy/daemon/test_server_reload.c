/*
 * Reload and drain of the built daemon (`tgproxy run CONFIG`), driven by real signals:
 *   - SIGHUP while 100 relays run: the file drops their secret and adds another; every relay
 *     goes on byte for byte, the new secret works at once, the removed one is fronted;
 *   - SIGHUP with a broken file: refused with file:line in the log, the old config serves;
 *   - SIGHUP changing [defense.tls-front] enabled and state-file: a warning for each
 *     (restart-only), the rest of the file applies;
 *   - SIGTERM drain: relays that finish within drain-timeout end cleanly and the exit status
 *     is 0; relays still open at the timeout are closed; a second signal ends at once.
 *   - in-process (server_reload): [dcs], the fronting host and the idle timeout change for
 *     new connections while a relay from before the reload keeps its DC and timeout.
 * The fake DC echoes; the fronting host is the local stand-in.
 */
#include "tgtest.h"

#include "core/alloc.h"
#include "core/str.h"
#include "daemon_fx.h"
#include "proxy_client.h"
#include "proxy_fakedc.h"
#include "proxy_front.h"
#include "proxy_harness.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NRELAYS 100
#define PHASE   (32 * 1024) /* bytes echoed per relay before and after the reload */

struct env {
    struct fakedc *dc;
    struct pfront *front;
    uint16_t dc_port, front_port;
    struct dfx d; /* the daemon */
    uint8_t key_a[16], key_b[16];
};

static void env_start(struct env *e)
{
    memset(e, 0, sizeof *e);
    e->dc = fakedc_start(&e->dc_port);
    e->front = pfront_start(&e->front_port);
    assert_non_null(e->dc);
    assert_non_null(e->front);
    dfx_init(&e->d, "reload");
    assert_int_equal(RAND_bytes(e->key_a, 16), 1);
    assert_int_equal(RAND_bytes(e->key_b, 16), 1);
}

static void env_stop(struct env *e)
{
    dfx_done(&e->d);
    fakedc_stop(e->dc);
    pfront_stop(e->front);
}

/* The config: secret "a" and/or "b" (ee, example.com), then `tail` verbatim (a broken
   line, say). [secrets] comes first after the fixed keys, so tail's line number is known. */
static void write_cfg(const struct env *e, bool a, bool b, const char *extra, const char *tail)
{
    char ha[33], hb[33], dom[23];
    tg__hex_encode(ha, e->key_a, 16);
    tg__hex_encode(hb, e->key_b, 16);
    tg__hex_encode(dom, "example.com", 11);
    char text[2048];
    size_t n = (size_t)snprintf(
        text, sizeof text,
        "bind-to = \"127.0.0.1:0\"\n" /* the kernel's choice: no race for a free port */
        "workers = 2\n"
        "log-level = \"info\"\n"
        "%s\n"
        "[dcs]\n"
        "default = [\"127.0.0.1:%u\"]\n"
        "[domain-fronting]\n"
        "host = \"127.0.0.1\"\n"
        "port = %u\n"
        "[network.timeout]\n"
        "handshake = \"2s\"\n"
        "[secrets]\n",
        extra ? extra : "", e->dc_port, e->front_port);
    if (a)
        n += (size_t)snprintf(text + n, sizeof text - n, "a = \"ee%s%s\"\n", ha, dom);
    if (b)
        n += (size_t)snprintf(text + n, sizeof text - n, "b = \"ee%s%s\"\n", hb, dom);
    assert_true((size_t)snprintf(text + n, sizeof text - n, "%s", tail ? tail : "") <
                sizeof text - n);
    dfx_write(e->d.cfg, text); /* whole, 0600: it holds secrets */
}

/* Start `tgproxy run` and wait for its "listening" line (not by connecting: a probe would
   be one more connection, fronted, in the counts a drain logs). */
static void spawn(struct env *e)
{
    dfx_run(&e->d, DFX_TGPROXY);
}

static struct pcli_opts opts(const uint8_t *key)
{
    return (struct pcli_opts){
        .mode = PCLI_TLS, .key = key, .sni = "example.com", .dc = 2, .timeout_ms = 10000};
}

/* A fresh connection with key relays an echo. */
static int try_echo(const struct env *e, const uint8_t *key, uint32_t seed)
{
    struct pcli c;
    struct pcli_opts o = opts(key);
    int rc = pcli_connect(&c, e->d.port, &o);
    if (rc == 0)
        rc = pcli_echo(&c, seed, 100000, 0);
    pcli_close(&c);
    return rc;
}

/* A fresh connection with key is fronted: its handshake fails, the site sees it. */
static void assert_fronted(const struct env *e, const uint8_t *key)
{
    size_t before = pfront_count(e->front);
    struct pcli c;
    struct pcli_opts o = opts(key);
    o.timeout_ms = 3000;
    assert_int_not_equal(pcli_connect(&c, e->d.port, &o), 0);
    pcli_close(&c);
    assert_int_equal(pfront_wait(e->front, before, 1, 5000), 0);
}

/* ---- 100 relays across a SIGHUP ---- */

struct relay {
    const struct env *e;
    pthread_barrier_t *bar;
    uint32_t seed;
    int rc;
};

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

static void *relay_main(void *arg)
{
    struct relay *r = arg;
    struct pcli c;
    struct pcli_opts o = opts(r->e->key_a);
    uint8_t cmd[FAKEDC_CMD_LEN];
    fakedc_cmd(cmd, "ECHO", r->seed, 2 * PHASE);
    r->rc = pcli_connect(&c, r->e->d.port, &o);
    if (r->rc == 0)
        r->rc = pcli_send(&c, cmd, sizeof cmd);
    if (r->rc == 0)
        r->rc = echo_phase(&c, r->seed, 0);
    pthread_barrier_wait(r->bar); /* every relay is up and has moved bytes */
    pthread_barrier_wait(r->bar); /* the reload was applied */
    if (r->rc == 0)
        r->rc = echo_phase(&c, r->seed, PHASE);
    pcli_close(&c);
    return NULL;
}

static void test_sighup_with_relays(void **state)
{
    (void)state;
    struct env e;
    env_start(&e);
    write_cfg(&e, true, false, NULL, NULL);
    spawn(&e);

    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, NRELAYS + 1);
    static struct relay r[NRELAYS];
    pthread_t th[NRELAYS];
    for (int i = 0; i < NRELAYS; i++) {
        r[i] = (struct relay){.e = &e, .bar = &bar, .seed = 1000 + (uint32_t)i};
        assert_int_equal(pthread_create(&th[i], NULL, relay_main, &r[i]), 0);
    }
    pthread_barrier_wait(&bar);
    assert_fronted(&e, e.key_b); /* not configured yet */
    /* drop "a" (the relays' own secret), add "b" */
    write_cfg(&e, false, true, NULL, NULL);
    dfx_signal(&e.d, SIGHUP);
    dfx_wait_log(&e.d, "reload: ", 1);
    assert_int_equal(dfx_log_count(&e.d, "reload refused"), 0);
    assert_int_equal(try_echo(&e, e.key_b, 8), 0); /* the new secret, at once */
    assert_fronted(&e, e.key_a);                   /* the removed one, for new connections */
    pthread_barrier_wait(&bar);
    for (int i = 0; i < NRELAYS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(r[i].rc, 0);
    }
    pthread_barrier_destroy(&bar);
    assert_int_equal(fakedc_counters(e.dc).headers_ok, NRELAYS + 1);

    /* a file that does not load: refused with its position, the old config serves on */
    write_cfg(&e, false, true, NULL, "c = \"not a secret\"\n");
    dfx_signal(&e.d, SIGHUP);
    dfx_wait_log(&e.d, "reload refused", 1);
    assert_int_equal(dfx_log_count(&e.d, "tgproxy.toml:14:"), 1);
    assert_int_equal(try_echo(&e, e.key_b, 9), 0);
    assert_fronted(&e, e.key_a);

    assert_int_equal(dfx_stop(&e.d, SIGTERM), 0);
    char hex[33];
    tg__hex_encode(hex, e.key_b, 16);
    assert_int_equal(dfx_log_count(&e.d, hex), 0); /* no secret reaches the log */
    env_stop(&e);
}

/* ---- drain (SIGTERM) ---- */

/* A relay in echo mode (ECHO, then PHASE bytes checked). */
static void open_relay(const struct env *e, struct pcli *c, uint32_t seed)
{
    struct pcli_opts o = opts(e->key_a);
    uint8_t cmd[FAKEDC_CMD_LEN];
    fakedc_cmd(cmd, "ECHO", seed, 4 * PHASE);
    assert_int_equal(pcli_connect(c, e->d.port, &o), 0);
    assert_int_equal(pcli_send(c, cmd, sizeof cmd), 0);
    assert_int_equal(echo_phase(c, seed, 0), 0);
}

/* The daemon with secret "a" and the extra top-level line, one relay open per seed. */
static void start_with_relays(struct env *e, const char *extra, struct pcli *c, size_t n,
                              uint32_t seed)
{
    env_start(e);
    write_cfg(e, true, false, extra, NULL);
    spawn(e);
    for (size_t i = 0; i < n; i++)
        open_relay(e, &c[i], seed + (uint32_t)i);
}

/* A connection to *port is refused (no listener any more). */
static bool refused(void *port)
{
    int fd = psock_connect(*(const uint16_t *)port, 1000);
    if (fd >= 0)
        close(fd);
    return fd < 0;
}

/* Relays that end within drain-timeout: they keep relaying after SIGTERM, no new
   connection is accepted, and the process exits 0 once they are gone. */
static void test_drain_relays_finish(void **state)
{
    (void)state;
    struct env e;
    struct pcli c[3];
    start_with_relays(&e, "drain-timeout = \"1h\"", c, 3, 50);
    dfx_signal(&e.d, SIGTERM);
    dfx_wait_log(&e.d, "accepting stopped, 3 connection(s) open", 1);
    assert_true(tgtest_wait_until(refused, &e.d.port, 5000)); /* every listener closed */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(echo_phase(&c[i], 50 + (uint32_t)i, PHASE), 0);
        pcli_close(&c[i]);
    }
    assert_int_equal(dfx_wait_exit(&e.d), 0);
    assert_int_equal(dfx_log_count(&e.d, "every connection ended"), 1);
    assert_int_equal(dfx_log_count(&e.d, "reason=shutdown"), 0);
    env_stop(&e);
}

/* A relay still open at drain-timeout is closed then; the exit status is still 0. */
static void test_drain_timeout_closes(void **state)
{
    (void)state;
    struct env e;
    struct pcli c;
    start_with_relays(&e, "drain-timeout = \"1s\"", &c, 1, 60);
    dfx_signal(&e.d, SIGTERM);
    assert_int_equal(dfx_wait_exit(&e.d), 0); /* on its own, after the timeout */
    uint8_t b;
    assert_true(pcli_recv(&c, &b, 1) <= 0); /* the relay was closed */
    pcli_close(&c);
    assert_int_equal(dfx_log_count(&e.d, "drain-timeout reached: closing 1 connection(s)"), 1);
    assert_int_equal(dfx_log_count(&e.d, "reason=shutdown"), 1);
    env_stop(&e);
}

/* A second signal during the drain closes everything at once. */
static void test_drain_second_signal(void **state)
{
    (void)state;
    struct env e;
    struct pcli c;
    start_with_relays(&e, "drain-timeout = \"1h\"", &c, 1, 70);
    dfx_signal(&e.d, SIGINT);
    dfx_wait_log(&e.d, "accepting stopped", 1);
    dfx_signal(&e.d, SIGTERM);
    assert_int_equal(dfx_wait_exit(&e.d), 0);
    pcli_close(&c);
    assert_int_equal(dfx_log_count(&e.d, "again: closing 1 connection(s) now"), 1);
    env_stop(&e);
}

/* simple-run has no file: SIGHUP says so and serving goes on; SIGTERM still exits 0. */
static void test_sighup_simple_run(void **state)
{
    (void)state;
    struct env e;
    env_start(&e);
    char hex[33], dom[23], listen[32], secret[128];
    tg__hex_encode(hex, e.key_a, 16);
    tg__hex_encode(dom, "example.com", 11);
    char text[80];
    snprintf(text, sizeof text, "ee%s%s\n", hex, dom);
    dfx_write(e.d.cfg, text); /* the secret file, in place of the config */
    snprintf(listen, sizeof listen, "127.0.0.1:0");
    snprintf(secret, sizeof secret, "--secret-file=%s", e.d.cfg);
    char *argv[] = {DFX_TGPROXY, "simple-run", listen, secret, "--log-level", "info", NULL};
    dfx_start(&e.d, argv);
    dfx_signal(&e.d, SIGHUP);
    dfx_wait_log(&e.d, "SIGHUP: nothing to re-read", 1);
    struct pcli c;
    struct pcli_opts o = opts(e.key_a);
    assert_int_equal(pcli_connect(&c, e.d.port, &o), 0); /* handshakes still pass */
    pcli_close(&c);
    assert_int_equal(dfx_stop(&e.d, SIGTERM), 0);
    env_stop(&e);
}

/* A SIGHUP with a new secret pasted where it does not belong: as a bare line, as a label,
   in base64 as a bare line. Each reload is refused with its position, and the log holds
   no piece of the new secret (not in the scrub list: it never loaded). */
static void test_sighup_secret_not_logged(void **state)
{
    (void)state;
    struct env e;
    env_start(&e);
    write_cfg(&e, true, false, NULL, NULL);
    e.d.quiet = true; /* a failure must not print the log it found a secret in */
    spawn(&e);
    char hex[33], dom[23], b64[64], tail[256];
    tg__hex_encode(hex, e.key_b, 16);
    tg__hex_encode(dom, "example.com", 11);
    uint8_t bin[17] = {0xdd};
    memcpy(bin + 1, e.key_b, 16);
    assert_true(tg__b64_encode(b64, sizeof b64, bin, sizeof bin, TG__B64_URL | TG__B64_NOPAD) !=
                TG__BAD_LEN);
    for (int i = 0; i < 3; i++) {
        if (i == 0)
            snprintf(tail, sizeof tail, "ee%s%s\n", hex, dom);
        else if (i == 1)
            snprintf(tail, sizeof tail, "%s = \"ee%s%s\"\n", hex, hex, dom);
        else
            snprintf(tail, sizeof tail, "%s\n", b64);
        write_cfg(&e, true, false, NULL, tail);
        dfx_signal(&e.d, SIGHUP);
        dfx_wait_log(&e.d, "reload refused", i + 1);
    }
    assert_int_equal(dfx_log_count(&e.d, "tgproxy.toml:14:"), 3); /* after "a" */
    assert_int_equal(try_echo(&e, e.key_a, 12), 0);
    assert_int_equal(dfx_stop(&e.d, SIGTERM), 0);
    char *log = dfx_log(&e.d);
    assert_non_null(log);
    size_t len = strlen(log);
    for (size_t k = 0; k + 8 <= 32; k++)
        if (memmem(log, len, hex + k, 8))
            fail_msg("the log holds a piece of the new key");
    for (size_t k = 0; k + 8 <= strlen(b64); k++)
        if (memmem(log, len, b64 + k, 8))
            fail_msg("the log holds a piece of the new secret's base64");
    free(log);
    env_stop(&e);
}

/* SIGHUP with odd things at the config path. A file others can read is applied with the
   warning a start gives. A FIFO is refused at once: opened blocking, open() would hold the
   main thread until a writer came, and SIGTERM after it would go unhandled. */
static void test_sighup_mode_and_fifo(void **state)
{
    (void)state;
    struct env e;
    env_start(&e);
    write_cfg(&e, true, false, NULL, NULL);
    spawn(&e);
    assert_int_equal(chmod(e.d.cfg, 0644), 0);
    dfx_signal(&e.d, SIGHUP);
    dfx_wait_log(&e.d, "reload: ", 1);
    assert_int_equal(
        dfx_log_count(&e.d, "tgproxy.toml is readable by other users and holds secrets"), 1);

    assert_int_equal(unlink(e.d.cfg), 0);
    assert_int_equal(mkfifo(e.d.cfg, 0600), 0);
    dfx_signal(&e.d, SIGHUP);
    dfx_wait_log(&e.d, "reload refused", 1);
    assert_int_equal(dfx_log_count(&e.d, "tgproxy.toml: a FIFO, expected a regular file"), 1);
    assert_int_equal(try_echo(&e, e.key_a, 11), 0); /* the running configuration serves */
    assert_int_equal(dfx_stop(&e.d, SIGTERM), 0);   /* and the main thread still hears */
    env_stop(&e);
}

/* The loader's warnings come once per run: the start prints them, a reload of the same
   file does not repeat them, and a key that is new in the file is still reported once. */
static void test_sighup_warns_once(void **state)
{
    (void)state;
    struct env e;
    env_start(&e);
    write_cfg(&e, true, false, "auto-update = true\ncloak-port = 443", NULL);
    spawn(&e);
    for (int i = 1; i <= 2; i++) {
        dfx_signal(&e.d, SIGHUP);
        dfx_wait_log(&e.d, "reload: ", i);
    }
    assert_int_equal(dfx_log_count(&e.d, "auto-update: accepted for mtg compatibility"), 1);
    assert_int_equal(dfx_log_count(&e.d, "cloak-port: deprecated mtg spelling"), 1);
    write_cfg(&e, true, false, "auto-update = true\ncloak-port = 443\ntcp-buffer = \"4kb\"", NULL);
    dfx_signal(&e.d, SIGHUP);
    dfx_wait_log(&e.d, "reload: ", 3);
    assert_int_equal(dfx_log_count(&e.d, "tcp-buffer: accepted for mtg compatibility"), 1);
    assert_int_equal(dfx_log_count(&e.d, "auto-update: accepted for mtg compatibility"), 1);
    assert_int_equal(dfx_stop(&e.d, SIGTERM), 0);
    env_stop(&e);
}

/* [defense.tls-front] enabled and state-file are restart-only: a reload that changes them
   says so for each and applies the rest of the file (the new secret works). */
static void test_sighup_tls_front_restart_only(void **state)
{
    (void)state;
    struct env e;
    env_start(&e);
    char tail[512], other[300];
    snprintf(tail, sizeof tail, "[defense.tls-front]\nenabled = false\nstate-file = \"%s/tf-a\"\n",
             e.d.dir);
    write_cfg(&e, true, false, NULL, tail);
    spawn(&e);
    snprintf(other, sizeof other, "[defense.tls-front]\nenabled = true\nstate-file = \"%s/tf-b\"\n",
             e.d.dir);
    write_cfg(&e, true, true, NULL, other);
    dfx_signal(&e.d, SIGHUP);
    dfx_wait_log(&e.d, " applied (", 1);
    assert_int_equal(dfx_log_count(&e.d, "reload: [defense.tls-front] enabled changed in "), 1);
    assert_int_equal(dfx_log_count(&e.d, "reload: [defense.tls-front] state-file changed in "), 1);
    assert_int_equal(try_echo(&e, e.key_b, 12), 0);          /* the rest of the file applied */
    assert_int_equal(dfx_log_count(&e.d, "tls-front: "), 0); /* still off: nothing probed */
    assert_int_equal(dfx_stop(&e.d, SIGTERM), 0);
    env_stop(&e);
}

/* ---- in-process: what a reload changes for new connections only ---- */

/* h's config with [dcs] default -> 127.0.0.1:dc_port, the fronting host on front_port and
   an idle timeout of idle_ms. */
static void moved_cfg(const struct pharness *h, struct config *cfg, uint16_t dc_port,
                      uint16_t front_port, uint32_t idle_ms)
{
    char err[CONFIG_ERR_MAX], addr[32];
    assert_int_equal(pharness_reload_base(h, cfg), 0);
    cfg->dcs = tg__calloc(1, sizeof *cfg->dcs); /* config_cleanup frees it */
    assert_non_null(cfg->dcs);
    cfg->ndcs = 1;
    cfg->dcs[0].is_default = true;
    cfg->dcs[0].naddrs = 1;
    snprintf(addr, sizeof addr, "127.0.0.1:%u", dc_port);
    assert_int_equal(
        value_hostport_parse(addr, strlen(addr), &cfg->dcs[0].addrs[0], err, sizeof err), 0);
    cfg->fronting = h->cfg.fronting;
    cfg->fronting.port = front_port;
    value_set_port(&cfg->fronting.addr, front_port);
    cfg->timeout = h->cfg.timeout;
    cfg->timeout.idle_ms = idle_ms;
}

static void test_reload_dc_fronting_timeouts(void **state)
{
    (void)state;
    struct pharness h;
    assert_int_equal(pharness_start(&h, &(struct pharness_opts){.ee = true}), 0);
    struct pcli a, b;
    struct pcli_opts o = pharness_client(&h, PCLI_TLS);
    uint8_t cmd[FAKEDC_CMD_LEN];
    fakedc_cmd(cmd, "ECHO", 81, 2 * PHASE);
    assert_int_equal(pcli_connect(&a, h.port, &o), 0);
    assert_int_equal(pcli_send(&a, cmd, sizeof cmd), 0);
    assert_int_equal(echo_phase(&a, 81, 0), 0);

    uint16_t dc2_port = 0, front2_port = 0;
    struct fakedc *dc2 = fakedc_start(&dc2_port);
    struct pfront *front2 = pfront_start(&front2_port);
    assert_non_null(dc2);
    assert_non_null(front2);
    struct config cfg;
    char err[CONFIG_ERR_MAX];
    moved_cfg(&h, &cfg, dc2_port, front2_port, 1000);
    assert_int_equal(server_reload(h.srv, &cfg, err, sizeof err), 0);
    config_cleanup(&cfg);

    /* a new relay goes to the new DC */
    assert_int_equal(pcli_connect(&b, h.port, &o), 0);
    assert_int_equal(pcli_echo(&b, 82, 10000, 0), 0);
    assert_int_equal(fakedc_counters(dc2).headers_ok, 1);
    assert_int_equal(fakedc_counters(h.dc).headers_ok, 1);
    /* a failed handshake goes to the new fronting host */
    static const char probe[] = "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n";
    int fd = psock_connect(h.port, 10000);
    assert_int_equal(psock_write_all(fd, probe, sizeof probe - 1), 0);
    assert_int_equal(pfront_wait(front2, 0, sizeof probe - 1, 10000), 0);
    close(fd);
    assert_int_equal(pfront_count(h.front), 0);
    /* the new relay has the new idle timeout (1 s): quiet, it is closed */
    uint8_t byte;
    assert_true(pcli_recv(&b, &byte, 1) == 0); /* bounded by the client's 10 s timeout */
    pcli_close(&b);
    struct stats st;
    server_stats(h.srv, &st);
    assert_int_equal(st.idle_timeout, 1);
    /* the relay from before the reload still reaches the old DC, under its old timeout */
    assert_int_equal(echo_phase(&a, 81, PHASE), 0);
    pcli_close(&a);
    assert_int_equal(fakedc_counters(dc2).headers_ok, 1);
    pharness_stop(&h);
    fakedc_stop(dc2);
    pfront_stop(front2);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sighup_with_relays),
        cmocka_unit_test(test_sighup_tls_front_restart_only),
        cmocka_unit_test(test_drain_relays_finish),
        cmocka_unit_test(test_drain_timeout_closes),
        cmocka_unit_test(test_drain_second_signal),
        cmocka_unit_test(test_sighup_simple_run),
        cmocka_unit_test(test_sighup_mode_and_fifo),
        cmocka_unit_test(test_sighup_secret_not_logged),
        cmocka_unit_test(test_sighup_warns_once),
        cmocka_unit_test(test_reload_dc_fronting_timeouts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
