/*
 * End-to-end test of the built daemon: `tgproxy run CONFIG` with a temporary TOML config
 * whose [dcs] default points at the fake DC and whose fronting host is the local stand-in.
 * Checks a FakeTLS transfer, a fronted probe, exit status 0 on SIGTERM, and that the log
 * never contains the secret.
 */
#include "tgtest.h"

#include "core/str.h"
#include "proxy_client.h"
#include "proxy_fakedc.h"
#include "proxy_front.h"
#include "proxy_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/rand.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#define BINARY TGKIT_BINARY_DIR "/tgproxy"

struct daemon {
    pid_t pid;
    char dir[64], cfg[96], log[96];
};

static void write_config(const struct daemon *d, uint16_t port, const uint8_t key[16],
                         uint16_t dc_port, uint16_t front_port)
{
    char hex[33], dom[2 * 11 + 1];
    tg__hex_encode(hex, key, 16);
    tg__hex_encode(dom, "example.com", 11);
    FILE *f = fopen(d->cfg, "w");
    assert_non_null(f);
    fprintf(f,
            "bind-to = \"127.0.0.1:%u\"\n"
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
            port, hex, dom, dc_port, front_port);
    fclose(f);
}

static void spawn(struct daemon *d)
{
    char *argv[] = {BINARY, "run", d->cfg, NULL};
    d->pid = pproc_spawn_logged(argv, d->log);
    assert_true(d->pid > 0);
}

/* Bounded wait until the daemon accepts connections. */
static bool wait_listening(uint16_t port)
{
    for (int i = 0; i < 500; i++) {
        int fd = psock_connect(port, 1000);
        if (fd >= 0) {
            close(fd);
            return true;
        }
        usleep(10000);
    }
    return false;
}

static void test_daemon_end_to_end(void **state)
{
    (void)state;
    if (access(BINARY, X_OK) != 0) {
        skip(); /* the CLI is not built in this tree */
    }
    uint16_t dc_port = 0, front_port = 0, port = 0;
    struct fakedc *dc = fakedc_start(&dc_port);
    struct pfront *front = pfront_start(&front_port);
    assert_non_null(dc);
    assert_non_null(front);

    struct daemon d;
    snprintf(d.dir, sizeof d.dir, "/tmp/tgproxy-e2e-XXXXXX");
    assert_non_null(mkdtemp(d.dir));
    snprintf(d.cfg, sizeof d.cfg, "%s/tgproxy.toml", d.dir);
    snprintf(d.log, sizeof d.log, "%s/log", d.dir);
    uint8_t key[16];
    assert_int_equal(RAND_bytes(key, sizeof key), 1);
    write_config(&d, port, key, dc_port, front_port);
    spawn(&d); /* on port 0: the kernel's choice, read from the log (no free-port race) */
    assert_int_equal(pproc_log_wait(d.log, "listening on", 1), 0);
    assert_int_equal(pproc_log_port(d.log, "listening on", &port), 0);
    assert_true(wait_listening(port));

    struct pcli c;
    struct pcli_opts o = {
        .mode = PCLI_TLS, .key = key, .sni = "example.com", .dc = 2, .timeout_ms = 10000};
    assert_int_equal(pcli_connect(&c, port, &o), 0);
    assert_int_equal(pcli_echo(&c, 42, 3 << 20, 0), 0);
    pcli_close(&c);
    assert_int_equal(fakedc_counters(dc).headers_ok, 1);

    static const char probe_req[] = "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n";
    int fd = psock_connect(port, 10000);
    assert_int_equal(psock_write_all(fd, probe_req, sizeof probe_req - 1), 0);
    char banner[sizeof PFRONT_BANNER - 1];
    assert_int_equal(psock_read_all(fd, banner, sizeof banner), 0);
    assert_memory_equal(banner, PFRONT_BANNER, sizeof banner);
    close(fd);

    assert_int_equal(kill(d.pid, SIGTERM), 0);
    int status = 0;
    assert_int_equal(waitpid(d.pid, &status, 0), d.pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);

    size_t len = 0;
    char *log = tgtest_read_file(d.log, &len);
    assert_non_null(log);
    char hex[33];
    tg__hex_encode(hex, key, 16);
    assert_null(strstr(log, hex));               /* the secret never reaches the log */
    assert_non_null(strstr(log, "secret=main")); /* but the label of the connection does */
    free(log);
    unlink(d.cfg);
    unlink(d.log);
    rmdir(d.dir);
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
